/*
 * test_egressctl.c - the egressctl binary: log verify exit codes, and status / grant list
 * against a fake control socket (a unix socket in a temporary directory, served by a
 * thread of this test). Needs EGRESS_BINARY_DIR (set by ctest); skipped without it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "egressd/dlog.h"

static char ctl[512];
static char dir[64];

static int
run(const char *args, char *out, size_t outlen)
{
	char cmd[2048];
	FILE *p;
	size_t n = 0;
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", ctl, args);
	p = popen(cmd, "r");
	assert_non_null(p);
	if (out != NULL) {
		n = fread(out, 1, outlen - 1, p);
		out[n] = '\0';
	} else {
		char sink[4096];

		while (fread(sink, 1, sizeof(sink), p) > 0)
			;
	}
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int
group_setup(void **state)
{
	const char *bin = getenv("EGRESS_BINARY_DIR");
	struct stat st;

	(void)state;
	if (bin == NULL)
		return 0;
	snprintf(ctl, sizeof(ctl), "%s/egressd/egressctl", bin);
	if (stat(ctl, &st) != 0)
		ctl[0] = '\0';
	snprintf(dir, sizeof(dir), "/tmp/test_egressctl.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	return 0;
}

static int
group_teardown(void **state)
{
	char cmd[128];

	(void)state;
	if (dir[0] != '\0') {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cleanup of %s failed\n", dir);
	}
	return 0;
}

static void
make_log(const char *path, int n)
{
	struct event_base *base = event_base_new();
	struct dlog_config cfg = { .path = path, .sync = DLOG_SYNC_NONE };
	char err[256];
	struct dlog *d = dlog_open(base, &cfg, err, sizeof(err));

	assert_non_null(d);
	for (int i = 0; i < n; i++)
		assert_int_equal(dlog_append_sync(d, "decision",
		    json_pack("{s:s,s:s,s:i}", "principal", "run-1", "verdict", "allow", "n", i),
		    2000), 0);
	dlog_close(d);
	event_base_free(base);
}

static void
test_log_verify_exit_codes(void **state)
{
	char path[128], args[512], out[4096];
	FILE *f;

	(void)state;
	if (ctl[0] == '\0')
		skip();
	snprintf(path, sizeof(path), "%s/d.jsonl", dir);
	make_log(path, 4);
	snprintf(args, sizeof(args), "log verify %s", path);
	assert_int_equal(run(args, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "intact: 4 record(s)"));
	/* a record appended by hand (not chained) breaks it */
	f = fopen(path, "a");
	fputs("{\"v\":1}\n", f);
	fclose(f);
	assert_int_equal(run(args, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "BROKEN"));
	assert_non_null(strstr(out, ":5: malformed"));
	/* usage; no FILE reads the default log (--log), which must exist */
	assert_int_equal(run("-l /nonexistent/egress/d.jsonl log verify", out, sizeof(out)), 2);
	assert_non_null(strstr(out, "/nonexistent/egress/d.jsonl"));
	snprintf(args, sizeof(args), "--log %s log verify", path);
	assert_int_equal(run(args, out, sizeof(out)), 1);   /* the broken log above */
	assert_non_null(strstr(out, "BROKEN"));
	assert_int_equal(run("", NULL, 0), 2);
	assert_int_equal(run("no-such-command", NULL, 0), 2);
	/* a missing file is a failure, not usage */
	snprintf(args, sizeof(args), "log verify %s/missing.jsonl", dir);
	assert_int_equal(run(args, NULL, 0), 1);
}

/* --help and --version exit 0 on stdout; --help after any command is that command's
 * usage, never a file named "--help" or a control request. */
static void
test_help_version(void **state)
{
	static const char *const cmds[][2] = {
		{ "log verify", "usage: egressctl log verify" },
		{ "log query --principal run-1", "usage: egressctl log query" },
		{ "log summary --format html", "usage: egressctl log summary" },
		{ "log export", "usage: egressctl log export" },
		{ "status", "usage: egressctl status" },
		{ "grant list", "usage: egressctl grant list" },
		{ "grant show", "usage: egressctl grant show" },
		{ "grant revoke x", "usage: egressctl grant revoke" },
		{ "reload", "usage: egressctl reload" },
		{ "route", "usage: egressctl route" },
	};
	char args[512], out[8192];

	(void)state;
	if (ctl[0] == '\0')
		skip();
	assert_int_equal(run("--version", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "egressctl " EGRESS_VERSION));
	assert_int_equal(run("--help", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "usage: egressctl"));
	for (size_t i = 0; i < EGRESS_NELEM(cmds); i++) {
		/* a socket that does not exist: reaching it would fail, not print usage */
		snprintf(args, sizeof(args), "-s %s/none.sock %s --help", dir, cmds[i][0]);
		assert_int_equal(run(args, out, sizeof(out)), 0);
		assert_non_null(strstr(out, cmds[i][1]));
		assert_null(strstr(out, "cannot connect"));
	}
	assert_int_equal(run("log --help", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "usage: egressctl log summary"));
	assert_int_equal(run("help grant", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "usage: egressctl grant revoke"));
	/* after "--", --help is an argument again (a file of that name) */
	snprintf(args, sizeof(args), "log verify -- --help");
	assert_int_equal(run(args, out, sizeof(out)), 1);
	assert_null(strstr(out, "usage:"));
	assert_int_equal(run("log frobnicate", NULL, 0), 2);
}

/* ---- fake control socket ---- */

struct fake {
	int lfd;
	int nreplies;
	const char *replies[8];
	char requests[8][512];
};

static void *
fake_main(void *arg)
{
	struct fake *fk = arg;

	for (int i = 0; i < fk->nreplies; i++) {
		int c = accept(fk->lfd, NULL, NULL);
		size_t off = 0;

		if (c < 0)
			break;
		while (off < sizeof(fk->requests[i]) - 1) {
			ssize_t r = read(c, fk->requests[i] + off, 1);

			if (r <= 0 || fk->requests[i][off] == '\n')
				break;
			off++;
		}
		fk->requests[i][off] = '\0';
		if (write(c, fk->replies[i], strlen(fk->replies[i])) < 0)
			fprintf(stderr, "fake control: write: %s\n", strerror(errno));
		close(c);
	}
	return NULL;
}

static void
test_control_commands(void **state)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct fake fk = { .nreplies = 6, .replies = {
	    "{\"ok\":true,\"version\":\"0.1.0\",\"pid\":42,\"uptime_s\":7,\"grants\":1,"
	    "\"connections\":3,\"log\":{\"path\":\"/x/d.jsonl\",\"seq\":9,\"writable\":false}}\n",
	    "{\"ok\":true,\"grants\":[{\"grant_id\":\"abab\",\"principal\":\"run-1\","
	    "\"listen\":\"169.254.77.1:3128\",\"interface\":\"eg1-h\",\"connections\":2}]}\n",
	    "{\"ok\":false,\"error\":\"unknown_grant\",\"message\":\"no such grant\"}\n",
	    "not json\n",
	    "{\"ok\":true,\"grants\":[{\"grant_id\":\"abab\",\"principal\":\"run-1\","
	    "\"listen\":\"169.254.77.1:3128\",\"interface\":\"eg1-h\",\"connections\":2,"
	    "\"bytes\":5,\"grant\":{\"pinning\":\"required\",\"allow\":"
	    "[\"https://api.example.com\"],\"limits\":{\"connections\":4,\"bytes\":0,"
	    "\"lifetime_s\":600}}}]}\n",
	    "{\"ok\":true,\"grants\":[]}\n" } };
	char args[512], out[4096], sock[128];
	pthread_t th;

	(void)state;
	if (ctl[0] == '\0')
		skip();
	snprintf(sock, sizeof(sock), "%s/ctl.sock", dir);
	memcpy(sun.sun_path, sock, strlen(sock) + 1);
	fk.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fk.lfd >= 0);
	assert_int_equal(bind(fk.lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(fk.lfd, 4), 0);
	assert_int_equal(pthread_create(&th, NULL, fake_main, &fk), 0);

	snprintf(args, sizeof(args), "-s %s status", sock);
	assert_int_equal(run(args, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "pid 42"));
	assert_non_null(strstr(out, "seq 9"));
	assert_non_null(strstr(out, "NOT WRITABLE"));
	snprintf(args, sizeof(args), "-s %s grant list", sock);
	assert_int_equal(run(args, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "run-1"));
	assert_non_null(strstr(out, "169.254.77.1:3128"));
	snprintf(args, sizeof(args), "-s %s grant revoke abab", sock);
	assert_int_equal(run(args, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "unknown_grant"));
	snprintf(args, sizeof(args), "-s %s status", sock);
	assert_int_equal(run(args, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "malformed reply"));
	/* grant show: the whole authority set of one grant; an unknown id fails */
	snprintf(args, sizeof(args), "-s %s grant show abab", sock);
	assert_int_equal(run(args, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "allow      https://api.example.com"));
	assert_non_null(strstr(out, "pinning    required"));
	assert_non_null(strstr(out, "lifetime 600 s"));
	snprintf(args, sizeof(args), "-s %s grant show abab", sock);
	assert_int_equal(run(args, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "no live grant"));
	pthread_join(th, NULL);
	close(fk.lfd);
	assert_string_equal(fk.requests[0], "{\"op\":\"status\"}");
	assert_string_equal(fk.requests[1], "{\"op\":\"grant.list\"}");
	assert_non_null(strstr(fk.requests[2], "\"grant_id\":\"abab\""));
	assert_non_null(strstr(fk.requests[2], "\"op\":\"grant.revoke\""));

	/* nobody listening: failure, not usage */
	snprintf(args, sizeof(args), "-s %s/none.sock status", dir);
	assert_int_equal(run(args, NULL, 0), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log_verify_exit_codes),
		cmocka_unit_test(test_help_version),
		cmocka_unit_test(test_control_commands),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
