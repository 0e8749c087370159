/*
 * egress-exec - run one untrusted worker confined (docs/sandbox.md, docs/workunit.md).
 *
 *   egress-exec run      simple command (`-- CMD ...`) or WorkUnit (`--workunit`)
 *   egress-exec check    admission only
 *   egress-exec doctor   what this machine can enforce
 *   egress-exec cleanup  leftovers of runs that were killed
 *   egress-exec version
 *
 * Each subcommand takes --help. Exit codes: enum exec_exit (executor/sandbox.h).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "executor/commands.h"
#include "executor/sandbox.h"
#include "executor/supcaps.h"

static int cmd_version(int argc, char **argv);

/* The subcommand table: one row per subcommand, dispatched by name. New subcommands add
 * a row here and a prototype in executor/commands.h. */
static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "run",     cmd_run,     "run a command or a WorkUnit in the sandbox" },
	{ "check",   cmd_check,   "admission only: would this WorkUnit be admitted?" },
	{ "doctor",  cmd_doctor,  "what this machine can enforce, with fix hints" },
	{ "cleanup", cmd_cleanup, "remove leftovers of killed runs (cgroups, veths, mounts)" },
	{ "version", cmd_version, "print the version" },
};

static int
cmd_version(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--help") == 0) {
		printf("usage: egress-exec version\n");
		return EXEC_EXIT_OK;
	}
	printf("egress-exec %s\n", EGRESS_VERSION);
	return EXEC_EXIT_OK;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: egress-exec COMMAND [--help] [ARGS...]\n"
	    "       egress-exec --help | --version\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
}

int
main(int argc, char **argv)
{
	char err[256];

	/* First of all: a closed 0, 1 or 2 must not become a socket or a file (util.h). */
	if (stdio_ensure(true) != 0) {
		fprintf(stderr, "egress-exec: standard input, output or error is closed and /dev/null "
		    "cannot be opened: %s\n", strerror(errno));
		return 1;
	}
	log_init("egress-exec", 0);
	/* SIGCHLD ignored by whoever started us (inherited across exec) would make the kernel
	 * reap our children itself: every wait for the worker, the private egressd and the
	 * collector would lose its status. Default disposition, always. */
	{
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_DFL;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGCHLD, &sa, NULL) != 0) {
			fprintf(stderr, "egress-exec: cannot reset SIGCHLD\n");
			return EXEC_EXIT_INTERNAL;
		}
	}
	/* First thing: give up the capabilities no step of any subcommand needs (supcaps.h,
	 * docs/SECURITY.md), so neither egress-exec nor what it executes can use them. */
	if (supcaps_limit(err, sizeof(err)) != 0) {
		fprintf(stderr, "egress-exec: %s\n", err);
		return EXEC_EXIT_INTERNAL;
	}
	/* Options before the command only ('+': a subcommand's options are its own). */
	{
		static const struct option longopts[] = {
			{ "help", no_argument, NULL, 'h' },
			{ "version", no_argument, NULL, 'V' },
			{ NULL, 0, NULL, 0 },
		};
		int ch;

		while ((ch = getopt_long(argc, argv, "+hV", longopts, NULL)) != -1) {
			switch (ch) {
			case 'h':
				usage(stdout);
				return EXEC_EXIT_OK;
			case 'V':
				return cmd_version(1, argv);
			default:
				usage(stderr);
				return EXEC_EXIT_USAGE;
			}
		}
		argc -= optind - 1;     /* argv[1] is the command, as the table expects */
		argv += optind - 1;
	}
	if (argc < 2) {
		usage(stderr);
		return EXEC_EXIT_USAGE;
	}
	if (strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return EXEC_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "egress-exec: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return EXEC_EXIT_USAGE;
}
