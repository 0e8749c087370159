/*
 * test_supcaps - egress-exec's supervisor keeps only the capabilities on its list: in a
 * forked root child, after supcaps_limit, a raw socket (CAP_NET_RAW, dropped) is refused
 * while a new mount namespace (CAP_SYS_ADMIN, kept) is still allowed, and the bounding set
 * read back holds no dropped bit. Needs root (skipped otherwise).
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "executor/supcaps.h"

static int
in_child(int (*fn)(void))
{
	pid_t pid = fork();
	int st = 0;

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn());
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return st;
}

static uint64_t
cap_bnd(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	uint64_t m = UINT64_MAX;

	if (f == NULL)
		return m;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "CapBnd:", 7) == 0)
			m = strtoull(line + 7, NULL, 16);
	fclose(f);
	return m;
}

static int
limited(void)
{
	char err[256] = "";
	int fd;
	uint64_t b;

	if (supcaps_limit(err, sizeof(err)) != 0) {
		fprintf(stderr, "supcaps_limit: %s\n", err);
		return 10;
	}
	b = cap_bnd();
	if (b & (UINT64_C(1) << CAP_SYS_MODULE) || b & (UINT64_C(1) << CAP_NET_RAW) ||
	    b & (UINT64_C(1) << CAP_SYS_TIME) || b & (UINT64_C(1) << CAP_BPF))
		return 11;
	if (!(b & (UINT64_C(1) << CAP_SYS_ADMIN)) || !(b & (UINT64_C(1) << CAP_NET_ADMIN)))
		return 12;
	/* negative twin: CAP_NET_RAW is gone, even for root */
	errno = 0;
	fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
	if (fd >= 0 || errno != EPERM)
		return 13;
	/* what the sandbox needs still works */
	if (unshare(CLONE_NEWNS) != 0)
		return 14;
	/* idempotent */
	if (supcaps_limit(err, sizeof(err)) != 0)
		return 15;
	return 0;
}

static void
test_limit(void **state)
{
	int st;

	(void)state;
	if (geteuid() != 0)
		skip();
	st = in_child(limited);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void
test_keep_list(void **state)
{
	(void)state;
	assert_true(supcaps_kept(CAP_SYS_ADMIN));
	assert_true(supcaps_kept(CAP_NET_ADMIN));
	assert_true(supcaps_kept(CAP_SETUID));
	assert_false(supcaps_kept(CAP_SYS_MODULE));
	assert_false(supcaps_kept(CAP_NET_RAW));
	assert_false(supcaps_kept(CAP_SYS_RAWIO));
	assert_false(supcaps_kept(CAP_SYS_BOOT));
	assert_false(supcaps_kept(CAP_BPF));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keep_list),
		cmocka_unit_test(test_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
