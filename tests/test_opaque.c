/*
 * test_opaque - opaque overlay directories found by comparison (executor/opaque.c), on
 * plain directories standing in for the repository, the upper layer and the merged view:
 * a directory whose repository entries are neither in the upper layer nor in the merged
 * view is opaque; one whose hidden entry is whited out, one that hides nothing, a new
 * directory and a repository symlink (never followed) are not. Runs anywhere.
 */
#define _GNU_SOURCE 1
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "executor/opaque.h"

static char top[64];

static void
mk(const char *rel, bool dir)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/%s", top, rel);
	if (dir) {
		assert_int_equal(mkdir(p, 0755), 0);
	} else {
		int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		close(fd);
	}
}

static const struct change *
find(const struct changeset *cs, const char *path)
{
	for (size_t i = 0; i < cs->n; i++)
		if (strcmp(cs->v[i].path, path) == 0)
			return &cs->v[i];
	return NULL;
}

static void
test_by_comparison(void **state)
{
	struct changeset cs = { 0 };
	char lower[128], upper[128], merged[128], err[256] = "", p[256];
	const struct change *c;

	(void)state;
	snprintf(top, sizeof(top), "/tmp/egx-opq-XXXXXX");
	assert_non_null(mkdtemp(top));
	for (const char *const *d = (const char *const[]){ "lower", "upper", "merged", NULL };
	    *d; d++)
		mk(*d, true);
	/* D1: opaque, hides a and b */
	mk("lower/D1", true); mk("lower/D1/a", false); mk("lower/D1/b", false);
	mk("upper/D1", true); mk("upper/D1/new", false);
	mk("merged/D1", true); mk("merged/D1/new", false);
	/* D2: its one hidden entry is named (whited out) in the upper layer */
	mk("lower/D2", true); mk("lower/D2/a", false);
	mk("upper/D2", true); mk("upper/D2/a", false);
	mk("merged/D2", true);
	/* D3: a parent copied up for a change below it: everything still visible */
	mk("lower/D3", true); mk("lower/D3/a", false); mk("lower/D3/sub", true);
	mk("upper/D3", true); mk("upper/D3/sub", true);
	mk("merged/D3", true); mk("merged/D3/a", false); mk("merged/D3/sub", true);
	/* D3/sub: nested and opaque (its lower entry gone from the merged view) */
	mk("lower/D3/sub/x", false);
	/* N: new */
	mk("upper/N", true); mk("merged/N", true);
	/* L: a repository symlink to a host directory; never followed */
	snprintf(p, sizeof(p), "%s/lower/L", top);
	assert_int_equal(symlink("/etc", p), 0);
	mk("upper/L", true); mk("merged/L", true);
	/* An entry already in the set (git saw nothing, the upper walk no kind). */
	cs.cap = 4;
	cs.v = calloc(cs.cap, sizeof(*cs.v));
	assert_non_null(cs.v);
	cs.v[0].path = strdup("D1");
	cs.v[1].path = strdup("zz");
	cs.v[1].upper_kind = "written";
	cs.n = 2;

	snprintf(lower, sizeof(lower), "%s/lower", top);
	snprintf(upper, sizeof(upper), "%s/upper", top);
	snprintf(merged, sizeof(merged), "%s/merged", top);
	assert_int_equal(opaque_add(lower, merged, upper, &cs, err, sizeof(err)), 0);

	c = find(&cs, "D1");
	assert_non_null(c);
	assert_string_equal(c->upper_kind, "opaque");
	c = find(&cs, "D3/sub");
	assert_non_null(c);
	assert_string_equal(c->upper_kind, "opaque");
	assert_null(find(&cs, "D2"));
	assert_null(find(&cs, "D3"));
	assert_null(find(&cs, "N"));
	assert_null(find(&cs, "L"));
	assert_int_equal(cs.n, 3);
	/* sorted by path */
	for (size_t i = 1; i < cs.n; i++)
		assert_true(strcmp(cs.v[i - 1].path, cs.v[i].path) < 0);
	assert_string_equal(find(&cs, "zz")->upper_kind, "written");
	changes_free(&cs);

	/* A missing merged view is an error, not "nothing opaque". */
	assert_int_equal(opaque_add(lower, "/nonexistent-egx", upper, &cs, err, sizeof(err)),
	    -1);
	changes_free(&cs);
	snprintf(p, sizeof(p), "rm -rf '%s'", top);
	assert_int_equal(system(p), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_by_comparison),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
