/* test_loggrants.c - log grants --at: create, replace, revoke, expire, start/stop,
 * multi-part grants, edited records not believed, bounds; and the time arguments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/ctl/loggrants.h"
#include "egressd/ctl/logread.h"
#include "egressd/ctl/timearg.h"
#include "logfixture.h"

/* Replay buf to at (RFC 3339); returns the result array (caller decrefs). */
static json_t *
replay(const char *buf, size_t len, const char *at, const char *principal, bool *anchored)
{
	int64_t at_us;
	struct loggrants *g;
	FILE *f = fmemopen((void *)(uintptr_t)buf, len, "r");
	struct logread r;
	struct logrec *rec;
	char err[256];
	json_t *res;

	assert_int_equal(logread_time_parse(at, &at_us), 0);
	g = loggrants_new(at_us, principal);
	assert_non_null(g);
	assert_non_null(f);
	assert_int_equal(logread_open_stream(&r, f, "mem"), 0);
	while (logread_next(&r, &rec) == 1)
		if (loggrants_add(g, rec, err, sizeof(err)) == 0)
			break;
	logread_close(&r);
	fclose(f);
	res = loggrants_result(g);
	if (anchored != NULL)
		*anchored = loggrants_anchored(g);
	loggrants_free(g);
	return res;
}

static const char *
allow0(json_t *res, size_t i)
{
	return json_string_value(json_array_get(json_object_get(json_array_get(res, i), "allow"),
	    0));
}

static char *
build(size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	struct lchain c;

	lchain_init(&c, f);
	lchain_add(&c, "2026-12-01T10:00:00.000000Z", "start",
	    "\"version\":\"0\",\"pid\":1,\"config\":\"/e.ini\",\"config_sha256\":null");
	lchain_add(&c, "2026-12-01T10:00:00.100000Z", "grant",
	    "\"action\":\"create\",\"grant_id\":\"aa\",\"principal\":\"svc\",\"source\":\"static\","
	    "\"name\":\"svc\",\"reason\":null,\"part\":1,\"parts\":1,\"expires\":null,"
	    "\"allow\":[\"https://one.example\"]");
	lchain_add(&c, "2026-12-01T10:05:00.000000Z", "grant",
	    "\"action\":\"create\",\"grant_id\":\"bb\",\"principal\":\"run-1\",\"source\":"
	    "\"dynamic\",\"name\":null,\"reason\":null,\"part\":1,\"parts\":2,"
	    "\"expires\":\"2026-12-01T11:00:00Z\",\"allow\":[\"https://a.example\"]");
	lchain_add(&c, "2026-12-01T10:05:00.000001Z", "grant",
	    "\"action\":\"create\",\"grant_id\":\"bb\",\"principal\":\"run-1\",\"part\":2,"
	    "\"parts\":2,\"allow\":[\"https://b.example\"]");
	lchain_add(&c, "2026-12-01T10:10:00.000000Z", "grant",
	    "\"action\":\"replace\",\"grant_id\":\"cc\",\"principal\":\"svc\",\"source\":"
	    "\"static\",\"name\":\"svc\",\"part\":1,\"parts\":1,\"expires\":null,"
	    "\"allow\":[\"https://two.example\"],\"old_grant_id\":\"aa\","
	    "\"old_allow\":[\"https://one.example\"]");
	lchain_add(&c, "2026-12-01T10:20:00.000000Z", "grant",
	    "\"action\":\"revoke\",\"grant_id\":\"cc\",\"principal\":\"svc\",\"reason\":"
	    "\"grant_revoked\",\"part\":1,\"parts\":1,\"allow\":[]");
	lchain_add(&c, "2026-12-01T12:00:00.000000Z", "stop", "\"cause\":\"drain\"");
	lchain_add(&c, "2026-12-01T12:01:00.000000Z", "start",
	    "\"version\":\"0\",\"pid\":2,\"config\":\"/e.ini\",\"config_sha256\":null");
	fclose(f);
	return buf;
}

static void
test_replay_points_in_time(void **state)
{
	size_t len;
	char *buf = build(&len);
	json_t *r;
	bool anch;

	(void)state;
	/* before the log: nothing known, and said so */
	r = replay(buf, len, "2026-12-01T09:00:00Z", NULL, &anch);
	assert_int_equal(json_array_size(r), 0);
	assert_false(anch);
	json_decref(r);
	/* after create of svc: one.example */
	r = replay(buf, len, "2026-12-01T10:01:00Z", "svc", &anch);
	assert_true(anch);
	assert_int_equal(json_array_size(r), 1);
	assert_string_equal(allow0(r, 0), "https://one.example");
	json_decref(r);
	/* run-1's grant: both parts concatenated */
	r = replay(buf, len, "2026-12-01T10:06:00Z", "run-1", NULL);
	assert_int_equal(json_array_size(r), 1);
	assert_int_equal(json_array_size(json_object_get(json_array_get(r, 0), "allow")), 2);
	json_decref(r);
	/* after the replace: two.example, and one.example is gone (negative twin) */
	r = replay(buf, len, "2026-12-01T10:15:00Z", "svc", NULL);
	assert_int_equal(json_array_size(r), 1);
	assert_string_equal(allow0(r, 0), "https://two.example");
	assert_string_equal(json_string_value(json_object_get(json_array_get(r, 0), "grant_id")),
	    "cc");
	json_decref(r);
	/* revoked */
	r = replay(buf, len, "2026-12-01T10:30:00Z", "svc", NULL);
	assert_int_equal(json_array_size(r), 0);
	json_decref(r);
	/* run-1 still in service before its expiry, gone after it */
	r = replay(buf, len, "2026-12-01T10:59:59Z", "run-1", NULL);
	assert_int_equal(json_array_size(r), 1);
	json_decref(r);
	r = replay(buf, len, "2026-12-01T11:00:00Z", "run-1", NULL);
	assert_int_equal(json_array_size(r), 0);
	json_decref(r);
	/* after stop and a new start: nothing */
	r = replay(buf, len, "2026-12-01T12:30:00Z", NULL, NULL);
	assert_int_equal(json_array_size(r), 0);
	json_decref(r);
	free(buf);
}

static void
test_edited_record_not_believed(void **state)
{
	size_t len;
	char *buf = build(&len), *p;
	json_t *r;

	(void)state;
	/* widen the svc grant by editing its create record's bytes */
	p = strstr(buf, "https://one.example");
	assert_non_null(p);
	memcpy(p, "https://evi.example", 19);
	r = replay(buf, len, "2026-12-01T10:01:00Z", "svc", NULL);
	assert_int_equal(json_array_size(r), 0);
	json_decref(r);
	free(buf);
}

static void
test_entry_bound(void **state)
{
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);
	struct lchain c;
	int64_t at_us;
	struct loggrants *g;
	struct logread rd;
	struct logrec *rec;
	char err[256] = "";
	int rc = 1;

	(void)state;
	lchain_init(&c, f);
	/* one more part than a grant can have entries: refused, not grown without end */
	for (int k = 0; k <= EGRESS_GRANT_ENTRIES_MAX; k++)
		lchain_add(&c, "2026-12-01T10:00:00.000000Z", "grant",
		    "\"action\":\"create\",\"grant_id\":\"aa\",\"principal\":\"svc\",\"part\":2,"
		    "\"parts\":2,\"allow\":[\"https://x.example\"]");
	fclose(f);
	assert_int_equal(logread_time_parse("2026-12-02", &at_us), 0);
	g = loggrants_new(at_us, NULL);
	f = fmemopen(buf, len, "r");
	assert_int_equal(logread_open_stream(&rd, f, "mem"), 0);
	while (rc > 0 && logread_next(&rd, &rec) == 1)
		rc = loggrants_add(g, rec, err, sizeof(err));
	assert_int_equal(rc, -1);
	assert_non_null(strstr(err, "entries"));
	logread_close(&rd);
	fclose(f);
	loggrants_free(g);
	free(buf);
}

static void
test_timearg_forms(void **state)
{
	int64_t now, us, ref;

	(void)state;
	assert_int_equal(logread_time_parse("2026-12-01T20:00:00Z", &now), 0);
	assert_int_equal(timearg_parse("1h", now, &us), 0);
	assert_int_equal(us, now - 3600LL * 1000000);
	assert_int_equal(timearg_parse("30m", now, &us), 0);
	assert_int_equal(us, now - 1800LL * 1000000);
	assert_int_equal(timearg_parse("2d", now, &us), 0);
	assert_int_equal(us, now - 2 * 86400LL * 1000000);
	assert_int_equal(timearg_parse("now", now, &us), 0);
	assert_int_equal(us, now);
	assert_int_equal(logread_time_parse("2026-12-01T20:07:00Z", &ref), 0);
	assert_int_equal(timearg_parse("2026-12-01 20:07", now, &us), 0);
	assert_int_equal(us, ref);
	assert_int_equal(timearg_parse("2026-12-01T20:07", now, &us), 0);
	assert_int_equal(us, ref);
	assert_int_equal(timearg_parse("2026-12-01 20:07:00", now, &us), 0);
	assert_int_equal(us, ref);
	assert_int_equal(timearg_parse("2026-12-01T21:07:00+01:00", now, &us), 0);
	assert_int_equal(us, ref);
	/* refused: unknown unit, no number, trailing junk, absurd duration, bad minute */
	assert_int_equal(timearg_parse("1y", now, &us), -1);
	assert_int_equal(timearg_parse("h", now, &us), -1);
	assert_int_equal(timearg_parse("1hh", now, &us), -1);
	assert_int_equal(timearg_parse("99999999999999999999d", now, &us), -1);
	assert_int_equal(timearg_parse("2026-12-01 20:61", now, &us), -1);
	assert_int_equal(timearg_parse("", now, &us), -1);
	assert_int_equal(timearg_parse("yesterday", now, &us), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replay_points_in_time),
		cmocka_unit_test(test_edited_record_not_believed),
		cmocka_unit_test(test_entry_bound),
		cmocka_unit_test(test_timearg_forms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
