/* test_grantstate.c - the static-grant journal (egressd/grantstate): revocations and first
 * issues survive a reopen (= a restart), unrevoke clears, a torn last record is cut off,
 * a damaged record, a foreign owner, a writable mode or a symbolic link refuse to open. */
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
#include <unistd.h>

#include "egressd/grantstate.h"

#define ID1 "0123456789abcdef0123456789abcdef"
#define ID2 "fedcba9876543210fedcba9876543210"

static char dir[64], path[128];

static int
setup(void **st)
{
	(void)st;
	snprintf(dir, sizeof(dir), "/tmp/test_grantstate.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(path, sizeof(path), "%s/grants.state", dir);
	return 0;
}

static int
teardown(void **st)
{
	char p[160];

	(void)st;
	unlink(path);
	snprintf(p, sizeof(p), "%s/link", dir);
	unlink(p);
	rmdir(dir);
	return 0;
}

static void
write_file(const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	fchmod(fd, mode);
	close(fd);
}

static void
test_survives_reopen(void **st)
{
	char err[512];
	struct grantstate *gs = grantstate_open(path, geteuid(), err, sizeof(err));
	const struct grantstate_entry *e;
	bool saved;
	struct stat sb;

	(void)st;
	assert_non_null(gs);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_null(grantstate_get(gs, ID1));
	/* a reload takes the room for its first issues before its commit; any count is
	 * clamped to the table's limit, never an overflow */
	assert_int_equal(grantstate_reserve(gs, 2, err, sizeof(err)), 0);
	assert_int_equal(grantstate_reserve(gs, SIZE_MAX, err, sizeof(err)), 0);
	assert_int_equal(grantstate_issued(gs, ID1, "svc", 1000, &saved), 1000);
	assert_true(saved);
	/* the first issue is kept: a later start does not restart the lifetime */
	assert_int_equal(grantstate_issued(gs, ID1, "svc", 5000, &saved), 1000);
	assert_int_equal(grantstate_revoke(gs, ID2, "other", 2000, err, sizeof(err)), 0);
	grantstate_free(gs);

	gs = grantstate_open(path, geteuid(), err, sizeof(err));
	assert_non_null(gs);
	e = grantstate_get(gs, ID1);
	assert_non_null(e);
	assert_int_equal(e->issued, 1000);
	assert_int_equal(e->revoked, 0);
	assert_int_equal(grantstate_issued(gs, ID1, "svc", 9000, &saved), 1000);
	e = grantstate_get(gs, ID2);
	assert_non_null(e);
	assert_int_equal(e->revoked, 2000);
	assert_string_equal(e->principal, "other");
	assert_int_equal(grantstate_count(gs), 2);
	/* unrevoke clears it, and that too survives */
	assert_int_equal(grantstate_unrevoke(gs, ID2, 3000, err, sizeof(err)), 1);
	assert_int_equal(grantstate_unrevoke(gs, ID2, 3000, err, sizeof(err)), 0);
	assert_int_equal(grantstate_unrevoke(gs, ID1, 3000, err, sizeof(err)), 0);
	grantstate_free(gs);
	gs = grantstate_open(path, geteuid(), err, sizeof(err));
	assert_non_null(gs);
	assert_int_equal(grantstate_get(gs, ID2)->revoked, 0);
	assert_int_equal(grantstate_check(path, geteuid(), err, sizeof(err)), 0);
	grantstate_free(gs);
}

static void
test_torn_tail_cut(void **st)
{
	char err[512];
	struct grantstate *gs;
	struct stat sb;
	const char *good = "{\"grant_id\":\"" ID1 "\",\"op\":\"revoke\",\"principal\":\"a\","
	    "\"time\":5,\"v\":1}\n";
	char text[512];

	(void)st;
	snprintf(text, sizeof(text), "%s{\"grant_id\":\"" ID2 "\",\"op\":\"rev", good);
	write_file(text, 0600);
	gs = grantstate_open(path, geteuid(), err, sizeof(err));
	assert_non_null(gs);
	assert_int_equal(grantstate_get(gs, ID1)->revoked, 5);
	assert_null(grantstate_get(gs, ID2));
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, (off_t)strlen(good));   /* cut back to the last newline */
	/* and the next record starts on its own line */
	assert_int_equal(grantstate_revoke(gs, ID2, "b", 6, err, sizeof(err)), 0);
	grantstate_free(gs);
	gs = grantstate_open(path, geteuid(), err, sizeof(err));
	assert_non_null(gs);
	assert_int_equal(grantstate_get(gs, ID2)->revoked, 6);
	grantstate_free(gs);
}

static void
test_refusals(void **st)
{
	char err[512], lnk[160];
	const char *bad[] = {
		"not json\n",
		"{\"v\":1,\"op\":\"forget\",\"grant_id\":\"" ID1 "\",\"principal\":\"a\",\"time\":5}\n",
		"{\"v\":1,\"op\":\"revoke\",\"grant_id\":\"XYZ\",\"principal\":\"a\",\"time\":5}\n",
		"{\"v\":2,\"op\":\"revoke\",\"grant_id\":\"" ID1 "\",\"principal\":\"a\",\"time\":5}\n",
		"{\"v\":1,\"op\":\"revoke\",\"grant_id\":\"" ID1 "\",\"principal\":\"a\",\"time\":5,"
		    "\"x\":1}\n",
	};

	(void)st;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[512];
		/* a damaged record in the middle: never start, it could hide a revocation */
		snprintf(text, sizeof(text), "%s{\"v\":1,\"op\":\"revoke\",\"grant_id\":\"" ID2
		    "\",\"principal\":\"a\",\"time\":5}\n", bad[i]);
		write_file(text, 0600);
		assert_null(grantstate_open(path, geteuid(), err, sizeof(err)));
		assert_non_null(strstr(err, ":1: "));
		assert_int_equal(grantstate_check(path, geteuid(), err, sizeof(err)), -1);
	}
	write_file("", 0620);
	assert_null(grantstate_open(path, geteuid(), err, sizeof(err)));
	assert_non_null(strstr(err, "not be writable by group or others"));
	write_file("", 0600);
	assert_null(grantstate_open(path, geteuid() + 1, err, sizeof(err)));
	assert_non_null(strstr(err, "must belong to uid"));
	snprintf(lnk, sizeof(lnk), "%s/link", dir);
	assert_int_equal(symlink(path, lnk), 0);
	assert_null(grantstate_open(lnk, geteuid(), err, sizeof(err)));
	assert_non_null(strstr(err, "symbolic link"));
	/* -t: a missing file is fine (start-up creates it) */
	unlink(path);
	assert_int_equal(grantstate_check(path, geteuid(), err, sizeof(err)), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_survives_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_tail_cut, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
