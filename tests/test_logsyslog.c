/* test_logsyslog.c - the syslog mirror of the decision log (egressd/dlog_syslog.c):
 * RFC 5424 framing with structured data and escaping; every record written by the real
 * writer arrives as one datagram carrying the file's exact line; an absent collector
 * never disturbs the log and its loss is recorded there; bad targets and settings that do
 * not belong together are refused; octet-counting frames. */
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
#include "egressd/metrics.h"
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

static struct dlog_syslog *
open_target(const char *t, char *err, size_t errlen)
{
	struct dlog_syslog_config c = { .target = t };

	return dlog_syslog_open(&c, err, errlen);
}

static void
test_targets(void **state)
{
	static const char *const bad[] = { "tcp:127.0.0.1:514", "udp:localhost:514",
	    "unix:relative/path", "udp:127.0.0.1", "", "unix:", "tcp://localhost:514",
	    "tls://127.0.0.1", "tcp://127.0.0.1:0x10", "udp://127.0.0.1:514" };
	char err[256];
	struct dlog_syslog *s;
	struct dlog_syslog_stats st;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_null(open_target(bad[i], err, sizeof(err)));
		assert_non_null(strstr(err, "log_syslog"));
	}
	s = open_target("udp:127.0.0.1:9", err, sizeof(err));
	assert_non_null(s);
	dlog_syslog_stats(s, &st);
	assert_string_equal(st.transport, "udp");
	dlog_syslog_close(s);
	s = open_target("udp:[::1]:9", err, sizeof(err));
	assert_non_null(s);
	dlog_syslog_close(s);
}

/* The settings that belong together, as config.c and egressd -t check them. */
static void
test_check(void **state)
{
	struct dlog_syslog_config c;
	char err[512];
	enum dlog_syslog_kind k;
	struct sockaddr_storage ss;
	socklen_t sl;

	(void)state;
	assert_int_equal(dlog_syslog_target_parse("tcp://198.51.100.20:514", &k, &ss, &sl, err,
	    sizeof(err)), 0);
	assert_int_equal(k, DLOG_SYSLOG_TCP);
	assert_int_equal(dlog_syslog_target_parse("tls://[2001:db8::1]:6514", &k, &ss, &sl,
	    err, sizeof(err)), 0);
	assert_int_equal(k, DLOG_SYSLOG_TLS);
	assert_int_equal(ss.ss_family, AF_INET6);

	/* tls:// without a CA is refused, naming the setting */
	c = (struct dlog_syslog_config){ .target = "tls://198.51.100.20:6514" };
	assert_int_equal(dlog_syslog_check(&c, false, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "log_syslog_ca"));
	/* a client certificate without its key */
	c.ca = "/nonexistent/ca.pem";
	c.cert = "/nonexistent/cert.pem";
	assert_int_equal(dlog_syslog_check(&c, false, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "log_syslog_key"));
	/* syntax alone passes; loading the (missing) files does not */
	c.key = "/nonexistent/key.pem";
	assert_int_equal(dlog_syslog_check(&c, false, err, sizeof(err)), 0);
	assert_int_equal(dlog_syslog_check(&c, true, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "log_syslog_ca /nonexistent/ca.pem"));
	/* TLS settings on a plain target, a spool on datagrams, a spool out of range */
	c = (struct dlog_syslog_config){ .target = "tcp://198.51.100.20:514", .ca = "/x" };
	assert_int_equal(dlog_syslog_check(&c, false, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "tls://"));
	c = (struct dlog_syslog_config){ .target = "udp:198.51.100.20:514", .spool_max = 1 << 20 };
	assert_int_equal(dlog_syslog_check(&c, false, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "log_syslog_spool"));
	c = (struct dlog_syslog_config){ .target = "tcp://198.51.100.20:514", .spool_max = 100 };
	assert_int_equal(dlog_syslog_check(&c, false, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "log_syslog_spool"));
	c.spool_max = EGRESS_SYSLOG_SPOOL_MIN;
	assert_int_equal(dlog_syslog_check(&c, false, err, sizeof(err)), 0);
	/* a name with a scheme or a port in it is not a name */
	c = (struct dlog_syslog_config){ .target = "tls://198.51.100.20:6514", .ca = "/ca",
		.name = "logs.example.com:6514" };
	assert_int_equal(dlog_syslog_check(&c, false, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "log_syslog_name"));
}

/* RFC 6587 octet counting: "LEN SP MSG", LEN in decimal octets of MSG. */
static void
test_frame(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(dlog_syslog_frame("<110>1 x", 8, out, sizeof(out)), 10);
	assert_memory_equal(out, "8 <110>1 x", 10);
	assert_int_equal(dlog_syslog_frame("0123456789", 10, out, sizeof(out)), 13);
	assert_memory_equal(out, "10 0123456789", 13);
	/* exactly fitting, one short, empty, over the message bound */
	assert_int_equal(dlog_syslog_frame("abcd", 4, out, 6), 6);
	assert_int_equal(dlog_syslog_frame("abcd", 4, out, 5), -1);
	assert_int_equal(dlog_syslog_frame("", 0, out, sizeof(out)), -1);
	assert_int_equal(dlog_syslog_frame(out, DLOG_SYSLOG_MSG_MAX + 1, out, sizeof(out)), -1);
	{
		/* the largest message: its frame fits DLOG_SYSLOG_FRAME_MAX */
		char *msg = malloc(DLOG_SYSLOG_MSG_MAX), *fr = malloc(DLOG_SYSLOG_FRAME_MAX);
		char head[16];
		int h;

		assert_non_null(msg);
		assert_non_null(fr);
		memset(msg, 'm', DLOG_SYSLOG_MSG_MAX);
		h = snprintf(head, sizeof(head), "%d ", DLOG_SYSLOG_MSG_MAX);
		assert_int_equal(dlog_syslog_frame(msg, DLOG_SYSLOG_MSG_MAX, fr,
		    DLOG_SYSLOG_FRAME_MAX), h + DLOG_SYSLOG_MSG_MAX);
		assert_memory_equal(fr, head, (size_t)h);
		free(msg);
		free(fr);
	}
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
	{
		/* the failed send is counted, and shown in the metrics */
		struct metrics_stats m;
		struct dlog_syslog_stats st;
		size_t mlen;
		char *txt;

		assert_true(dlog_syslog_status(d, &st));
		assert_string_equal(st.transport, "unix");
		assert_int_equal(st.dropped, 1);
		assert_int_equal(st.sent, 0);
		memset(&m, 0, sizeof(m));
		m.dlog = d;
		txt = metrics_render(&m, NULL, &mlen);
		assert_non_null(txt);
		assert_non_null(strstr(txt, "\negressd_syslog_dropped_total{transport=\"unix\"} 1\n"));
		assert_non_null(strstr(txt, "\negressd_syslog_loss_episodes_total 1\n"));
		assert_null(strstr(txt, "egressd_syslog_spool_bytes"));   /* streams only */
		free(txt);
	}
	dlog_close(d);
	{
		struct dlog_verify v;

		dlog_verify_init(&v, false);
		assert_int_equal(dlog_verify_file(&v, logp), DLOG_INTACT);
		assert_int_equal(v.records, 5);   /* 3 + 1 + its syslog_loss record */
	}
	/* the collector was absent: the loss is recorded in the log itself, at close */
	{
		FILE *lf = fopen(logp, "r");
		char l[4096], last[4096] = "";

		assert_non_null(lf);
		while (fgets(l, sizeof(l), lf) != NULL)
			snprintf(last, sizeof(last), "%s", l);
		fclose(lf);
		assert_non_null(strstr(last, "\"event\":\"syslog_loss\",\"dropped\":1,"));
		assert_non_null(strstr(last, "\"collector\":\"unix:"));
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
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_frame),
		cmocka_unit_test(test_mirror_end_to_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
