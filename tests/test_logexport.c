/* test_logexport.c - Squid native access.log export: every line round-trips through a
 * simple parser of the Squid format (the way SIEM parsers split it), with the expected
 * values; result-code mapping; hostile targets cannot split or add lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/ctl/logexport.h"
#include "egressd/ctl/logread.h"
#include "logfixture.h"

/* One parsed access.log line: the 10 whitespace-separated fields of Squid's native
 * format "time.ms elapsed client code/status bytes method URL user hier/peer type". */
struct squid_line {
	long long sec, ms, elapsed, bytes;
	char client[128], code[64], method[16], url[2048], user[128], hier[256], peer[256],
	    type[64];
	int status;
};

static bool
take(const char **p, char *out, size_t cap)
{
	size_t n = 0;

	while (**p == ' ')
		(*p)++;
	while (**p != '\0' && **p != ' ' && **p != '\n') {
		if (n + 1 >= cap)
			return false;
		out[n++] = *(*p)++;
	}
	out[n] = '\0';
	return n > 0;
}

static bool
to_ll(const char *s, long long *v)
{
	char *end;

	*v = strtoll(s, &end, 10);
	return end != s && *end == '\0';
}

/* Returns true for a well-formed line (no trailing junk). */
static bool
squid_parse(const char *line, struct squid_line *l)
{
	char t[64], e[32], cs[64], b[32], hp[256], *dot, *sl;
	const char *p = line;
	long long st;

	memset(l, 0, sizeof(*l));
	if (!take(&p, t, sizeof(t)) || !take(&p, e, sizeof(e)) ||
	    !take(&p, l->client, sizeof(l->client)) || !take(&p, cs, sizeof(cs)) ||
	    !take(&p, b, sizeof(b)) || !take(&p, l->method, sizeof(l->method)) ||
	    !take(&p, l->url, sizeof(l->url)) || !take(&p, l->user, sizeof(l->user)) ||
	    !take(&p, hp, sizeof(hp)) || !take(&p, l->type, sizeof(l->type)))
		return false;
	while (*p == ' ')
		p++;
	if (*p != '\0')
		return false;
	if ((dot = strchr(t, '.')) == NULL || strlen(dot + 1) != 3)
		return false;
	*dot = '\0';
	if (!to_ll(t, &l->sec) || !to_ll(dot + 1, &l->ms) || !to_ll(e, &l->elapsed) ||
	    !to_ll(b, &l->bytes))
		return false;
	if ((sl = strchr(cs, '/')) == NULL)
		return false;
	*sl = '\0';
	snprintf(l->code, sizeof(l->code), "%s", cs);
	if (!to_ll(sl + 1, &st) || strlen(sl + 1) != 3)
		return false;
	l->status = (int)st;
	if ((sl = strchr(hp, '/')) == NULL)
		return false;
	*sl = '\0';
	snprintf(l->hier, sizeof(l->hier), "%s", hp);
	snprintf(l->peer, sizeof(l->peer), "%s", sl + 1);
	return true;
}

/* Export a log held in memory; returns the output (caller frees). */
static char *
export(const char *buf, size_t len)
{
	char *out = NULL;
	size_t olen = 0;
	FILE *in = fmemopen((void *)(uintptr_t)buf, len, "r"), *o = open_memstream(&out, &olen);
	struct logexport *x = logexport_new(o);
	struct logread r;
	struct logrec *rec;

	assert_non_null(x);
	assert_int_equal(logread_open_stream(&r, in, "mem"), 0);
	while (logread_next(&r, &rec) == 1)
		assert_int_equal(logexport_add(x, rec), 0);
	logread_close(&r);
	logexport_finish(x);
	fclose(in);
	fclose(o);
	return out;
}

static void
test_round_trip(void **state)
{
	char *buf = NULL, *out;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct lchain c;
	struct squid_line l[8];
	int n = 0;

	(void)state;
	lchain_init(&c, f);
	lchain_sample(&c);
	fclose(f);
	out = export(buf, len);
	for (char *line = out, *nl; *line != '\0'; line = nl + 1) {
		nl = strchr(line, '\n');
		assert_non_null(nl);
		*nl = '\0';
		assert_true(n < 8);
		assert_true(squid_parse(line, &l[n]));
		n++;
	}
	/* 6 hops: 3 denials at their decision, 2 tunnels at their close, 1 GET without a
	 * close (written last) */
	assert_int_equal(n, 6);

	/* seq 2: denied CONNECT, private_address -> TCP_DENIED/403 */
	assert_int_equal(l[0].sec, 1796029205);
	assert_int_equal(l[0].ms, 0);
	assert_int_equal(l[0].elapsed, 1);           /* resolve 1200 us + connect 300 us */
	assert_string_equal(l[0].client, "169.254.77.2");
	assert_string_equal(l[0].code, "TCP_DENIED");
	assert_int_equal(l[0].status, 403);
	assert_int_equal(l[0].bytes, 0);
	assert_string_equal(l[0].method, "CONNECT");
	assert_string_equal(l[0].url, "internal.example.com:443");
	assert_string_equal(l[0].user, "run-a");
	assert_string_equal(l[0].hier, "HIER_NONE");
	assert_string_equal(l[0].peer, "-");
	assert_string_equal(l[0].type, "-");

	/* seq 1 + close seq 3: tunnel, time of the close, bytes to the client */
	assert_int_equal(l[1].sec, 1796029210);
	assert_int_equal(l[1].ms, 500);
	assert_int_equal(l[1].elapsed, 10500);
	assert_string_equal(l[1].code, "TCP_TUNNEL");
	assert_int_equal(l[1].status, 200);
	assert_int_equal(l[1].bytes, 88311);
	assert_string_equal(l[1].url, "api.example.com:443");
	assert_string_equal(l[1].hier, "HIER_DIRECT");
	assert_string_equal(l[1].peer, "198.51.100.10");

	/* seq 5: not_granted */
	assert_string_equal(l[2].code, "TCP_DENIED");
	assert_string_equal(l[2].user, "run-b");
	assert_string_equal(l[2].url, "evil.example.net:443");

	/* seq 4 + close 6: through the upstream proxy */
	assert_string_equal(l[3].code, "TCP_TUNNEL");
	assert_int_equal(l[3].bytes, 2000);
	assert_int_equal(l[3].elapsed, 120000);
	assert_string_equal(l[3].hier, "FIRSTUP_PARENT");
	assert_string_equal(l[3].peer, "198.51.100.3");

	/* seq 8 */
	assert_string_equal(l[4].code, "TCP_DENIED");
	assert_int_equal(l[4].sec, 1796034600);

	/* seq 7: GET, never closed in this log */
	assert_string_equal(l[5].code, "TCP_MISS");
	assert_int_equal(l[5].status, 200);
	assert_string_equal(l[5].method, "GET");
	assert_string_equal(l[5].url, "http://mirror.example.com/debian/a.deb");
	assert_int_equal(l[5].bytes, 0);
	assert_string_equal(l[5].peer, "198.51.100.11");
	free(out);
	free(buf);
}

static void
test_result_mapping(void **state)
{
	const char *code;
	int st;

	(void)state;
	logexport_result("allow", "CONNECT", "allowed", &code, &st);
	assert_string_equal(code, "TCP_TUNNEL");
	assert_int_equal(st, 200);
	logexport_result("allow", "GET", "allowed", &code, &st);
	assert_string_equal(code, "TCP_MISS");
	assert_int_equal(st, 200);
	logexport_result("deny", "CONNECT", "not_granted", &code, &st);
	assert_string_equal(code, "TCP_DENIED");
	assert_int_equal(st, 403);
	logexport_result("deny", "GET", "malformed_request", &code, &st);
	assert_string_equal(code, "TCP_DENIED");
	assert_int_equal(st, 400);
	logexport_result("deny", NULL, "head_too_large", &code, &st);
	assert_string_equal(code, "TCP_DENIED");
	assert_int_equal(st, 431);
	logexport_result("deny", "CONNECT", "no-such-reason", &code, &st);
	assert_string_equal(code, "TCP_DENIED");
	assert_int_equal(st, 403);
	logexport_result("deny", "CONNECT", "dns_nxdomain", &code, &st);
	assert_string_equal(code, "NONE");
	assert_int_equal(st, 502);
	logexport_result("deny", "CONNECT", "connect_timeout", &code, &st);
	assert_string_equal(code, "NONE");
	assert_int_equal(st, 504);
}

/* A target with spaces, a newline escape and a '%' stays one field on one line. */
static void
test_hostile_target(void **state)
{
	char *buf = NULL, *out;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct lchain c;
	struct squid_line l;

	(void)state;
	lchain_init(&c, f);
	lchain_add(&c, "2026-11-30T09:00:00.000000Z", "decision",
	    "\"conn\":\"c-1\",\"principal\":\"run a\\n\",\"grant_id\":null,\"client\":"
	    "\"[2001:db8::7]:5000\",\"method\":\"GET\",\"target\":\"http://x.example.com/a b"
	    "\\r\\n1 2 3 %41\",\"target_truncated\":false,\"dest\":\"x.example.com:80\","
	    "\"verdict\":\"deny\",\"reason\":\"not_granted\",\"route\":null,"
	    "\"route_source\":null,\"resolved\":[],\"pinned\":null,\"classes_dropped\":[],"
	    "\"override\":false,\"attested\":false,\"resolve_us\":0,\"connect_us\":0");
	fclose(f);
	out = export(buf, len);
	assert_non_null(strchr(out, '\n'));
	assert_true(strchr(out, '\n') == out + strlen(out) - 1);   /* exactly one line */
	out[strlen(out) - 1] = '\0';
	assert_true(squid_parse(out, &l));
	assert_string_equal(l.url, "http://x.example.com/a%20b%0D%0A1%202%203%20%2541");
	assert_string_equal(l.user, "run%20a%0A");
	assert_string_equal(l.client, "2001:db8::7");
	free(out);
	free(buf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_result_mapping),
		cmocka_unit_test(test_hostile_target),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
