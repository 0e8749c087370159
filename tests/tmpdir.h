/* tmpdir.h - the private temporary directory of a unit-test program: made by the cmocka
 * group setup (tmpdir_make), filled with small files (tmpdir_put), removed with everything
 * in it by the group teardown (tmpdir_remove).
 * Header-only: each test includes it once. */
#ifndef EGRESS_TEST_TMPDIR_H
#define EGRESS_TEST_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[128];

/* Make /tmp/egress-<name>-XXXXXX. 0, or -1 (a group setup's answer). */
static inline int
tmpdir_make(const char *name)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/egress-%s-XXXXXX", name);
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

/* Remove the directory and what it holds. 0, or -1 (a group teardown's answer). */
static inline int
tmpdir_remove(void)
{
	char cmd[sizeof(tmpdir) + 16];

	if (tmpdir[0] == '\0')
		return 0;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* cmocka group setup and teardown for a test whose only fixture is the directory:
 * cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown). */
static inline int
tmpdir_setup(void **state)
{
	(void)state;
	return tmpdir_make("test");
}

static inline int
tmpdir_teardown(void **state)
{
	(void)state;
	return tmpdir_remove();
}

/* Write text to tmpdir/name with mode; its path (one of four static buffers, so a test may
 * hold a few at once). Aborts the test program when the file cannot be written. */
static inline const char *
tmpdir_put(const char *name, const char *text, mode_t mode)
{
	static char path[4][256];
	static unsigned k;
	char *p = path[k++ % 4];
	FILE *f;

	snprintf(p, sizeof(path[0]), "%s/%s", tmpdir, name);
	f = fopen(p, "w");
	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0 || chmod(p, mode) != 0) {
		perror(p);
		abort();
	}
	return p;
}

#endif
