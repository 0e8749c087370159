/*
 * test_sandbox_egressd - egressd's drop and seccomp allow-list, each in a forked child:
 * the drop reads back; what the filter forbids fails (EPERM: raw/packet sockets, mkdir,
 * personality, TIOCSTI) or kills (SIGSYS: mount, unshare), and what
 * egressd needs (a TCP socket, a thread, a listener bound with SO_BINDTODEVICE once, a
 * pipe and splice) still works. The drop needs root (skipped otherwise).
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "egressd/sandbox_egressd.h"

/* Run fn in a child; return its wait status. */
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

static int
drop_nobody(void)
{
	struct sandbox_egressd_user u;
	char err[256] = "";

	if (sandbox_egressd_lookup("nobody", &u, err, sizeof(err)) != 0) {
		fprintf(stderr, "lookup: %s\n", err);
		return 10;
	}
	if (sandbox_egressd_drop(&u, err, sizeof(err)) != 0) {
		fprintf(stderr, "drop: %s\n", err);
		return 11;
	}
	return 0;
}

static int
drop_and_filter(void)
{
	char err[256] = "";
	int rc = drop_nobody();

	if (rc != 0)
		return rc;
	if (sandbox_egressd_filter(err, sizeof(err)) != 0) {
		fprintf(stderr, "filter: %s\n", err);
		return 12;
	}
	return sandbox_egressd_filtered() ? 0 : 13;
}

static void
test_lookup(void **state)
{
	struct sandbox_egressd_user u;
	char err[256];

	(void)state;
	assert_int_equal(sandbox_egressd_lookup("nobody", &u, err, sizeof(err)), 0);
	assert_int_equal(u.uid, 65534);
	assert_int_equal(sandbox_egressd_lookup("65534", &u, err, sizeof(err)), 0);
	assert_int_equal(u.uid, 65534);
	assert_true(u.gid != 0);
	/* negative twins: root by name or number, an unknown user, nothing */
	assert_int_equal(sandbox_egressd_lookup("root", &u, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "uid/gid 0"));
	assert_int_equal(sandbox_egressd_lookup("0", &u, err, sizeof(err)), -1);
	assert_int_equal(sandbox_egressd_lookup("no-such-user-h13", &u, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "does not exist"));
	assert_int_equal(sandbox_egressd_lookup("", &u, err, sizeof(err)), -1);
	assert_int_equal(sandbox_egressd_lookup(NULL, &u, err, sizeof(err)), -1);
}

static void
test_drop(void **state)
{
	int st;

	(void)state;
	if (geteuid() != 0)
		skip();
	st = in_child(drop_nobody);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static int
refuses_drop_to_root(void)
{
	struct sandbox_egressd_user u = { .uid = 0, .gid = 0, .name = "root" };
	char err[256] = "";

	return sandbox_egressd_drop(&u, err, sizeof(err)) == -1 && geteuid() == 0 ? 0 : 1;
}

static void
test_drop_refuses_root(void **state)
{
	int st;

	(void)state;
	st = in_child(refuses_drop_to_root);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void *
thread_fn(void *arg)
{
	return arg;
}

/* What egressd needs still works under the filter. */
static int
allowed_still_work(void)
{
	int rc = drop_and_filter(), fd, p[2], one = 1;
	pthread_t t;
	void *ret = NULL;
	struct sockaddr_in sin;

	if (rc != 0)
		return rc;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 20;
	/* a fresh socket: SO_BINDTODEVICE once, unprivileged (a dynamic grant's listener) */
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, "lo", 3) != 0)
		return 21;
	/* the second time needs CAP_NET_RAW, which egressd does not have */
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, "lo", 3) == 0)
		return 22;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 || listen(fd, 8) != 0)
		return 23;
	close(fd);
	if (pthread_create(&t, NULL, thread_fn, &one) != 0 || pthread_join(t, &ret) != 0 ||
	    ret != &one)
		return 24;
	if (pipe2(p, O_CLOEXEC) != 0)
		return 25;
	close(p[0]);
	close(p[1]);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 26;
	close(fd);
	return 0;
}

static void
test_filter_allows(void **state)
{
	int st;

	(void)state;
	if (geteuid() != 0)
		skip();
	st = in_child(allowed_still_work);
	if (!WIFEXITED(st))
		fail_msg("child killed by signal %d", WTERMSIG(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* Calls off the list fail with EPERM; clone3 with ENOSYS (glibc falls back to clone). */
static int
forbidden_fail(void)
{
	int rc = drop_and_filter();

	if (rc != 0)
		return rc;
	errno = 0;
	if (socket(AF_INET, SOCK_RAW, IPPROTO_ICMP) >= 0 || errno != EPERM)
		return 30;
	errno = 0;
	if (socket(AF_PACKET, SOCK_DGRAM, 0) >= 0 || errno != EPERM)
		return 31;
	{
		/* not on the list at all, and would succeed without the filter (/tmp is
		 * world-writable) */
		char dir[64];

		snprintf(dir, sizeof(dir), "/tmp/test_sandbox_egressd.%d", (int)getpid());
		errno = 0;
		if (mkdir(dir, 0700) == 0) {
			rmdir(dir);
			return 32;
		}
		if (errno != EPERM)
			return 32;
	}
	errno = 0;
	if (syscall(SYS_clone3, NULL, 0) != -1 || errno != ENOSYS)
		return 33;
	errno = 0;
	if (syscall(SYS_personality, 0xffffffffUL) != -1 || errno != EPERM)
		return 34;
	errno = 0;
	if (ioctl(0, TIOCSTI, "x") != -1 || errno != EPERM)   /* terminal injection */
		return 35;
	{
		int n = 0;

		/* the allowed twin: FIONREAD on a pipe */
		int p[2];

		if (pipe2(p, O_CLOEXEC) != 0 || ioctl(p[0], FIONREAD, &n) != 0 || n != 0)
			return 36;
		close(p[0]);
		close(p[1]);
	}
	return 0;
}

static void
test_filter_forbidden_fail(void **state)
{
	int st;

	(void)state;
	if (geteuid() != 0)
		skip();
	st = in_child(forbidden_fail);
	if (!WIFEXITED(st))
		fail_msg("child killed by signal %d", WTERMSIG(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static int
call_mount(void)
{
	int rc = drop_and_filter();

	if (rc != 0)
		return rc;
	(void)mount("none", "/tmp", "tmpfs", 0, NULL);
	return 40;   /* not reached: the filter kills */
}

static int
call_unshare(void)
{
	int rc = drop_and_filter();

	if (rc != 0)
		return rc;
	(void)unshare(CLONE_NEWUSER);
	return 41;
}

static int
clone_newns(void)
{
	int rc = drop_and_filter();

	if (rc != 0)
		return rc;
	errno = 0;
	/* raw clone with a namespace flag: not allowed (EPERM), never a new namespace */
	if (syscall(SYS_clone, (unsigned long)(CLONE_NEWNET | SIGCHLD), 0, 0, 0, 0) == 0)
		_exit(0);
	return errno == EPERM ? 0 : 42;
}

static void
test_filter_kills(void **state)
{
	int st;

	(void)state;
	if (geteuid() != 0)
		skip();
	st = in_child(call_mount);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGSYS);
	st = in_child(call_unshare);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGSYS);
	st = in_child(clone_newns);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static int
filter_without_nnp(void)
{
	char err[256] = "";

	/* still root with CAP_SYS_ADMIN: loading works; as nobody without no_new_privs it
	 * must not (checked by the drop itself setting no_new_privs first). */
	return sandbox_egressd_filter(err, sizeof(err)) == 0 && sandbox_egressd_filtered() ?
	    0 : 50;
}

static void
test_filter_as_root(void **state)
{
	int st;

	(void)state;
	if (geteuid() != 0)
		skip();
	st = in_child(filter_without_nnp);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_false(sandbox_egressd_filtered());   /* the parent is not filtered */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_drop),
		cmocka_unit_test(test_drop_refuses_root),
		cmocka_unit_test(test_filter_allows),
		cmocka_unit_test(test_filter_forbidden_fail),
		cmocka_unit_test(test_filter_kills),
		cmocka_unit_test(test_filter_as_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
