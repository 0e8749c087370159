/* test_logfiles.c - egressd/logfiles.c: rotated decision-log files read in chain order
 * whatever order a shell glob gives them (the README's
 * `egressctl log verify /var/log/egressd/decisions.jsonl*` lists the current file first and
 * ".12" before ".9"); reordering never hides a missing file; the default log's set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dlogchain.h"
#include "egressd/ctl/logfiles.h"
#include "logfixture.h"

struct fix {
	char dir[64];
	char cur[128], r9[128], r12[128], junk[128], gz[128];
};

/* decisions.jsonl.9: seq 1-9; .12: seq 10-12; decisions.jsonl: seq 13-14. */
static int
setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct lchain c;
	FILE *fp;

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_logfiles.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->cur, sizeof(f->cur), "%s/decisions.jsonl", f->dir);
	snprintf(f->r9, sizeof(f->r9), "%s/decisions.jsonl.9", f->dir);
	snprintf(f->r12, sizeof(f->r12), "%s/decisions.jsonl.12", f->dir);
	snprintf(f->junk, sizeof(f->junk), "%s/decisions.jsonl.bak", f->dir);
	snprintf(f->gz, sizeof(f->gz), "%s/decisions.jsonl.5.gz", f->dir);
	lchain_init(&c, NULL);
	assert_non_null(fp = fopen(f->r9, "w"));
	c.f = fp;
	for (int i = 0; i < 9; i++)
		lchain_decision(&c, "2026-11-30T09:00:00.000000Z", "c-1", "run-1",
		    "api.example.com:443", "deny", "not_granted", "direct", 1);
	fclose(fp);
	assert_non_null(fp = fopen(f->r12, "w"));
	c.f = fp;
	for (int i = 0; i < 3; i++)
		lchain_decision(&c, "2026-11-30T09:01:00.000000Z", "c-2", "run-1",
		    "api.example.com:443", "deny", "not_granted", "direct", 1);
	fclose(fp);
	assert_non_null(fp = fopen(f->cur, "w"));
	c.f = fp;
	for (int i = 0; i < 2; i++)
		lchain_decision(&c, "2026-11-30T09:02:00.000000Z", "c-3", "run-1",
		    "api.example.com:443", "deny", "not_granted", "direct", 1);
	fclose(fp);
	/* neither is a rotated file of the set: not <name>.<digits> */
	assert_non_null(fp = fopen(f->junk, "w"));
	fputs("not a log\n", fp);
	fclose(fp);
	assert_non_null(fp = fopen(f->gz, "w"));
	fclose(fp);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fix *f = *state;

	unlink(f->cur);
	unlink(f->r9);
	unlink(f->r12);
	unlink(f->junk);
	unlink(f->gz);
	rmdir(f->dir);
	free(f);
	logfiles_free();
	logfiles_set_default(NULL);
	return 0;
}

static enum dlog_break
verify(const char **files, size_t n)
{
	struct dlog_verify v;

	dlog_verify_init(&v, false);
	for (size_t i = 0; i < n; i++) {
		enum dlog_break b = dlog_verify_file(&v, files[i]);

		if (b != DLOG_INTACT)
			return b;
	}
	assert_int_equal(v.records, 14);
	return DLOG_INTACT;
}

static void
test_glob_order(void **state)
{
	struct fix *f = *state;
	/* what `decisions.jsonl*` expands to (name order), minus the two non-members */
	const char *glob[] = { f->cur, f->r12, f->r9 };
	const char *copy[3];

	/* Negative twin: in name order the chain is broken (the false tamper alarm). */
	memcpy(copy, glob, sizeof(copy));
	assert_int_not_equal(verify(copy, 3), DLOG_INTACT);
	/* In chain order it is intact. */
	assert_int_equal(logfiles_order(glob, 3), 1);
	assert_string_equal(glob[0], f->r9);
	assert_string_equal(glob[1], f->r12);
	assert_string_equal(glob[2], f->cur);
	assert_int_equal(verify(glob, 3), DLOG_INTACT);
	/* Already in order: unchanged. */
	assert_int_equal(logfiles_order(glob, 3), 0);
}

/* Ordering cannot hide a deleted file: the gap is still a break. */
static void
test_gap_still_detected(void **state)
{
	struct fix *f = *state;
	const char *files[] = { f->cur, f->r9 };
	struct dlog_verify v;
	enum dlog_break b = DLOG_INTACT;

	assert_int_equal(logfiles_order(files, 2), 1);
	dlog_verify_init(&v, false);
	for (size_t i = 0; i < 2 && b == DLOG_INTACT; i++)
		b = dlog_verify_file(&v, files[i]);
	assert_int_not_equal(b, DLOG_INTACT);
}

/* A member whose first record cannot be read keeps the given order (reported as is). */
static void
test_unreadable_keeps_order(void **state)
{
	struct fix *f = *state;
	const char *files[] = { f->cur, f->junk, f->r9 };

	assert_int_equal(logfiles_order(files, 3), 0);
	assert_string_equal(files[0], f->cur);
	assert_string_equal(files[1], f->junk);
	assert_string_equal(files[2], f->r9);
	files[1] = "-";
	assert_int_equal(logfiles_order(files, 3), 0);
	files[1] = "/dev/null";     /* not a regular file: never read here */
	assert_int_equal(logfiles_order(files, 3), 0);
}

static void
test_default_set(void **state)
{
	struct fix *f = *state;
	const char *files[8];
	size_t dropped;
	char err[512];

	logfiles_set_default(f->cur);
	assert_int_equal(logfiles_default_set(files, 8, &dropped, err, sizeof(err)), 3);
	assert_int_equal(dropped, 0);
	assert_string_equal(files[0], f->r9);
	assert_string_equal(files[1], f->r12);
	assert_string_equal(files[2], f->cur);
	assert_int_equal(verify(files, 3), DLOG_INTACT);

	/* at most 2: the oldest is left out, with a message */
	assert_int_equal(logfiles_default_set(files, 2, &dropped, err, sizeof(err)), 2);
	assert_int_equal(dropped, 1);
	assert_string_equal(files[0], f->r12);
	assert_non_null(strstr(err, "left out"));

	/* no default log: an error naming it and the way out */
	logfiles_set_default("/nonexistent/egress/decisions.jsonl");
	assert_int_equal(logfiles_default_set(files, 8, &dropped, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/egress/decisions.jsonl"));
	assert_non_null(strstr(err, "--log"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_glob_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gap_still_detected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unreadable_keeps_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_default_set, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
