/*
 * test_procwait - executor/procwait.c: a child's end waited for on its pidfd, bounded.
 * No timed assertions: only what each call returns and the status it reports.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "executor/procwait.h"

/* A child that exits with code at once. */
static pid_t
child_exit(int code)
{
	pid_t p = fork();

	if (p == 0)
		_exit(code);
	return p;
}

/* A child that waits until it is killed (pause is bounded by the SIGKILL below). */
static pid_t
child_wait(void)
{
	pid_t p = fork();

	if (p == 0) {
		for (;;)
			pause();
	}
	return p;
}

static void
test_reaps_exit_status(void **state)
{
	int st = -1;
	pid_t p = child_exit(7);

	(void)state;
	assert_true(p > 0);
	assert_int_equal(procwait_deadline(p, &st, 5000), 1);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 7);
	/* Reaped: a second wait has nothing to wait for. */
	errno = 0;
	assert_int_equal(procwait_deadline(p, &st, 0), -1);
	assert_int_equal(errno, ECHILD);
}

static void
test_running_child_times_out(void **state)
{
	int st = -1;
	pid_t p = child_wait();

	(void)state;
	assert_true(p > 0);
	/* Still running at the deadline: 0, and the child is left to the caller. */
	assert_int_equal(procwait_deadline(p, &st, 0), 0);
	assert_int_equal(procwait_deadline(p, &st, 20), 0);
	assert_int_equal(kill(p, SIGKILL), 0);
	assert_int_equal(procwait_deadline(p, &st, 5000), 1);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGKILL);
}

static void
test_with_callers_pidfd(void **state)
{
	int st = -1, pfd;
	pid_t p = child_wait();

	(void)state;
	assert_true(p > 0);
	pfd = (int)syscall(SYS_pidfd_open, p, 0);
	assert_true(pfd >= 0);
	assert_int_equal(procwait_pidfd(p, pfd, &st, 0), 0);
	assert_int_equal(kill(p, SIGTERM), 0);
	assert_int_equal(procwait_pidfd(p, pfd, &st, 5000), 1);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGTERM);
	/* The caller's pidfd is not closed by the wait. */
	assert_int_equal(close(pfd), 0);
}

static void
test_without_pidfd_falls_back(void **state)
{
	int st = -1;
	pid_t p = child_exit(3);

	(void)state;
	assert_true(p > 0);
	/* pidfd -1: bounded short polls instead of a pidfd, same answer. */
	assert_int_equal(procwait_pidfd(p, -1, &st, 5000), 1);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 3);
}

static void
test_not_our_child(void **state)
{
	int st = -1;

	(void)state;
	/* pid 1 is never our child. */
	errno = 0;
	assert_int_equal(procwait_deadline(1, &st, 100), -1);
	assert_int_equal(errno, ECHILD);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reaps_exit_status),
		cmocka_unit_test(test_running_child_times_out),
		cmocka_unit_test(test_with_callers_pidfd),
		cmocka_unit_test(test_without_pidfd_falls_back),
		cmocka_unit_test(test_not_our_child),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
