/*
 * sandbox_child - the child's side of a run. See sandbox_child.h for the order and why.
 */
#define _GNU_SOURCE
#include "executor/sandbox_child.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/util.h"
#include "executor/cgroup.h"
#include "executor/env.h"
#include "executor/init.h"
#include "executor/seccomp.h"

ssize_t
sandbox_pipe_read(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

__attribute__((noreturn)) static void
sb_child_fail(int fd, const char *step, int e, const char *msg)
{
	struct sandbox_report r;

	memset(&r, 0, sizeof(r));
	snprintf(r.step, sizeof(r.step), "%s", step);
	r.err = e;
	snprintf(r.msg, sizeof(r.msg), "%s", msg);
	(void)write_all(fd, &r, sizeof(r));
	_exit(127);
}

/* Environment over the sync pipe: u32 count, then u32 length + bytes per entry. */
#define SB_ENV_ENTRY_MAX (ENV_NAME_MAX + ENV_VALUE_MAX + 2)

void
sandbox_env_send(int fd, char *const *envp)
{
	uint32_t n = 0;

	while (envp[n])
		n++;
	(void)write_all(fd, &n, sizeof(n));
	for (uint32_t i = 0; i < n; i++) {
		uint32_t len = (uint32_t)strlen(envp[i]);
		(void)write_all(fd, &len, sizeof(len));
		(void)write_all(fd, envp[i], len);
	}
}

/* Child side; bounded by the same limits env_build enforces. NULL on any mismatch. */
static char **
sb_env_recv(int fd)
{
	uint32_t n, len;
	char **e;

	if (sandbox_pipe_read(fd, &n, sizeof(n)) != (ssize_t)sizeof(n) || n > SANDBOX_ENV_MAX)
		return NULL;
	e = calloc((size_t)n + 1, sizeof(*e));
	if (e == NULL)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		if (sandbox_pipe_read(fd, &len, sizeof(len)) != (ssize_t)sizeof(len) ||
		    len > SB_ENV_ENTRY_MAX)
			return NULL;
		e[i] = malloc((size_t)len + 1);
		if (e[i] == NULL || sandbox_pipe_read(fd, e[i], len) != (ssize_t)len)
			return NULL;
		e[i][len] = '\0';
	}
	return e;   /* lives until execve replaces the image */
}

/*
 * Close every fd >= 3 except keep[] (close_range over the gaps), then prove it from
 * /proc/self/fd, closing anything close_range left (it may be missing: ENOSYS before 5.9).
 * Returns 0, or -1 when an fd could not be closed or the proof could not be made: the
 * caller fails the step rather than hand the worker an inherited descriptor.
 */
static int
sb_close_except(int *keep, size_t n)
{
	unsigned lo = 3;
	DIR *d;
	struct dirent *de;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (keep[j] < keep[i]) {
				int t = keep[i];
				keep[i] = keep[j];
				keep[j] = t;
			}
	for (size_t i = 0; i < n; i++) {
		if (keep[i] < 3 || (unsigned)keep[i] < lo)
			continue;
		if ((unsigned)keep[i] > lo)
			(void)syscall(SYS_close_range, lo, (unsigned)keep[i] - 1, 0);
		lo = (unsigned)keep[i] + 1;
	}
	(void)syscall(SYS_close_range, lo, ~0u, 0);
	d = opendir("/proc/self/fd");
	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		const char *es;
		long long fd;
		bool kept = false;

		if (de->d_name[0] == '.' ||
		    num_parse(de->d_name, 0, INT32_MAX, &fd, &es) != 0)
			continue;
		if (fd < 3 || fd == dirfd(d))
			continue;
		for (size_t i = 0; i < n; i++)
			kept = kept || keep[i] == (int)fd;
		if (!kept && close((int)fd) != 0 && errno != EBADF)
			rc = -1;
	}
	closedir(d);
	return rc;
}

/* The worker: pid 2 of the sandbox, forked by init. Never returns on success. */
static int
sb_worker(void *arg)
{
	struct sandbox_child *c = arg;
	char err[400];
	int keep[1];
	int in = c->in_rd;

	/* Own session, no controlling terminal: TIOCSTI has no terminal to inject into. */
	if (setsid() < 0)
		sb_child_fail(c->report_wr, "setsid", errno, "setsid");
	if (in < 0)
		in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in < 0 || dup2(in, 0) < 0 || dup2(c->out_wr, 1) < 0 || dup2(c->err_wr, 2) < 0)
		sb_child_fail(c->report_wr, "stdio", errno, "set up stdin/stdout/stderr");
	/* The report pipe is the only fd beyond stdio that survives until exec (cloexec). */
	keep[0] = c->report_wr;
	if (sb_close_except(keep, 1) != 0)
		sb_child_fail(c->report_wr, "fds", errno, "close inherited file descriptors");
	if (chdir(c->spec->workdir) < 0)
		sb_child_fail(c->report_wr, "chdir", errno, "chdir to the workdir");
	if (privs_drop(&c->ps, err, sizeof(err)) < 0)
		sb_child_fail(c->report_wr, "privs", 0, err);
	/* Seccomp last: nothing after it but execve. */
	if (seccomp_profile_install(err, sizeof(err)) < 0)
		sb_child_fail(c->report_wr, "seccomp", 0, err);
	if (seccomp_profile_verify(err, sizeof(err)) < 0)
		sb_child_fail(c->report_wr, "seccomp", 0, err);
	execve(c->spec->executable, c->argv, c->envp);
	sb_child_fail(c->report_wr, "exec", errno, c->spec->executable);
}

/* pid 1 of the new namespaces. Never returns. */
void
sandbox_child_main(struct sandbox_child *c)
{
	struct sandbox_go go;
	char err[400];
	int keep[7] = { c->sync_rd, c->report_wr, c->status_wr, c->out_wr, c->err_wr, c->in_rd,
		c->ms.idmap_fd };
	int closes[4];

	/* The run CA's key is the supervisor's and egressd's alone: not even this process's
	 * copy of the supervisor's memory keeps it. */
	if (c->wipe != NULL)
		secret_wipe(c->wipe, strlen(c->wipe));
	/* If the supervisor dies, the sandbox dies with it (and takes the pid ns down). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* 6. Into the run's cgroup before anything else (no step runs outside the limits).
	 * From here, not by the supervisor: on cgroup v1 a process moving its own (only)
	 * thread skips the kernel's global lock and the RCU grace period behind it
	 * (cgroup.h). The supervisor reads the membership back before "go"; a failure is
	 * reported and the attach pipe reaches EOF without its byte. */
	if (cgroup_attach_self(c->cg, err, sizeof(err)) < 0)
		sb_child_fail(c->report_wr, "cgroup-attach", 0, err);
	if (write_all(c->attach_wr, "a", 1) != 0)
		_exit(126);
	close(c->attach_wr);
	if (sb_close_except(keep, EGRESS_NELEM(keep)) != 0)
		sb_child_fail(c->report_wr, "fds", errno, "close inherited file descriptors");

	/* The new root is built before "go", while the supervisor collects the attestation
	 * and makes the run's link and grant: it needs nothing those decide (the resolver's
	 * address waits for mounts_etc_finish), and nothing runs here but this process until
	 * "go". No worker exists, no privilege is dropped, no network is touched before it
	 * (the attestation checks this namespace's network untouched); a failure here is
	 * reported on the report pipe and the supervisor finds it after "go". */
	/* Inside the run's cgroup (we attached ourselves): the namespace root is its group. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		sb_child_fail(c->report_wr, "cgroupns", errno, "unshare(CLONE_NEWCGROUP)");
	if (sethostname("sandbox", 7) < 0 || setdomainname("sandbox", 7) < 0)
		sb_child_fail(c->report_wr, "uts", errno, "sethostname");
	if (mounts_enter(&c->ms, err, sizeof(err)) < 0)
		sb_child_fail(c->report_wr, "mounts", 0, err);
	if (c->ms.idmap_fd >= 0)
		close(c->ms.idmap_fd);

	if (sandbox_pipe_read(c->sync_rd, &go, sizeof(go)) != (ssize_t)sizeof(go) || !go.ok)
		_exit(126);     /* the supervisor gave up before "go": leave quietly */
	c->envp = sb_env_recv(c->sync_rd);
	if (c->envp == NULL)
		sb_child_fail(c->report_wr, "environment", 0, "bad environment from the supervisor");
	close(c->sync_rd);

	if (netns_worker_setup(go.has_link ? &go.link : NULL, err, sizeof(err)) < 0)
		sb_child_fail(c->report_wr, "network", 0, err);
	/* The stub resolver at the gateway (docs/transparent.md); no resolver otherwise. */
	if (mounts_etc_finish(go.has_link && go.link.capture ? go.link.host_addr : NULL, err,
	    sizeof(err)) < 0)
		sb_child_fail(c->report_wr, "mounts", 0, err);
	if (mounts_verify(c->spec->workdir, err, sizeof(err)) < 0)
		sb_child_fail(c->report_wr, "mounts-verify", 0, err);

	closes[0] = c->report_wr;
	closes[1] = c->out_wr;
	closes[2] = c->err_wr;
	closes[3] = c->in_rd;
	init_run(sb_worker, c, c->status_wr, closes, EGRESS_NELEM(closes));
}

