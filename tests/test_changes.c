/* test_changes.c - the changed set: libgit2 over a temp repository with a fake merged view,
 * united with a hand-built upper layer (executor/changes). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "executor/changes.h"

static char root[256];
static char repo[300], merged[300], upper[300];

__attribute__((format(printf, 1, 2)))
static void
sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("command failed: %s", cmd);
}

static void
put(const char *dir, const char *rel, const char *content)
{
	char p[1024];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/test_changes.XXXXXX");
	if (mkdtemp(root) == NULL)
		return -1;
	snprintf(repo, sizeof(repo), "%s/repo", root);
	snprintf(merged, sizeof(merged), "%s/merged", root);
	snprintf(upper, sizeof(upper), "%s/upper", root);
	sh("mkdir -p %s/src/deep %s/docs && cd %s && git init -q . && "
	    "git config user.email t@example.com && git config user.name t", repo, repo, repo);
	put(repo, "README.md", "hello\n");
	put(repo, "src/a.c", "int a;\n");
	put(repo, "src/deep/b.c", "int b;\n");
	put(repo, "docs/guide.md", "A long enough guide text to be detected as a rename\n"
	    "line two of the guide\nline three of the guide\n");
	put(repo, "gone.txt", "to be deleted\n");
	put(repo, "link-me", "plain file\n");
	put(repo, ".gitignore", "*.log\n");
	sh("cd %s && git add -A && git commit -q -m base", repo);
	/* A pre-existing ignored file (present before the run). */
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	sh("rm -rf %s", root);
	return 0;
}

static const struct change *
find(const struct changeset *cs, const char *path)
{
	for (size_t i = 0; i < cs->n; i++)
		if (strcmp(cs->v[i].path, path) == 0)
			return &cs->v[i];
	return NULL;
}

/* find() that never returns NULL (the compiler sees the abort). */
static const struct change *
must(const struct changeset *cs, const char *path)
{
	const struct change *c = find(cs, path);

	if (c == NULL) {
		print_error("changed set lacks %s\n", path);
		abort();
	}
	return c;
}

static void
fresh_views(void)
{
	sh("rm -rf %s %s && cp -a %s %s && mkdir -p %s", merged, upper, repo, merged, upper);
}

static void
test_git_statuses(void **state)
{
	struct changeset cs;
	char err[512];
	const struct change *c;

	(void)state;
	fresh_views();
	put(merged, "README.md", "hello, world\n");                     /* modified */
	put(merged, "src/new.c", "int n;\n");                           /* untracked */
	sh("mkdir -p %s/newdir/sub && echo x > %s/newdir/sub/f.txt", merged, merged);
	sh("rm %s/gone.txt", merged);                                   /* deleted */
	sh("mv %s/docs/guide.md %s/docs/manual.md", merged, merged);     /* renamed */
	sh("rm %s/link-me && ln -s README.md %s/link-me", merged, merged); /* typechange */
	put(merged, "build.log", "ignored\n");                          /* ignored */
	/* Same size, same mtime as the original: found by content, not by stat. */
	put(merged, "src/deep/b.c", "int z;\n");
	sh("touch -r %s/src/deep/b.c %s/src/deep/b.c", repo, merged);

	assert_int_equal(changes_compute(repo, merged, NULL, &cs, err, sizeof(err)), 0);
	for (size_t i = 0; i < cs.n; i++)
		print_message("%s %s (from %s)\n", cs.v[i].git_status, cs.v[i].path,
		    cs.v[i].old_path ? cs.v[i].old_path : "-");
	assert_int_equal(strlen(cs.base_commit), 40);
	c = must(&cs, "README.md");
	assert_string_equal(c->git_status, "modified");
	c = must(&cs, "src/new.c");
	assert_string_equal(c->git_status, "untracked");
	c = find(&cs, "newdir/sub/f.txt");                               /* recursed */
	assert_non_null(c);
	c = must(&cs, "gone.txt");
	assert_string_equal(c->git_status, "deleted");
	c = must(&cs, "docs/manual.md");
	assert_string_equal(c->git_status, "renamed");
	assert_string_equal(c->old_path, "docs/guide.md");
	c = must(&cs, "link-me");
	assert_string_equal(c->git_status, "typechange");
	c = must(&cs, "src/deep/b.c");
	assert_string_equal(c->git_status, "modified");
	c = must(&cs, "build.log");
	assert_string_equal(c->git_status, "ignored");
	/* Untouched files are not listed; the merged .git is never reported by git. */
	assert_null(find(&cs, "src/a.c"));
	for (size_t i = 0; i < cs.n; i++)
		assert_true(strncmp(cs.v[i].path, ".git/", 5) != 0);
	json_t *j = changes_to_json(&cs);
	assert_int_equal(json_array_size(j), cs.n);
	json_decref(j);
	changes_free(&cs);
}

static void
test_gitignore_trick(void **state)
{
	struct changeset cs;
	char err[512];
	const struct change *c;

	(void)state;
	fresh_views();
	/* The worker ignores everything and writes a file: git still sees it (ignored
	 * included) and the upper layer names it. */
	put(merged, ".gitignore", "*\n");
	put(merged, "src/sneaky.c", "evil\n");
	sh("mkdir -p %s/src", upper);
	put(upper, ".gitignore", "*\n");
	put(upper, "src/sneaky.c", "evil\n");
	assert_int_equal(changes_compute(repo, merged, upper, &cs, err, sizeof(err)), 0);
	c = must(&cs, "src/sneaky.c");
	assert_non_null(c->git_status);
	assert_string_equal(c->upper_kind, "written");
	c = must(&cs, ".gitignore");
	assert_string_equal(c->git_status, "modified");
	/* The copied-up parent "src" (a directory in the lower layer) is not a change. */
	assert_null(find(&cs, "src"));
	changes_free(&cs);
}

static void
test_upper_only(void **state)
{
	struct changeset cs;
	char err[512];
	const struct change *c;

	(void)state;
	fresh_views();
	/* Same-content rewrite: git is silent, the upper layer is not. */
	put(upper, "README.md", "hello\n");
	/* .git writes through the merged view. */
	sh("mkdir -p %s/.git/hooks", upper);
	put(upper, ".git/hooks/pre-commit", "#!/bin/sh\n");
	put(merged, ".git/hooks/pre-commit", "#!/bin/sh\n");
	/* A new empty directory. */
	sh("mkdir -p %s/emptydir %s/emptydir", upper, merged);
	/* A path with a control character. */
	put(upper, "bad\tname", "x\n");
	put(merged, "bad\tname", "x\n");
	assert_int_equal(changes_compute(repo, merged, upper, &cs, err, sizeof(err)), 0);
	c = must(&cs, "README.md");
	assert_null(c->git_status);
	assert_string_equal(c->upper_kind, "written");
	c = must(&cs, ".git/hooks/pre-commit");
	assert_null(c->git_status);
	assert_string_equal(c->upper_kind, "written");
	assert_null(find(&cs, ".git"));        /* lower has .git: a copied-up parent */
	c = must(&cs, "emptydir");
	assert_string_equal(c->upper_kind, "written");
	c = must(&cs, "bad\tname");
	char disp[64];
	changes_path_display(c->path, disp, sizeof(disp));
	assert_string_equal(disp, "bad\\x09name");
	changes_free(&cs);
}

/* What git must never read: checked in the upper layer before libgit2 opens anything. */
static void
test_unsafe_upper(void **state)
{
	struct changeset cs;
	char err[512];

	(void)state;
	/* a FIFO (git would block opening it) */
	fresh_views();
	sh("mkfifo %s/pipe && mkfifo %s/pipe", upper, merged);
	assert_int_equal(changes_compute(repo, merged, upper, &cs, err, sizeof(err)),
	    CHANGES_UNSAFE);
	assert_non_null(strstr(err, "pipe"));
	assert_non_null(must(&cs, "pipe"));     /* still reported, from the upper layer */
	changes_free(&cs);
	/* a .gitattributes symlink (git would follow it out of the repository, as root) */
	fresh_views();
	sh("ln -s /etc/shadow %s/.gitattributes && ln -s /etc/shadow %s/.gitattributes", upper,
	    merged);
	assert_int_equal(changes_compute(repo, merged, upper, &cs, err, sizeof(err)),
	    CHANGES_UNSAFE);
	assert_non_null(strstr(err, ".gitattributes"));
	changes_free(&cs);
	/* a .gitignore FIFO in a subdirectory */
	fresh_views();
	sh("mkdir -p %s/sub %s/sub && mkfifo %s/sub/.gitignore && mkfifo %s/sub/.gitignore",
	    upper, merged, upper, merged);
	assert_int_equal(changes_compute(repo, merged, upper, &cs, err, sizeof(err)),
	    CHANGES_UNSAFE);
	changes_free(&cs);
	/* a nested .git (git would treat the directory as another repository) */
	fresh_views();
	sh("mkdir -p %s/sub/.git %s/sub/.git", upper, merged);
	assert_int_equal(changes_compute(repo, merged, upper, &cs, err, sizeof(err)),
	    CHANGES_UNSAFE_GIT);
	assert_non_null(strstr(err, "sub/.git"));
	changes_free(&cs);
	/* negative twin: a regular .gitignore is an ordinary change */
	fresh_views();
	put(upper, ".gitignore", "*.o\n");
	put(merged, ".gitignore", "*.o\n");
	assert_int_equal(changes_compute(repo, merged, upper, &cs, err, sizeof(err)), 0);
	assert_non_null(must(&cs, ".gitignore"));
	changes_free(&cs);
}

static void
test_whiteout_and_opaque(void **state)
{
	struct changeset cs;
	char err[512];
	char p[512];
	const struct change *c;
	bool have_opaque;

	(void)state;
	fresh_views();
	snprintf(p, sizeof(p), "%s/gone.txt", upper);
	if (mknod(p, S_IFCHR | 0600, makedev(0, 0)) != 0)
		skip();
	sh("rm %s/gone.txt", merged);
	/* An opaque directory replacing docs/. */
	sh("mkdir -p %s/docs && rm -rf %s/docs && mkdir -p %s/docs", upper, merged, merged);
	snprintf(p, sizeof(p), "%s/docs", upper);
	have_opaque = setxattr(p, "trusted.overlay.opaque", "y", 1, 0) == 0 ||
	    setxattr(p, "user.overlay.opaque", "y", 1, 0) == 0;
	assert_int_equal(changes_compute(repo, merged, upper, &cs, err, sizeof(err)), 0);
	c = must(&cs, "gone.txt");
	assert_string_equal(c->upper_kind, "deleted");
	assert_string_equal(c->git_status, "deleted");
	if (have_opaque) {
		c = must(&cs, "docs");
		assert_string_equal(c->upper_kind, "opaque");
	}
	c = must(&cs, "docs/guide.md");
	assert_string_equal(c->git_status, "deleted");
	changes_free(&cs);
}

static void
test_host_untouched(void **state)
{
	char cmd[1024];
	FILE *f;
	char out[256] = "";

	(void)state;
	/* After all of the above the host repository is clean and its index unchanged. */
	snprintf(cmd, sizeof(cmd), "cd %s && git status --porcelain --ignored", repo);
	f = popen(cmd, "r");
	assert_non_null(f);
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	pclose(f);
	assert_string_equal(out, "");
}

static void
test_errors(void **state)
{
	struct changeset cs;
	char err[512];

	(void)state;
	assert_int_equal(changes_compute("/nonexistent-h8", merged, NULL, &cs, err,
	    sizeof(err)), -1);
	fresh_views();
	assert_int_equal(changes_compute(repo, merged, "/nonexistent-h8", &cs, err,
	    sizeof(err)), -1);
	/* Nesting past the walk's bound: "too large to judge", not an internal error. */
	{
		char deep[2048];
		size_t o = (size_t)snprintf(deep, sizeof(deep), "%s", upper);
		for (int i = 0; i < 300; i++)
			o += (size_t)snprintf(deep + o, sizeof(deep) - o, "/d");
		sh("mkdir -p %s", deep);
	}
	assert_int_equal(changes_compute(repo, merged, upper, &cs, err, sizeof(err)),
	    CHANGES_TOO_MANY);
	assert_non_null(strstr(err, "deeper"));
}

static void
test_unborn_head(void **state)
{
	char r2[400], m2[400];
	struct changeset cs;
	char err[512];

	(void)state;
	snprintf(r2, sizeof(r2), "%s/unborn", root);
	snprintf(m2, sizeof(m2), "%s/unborn-merged", root);
	sh("mkdir -p %s && cd %s && git init -q . && cp -a %s %s && echo x > %s/f", r2, r2, r2,
	    m2, m2);
	assert_int_equal(changes_compute(r2, m2, NULL, &cs, err, sizeof(err)), 0);
	assert_string_equal(cs.base_commit, "");
	assert_int_equal(cs.n, 1);
	assert_string_equal(cs.v[0].path, "f");
	changes_free(&cs);
}

/* Negative twin of test_unborn_head: a HEAD whose commit object is missing is an error,
 * never "every file added". */
static void
test_missing_head_object(void **state)
{
	char r2[400], m2[400];
	struct changeset cs;
	char err[512];

	(void)state;
	snprintf(r2, sizeof(r2), "%s/broken", root);
	snprintf(m2, sizeof(m2), "%s/broken-merged", root);
	sh("mkdir -p %s && cd %s && git init -q . && git config user.email t@example.com && "
	    "git config user.name t && echo x > f && git add f && git commit -q -m one && "
	    "c=$(git rev-parse HEAD) && rm -f .git/objects/$(echo $c | cut -c1-2)/$(echo $c | "
	    "cut -c3-) && cp -a %s %s", r2, r2, r2, m2);
	assert_int_equal(changes_compute(r2, m2, NULL, &cs, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "HEAD"));
}

/* Links the worker wrote: inside the repository kept, out of it or through .git marked
 * (negative twins of each other). */
static void
test_link_escape(void **state)
{
	static const struct { const char *path, *target; bool escapes; } links[] = {
		{ "l_in", "src/a.c", false },
		{ "src/l_up", "../README.md", false },
		{ "src/l_dangling", "../nowhere/x", false },
		{ "src/l_dir", "..", false },
		{ "l_abs", "/etc/passwd", true },
		{ "src/l_out", "../../etc/passwd", true },
		{ "l_dotdot", "..", true },
		{ "l_git", ".git/config", true },
		{ "src/l_git2", "../.GIT/config", true },
		{ "l_gitntfs", "GIT~1/config", true },
		{ "l_chain", "src/l_dir/../x", true },       /* src/l_dir is the top: ../x leaves */
		{ "l_via_out", "src/l_out", true },          /* through an escaping link */
		{ "l_loop1", "l_loop2", false },             /* a loop reaches nothing (ELOOP) */
		{ "l_loop2", "l_loop1", false },
		{ "l_empty_dotgit", "src/../.git", true },
	};
	struct changeset cs;
	char err[512];

	(void)state;
	fresh_views();
	sh("mkdir -p %s/src", upper);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		sh("ln -s '%s' '%s/%s' && ln -s '%s' '%s/%s'", links[i].target, merged,
		    links[i].path, links[i].target, upper, links[i].path);
	assert_int_equal(changes_compute(repo, merged, upper, &cs, err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		const struct change *c = must(&cs, links[i].path);
		print_message("%s -> %s: %d\n", links[i].path, links[i].target, c->link_escape);
		assert_true(c->is_link);
		assert_int_equal(c->link_escape, links[i].escapes);
	}
	changes_free(&cs);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_git_statuses),
		cmocka_unit_test(test_link_escape),
		cmocka_unit_test(test_gitignore_trick),
		cmocka_unit_test(test_upper_only),
		cmocka_unit_test(test_unsafe_upper),
		cmocka_unit_test(test_whiteout_and_opaque),
		cmocka_unit_test(test_host_untouched),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_unborn_head),
		cmocka_unit_test(test_missing_head_object),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
