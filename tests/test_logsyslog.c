/* test_logsyslog.c - the syslog mirror of the decision log (egressd/dlog_syslog.c):
 * RFC 5424 framing with structured data and escaping; every record written by the real
 * writer arrives as one datagram carrying the file's exact line; an absent collector
 * never disturbs the log; bad targets are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "egressd/dlog.h"
#include "egressd/dlog_syslog.h"
#include "common/dlogchain.h"

static void
test_format(void **state)
{
	static const char line[] = "{\"v\":1,\"time\":\"2026-11-30T09:00:00.000000Z\",\"seq\":7,"
	    "\"event\":\"decision\",\"principal\":\"a\\\"b]c\\\\d\\n\",\"dest\":\"x.example.com:443\","
	    "\"verdict\":\"deny\",\"reason\":\"not_granted\",\"route\":\"direct\","
	    "\"attested\":true,\"prev\":\"00\",\"hash\":\"ab\"}";
	char out[4096];
	int n;

	(void)state;
	n = dlog_syslog_format(line, sizeof(line) - 1, "host1", 42, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	/* facility 13 (log audit) * 8 + notice (5) for a deny */
	{
		static const char head[] = "<109>1 2026-11-30T09:00:00.000000Z host1 egressd 42 "
		    "decision [egress@32473 seq=\"7\" hash=\"ab\" ";

		assert_memory_equal(out, head, sizeof(head) - 1);
	}
	/* '"', ']' and '\' escaped; the newline (decoded from JSON) replaced */
	assert_non_null(strstr(out, "principal=\"a\\\"b\\]c\\\\d?\""));
	assert_non_null(strstr(out, "verdict=\"deny\" reason=\"not_granted\" "
	    "dest=\"x.example.com:443\" route=\"direct\" attested=\"true\"] {"));
	/* MSG is the original line, byte for byte */
	assert_int_equal(strcmp(out + n - (sizeof(line) - 1), line), 0);

	/* an allow is info (6); a close has no verdict */
	{
		static const char close[] = "{\"v\":1,\"time\":\"2026-11-30T09:00:01.000000Z\","
		    "\"seq\":8,\"event\":\"close\",\"principal\":\"p\",\"bytes_up\":1,"
		    "\"prev\":\"00\",\"hash\":\"cd\"}";

		n = dlog_syslog_format(close, sizeof(close) - 1, "h", 1, out, sizeof(out));
		assert_true(n > 0);
		assert_memory_equal(out, "<110>1 ", 7);
	}
	/* not JSON, no event, does not fit */
	assert_int_equal(dlog_syslog_format("nope", 4, "h", 1, out, sizeof(out)), -1);
	assert_int_equal(dlog_syslog_format("{\"time\":\"t\"}", 12, "h", 1, out, sizeof(out)),
	    -1);
	assert_int_equal(dlog_syslog_format(line, sizeof(line) - 1, "h", 1, out, 100), -1);
}

static void
test_targets(void **state)
{
	static const char *const bad[] = { "tcp:127.0.0.1:514", "udp:localhost:514",
	    "unix:relative/path", "udp:127.0.0.1", "", "unix:" };
	char err[256];
	struct dlog_syslog *s;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_null(dlog_syslog_open(bad[i], err, sizeof(err)));
		assert_non_null(strstr(err, "log_syslog"));
	}
	s = dlog_syslog_open("udp:127.0.0.1:9", err, sizeof(err));
	assert_non_null(s);
	dlog_syslog_close(s);
	s = dlog_syslog_open("udp:[::1]:9", err, sizeof(err));
	assert_non_null(s);
	dlog_syslog_close(s);
}

static void
test_mirror_end_to_end(void **state)
{
	char dir[64], sock[128], logp[128], target[160], err[256], buf[DLOG_SYSLOG_MSG_MAX];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct event_base *base = event_base_new();
	struct dlog_config cfg = { .sync = DLOG_SYNC_NONE };
	struct dlog *d;
	char lines[3][2048];
	FILE *fp;
	int fd, got = 0;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_logsyslog.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/log.sock", dir);
	snprintf(logp, sizeof(logp), "%s/decisions.jsonl", dir);
	snprintf(target, sizeof(target), "unix:%s", sock);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	memcpy(sun.sun_path, sock, strlen(sock) + 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);

	cfg.path = logp;
	cfg.syslog_target = target;
	d = dlog_open(base, &cfg, err, sizeof(err));
	assert_non_null(d);
	for (int i = 0; i < 3; i++)
		assert_int_equal(dlog_append_sync(d, "decision", json_pack("{s:s,s:s,s:s,s:i}",
		    "principal", "run-1", "verdict", i == 1 ? "deny" : "allow", "dest",
		    "api.example.com:443", "n", i), 5000), 0);
	dlog_close(d);

	fp = fopen(logp, "r");
	assert_non_null(fp);
	for (int i = 0; i < 3; i++) {
		assert_non_null(fgets(lines[i], sizeof(lines[i]), fp));
		lines[i][strcspn(lines[i], "\n")] = '\0';
	}
	fclose(fp);
	while (got < 3) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;
		const char *msg;

		assert_int_equal(poll(&p, 1, 2000), 1);
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		assert_true(n > 0);
		buf[n] = '\0';
		assert_memory_equal(buf, got == 1 ? "<109>1 " : "<110>1 ", 7);
		msg = strstr(buf, "] {");
		assert_non_null(msg);
		assert_string_equal(msg + 2, lines[got]);   /* the file's exact line */
		got++;
	}
	close(fd);

	/* no collector: the log is written all the same */
	unlink(sock);
	d = dlog_open(base, &cfg, err, sizeof(err));
	assert_non_null(d);
	assert_int_equal(dlog_append_sync(d, "decision", json_pack("{s:s}", "principal", "p"),
	    5000), 0);
	assert_true(dlog_writable(d));
	dlog_close(d);
	{
		struct dlog_verify v;

		dlog_verify_init(&v, false);
		assert_int_equal(dlog_verify_file(&v, logp), DLOG_INTACT);
		assert_int_equal(v.records, 4);
	}
	/* a bad target fails dlog_open (egressd refuses to start) */
	cfg.syslog_target = "tcp:127.0.0.1:514";
	assert_null(dlog_open(base, &cfg, err, sizeof(err)));
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		assert_int_equal(system(cmd), 0);
	}
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_targets),
		cmocka_unit_test(test_mirror_end_to_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
