/* test_logschema.c - docs/decision-log.md stays in step with the code: every member name
 * egressd puts in a decision-log record must be documented in a table row of the schema.
 *
 * The member names are taken from the code that builds the records: every
 * json_object_set_new(o, "NAME", ...) in egressd/session_record.c (decision and close fields)
 * and the members dlog.c adds itself (v, time, seq, event, prev, hash). Reading the
 * source (rather than a list kept in this test) is the point: a field added to
 * session.c without a row in the schema fails here. The audit fixture's records
 * (tests/logfixture.h) are checked too, so the tests exercise documented records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/ctl/logread.h"
#include "logfixture.h"

static char *
slurp_src(const char *rel)
{
	const char *root = getenv("EGRESS_SOURCE_DIR");
	char path[1024];
	FILE *f;
	char *b;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", root != NULL ? root : "..", rel);
	f = fopen(path, "r");
	if (f == NULL)
		fail_msg("cannot open %s (set EGRESS_SOURCE_DIR)", path);
	b = calloc(1, 1 << 20);
	n = fread(b, 1, (1 << 20) - 1, f);
	b[n] = '\0';
	fclose(f);
	return b;
}

/* Is `name` (in backquotes) in a table row (a line starting with '|') of doc? */
static bool
documented(const char *doc, const char *name)
{
	char want[96];

	snprintf(want, sizeof(want), "`%s`", name);
	for (const char *p = doc; (p = strstr(p, want)) != NULL; p++) {
		const char *bol = p;

		while (bol > doc && bol[-1] != '\n')
			bol--;
		if (*bol == '|')
			return true;
	}
	return false;
}

static int
check_names(const char *doc, char names[][64], size_t n)
{
	int missing = 0;

	for (size_t i = 0; i < n; i++) {
		if (!documented(doc, names[i])) {
			fprintf(stderr, "decision-log field `%s` is emitted but not documented in a "
			    "table of docs/decision-log.md\n", names[i]);
			missing++;
		}
	}
	return missing;
}

/* Every json_object_set_new(<object>, "NAME", ...) in src, and every member written by
 * egressd/jsonw.h (jsonw_str(<writer>, "NAME", ...) and its siblings, and
 * addrcheck_classes_w): the member names. */
static size_t
scan_names(const char *src, char names[][64], size_t n, size_t max)
{
	static const char *const calls[] = { "json_object_set_new(", "jsonw_str(",
		"jsonw_strn(", "jsonw_null(", "jsonw_bool(", "jsonw_int(", "jsonw_array_begin(",
		"addrcheck_classes_w(" };

	for (size_t c = 0; c < sizeof(calls) / sizeof(calls[0]); c++) {
		const char *call = calls[c];
		size_t cl = strlen(call);

		for (const char *p = src; (p = strstr(p, call)) != NULL && n < max; p++) {
			const char *k = p + cl, *e;

			if (p > src && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z')))
				continue;   /* part of a longer name */
			while ((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || *k == '_' ||
			    (*k >= '0' && *k <= '9') || *k == '-' || *k == '>' || *k == '.' ||
			    *k == '&')
				k++;
			if (strncmp(k, ", \"", 3) != 0)
				continue;   /* a computed name, or a declaration: not a record member */
			k += 3;
			e = strchr(k, '"');
			assert_non_null(e);
			assert_true(e - k > 0 && e - k < 64);
			memcpy(names[n], k, (size_t)(e - k));
			names[n][e - k] = '\0';
			n++;
		}
	}
	return n;
}

static void
test_session_fields_documented(void **state)
{
	/* session_record.c builds decision and close records; dlog.c builds rotate records */
	char *src = slurp_src("egressd/session_record.c"), *dsrc = slurp_src("egressd/dlog.c");
	char *doc = slurp_src("docs/decision-log.md");
	char names[512][64];
	size_t n = 0, nd;

	(void)state;
	n = scan_names(src, names, 0, 500);
	/* the known ones must be found, or the scan itself is broken */
	assert_true(n >= 20);
	nd = scan_names(dsrc, names, n, 500);
	assert_true(nd >= n + 3);
	n = nd;
	free(dsrc);
	/* auditev.c builds start, stop, config and grant records */
	dsrc = slurp_src("egressd/auditev.c");
	nd = scan_names(dsrc, names, n, 500);
	assert_true(nd >= n + 10);
	n = nd;
	free(dsrc);
	/* mitm.c builds the records of intercepted requests */
	dsrc = slurp_src("egressd/mitm.c");
	n = scan_names(dsrc, names, n, 500);
	free(dsrc);
	{
		static const char *const common[] = { "v", "time", "seq", "event", "prev", "hash" };

		for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
			snprintf(names[n++], 64, "%s", common[i]);
	}
	assert_int_equal(check_names(doc, names, n), 0);
	free(src);
	free(doc);
}

static void
test_fixture_fields_documented(void **state)
{
	char *buf = NULL, *doc = slurp_src("docs/decision-log.md");
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct lchain c;
	char names[64][64];
	size_t n = 0;

	(void)state;
	lchain_init(&c, f);
	lchain_sample(&c);
	fclose(f);
	for (char *line = buf, *nl; *line != '\0'; line = nl + 1) {
		struct logrec rec;
		const char *k;
		json_t *v;

		nl = strchr(line, '\n');
		assert_int_equal(logrec_parse(line, (size_t)(nl - line), &rec, NULL, 0), 0);
		json_object_foreach(rec.obj, k, v) {
			bool seen = false;

			for (size_t i = 0; i < n; i++)
				seen = seen || strcmp(names[i], k) == 0;
			if (!seen && n < 64)
				snprintf(names[n++], 64, "%s", k);
		}
		logrec_clear(&rec);
	}
	assert_int_equal(check_names(doc, names, n), 0);
	free(buf);
	free(doc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_session_fields_documented),
		cmocka_unit_test(test_fixture_fields_documented),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
