/*
 * main.c - egressd: command line, signals (through libevent), the event loop.
 *
 *   egressd -c FILE [-t] [-d] [-f]
 *
 * -t checks the configuration and exits (file:line errors on stderr). Signals are libevent
 * events, so their handlers run on the loop thread like everything else: SIGHUP reloads
 * (all-or-nothing), SIGTERM/SIGINT drain, SIGUSR1 reopens the decision log.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/log.h"
#include "egressd/config.h"
#include "egressd/route.h"
#include "egressd/daemon.h"
#include "egressd/dlog.h"

static void
usage(void)
{
	fprintf(stderr, "usage: egressd -c FILE [-t] [-d] [-f]\n"
	    "  -c FILE  configuration (see docs/egressd.md)\n"
	    "  -t       check the configuration and exit\n"
	    "  -d       debug logging\n"
	    "  -f       stay in the foreground, log to stderr\n");
	exit(1);
}

static void
on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;
	char err[1024];

	log_info("SIGHUP: reloading %s", d->cfg->path);
	if (daemon_reload(d, err, sizeof(err)) != 0)
		log_warnx("reload failed, running configuration kept: %s", err);
}

static void
on_term(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	if (d->draining) {
		log_info("second termination signal: closing now");
		event_base_loopexit(d->base, NULL);
		return;
	}
	daemon_drain(d);
}

static void
on_usr1(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	log_info("SIGUSR1: reopening the decision log");
	dlog_reopen(d->dlog);
}

/* Two sockets per tunnel plus pipes: ask for the hard limit, say so when it is low. */
static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			log_warn("setrlimit(RLIMIT_NOFILE)");
	}
}

static void
daemonize(void)
{
	pid_t pid = fork();
	int fd;

	if (pid < 0)
		fatal("fork");
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		fatal("setsid");
	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
}

int
main(int argc, char **argv)
{
	const char *path = NULL;
	bool check = false, debug = false, fg = false;
	struct egressd_config *cfg;
	struct event_base *base;
	struct event *ev_hup, *ev_term, *ev_int, *ev_usr1;
	struct daemon d;
	char err[2048];
	int ch;

	while ((ch = getopt(argc, argv, "c:tdf")) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 't':
			check = true;
			break;
		case 'd':
			debug = true;
			break;
		case 'f':
			fg = true;
			break;
		default:
			usage();
		}
	}
	if (path == NULL || optind != argc)
		usage();
	log_init("egressd", !(fg || check));
	log_set_level(debug ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO);

	cfg = config_load(path, err, sizeof(err));
	if (cfg == NULL) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (check) {
		char rerr[512];
		if (route_config_check(&cfg->route, rerr, sizeof(rerr)) != 0) {
			fprintf(stderr, "%s: route: %s\n", path, rerr);
			config_free(cfg);
			return 1;
		}
		printf("%s: ok (%zu listener(s), %zu grant(s))\n", path, cfg->nlisteners,
		    cfg->ngrants);
		config_free(cfg);
		return 0;
	}
	/* Writes to a closed peer must be errors, not a process-killing signal. */
	signal(SIGPIPE, SIG_IGN);
	/* A decision-log write past RLIMIT_FSIZE must fail with EFBIG (the log then refuses
	 * hops with audit_unavailable), not kill the daemon. */
	signal(SIGXFSZ, SIG_IGN);
	raise_nofile();
	if (!fg)
		daemonize();

	base = event_base_new();
	if (base == NULL)
		fatalx("event_base_new failed");
	if (daemon_start(&d, base, cfg, err, sizeof(err)) != 0) {
		log_warnx("start-up failed: %s", err);
		daemon_stop(&d);
		event_base_free(base);
		return 1;
	}
	ev_hup = evsignal_new(base, SIGHUP, on_hup, &d);
	ev_term = evsignal_new(base, SIGTERM, on_term, &d);
	ev_int = evsignal_new(base, SIGINT, on_term, &d);
	ev_usr1 = evsignal_new(base, SIGUSR1, on_usr1, &d);
	if (ev_hup == NULL || ev_term == NULL || ev_int == NULL || ev_usr1 == NULL)
		fatalx("evsignal_new failed");
	evsignal_add(ev_hup, NULL);
	evsignal_add(ev_term, NULL);
	evsignal_add(ev_int, NULL);
	evsignal_add(ev_usr1, NULL);

	event_base_dispatch(base);

	log_info("egressd exiting");
	event_free(ev_hup);
	event_free(ev_term);
	event_free(ev_int);
	event_free(ev_usr1);
	daemon_stop(&d);
	event_base_free(base);
	return 0;
}
