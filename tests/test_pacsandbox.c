/*
 * Unit tests for egressd/helper/pacsandbox (the route helper's confinement): under the filter a
 * UDP socket, a NETLINK_ROUTE socket and a socketpair still work and /etc/hosts resolution
 * still answers (what PAC evaluation needs), while TCP, raw, AF_UNIX, AF_PACKET, other
 * netlink families, listen, exec, unshare and every change to a file (write opens, create,
 * truncate, unlink, rename, chmod, mkdir, symlink) fail with an error (never a kill). The drop
 * ends at uid/gid 65534 with no supplementary groups. Each case runs in a forked child,
 * which reports the line of the first failed check as its exit status.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <linux/netlink.h>

#include "egressd/helper/pacsandbox.h"

/* In the child: exit with the failing line (1..255 range folded, never 0). */
#define CHILD_CHECK(c) do { if (!(c)) _exit((__LINE__ % 254) + 1); } while (0)

static char tmpfile_path[] = "/tmp/egress-pacsb-XXXXXX";

static int
opens(int fam, int type, int proto)
{
	int fd = socket(fam, type, proto);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno;
}

static void
filtered_child(void)
{
	char err[256];
	struct addrinfo hints, *ai = NULL;
	int sv[2], fd;

	int wfd;

	/* an fd opened for writing before the filter, like the stderr it inherits */
	wfd = open(tmpfile_path, O_RDWR | O_CLOEXEC);
	CHILD_CHECK(wfd >= 0);
	CHILD_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	CHILD_CHECK(pacsandbox_filter(err, sizeof(err)) == 0);

	/* what PAC evaluation needs */
	CHILD_CHECK(opens(AF_INET, SOCK_DGRAM, 0) == 0);
	CHILD_CHECK(opens(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0) == 0);
	CHILD_CHECK(opens(AF_INET6, SOCK_DGRAM, 0) == 0 || errno == EAFNOSUPPORT);
	CHILD_CHECK(opens(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE) == 0);
	CHILD_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	close(sv[0]);
	close(sv[1]);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	CHILD_CHECK(getaddrinfo("localhost", NULL, &hints, &ai) == 0 && ai != NULL);
	freeaddrinfo(ai);

	/* no other network */
	CHILD_CHECK(opens(AF_INET, SOCK_STREAM, 0) == EPERM);
	CHILD_CHECK(opens(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) == EPERM);
	CHILD_CHECK(opens(AF_INET6, SOCK_STREAM, 0) == EPERM);
	CHILD_CHECK(opens(AF_INET, SOCK_RAW, 1) == EPERM);
	CHILD_CHECK(opens(AF_INET, SOCK_SEQPACKET, 132) == EPERM);
	CHILD_CHECK(opens(AF_INET6, SOCK_RAW, 58) == EPERM);
	CHILD_CHECK(opens(AF_UNIX, SOCK_STREAM, 0) == EAFNOSUPPORT);
	CHILD_CHECK(opens(AF_UNIX, SOCK_DGRAM, 0) == EAFNOSUPPORT);
	CHILD_CHECK(opens(AF_PACKET, SOCK_RAW, 0) == EAFNOSUPPORT);
	CHILD_CHECK(opens(AF_VSOCK, SOCK_STREAM, 0) == EAFNOSUPPORT);
	CHILD_CHECK(opens(AF_ALG, SOCK_SEQPACKET, 0) == EAFNOSUPPORT);
	CHILD_CHECK(opens(200, SOCK_STREAM, 0) == EAFNOSUPPORT);
	CHILD_CHECK(opens(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT) == EPERM);
	CHILD_CHECK(opens(AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT) == EPERM);

	/* no server, no exec, no namespaces */
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	CHILD_CHECK(fd >= 0);
	CHILD_CHECK(listen(fd, 1) == -1 && errno == EPERM);
	CHILD_CHECK(accept4(fd, NULL, NULL, 0) == -1 && errno == EPERM);
	close(fd);
	{
		char *const argv[] = { (char *)"true", NULL };
		char *const envp[] = { NULL };
		CHILD_CHECK(execve("/bin/true", argv, envp) == -1 && errno == EPERM);
	}
	CHILD_CHECK(unshare(CLONE_NEWNET) == -1 && errno == EPERM);

	/* no file changes: reads only */
	fd = open(tmpfile_path, O_RDONLY | O_CLOEXEC);
	CHILD_CHECK(fd >= 0);
	close(fd);
	CHILD_CHECK(open(tmpfile_path, O_WRONLY) == -1 && errno == EPERM);
	CHILD_CHECK(open(tmpfile_path, O_RDWR | O_CLOEXEC) == -1 && errno == EPERM);
	CHILD_CHECK(open(tmpfile_path, O_RDONLY | O_TRUNC) == -1 && errno == EPERM);
	CHILD_CHECK(openat(AT_FDCWD, tmpfile_path, O_WRONLY | O_APPEND) == -1 && errno == EPERM);
	CHILD_CHECK(openat(AT_FDCWD, "/tmp/egress-pacsb-new", O_RDONLY | O_CREAT, 0600) == -1 &&
	    errno == EPERM);
	CHILD_CHECK(truncate(tmpfile_path, 0) == -1 && errno == EPERM);
	CHILD_CHECK(unlink(tmpfile_path) == -1 && errno == EPERM);
	CHILD_CHECK(rename(tmpfile_path, "/tmp/egress-pacsb-moved") == -1 && errno == EPERM);
	CHILD_CHECK(chmod(tmpfile_path, 0666) == -1 && errno == EPERM);
	CHILD_CHECK(mkdir("/tmp/egress-pacsb-dir", 0700) == -1 && errno == EPERM);
	CHILD_CHECK(symlink(tmpfile_path, "/tmp/egress-pacsb-link") == -1 && errno == EPERM);

	/* no hold over files through fds it has */
	CHILD_CHECK(ftruncate(wfd, 0) == -1 && errno == EPERM);
	CHILD_CHECK(fallocate(wfd, 0, 0, 4096) == -1 && errno == EPERM);
	CHILD_CHECK(flock(wfd, LOCK_EX) == -1 && errno == EPERM);
	{
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
		CHILD_CHECK(fcntl(wfd, F_SETLK, &fl) == -1 && errno == EPERM);
		CHILD_CHECK(fcntl(wfd, F_OFD_SETLK, &fl) == -1 && errno == EPERM);
		CHILD_CHECK(fcntl(wfd, F_GETFL) >= 0);
	}
	CHILD_CHECK(syscall(452, AT_FDCWD, tmpfile_path, 0666, 0) == -1 && errno == EPERM);
	close(wfd);

	/* no socket file, no datagram protocol but UDP */
	CHILD_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	{
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s.sock", tmpfile_path);
		CHILD_CHECK(bind(sv[0], (struct sockaddr *)&sun, sizeof(sun)) == -1 &&
		    errno == EPERM);
		CHILD_CHECK(access(sun.sun_path, F_OK) != 0);
	}
	close(sv[0]);
	close(sv[1]);
	CHILD_CHECK(opens(AF_INET, SOCK_DGRAM, IPPROTO_UDP) == 0);
	CHILD_CHECK(opens(AF_INET, SOCK_DGRAM, IPPROTO_ICMP) == EPROTONOSUPPORT);
	CHILD_CHECK(opens(AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6) == EPROTONOSUPPORT);
	CHILD_CHECK(opens(AF_INET, SOCK_DGRAM, 136 /* UDP-Lite */) == EPROTONOSUPPORT);

	/* no hold over another process (egressd shares its uid); itself is fine */
	CHILD_CHECK(kill(getppid(), 0) == -1 && errno == EPERM);
	CHILD_CHECK(kill(0, 0) == -1 && errno == EPERM);
	CHILD_CHECK(kill(getpid(), 0) == 0);
	CHILD_CHECK(syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), 0) == 0);
	CHILD_CHECK(syscall(SYS_tkill, syscall(SYS_gettid), 0) == -1 && errno == EPERM);
	CHILD_CHECK(syscall(SYS_pidfd_open, getppid(), 0) == -1 && errno == EPERM);
	{
		struct rlimit rl;
		CHILD_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
		CHILD_CHECK(setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 }) == 0);
		CHILD_CHECK(prlimit(getppid(), RLIMIT_NOFILE, NULL, &rl) == -1 && errno == EPERM);
	}
	CHILD_CHECK(setpriority(PRIO_PROCESS, (id_t)getppid(), 0) == -1 && errno == EPERM);

	/* threads may be made, namespaces not */
	CHILD_CHECK(syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0) == -1 &&
	    errno == EPERM);
	CHILD_CHECK(syscall(SYS_clone3, NULL, 0) == -1 && errno == ENOSYS);
	_exit(0);
}

static void
drop_child(void)
{
	char err[256];
	uid_t r, e, s;
	gid_t gr, ge, gs;

	CHILD_CHECK(pacsandbox_drop(err, sizeof(err)) == 0);
	CHILD_CHECK(getresuid(&r, &e, &s) == 0 && r == 65534 && e == 65534 && s == 65534);
	CHILD_CHECK(getresgid(&gr, &ge, &gs) == 0 && gr == 65534 && ge == 65534 && gs == 65534);
	CHILD_CHECK(getgroups(0, NULL) == 0);
	CHILD_CHECK(setresuid(0, 0, 0) == -1);
	/* not root any more: a second call keeps the ids */
	CHILD_CHECK(pacsandbox_drop(err, sizeof(err)) == 0 && getuid() == 65534);
	_exit(0);
}

static char other_path[] = "/tmp/egress-pacsb-other-XXXXXX";
static char ll_pac_path[] = "/tmp/egress-pacsb-pac-XXXXXX";

/* Landlock: reads of the listed paths and the PAC copy only; nothing written anywhere. */
static void
landlock_child(void)
{
	char err[256], buf[8];
	int fd, rc;

	CHILD_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	rc = pacsandbox_landlock(ll_pac_path, err, sizeof(err));
	if (rc == 1)
		_exit(77);               /* no Landlock in this kernel */
	CHILD_CHECK(rc == 0);
	/* what PAC evaluation needs */
	fd = open(ll_pac_path, O_RDONLY | O_CLOEXEC);
	CHILD_CHECK(fd >= 0 && read(fd, buf, sizeof(buf)) == 3);
	close(fd);
	fd = open("/etc/hosts", O_RDONLY | O_CLOEXEC);
	CHILD_CHECK(fd >= 0);
	close(fd);
	fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	CHILD_CHECK(fd >= 0);
	close(fd);
	fd = open("/usr/lib/os-release", O_RDONLY | O_CLOEXEC);
	CHILD_CHECK(fd >= 0 || errno == ENOENT);
	if (fd >= 0)
		close(fd);
	/* nothing else, even where Unix permissions would allow it */
	CHILD_CHECK(open(other_path, O_RDONLY | O_CLOEXEC) == -1 && errno == EACCES);
	CHILD_CHECK(open("/etc/passwd", O_RDONLY | O_CLOEXEC) == -1 && errno == EACCES);
	CHILD_CHECK(open(ll_pac_path, O_WRONLY | O_CLOEXEC) == -1 && errno == EACCES);
	CHILD_CHECK(open("/tmp/egress-pacsb-ll", O_WRONLY | O_CREAT | O_CLOEXEC, 0600) == -1 &&
	    errno == EACCES);
	CHILD_CHECK(unlink(other_path) == -1 && errno == EACCES);
	_exit(0);
}

/* Run fn in a child; its exit status is 0 (passed), 77 (returned: skip this test) or the
 * line of the failed check. Returns 0 or 77. */
static int
run_child(void (*fn)(void))
{
	pid_t pid = fork();
	int st = 0;

	assert_true(pid >= 0);
	if (pid == 0)
		fn();
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		fail_msg("child killed by signal %d", WTERMSIG(st));
	if (WEXITSTATUS(st) == 77)
		return 77;
	if (WEXITSTATUS(st) != 0)
		fail_msg("child check failed near line %d (mod 254)", WEXITSTATUS(st) - 1);
	return 0;
}

static void
test_filter_keeps_only_pac_needs(void **state)
{
	struct stat st;
	int fd;

	(void)state;
	fd = mkstemp(tmpfile_path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "pac", 3), 3);
	close(fd);
	run_child(filtered_child);
	/* the file is as it was */
	assert_int_equal(stat(tmpfile_path, &st), 0);
	assert_int_equal(st.st_size, 3);
	assert_int_equal(st.st_mode & 07777, 0600);
	unlink(tmpfile_path);
	assert_int_not_equal(access("/tmp/egress-pacsb-new", F_OK), 0);
	assert_int_not_equal(access("/tmp/egress-pacsb-dir", F_OK), 0);
}

static void
test_landlock_reads_only(void **state)
{
	int fd, rc;

	(void)state;
	fd = mkstemp(ll_pac_path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "pac", 3), 3);
	close(fd);
	fd = mkstemp(other_path);
	assert_true(fd >= 0);
	close(fd);
	chmod(other_path, 0644);
	rc = run_child(landlock_child);
	unlink(ll_pac_path);
	unlink(other_path);
	assert_int_not_equal(access("/tmp/egress-pacsb-ll", F_OK), 0);
	if (rc == 77)
		skip();
}

static void
test_drop_to_nobody(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	run_child(drop_child);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_filter_keeps_only_pac_needs),
		cmocka_unit_test(test_landlock_reads_only),
		cmocka_unit_test(test_drop_to_nobody),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
