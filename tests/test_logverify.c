/* test_logverify.c - egressctl log verify as an audit check: an edit (bytes changed; and
 * changed then re-hashed), a deletion, a reorder and a truncated tail are each found,
 * with their kind and place, in a single file and in a chain that spans a rotation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dlogchain.h"
#include "logfixture.h"

#define NREC 10

struct fix {
	char dir[64];
	char f1[128], f2[128];
	char *lines[NREC];      /* record i+1, with its newline */
};

/* Ten records of one chain; in the rotation tests 1..5 are the rotated file and 6..10
 * the new one (its first record carries the last hash of the first file). */
static int
setup(void **state)
{
	struct fix *fx = calloc(1, sizeof(*fx));
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct lchain c;
	char *p;

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_logverify.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->f1, sizeof(fx->f1), "%s/decisions.jsonl.1", fx->dir);
	snprintf(fx->f2, sizeof(fx->f2), "%s/decisions.jsonl", fx->dir);
	lchain_init(&c, f);
	lchain_sample(&c);
	lchain_decision(&c, "2026-11-30T11:00:00.000000Z", "c-9", "run-c", "a.example.com:443",
	    "allow", "allowed", "direct", 1);
	lchain_close(&c, "2026-11-30T11:00:01.000000Z", "c-9", "run-c", "a.example.com:443",
	    1, 2, 3, "client_closed");
	fclose(f);
	p = buf;
	for (int i = 0; i < NREC; i++) {
		char *nl = strchr(p, '\n');

		assert_non_null(nl);
		fx->lines[i] = strndup(p, (size_t)(nl - p + 1));
		p = nl + 1;
	}
	free(buf);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fix *fx = *state;
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", fx->dir);
	for (int i = 0; i < NREC; i++)
		free(fx->lines[i]);
	free(fx);
	return 0;
}

/* Write records order[from..to) (1-based seqs; 0 ends) to path; cut bytes off the end. */
static void
write_file(const char *path, const char *const *lines, const int *order, size_t n,
    size_t cut)
{
	FILE *f = fopen(path, "w");
	char *all = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&all, &len);

	assert_non_null(f);
	for (size_t i = 0; i < n; i++)
		fputs(lines[order[i] - 1], m);
	fclose(m);
	assert_true(cut < len);
	fwrite(all, 1, len - cut, f);
	fclose(f);
	free(all);
}

static enum dlog_break
verify(struct dlog_verify *v, const char *a, const char *b, bool continued)
{
	enum dlog_break r;

	dlog_verify_init(v, continued);
	r = dlog_verify_file(v, a);
	if (r == DLOG_INTACT && b != NULL)
		r = dlog_verify_file(v, b);
	if (r != DLOG_INTACT)
		fprintf(stderr, "  verify: %s\n", v->message);
	return r;
}

static const int all10[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };

static void
test_intact(void **state)
{
	struct fix *fx = *state;
	struct dlog_verify v;

	write_file(fx->f2, (const char *const *)fx->lines, all10, 10, 0);
	assert_int_equal(verify(&v, fx->f2, NULL, false), DLOG_INTACT);
	assert_int_equal(v.records, 10);
	/* rotated: 1..5 and 6..10 verify together, and the new file alone with continued */
	write_file(fx->f1, (const char *const *)fx->lines, all10, 5, 0);
	write_file(fx->f2, (const char *const *)fx->lines, all10 + 5, 5, 0);
	assert_int_equal(verify(&v, fx->f1, fx->f2, false), DLOG_INTACT);
	assert_int_equal(v.records, 10);
	assert_int_equal(verify(&v, fx->f2, NULL, true), DLOG_INTACT);
	/* the new file alone, not marked continued: its head is missing */
	assert_int_equal(verify(&v, fx->f2, NULL, false), DLOG_BREAK_DELETED);
	/* the wrong order of files */
	assert_int_not_equal(verify(&v, fx->f2, fx->f1, true), DLOG_INTACT);
}

/* Change one byte of record at index idx in a copy of the lines. */
static char **
edited(struct fix *fx, int idx, const char *from, const char *to)
{
	static char *copy[NREC];
	char *p;

	for (int i = 0; i < NREC; i++)
		copy[i] = fx->lines[i];
	copy[idx] = strdup(fx->lines[idx]);
	p = strstr(copy[idx], from);
	assert_non_null(p);
	assert_int_equal(strlen(from), strlen(to));
	memcpy(p, to, strlen(to));
	return copy;
}

/* Record idx changed AND re-hashed by someone without a key: its own hash checks, the
 * next record's prev does not. */
static char **
rehashed(struct fix *fx, int idx)
{
	static char *copy[NREC];
	char *line, body[EGRESS_LOG_RECORD_MAX], hash[DLOG_HASH_HEX + 1], *p;
	size_t len;

	for (int i = 0; i < NREC; i++)
		copy[i] = fx->lines[i];
	line = strdup(fx->lines[idx]);
	p = strstr(line, "\"verdict\":\"deny\"");
	assert_non_null(p);
	memcpy(p, "\"verdict\":\"DENY\"", 16);
	len = strlen(line) - 1;                    /* without newline */
	memcpy(body, line, len - 75);
	body[len - 75] = '}';
	assert_int_equal(dlog_hash_body(line + len - 140, body, len - 74, hash), 0);
	memcpy(line + len - 66, hash, DLOG_HASH_HEX);
	copy[idx] = line;
	return copy;
}

static void
test_single_file(void **state)
{
	struct fix *fx = *state;
	struct dlog_verify v;
	char **c;

	/* edited: bytes of record 4 changed */
	c = edited(fx, 3, "pypi", "PYPI");
	write_file(fx->f2, (const char *const *)c, all10, 10, 0);
	assert_int_equal(verify(&v, fx->f2, NULL, false), DLOG_BREAK_EDITED);
	assert_int_equal(v.line, 4);
	assert_int_equal(v.seq, 4);
	assert_int_equal(v.records, 3);
	free(c[3]);

	/* edited and re-hashed: found at the next record (seq 6 names the old hash) */
	c = rehashed(fx, 4);
	write_file(fx->f2, (const char *const *)c, all10, 10, 0);
	assert_int_equal(verify(&v, fx->f2, NULL, false), DLOG_BREAK_EDITED);
	assert_int_equal(v.seq, 6);
	free(c[4]);

	/* deleted: record 6 removed */
	{
		static const int o[] = { 1, 2, 3, 4, 5, 7, 8, 9, 10 };

		write_file(fx->f2, (const char *const *)fx->lines, o, 9, 0);
		assert_int_equal(verify(&v, fx->f2, NULL, false), DLOG_BREAK_DELETED);
		assert_int_equal(v.seq, 7);
		assert_int_equal(v.line, 6);
		assert_non_null(strstr(v.message, "6..6"));
	}
	/* deleted: the head */
	write_file(fx->f2, (const char *const *)fx->lines, all10 + 1, 9, 0);
	assert_int_equal(verify(&v, fx->f2, NULL, false), DLOG_BREAK_DELETED);
	/* reordered: 7 and 8 swapped */
	{
		static const int o[] = { 1, 2, 3, 4, 5, 6, 8, 7, 9, 10 };

		write_file(fx->f2, (const char *const *)fx->lines, o, 10, 0);
		assert_int_equal(verify(&v, fx->f2, NULL, false), DLOG_BREAK_REORDERED);
		assert_int_equal(v.seq, 8);
	}
	/* reordered: a record repeated */
	{
		static const int o[] = { 1, 2, 3, 4, 5, 6, 7, 7, 8, 9, 10 };

		write_file(fx->f2, (const char *const *)fx->lines, o, 11, 0);
		assert_int_equal(verify(&v, fx->f2, NULL, false), DLOG_BREAK_REORDERED);
	}
	/* truncated tail: the last record cut inside */
	write_file(fx->f2, (const char *const *)fx->lines, all10, 10, 40);
	assert_int_equal(verify(&v, fx->f2, NULL, false), DLOG_BREAK_TRUNCATED);
	assert_int_equal(v.line, 10);
	assert_int_equal(v.seq, 10);
	assert_int_equal(v.records, 9);
}

static void
test_across_rotation(void **state)
{
	struct fix *fx = *state;
	struct dlog_verify v;
	char **c;

	/* edited in the new file */
	c = edited(fx, 7, "2026-11-30T10", "2026-11-30T11");
	write_file(fx->f1, (const char *const *)c, all10, 5, 0);
	write_file(fx->f2, (const char *const *)c, all10 + 5, 5, 0);
	assert_int_equal(verify(&v, fx->f1, fx->f2, false), DLOG_BREAK_EDITED);
	assert_int_equal(v.line, 3);
	assert_int_equal(v.seq, 8);
	assert_non_null(strstr(v.message, "decisions.jsonl:3"));
	free(c[7]);

	/* edited in the rotated file and re-hashed: found at the first record of the new
	 * file, whose prev carries the rotated file's true last hash */
	c = rehashed(fx, 4);
	write_file(fx->f1, (const char *const *)c, all10, 5, 0);
	write_file(fx->f2, (const char *const *)c, all10 + 5, 5, 0);
	assert_int_equal(verify(&v, fx->f1, fx->f2, false), DLOG_BREAK_EDITED);
	assert_int_equal(v.seq, 6);
	assert_int_equal(v.line, 1);
	free(c[4]);

	/* deleted at the boundary: the last record of the rotated file */
	write_file(fx->f1, (const char *const *)fx->lines, all10, 4, 0);
	write_file(fx->f2, (const char *const *)fx->lines, all10 + 5, 5, 0);
	assert_int_equal(verify(&v, fx->f1, fx->f2, false), DLOG_BREAK_DELETED);
	assert_int_equal(v.seq, 6);
	assert_non_null(strstr(v.message, "5..5"));

	/* deleted: the first record of the new file */
	write_file(fx->f1, (const char *const *)fx->lines, all10, 5, 0);
	write_file(fx->f2, (const char *const *)fx->lines, all10 + 6, 4, 0);
	assert_int_equal(verify(&v, fx->f1, fx->f2, false), DLOG_BREAK_DELETED);
	assert_int_equal(v.seq, 7);

	/* reordered in the new file */
	{
		static const int o[] = { 6, 7, 9, 8, 10 };

		write_file(fx->f2, (const char *const *)fx->lines, o, 5, 0);
		assert_int_equal(verify(&v, fx->f1, fx->f2, false), DLOG_BREAK_REORDERED);
		assert_int_equal(v.seq, 9);
	}
	/* a whole rotated file missing between two others is a deletion */
	write_file(fx->f1, (const char *const *)fx->lines, all10, 3, 0);
	write_file(fx->f2, (const char *const *)fx->lines, all10 + 5, 5, 0);
	assert_int_equal(verify(&v, fx->f1, fx->f2, false), DLOG_BREAK_DELETED);
	assert_non_null(strstr(v.message, "4..5"));

	/* truncated tail of the rotated file */
	write_file(fx->f1, (const char *const *)fx->lines, all10, 5, 10);
	write_file(fx->f2, (const char *const *)fx->lines, all10 + 5, 5, 0);
	assert_int_equal(verify(&v, fx->f1, fx->f2, false), DLOG_BREAK_TRUNCATED);
	assert_non_null(strstr(v.message, "decisions.jsonl.1:5"));

	/* truncated tail of the new file */
	write_file(fx->f1, (const char *const *)fx->lines, all10, 5, 0);
	write_file(fx->f2, (const char *const *)fx->lines, all10 + 5, 5, 1);
	assert_int_equal(verify(&v, fx->f1, fx->f2, false), DLOG_BREAK_TRUNCATED);
	assert_int_equal(v.records, 9);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_intact, setup, teardown),
		cmocka_unit_test_setup_teardown(test_single_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_across_rotation, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
