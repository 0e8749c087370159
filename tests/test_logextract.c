/* test_logextract.c - a run's decisions.jsonl as egress-exec writes it (executor/artifacts.c)
 * verifies alone and against the system log; each tampering has its negative twin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egressd/ctl/logextract.h"
#include "executor/artifacts.h"
#include "logfixture.h"

#define DLOG_ZERO "0000000000000000000000000000000000000000000000000000000000000000\""

static char dir[64], sys_path[128], ext_path[128];

static int
setup(void **state)
{
	FILE *f;
	struct lchain c;
	struct artifact a;
	char err[256];

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_logextract.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(sys_path, sizeof(sys_path), "%s/system.jsonl", dir);
	snprintf(ext_path, sizeof(ext_path), "%s/decisions.jsonl", dir);
	f = fopen(sys_path, "w");
	if (f == NULL)
		return -1;
	lchain_init(&c, f);
	lchain_add(&c, "2026-12-01T10:00:00.000000Z", "start", "\"pid\":1");
	lchain_add(&c, "2026-12-01T10:00:01.000000Z", "decision",
	    "\"principal\":\"run-b\",\"verdict\":\"deny\"");
	lchain_add(&c, "2026-12-01T10:00:02.000000Z", "decision",
	    "\"principal\":\"run-a\",\"verdict\":\"allow\"");          /* 3 */
	lchain_add(&c, "2026-12-01T10:00:03.000000Z", "close",
	    "\"principal\":\"run-a\",\"status\":200");                 /* 4 */
	lchain_add(&c, "2026-12-01T10:00:04.000000Z", "decision",
	    "\"principal\":\"run-b\",\"verdict\":\"allow\"");
	lchain_add(&c, "2026-12-01T10:00:05.000000Z", "decision",
	    "\"principal\":\"run-a\",\"verdict\":\"deny\"");           /* 6 */
	lchain_add(&c, "2026-12-01T10:00:06.000000Z", "decision",
	    "\"principal\":\"run-b\",\"verdict\":\"deny\"");
	fclose(f);
	/* the extract, exactly as egress-exec writes it */
	snprintf(err, sizeof(err), "%s", dir);
	return artifacts_write_decisions(dir, sys_path, "run-a", NULL, &a, err, sizeof(err));
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static enum dlog_break
verify_text(const char *text, bool with_system, struct logextract_result *r)
{
	FILE *f = fmemopen((void *)(uintptr_t)text, strlen(text), "r");
	const char *sys[] = { sys_path };
	enum dlog_break b;

	assert_non_null(f);
	b = logextract_verify(f, "ext", NULL, sys, with_system ? 1 : 0, r);
	fclose(f);
	return b;
}

static char *
slurp(const char *p)
{
	FILE *f = fopen(p, "r");
	char *b = calloc(1, 1 << 16);
	size_t n;

	assert_non_null(f);
	assert_non_null(b);
	n = fread(b, 1, (1 << 16) - 1, f);
	b[n] = '\0';
	fclose(f);
	return b;
}

/* Remove line k (0-based) of text, in place. */
static void
drop_line(char *text, int k)
{
	char *p = text, *e;

	for (int i = 0; i < k; i++)
		p = strchr(p, '\n') + 1;
	e = strchr(p, '\n') + 1;
	memmove(p, e, strlen(e) + 1);
}

static void
test_intact_alone_and_against_system(void **state)
{
	struct logextract_result r;
	char *t = slurp(ext_path);

	(void)state;
	assert_true(logextract_is_extract(ext_path));
	assert_false(logextract_is_extract(sys_path));
	assert_int_equal(verify_text(t, false, &r), DLOG_INTACT);
	assert_int_equal(r.records, 3);
	assert_int_equal(r.anchor.seq, 2);
	assert_int_equal(r.first_seq, 3);
	assert_int_equal(r.last_seq, 6);
	assert_int_equal(r.gaps, 1);
	assert_false(r.against_system);
	assert_int_equal(verify_text(t, true, &r), DLOG_INTACT);
	assert_true(r.against_system);
	free(t);
}

static void
test_record_left_out(void **state)
{
	struct logextract_result r;
	char *t = slurp(ext_path);

	(void)state;
	drop_line(t, 3);        /* seq 6: alone this is only a gap ... */
	assert_int_equal(verify_text(t, false, &r), DLOG_INTACT);
	/* ... the system log shows it belonged to the run */
	assert_int_equal(verify_text(t, true, &r), DLOG_BREAK_DELETED);
	assert_non_null(strstr(r.message, "missing from the extract"));
	free(t);
}

static void
test_record_edited(void **state)
{
	struct logextract_result r;
	char *t = slurp(ext_path), *p = strstr(t, "\"verdict\":\"deny\"");

	(void)state;
	assert_non_null(p);
	memcpy(p, "\"verdict\":\"allo\"", 16);
	assert_int_equal(verify_text(t, false, &r), DLOG_BREAK_EDITED);
	free(t);
}

static void
test_anchor_wrong(void **state)
{
	struct logextract_result r;
	char *t = slurp(ext_path), *p = strstr(t, "\"seq\":2,\"hash\":\"");

	(void)state;
	assert_non_null(p);
	/* another hash: the first record no longer links to it */
	p += strlen("\"seq\":2,\"hash\":\"");
	p[0] = p[0] == 'a' ? 'b' : 'a';
	assert_int_equal(verify_text(t, false, &r), DLOG_BREAK_EDITED);
	/* the anchor moved back one seq with a made-up hash: alone it holds (a gap), against
	 * the system log it does not */
	free(t);
	t = slurp(ext_path);
	p = strstr(t, "\"seq\":2,");
	p[6] = '1';
	assert_int_equal(verify_text(t, false, &r), DLOG_INTACT);
	assert_int_equal(verify_text(t, true, &r), DLOG_BREAK_EDITED);
	assert_non_null(strstr(r.message, "anchor"));
	free(t);
}

static void
test_foreign_and_order(void **state)
{
	struct logextract_result r;
	char *t = slurp(ext_path), *sys = slurp(sys_path), *t2;
	char *l7 = strrchr(sys, '{');       /* seq 7, run-b */

	(void)state;
	t2 = calloc(1, strlen(t) + strlen(l7) + 2);
	strcpy(t2, t);
	strcat(t2, l7);
	assert_int_equal(verify_text(t2, false, &r), DLOG_BREAK_EDITED);
	assert_non_null(strstr(r.message, "not a record of the anchor"));
	free(t2);
	/* no anchor: not an extract */
	drop_line(t, 0);
	assert_int_equal(verify_text(t, false, &r), DLOG_BREAK_MALFORMED);
	free(t);
	free(sys);
}

static void
test_anchor_parse(void **state)
{
	struct logextract_anchor a;
	char why[128];
	static const char *const bad[] = {
		"{}", "[]", "{\"egress_anchor\":1}",
		"{\"egress_anchor\":{\"log\":\"/l\",\"seq\":-1,\"hash\":\"" DLOG_ZERO ","
		    "\"through_seq\":5,\"principal\":\"a\",\"grant_id\":null}}",
		"{\"egress_anchor\":{\"log\":\"/l\",\"seq\":1,\"hash\":\"00\","
		    "\"through_seq\":5,\"principal\":\"a\",\"grant_id\":null}}",
		"{\"egress_anchor\":{\"log\":\"/l\",\"seq\":1,\"hash\":\"" DLOG_ZERO ","
		    "\"through_seq\":5,\"principal\":null,\"grant_id\":null}}",
		"{\"egress_anchor\":{\"log\":\"/l\",\"seq\":1,\"hash\":\"" DLOG_ZERO ","
		    "\"through_seq\":5,\"principal\":\"a b\",\"grant_id\":null}}",
		"{\"egress_anchor\":{\"log\":\"/l\",\"seq\":1,\"hash\":\"" DLOG_ZERO ","
		    "\"through_seq\":5,\"principal\":\"a\",\"grant_id\":null,\"x\":1}}",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(logextract_anchor_parse(bad[i], strlen(bad[i]), &a, why,
		    sizeof(why)), -1);
	{
		static const char ok[] = "{\"egress_anchor\":{\"log\":\"/l\",\"seq\":0,\"hash\":\""
		    DLOG_ZERO ",\"through_seq\":0,\"principal\":null,\"grant_id\":\"abcd\"}}";
		assert_int_equal(logextract_anchor_parse(ok, strlen(ok), &a, why, sizeof(why)), 0);
		assert_string_equal(a.grant_id, "abcd");
		assert_string_equal(a.principal, "");
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_intact_alone_and_against_system),
		cmocka_unit_test(test_record_left_out),
		cmocka_unit_test(test_record_edited),
		cmocka_unit_test(test_anchor_wrong),
		cmocka_unit_test(test_foreign_and_order),
		cmocka_unit_test(test_anchor_parse),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
