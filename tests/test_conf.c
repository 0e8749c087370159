/* test_conf.c - schema-checked INI loading and value parsers (common/conf). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/limits.h"
#include "common/util.h"

static const struct conf_key schema[] = {
	{ "", "version", 0 },
	{ "egressd", "listen", CONF_LIST },
	{ "egressd", "log_level", 0 },
	{ "egressd", "timeout", 0 },
	{ "egressd", "max_body", 0 },
	{ "egressd", "verbose", 0 },
	{ "egressd", "workers", 0 },
	{ "grant *", "allow", CONF_LIST },
	{ "grant *", "principal", CONF_REQUIRED },
	{ "grant *", "pinning", 0 },
	{ "grant special", "note", 0 },
};

static struct conf *
load(const char *text, char *err, size_t errlen)
{
	return conf_load_string("t.ini", text, strlen(text), schema, EGRESS_NELEM(schema), err,
	    errlen);
}

static void
test_load_ok(void **state)
{
	char err[256];
	const char *text =
	    "; leading comment\n"
	    "version = 1\n"
	    "\n"
	    "[egressd]\n"
	    "listen = 127.0.0.1:3128\n"
	    "# hash comment\n"
	    "listen=[::1]:3128\n"
	    "log_level = debug ; inline comment\n"
	    "timeout = 30s\n"
	    "max_body = 64M\n"
	    "verbose = yes\n"
	    "workers = 4\n"
	    "  ; an indented comment is still a comment\n"
	    "\n"
	    "[grant ci-runner]\n"
	    "principal = ci\n"
	    "allow = https://example.com\n"
	    "allow = tcp://example.org:22\n"
	    "[grant other]\n"
	    "principal : other\n"
	    "[grant special]\n"
	    "principal = s\n"
	    "note = keys of the exact section and of the pattern apply\n";
	struct conf *c = load(text, err, sizeof(err));

	(void)state;
	if (c == NULL)
		fail_msg("load: %s", err);
	assert_string_equal(conf_file(c), "t.ini");
	assert_int_equal(conf_nsections(c), 5);
	assert_string_equal(conf_section_name(c, 0), "");
	assert_string_equal(conf_section_name(c, 1), "egressd");
	assert_string_equal(conf_section_label(c, 1), "");
	assert_string_equal(conf_section_name(c, 2), "grant ci-runner");
	assert_string_equal(conf_section_label(c, 2), "ci-runner");
	assert_string_equal(conf_section_label(c, 3), "other");
	assert_null(conf_section_name(c, 5));
	assert_int_equal(conf_find_section(c, "grant other"), 3);
	assert_int_equal(conf_find_section(c, "grant"), -1);
	assert_int_equal(conf_find_section(c, "nope"), -1);

	unsigned line = 99;
	assert_string_equal(conf_get(c, 0, "version", &line), "1");
	assert_int_equal(line, 2);
	assert_string_equal(conf_get(c, 1, "log_level", NULL), "debug");
	assert_null(conf_get(c, 1, "absent", &line));
	assert_int_equal(line, 0);
	assert_null(conf_get(c, 42, "listen", NULL));

	size_t n = 0;
	const char *const *l = conf_get_list(c, 1, "listen", &n);
	assert_int_equal(n, 2);
	assert_string_equal(l[0], "127.0.0.1:3128");
	assert_string_equal(l[1], "[::1]:3128");
	assert_null(l[2]);
	assert_int_equal(conf_line(c, 1, "listen"), 5);
	assert_null(conf_get_list(c, 1, "absent", &n));
	assert_int_equal(n, 0);

	l = conf_get_list(c, 2, "allow", &n);
	assert_int_equal(n, 2);
	assert_string_equal(l[1], "tcp://example.org:22");
	assert_string_equal(conf_get(c, 3, "principal", NULL), "other");
	assert_string_equal(conf_get(c, 4, "note", NULL), "keys of the exact section and of the pattern apply");

	/* typed getters */
	bool b = false;
	long long ll = 0;
	uint64_t u = 0;
	assert_int_equal(conf_get_bool(c, 1, "verbose", false, &b, err, sizeof(err)), 0);
	assert_true(b);
	assert_int_equal(conf_get_bool(c, 1, "absent", true, &b, err, sizeof(err)), 0);
	assert_true(b);
	assert_int_equal(conf_get_int(c, 1, "workers", 1, 64, 2, &ll, err, sizeof(err)), 0);
	assert_int_equal(ll, 4);
	assert_int_equal(conf_get_int(c, 1, "absent", 1, 64, 2, &ll, err, sizeof(err)), 0);
	assert_int_equal(ll, 2);
	assert_int_equal(conf_get_int(c, 1, "workers", 5, 64, 2, &ll, err, sizeof(err)), -1);
	assert_string_equal(err, "t.ini:12: workers: too small integer '4' (allowed 5..64)");
	assert_int_equal(conf_get_size(c, 1, "max_body", UINT64_MAX, 0, &u, err, sizeof(err)), 0);
	assert_int_equal(u, 64ull << 20);
	assert_int_equal(conf_get_size(c, 1, "max_body", 1024, 0, &u, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "t.ini:10: max_body: bad size '64M'"));
	assert_int_equal(conf_get_size(c, 1, "absent", 1024, 7, &u, err, sizeof(err)), 0);
	assert_int_equal(u, 7);
	assert_int_equal(conf_get_duration_ms(c, 1, "timeout", UINT64_MAX, 0, &u, err,
	    sizeof(err)), 0);
	assert_int_equal(u, 30000);
	assert_int_equal(conf_get_duration_ms(c, 1, "timeout", 1000, 0, &u, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "t.ini:9: timeout: bad duration '30s'"));
	assert_int_equal(conf_get_duration_ms(c, 1, "absent", 1000, 5, &u, err, sizeof(err)), 0);
	assert_int_equal(u, 5);
	assert_int_equal(conf_get_bool(c, 1, "log_level", false, &b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "t.ini:8: log_level: expected"));
	assert_int_equal(conf_get_int(c, 1, "log_level", 0, 10, 0, &ll, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "t.ini:8: log_level: invalid integer 'debug'"));
	conf_free(c);
	conf_free(NULL);
}

struct bad_case {
	const char *text;
	const char *err;        /* exact expected message */
};

static const struct bad_case bad_cases[] = {
	{ "[egressd]\nlisten = x\n[foo]\n", "t.ini:3: unknown section [foo]" },
	{ "[egressd]\nbogus = 1\n", "t.ini:2: unknown key 'bogus' in [egressd]" },
	{ "[egressd]\nlog_level = a\nlog_level = b\n",
	  "t.ini:3: duplicate key 'log_level' in [egressd] (first at line 2)" },
	{ "[egressd]\n[egressd]\n", "t.ini:2: duplicate section [egressd] (first at line 1)" },
	{ "[grant a]\npinning = required\n", "t.ini:1: [grant a]: missing required key 'principal'" },
	{ "[grant a]\nprincipal = p\n[grant b]\n",
	  "t.ini:3: [grant b]: missing required key 'principal'" },
	{ "[grant]\n", "t.ini:1: unknown section [grant]" },
	{ "[grant a b]\n", "t.ini:1: section name must be [name] or [kind label]: [grant a b]" },
	{ "[grant  a]\n", "t.ini:1: section name must be [name] or [kind label]: [grant  a]" },
	{ "[ egressd]\n", "t.ini:1: section name must be [name] or [kind label]: [ egressd]" },
	{ "[egressd ]\n", "t.ini:1: section name must be [name] or [kind label]: [egressd ]" },
	{ "[]\n", "t.ini:1: section name empty or longer than 49 characters" },
	{ "[grant aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]\n",
	  "t.ini:1: section name empty or longer than 49 characters" },
	{ "[egressd\n", "t.ini:1: section header without ']'" },
	{ "[egressd] junk\n", "t.ini:1: text after section header" },
	{ "[grant *]\n", "t.ini:1: bad character in section name" },
	{ "[grant\ta]\n", "t.ini:1: bad character in section name" },
	{ "[egressd]\nlog_level = a\n  continued\n",
	  "t.ini:3: indented line (continuation lines are not supported)" },
	{ "[egressd]\n  log_level = a\n",
	  "t.ini:2: indented line (continuation lines are not supported)" },
	{ "\t[egressd]\n", "t.ini:1: indented line (continuation lines are not supported)" },
	{ "[egressd]\nlog_level\n",
	  "t.ini:2: syntax error (expected 'key = value', '[section]' or a comment)" },
	{ "[egressd]\n= value\n", "t.ini:2: empty key" },
	{ "[egressd]\nlog_level = a\x01\n", "t.ini:2: control character in line" },
	{ "[egressd]\nlog_level = a\x7f\n", "t.ini:2: control character in line" },
	{ "[egressd]\nlog_level = a\rb\n", "t.ini:2: control character in line" },
	{ "[egressd]\nlisten = x\n", NULL },    /* sanity: the good twin loads */
	{ "principal = p\n", NULL },            /* "" section is in the schema: version only */
};

static void
test_load_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(bad_cases); i++) {
		char err[256] = "";
		struct conf *c = load(bad_cases[i].text, err, sizeof(err));

		if (bad_cases[i].err == NULL) {
			if (i + 1 == EGRESS_NELEM(bad_cases)) {
				/* "principal" is not a key of "": must fail. */
				assert_null(c);
				assert_string_equal(err, "t.ini:1: unknown key 'principal' in []");
				continue;
			}
			if (c == NULL)
				fail_msg("case %zu: %s", i, err);
			conf_free(c);
			continue;
		}
		if (c != NULL)
			fail_msg("case %zu loaded: %s", i, bad_cases[i].text);
		if (strcmp(err, bad_cases[i].err) != 0)
			fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, bad_cases[i].err);
	}
}

static const struct conf_key noroot[] = {
	{ "egressd", "listen", CONF_LIST },
	{ "", "must", CONF_REQUIRED },
};

static void
test_load_edges(void **state)
{
	char err[256];
	struct conf *c;

	(void)state;
	/* Keys outside any section when the schema has no "" section. */
	c = conf_load_string("x.ini", "listen = a\n", 11, noroot, 1, err, sizeof(err));
	assert_null(c);
	assert_string_equal(err, "x.ini:1: key 'listen' outside any section");
	/* A required key of "" is required even when no key precedes the first section. */
	c = conf_load_string("x.ini", "[egressd]\n", 10, noroot, 2, err, sizeof(err));
	assert_null(c);
	assert_string_equal(err, "x.ini:1: missing required key 'must'");
	/* Empty input, CRLF, BOM, no final newline. */
	c = load("", err, sizeof(err));
	assert_non_null(c);
	assert_int_equal(conf_nsections(c), 0);
	conf_free(c);
	c = load("\xef\xbb\xbfversion = 2\r\n[egressd]\r\nlisten = a\r\nlisten = b", err,
	    sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	assert_string_equal(conf_get(c, 0, "version", NULL), "2");
	size_t n;
	const char *const *l = conf_get_list(c, 1, "listen", &n);
	assert_int_equal(n, 2);
	assert_string_equal(l[0], "a");
	assert_string_equal(l[1], "b");
	conf_free(c);
	/* Empty sections are reported too (inih does not call the handler for them). */
	c = load("[egressd]\n[grant x]\nprincipal = p\n", err, sizeof(err));
	assert_non_null(c);
	assert_int_equal(conf_nsections(c), 2);
	conf_free(c);
	/* Embedded NUL, reported with its line. */
	static const char nul[] = "[egressd]\nlisten = a\0b\n";
	c = conf_load_string("t.ini", nul, sizeof(nul) - 1, schema, EGRESS_NELEM(schema), err,
	    sizeof(err));
	assert_null(c);
	assert_string_equal(err, "t.ini:2: NUL byte");
	/* NULL error buffer is fine. */
	c = load("[nope]\n", NULL, 0);
	assert_null(c);
}

static void
test_load_limits(void **state)
{
	char err[256];
	char *big;
	size_t cap = EGRESS_CONF_FILE_MAX + 64, len = 0;
	struct conf *c;

	(void)state;
	big = malloc(cap);
	assert_non_null(big);

	/* Longest allowed line loads; one byte more is refused with its line number. */
	len = (size_t)snprintf(big, cap, "[egressd]\nlog_level = ");
	memset(big + len, 'x', EGRESS_CONF_LINE_MAX - 12);
	len += EGRESS_CONF_LINE_MAX - 12;
	big[len++] = '\n';
	c = conf_load_string("t.ini", big, len, schema, EGRESS_NELEM(schema), err, sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	assert_int_equal(strlen(conf_get(c, 0, "log_level", NULL)), EGRESS_CONF_LINE_MAX - 12);
	conf_free(c);
	big[len - 1] = 'x';
	big[len++] = '\n';
	c = conf_load_string("t.ini", big, len, schema, EGRESS_NELEM(schema), err, sizeof(err));
	assert_null(c);
	assert_string_equal(err, "t.ini:2: line longer than 4096 bytes");

	/* List length. */
	len = (size_t)snprintf(big, cap, "[egressd]\n");
	for (int i = 0; i <= EGRESS_CONF_LIST_MAX; i++)
		len += (size_t)snprintf(big + len, cap - len, "listen = %d\n", i);
	c = conf_load_string("t.ini", big, len, schema, EGRESS_NELEM(schema), err, sizeof(err));
	assert_null(c);
	assert_string_equal(err, "t.ini:1026: more than 1024 values for 'listen'");

	/* File size. */
	memset(big, '\n', EGRESS_CONF_FILE_MAX + 1);
	c = conf_load_string("t.ini", big, EGRESS_CONF_FILE_MAX + 1, schema,
	    EGRESS_NELEM(schema), err, sizeof(err));
	assert_null(c);
	assert_string_equal(err, "t.ini:0: larger than 1048576 bytes");
	c = conf_load_string("t.ini", big, EGRESS_CONF_FILE_MAX, schema, EGRESS_NELEM(schema),
	    err, sizeof(err));
	assert_non_null(c);
	conf_free(c);
	free(big);
}

static void
test_load_file(void **state)
{
	char path[] = "/tmp/egress-test-conf-XXXXXX";
	char err[256];
	int fd;
	struct conf *c;
	const char *text = "[egressd]\nlisten = 127.0.0.1:1\nbad = 1\n";

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	c = conf_load(path, schema, EGRESS_NELEM(schema), err, sizeof(err));
	assert_null(c);
	char want[128];
	snprintf(want, sizeof(want), "%s:3: unknown key 'bad' in [egressd]", path);
	assert_string_equal(err, want);
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, 30), 30);
	close(fd);
	c = conf_load(path, schema, EGRESS_NELEM(schema), err, sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	assert_string_equal(conf_get(c, 0, "listen", NULL), "127.0.0.1:1");
	conf_free(c);
	unlink(path);
	c = conf_load(path, schema, EGRESS_NELEM(schema), err, sizeof(err));
	assert_null(c);
	assert_non_null(strstr(err, "No such file"));
	c = conf_load("/tmp", schema, EGRESS_NELEM(schema), err, sizeof(err));
	assert_null(c);
	assert_string_equal(err, "/tmp: not a regular file");
}

static void
test_parse_bool(void **state)
{
	static const char *const yes[] = { "true", "yes", "on", "1", "TRUE", "Yes" };
	static const char *const no[] = { "false", "no", "off", "0", "False", "OFF" };
	static const char *const bad[] = { "", "2", "y", "n", "tru", "true ", " true", "01",
	    "enable" };
	bool b;

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(yes); i++) {
		b = false;
		assert_int_equal(conf_parse_bool(yes[i], &b), 0);
		assert_true(b);
	}
	for (size_t i = 0; i < EGRESS_NELEM(no); i++) {
		b = true;
		assert_int_equal(conf_parse_bool(no[i], &b), 0);
		assert_false(b);
	}
	for (size_t i = 0; i < EGRESS_NELEM(bad); i++)
		if (conf_parse_bool(bad[i], &b) == 0)
			fail_msg("conf_parse_bool accepted \"%s\"", bad[i]);
	assert_int_equal(conf_parse_bool(NULL, &b), -1);
}

struct num_case {
	const char *in;
	int ok;
	uint64_t want;
};

static void
test_parse_size(void **state)
{
	static const struct num_case cases[] = {
		{ "0", 1, 0 }, { "1", 1, 1 }, { "1024", 1, 1024 }, { "1K", 1, 1024 },
		{ "1k", 1, 1024 }, { "64M", 1, 64ull << 20 }, { "2G", 1, 2ull << 30 },
		{ "3T", 1, 3ull << 40 }, { "16777215T", 1, 16777215ull << 40 },
		{ "18446744073709551615", 1, UINT64_MAX },
		{ "18446744073709551616", 0, 0 }, { "16777216T", 0, 0 },
		{ "", 0, 0 }, { "K", 0, 0 }, { "-1", 0, 0 }, { "+1", 0, 0 }, { " 1", 0, 0 },
		{ "1 ", 0, 0 }, { "1 K", 0, 0 }, { "1KB", 0, 0 }, { "1KK", 0, 0 }, { "1P", 0, 0 },
		{ "1.5M", 0, 0 }, { "0x10", 0, 0 }, { "1e3", 0, 0 },
	};
	uint64_t v;

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(cases); i++) {
		int rc = conf_parse_size(cases[i].in, UINT64_MAX, &v);

		if ((rc == 0) != cases[i].ok || (rc == 0 && v != cases[i].want))
			fail_msg("conf_parse_size(\"%s\") rc %d v %llu", cases[i].in, rc,
			    (unsigned long long)v);
	}
	assert_int_equal(conf_parse_size("1K", 1024, &v), 0);
	assert_int_equal(conf_parse_size("1025", 1024, &v), -1);
	assert_int_equal(conf_parse_size(NULL, 1024, &v), -1);
}

static void
test_parse_duration(void **state)
{
	static const struct num_case cases[] = {
		{ "0", 1, 0 }, { "30", 1, 30000 }, { "30s", 1, 30000 }, { "250ms", 1, 250 },
		{ "5m", 1, 300000 }, { "2h", 1, 7200000 }, { "0ms", 1, 0 },
		{ "18446744073709551615ms", 1, UINT64_MAX },
		{ "18446744073709551615s", 0, 0 }, { "18446744073709552h", 0, 0 },
		{ "", 0, 0 }, { "s", 0, 0 }, { "ms", 0, 0 }, { "-1s", 0, 0 }, { "1 s", 0, 0 },
		{ "1S", 0, 0 }, { "1d", 0, 0 }, { "1sec", 0, 0 }, { "1m30s", 0, 0 },
		{ "1.5s", 0, 0 }, { "1us", 0, 0 }, { " 1", 0, 0 }, { "1mss", 0, 0 },
	};
	uint64_t v;

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(cases); i++) {
		int rc = conf_parse_duration_ms(cases[i].in, UINT64_MAX, &v);

		if ((rc == 0) != cases[i].ok || (rc == 0 && v != cases[i].want))
			fail_msg("conf_parse_duration_ms(\"%s\") rc %d v %llu", cases[i].in, rc,
			    (unsigned long long)v);
	}
	assert_int_equal(conf_parse_duration_ms("1s", 1000, &v), 0);
	assert_int_equal(conf_parse_duration_ms("1001ms", 1000, &v), -1);
	assert_int_equal(conf_parse_duration_ms(NULL, 1000, &v), -1);
}

/* CONF_NO_INLINE_COMMENT: a value that inih would cut at " ;" is refused, not cut. */
static void
test_no_inline_comment(void **state)
{
	static const struct conf_key strict_schema[] = {
		{ "s", "strict", CONF_LIST | CONF_NO_INLINE_COMMENT },
		{ "s", "loose", 0 },
	};
	static const char *const bad[] = {
		"[s]\nstrict = a ; b\n", "[s]\nstrict = a\t;b\n", "[s]\nstrict: x ;\n",
	};
	char err[256];
	struct conf *c;
	unsigned line;

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(bad); i++) {
		c = conf_load_string("n.ini", bad[i], strlen(bad[i]), strict_schema,
		    EGRESS_NELEM(strict_schema), err, sizeof(err));
		assert_null(c);
		assert_non_null(strstr(err, "n.ini:2: the value of 'strict'"));
	}
	/* negative twins: ';' glued to a word stays in the value; a whole-line comment and
	 * the inline comment of a key without the flag behave as before */
	static const char ok[] = "[s]\n; a comment ; with ;\nstrict = a; b\nloose = c ; cut\n";
	c = conf_load_string("n.ini", ok, strlen(ok), strict_schema,
	    EGRESS_NELEM(strict_schema), err, sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	assert_string_equal(conf_get(c, 0, "strict", &line), "a; b");
	assert_string_equal(conf_get(c, 0, "loose", &line), "c");
	conf_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_ok),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_load_edges),
		cmocka_unit_test(test_load_limits),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_parse_bool),
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_parse_duration),
		cmocka_unit_test(test_no_inline_comment),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
