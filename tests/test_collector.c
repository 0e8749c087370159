/*
 * test_collector - egress-exec's unprivileged collector (executor/collector.c): inside the
 * child the identity is uid/gid 65001, the only capability is CAP_DAC_OVERRIDE (read back
 * from /proc/self/status), NoNewPrivs 1, Seccomp 2, not dumpable; no socket can be opened;
 * host paths outside its root (/etc/shadow, a file next to the repository, /proc) do not
 * exist, not even through a repository symlink; a mode-0000 file of another owner in the
 * repository and the worker's upper layer is readable; the output folder is writable and
 * nothing else is; exec, fork, signals to other processes, mounts, namespaces, ptrace and
 * open_by_handle_at are refused. The parent's verdicts: a crash, a timeout, an exit code
 * outside the egress-exec set and a failed setup are collector_failed (internal error);
 * a valid code passes through. Needs root (skipped with a message otherwise).
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/limits.h"
#include "executor/collector.h"
#include "executor/sandbox.h"

static char top[64], repo[128], upper[128], out[128], stage[128], outside[128];

static void
write_file(const char *path, const char *text, mode_t mode, uid_t uid)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchown(fd, uid, uid), 0);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static int
setup(void **state)
{
	char p[256];

	(void)state;
	if (geteuid() != 0)
		return 0;
	snprintf(top, sizeof(top), "/tmp/egx-coll-XXXXXX");
	assert_non_null(mkdtemp(top));
	assert_int_equal(chmod(top, 0755), 0);
	snprintf(repo, sizeof(repo), "%s/repo", top);
	snprintf(upper, sizeof(upper), "%s/layer/upper", top);
	snprintf(out, sizeof(out), "%s/out", top);
	snprintf(stage, sizeof(stage), "%s/stage", top);
	snprintf(outside, sizeof(outside), "%s/outside.txt", top);
	assert_int_equal(mkdir(repo, 0700), 0);
	assert_int_equal(chown(repo, 1000, 1000), 0);
	snprintf(p, sizeof(p), "%s/layer", top);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(mkdir(upper, 0700), 0);
	assert_int_equal(chown(upper, 65000, 65000), 0);
	assert_int_equal(mkdir(out, 0755), 0);
	assert_int_equal(mkdir(stage, 0700), 0);
	snprintf(p, sizeof(p), "%s/zero", repo);
	write_file(p, "zero-mode\n", 0000, 1000);
	snprintf(p, sizeof(p), "%s/w", upper);
	write_file(p, "worker\n", 0600, 65000);
	write_file(outside, "host-only\n", 0644, 0);
	snprintf(p, sizeof(p), "%s/leak", repo);
	assert_int_equal(symlink("/etc/shadow", p), 0);
	snprintf(p, sizeof(p), "%s/leak2", repo);
	assert_int_equal(symlink(outside, p), 0);
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	if (top[0] == '\0')
		return 0;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	return system(cmd) == 0 ? 0 : -1;
}

static void
need_root(void)
{
	if (geteuid() != 0) {
		print_message("test_collector: skipped, needs root (namespaces, mounts, setuid)\n");
		skip();
	}
}

static void
spec_init(struct collector_spec *s, int (*fn)(void *), void *arg)
{
	memset(s, 0, sizeof(*s));
	s->ro_paths[0] = repo;
	s->ro_paths[1] = upper;
	s->rw_dir = out;
	s->stage_dir = stage;
	s->fn = fn;
	s->arg = arg;
	s->wall_ms = 20000;
}

/* Inside the collector: write the first failing check (or "ok") to out/result. */
static int
report(const char *what)
{
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/result", out);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return EXEC_EXIT_USAGE;
	if (write(fd, what, strlen(what)) < 0) {
		close(fd);
		return EXEC_EXIT_USAGE;
	}
	close(fd);
	return strcmp(what, "ok") == 0 ? EXEC_EXIT_OK : EXEC_EXIT_INTERNAL;
}

static bool
status_has(const char *buf, const char *line)
{
	return strstr(buf, line) != NULL;
}

static bool
read_is(const char *path, const char *want)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return strcmp(buf, want) == 0;
}

static bool
open_fails(const char *path, int want_errno)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		return false;
	}
	return errno == want_errno;
}

static int
body_checks(void *arg)
{
	char buf[8192], p[256];
	struct {
		int handle_bytes, handle_type;
		unsigned char f_handle[128];
	} fh;
	int fd;

	(void)arg;
	if (getuid() != COLLECTOR_UID || geteuid() != COLLECTOR_UID || getgid() != COLLECTOR_GID)
		return report("uid/gid");
	if (!collector_active())
		return report("collector_active");
	if (collector_status(buf, sizeof(buf)) != 0)
		return report("status");
	if (!status_has(buf, "\nCapEff:\t0000000000000002\n") ||
	    !status_has(buf, "\nCapPrm:\t0000000000000002\n") ||
	    !status_has(buf, "\nCapBnd:\t0000000000000002\n") ||
	    !status_has(buf, "\nCapInh:\t0000000000000000\n") ||
	    !status_has(buf, "\nCapAmb:\t0000000000000000\n"))
		return report("capabilities");
	if (!status_has(buf, "\nNoNewPrivs:\t1\n"))
		return report("NoNewPrivs");
	if (!status_has(buf, "\nSeccomp:\t2\n"))
		return report("Seccomp");
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
		return report("dumpable");
	errno = 0;
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != -1 || errno != EPERM)
		return report("PR_SET_DUMPABLE 1 allowed");

	/* No network, not even a socket. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		return report("AF_INET socket opened");
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		return report("AF_UNIX socket opened");

	/* Host paths are not there, also not through the repository's symlinks. */
	if (!open_fails("/etc/shadow", ENOENT) || !open_fails(outside, ENOENT) ||
	    !open_fails("/proc/self/status", ENOENT) || !open_fails("/dev/null", ENOENT))
		return report("a host path is visible");
	snprintf(p, sizeof(p), "%s/leak", repo);
	if (!open_fails(p, ENOENT))
		return report("repo symlink to /etc/shadow followed");
	snprintf(p, sizeof(p), "%s/leak2", repo);
	if (!open_fails(p, ENOENT))
		return report("repo symlink to a host file followed");

	/* Files of any owner and mode inside: CAP_DAC_OVERRIDE. */
	snprintf(p, sizeof(p), "%s/zero", repo);
	if (!read_is(p, "zero-mode\n"))
		return report("mode-0000 repository file unreadable");
	snprintf(p, sizeof(p), "%s/w", upper);
	if (!read_is(p, "worker\n"))
		return report("upper file unreadable");

	/* Writes: the output folder only. */
	snprintf(p, sizeof(p), "%s/x", repo);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0 || errno != EROFS)
		return report("repository writable");
	snprintf(p, sizeof(p), "%s/x", upper);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0 || errno != EROFS)
		return report("upper writable");
	fd = open("/newfile", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0 || errno != EROFS)
		return report("root writable");
	snprintf(p, sizeof(p), "%s/written", out);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, "w", 1) != 1)
		return report("output folder not writable");
	close(fd);
	snprintf(p, sizeof(p), "%s/link", out);
	errno = 0;
	if (symlink("/etc/shadow", p) != -1 || errno != EPERM)
		return report("symlink allowed");

	/* The filter. */
	errno = 0;
	if (syscall(SYS_execve, "/nonexistent", NULL, NULL) != -1 || errno != EPERM)
		return report("execve not refused by the filter");
	errno = 0;
	if (syscall(SYS_fork) != -1 || errno != EPERM)
		return report("fork allowed");
	errno = 0;
	if (kill(1, 0) != -1 || errno != EPERM)
		return report("signal to pid 1 allowed");
	if (kill(getpid(), 0) != 0)
		return report("signal to itself refused");
	errno = 0;
	if (unshare(CLONE_NEWUSER) != -1 || errno != EPERM)
		return report("unshare allowed");
	errno = 0;
	if (mount("none", "/", NULL, MS_REMOUNT | MS_BIND, NULL) != -1 || errno != EPERM)
		return report("mount allowed");
	errno = 0;
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != -1 || errno != EPERM)
		return report("ptrace allowed");
	memset(&fh, 0, sizeof(fh));
	fh.handle_bytes = 8;
	errno = 0;
	if (syscall(SYS_open_by_handle_at, AT_FDCWD, &fh, O_RDONLY) != -1 || errno != EPERM)
		return report("open_by_handle_at allowed");
	errno = 0;
	if (setuid(0) != -1 || errno != EPERM)
		return report("setuid allowed");
	/* No hold over other processes (another run's collector has the same uid). */
	errno = 0;
	if (prlimit(getppid(), RLIMIT_NOFILE, NULL, &(struct rlimit){ 0, 0 }) != -1 ||
	    errno != EPERM)
		return report("prlimit of another process allowed");
	errno = 0;
	if (setpriority(PRIO_PROCESS, (id_t)getppid(), 19) != -1 || errno != EPERM)
		return report("setpriority of another process allowed");
	{
		struct rlimit rl;
		if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
			return report("getrlimit of itself refused");
		if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur != EGRESS_COLLECT_FILE_MAX)
			return report("RLIMIT_FSIZE not set");
	}
	/* No set-user-ID or set-group-ID file in the output folder. */
	snprintf(p, sizeof(p), "%s/suid", out);
	errno = 0;
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 04755);
	if (fd >= 0 || errno != EPERM)
		return report("set-user-ID create allowed");
	errno = 0;
	if (chmod(p, 02755) != -1 && errno != ENOENT)
		return report("set-group-ID chmod allowed");
	snprintf(p, sizeof(p), "%s/written", out);
	errno = 0;
	if (chmod(p, 04755) != -1 || errno != EPERM)
		return report("set-user-ID chmod allowed");
	if (chmod(p, 0644) != 0)
		return report("plain chmod refused");
	/* The parent-death signal survived the uid change. */
	{
		int sig = 0;
		if (prctl(PR_GET_PDEATHSIG, &sig, 0, 0, 0) != 0 || sig != SIGKILL)
			return report("no parent-death signal after the drop");
	}
	return report("ok");
}

static void
test_confined(void **state)
{
	struct collector_spec s;
	struct collector_result r;
	char p[256];
	int rc;

	(void)state;
	need_root();
	spec_init(&s, body_checks, NULL);
	rc = collector_run(&s, &r);
	snprintf(p, sizeof(p), "%s/result", out);
	if (!read_is(p, "ok")) {
		char buf[128] = "";
		FILE *f = fopen(p, "re");
		if (f != NULL) {
			if (fgets(buf, sizeof(buf), f) == NULL)
				buf[0] = '\0';
			fclose(f);
		}
		fail_msg("collector check failed: %s (rc %d, %s)", buf, rc, r.message);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(r.exit_code, EXEC_EXIT_OK);
	assert_int_equal(r.reason, REASON_ALLOWED);
	/* What it wrote is owned by the collector's uid. */
	{
		struct stat st;
		snprintf(p, sizeof(p), "%s/written", out);
		assert_int_equal(lstat(p, &st), 0);
		assert_int_equal(st.st_uid, COLLECTOR_UID);
	}
	/* Nothing was mounted in the host's namespace. */
	{
		struct stat a, b;
		assert_int_equal(stat(stage, &a), 0);
		assert_int_equal(stat(top, &b), 0);
		assert_int_equal(a.st_dev, b.st_dev);
	}
}

static int
body_verdict(void *arg)
{
	return *(int *)arg;
}

static void
test_verdict_passes(void **state)
{
	struct collector_spec s;
	struct collector_result r;
	int want = EXEC_EXIT_REJECTED;

	(void)state;
	need_root();
	spec_init(&s, body_verdict, &want);
	assert_int_equal(collector_run(&s, &r), 0);
	assert_int_equal(r.exit_code, EXEC_EXIT_REJECTED);
	assert_int_equal(r.reason, REASON_ALLOWED);
}

static void
test_foreign_exit_code(void **state)
{
	struct collector_spec s;
	struct collector_result r;
	int want = 77;

	(void)state;
	need_root();
	spec_init(&s, body_verdict, &want);
	assert_int_equal(collector_run(&s, &r), -1);
	assert_int_equal(r.exit_code, EXEC_EXIT_INTERNAL);
	assert_int_equal(r.reason, REASON_COLLECTOR_FAILED);
	assert_non_null(strstr(r.message, "not an egress-exec exit code"));
}

static int
body_crash(void *arg)
{
	(void)arg;
	abort();
}

static void
test_crash(void **state)
{
	struct collector_spec s;
	struct collector_result r;

	(void)state;
	need_root();
	spec_init(&s, body_crash, NULL);
	assert_int_equal(collector_run(&s, &r), -1);
	assert_int_equal(r.exit_code, EXEC_EXIT_INTERNAL);
	assert_int_equal(r.reason, REASON_COLLECTOR_FAILED);
	assert_non_null(strstr(r.message, "killed by signal 6"));
}

static int
body_hang(void *arg)
{
	struct timespec ts = { 30, 0 };

	(void)arg;
	nanosleep(&ts, NULL);
	return EXEC_EXIT_OK;
}

static void
test_timeout(void **state)
{
	struct collector_spec s;
	struct collector_result r;
	struct timespec a, b;

	(void)state;
	need_root();
	spec_init(&s, body_hang, NULL);
	s.wall_ms = 300;
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(collector_run(&s, &r), -1);
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_int_equal(r.exit_code, EXEC_EXIT_INTERNAL);
	assert_int_equal(r.reason, REASON_COLLECTOR_FAILED);
	assert_non_null(strstr(r.message, "did not finish within 300 ms"));
	assert_true(b.tv_sec - a.tv_sec < 5);
}

static int
body_marker(void *arg)
{
	char p[256];
	int fd;

	(void)arg;
	snprintf(p, sizeof(p), "%s/ran", out);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	return EXEC_EXIT_OK;
}

static void
test_setup_fails_closed(void **state)
{
	struct collector_spec s;
	struct collector_result r;
	char p[256], missing[160];

	(void)state;
	need_root();
	snprintf(missing, sizeof(missing), "%s/no-such-dir", top);
	spec_init(&s, body_marker, NULL);
	s.ro_paths[2] = missing;
	assert_int_equal(collector_run(&s, &r), -1);
	assert_int_equal(r.exit_code, EXEC_EXIT_INTERNAL);
	assert_int_equal(r.reason, REASON_COLLECTOR_FAILED);
	assert_non_null(strstr(r.message, "could not be set up: mounts"));
	/* The body never ran: not in the child, and never in this (root) process. */
	snprintf(p, sizeof(p), "%s/ran", out);
	assert_int_equal(access(p, F_OK), -1);
	/* A source reached through a symlink (a component swapped for a link after the
	 * caller resolved it) is refused, never bound. */
	snprintf(missing, sizeof(missing), "%s/repo-link", top);
	unlink(missing);
	assert_int_equal(symlink(repo, missing), 0);
	spec_init(&s, body_marker, NULL);
	s.ro_paths[2] = missing;
	assert_int_equal(collector_run(&s, &r), -1);
	assert_int_equal(r.reason, REASON_COLLECTOR_FAILED);
	assert_non_null(strstr(r.message, "could not be set up: mounts"));
	assert_int_equal(access(p, F_OK), -1);
	unlink(missing);
	/* A relative output folder is refused before any fork. */
	spec_init(&s, body_marker, NULL);
	s.rw_dir = "out";
	assert_int_equal(collector_run(&s, &r), -1);
	assert_int_equal(r.reason, REASON_COLLECTOR_FAILED);
	assert_int_equal(access(p, F_OK), -1);
}

/* Writes out/pid, then out/late after 3 s: a collector that outlived its parent would. */
static int
body_outlive(void *arg)
{
	char p[256], b[32];
	int fd, n;

	(void)arg;
	snprintf(p, sizeof(p), "%s/pid", out);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	n = snprintf(b, sizeof(b), "%d", (int)getpid());
	if (fd < 0 || write(fd, b, (size_t)n) != n)
		return EXEC_EXIT_INTERNAL;
	close(fd);
	sleep(3);
	snprintf(p, sizeof(p), "%s/late", out);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	return EXEC_EXIT_OK;
}

/* egress-exec SIGKILLed mid-collection: the collector (dropped, so the uid change cleared
 * the parent-death signal once) dies with it and writes nothing more. */
static void
test_dies_with_parent(void **state)
{
	char p[256], late[256], b[32] = "";
	pid_t mid, coll = 0;
	int fd, st;

	(void)state;
	need_root();
	snprintf(p, sizeof(p), "%s/pid", out);
	snprintf(late, sizeof(late), "%s/late", out);
	unlink(p);
	unlink(late);
	mid = fork();
	assert_true(mid >= 0);
	if (mid == 0) {
		struct collector_spec s;
		struct collector_result r;
		spec_init(&s, body_outlive, NULL);
		(void)collector_run(&s, &r);
		_exit(0);
	}
	for (int i = 0; i < 200 && coll <= 0; i++) {        /* up to 10 s */
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t n = read(fd, b, sizeof(b) - 1);
			close(fd);
			if (n > 0) {
				b[n] = '\0';
				coll = (pid_t)strtol(b, NULL, 10);
			}
		}
		if (coll <= 0)
			usleep(50 * 1000);
	}
	assert_true(coll > 0);
	assert_int_equal(kill(mid, SIGKILL), 0);
	assert_int_equal(waitpid(mid, &st, 0), mid);
	/* gone within 2 s, and never wrote its late marker */
	for (int i = 0; i < 40 && kill(coll, 0) == 0; i++)
		usleep(50 * 1000);
	assert_int_not_equal(kill(coll, 0), 0);
	sleep(3);
	assert_int_equal(access(late, F_OK), -1);
}

/* Started with SIGCHLD ignored (inherited across exec): the kernel reaps the collector,
 * its status is lost, and that must be a failure — never "exited 0". */
static void
test_status_lost_fails_closed(void **state)
{
	struct collector_spec s;
	struct collector_result r;
	int want = EXEC_EXIT_REJECTED;

	(void)state;
	need_root();
	signal(SIGCHLD, SIG_IGN);
	spec_init(&s, body_verdict, &want);
	assert_int_equal(collector_run(&s, &r), -1);
	signal(SIGCHLD, SIG_DFL);
	assert_int_equal(r.exit_code, EXEC_EXIT_INTERNAL);
	assert_int_equal(r.reason, REASON_COLLECTOR_FAILED);
	assert_non_null(strstr(r.message, "lost"));
}

static char link_target[160];

static int
body_link(void *arg)
{
	char *real = realpath("/bin/egx-test-link", NULL);
	bool ok = real != NULL && strcmp(real, link_target) == 0;

	(void)arg;
	free(real);
	return ok && read_is("/bin/egx-test-link", "zero-mode\n") ? EXEC_EXIT_OK :
	    EXEC_EXIT_INTERNAL;
}

static void
test_links(void **state)
{
	struct collector_spec s;
	struct collector_result r;
	char *target = link_target;

	(void)state;
	need_root();
	/* A host link to a bound file resolves inside as on the host (the manifest's
	 * executable_resolved and executable_sha256). */
	snprintf(link_target, sizeof(link_target), "%s/zero", repo);
	spec_init(&s, body_link, NULL);
	s.links[0].path = "/bin/egx-test-link";
	s.links[0].target = target;
	assert_int_equal(collector_run(&s, &r), 0);
	assert_int_equal(r.exit_code, EXEC_EXIT_OK);
}

/* Every entry of the filter is documented in docs/seccomp.md's collector section. */
static void
test_filter_documented(void **state)
{
	const char *src = getenv("EGRESS_SOURCE_DIR");
	char path[512], *doc = NULL, *sec;
	size_t n, cap = 0;
	const char *const *names = collector_filter_syscalls(&n);
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/docs/seccomp.md", src ? src : "..");
	f = fopen(path, "re");
	assert_non_null(f);
	assert_true(getdelim(&doc, &cap, '\0', f) > 0);
	fclose(f);
	sec = strstr(doc, "## The collector's filter");
	assert_non_null(sec);
	for (size_t i = 0; i < n; i++) {
		char want[64];
		snprintf(want, sizeof(want), "| `%s` |", names[i]);
		if (strstr(sec, want) == NULL)
			fail_msg("%s is not in docs/seccomp.md's collector table", names[i]);
	}
	free(doc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_confined),
		cmocka_unit_test(test_verdict_passes),
		cmocka_unit_test(test_foreign_exit_code),
		cmocka_unit_test(test_crash),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_setup_fails_closed),
		cmocka_unit_test(test_dies_with_parent),
		cmocka_unit_test(test_status_lost_fails_closed),
		cmocka_unit_test(test_links),
		cmocka_unit_test(test_filter_documented),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
