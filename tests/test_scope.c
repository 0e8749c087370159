/* test_scope.c - the scope check: canonical paths, .git, forbidden beats allowed, every
 * violating path named (executor/scope). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/util.h"
#include "executor/scope.h"

static char *allowed_v[] = { "README.md", "docs", "src/*.c" };
static char *forbidden_v[] = { "docs/secret", "src/gen_*.c" };
static const struct strlist allowed = { allowed_v, 3, true, 1 };
static const struct strlist forbidden = { forbidden_v, 2, true, 2 };

static void
test_paths(void **state)
{
	static const struct {
		const char *path;
		enum reason want;
	} cases[] = {
		{ "README.md", REASON_ALLOWED },
		{ "docs/guide.md", REASON_ALLOWED },
		{ "docs/a/b/c.md", REASON_ALLOWED },
		{ "docs", REASON_ALLOWED },
		{ "src/a.c", REASON_ALLOWED },
		{ "src/sub/a.c", REASON_ALLOWED },          /* fnmatch '*' crosses '/' */
		/* negative twins */
		{ "README.md.bak", REASON_SCOPE_VIOLATION },
		{ "docsx/a.md", REASON_SCOPE_VIOLATION },   /* literal dir is not a prefix match */
		{ "src/a.h", REASON_SCOPE_VIOLATION },
		{ "Makefile", REASON_SCOPE_VIOLATION },
		{ "docs/secret", REASON_SCOPE_FORBIDDEN },
		{ "docs/secret/key.pem", REASON_SCOPE_FORBIDDEN },
		{ "src/gen_x.c", REASON_SCOPE_FORBIDDEN },
		{ ".git/config", REASON_SCOPE_GIT_DIR },
		{ ".git", REASON_SCOPE_GIT_DIR },
		{ "docs/.git/hooks/x", REASON_SCOPE_GIT_DIR },
		{ "docs/.GIT/config", REASON_SCOPE_GIT_DIR },
		{ "docs/.gitignore", REASON_ALLOWED },
		/* what git takes for .git on NTFS and HFS+ */
		{ "docs/.git./x", REASON_SCOPE_GIT_DIR },
		{ "docs/.git ", REASON_SCOPE_GIT_DIR },
		{ "docs/GIT~1/config", REASON_SCOPE_GIT_DIR },
		{ "docs/.g\xe2\x80\x8cit/config", REASON_SCOPE_GIT_DIR },
		{ "docs/.gitx", REASON_ALLOWED },
		{ "docs/git~2", REASON_ALLOWED },
		{ "/etc/passwd", REASON_SCOPE_INVALID_PATH },
		{ "docs/../Makefile", REASON_SCOPE_INVALID_PATH },
		{ "docs/./a", REASON_SCOPE_INVALID_PATH },
		{ "docs\\a", REASON_SCOPE_INVALID_PATH },
		{ "docs//a", REASON_SCOPE_INVALID_PATH },
		{ "docs/a\nb", REASON_SCOPE_INVALID_PATH },
		{ "", REASON_SCOPE_INVALID_PATH },
	};

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(cases); i++) {
		print_message("%s\n", cases[i].path);
		assert_int_equal(scope_path(cases[i].path, &allowed, &forbidden), cases[i].want);
	}
}

static void
add(struct changeset *cs, const char *path, const char *old, const char *git,
    const char *upper)
{
	cs->v = reallocarray(cs->v, cs->n + 1, sizeof(*cs->v));
	assert_non_null(cs->v);
	memset(&cs->v[cs->n], 0, sizeof(cs->v[cs->n]));
	cs->v[cs->n].path = strdup(path);
	cs->v[cs->n].old_path = old ? strdup(old) : NULL;
	cs->v[cs->n].git_status = git;
	cs->v[cs->n].upper_kind = upper;
	cs->n++;
}

static void
test_verdict(void **state)
{
	struct changeset cs = { 0 };
	struct scope_verdict v;
	char line[512];

	(void)state;
	add(&cs, "README.md", NULL, "modified", "written");
	add(&cs, "docs/new.md", NULL, "untracked", "written");
	assert_int_equal(scope_check(&cs, &allowed, &forbidden, &v), 0);
	assert_true(v.accepted);
	assert_int_equal(v.n, 0);
	scope_summary(&v, line, sizeof(line));
	assert_string_equal(line, "scope: accepted");
	scope_verdict_free(&v);

	/* One bad path among good ones rejects everything; every bad path is named. */
	add(&cs, "Makefile", NULL, "modified", "written");            /* modified */
	add(&cs, "notes.txt", NULL, "untracked", "written");          /* untracked */
	add(&cs, "LICENSE", NULL, "deleted", "deleted");              /* deleted */
	add(&cs, "build/out.o", NULL, "ignored", "written");          /* ignored */
	add(&cs, "docs/moved.md", "src/old.h", "renamed", NULL);      /* rename source */
	add(&cs, ".git/hooks/pre-commit", NULL, NULL, "written");     /* .git write */
	add(&cs, "docs/secret/k", NULL, NULL, "written");             /* forbidden */
	assert_int_equal(scope_check(&cs, &allowed, &forbidden, &v), 0);
	assert_false(v.accepted);
	assert_int_equal(v.n, 7);
	assert_string_equal(v.v[0].path, "Makefile");
	assert_int_equal(v.v[0].reason, REASON_SCOPE_VIOLATION);
	assert_string_equal(v.v[4].path, "src/old.h");
	assert_int_equal(v.v[5].reason, REASON_SCOPE_GIT_DIR);
	assert_int_equal(v.v[6].reason, REASON_SCOPE_FORBIDDEN);
	scope_summary(&v, line, sizeof(line));
	assert_non_null(strstr(line, "rejected (7 paths)"));
	assert_non_null(strstr(line, "Makefile"));
	json_t *j = scope_to_json(&v);
	assert_false(json_is_true(json_object_get(j, "accepted")));
	assert_int_equal(json_array_size(json_object_get(j, "violations")), 7);
	json_decref(j);
	scope_verdict_free(&v);
	changes_free(&cs);
}

static void
test_empty_allowed(void **state)
{
	static const struct strlist none = { NULL, 0, true, 1 };
	struct changeset cs = { 0 };
	struct scope_verdict v;

	(void)state;
	/* Nothing changed: accepted even with nothing allowed. */
	assert_int_equal(scope_check(&cs, &none, &none, &v), 0);
	assert_true(v.accepted);
	scope_verdict_free(&v);
	add(&cs, "README.md", NULL, "modified", NULL);
	assert_int_equal(scope_check(&cs, &none, &none, &v), 0);
	assert_false(v.accepted);
	scope_verdict_free(&v);
	changes_free(&cs);
}

/* The entry's type decides: new directories are not paths of their own, special files,
 * git control files that are links and escaping links are refused (negative twins). */
static void
test_types(void **state)
{
	struct change c;

	(void)state;
	memset(&c, 0, sizeof(c));
	c.upper_kind = "written";
	c.path = (char *)"newdir";                      /* a new directory outside scope */
	c.is_dir = true;
	c.new_dir = true;
	assert_int_equal(scope_change(&c, &allowed, &forbidden), REASON_ALLOWED);
	c.new_dir = false;                              /* twin: over a (maybe ignored) file */
	assert_int_equal(scope_change(&c, &allowed, &forbidden), REASON_SCOPE_VIOLATION);
	c.new_dir = true;
	c.upper_kind = "opaque";                        /* twin: an opaque one deletes */
	assert_int_equal(scope_change(&c, &allowed, &forbidden), REASON_SCOPE_VIOLATION);
	c.upper_kind = "written";
	c.path = (char *)"docs/secret/sub";             /* twin: never under forbidden */
	assert_int_equal(scope_change(&c, &allowed, &forbidden), REASON_SCOPE_FORBIDDEN);
	c.path = (char *)"newdir/.git";                 /* twin: never .git */
	assert_int_equal(scope_change(&c, &allowed, &forbidden), REASON_SCOPE_GIT_DIR);
	c.is_dir = false;
	c.path = (char *)"docs/fifo";
	assert_int_equal(scope_change(&c, &allowed, &forbidden), REASON_ALLOWED);
	c.special = true;
	assert_int_equal(scope_change(&c, &allowed, &forbidden), REASON_SCOPE_SPECIAL_FILE);
	c.special = false;
	c.path = (char *)"docs/.gitmodules";
	assert_int_equal(scope_change(&c, &allowed, &forbidden), REASON_ALLOWED);
	c.is_link = true;
	assert_int_equal(scope_change(&c, &allowed, &forbidden), REASON_SCOPE_GIT_LINK);
	c.path = (char *)"docs/GITMOD~1";
	assert_int_equal(scope_change(&c, &allowed, &forbidden), REASON_SCOPE_GIT_LINK);
	c.path = (char *)"docs/link";
	assert_int_equal(scope_change(&c, &allowed, &forbidden), REASON_ALLOWED);
	c.link_escape = true;
	assert_int_equal(scope_change(&c, &allowed, &forbidden), REASON_SYMLINK_ESCAPE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_verdict),
		cmocka_unit_test(test_types),
		cmocka_unit_test(test_empty_allowed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
