/* test_logsummary.c - log summary numbers per principal and destination, timeline,
 * key limit, text output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/ctl/logread.h"
#include "egressd/ctl/logsummary.h"
#include "logfixture.h"

/* Summarize a log held in memory. */
static struct logsummary *
summarize(const char *buf, size_t len)
{
	struct logsummary *s = logsummary_new();
	FILE *f = fmemopen((void *)(uintptr_t)buf, len, "r");
	struct logread r;
	struct logrec *rec;

	assert_non_null(s);
	assert_non_null(f);
	assert_int_equal(logread_open_stream(&r, f, "mem"), 0);
	while (logread_next(&r, &rec) == 1) {
		logsummary_track(s, rec);
		assert_int_equal(logsummary_add(s, rec), 0);
	}
	logsummary_add_counters(s, &r);
	logread_close(&r);
	fclose(f);
	return s;
}

static long long
num(json_t *o, const char *path)
{
	char buf[256], *save = NULL, *tok;
	json_t *v = o;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, "/", &save); tok != NULL; tok = strtok_r(NULL, "/", &save))
		v = json_object_get(v, tok);
	assert_true(json_is_integer(v));
	return (long long)json_integer_value(v);
}

static const char *
str(json_t *o, const char *a, const char *b, const char *c)
{
	json_t *v = json_object_get(o, a);

	if (b)
		v = json_object_get(v, b);
	if (c)
		v = json_object_get(v, c);
	return json_string_value(v);
}

static void
test_numbers(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct lchain c;
	struct logsummary *s;
	json_t *sum, *a, *b;

	(void)state;
	lchain_init(&c, f);
	lchain_sample(&c);
	fclose(f);
	s = summarize(buf, len);
	sum = logsummary_finish(s);
	assert_int_equal(num(sum, "records"), 8);
	assert_int_equal(num(sum, "decisions"), 6);
	assert_int_equal(num(sum, "allow"), 3);
	assert_int_equal(num(sum, "deny"), 3);
	assert_int_equal(num(sum, "closes"), 2);
	assert_int_equal(num(sum, "bad_hash"), 0);
	assert_int_equal(num(sum, "denials_by_reason/not_granted"), 2);
	assert_int_equal(num(sum, "denials_by_reason/private_address"), 1);
	assert_string_equal(str(sum, "first", NULL, NULL), "2026-11-30T09:00:00.000000Z");
	assert_string_equal(str(sum, "last", NULL, NULL), "2026-11-30T10:30:00.000000Z");

	a = json_object_get(json_object_get(sum, "principals"), "run-a");
	assert_int_equal(num(a, "decisions"), 4);
	assert_int_equal(num(a, "allow"), 2);
	assert_int_equal(num(a, "deny"), 2);
	assert_int_equal(num(a, "closes"), 1);
	assert_int_equal(num(a, "bytes_up"), 5120);
	assert_int_equal(num(a, "bytes_down"), 88311);
	assert_int_equal(num(a, "routes/direct"), 4);
	assert_int_equal(num(a, "unattested"), 0);
	assert_int_equal(num(a, "denials_by_reason/not_granted"), 1);
	assert_int_equal(num(a, "denials_by_reason/private_address"), 1);
	assert_string_equal(str(a, "first", NULL, NULL), "2026-11-30T09:00:00.000000Z");
	assert_string_equal(str(a, "last", NULL, NULL), "2026-11-30T10:30:00.000000Z");
	assert_int_equal(num(a, "destinations/api.example.com:443/bytes_down"), 88311);
	assert_int_equal(num(a, "destinations/api.example.com:443/closes"), 1);
	assert_string_equal(str(a, "destinations", "api.example.com:443", "last"),
	    "2026-11-30T09:00:10.500000Z");
	assert_int_equal(num(a, "destinations/evil.example.net:443/deny"), 1);
	assert_int_equal(json_object_size(json_object_get(a, "destinations")), 4);

	b = json_object_get(json_object_get(sum, "principals"), "run-b");
	assert_int_equal(num(b, "decisions"), 2);
	assert_int_equal(num(b, "unattested"), 1);
	/* of the allowed hops: run-b's one allow went through a proxy that resolved */
	assert_true(json_real_value(json_object_get(b, "unattested_share")) == 1.0);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(b, "routes"),
	    "http://proxy.example.net:3128")), 1);
	assert_int_equal(num(b, "bytes_down"), 2000);
	assert_true(json_real_value(json_object_get(json_object_get(json_object_get(b,
	    "destinations"), "pypi.example.org:443"), "unattested_share")) == 1.0);

	/* over all principals: evil.example.net denied twice */
	assert_int_equal(num(sum, "destinations/evil.example.net:443/deny"), 2);
	assert_int_equal(json_object_size(json_object_get(sum, "principals")), 2);
	logsummary_free(s);
	free(buf);
}

static void
test_timeline(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct lchain c;
	struct logsummary *s;
	json_t *sum, *tl, *bk;
	long long allow = 0, deny = 0;
	size_t i;
	json_t *b;

	(void)state;
	lchain_init(&c, f);
	lchain_sample(&c);
	fclose(f);
	s = summarize(buf, len);
	sum = logsummary_finish(s);
	tl = json_object_get(sum, "timeline");
	bk = json_object_get(tl, "buckets");
	/* 09:00 .. 10:30 is 91 minutes: 5-minute buckets, 19 of them */
	assert_int_equal(num(tl, "bucket_s"), 300);
	assert_int_equal(json_array_size(bk), 19);
	assert_string_equal(str(json_array_get(bk, 0), "start", NULL, NULL),
	    "2026-11-30T09:00:00Z");
	json_array_foreach(bk, i, b) {
		allow += num(b, "allow");
		deny += num(b, "deny");
	}
	assert_int_equal(allow, 3);
	assert_int_equal(deny, 3);
	assert_int_equal(num(json_array_get(bk, 0), "allow"), 2);
	assert_int_equal(num(json_array_get(bk, 0), "deny"), 2);
	assert_int_equal(num(json_array_get(bk, 18), "deny"), 1);
	logsummary_free(s);
	free(buf);
}

/* Past the key limit, new principals are counted under "(other)", not kept apart. */
static void
test_key_limit(void **state)
{
	struct logsummary *s = logsummary_new();
	json_t *sum, *ps;
	char line[64];

	(void)state;
	for (int i = 0; i < EGRESS_AUDIT_KEYS_MAX + 5; i++) {
		struct logrec r = { 0 };

		snprintf(line, sizeof(line), "p%d", i);
		r.event = "decision";
		r.verdict = "deny";
		r.reason = "not_granted";
		r.principal = line;
		r.dest = "x.example.com:443";
		r.time = "2026-11-30T09:00:00.000000Z";
		r.attested = 1;
		assert_int_equal(logsummary_add(s, &r), 0);
	}
	sum = logsummary_finish(s);
	ps = json_object_get(sum, "principals");
	assert_int_equal(json_object_size(ps), EGRESS_AUDIT_KEYS_MAX + 1);
	assert_int_equal(num(json_object_get(ps, LOGSUMMARY_OTHER), "decisions"), 5);
	assert_int_equal(num(sum, "deny"), EGRESS_AUDIT_KEYS_MAX + 5);
	logsummary_free(s);
}

static void
test_text(void **state)
{
	char *buf = NULL, *out = NULL;
	size_t len = 0, olen = 0;
	FILE *f = open_memstream(&buf, &len), *o;
	struct lchain c;
	struct logsummary *s;

	(void)state;
	lchain_init(&c, f);
	lchain_sample(&c);
	fclose(f);
	/* an edited record (a deny) is warned about and left out of every total */
	buf[strstr(buf, "evil.example.net") - buf] = 'E';
	s = summarize(buf, len);
	o = open_memstream(&out, &olen);
	logsummary_print_text(o, logsummary_finish(s));
	fclose(o);
	assert_non_null(strstr(out, "records 7: decisions 5 (allow 3, deny 2), closes 2"));
	assert_non_null(strstr(out, "(left out of the totals)"));
	assert_null(strstr(out, "missing (seq gaps)"));   /* an edit is not a deletion */
	assert_non_null(strstr(out, "principal run-b"));
	assert_non_null(strstr(out, "unattested 100%"));
	assert_non_null(strstr(out, "WARNING: 1 record(s) fail their own hash"));
	logsummary_free(s);
	free(out);
	/* the same log with its third line deleted: the gap is warned about */
	{
		char *l2 = strchr(strchr(buf, '\n') + 1, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
		json_t *sum;

		memmove(l2, l3, strlen(l3) + 1);
		s = summarize(buf, strlen(buf));
		sum = logsummary_finish(s);
		assert_int_equal(num(sum, "deleted"), 1);
		o = open_memstream(&out, &olen);
		logsummary_print_text(o, sum);
		fclose(o);
		assert_non_null(strstr(out, "WARNING: 1 record(s) missing (seq gaps)"));
		logsummary_free(s);
		free(out);
	}
	free(buf);
}

/* The stub resolver's dns_suppressed counts are denials: summed and shown, never decisions. */
static void
test_dns_suppressed(void **state)
{
	char *buf = NULL, *out = NULL;
	size_t len = 0, olen = 0;
	FILE *f = open_memstream(&buf, &len), *o;
	struct lchain c;
	struct logsummary *s;
	json_t *sum;

	(void)state;
	lchain_init(&c, f);
	lchain_add(&c, "2026-11-30T09:00:00.000000Z", "decision", "\"principal\":\"run-d\","
	    "\"grant_id\":\"g1\",\"hop_kind\":\"dns\",\"capture\":\"transparent\","
	    "\"dest\":\"x.example.com\",\"qtype\":\"A\",\"verdict\":\"deny\","
	    "\"reason\":\"dns_not_granted\"");
	lchain_add(&c, "2026-11-30T09:00:01.000000Z", "dns_suppressed", "\"principal\":\"run-d\","
	    "\"grant_id\":\"g1\",\"hop_kind\":\"dns\",\"capture\":\"transparent\","
	    "\"suppressed\":4071,\"reasons\":{\"dns_not_granted\":4071},"
	    "\"last_dest\":\"y.example.com\"");
	lchain_add(&c, "2026-11-30T09:00:02.000000Z", "dns_suppressed", "\"principal\":\"run-d\","
	    "\"grant_id\":\"g1\",\"suppressed\":29,\"reasons\":{\"dns_pool_exhausted\":29},"
	    "\"last_dest\":\"z.example.com\"");
	fclose(f);
	s = summarize(buf, len);
	sum = logsummary_finish(s);
	assert_int_equal(num(sum, "records"), 3);
	assert_int_equal(num(sum, "decisions"), 1);
	assert_int_equal(num(sum, "deny"), 1);
	assert_int_equal(num(sum, "denials_suppressed"), 4100);
	o = open_memstream(&out, &olen);
	logsummary_print_text(o, sum);
	fclose(o);
	assert_non_null(strstr(out, "denials counted without a record of their own (stub "
	    "resolver floods, dns_suppressed): 4100"));
	logsummary_free(s);
	free(out);
	free(buf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dns_suppressed),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_timeline),
		cmocka_unit_test(test_key_limit),
		cmocka_unit_test(test_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
