/*
 * sandbox - the ordered steps of one confined run (docs/sandbox.md is the same list):
 *
 *  supervisor                                   child (pid 1 of the new namespaces)
 *  1. attest the nine capabilities
 *  2. cgroup: create, limits, read back
 *  3. overlay layer tmpfs (upper + work)
 *  4. embedded egressd (when networked and no
 *     control socket was given)
 *  5. clone NEWNS|NEWPID|NEWIPC|NEWUTS|NEWNET ----> waits on the sync pipe
 *  6. attach the child to the cgroup
 *  7. link netns of the run's own: veth pair
 *     (peer straight into the child's netns),
 *     host address, listener; grant.create
 *     passes the listener to egressd
 *  8. "go" + link description ------------------> 9.  unshare(NEWCGROUP): its root is ours
 *                                                  10. lo (+ eth0 address) up, verified
 *                                                  11. hostname; mounts: new root, overlay,
 *                                                      pivot_root; verified
 *                                                  12. init forks the worker:
 *                                                      setsid, stdio, close fds, chdir,
 *                                                      privs drop (verified), seccomp last
 *                                                      (verified), execve
 * 13. setup pipe reaches EOF: the worker exec'd (or a report names the failed step)
 * 14. supervise: wall budget, bounded stdout/stderr, pids sampling
 * 15. teardown, whatever happened: kill the whole cgroup, usage read back, destroy it,
 *     grant.revoke, veth removed, embedded egressd stopped, merged view for the caller.
 */
#define _GNU_SOURCE
#include "executor/sandbox.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/pattern.h"
#include "common/runca.h"
#include "common/util.h"
#include "executor/cgroup.h"
#include "executor/attest.h"
#include "executor/egressd_client.h"
#include "executor/env.h"
#include "executor/init.h"
#include "executor/mounts.h"
#include "executor/netns.h"
#include "executor/privs.h"
#include "executor/sandbox_state.h"
#include "executor/seccomp.h"

#define SB_SETUP_TIMEOUT_MS  30000  /* child setup (mounts, net) until the worker execs */
#define SB_DRAIN_TIMEOUT_MS  2000   /* pipes after the cgroup is dead */
#define SB_GRANT_MARGIN_S    60     /* grant lifetime = wall budget + this */
#define SB_PROXY_PORT        3128   /* egressd's listener in the run's link namespace */
#define SB_ARGV_MAX          4096

/* Parent -> child after the cgroup attach and the veth. */
struct sb_go {
	int ok;
	int has_link;
	struct netns_link link;
};

/* Child -> parent when a setup step fails (the pipe is O_CLOEXEC: EOF means exec'd). */
struct sb_report {
	char step[32];
	int err;
	char msg[448];
};

struct sb_child {
	const struct sandbox_spec *spec;
	struct mounts_spec ms;
	struct privs_spec ps;
	char *const *argv;
	char *const *envp;
	int sync_rd, report_wr, status_wr, out_wr, err_wr, in_rd;
	char *wipe;                 /* the run CA key: the child's copy is wiped at once */
};

static void
sb_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

static ssize_t
sb_read_full(int fd, void *buf, size_t len)
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
	struct sb_report r;

	memset(&r, 0, sizeof(r));
	snprintf(r.step, sizeof(r.step), "%s", step);
	r.err = e;
	snprintf(r.msg, sizeof(r.msg), "%s", msg);
	sb_write_all(fd, &r, sizeof(r));
	_exit(127);
}

/* Environment over the sync pipe: u32 count, then u32 length + bytes per entry. */
#define SB_ENV_ENTRY_MAX (ENV_NAME_MAX + ENV_VALUE_MAX + 2)

static void
sb_env_send(int fd, char *const *envp)
{
	uint32_t n = 0;

	while (envp[n])
		n++;
	sb_write_all(fd, &n, sizeof(n));
	for (uint32_t i = 0; i < n; i++) {
		uint32_t len = (uint32_t)strlen(envp[i]);
		sb_write_all(fd, &len, sizeof(len));
		sb_write_all(fd, envp[i], len);
	}
}

/* Child side; bounded by the same limits env_build enforces. NULL on any mismatch. */
static char **
sb_env_recv(int fd)
{
	uint32_t n, len;
	char **e;

	if (sb_read_full(fd, &n, sizeof(n)) != (ssize_t)sizeof(n) || n > EGRESS_ENV_VARS_MAX + 8)
		return NULL;
	e = calloc((size_t)n + 1, sizeof(*e));
	if (e == NULL)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		if (sb_read_full(fd, &len, sizeof(len)) != (ssize_t)sizeof(len) ||
		    len > SB_ENV_ENTRY_MAX)
			return NULL;
		e[i] = malloc((size_t)len + 1);
		if (e[i] == NULL || sb_read_full(fd, e[i], len) != (ssize_t)len)
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
	struct sb_child *c = arg;
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
__attribute__((noreturn)) static void
sb_child_main(struct sb_child *c)
{
	struct sb_go go;
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
	if (sb_close_except(keep, EGRESS_NELEM(keep)) != 0)
		sb_child_fail(c->report_wr, "fds", errno, "close inherited file descriptors");
	if (sb_read_full(c->sync_rd, &go, sizeof(go)) != (ssize_t)sizeof(go) || !go.ok)
		_exit(126);     /* the supervisor gave up before "go": leave quietly */
	c->envp = sb_env_recv(c->sync_rd);
	if (c->envp == NULL)
		sb_child_fail(c->report_wr, "environment", 0, "bad environment from the supervisor");
	close(c->sync_rd);

	/* After the supervisor attached us: the cgroup namespace root is the run's group. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		sb_child_fail(c->report_wr, "cgroupns", errno, "unshare(CLONE_NEWCGROUP)");
	if (netns_worker_setup(go.has_link ? &go.link : NULL, err, sizeof(err)) < 0)
		sb_child_fail(c->report_wr, "network", 0, err);
	if (sethostname("sandbox", 7) < 0 || setdomainname("sandbox", 7) < 0)
		sb_child_fail(c->report_wr, "uts", errno, "sethostname");
	if (mounts_enter(&c->ms, err, sizeof(err)) < 0)
		sb_child_fail(c->report_wr, "mounts", 0, err);
	if (mounts_verify(c->spec->workdir, err, sizeof(err)) < 0)
		sb_child_fail(c->report_wr, "mounts-verify", 0, err);
	if (c->ms.idmap_fd >= 0)
		close(c->ms.idmap_fd);

	closes[0] = c->report_wr;
	closes[1] = c->out_wr;
	closes[2] = c->err_wr;
	closes[3] = c->in_rd;
	init_run(sb_worker, c, c->status_wr, closes, EGRESS_NELEM(closes));
}

static int sb_fail(struct sandbox_result *r, enum reason why, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
sb_fail(struct sandbox_result *r, enum reason why, const char *fmt, ...)
{
	va_list ap;

	r->reason = why;
	va_start(ap, fmt);
	vsnprintf(r->message, sizeof(r->message), fmt, ap);
	va_end(ap);
	return -1;
}

static int
sb_validate(const struct sandbox_spec *s, struct sandbox_result *r)
{
	const struct sandbox_limits *l = &s->limits;

	if (s->executable == NULL || s->executable[0] != '/')
		return sb_fail(r, REASON_INTERNAL_ERROR, "the executable must be an absolute path");
	if (s->argv == NULL || s->argv[0] == NULL)
		return sb_fail(r, REASON_INTERNAL_ERROR, "argv must hold at least argv[0]");
	if (s->repo_dir == NULL || s->workdir == NULL || s->run_dir == NULL)
		return sb_fail(r, REASON_INTERNAL_ERROR, "repo_dir, workdir and run_dir are required");
	if (!mounts_option_path_ok(s->repo_dir) || !mounts_option_path_ok(s->run_dir))
		return sb_fail(r, REASON_INTERNAL_ERROR, "repo_dir and run_dir must be absolute "
		    "paths without ',' ':' or '\\\\'");
	if (!mounts_workdir_ok(s->workdir))
		return sb_fail(r, REASON_INTERNAL_ERROR, "workdir %s is not an absolute canonical "
		    "path outside /usr, /bin, /sbin, /lib*, /etc, /proc, /dev and /tmp", s->workdir);
	if (s->uid == 0 || s->gid == 0)
		return sb_fail(r, REASON_INTERNAL_ERROR, "the worker never runs as uid or gid 0");
	if (l->cpu_millicores == 0 || l->memory_bytes == 0 || l->disk_bytes == 0 ||
	    l->pids == 0 || l->output_bytes == 0 || l->wall_seconds == 0 || l->open_files == 0)
		return sb_fail(r, REASON_INTERNAL_ERROR, "every limit must be set (no unlimited run)");
	if (s->net == SANDBOX_NET_ALLOWLIST && (s->allowlist == NULL || s->allowlist[0] == NULL))
		return sb_fail(r, REASON_INTERNAL_ERROR, "a networked run needs an allowlist");
	if (s->prompt_transport == PROMPT_ARGUMENT && (s->prompt == NULL || s->prompt_flag == NULL))
		return sb_fail(r, REASON_INTERNAL_ERROR, "prompt argument needs prompt and flag");
	return 0;
}

static int
sb_join(char *out, const char *a, const char *b)
{
	int n = snprintf(out, EGRESS_PATH_MAX, "%s/%s", a, b);
	return (n < 0 || n >= EGRESS_PATH_MAX) ? -1 : 0;
}

static bool
sb_is_proxy_var(const char *kv)
{
	static const char *const names[] = {
		"HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy=", "NO_PROXY=",
		"no_proxy=", "ALL_PROXY=", "all_proxy=", NULL
	};
	for (size_t i = 0; names[i]; i++)
		if (strncmp(kv, names[i], strlen(names[i])) == 0)
			return true;
	return false;
}

/*
 * The worker's environment: spec->envp (already built by env_build) minus any proxy
 * variable, plus the proxy variables pointing at this run's listener when networked
 * (only known after grant.create, hence set here).
 */
/*
 * This run's interception CA (common/runca.h): valid for the wall budget and the grant's
 * margin, name-constrained to the https:// hosts of the allowlist (the connection's
 * destinations the WorkUnit asked for), so a leaked key signs for nothing else. An IP
 * literal among them leaves the CA unconstrained (DNS constraints cannot name it).
 */
static int
sb_run_ca(const struct sandbox_spec *spec, const char *run_id, char **cert, char **key,
    char *err, size_t errlen)
{
	static struct dest_pattern pats[EGRESS_GRANT_ENTRIES_MAX];
	const char *names[EGRESS_GRANT_ENTRIES_MAX + 1];
	size_t n = 0;
	bool constrain = true;
	char cn[96];

	for (size_t i = 0; spec->allowlist && spec->allowlist[i] && n < EGRESS_GRANT_ENTRIES_MAX;
	    i++) {
		if (pattern_parse(spec->allowlist[i], &pats[n], NULL) != 0 ||
		    pats[n].scheme != SCHEME_HTTPS)
			continue;
		if (pats[n].host.kind != HOST_NAME)
			constrain = false;
		names[n] = pats[n].host.name;
		n++;
	}
	names[n] = NULL;
	snprintf(cn, sizeof(cn), "egress run CA %.64s", run_id);
	return runca_make(cn, constrain ? names : NULL,
	    (uint32_t)(spec->limits.wall_seconds + SB_GRANT_MARGIN_S + 3600), cert, key, err,
	    errlen);
}

/* Where common runtimes look for CA roots: all at the bundle of the host's roots plus the
 * run CA (mounts.h MOUNTS_CA_BUNDLE). Static strings (sb_envp_free skips them). */
static const char *const sb_ca_vars[] = {
	"SSL_CERT_FILE=" MOUNTS_CA_BUNDLE,          /* OpenSSL, Go, Python ssl, Ruby */
	"NODE_EXTRA_CA_CERTS=" MOUNTS_CA_BUNDLE,    /* Node.js (added to its own roots) */
	"REQUESTS_CA_BUNDLE=" MOUNTS_CA_BUNDLE,     /* Python requests */
	"CURL_CA_BUNDLE=" MOUNTS_CA_BUNDLE,         /* curl, also Python httpx via certifi env */
	"GIT_SSL_CAINFO=" MOUNTS_CA_BUNDLE,         /* git over https */
	"PIP_CERT=" MOUNTS_CA_BUNDLE,               /* pip */
	"NPM_CONFIG_CAFILE=" MOUNTS_CA_BUNDLE,      /* npm */
	"CARGO_HTTP_CAINFO=" MOUNTS_CA_BUNDLE,      /* cargo */
	"DENO_CERT=" MOUNTS_CA_BUNDLE,              /* deno */
	"AWS_CA_BUNDLE=" MOUNTS_CA_BUNDLE,          /* AWS SDKs and CLI */
};

static bool
sb_is_ca_var(const char *kv)
{
	for (size_t i = 0; i < EGRESS_NELEM(sb_ca_vars); i++) {
		const char *eq = strchr(sb_ca_vars[i], '=');
		if (strncmp(kv, sb_ca_vars[i], (size_t)(eq - sb_ca_vars[i]) + 1) == 0)
			return true;
	}
	return false;
}

static char **
sb_envp(const struct sandbox_spec *s, const char *proxy_url, bool with_ca,
    const char *placeholder_kv)
{
	size_t n = 0, k = 0;
	char **e;

	while (s->envp && s->envp[n])
		n++;
	if (n > EGRESS_ENV_VARS_MAX)
		return NULL;
	e = calloc(n + 9 + EGRESS_NELEM(sb_ca_vars), sizeof(*e));
	if (e == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (sb_is_proxy_var(s->envp[i]) || (with_ca && sb_is_ca_var(s->envp[i])))
			continue;
		if (placeholder_kv != NULL && strncmp(s->envp[i], placeholder_kv,
		    (size_t)(strchr(placeholder_kv, '=') - placeholder_kv) + 1) == 0)
			continue;
		e[k++] = (char *)(uintptr_t)s->envp[i];
	}
	if (proxy_url) {
		static const char *const pv[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
			"https_proxy" };
		for (size_t i = 0; i < EGRESS_NELEM(pv); i++) {
			if (asprintf(&e[k], "%s=%s", pv[i], proxy_url) < 0)
				e[k] = NULL;
			if (e[k])
				k++;
		}
		e[k++] = (char *)"NO_PROXY=";
		e[k++] = (char *)"no_proxy=";
	}
	if (with_ca)
		for (size_t i = 0; i < EGRESS_NELEM(sb_ca_vars); i++)
			e[k++] = (char *)(uintptr_t)sb_ca_vars[i];
	if (placeholder_kv != NULL)
		e[k++] = (char *)(uintptr_t)placeholder_kv;
	e[k] = NULL;
	return e;
}

static void
sb_envp_free(char **e, const struct sandbox_spec *s, const char *placeholder_kv)
{
	if (e == NULL)
		return;
	for (size_t i = 0; e[i]; i++) {
		bool from_spec = false;
		for (size_t j = 0; s->envp && s->envp[j] && !from_spec; j++)
			from_spec = e[i] == s->envp[j];
		for (size_t j = 0; j < EGRESS_NELEM(sb_ca_vars) && !from_spec; j++)
			from_spec = e[i] == sb_ca_vars[j];
		from_spec = from_spec || e[i] == placeholder_kv;   /* freed by the caller */
		if (!from_spec && strncmp(e[i], "NO_PROXY=", 9) != 0 &&
		    strncmp(e[i], "no_proxy=", 9) != 0)
			free(e[i]);
	}
	free(e);
}

static char **
sb_argv(const struct sandbox_spec *s)
{
	size_t n = 0;
	char **a;

	while (s->argv[n])
		n++;
	if (n > SB_ARGV_MAX)
		return NULL;
	a = calloc(n + 3, sizeof(*a));
	if (a == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		a[i] = (char *)(uintptr_t)s->argv[i];
	if (s->prompt_transport == PROMPT_ARGUMENT) {
		a[n++] = (char *)(uintptr_t)s->prompt_flag;
		a[n++] = (char *)(uintptr_t)s->prompt;
	}
	a[n] = NULL;
	return a;
}

/* Bounded capture of one stream: keep up to max bytes, drain (and count) the rest. */
struct sb_cap {
	int fd;
	char *buf;
	size_t len, max;
	bool truncated;
};

static void
sb_cap_read(struct sb_cap *c)
{
	char tmp[16384];

	for (;;) {
		ssize_t n = read(c->fd, tmp, sizeof(tmp));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close(c->fd);
			c->fd = -1;
			return;
		}
		if (c->len < c->max) {
			size_t room = c->max - c->len, take = (size_t)n < room ? (size_t)n : room;
			memcpy(c->buf + c->len, tmp, take);
			c->len += take;
			if (take < (size_t)n)
				c->truncated = true;
		} else {
			c->truncated = true;
		}
	}
}

static int
sb_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* SIGTERM/SIGINT/SIGHUP to the supervisor during a run: stop supervising and tear down
 * (kill the cgroup, revoke the grant) instead of dying with everything left behind. */
static volatile sig_atomic_t sb_interrupted;

static void
sb_on_signal(int sig)
{
	sb_interrupted = sig;
}

struct sb_sigsave {
	struct sigaction pipe, term, intr, hup;
};

static void
sb_signals_enter(struct sb_sigsave *save)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, on = { .sa_handler = sb_on_signal };

	/* no SA_RESTART: poll() returns EINTR and the loop sees the flag */
	sigemptyset(&ign.sa_mask);
	sigemptyset(&on.sa_mask);
	sb_interrupted = 0;
	/* A worker that closes its stdin must not kill the supervisor with SIGPIPE. */
	sigaction(SIGPIPE, &ign, &save->pipe);
	sigaction(SIGTERM, &on, &save->term);
	sigaction(SIGINT, &on, &save->intr);
	sigaction(SIGHUP, &on, &save->hup);
}

static void
sb_signals_leave(const struct sb_sigsave *save)
{
	sigaction(SIGPIPE, &save->pipe, NULL);
	sigaction(SIGTERM, &save->term, NULL);
	sigaction(SIGINT, &save->intr, NULL);
	sigaction(SIGHUP, &save->hup, NULL);
}

static int sandbox_run_inner(const struct sandbox_spec *spec, struct sandbox_result *res);

int
sandbox_run(const struct sandbox_spec *spec, struct sandbox_result *res)
{
	struct sb_sigsave save;
	int rc;

	sb_signals_enter(&save);
	rc = sandbox_run_inner(spec, res);
	sb_signals_leave(&save);
	return rc;
}

static int
sandbox_run_inner(const struct sandbox_spec *spec, struct sandbox_result *res)
{
	struct sb_child child;
	struct sb_go go;
	struct sb_report rep;
	struct netns_pool pool;
	struct netns_link link;
	struct egressd_embedded emb;
	struct cgroup_limits cl;
	struct cgroup_usage usage;
	struct cgroup *cg = NULL;
	struct sb_cap out = { .fd = -1 }, errc = { .fd = -1 };
	struct sandbox_state st;
	char layer[EGRESS_PATH_MAX], rootdir[EGRESS_PATH_MAX], upper[EGRESS_PATH_MAX];
	char owork[EGRESS_PATH_MAX], merged[EGRESS_PATH_MAX], lowerdir[EGRESS_PATH_MAX] = "";
	char run_id[CGROUP_RUN_ID_MAX], tag[9], err[512], proxy_url[EGRESS_HOSTPORT_MAX + 16];
	char listen[EGRESS_HOSTPORT_MAX + 1];
	const char *control = NULL;
	char **argv = NULL, **envp = NULL;
	char *run_ca_cert = NULL, *run_ca_key = NULL;
	char *placeholder_kv = NULL;        /* "NAME=egress-placeholder-<hex>" */
	int syncp[2] = { -1, -1 }, repp[2] = { -1, -1 }, statp[2] = { -1, -1 };
	int outp[2] = { -1, -1 }, errp[2] = { -1, -1 }, inp[2] = { -1, -1 };
	int pidfd = -1, wstatus = 0, rc = -1, idmap_fd = -1, link_ns = -1, listen_fd = -1;
	int grc;
	bool interrupted = false;
	bool layer_made = false, veth_made = false, have_status = false, child_reaped = false;
	size_t prompt_off = 0, prompt_len = 0;
	unsigned char rnd[4];
	uint64_t t0, deadline;
	pid_t pid = -1;
	json_t *att = NULL;

	memset(res, 0, sizeof(*res));
	memset(&emb, 0, sizeof(emb));
	memset(&link, 0, sizeof(link));
	memset(&st, 0, sizeof(st));
	res->reason = REASON_INTERNAL_ERROR;
	if (sb_validate(spec, res) < 0)
		return -1;

	/* 1. Attestation: every capability this run needs, verified here, or no run. */
	if (!sandbox_attest(spec->net == SANDBOX_NET_ALLOWLIST, &att)) {
		res->attestation = att;
		char missing[480];

		attest_missing(att, missing, sizeof(missing));
		return sb_fail(res, REASON_CAPABILITY_MISSING, "missing capabilities: %s", missing);
	}
	res->attestation = att;

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return sb_fail(res, REASON_INTERNAL_ERROR, "getrandom failed");
	hex_encode(rnd, sizeof(rnd), tag);
	snprintf(run_id, sizeof(run_id), "egx-%s", tag);
	if (sb_join(layer, spec->run_dir, "layer") < 0 || sb_join(rootdir, spec->run_dir, "root") < 0 ||
	    sb_join(merged, spec->run_dir, "merged") < 0)
		return sb_fail(res, REASON_INTERNAL_ERROR, "run_dir path too long");

	/* State record first, so `egress-exec cleanup` finds whatever a kill -9 leaves. */
	snprintf(st.run_id, sizeof(st.run_id), "%s", run_id);
	snprintf(st.run_dir, sizeof(st.run_dir), "%s", spec->run_dir);
	snprintf(st.veth, sizeof(st.veth), "%s%sh", NETNS_IF_PREFIX, tag);
	st.pid = getpid();
	if (sandbox_state_write(&st, err, sizeof(err)) < 0)
		return sb_fail(res, REASON_INTERNAL_ERROR, "%s", err);

	/* 2. cgroup with limits read back. */
	cl.cpu_millicores = spec->limits.cpu_millicores;
	cl.memory_bytes = spec->limits.memory_bytes;
	cl.pids = spec->limits.pids;
	cg = cgroup_create(NULL, run_id, &cl, err, sizeof(err));
	if (cg == NULL) {
		sb_fail(res, REASON_CAPABILITY_MISSING, "cgroup: %s", err);
		goto teardown;
	}
	res->limits_applied = cgroup_applied_json(cg);

	/* 3. The overlay's upper layer on a bounded tmpfs the supervisor owns. */
	if (mkdir(rootdir, 0700) < 0 && errno != EEXIST) {
		sb_fail(res, REASON_INTERNAL_ERROR, "mkdir %s: %s", rootdir, strerror(errno));
		goto teardown;
	}
	/* From here on teardown removes the layer even when its creation failed halfway. */
	layer_made = true;
	if (mounts_layer_create(layer, spec->limits.disk_bytes, spec->repo_dir, upper, owork,
	    err, sizeof(err)) < 0) {
		sb_fail(res, REASON_INTERNAL_ERROR, "upper layer: %s", err);
		goto teardown;
	}

	/* Overlay ownership: copy-up keeps the lower owner, so a worker that is not the
	 * repository owner gets the repository through an idmapped lower layer (owner ->
	 * worker); otherwise it could not modify a single file. */
	{
		struct stat rst;

		if (stat(spec->repo_dir, &rst) < 0) {
			sb_fail(res, REASON_INTERNAL_ERROR, "stat %s: %s", spec->repo_dir,
			    strerror(errno));
			goto teardown;
		}
		if (rst.st_uid != spec->uid) {
			idmap_fd = mounts_idmap_userns(rst.st_uid, rst.st_gid, spec->uid, spec->gid,
			    err, sizeof(err));
			if (idmap_fd < 0 || mounts_layer_owner(upper, spec->uid, spec->gid, err,
			    sizeof(err)) < 0 || sb_join(lowerdir, spec->run_dir, "lower") < 0 ||
			    (mkdir(lowerdir, 0700) < 0 && errno != EEXIST)) {
				sb_fail(res, REASON_CAPABILITY_MISSING, "idmapped repository: %s", err);
				goto teardown;
			}
			if (res->limits_applied)
				json_object_set_new(res->limits_applied, "repo_idmap", json_sprintf(
				    "%u:%u->%u:%u", (unsigned)rst.st_uid, (unsigned)rst.st_gid,
				    (unsigned)spec->uid, (unsigned)spec->gid));
		}
	}

	/* 4. egressd: the given control socket, or a private one for this run. */
	if (spec->net == SANDBOX_NET_ALLOWLIST) {
		if (netns_pool_parse(spec->net_pool ? spec->net_pool : NETNS_POOL_DEFAULT, &pool) < 0) {
			sb_fail(res, REASON_INTERNAL_ERROR, "invalid address pool");
			goto teardown;
		}
		if (spec->egressd_control) {
			control = spec->egressd_control;
		} else {
			if (egressd_embedded_start(spec->run_dir, spec->egressd_settings, &emb, err,
			    sizeof(err)) < 0) {
				sb_fail(res, REASON_CAPABILITY_MISSING, "embedded egressd: %s", err);
				goto teardown;
			}
			control = emb.sock;
			snprintf(res->decisions_path, sizeof(res->decisions_path), "%s",
			    emb.decisions);
		}
	}

	argv = sb_argv(spec);
	if (argv == NULL) {
		sb_fail(res, REASON_INTERNAL_ERROR, "argv too long");
		goto teardown;
	}
	if (pipe2(syncp, O_CLOEXEC) < 0 || pipe2(repp, O_CLOEXEC) < 0 ||
	    pipe2(statp, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0 ||
	    pipe2(errp, O_CLOEXEC) < 0 ||
	    (spec->prompt_transport == PROMPT_STDIN && pipe2(inp, O_CLOEXEC) < 0)) {
		sb_fail(res, REASON_INTERNAL_ERROR, "pipe: %s", strerror(errno));
		goto teardown;
	}
	out.max = errc.max = spec->limits.output_bytes;
	out.buf = malloc(out.max);
	errc.buf = malloc(errc.max);
	if (out.buf == NULL || errc.buf == NULL) {
		sb_fail(res, REASON_INTERNAL_ERROR, "output buffers");
		goto teardown;
	}

	memset(&child, 0, sizeof(child));
	child.spec = spec;
	child.ms.root_dir = rootdir;
	child.ms.repo_dir = spec->repo_dir;
	child.ms.upper_dir = upper;
	child.ms.ovl_work_dir = owork;
	child.ms.workdir = spec->workdir;
	child.ms.forbidden_paths = spec->forbidden_paths;
	child.ms.tmp_bytes = spec->limits.disk_bytes;
	child.ms.uid = spec->uid;
	child.ms.gid = spec->gid;
	child.ms.idmap_fd = idmap_fd;
	child.ms.lower_dir = lowerdir;
	/* A model connection: this run's CA (docs/model-connections.md). Its certificate goes
	 * into the sandbox's CA bundle, its key only to egressd with the grant. */
	if (spec->connection != NULL && spec->net == SANDBOX_NET_ALLOWLIST) {
		if (sb_run_ca(spec, run_id, &run_ca_cert, &run_ca_key, err, sizeof(err)) != 0) {
			sb_fail(res, REASON_INTERNAL_ERROR, "run CA: %s", err);
			goto teardown;
		}
		child.ms.run_ca_pem = run_ca_cert;
		child.wipe = run_ca_key;
		/* The worker's stand-in for the credential: random per run, useless anywhere
		 * but in the intercepted credential header egressd replaces. */
		if (spec->placeholder_env != NULL) {
			unsigned char prnd[16];
			char hex[sizeof(prnd) * 2 + 1];
			if (getrandom(prnd, sizeof(prnd), 0) != (ssize_t)sizeof(prnd) ||
			    (hex_encode(prnd, sizeof(prnd), hex), asprintf(&placeholder_kv,
			    "%s=egress-placeholder-%s", spec->placeholder_env, hex)) < 0) {
				placeholder_kv = NULL;
				sb_fail(res, REASON_INTERNAL_ERROR, "placeholder: %s", strerror(errno));
				goto teardown;
			}
		}
	}
	child.ps.uid = spec->uid;
	child.ps.gid = spec->gid;
	child.ps.fsize_bytes = spec->limits.disk_bytes;
	child.ps.open_files = spec->limits.open_files;
	child.ps.nproc = 0;     /* the pids cgroup is the bound; NPROC is per uid */
	child.argv = argv;
	child.sync_rd = syncp[0];
	child.report_wr = repp[1];
	child.status_wr = statp[1];
	child.out_wr = outp[1];
	child.err_wr = errp[1];
	child.in_rd = inp[0];

	/* 5. The child: new mount, pid, ipc, uts and network namespaces; it waits for "go".
	 * Its environment follows "go" through the sync pipe, because the proxy URL is only
	 * known after grant.create, long after the child's memory was copied at clone. */
	fflush(NULL);
	pid = (pid_t)syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
	    CLONE_NEWUTS | CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid < 0) {
		sb_fail(res, REASON_CAPABILITY_MISSING, "clone with new namespaces: %s%s",
		    strerror(errno), errno == EPERM ? " (run as root; see egress-exec doctor)" : "");
		goto teardown;
	}
	if (pid == 0)
		sb_child_main(&child);   /* never returns */

	if (idmap_fd >= 0) {
		close(idmap_fd);
		idmap_fd = -1;
	}
	close(syncp[0]); syncp[0] = -1;
	close(repp[1]); repp[1] = -1;
	close(statp[1]); statp[1] = -1;
	close(outp[1]); outp[1] = -1;
	close(errp[1]); errp[1] = -1;
	if (inp[0] >= 0) {
		close(inp[0]);
		inp[0] = -1;
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		sb_fail(res, REASON_INTERNAL_ERROR, "pidfd_open: %s", strerror(errno));
		goto teardown;
	}

	/* 6. Attach before the child does anything: no step runs outside the limits. */
	if (cgroup_attach(cg, pid, err, sizeof(err)) < 0) {
		sb_fail(res, REASON_CAPABILITY_MISSING, "cgroup attach: %s", err);
		goto teardown;
	}

	memset(&go, 0, sizeof(go));
	go.ok = 1;
	/* 7. Network: the run's own link namespace (only the veth's host end and egressd's
	 * listener live there), the peer straight into the child's namespace, then the grant
	 * with the listener passed to egressd. */
	if (spec->net == SANDBOX_NET_ALLOWLIST) {
		if (netns_link_create(&pool, pid, tag, SB_PROXY_PORT, &link, &link_ns, &listen_fd,
		    err, sizeof(err)) < 0) {
			sb_fail(res, REASON_CAPABILITY_MISSING, "veth: %s", err);
			goto teardown;
		}
		veth_made = true;
		struct egressd_grant_model gm = { spec->connection, run_ca_cert, run_ca_key,
			placeholder_kv != NULL ? strchr(placeholder_kv, '=') + 1 : NULL };
		grc = egressd_grant_create_fd(control, spec->principal ? spec->principal : run_id,
		    spec->connection != NULL ? &gm : NULL, spec->allowlist, listen_fd, link.host_if,
		    spec->limits.wall_seconds + SB_GRANT_MARGIN_S, res->grant_id, listen, err,
		    sizeof(err));
		/* egressd holds its own copy now (or refused it): ours is not needed. */
		close(listen_fd);
		listen_fd = -1;
		if (grc < 0) {
			attest_network_failed(res->attestation, err);
			sb_fail(res, REASON_CAPABILITY_MISSING, "grant: %s", err);
			goto teardown;
		}
		snprintf(proxy_url, sizeof(proxy_url), "http://%s", listen);
		go.has_link = 1;
		go.link = link;
		/* Now network_enforcement is proven: netns + veth + a grant egressd issued. */
		attest_network_granted(res->attestation, link.host_if, res->grant_id);
	}
	envp = sb_envp(spec, spec->net == SANDBOX_NET_ALLOWLIST ? proxy_url : NULL,
	    run_ca_cert != NULL, placeholder_kv);
	if (envp == NULL) {
		sb_fail(res, REASON_INTERNAL_ERROR, "environment too large");
		goto teardown;
	}
	sb_write_all(syncp[1], &go, sizeof(go));
	sb_env_send(syncp[1], envp);
	close(syncp[1]);
	syncp[1] = -1;

	/* 13. Setup result: EOF on the report pipe means the worker exec'd. */
	t0 = mono_msec();
	{
		struct pollfd p = { repp[0], POLLIN, 0 };
		int pr;
		ssize_t n;

		do {
			pr = poll(&p, 1, SB_SETUP_TIMEOUT_MS);
		} while (pr < 0 && errno == EINTR && !sb_interrupted);
		if (sb_interrupted) {
			sb_fail(res, REASON_INTERNAL_ERROR, "egress-exec received signal %d during "
			    "the sandbox setup", (int)sb_interrupted);
			goto teardown;
		}
		if (pr <= 0) {
			sb_fail(res, REASON_INTERNAL_ERROR, "sandbox setup did not finish in %d ms",
			    SB_SETUP_TIMEOUT_MS);
			goto teardown;
		}
		n = sb_read_full(repp[0], &rep, sizeof(rep));
		if (n == (ssize_t)sizeof(rep)) {
			rep.step[sizeof(rep.step) - 1] = '\0';
			rep.msg[sizeof(rep.msg) - 1] = '\0';
			sb_fail(res, strcmp(rep.step, "exec") == 0 ? REASON_WORKER_FAILED :
			    REASON_CAPABILITY_MISSING, "sandbox step %s failed: %s%s%s", rep.step,
			    rep.msg, rep.err ? ": " : "", rep.err ? strerror(rep.err) : "");
			goto teardown;
		}
		if (n != 0) {
			sb_fail(res, REASON_INTERNAL_ERROR, "sandbox setup ended without exec");
			goto teardown;
		}
	}
	res->started = true;

	/* 14. Supervise: wall budget, bounded output, pids sampling. */
	out.fd = outp[0]; outp[0] = -1;
	errc.fd = errp[0]; errp[0] = -1;
	sb_nonblock(out.fd);
	sb_nonblock(errc.fd);
	if (spec->prompt_transport == PROMPT_STDIN && spec->prompt) {
		prompt_len = strlen(spec->prompt);
		sb_nonblock(inp[1]);
	} else if (inp[1] >= 0) {
		close(inp[1]);
		inp[1] = -1;
	}
	deadline = t0 + (uint64_t)spec->limits.wall_seconds * 1000u;
	for (;;) {
		struct pollfd p[4];
		nfds_t np = 0;
		int ip = -1, io = -1, ie = -1, pr;
		uint64_t now = mono_msec();
		int wait_ms;

		if (now >= deadline) {
			res->timed_out = true;
			break;
		}
		if (sb_interrupted) {
			interrupted = true;
			break;
		}
		wait_ms = (int)(deadline - now);
		if (wait_ms > 200)
			wait_ms = 200;   /* pids sampling cadence */
		if (!child_reaped) {
			p[np] = (struct pollfd){ pidfd, POLLIN, 0 };
			ip = (int)np++;
		}
		if (out.fd >= 0) {
			p[np] = (struct pollfd){ out.fd, POLLIN, 0 };
			io = (int)np++;
		}
		if (errc.fd >= 0) {
			p[np] = (struct pollfd){ errc.fd, POLLIN, 0 };
			ie = (int)np++;
		}
		if (inp[1] >= 0) {
			p[np] = (struct pollfd){ inp[1], POLLOUT, 0 };
			np++;
		}
		if (child_reaped && out.fd < 0 && errc.fd < 0)
			break;
		pr = poll(p, np, wait_ms);
		cgroup_sample(cg);
		if (pr < 0 && errno != EINTR)
			break;
		if (pr <= 0)
			continue;
		if (io >= 0 && p[io].revents)
			sb_cap_read(&out);
		if (ie >= 0 && p[ie].revents)
			sb_cap_read(&errc);
		if (inp[1] >= 0) {
			ssize_t w = prompt_off < prompt_len ?
			    write(inp[1], spec->prompt + prompt_off, prompt_len - prompt_off) : 0;
			if (w > 0)
				prompt_off += (size_t)w;
			if (prompt_off >= prompt_len || (w < 0 && errno != EAGAIN && errno != EINTR)) {
				close(inp[1]);
				inp[1] = -1;
			}
		}
		if (ip >= 0 && p[ip].revents) {
			/* init exited: the worker is done; the pid ns is torn down by the kernel. */
			if (waitpid(pid, &wstatus, 0) == pid)
				child_reaped = true;
			if (sb_read_full(statp[0], &wstatus, sizeof(wstatus)) ==
			    (ssize_t)sizeof(wstatus))
				have_status = true;
			/* Give the pipes a short, bounded time to reach EOF. */
			if (deadline > mono_msec() + SB_DRAIN_TIMEOUT_MS)
				deadline = mono_msec() + SB_DRAIN_TIMEOUT_MS;
		}
	}
	res->wall_ms = mono_msec() - t0;
	rc = 0;
	if (res->timed_out && child_reaped && have_status)
		res->timed_out = false;     /* the worker ended; only its pipes lingered */

teardown:
	/* 15. Teardown whatever happened: the whole cgroup first (background and setsid
	 * children included), then usage, then the rest. */
	if (syncp[1] >= 0) {
		close(syncp[1]);    /* child still waiting: EOF makes it leave */
		syncp[1] = -1;
	}
	if (cg) {
		if (cgroup_kill(cg, 0, err, sizeof(err)) < 0)
			log_warnx("sandbox %s: cgroup kill: %s", run_id, err);
		if (cgroup_usage_read(cg, &usage, err, sizeof(err)) == 0) {
			res->cpu_usec = usage.cpu_usec;
			res->peak_memory_bytes = usage.peak_memory_bytes;
			res->oom_kills = usage.oom_kills;
			res->peak_pids = usage.peak_pids;
			res->oom_killed = usage.oom_kills > 0;
		}
	}
	if (pid > 0 && !child_reaped) {
		/* Bounded: the cgroup is dead, so init is gone or going. */
		uint64_t until = mono_msec() + 5000;
		while (!child_reaped && mono_msec() < until) {
			pid_t w = waitpid(pid, &wstatus, WNOHANG);
			if (w == pid)
				child_reaped = true;
			else
				usleep(10000);
		}
		if (!child_reaped) {
			kill(pid, SIGKILL);
			child_reaped = waitpid(pid, &wstatus, 0) == pid;
		}
		if (statp[0] >= 0 && !have_status) {
			sb_nonblock(statp[0]);
			have_status = sb_read_full(statp[0], &wstatus, sizeof(wstatus)) ==
			    (ssize_t)sizeof(wstatus);
		}
	}
	if (out.fd >= 0) {
		sb_cap_read(&out);
		if (out.fd >= 0)
			close(out.fd);
	}
	if (errc.fd >= 0) {
		sb_cap_read(&errc);
		if (errc.fd >= 0)
			close(errc.fd);
	}
	if (cg && cgroup_destroy(cg, err, sizeof(err)) < 0)
		log_warnx("sandbox %s: cgroup destroy: %s (egress-exec cleanup removes it)",
		    run_id, err);
	cg = NULL;
	if (res->grant_id[0] && control &&
	    egressd_grant_revoke(control, res->grant_id, err, sizeof(err)) < 0)
		log_warnx("sandbox %s: grant.revoke: %s (the grant expires on its own)", run_id, err);
	if (listen_fd >= 0)
		close(listen_fd);
	if (veth_made && netns_link_destroy(link_ns, link.host_if) < 0)
		log_warnx("sandbox %s: veth %s still present in its link namespace", run_id,
		    link.host_if);
	egressd_embedded_stop(&emb);

	res->out = out.buf;
	res->out_len = out.len;
	res->out_truncated = out.truncated;
	res->err = errc.buf;
	res->err_len = errc.len;
	res->err_truncated = errc.truncated;
	out.buf = errc.buf = NULL;

	if (rc == 0) {
		if (have_status) {
			if (WIFEXITED(wstatus))
				res->exit_code = WEXITSTATUS(wstatus);
			else if (WIFSIGNALED(wstatus))
				res->term_signal = WTERMSIG(wstatus);
		} else {
			res->term_signal = SIGKILL;
		}
		if (interrupted)
			sb_fail(res, REASON_WORKER_FAILED, "egress-exec received signal %d; the "
			    "worker's whole process tree was killed", (int)sb_interrupted);
		else if (res->timed_out)
			sb_fail(res, REASON_WORKER_TIMEOUT, "the worker exceeded its wall budget of "
			    "%u s and its whole process tree was killed", spec->limits.wall_seconds);
		else if (res->oom_killed)
			sb_fail(res, REASON_WORKER_OOM, "the worker exceeded its memory limit "
			    "(%u OOM kill(s))", res->oom_kills);
		else if (res->exit_code != 0 || res->term_signal != 0)
			sb_fail(res, REASON_WORKER_FAILED, "the worker %s %d",
			    res->term_signal ? "was killed by signal" : "exited with status",
			    res->term_signal ? res->term_signal : res->exit_code);
		else {
			res->reason = REASON_ALLOWED;
			res->message[0] = '\0';
		}
	}

	/* The upper layer stays for the caller; the merged view is read-only. */
	if (layer_made && rc == 0) {
		if (mounts_merged_create(merged, upper, spec->repo_dir, err, sizeof(err)) < 0) {
			/* no view of what the worker changed: the result cannot be trusted */
			sb_fail(res, REASON_INTERNAL_ERROR, "merged view: %s", err);
		} else {
			snprintf(res->merged_dir, sizeof(res->merged_dir), "%s", merged);
		}
		snprintf(res->upper_dir, sizeof(res->upper_dir), "%s", upper);
	} else if (layer_made) {
		mounts_layer_destroy(layer);
	}
	rmdir(rootdir);
	if (lowerdir[0])
		rmdir(lowerdir);
	if (idmap_fd >= 0)
		close(idmap_fd);
	if (rc != 0 || !layer_made)
		sandbox_state_remove(run_id);
	else
		snprintf(res->run_id, sizeof(res->run_id), "%s", run_id);

	for (int *fd = (int[]){ syncp[0], syncp[1], repp[0], repp[1], statp[0], statp[1],
	    outp[0], outp[1], errp[0], errp[1], inp[0], inp[1], pidfd, -2 }; *fd != -2; fd++)
		if (*fd >= 0)
			close(*fd);
	free(out.buf);
	free(errc.buf);
	free(argv);
	sb_envp_free(envp, spec, placeholder_kv);
	free(placeholder_kv);
	free(run_ca_cert);
	if (run_ca_key != NULL) {
		secret_wipe(run_ca_key, strlen(run_ca_key));
		free(run_ca_key);
	}
	return rc;
}

void
sandbox_release_upper(struct sandbox_result *r)
{
	char layer[EGRESS_PATH_MAX];
	size_t n;

	if (r == NULL)
		return;
	if (r->merged_dir[0])
		mounts_merged_destroy(r->merged_dir);
	if (r->upper_dir[0]) {
		/* upper_dir is <run_dir>/layer/upper: the layer tmpfs is its parent. */
		snprintf(layer, sizeof(layer), "%s", r->upper_dir);
		n = strlen(layer);
		if (n > 6 && strcmp(layer + n - 6, "/upper") == 0) {
			layer[n - 6] = '\0';
			mounts_layer_destroy(layer);
		}
	}
	if (r->run_id[0])
		sandbox_state_remove(r->run_id);
	r->merged_dir[0] = r->upper_dir[0] = r->run_id[0] = '\0';
}

void
sandbox_result_free(struct sandbox_result *r)
{
	if (r == NULL)
		return;
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
	json_decref(r->attestation);
	json_decref(r->limits_applied);
	r->attestation = r->limits_applied = NULL;
}
