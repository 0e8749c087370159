/*
 * test_seccomp - the worker's filter: every forbidden call fails with its errno, ordinary
 * calls still work, other architectures are killed.
 *
 * Every check runs in a forked child (a filter cannot be removed). Calls that would do
 * something real as root without the filter get arguments that make them fail harmlessly
 * with a DIFFERENT errno (EINVAL, EBADF, ENOENT, EFAULT), so a pass proves the filter
 * answered first.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <netinet/in.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "executor/seccomp.h"

#ifndef SOCK_PACKET
#define SOCK_PACKET 10
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

/* Fork, run fn in the child (after NNP + install), return the wait status. */
static int
in_child(int (*fn)(void))
{
	int status = 0;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		char err[256];
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
			_exit(200);
		if (seccomp_profile_install(err, sizeof(err)) != 0) {
			fprintf(stderr, "install: %s\n", err);
			_exit(201);
		}
		_exit(fn());
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static int failures;

/* Record a check in the child: rc must be -1 with errno want. */
static void
expect_err(const char *what, long rc, int want)
{
	int e = errno;

	if (rc != -1 || e != want) {
		fprintf(stderr, "FAIL %s: rc=%ld errno=%d (%s), want errno %d (%s)\n", what, rc, e,
		    strerror(e), want, strerror(want));
		failures++;
	}
}

#define EXPECT(want, call) do { errno = 0; long _rc = (long)(call); expect_err(#call, _rc, want); } while (0)

static int
child_forbidden(void)
{
	char buf[16] = { 0 };
	struct iovec iov = { buf, sizeof(buf) };
	int one_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	failures = 0;
	/* mounts and roots */
	EXPECT(EPERM, mount("none", "/nonexistent-h6", "tmpfs", 0, NULL));
	EXPECT(EPERM, umount2("/nonexistent-h6", 0));
	EXPECT(EPERM, syscall(SYS_pivot_root, "/nonexistent-a", "/nonexistent-b"));
	EXPECT(EPERM, chroot("/nonexistent-h6"));
#ifdef SYS_open_tree
	EXPECT(EPERM, syscall(SYS_open_tree, -1, "/nonexistent-h6", 0));
#endif
#ifdef SYS_fsopen
	EXPECT(EPERM, syscall(SYS_fsopen, "nonexistent-fs", 0));
#endif
#ifdef SYS_mount_setattr
	EXPECT(EPERM, syscall(SYS_mount_setattr, -1, "", 0, NULL, 0));
#endif
	/* namespaces */
	EXPECT(EPERM, unshare(CLONE_NEWUSER));
	EXPECT(EPERM, unshare(CLONE_NEWNET));
	EXPECT(EPERM, setns(-1, 0));
	/* clone with namespace flags: if the filter failed, the child exits at once */
	{
		static const unsigned long nsflags[] = { CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC,
			CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP };
		for (size_t i = 0; i < sizeof(nsflags) / sizeof(nsflags[0]); i++) {
			errno = 0;
			long rc = syscall(SYS_clone, nsflags[i] | SIGCHLD, NULL, NULL, NULL, 0);
			if (rc == 0)
				_exit(0);
			if (rc > 0)
				waitpid((pid_t)rc, NULL, 0);
			expect_err("clone(CLONE_NEW*)", rc, EPERM);
		}
	}
	EXPECT(ENOSYS, syscall(SYS_clone3, NULL, 0));
	/* other processes */
	EXPECT(EPERM, ptrace(PTRACE_TRACEME, 0, NULL, NULL));
	EXPECT(EPERM, process_vm_readv(getppid(), &iov, 1, &iov, 1, 0));
	EXPECT(EPERM, process_vm_writev(getppid(), &iov, 1, &iov, 1, 0));
#ifdef SYS_pidfd_getfd
	EXPECT(EPERM, syscall(SYS_pidfd_getfd, -1, 0, 0));
#endif
	EXPECT(EPERM, syscall(SYS_kcmp, getpid(), getppid(), 0, 0, 0));
	/* kernel surface */
	EXPECT(EPERM, syscall(SYS_bpf, 0, NULL, 0));
	EXPECT(EPERM, syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
	EXPECT(EPERM, syscall(SYS_keyctl, 0, 0, 0, 0, 0));
	EXPECT(EPERM, syscall(SYS_add_key, "user", "h6", NULL, 0, 0));
	EXPECT(EPERM, syscall(SYS_request_key, "user", "h6", NULL, 0));
	EXPECT(EPERM, syscall(SYS_userfaultfd, 0));
	EXPECT(EPERM, syscall(SYS_io_uring_setup, 0, NULL));
	EXPECT(EPERM, syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
	EXPECT(EPERM, syscall(SYS_io_uring_register, -1, 0, NULL, 0));
	EXPECT(EPERM, syscall(SYS_kexec_load, 0, 0, NULL, 0xdead0000UL));
	EXPECT(EPERM, syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0xdead0000UL));
	EXPECT(EPERM, syscall(SYS_init_module, NULL, 0, ""));
	EXPECT(EPERM, syscall(SYS_finit_module, -1, "", 0));
	EXPECT(EPERM, syscall(SYS_delete_module, "egress_no_such_module", O_NONBLOCK));
	EXPECT(EPERM, syscall(SYS_open_by_handle_at, -1, NULL, 0));
	EXPECT(EPERM, syscall(SYS_name_to_handle_at, -1, "", NULL, NULL, 0));
	EXPECT(EPERM, syscall(SYS_reboot, 0, 0, 0, NULL)); /* bad magic: EINVAL unfiltered */
	EXPECT(EPERM, syscall(SYS_swapon, "/nonexistent-h6", 0));
	EXPECT(EPERM, syscall(SYS_swapoff, "/nonexistent-h6"));
	EXPECT(EPERM, syscall(SYS_syslog, 10, NULL, 0));
	EXPECT(EPERM, syscall(SYS_acct, "/nonexistent-h6/acct"));
	EXPECT(EPERM, syscall(SYS_quotactl, 0, NULL, 0, NULL));
	EXPECT(EPERM, syscall(SYS_iopl, 0));
	EXPECT(EPERM, syscall(SYS_ioperm, 0, 0, 0));
	/* sockets */
	EXPECT(EAFNOSUPPORT, socket(AF_PACKET, SOCK_RAW, 0));
	EXPECT(EAFNOSUPPORT, socket(AF_NETLINK, SOCK_RAW, 0));
	EXPECT(EAFNOSUPPORT, socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, 0));
	EXPECT(EAFNOSUPPORT, socket(AF_VSOCK, SOCK_STREAM, 0));
	EXPECT(EAFNOSUPPORT, socket(AF_UNSPEC, SOCK_STREAM, 0));
	EXPECT(EAFNOSUPPORT, socket(3, SOCK_STREAM, 0));
	EXPECT(EAFNOSUPPORT, socket(9, SOCK_STREAM, 0));
	EXPECT(EAFNOSUPPORT, socket(AF_BLUETOOTH, SOCK_STREAM, 0));
	/* high bits: the kernel would see int 2 / 17, the filter sees > 10 */
	EXPECT(EAFNOSUPPORT, syscall(SYS_socket, 0x100000000UL | AF_INET, SOCK_STREAM, 0));
	EXPECT(EAFNOSUPPORT, syscall(SYS_socket, 0xffffffff00000000UL | AF_PACKET, SOCK_RAW, 0));
	EXPECT(EAFNOSUPPORT, syscall(SYS_socket, (unsigned long)-1L, SOCK_STREAM, 0));
	EXPECT(EAFNOSUPPORT, socketpair(AF_NETLINK, SOCK_RAW, 0, (int[2]){ 0, 0 }));
	EXPECT(EPERM, socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
	/* transports other than TCP/UDP/ICMP: refused before any module could be loaded */
	EXPECT(EPROTONOSUPPORT, socket(AF_INET, SOCK_STREAM, 132));     /* SCTP */
	EXPECT(EPROTONOSUPPORT, socket(AF_INET6, SOCK_SEQPACKET, 132));
	EXPECT(EPROTONOSUPPORT, socket(AF_INET, SOCK_DCCP, 33));        /* DCCP */
	EXPECT(EPROTONOSUPPORT, socket(AF_INET6, SOCK_DGRAM, 136));     /* UDP-Lite */
	EXPECT(EPROTONOSUPPORT, socket(AF_INET, SOCK_STREAM, 262));     /* MPTCP */
	EXPECT(EPERM, socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6));
	EXPECT(EPERM, socket(AF_INET, SOCK_PACKET, 0));
	EXPECT(EPERM, socket(AF_INET6, SOCK_PACKET | SOCK_NONBLOCK, 0));
	/* terminal injection */
	EXPECT(EPERM, ioctl(one_fd, TIOCSTI, "x"));
	EXPECT(EPERM, syscall(SYS_ioctl, one_fd, (1UL << 32) | TIOCSTI, "x"));
	EXPECT(EPERM, ioctl(one_fd, TIOCLINUX, buf));
	/* personality */
	EXPECT(EPERM, personality(ADDR_NO_RANDOMIZE));
	EXPECT(EPERM, personality(PER_LINUX | READ_IMPLIES_EXEC));
	EXPECT(EPERM, personality(0x80000000UL | ADDR_NO_RANDOMIZE));
	EXPECT(EPERM, personality(0xfffffffeUL));
	EXPECT(EPERM, personality(MMAP_PAGE_ZERO));
	close(one_fd);
	return failures == 0 ? 0 : 1;
}

static void
test_forbidden_calls(void **state)
{
	(void)state;
	int st = in_child(child_forbidden);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void *
thread_fn(void *arg)
{
	return arg;
}

static int
child_allowed(void)
{
	int fds[2];
	int s;
	void *ret = NULL;
	pthread_t t;

	failures = 0;
	if (seccomp_profile_verify(NULL, 0) != 0)
		return 2;
	if (pipe2(fds, O_CLOEXEC) != 0 || write(fds[1], "ok", 2) != 2)
		return 3;
	close(fds[0]);
	close(fds[1]);
	if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return 4;
	close(s);
	if ((s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return 5;
	close(s);
	if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return 6;
	close(s);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
		return 7;
	close(fds[0]);
	close(fds[1]);
	/* fork: plain clone (libc tries clone3 first, gets ENOSYS, falls back) */
	pid_t p = fork();
	if (p < 0)
		return 8;
	if (p == 0)
		_exit(42);
	int st;
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 42)
		return 9;
	/* threads: glibc pthread_create uses clone3 first, then clone */
	if (pthread_create(&t, NULL, thread_fn, (void *)0x1) != 0)
		return 10;
	if (pthread_join(t, &ret) != 0 || ret != (void *)0x1)
		return 11;
	/* the personality query and the plain persona stay usable */
	if (personality(0xffffffffUL) == -1)
		return 12;
	if (personality(PER_LINUX) == -1)
		return 13;
	/* ioctl other than TIOCSTI */
	int n = 0;
	if (pipe2(fds, O_CLOEXEC) != 0 || ioctl(fds[0], FIONREAD, &n) != 0)
		return 14;
	/* posix_spawn (glibc: clone3 with CLONE_VM|CLONE_VFORK, falls back to clone), and
	 * the filter is inherited across execve: the spawned program sees Seccomp: 2 */
	char *const av[] = { "grep", "-q", "^Seccomp:[[:space:]]*2$", "/proc/self/status", NULL };
	pid_t sp;
	if (posix_spawn(&sp, "/bin/grep", NULL, NULL, av, environ) != 0)
		return 15;
	if (waitpid(sp, &st, 0) != sp || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 16;
	/* vfork */
	p = vfork();
	if (p == 0)
		_exit(7);
	if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
		return 17;
	return 0;
}

static void
test_allowed_calls(void **state)
{
	(void)state;
	int st = in_child(child_allowed);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static int
child_x32(void)
{
	/* An x32 system call number from a 64-bit process: the filter's bad-arch path. */
	syscall(0x40000000L | 39 /* getpid */);
	return 0;
}

#if defined(__x86_64__)
static int
child_i386(void)
{
	/* int 0x80 enters the kernel with the i386 ABI (AUDIT_ARCH_I386): not in the filter. */
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) /* i386 getpid */ : "memory");
	(void)ret;
	return 0;
}
#endif

static void
test_other_arches_killed(void **state)
{
	(void)state;
#if defined(__x86_64__)
	int st = in_child(child_x32);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGSYS);
	st = in_child(child_i386);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGSYS);
#else
	skip();
#endif
}

static void
test_install_requires_nnp(void **state)
{
	(void)state;
	int status = 0;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		char err[256] = "";
		if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 0)
			_exit(3);
		if (seccomp_profile_install(err, sizeof(err)) == 0)
			_exit(1);
		if (strstr(err, "no_new_privs") == NULL)
			_exit(2);
		/* and nothing was loaded */
		_exit(seccomp_profile_verify(NULL, 0) == 0 ? 4 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void
test_verify_unfiltered(void **state)
{
	(void)state;
	char err[256] = "";
	/* The test runner itself has no filter: verify must say so. */
	assert_int_equal(seccomp_profile_verify(err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not 2"));
}

static void
test_selftest(void **state)
{
	(void)state;
	char err[256] = "";
	int rc = seccomp_profile_selftest(err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "%s\n", err);
	assert_int_equal(rc, 0);
}

static void
test_entries_documented(void **state)
{
	(void)state;
	size_t n = 0;
	const struct seccomp_profile_entry *e = seccomp_profile_entries(&n);
	assert_true(n >= 40);
	for (size_t i = 0; i < n; i++) {
		assert_non_null(e[i].syscall);
		assert_non_null(e[i].reason);
		assert_true(strlen(e[i].reason) > 10);
		assert_true(e[i].err == EPERM || e[i].err == ENOSYS || e[i].err == EAFNOSUPPORT ||
		    e[i].err == EPROTONOSUPPORT);
	}
	/* docs/seccomp.md names every syscall of the table */
	const char *src = getenv("EGRESS_SOURCE_DIR");
	if (src == NULL)
		return;
	char path[4096];
	snprintf(path, sizeof(path), "%s/docs/seccomp.md", src);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return; /* docs checked by the docs build; not fatal here */
	static char doc[65536];
	size_t len = fread(doc, 1, sizeof(doc) - 1, f);
	fclose(f);
	doc[len] = '\0';
	for (size_t i = 0; i < n; i++) {
		char want[64];
		snprintf(want, sizeof(want), "`%s`", e[i].syscall);
		if (strstr(doc, want) == NULL)
			fail_msg("docs/seccomp.md does not document %s", e[i].syscall);
	}
}

#ifdef EGRESS_SECCOMP_BUILTIN
#include "common/scfilter.h"

extern const struct scf_prog seccomp_builtin_prog;
extern const char seccomp_builtin_key[];

/* The program compiled at build time (executor/gen/seccomp_gen.c, linked into this test
 * as into egress-exec; the other tests here install it) is the one a compile now gives,
 * and was made for this libseccomp and architecture. */
static void
test_builtin_program(void **state)
{
	static struct scf_prog now;
	char err[256], key[64];

	(void)state;
	assert_int_equal(seccomp_profile_key(key, sizeof(key)), 0);
	assert_string_equal(key, seccomp_builtin_key);
	if (seccomp_profile_compile(&now, err, sizeof(err)) != 0)
		fail_msg("compile: %s", err);
	assert_true(now.len > 0);
	assert_int_equal(now.len, seccomp_builtin_prog.len);
	assert_memory_equal(now.insns, seccomp_builtin_prog.insns,
	    now.len * sizeof(now.insns[0]));
	assert_int_equal(now.tsync, seccomp_builtin_prog.tsync);
	assert_int_equal(now.set_nnp, seccomp_builtin_prog.set_nnp);
	/* A key that names another libseccomp is not this one (prepare compiles then). */
	assert_string_not_equal(key, "libseccomp 0.0.0 arch 0");
}
#endif

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forbidden_calls),
		cmocka_unit_test(test_allowed_calls),
		cmocka_unit_test(test_other_arches_killed),
		cmocka_unit_test(test_install_requires_nnp),
		cmocka_unit_test(test_verify_unfiltered),
		cmocka_unit_test(test_selftest),
		cmocka_unit_test(test_entries_documented),
#ifdef EGRESS_SECCOMP_BUILTIN
		cmocka_unit_test(test_builtin_program),
#endif
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
