/*
 * test_sandbox_egressd - egressd's drop and seccomp allow-list, each in a forked child:
 * the drop reads back; what the filter forbids fails (EPERM: raw/packet sockets, mkdir,
 * personality, TIOCSTI) or kills (SIGSYS: mount, unshare), and what
 * egressd needs (a TCP socket, a thread, a listener bound with SO_BINDTODEVICE once, a
 * pipe and splice) still works. The default account (egressd, else nobody) and its
 * refusals; the parent-death signal survives the drop (a dropped child of a SIGKILLed
 * parent dies), which a plain setresuid does not; a non-root process is confined
 * without a user change. The drop needs root (skipped otherwise).
 */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <grp.h>
#include <pwd.h>

#include "common/util.h"
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
test_resolve(void **state)
{
	struct sandbox_egressd_user u;
	bool fell_back = true;
	char err[256];

	(void)state;
	/* The default: the dedicated account when it exists, else nobody, said so. */
	assert_int_equal(sandbox_egressd_resolve(NULL, &u, &fell_back, err, sizeof(err)), 0);
	if (getpwnam(SANDBOX_EGRESSD_DEFAULT_USER) != NULL) {
		assert_false(fell_back);
		assert_string_equal(u.name, SANDBOX_EGRESSD_DEFAULT_USER);
	} else {
		assert_true(fell_back);
		assert_string_equal(u.name, "nobody");
		assert_int_equal(u.uid, 65534);
	}
	assert_true(u.uid != 0 && u.gid != 0);
	/* A named account wins and is never a fallback. */
	assert_int_equal(sandbox_egressd_resolve("nobody", &u, &fell_back, err, sizeof(err)), 0);
	assert_false(fell_back);
	assert_int_equal(u.uid, 65534);
	/* negative twins: root by name or number, an unknown account: no fallback to anyone */
	assert_int_equal(sandbox_egressd_resolve("root", &u, &fell_back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "uid/gid 0"));
	assert_int_equal(sandbox_egressd_resolve("0", &u, &fell_back, err, sizeof(err)), -1);
	assert_int_equal(sandbox_egressd_resolve("no-such-user-drop", &u, &fell_back, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "does not exist"));
	assert_false(fell_back);
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

/* A raw setresuid clears the parent-death signal: the reason the drop re-arms it. */
static int
raw_setuid_clears_pdeathsig(void)
{
	int sig = -1;

	if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) != 0)
		return 60;
	if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
		return 61;
	if (prctl(PR_GET_PDEATHSIG, (unsigned long)&sig, 0, 0, 0) != 0)
		return 62;
	return sig == 0 ? 0 : 63;
}

static int
drop_keeps_pdeathsig(void)
{
	int sig = -1, rc;

	if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) != 0)
		return 70;
	if ((rc = drop_nobody()) != 0)
		return rc;
	if (prctl(PR_GET_PDEATHSIG, (unsigned long)&sig, 0, 0, 0) != 0)
		return 71;
	return sig == SIGTERM ? 0 : 72;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * The private egressd of egress-exec: a parent P starts a child C with
 * PR_SET_PDEATHSIG(SIGTERM); C drops to nobody. SIGKILL of P must still kill C (SIGTERM,
 * within 5 s). The test process is a child subreaper, so the orphaned C is reparented to
 * it and can be reaped with a bounded wait.
 */
static void
test_drop_pdeathsig_kills_orphan(void **state)
{
	int fds[2], st = 0;
	pid_t p, c = 0;
	char buf[32];
	ssize_t n;
	long long cpid;
	const char *es = NULL;
	double t0;

	(void)state;
	if (geteuid() != 0)
		skip();
	st = in_child(raw_setuid_clears_pdeathsig);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	st = in_child(drop_keeps_pdeathsig);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);

	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
	assert_int_equal(pipe(fds), 0);
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		pid_t ppid = getpid();
		pid_t child = fork();

		if (child < 0)
			_exit(80);
		if (child == 0) {
			int rc;

			close(fds[0]);
			if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) != 0 || getppid() != ppid)
				_exit(81);
			rc = drop_nobody();
			if (rc != 0)
				_exit(rc);
			snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
			(void)!write(fds[1], buf, strlen(buf));
			for (int i = 0; i < 300; i++)   /* bounded: 30 s */
				usleep(100 * 1000);
			_exit(82);
		}
		close(fds[0]);
		close(fds[1]);
		for (int i = 0; i < 300; i++)
			usleep(100 * 1000);
		_exit(0);
	}
	close(fds[1]);
	/* "<pid of C>\n" from C once it has dropped (bounded by C's own bounded life: the
	 * pipe closes when it is gone). */
	memset(buf, 0, sizeof(buf));
	for (size_t got = 0; got < sizeof(buf) - 1 && strchr(buf, '\n') == NULL; got += (size_t)n) {
		n = read(fds[0], buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			break;
	}
	close(fds[0]);
	assert_non_null(strchr(buf, '\n'));
	*strchr(buf, '\n') = '\0';
	assert_int_equal(num_parse(buf, 1, INT32_MAX, &cpid, &es), 0);
	c = (pid_t)cpid;
	t0 = now_s();
	assert_int_equal(kill(p, SIGKILL), 0);
	assert_int_equal(waitpid(p, &st, 0), p);
	/* C is now our child (subreaper): it must die of SIGTERM soon. */
	st = 0;
	while (now_s() - t0 < 5.0) {
		pid_t r = waitpid(c, &st, WNOHANG);
		if (r == c)
			break;
		usleep(10 * 1000);
	}
	if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM)) {
		kill(c, SIGKILL);
		waitpid(c, &st, 0);
		fail_msg("the dropped child did not die with its parent");
	}
	print_message("dropped child died of SIGTERM %.3f s after its parent's SIGKILL\n",
	    now_s() - t0);
	prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
}

/* Started as a non-root user: no user change, capabilities gone, filter in place. */
static int
confine_nonroot(void)
{
	char err[256] = "";
	int sig = -1;

	if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) != 0)
		return 90;
	/* like systemd User=nobody: switch without any egressd code */
	if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
	    setresuid(65534, 65534, 65534) != 0)
		return 91;
	if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) != 0)
		return 92;
	if (sandbox_egressd_confine(err, sizeof(err)) != 0) {
		fprintf(stderr, "confine: %s\n", err);
		return 93;
	}
	if (sandbox_egressd_filter(err, sizeof(err)) != 0 || !sandbox_egressd_filtered()) {
		fprintf(stderr, "filter: %s\n", err);
		return 94;
	}
	if (getuid() != 65534 || prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
		return 95;
	if (prctl(PR_GET_PDEATHSIG, (unsigned long)&sig, 0, 0, 0) != 0 || sig != SIGTERM)
		return 96;
	/* under the filter: a forbidden call fails */
	return mkdir("/tmp/test-sandbox-egressd-confine", 0700) == -1 && errno == EPERM ? 0 : 97;
}

static int
confine_refuses_root(void)
{
	char err[256] = "";

	return sandbox_egressd_confine(err, sizeof(err)) == -1 ? 0 : 1;
}

static void
test_confine(void **state)
{
	int st;

	(void)state;
	if (geteuid() != 0)
		skip();
	st = in_child(confine_nonroot);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	st = in_child(confine_refuses_root);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* A thread that waits on a pipe until the test lets it go (it must live across the drop). */
static void *
waiter_fn(void *arg)
{
	int *p = arg;
	char c;

	while (read(p[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

/* The value of key in one thread's status file, or "" (test's own reader, not egressd's). */
static void
task_field(const char *tid, const char *key, char *out, size_t outlen)
{
	char path[300], buf[4096], *l;
	size_t kl = strlen(key);
	ssize_t n;
	int fd;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/self/task/%s/status", tid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (l = buf; l != NULL && *l != '\0'; l = strchr(l, '\n'), l = l != NULL ? l + 1 : NULL) {
		if (strncmp(l, key, kl) == 0 && l[kl] == ':') {
			const char *v = l + kl + 1;
			size_t m;

			v += strspn(v, " \t");
			m = strcspn(v, "\n");
			if (m >= outlen)
				m = outlen - 1;
			memcpy(out, v, m);
			out[m] = '\0';
			return;
		}
	}
}

static bool
all_zero(const char *v)
{
	return v[0] != '\0' && strspn(v, "0") == strlen(v);
}

/*
 * Like egressd: sandbox_egressd_early first (when early), then a thread that lives on (the
 * decision-log writer), then the drop. With early every thread's status reads back
 * dropped (checked here, independently of egressd's own read-back); without it the
 * thread keeps its bounding set and the drop's read-back refuses (exit 31).
 */
static int
drop_with_thread(bool early)
{
	struct sandbox_egressd_user u;
	char err[256] = "", v[128];
	pthread_t t;
	int p[2], rc = 0, n = 0;
	DIR *dir;
	struct dirent *de;

	if (early && sandbox_egressd_early(err, sizeof(err)) != 0) {
		fprintf(stderr, "early: %s\n", err);
		return 30;
	}
	if (pipe2(p, O_CLOEXEC) != 0 || pthread_create(&t, NULL, waiter_fn, p) != 0)
		return 40;
	if (sandbox_egressd_lookup("nobody", &u, err, sizeof(err)) != 0)
		return 41;
	if (sandbox_egressd_drop(&u, err, sizeof(err)) != 0) {
		fprintf(stderr, "drop: %s\n", err);
		rc = strstr(err, "thread") != NULL && strstr(err, "CapBnd") != NULL ? 31 : 32;
		goto out;
	}
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) {
		rc = 33;
		goto out;
	}
	if ((dir = opendir("/proc/self/task")) == NULL) {
		rc = 42;
		goto out;
	}
	while ((de = readdir(dir)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		n++;
		task_field(de->d_name, "CapBnd", v, sizeof(v));
		if (!all_zero(v))
			rc = 34;
		task_field(de->d_name, "CapPrm", v, sizeof(v));
		if (!all_zero(v))
			rc = 35;
		task_field(de->d_name, "CapEff", v, sizeof(v));
		if (!all_zero(v))
			rc = 36;
		task_field(de->d_name, "NoNewPrivs", v, sizeof(v));
		if (strcmp(v, "1") != 0)
			rc = 37;
		task_field(de->d_name, "Uid", v, sizeof(v));
		if (strcmp(v, "65534\t65534\t65534\t65534") != 0)
			rc = 38;
	}
	closedir(dir);
	if (rc == 0 && n != 2)
		rc = 39;   /* the main thread and the waiter */
	if (rc == 0 && sandbox_egressd_verify_threads(&u, true, err, sizeof(err)) != 0)
		rc = 43;
out:
	close(p[1]);
	pthread_join(t, NULL);
	return rc;
}

static int
drop_with_thread_early(void)
{
	return drop_with_thread(true);
}

static int
drop_with_thread_late(void)
{
	return drop_with_thread(false);
}

static void
test_drop_every_thread(void **state)
{
	int st;

	(void)state;
	if (geteuid() != 0)
		skip();
	st = in_child(drop_with_thread_early);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	/* negative twin: a thread started before the bounding set was emptied keeps it, and
	 * the drop's read-back of every thread says so */
	st = in_child(drop_with_thread_late);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 31);
}

/* sandbox_egressd_early: bounding set empty and no_new_privs, effective caps kept. */
static int
early_keeps_effective(void)
{
	char err[256] = "", v[128];

	if (sandbox_egressd_early(err, sizeof(err)) != 0)
		return 50;
	{
		char path[64];

		snprintf(path, sizeof(path), "%ld", (long)syscall(SYS_gettid));
		task_field(path, "CapBnd", v, sizeof(v));
		if (!all_zero(v))
			return 51;
		task_field(path, "NoNewPrivs", v, sizeof(v));
		if (strcmp(v, "1") != 0)
			return 52;
		task_field(path, "CapEff", v, sizeof(v));
		if (all_zero(v))
			return 53;   /* root keeps what start-up needs */
	}
	return 0;
}

static void
test_early(void **state)
{
	int st;

	(void)state;
	if (geteuid() != 0)
		skip();
	st = in_child(early_keeps_effective);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* sandbox_egressd_give on an fd: a single-link root file is handed over; a file with a
 * second link or another user's file is left as it is. */
static void
test_give(void **state)
{
	struct sandbox_egressd_user u;
	char dir[] = "/tmp/test_sandbox_give.XXXXXX", a[80], b[80], err[256];
	struct stat st;
	int fd;

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_int_equal(sandbox_egressd_lookup("nobody", &u, err, sizeof(err)), 0);
	assert_non_null(mkdtemp(dir));
	snprintf(a, sizeof(a), "%s/log", dir);
	snprintf(b, sizeof(b), "%s/other", dir);
	fd = open(a, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
	assert_true(fd >= 0);
	assert_int_equal(sandbox_egressd_give(fd, a, &u, err, sizeof(err)), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_uid, u.uid);
	assert_int_equal(st.st_gid, u.gid);
	/* negative twin: a second link (planted) */
	assert_int_equal(fchown(fd, 0, 0), 0);
	assert_int_equal(link(a, b), 0);
	assert_int_equal(sandbox_egressd_give(fd, a, &u, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "single-link"));
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(unlink(b), 0);
	/* negative twin: a file of a third user */
	assert_int_equal(fchown(fd, 12345, 12345), 0);
	assert_int_equal(sandbox_egressd_give(fd, a, &u, err, sizeof(err)), -1);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_uid, 12345);
	close(fd);
	assert_int_equal(unlink(a), 0);
	assert_int_equal(rmdir(dir), 0);
}

static void
test_valgrind_optin(void **state)
{
	(void)state;
	/* natively never "under valgrind", whatever the environment says */
	setenv("EGRESSD_VALGRIND", "1", 1);
	assert_true(sandbox_egressd_valgrind_optin());
	assert_false(sandbox_egressd_under_valgrind());   /* (valgrind.sh skips this test) */
	setenv("EGRESSD_VALGRIND", "yes", 1);
	assert_false(sandbox_egressd_valgrind_optin());
	unsetenv("EGRESSD_VALGRIND");
	assert_false(sandbox_egressd_valgrind_optin());
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_drop),
		cmocka_unit_test(test_drop_refuses_root),
		cmocka_unit_test(test_drop_every_thread),
		cmocka_unit_test(test_early),
		cmocka_unit_test(test_give),
		cmocka_unit_test(test_valgrind_optin),
		cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_drop_pdeathsig_kills_orphan),
		cmocka_unit_test(test_confine),
		cmocka_unit_test(test_filter_allows),
		cmocka_unit_test(test_filter_forbidden_fail),
		cmocka_unit_test(test_filter_kills),
		cmocka_unit_test(test_filter_as_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
