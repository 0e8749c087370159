/* test_logquery.c - egressctl log query: each filter returns exactly the expected
 * records; table output; time parsing; --follow across appends and a rotation. */
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

#include "egressd/ctl/logquery.h"
#include "egressd/ctl/logread.h"
#include "logfixture.h"

struct fix {
	char dir[64];
	char path[128];
};

static int
setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct lchain c;
	FILE *fp;

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_logquery.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/decisions.jsonl", f->dir);
	fp = fopen(f->path, "w");
	assert_non_null(fp);
	lchain_init(&c, fp);
	lchain_sample(&c);
	fclose(fp);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fix *f = *state;
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", f->dir);
	free(f);
	return 0;
}

/* Run a query given as words; return the printed seqs as "1,3,8" (caller frees). */
static char *
query(struct fix *f, const char *const *words, size_t n)
{
	char *argv[32], *out = NULL, *res = NULL, *errs = NULL;
	size_t outlen = 0, errlen = 0, rlen = 0;
	struct logquery_opts o;
	char err[256];
	FILE *fo, *fe, *fr;
	bool first = true;
	int argc = 0;

	for (size_t i = 0; i < n; i++)
		argv[argc++] = (char *)(uintptr_t)words[i];
	argv[argc++] = f->path;
	assert_int_equal(logquery_parse_args(&o, argc, argv, err, sizeof(err)), 0);
	fo = open_memstream(&out, &outlen);
	fe = open_memstream(&errs, &errlen);
	assert_true(logquery_run(&o, fo, fe) >= 0);
	fclose(fo);
	fclose(fe);
	assert_int_equal(errlen, 0);   /* the sample is clean: no warnings */
	fr = open_memstream(&res, &rlen);
	for (char *line = out, *nl; line != NULL && *line != '\0'; line = nl + 1) {
		struct logrec rec;

		nl = strchr(line, '\n');
		assert_non_null(nl);
		assert_int_equal(logrec_parse(line, (size_t)(nl - line), &rec, NULL, 0), 0);
		assert_true(rec.hash_ok);  /* the original bytes, hash intact */
		fprintf(fr, "%s%llu", first ? "" : ",", (unsigned long long)rec.seq);
		first = false;
		logrec_clear(&rec);
	}
	fclose(fr);
	free(out);
	free(errs);
	return res;
}

#define Q(want, ...) do { \
	static const char *const w_[] = { __VA_ARGS__ }; \
	char *got_ = query(f, w_, sizeof(w_) / sizeof(w_[0])); \
	assert_string_equal(got_, want); \
	free(got_); \
} while (0)

static void
test_filters(void **state)
{
	struct fix *f = *state;

	Q("1,2,3,4,5,6,7,8", "--");
	Q("1,2,3,7,8", "--principal", "run-a");
	Q("4,5,6", "--principal=run-b");
	Q("", "--principal", "run-c");
	Q("1,4,7", "--verdict", "allow");
	Q("2,5,8", "--verdict", "deny");
	Q("5,8", "--reason", "not_granted");
	Q("3", "--reason", "client_closed");
	Q("3,6", "--event", "close");
	Q("5,8", "--dest", "evil.*");
	Q("1,7", "--dest", "*.example.com:*", "--principal", "run-a", "--verdict", "allow",
	    "--event", "decision", "--dest", "*.example.com:*");
	Q("1,2,3,7", "--dest", "*.example.com:*");
	Q("4", "--route", "http://*");
	Q("1,2,5,7,8", "--route", "direct");
	Q("2,4,5,8", "--attested", "no");
	Q("1,7", "--attested", "yes");
	Q("4", "--attested", "no", "--verdict", "allow");
	Q("1,2,3,4,5,6,7,8", "--grant", "5c1e9a0b4d2f6e8a1b3c5d7e9f0a2b4c");
	Q("", "--grant", "5c1e9a0b4d2f6e8a1b3c5d7e9f0a2b4d");
	/* since inclusive, until exclusive; offsets */
	Q("4,5,6,7,8", "--since", "2026-11-30T09:01:00Z");
	Q("1,2,3", "--until", "2026-11-30T09:01:00Z");
	Q("4,5,6", "--since", "2026-11-30T10:01:00+01:00", "--until", "2026-11-30T10:00:00Z");
	Q("3,4,5,6,7,8", "--since", "2026-11-30T09:00:10.4Z");
	Q("4,5,6,7,8", "--since", "2026-11-30T09:00:10.6Z");
	Q("8", "--since", "2026-11-30 10:00:00.000001Z");
	Q("", "--until", "2026-11-30");
	Q("2,8", "--principal", "run-a", "--verdict", "deny");
}

static void
test_args(void **state)
{
	struct fix *f = *state;
	struct logquery_opts o;
	char err[256];
	char *bad[][3] = {
		{ "--verdict", "maybe", f->path },
		{ "--attested", "perhaps", f->path },
		{ "--since", "yesterday", f->path },
		{ "--until", "2026-13-01", f->path },
		{ "--interval", "5", f->path },
		{ "--bogus", f->path, NULL },
		{ "--follow", "-", NULL },
		{ "--principal", NULL, NULL },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int argc = bad[i][2] != NULL ? 3 : bad[i][1] != NULL ? 2 : 1;

		assert_int_equal(logquery_parse_args(&o, argc, bad[i], err, sizeof(err)), -1);
	}
	{
		char *none[] = { "--table" };

		assert_int_equal(logquery_parse_args(&o, 1, none, err, sizeof(err)), -1);
	}
}

static void
test_time_parse(void **state)
{
	int64_t us;

	(void)state;
	assert_int_equal(logread_time_parse("1970-01-01T00:00:00Z", &us), 0);
	assert_int_equal(us, 0);
	assert_int_equal(logread_time_parse("1970-01-01T00:00:01.5Z", &us), 0);
	assert_int_equal(us, 1500000);
	assert_int_equal(logread_time_parse("1970-01-01T01:00:00+01:00", &us), 0);
	assert_int_equal(us, 0);
	assert_int_equal(logread_time_parse("2026-11-30T09:14:07.512034Z", &us), 0);
	assert_int_equal(us, 1796030047512034LL);
	assert_int_equal(logread_time_parse("2024-02-29", &us), 0);
	assert_int_equal(logread_time_parse("2025-02-29", &us), -1);
	assert_int_equal(logread_time_parse("2026-11-30T25:00:00Z", &us), -1);
	assert_int_equal(logread_time_parse("2026-11-30T09:00:00", &us), -1);
	assert_int_equal(logread_time_parse("2026-11-30T09:00:00.Z", &us), -1);
	assert_int_equal(logread_time_parse("2026-11-30T09:00:00Zjunk", &us), -1);
	assert_int_equal(logread_time_parse("2026-11-30T09:00:00+1:00", &us), -1);
	assert_int_equal(logread_time_parse("", &us), -1);
}

static void
test_table(void **state)
{
	struct fix *f = *state;
	struct logquery_opts o;
	char *argv[] = { "--table", "--principal", "run-b", f->path };
	char *out = NULL, err[256];
	size_t len = 0;
	FILE *fo;
	int lines = 0;
	size_t w = 0;

	assert_int_equal(logquery_parse_args(&o, 4, argv, err, sizeof(err)), 0);
	fo = open_memstream(&out, &len);
	assert_int_equal(logquery_run(&o, fo, stderr), 3);
	fclose(fo);
	assert_non_null(strstr(out, "PRINCIPAL"));
	assert_non_null(strstr(out, "pypi.example.org:443"));
	assert_non_null(strstr(out, "not_granted"));
	assert_non_null(strstr(out, "100/2000"));
	/* aligned: the DEST column starts at the same offset on every line */
	for (char *l = out, *nl; *l != '\0'; l = nl + 1, lines++) {
		char *d = lines == 0 ? strstr(l, "DEST") : strstr(l, ".example.");

		nl = strchr(l, '\n');
		assert_non_null(d);
		while (lines > 0 && d > l && d[-1] != ' ')
			d--;
		if (lines == 0)
			w = (size_t)(d - l);
		else
			assert_int_equal((size_t)(d - l), w);
	}
	assert_int_equal(lines, 4);
	free(out);
}

/* A hostile target must not reach the terminal as control bytes. */
static void
test_table_sanitizes(void **state)
{
	struct logrec rec = { 0 };
	char *out = NULL;
	size_t len = 0;
	FILE *fo = open_memstream(&out, &len);

	(void)state;
	rec.time = "2026-11-30T09:00:00.000000Z";
	rec.event = "decision";
	rec.principal = "run\x1b[31m-a";
	rec.dest = "a-very-long-destination-name-that-exceeds-the-column.example.com:443";
	rec.attested = -1;
	rec.bytes_up = rec.bytes_down = -1;
	rec.hash_ok = false;
	logquery_table_row(fo, &rec);
	fclose(fo);
	assert_null(strchr(out, '\x1b'));
	assert_non_null(strstr(out, "run?[31m-a"));
	assert_non_null(strstr(out, "name-that-excee~"));
	assert_non_null(strstr(out, "HASH MISMATCH"));
	free(out);
}

/* An edited record is still selected but flagged on stderr. */
static void
test_edited_warns(void **state)
{
	struct fix *f = *state;
	struct logquery_opts o;
	char *argv[] = { "--reason", "not_granted", f->path };
	char *out = NULL, *errs = NULL, err[256], *buf;
	size_t len = 0, elen = 0, n;
	FILE *fp, *fo, *fe;

	buf = calloc(1, 65536);
	fp = fopen(f->path, "r+");
	n = fread(buf, 1, 65535, fp);
	assert_true(n > 0);
	{
		char *p = strstr(buf, "evil.example.net");  /* record 5 */

		p[0] = 'E';
	}
	rewind(fp);
	fwrite(buf, 1, n, fp);
	fputs("not a record\n", fp);
	fclose(fp);
	assert_int_equal(logquery_parse_args(&o, 3, argv, err, sizeof(err)), 0);
	fo = open_memstream(&out, &len);
	fe = open_memstream(&errs, &elen);
	assert_int_equal(logquery_run(&o, fo, fe), 2);
	fclose(fo);
	fclose(fe);
	assert_non_null(strstr(errs, "1 record(s) do not match their own hash"));
	assert_non_null(strstr(errs, "1 line(s) skipped"));
	free(out);
	free(errs);
	free(buf);
}

struct follow_ctx {
	struct fix *f;
	struct lchain c;
	int ticks;
};

/* Appends while the query follows: a record, a rotation (rename, one late record to
 * the renamed file, a new file continuing the chain), then a record in the new file. */
static void
follow_tick(void *arg)
{
	struct follow_ctx *x = arg;
	char old[160];

	x->ticks++;
	if (x->ticks == 2) {
		x->c.f = fopen(x->f->path, "a");
		lchain_decision(&x->c, "2026-11-30T11:00:00.000000Z", "c-7", "run-c",
		    "one.example.com:443", "allow", "allowed", "direct", 1);
		fclose(x->c.f);
	} else if (x->ticks == 4) {
		snprintf(old, sizeof(old), "%s.1", x->f->path);
		assert_int_equal(rename(x->f->path, old), 0);
		x->c.f = fopen(old, "a");
		lchain_decision(&x->c, "2026-11-30T11:00:01.000000Z", "c-8", "run-c",
		    "late.example.com:443", "allow", "allowed", "direct", 1);
		fclose(x->c.f);
		x->c.f = fopen(x->f->path, "w");
		lchain_decision(&x->c, "2026-11-30T11:00:02.000000Z", "c-9", "run-c",
		    "two.example.com:443", "deny", "not_granted", "direct", 1);
		fclose(x->c.f);
	} else if (x->ticks == 6) {
		x->c.f = fopen(x->f->path, "a");
		/* a torn write first: the follower waits for the newline */
		fputs("{\"v\":1,", x->c.f);
		fclose(x->c.f);
	} else if (x->ticks == 8) {
		char buf[8192];
		FILE *fp = fopen(x->f->path, "r+");
		size_t n = fread(buf, 1, sizeof(buf), fp);

		/* replace the torn bytes by a whole record */
		assert_int_equal(ftruncate(fileno(fp), (off_t)(n - 7)), 0);
		fclose(fp);
		x->c.f = fopen(x->f->path, "a");
		lchain_decision(&x->c, "2026-11-30T11:00:03.000000Z", "c-10", "run-c",
		    "three.example.com:443", "allow", "allowed", "direct", 1);
		fclose(x->c.f);
	}
}

static void
test_follow_rotation(void **state)
{
	struct fix *f = *state;
	struct follow_ctx x = { .f = f };
	struct logquery_opts o;
	char *argv[] = { "--follow", "--interval", "50", "--principal", "run-c", f->path };
	char *out = NULL, err[256];
	size_t len = 0;
	FILE *fp, *fo;

	/* continue the sample's chain */
	fp = fopen(f->path, "w");
	lchain_init(&x.c, fp);
	lchain_sample(&x.c);
	fclose(fp);
	assert_int_equal(logquery_parse_args(&o, 6, argv, err, sizeof(err)), 0);
	o.follow_max_ms = 1500;
	o.tick = follow_tick;
	o.tick_arg = &x;
	fo = open_memstream(&out, &len);
	assert_int_equal(logquery_run(&o, fo, stderr), 4);
	fclose(fo);
	assert_true(x.ticks >= 8);
	{
		const char *p1 = strstr(out, "one.example.com"), *p2 = strstr(out, "late.example"),
		    *p3 = strstr(out, "two.example.com"), *p4 = strstr(out, "three.example");

		assert_true(p1 && p2 && p3 && p4);
		assert_true(p1 < p2 && p2 < p3 && p3 < p4);
	}
	free(out);
}

/* The replaced file ends in a torn line that never completes (a crash mid-write): the
 * follower moves on to the new file after a few checks instead of waiting forever. */
static void
torn_tick(void *arg)
{
	struct follow_ctx *x = arg;
	char old[160];

	x->ticks++;
	if (x->ticks == 2) {
		snprintf(old, sizeof(old), "%s.1", x->f->path);
		x->c.f = fopen(x->f->path, "a");
		fputs("{\"v\":1,\"torn", x->c.f);
		fclose(x->c.f);
		assert_int_equal(rename(x->f->path, old), 0);
		x->c.f = fopen(x->f->path, "w");
		lchain_decision(&x->c, "2026-11-30T11:00:02.000000Z", "c-9", "run-c",
		    "after.example.com:443", "deny", "not_granted", "direct", 1);
		fclose(x->c.f);
	}
}

static void
test_follow_past_torn_file(void **state)
{
	struct fix *f = *state;
	struct follow_ctx x = { .f = f };
	struct logquery_opts o;
	char *argv[] = { "--follow", "--interval", "50", "--principal", "run-c", f->path };
	char *out = NULL, err[256];
	size_t len = 0;
	FILE *fp, *fo;

	fp = fopen(f->path, "w");
	lchain_init(&x.c, fp);
	lchain_sample(&x.c);
	fclose(fp);
	assert_int_equal(logquery_parse_args(&o, 6, argv, err, sizeof(err)), 0);
	o.follow_max_ms = 1000;
	o.tick = torn_tick;
	o.tick_arg = &x;
	fo = open_memstream(&out, &len);
	assert_int_equal(logquery_run(&o, fo, stderr), 1);
	fclose(fo);
	assert_non_null(strstr(out, "after.example.com"));
	free(out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_filters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_args, setup, teardown),
		cmocka_unit_test(test_time_parse),
		cmocka_unit_test_setup_teardown(test_table, setup, teardown),
		cmocka_unit_test(test_table_sanitizes),
		cmocka_unit_test_setup_teardown(test_edited_warns, setup, teardown),
		cmocka_unit_test_setup_teardown(test_follow_rotation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_follow_past_torn_file, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
