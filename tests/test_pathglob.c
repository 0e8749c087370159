/* test_pathglob.c - canonical paths and fnmatchcase globs (common/pathglob). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/limits.h"
#include "common/pathglob.h"
#include "common/util.h"

struct glob_case {
	const char *pattern;
	const char *name;
	bool want;
};

/*
 * Expectations are what CPython 3.11 fnmatch.fnmatchcase(name, pattern) returns (strings
 * are UTF-8 here and str there); generated once with python3 and pasted as literals.
 */
static const struct glob_case glob_cases[] = {
	{ "", "", true },
	{ "", "a", false },
	{ "a", "", false },
	{ "*", "", true },
	{ "*", "anything/at/all", true },
	{ "*", "a\nb", true },
	{ "?", "", false },
	{ "?", "a", true },
	{ "?", "/", true },
	{ "?", "\n", true },
	{ "?", "ab", false },
	{ "??", "\xc3""\xa9""", false },
	{ "?", "\xc3""\xa9""", true },
	{ "src/*.c", "src/a.c", true },
	{ "src/*.c", "src/sub/a.c", true },
	{ "src/*.c", "src/a.h", false },
	{ "src/*.c", "lib/src/a.c", false },
	{ "*.c", "a/b/c.c", true },
	{ "*.C", "a.c", false },
	{ "A*", "abc", false },
	{ "docs/**", "docs/a/b", true },
	{ "docs/**/x", "docs/x", false },
	{ "docs/**/x", "docs/a/x", true },
	{ "*a*b*c*", "aXbXc", true },
	{ "*a*b*c*", "aXcXb", false },
	{ "a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false },
	{ "*?", "", false },
	{ "*?", "x", true },
	{ "?*?", "x", false },
	{ "?*?", "xy", true },
	{ "a?c", "a/c", true },
	{ "a?c", "abbc", false },
	{ "[abc]", "b", true },
	{ "[abc]", "d", false },
	{ "[!abc]", "d", true },
	{ "[!abc]", "a", false },
	{ "[!abc]", "/", true },
	{ "[!abc]", "\n", true },
	{ "[^abc]", "^", true },
	{ "[^abc]", "d", false },
	{ "[a-z]", "m", true },
	{ "[a-z]", "M", false },
	{ "[a-z]", "-", false },
	{ "[z-a]", "m", false },
	{ "[z-a]", "z", false },
	{ "[!z-a]", "q", true },
	{ "[!z-a]", "/", true },
	{ "[]]", "]", true },
	{ "[]a]", "a", true },
	{ "[]]", "a", false },
	{ "[!]]", "]", false },
	{ "[!]]", "x", true },
	{ "[!]", "!", false },
	{ "[!]", "!]", false },
	{ "[", "[", true },
	{ "[", "a", false },
	{ "[a", "[a", true },
	{ "[a", "a", false },
	{ "a[", "a[", true },
	{ "[]", "[]", true },
	{ "[][]", "[", true },
	{ "[][]", "]", true },
	{ "[a-]", "-", true },
	{ "[a-]", "a", true },
	{ "[a-]", "b", false },
	{ "[-a]", "-", true },
	{ "[-a]", "b", false },
	{ "[!-a]", "-", false },
	{ "[!-a]", "b", true },
	{ "[--0]", ".", true },
	{ "[--0]", "1", false },
	{ "[a-c-e]", "-", true },
	{ "[a-c-e]", "d", false },
	{ "[a-c-e]", "e", true },
	{ "[c-a!x]", "x", false },
	{ "[c-a!x]", "y", true },
	{ "[c-b-a]", "-", true },
	{ "[c-b-a]", "a", true },
	{ "[c-b-a]", "b", false },
	{ "[\\]", "\\", true },
	{ "[\\]a]", "\\]a", false },
	{ "[\\-z]", "a", true },
	{ "\\*", "\\x", true },
	{ "\\*", "*", false },
	{ "[*]", "*", true },
	{ "[*]", "a", false },
	{ "[?]", "?", true },
	{ "[?]", "a", false },
	{ "[[]", "[", true },
	{ "[[]", "]", false },
	{ "[a&&b]", "&", true },
	{ "[a||b]", "|", true },
	{ "[~~]", "~", true },
	{ "[\xc3""\xa9""]", "\xc3""\xa9""", true },
	{ "[\xc3""\xa0""-\xc3""\xaa""]", "\xc3""\xa9""", true },
	{ "[!\xc3""\xa9""]", "e", true },
	{ "x[/]y", "x/y", true },
	{ "*/*", "a/b", true },
	{ "*/*", "ab", false },
	{ "a.b", "axb", false },
	{ "a.b", "a.b", true },
	{ "(a)", "(a)", true },
	{ "a+", "aa", false },
	{ "a{1,2}", "a{1,2}", true },
	{ "$", "$", true },
	{ "^a", "^a", true },
	{ "*.tar.gz", "x.tar.gz", true },
	{ "*.tar.gz", "x.tar.gz.bak", false },
	{ "**", "/", true },
	{ "a*", "a", true },
	{ "*a", "a", true },
	{ "*a*", "bab", true },
	{ "[0-9][0-9]*", "42x", true },
	{ "[0-9][0-9]*", "4x", false },
	{ "[!0-9]*", "x9", true },
	{ "[!0-9]*", "9x", false },
	{ "*[!/]", "a/", false },
	{ "*[!/]", "a/b", true },
	{ "?*[!a]", "ab", true },
	{ "?*[!a]", "ba", false },
	/* invalid UTF-8: each bad byte is one character (surrogateescape) */
	{ "?", "\xff", true },
	{ "??", "\xff\xfe", true },
	{ "?", "\xc3", true },
	{ "??", "\xc3(", true },
	{ "?", "\xed\xa0\x80", false },          /* encoded surrogate: three characters */
	{ "???", "\xed\xa0\x80", true },
	{ "[\xff]", "\xff", true },
	{ "[\xff]", "\xfe", false },
};

static void
test_glob_match(void **state)
{
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(glob_cases); i++) {
		const struct glob_case *tc = &glob_cases[i];

		if (glob_match(tc->pattern, tc->name) != tc->want) {
			print_error("glob_match(\"%s\", \"%s\") != %d\n", tc->pattern, tc->name,
			    tc->want);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	assert_false(glob_match(NULL, "a"));
	assert_false(glob_match("a", NULL));
}

static void
test_glob_bounds(void **state)
{
	static char pat[EGRESS_GLOB_MAX + 2];
	static char name[EGRESS_PATH_MAX];

	(void)state;
	/* Longest accepted pattern works; one byte more is refused (never a silent match). */
	memset(pat, '*', EGRESS_GLOB_MAX);
	pat[EGRESS_GLOB_MAX] = '\0';
	assert_true(glob_valid(pat));
	assert_true(glob_match(pat, "x"));
	pat[EGRESS_GLOB_MAX] = '*';
	pat[EGRESS_GLOB_MAX + 1] = '\0';
	assert_false(glob_valid(pat));
	assert_false(glob_match(pat, "x"));
	assert_false(glob_valid(NULL));

	/* Pathological for backtracking matchers: must be quick here (O(n*m)). */
	for (size_t i = 0; i < EGRESS_GLOB_MAX / 2; i++) {
		pat[2 * i] = '*';
		pat[2 * i + 1] = 'a';
	}
	pat[EGRESS_GLOB_MAX - 1] = 'b';
	pat[EGRESS_GLOB_MAX] = '\0';
	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	uint64_t t0 = mono_msec();
	assert_false(glob_match(pat, name));
	assert_true(mono_msec() - t0 < 5000);
	/* A class-heavy pattern of maximum length compiles within its bounds. */
	memset(pat, '[', EGRESS_GLOB_MAX);
	pat[EGRESS_GLOB_MAX - 1] = ']';
	pat[EGRESS_GLOB_MAX] = '\0';
	assert_false(glob_match(pat, "x"));
	for (size_t i = 0; i + 4 <= EGRESS_GLOB_MAX; i += 4)
		memcpy(pat + i, "[a-]", 4);
	assert_false(glob_match(pat, "a"));
}

static void
test_glob_is_pattern(void **state)
{
	(void)state;
	assert_false(glob_is_pattern("src/a.c"));
	assert_false(glob_is_pattern(""));
	assert_false(glob_is_pattern(NULL));
	assert_true(glob_is_pattern("*.c"));
	assert_true(glob_is_pattern("a?"));
	assert_true(glob_is_pattern("a[b"));
}

static void
test_path_glob_match(void **state)
{
	(void)state;
	/* A literal directory entry covers everything beneath it... */
	assert_true(path_glob_match("src", "src"));
	assert_true(path_glob_match("src", "src/a.c"));
	assert_true(path_glob_match("src", "src/a/b/c.c"));
	assert_true(path_glob_match("src/lib", "src/lib/x"));
	/* ...and its negative twins: not a sibling with the same prefix, not a parent. */
	assert_false(path_glob_match("src", "srcx"));
	assert_false(path_glob_match("src", "srcx/a.c"));
	assert_false(path_glob_match("src", "lib/src/a.c"));
	assert_false(path_glob_match("src/lib", "src"));
	assert_false(path_glob_match("src/lib", "src/libx/a"));
	assert_false(path_glob_match("", "a"));
	assert_false(path_glob_match(NULL, "a"));
	assert_false(path_glob_match("a", NULL));
	/* A glob gets no directory extension: fnmatchcase alone. */
	assert_true(path_glob_match("src/*", "src/a/b.c"));       /* '*' crosses '/' */
	assert_false(path_glob_match("sr?", "src/a.c"));
	assert_true(path_glob_match("sr?", "src"));
	assert_false(path_glob_match("s[r]c", "src/a.c"));
	assert_true(path_glob_match("*.c", "src/a.c"));
	assert_false(path_glob_match("*.c", "src/a.h"));
}

struct path_case {
	const char *p;
	enum path_err want;
};

static const struct path_case path_cases[] = {
	{ "a", PATH_OK },
	{ "src/a.c", PATH_OK },
	{ "a/b/c/d.txt", PATH_OK },
	{ ".gitignore", PATH_OK },
	{ "a/.hidden/b", PATH_OK },
	{ "...", PATH_OK },
	{ "a/..b/c", PATH_OK },
	{ "a/b..", PATH_OK },
	{ "caf\xc3\xa9", PATH_OK },
	{ "sp ace", PATH_OK },
	{ "", PATH_ERR_EMPTY },
	{ "/", PATH_ERR_ABSOLUTE },
	{ "/etc/passwd", PATH_ERR_ABSOLUTE },
	{ "a\\b", PATH_ERR_BACKSLASH },
	{ "..\\a", PATH_ERR_BACKSLASH },
	{ "a\nb", PATH_ERR_CONTROL },
	{ "a\tb", PATH_ERR_CONTROL },
	{ "a\x7f", PATH_ERR_CONTROL },
	{ "a\x1b[0m", PATH_ERR_CONTROL },
	{ "a//b", PATH_ERR_EMPTY_COMPONENT },
	{ "a/", PATH_ERR_EMPTY_COMPONENT },
	{ ".", PATH_ERR_DOT },
	{ "./a", PATH_ERR_DOT },
	{ "a/./b", PATH_ERR_DOT },
	{ "a/.", PATH_ERR_DOT },
	{ "..", PATH_ERR_DOTDOT },
	{ "../a", PATH_ERR_DOTDOT },
	{ "a/../b", PATH_ERR_DOTDOT },
	{ "a/..", PATH_ERR_DOTDOT },
};

static void
test_path_check(void **state)
{
	static char longp[EGRESS_REPO_PATH_MAX + 2];

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(path_cases); i++) {
		enum path_err got = path_check(path_cases[i].p);

		if (got != path_cases[i].want)
			fail_msg("path_check(\"%s\") = %s, want %s", path_cases[i].p,
			    path_err_str(got), path_err_str(path_cases[i].want));
	}
	assert_int_equal(path_check(NULL), PATH_ERR_EMPTY);
	memset(longp, 'a', EGRESS_REPO_PATH_MAX);
	longp[EGRESS_REPO_PATH_MAX] = '\0';
	assert_int_equal(path_check(longp), PATH_OK);
	longp[EGRESS_REPO_PATH_MAX] = 'a';
	longp[EGRESS_REPO_PATH_MAX + 1] = '\0';
	assert_int_equal(path_check(longp), PATH_ERR_TOO_LONG);
	for (int e = PATH_OK; e <= PATH_ERR_DOTDOT; e++)
		assert_string_not_equal(path_err_str((enum path_err)e), "invalid path");
}

/* git's own .git rules (core.protectNTFS, core.protectHFS), with negative twins. */
static void
test_dotgit(void **state)
{
	static const char *const yes[] = {
		".git", ".GIT", ".Git", "a/.git/b", ".git.", ".git ", ".git. . .", "GIT~1", "git~1",
		"a/Git~1/x", ".git::$INDEX_ALLOCATION", ".git:x",
		".g\xe2\x80\x8cit", "\xe2\x80\x8d.git", ".git\xef\xbb\xbf", ".G\xe2\x80\xaeIT",
		".gi\xe2\x81\xaat", "a/.git\xe2\x80\x8f/b", ".git\xff",
	};
	static const char *const no[] = {
		"git", ".gitx", ".gi", "x.git", ".git~1", "git~2", "GIT~11", ".gitignore",
		"a/.gitmodules", ".g\xe2\x80\x8bit" /* U+200B is not ignorable */, "..git",
		".git.x", "a.git/b", ".gi\xfft", "g.it",
	};
	static const char *const ctl_yes[] = {
		".gitmodules", "a/.GITMODULES", ".gitmodules.", ".gitmodules ", "gitmod~1",
		"GITMOD~4", "gi7eba~1", "gi7eba~9", ".gitattributes", "gitatt~2", "gi7d29~1",
		".gitignore", "gitign~1", "gi250a~3", ".mailmap", "mailma~1", "maba30~2",
		".g\xe2\x80\x8citmodules", "x/.gitignore::$DATA",
	};
	static const char *const ctl_no[] = {
		".gitmodule", "gitmodules", ".gitmodulesx", "gitmod~5", "gi7eba~0", "a/.git",
		".gitmodules/x", "gitmod~1x", ".mailmaps",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!path_has_dotgit(yes[i]))
			fail_msg("not .git: %s", yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (path_has_dotgit(no[i]))
			fail_msg("taken for .git: %s", no[i]);
	for (size_t i = 0; i < sizeof(ctl_yes) / sizeof(ctl_yes[0]); i++)
		if (!path_is_git_control_file(ctl_yes[i]))
			fail_msg("not a git control file: %s", ctl_yes[i]);
	for (size_t i = 0; i < sizeof(ctl_no) / sizeof(ctl_no[0]); i++)
		if (path_is_git_control_file(ctl_no[i]))
			fail_msg("taken for a git control file: %s", ctl_no[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_glob_match),
		cmocka_unit_test(test_glob_bounds),
		cmocka_unit_test(test_glob_is_pattern),
		cmocka_unit_test(test_path_glob_match),
		cmocka_unit_test(test_path_check),
		cmocka_unit_test(test_dotgit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
