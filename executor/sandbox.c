/*
 * sandbox - the ordered steps of one confined run (docs/sandbox.md is the same list):
 *
 *  supervisor                                   child (pid 1 of the new namespaces)
 *  1a. run id, state record
 *  4. embedded egressd spawned (when networked
 *     and no control socket was given); it starts
 *     while steps 1-6 run, waited for in step 7
 *  1. attestation probes started (children)
 *  2. cgroup: create, limits, read back
 *  3. overlay layer tmpfs (upper + work)
 *  5. clone NEWNS|NEWPID|NEWIPC|NEWUTS|NEWNET ----> 6. attaches itself to the cgroup,
 *                                                     then waits on the sync pipe
 *  1b. attestation collected: all nine, or no
 *     run (the child gets EOF and leaves)
 *  6b. the child's attach confirmed (attach pipe)
 *     and its pid read back in every hierarchy
 *  7. link netns of the run's own: veth pair
 *     (peer straight into the child's netns),
 *     host address, listener; egressd ready
 *     (readiness pipe); grant.create passes
 *     the listener to egressd
 *  8. "go" + link description ------------------> 9.  unshare(NEWCGROUP): its root is ours
 *                                                  10. lo (+ eth0 address) up, verified
 *                                                  11. hostname; mounts: new root, overlay,
 *                                                      pivot_root; verified
 *                                                  12. init forks the worker:
 *                                                      setsid, stdio, close fds, chdir,
 *                                                      privs drop (verified), seccomp last
 *                                                      (verified), execve
 *     setup pipe reaches EOF: the worker exec'd (or a report names the failed step)
 * 13. supervise: wall budget, bounded stdout/stderr, pids sampling
 * 14. teardown, whatever happened: kill the whole cgroup, usage read back, destroy it,
 *     grant.revoke, veth removed, embedded egressd stopped
 * 14b. classify the worker's outcome, once (sandbox_result.reason and .message)
 * 15. hand over: merged view and upper layer for the caller, or the layer removed
 *
 * sandbox_run is those phases in order: sb_setup (steps 1-12, one function per step,
 * sb_setup_*), sb_supervise (13), sb_teardown (14), sb_classify (14b), sb_hand_over (15).
 * Their shared state is one struct sb_run. The child's side (steps 9-12) is
 * executor/sandbox_child.c.
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
#include "executor/netcapture.h"
#include "executor/netns.h"
#include "executor/privs.h"
#include "executor/sandbox_state.h"
#include "executor/sandbox_child.h"
#include "executor/procwait.h"
#include "executor/seccomp.h"

#define SB_SETUP_TIMEOUT_MS  30000  /* child setup (mounts, net) until the worker execs */
#define SB_DRAIN_TIMEOUT_MS  2000   /* pipes after the cgroup is dead */
#define SB_REAP_TIMEOUT_MS   5000   /* init after the cgroup is dead */
#define SB_ATTACH_TIMEOUT_MS 10000  /* the child's own cgroup attach (sb_setup_attached) */
#define SB_GRANT_MARGIN_S    60     /* grant lifetime = wall budget + this */
#define SB_PROXY_PORT        3128   /* egressd's listener in the run's link namespace */
#define SB_ARGV_MAX          4096

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
	e = calloc(n + ENV_PROXY_CONVENTIONS_MAX + 3 + EGRESS_NELEM(sb_ca_vars), sizeof(*e));
	if (e == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (sb_is_proxy_var(s->envp[i]) || env_is_proxy_convention(s->envp[i],
		    s->java_proxy) || (with_ca && sb_is_ca_var(s->envp[i])))
			continue;
		if (placeholder_kv != NULL && strncmp(s->envp[i], placeholder_kv,
		    (size_t)(strchr(placeholder_kv, '=') - placeholder_kv) + 1) == 0)
			continue;
		e[k++] = (char *)(uintptr_t)s->envp[i];
	}
	/* every client family's spelling of the proxy, all at this run's listener (env.h);
	 * git over ssh when the grant has a tcp:// entry */
	bool tcp = false;
	for (size_t i = 0; s->allowlist && s->allowlist[i]; i++)
		tcp = tcp || strncmp(s->allowlist[i], "tcp://", 6) == 0;
	if (proxy_url) {
		int np = env_proxy_conventions(proxy_url, s->java_proxy, tcp, e + k,
		    ENV_PROXY_CONVENTIONS_MAX + 1);
		if (np < 0) {
			free(e);
			return NULL;
		}
		k += (size_t)np;
	}
	/* a model connection: the run CA's bundle for every runtime, and the placeholder */
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
		if (!from_spec)
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

/*
 * One run's state between the steps; lives in sandbox_run's frame. The setup steps fill
 * it, supervise reads the worker's streams into it, teardown undoes all of it whatever
 * happened, classify reads it to name the outcome once.
 */
struct sb_run {
	const struct sandbox_spec *spec;
	struct sandbox_result *res;
	char run_id[CGROUP_RUN_ID_MAX], tag[9];
	char layer[EGRESS_PATH_MAX], rootdir[EGRESS_PATH_MAX], upper[EGRESS_PATH_MAX];
	char owork[EGRESS_PATH_MAX], merged[EGRESS_PATH_MAX], lowerdir[EGRESS_PATH_MAX];
	bool state_written;             /* the sandbox_state record exists */
	struct attest_pending *attesting;  /* step 1: probes running */
	bool attest_started;
	struct cgroup *cg;              /* step 2 */
	bool layer_made;                /* step 3: teardown removes the layer */
	int idmap_fd;                   /* step 3: user namespace of the idmapped lower layer */
	struct netns_pool pool;         /* step 4 */
	struct egressd_embedded emb;
	const char *control;            /* the egressd that issues the grant */
	char **argv, **envp;            /* step 5 */
	char *run_ca_cert, *run_ca_key; /* step 5: a model connection's run CA (key wiped) */
	char *placeholder_kv;           /* step 5: "NAME=egress-placeholder-<hex>" */
	int syncp[2], repp[2], statp[2], attp[2], outp[2], errp[2], inp[2];
	struct sandbox_child child;
	pid_t pid;                      /* the child (pid 1 of the sandbox) */
	int pidfd;
	struct netns_link link;         /* step 7 */
	int link_ns, listen_fd;
	bool veth_made;
	char listen[EGRESS_HOSTPORT_MAX + 1], proxy_url[EGRESS_HOSTPORT_MAX + 16];
	struct sb_cap out, errc;        /* step 14 */
	uint64_t t0;
	int wstatus;
	bool have_status, child_reaped, interrupted;
	char err[512];
};

static void
sb_run_init(struct sb_run *r, const struct sandbox_spec *spec, struct sandbox_result *res)
{
	memset(r, 0, sizeof(*r));
	memset(res, 0, sizeof(*res));
	r->spec = spec;
	r->res = res;
	r->idmap_fd = r->pidfd = r->link_ns = r->listen_fd = -1;
	r->pid = -1;
	for (int *fd = &r->syncp[0]; fd <= &r->inp[1]; fd++)
		*fd = -1;
	r->out.fd = r->errc.fd = -1;
	res->reason = REASON_INTERNAL_ERROR;
}

static void
sb_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* 1a. The run's names and its state record (first, so `egress-exec cleanup` finds whatever
 * a kill -9 leaves, including a private egressd's folder). */
static int
sb_setup_ids(struct sb_run *r)
{
	const struct sandbox_spec *spec = r->spec;
	struct sandbox_result *res = r->res;
	struct sandbox_state st;
	unsigned char rnd[4];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return sb_fail(res, REASON_INTERNAL_ERROR, "getrandom failed");
	hex_encode(rnd, sizeof(rnd), r->tag);
	snprintf(r->run_id, sizeof(r->run_id), "egx-%s", r->tag);
	if (sb_join(r->layer, spec->run_dir, "layer") < 0 ||
	    sb_join(r->rootdir, spec->run_dir, "root") < 0 ||
	    sb_join(r->merged, spec->run_dir, "merged") < 0)
		return sb_fail(res, REASON_INTERNAL_ERROR, "run_dir path too long");

	memset(&st, 0, sizeof(st));
	snprintf(st.run_id, sizeof(st.run_id), "%s", r->run_id);
	snprintf(st.run_dir, sizeof(st.run_dir), "%s", spec->run_dir);
	snprintf(st.veth, sizeof(st.veth), "%s%sh", NETNS_IF_PREFIX, r->tag);
	st.pid = getpid();
	if (sandbox_state_write(&st, r->err, sizeof(r->err)) < 0)
		return sb_fail(res, REASON_INTERNAL_ERROR, "%s", r->err);
	r->state_written = true;
	return 0;
}

/* 1. Attestation: every capability this run needs, verified now, or no run. The probes
 * start here (attest_begin_run) and are collected in sb_setup_attest_end, after the clone
 * and before anything is granted or the child is told "go": steps 2, 3 and 5 overlap them.
 * The limits are attested from the run's own group (step 2, read back), and the network
 * from the run's own veth and grant (step 7): no throwaway group or veth pair (attest.h).
 * Nothing those steps make is usable by a worker before the attestation passed (the
 * child only waits on the sync pipe; teardown undoes it all on a failure). */
static int
sb_setup_attest_begin(struct sb_run *r)
{
	r->attesting = attest_begin_run(r->spec->net == SANDBOX_NET_ALLOWLIST);
	r->attest_started = true;
	/* The filter is compiled once, before the self-test's fork and the clone (seccomp.h):
	 * attest_begin_run compiled it after forking the namespace probe, which needs none
	 * (so the compile overlaps the probe); a compile that failed fails the run here. */
	if (seccomp_profile_prepare(r->err, sizeof(r->err)) < 0)
		return sb_fail(r->res, REASON_CAPABILITY_MISSING, "%s", r->err);
	return 0;
}

static int
sb_setup_attest_end(struct sb_run *r)
{
	struct sandbox_result *res = r->res;
	struct attest_row rows[ATTEST__COUNT];
	bool ok;

	if (!r->attest_started)   /* fail closed: no attestation, no run */
		return sb_fail(res, REASON_INTERNAL_ERROR, "attestation was not started");
	ok = attest_end_run(r->attesting, r->cg, r->pid, rows);
	r->attesting = NULL;
	r->attest_started = false;
	res->attestation = attest_rows_json(rows);
	if (!ok || res->attestation == NULL) {
		char missing[480];

		attest_missing(res->attestation, missing, sizeof(missing));
		return sb_fail(res, REASON_CAPABILITY_MISSING, "missing capabilities: %s", missing);
	}
	return 0;
}

/* 2. The cgroup, limits read back. */
static int
sb_setup_cgroup(struct sb_run *r)
{
	struct cgroup_limits cl;

	cl.cpu_millicores = r->spec->limits.cpu_millicores;
	cl.memory_bytes = r->spec->limits.memory_bytes;
	cl.pids = r->spec->limits.pids;
	r->cg = cgroup_create(NULL, r->run_id, &cl, r->err, sizeof(r->err));
	if (r->cg == NULL)
		return sb_fail(r->res, REASON_CAPABILITY_MISSING, "cgroup: %s", r->err);
	r->res->limits_applied = cgroup_applied_json(r->cg);
	return 0;
}

/* 3. The overlay's upper layer on a bounded tmpfs the supervisor owns, and the idmapped
 * lower layer when the worker is not the repository owner. */
static int
sb_setup_layer(struct sb_run *r)
{
	const struct sandbox_spec *spec = r->spec;
	struct sandbox_result *res = r->res;
	struct stat rst;

	if (mkdir(r->rootdir, 0700) < 0 && errno != EEXIST)
		return sb_fail(res, REASON_INTERNAL_ERROR, "mkdir %s: %s", r->rootdir,
		    strerror(errno));
	/* From here on teardown removes the layer even when its creation failed halfway. */
	r->layer_made = true;
	if (mounts_layer_create(r->layer, spec->limits.disk_bytes, spec->repo_dir, r->upper,
	    r->owork, r->err, sizeof(r->err)) < 0)
		return sb_fail(res, REASON_INTERNAL_ERROR, "upper layer: %s", r->err);

	/* Overlay ownership: copy-up keeps the lower owner, so a worker that is not the
	 * repository owner gets the repository through an idmapped lower layer (owner ->
	 * worker); otherwise it could not modify a single file. */
	if (stat(spec->repo_dir, &rst) < 0)
		return sb_fail(res, REASON_INTERNAL_ERROR, "stat %s: %s", spec->repo_dir,
		    strerror(errno));
	if (rst.st_uid == spec->uid)
		return 0;
	r->idmap_fd = mounts_idmap_userns(rst.st_uid, rst.st_gid, spec->uid, spec->gid, r->err,
	    sizeof(r->err));
	if (r->idmap_fd < 0 || mounts_layer_owner(r->upper, spec->uid, spec->gid, r->err,
	    sizeof(r->err)) < 0 || sb_join(r->lowerdir, spec->run_dir, "lower") < 0 ||
	    (mkdir(r->lowerdir, 0700) < 0 && errno != EEXIST))
		return sb_fail(res, REASON_CAPABILITY_MISSING, "idmapped repository: %s", r->err);
	if (res->limits_applied)
		json_object_set_new(res->limits_applied, "repo_idmap", json_sprintf(
		    "%u:%u->%u:%u", (unsigned)rst.st_uid, (unsigned)rst.st_gid,
		    (unsigned)spec->uid, (unsigned)spec->gid));
	return 0;
}

/* 4. egressd: the given control socket, or a private one for this run. The private one is
 * only spawned here, before attestation, and waited for in step 7 just before the grant:
 * its start-up (the longest step) overlaps attestation, cgroup, layer and clone. Starting
 * the trusted proxy early grants nothing: the grant still follows a passed attestation,
 * and teardown stops egressd whatever step fails. */
static int
sb_setup_egressd(struct sb_run *r)
{
	const struct sandbox_spec *spec = r->spec;

	if (spec->net != SANDBOX_NET_ALLOWLIST)
		return 0;
	if (netns_pool_parse(spec->net_pool ? spec->net_pool : NETNS_POOL_DEFAULT, &r->pool) < 0)
		return sb_fail(r->res, REASON_INTERNAL_ERROR, "invalid address pool");
	if (spec->egressd_control) {
		r->control = spec->egressd_control;
		return 0;
	}
	if (egressd_embedded_spawn(spec->run_dir, spec->egressd_settings, &r->emb, r->err,
	    sizeof(r->err)) < 0)
		return sb_fail(r->res, REASON_CAPABILITY_MISSING, "embedded egressd: %s", r->err);
	r->control = r->emb.sock;
	snprintf(r->res->decisions_path, sizeof(r->res->decisions_path), "%s", r->emb.decisions);
	return 0;
}

/* 5. The child: new mount, pid, ipc, uts and network namespaces; it waits for "go". Its
 * environment follows "go" through the sync pipe, because the proxy URL is only known
 * after grant.create, long after the child's memory was copied at clone. */
static int
sb_setup_clone(struct sb_run *r)
{
	const struct sandbox_spec *spec = r->spec;
	struct sandbox_result *res = r->res;
	struct sandbox_child *c = &r->child;

	r->argv = sb_argv(spec);
	if (r->argv == NULL)
		return sb_fail(res, REASON_INTERNAL_ERROR, "argv too long");
	if (pipe2(r->syncp, O_CLOEXEC) < 0 || pipe2(r->repp, O_CLOEXEC) < 0 ||
	    pipe2(r->statp, O_CLOEXEC) < 0 || pipe2(r->attp, O_CLOEXEC) < 0 ||
	    pipe2(r->outp, O_CLOEXEC) < 0 ||
	    pipe2(r->errp, O_CLOEXEC) < 0 ||
	    (spec->prompt_transport == PROMPT_STDIN && pipe2(r->inp, O_CLOEXEC) < 0))
		return sb_fail(res, REASON_INTERNAL_ERROR, "pipe: %s", strerror(errno));
	r->out.max = r->errc.max = spec->limits.output_bytes;
	r->out.buf = malloc(r->out.max);
	r->errc.buf = malloc(r->errc.max);
	if (r->out.buf == NULL || r->errc.buf == NULL)
		return sb_fail(res, REASON_INTERNAL_ERROR, "output buffers");

	c->spec = spec;
	c->cg = r->cg;
	c->attach_wr = r->attp[1];
	c->ms.root_dir = r->rootdir;
	c->ms.repo_dir = spec->repo_dir;
	c->ms.upper_dir = r->upper;
	c->ms.ovl_work_dir = r->owork;
	c->ms.workdir = spec->workdir;
	c->ms.forbidden_paths = spec->forbidden_paths;
	c->ms.ro_binds = spec->ro_binds;
	c->ms.tmp_bytes = spec->limits.disk_bytes;
	c->ms.uid = spec->uid;
	c->ms.gid = spec->gid;
	c->ms.idmap_fd = r->idmap_fd;
	c->ms.lower_dir = r->lowerdir;
	/* A model connection: this run's CA (docs/model-connections.md). Its certificate goes
	 * into the sandbox's CA bundle, its key only to egressd with the grant. */
	if (spec->connection != NULL && spec->net == SANDBOX_NET_ALLOWLIST) {
		if (sb_run_ca(spec, r->run_id, &r->run_ca_cert, &r->run_ca_key, r->err,
		    sizeof(r->err)) != 0)
			return sb_fail(res, REASON_INTERNAL_ERROR, "run CA: %s", r->err);
		c->ms.run_ca_pem = r->run_ca_cert;
		c->wipe = r->run_ca_key;
		/* The worker's stand-in for the credential: random per run, useless anywhere
		 * but in the intercepted credential header egressd replaces. */
		if (spec->placeholder_env != NULL) {
			unsigned char prnd[16];
			char hex[sizeof(prnd) * 2 + 1];
			if (getrandom(prnd, sizeof(prnd), 0) != (ssize_t)sizeof(prnd) ||
			    (hex_encode(prnd, sizeof(prnd), hex), asprintf(&r->placeholder_kv,
			    "%s=egress-placeholder-%s", spec->placeholder_env, hex)) < 0) {
				r->placeholder_kv = NULL;
				return sb_fail(res, REASON_INTERNAL_ERROR, "placeholder: %s",
				    strerror(errno));
			}
		}
	}
	c->ps.uid = spec->uid;
	c->ps.gid = spec->gid;
	c->ps.fsize_bytes = spec->limits.disk_bytes;
	c->ps.open_files = spec->limits.open_files;
	c->ps.nproc = 0;     /* the pids cgroup is the bound; NPROC is per uid */
	c->argv = r->argv;
	c->sync_rd = r->syncp[0];
	c->report_wr = r->repp[1];
	c->status_wr = r->statp[1];
	c->out_wr = r->outp[1];
	c->err_wr = r->errp[1];
	c->in_rd = r->inp[0];

	/* The worker inherits the filter compiled in step 1 with its memory and only
	 * installs it. */
	fflush(NULL);
	r->pid = (pid_t)syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
	    CLONE_NEWUTS | CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, 0);
	if (r->pid < 0)
		return sb_fail(res, REASON_CAPABILITY_MISSING, "clone with new namespaces: %s%s",
		    strerror(errno), errno == EPERM ? " (run as root; see egress-exec doctor)" : "");
	if (r->pid == 0)
		sandbox_child_main(c);   /* never returns */

	/* The child's ends, and the idmap namespace it inherited, are its alone now. */
	sb_close(&r->idmap_fd);
	sb_close(&r->syncp[0]);
	sb_close(&r->repp[1]);
	sb_close(&r->statp[1]);
	sb_close(&r->attp[1]);
	sb_close(&r->outp[1]);
	sb_close(&r->errp[1]);
	sb_close(&r->inp[0]);
	r->pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0);
	if (r->pidfd < 0)
		return sb_fail(res, REASON_INTERNAL_ERROR, "pidfd_open: %s", strerror(errno));
	/* 6. The child attaches itself to the cgroup as its first step (sandbox_child.c) and
	 * does nothing else before "go"; sb_setup_attached checks it. */
	return 0;
}

/* 6b. The child's own cgroup attach: its byte on the attach pipe, then its pid read back
 * in every hierarchy, before anything is granted or the child told "go". EOF without the
 * byte: the child reported why on the report pipe (or died). It attaches itself rather
 * than being attached because on cgroup v1 a supervisor's cgroup.procs write waits for an
 * RCU grace period on the lock it takes (4-22 ms measured here, the longest wait before
 * "go" without network); the child's own thread moves without that lock (cgroup.h). */
static int
sb_setup_attached(struct sb_run *r)
{
	struct sandbox_result *res = r->res;
	struct pollfd p = { r->attp[0], POLLIN, 0 };
	struct sandbox_report rep;
	char b = 0;
	int pr;

	do {
		pr = poll(&p, 1, SB_ATTACH_TIMEOUT_MS);
	} while (pr < 0 && errno == EINTR && !sb_interrupted);
	if (sb_interrupted)
		return sb_fail(res, REASON_INTERNAL_ERROR, "egress-exec received signal %d during "
		    "the sandbox setup", (int)sb_interrupted);
	if (pr <= 0)
		return sb_fail(res, REASON_CAPABILITY_MISSING, "cgroup attach: the sandbox's "
		    "first process did not attach itself in %d ms", SB_ATTACH_TIMEOUT_MS);
	if (sandbox_pipe_read(r->attp[0], &b, 1) != 1 || b != 'a') {
		/* The child exited: its report (written before it exited) names the cause. */
		sb_nonblock(r->repp[0]);
		if (sandbox_pipe_read(r->repp[0], &rep, sizeof(rep)) == (ssize_t)sizeof(rep)) {
			rep.msg[sizeof(rep.msg) - 1] = '\0';
			return sb_fail(res, REASON_CAPABILITY_MISSING, "cgroup attach: %s", rep.msg);
		}
		return sb_fail(res, REASON_CAPABILITY_MISSING, "cgroup attach: the sandbox's "
		    "first process exited before attaching itself");
	}
	sb_close(&r->attp[0]);
	if (cgroup_attach_check(r->cg, r->pid, r->err, sizeof(r->err)) < 0)
		return sb_fail(res, REASON_CAPABILITY_MISSING, "cgroup attach: %s", r->err);
	return 0;
}

/* 7-8. (6, the cgroup attach, is sb_setup_clone and sb_setup_attached.) 7. network: the run's own link namespace (only the veth's host end and
 * egressd's listener live there), the peer straight into the child's namespace, then the
 * grant with the listener passed to egressd; 8. "go" and the environment. */
static int
sb_setup_go(struct sb_run *r)
{
	const struct sandbox_spec *spec = r->spec;
	struct sandbox_result *res = r->res;
	struct sandbox_go go;
	int grc;

	memset(&go, 0, sizeof(go));
	go.ok = 1;
	if (spec->net == SANDBOX_NET_ALLOWLIST) {
		/* This veth (address read back) and the grant are network_enforcement's proof
		 * (attest_begin_run made no veth of its own): either fails the row. */
		if (netns_link_create(&r->pool, r->pid, r->tag, SB_PROXY_PORT, &r->link, &r->link_ns,
		    &r->listen_fd, r->err, sizeof(r->err)) < 0) {
			attest_network_failed(res->attestation, r->err);
			return sb_fail(res, REASON_CAPABILITY_MISSING, "veth: %s", r->err);
		}
		r->veth_made = true;
		/* The private egressd spawned in step 4: ready (bounded wait) before the grant. */
		if (r->emb.pid > 0 && r->emb.ready_rd >= 0 &&
		    egressd_embedded_ready(&r->emb, r->err, sizeof(r->err)) < 0) {
			attest_network_failed(res->attestation, r->err);
			return sb_fail(res, REASON_CAPABILITY_MISSING, "embedded egressd: %s",
			    r->err);
		}
		struct egressd_grant_model gm = { spec->connection, r->run_ca_cert, r->run_ca_key,
			r->placeholder_kv != NULL ? strchr(r->placeholder_kv, '=') + 1 : NULL };
		grc = egressd_grant_create_fd(r->control, spec->principal ? spec->principal :
		    r->run_id, spec->connection != NULL ? &gm : NULL, spec->allowlist, r->listen_fd,
		    r->link.host_if,
		    spec->limits.wall_seconds + SB_GRANT_MARGIN_S, res->grant_id, r->listen, r->err,
		    sizeof(r->err));
		/* egressd holds its own copy now (or refused it): ours is not needed. */
		sb_close(&r->listen_fd);
		if (grc < 0) {
			attest_network_failed(res->attestation, r->err);
			return sb_fail(res, REASON_CAPABILITY_MISSING, "grant: %s", r->err);
		}
		snprintf(r->proxy_url, sizeof(r->proxy_url), "http://%s", r->listen);
		/* Transparent capture (docs/transparent.md): rules and the stub's socket in
		 * the link namespace, the socket to egressd for this grant. Requested and not
		 * possible is a refused run, never a run without it. */
		if (!spec->no_transparent) {
			int dns_fd = -1;

			if (netcapture_install(r->link_ns, &r->link, SB_PROXY_PORT, &dns_fd, r->err,
			    sizeof(r->err)) < 0 || egressd_grant_dns(r->control, res->grant_id,
			    dns_fd, r->err, sizeof(r->err)) < 0) {
				sb_close(&dns_fd);
				return sb_fail(res, REASON_CAPABILITY_MISSING, "transparent capture: %s "
				    "(turn it off with the preset's transparent = no or egress-exec "
				    "run --transparent=off)", r->err);
			}
			sb_close(&dns_fd);
			r->link.capture = true;
			res->transparent = true;
		}
		go.has_link = 1;
		go.link = r->link;
		/* Now network_enforcement is proven: netns + veth + a grant egressd issued. */
		attest_network_granted(res->attestation, r->link.host_if, res->grant_id);
	}
	r->envp = sb_envp(spec, spec->net == SANDBOX_NET_ALLOWLIST ? r->proxy_url : NULL,
	    r->run_ca_cert != NULL, r->placeholder_kv);
	if (r->envp == NULL)
		return sb_fail(res, REASON_INTERNAL_ERROR, "environment too large");
	(void)write_all(r->syncp[1], &go, sizeof(go));   /* a short write fails the child's step */
	sandbox_env_send(r->syncp[1], r->envp);
	sb_close(&r->syncp[1]);
	return 0;
}

/* A child's report (sandbox_child.c: the step that failed) as the run's failure. */
static int
sb_report_fail(struct sandbox_result *res, struct sandbox_report *rep)
{
	rep->step[sizeof(rep->step) - 1] = '\0';
	rep->msg[sizeof(rep->msg) - 1] = '\0';
	return sb_fail(res, strcmp(rep->step, "exec") == 0 ? REASON_WORKER_FAILED :
	    REASON_CAPABILITY_MISSING, "sandbox step %s failed: %s%s%s", rep->step,
	    rep->msg, rep->err ? ": " : "", rep->err ? strerror(rep->err) : "");
}

/* 12. Setup result: EOF on the report pipe means the worker exec'd; a report names the
 * step that failed. */
static int
sb_setup_wait_exec(struct sb_run *r)
{
	struct sandbox_result *res = r->res;
	struct pollfd p = { r->repp[0], POLLIN, 0 };
	struct sandbox_report rep;
	int pr;
	ssize_t n;

	r->t0 = mono_msec();
	do {
		pr = poll(&p, 1, SB_SETUP_TIMEOUT_MS);
	} while (pr < 0 && errno == EINTR && !sb_interrupted);
	if (sb_interrupted)
		return sb_fail(res, REASON_INTERNAL_ERROR, "egress-exec received signal %d during "
		    "the sandbox setup", (int)sb_interrupted);
	if (pr <= 0)
		return sb_fail(res, REASON_INTERNAL_ERROR, "sandbox setup did not finish in %d ms",
		    SB_SETUP_TIMEOUT_MS);
	n = sandbox_pipe_read(r->repp[0], &rep, sizeof(rep));
	if (n == (ssize_t)sizeof(rep))
		return sb_report_fail(res, &rep);
	if (n != 0)
		return sb_fail(res, REASON_INTERNAL_ERROR, "sandbox setup ended without exec");
	res->started = true;
	return 0;
}

/* Steps 1-12, in the order of docs/sandbox.md. 0 when the worker exec'd; -1 with the
 * result's reason and message saying which step failed (teardown undoes the rest). */
static int
sb_setup(struct sb_run *r)
{
	if (sb_validate(r->spec, r->res) < 0)
		return -1;
	/* egressd first: it only spawns here and is waited for in sb_setup_go. The
	 * attestation probes run from sb_setup_attest_begin to sb_setup_attest_end; the
	 * child's cgroup attach from sb_setup_clone to sb_setup_attached. */
	if (sb_setup_ids(r) < 0 || sb_setup_egressd(r) < 0 || sb_setup_attest_begin(r) < 0 ||
	    sb_setup_cgroup(r) < 0 || sb_setup_layer(r) < 0 || sb_setup_clone(r) < 0)
		return -1;
	if (sb_setup_attest_end(r) < 0 || sb_setup_attached(r) < 0 || sb_setup_go(r) < 0) {
		/* The child builds its root before "go" (sandbox_child.c): when one of its
		 * steps failed, its report is the cause (the step here may only have found
		 * it gone, e.g. its network namespace). Still a failed run either way. */
		struct sandbox_report rep;

		sb_nonblock(r->repp[0]);
		if (sandbox_pipe_read(r->repp[0], &rep, sizeof(rep)) == (ssize_t)sizeof(rep))
			(void)sb_report_fail(r->res, &rep);
		return -1;
	}
	return sb_setup_wait_exec(r);
}

/* 13. Supervise: wall budget, bounded output, the prompt on stdin, pids sampling. Ends
 * when init exited and both streams reached EOF (or a short drain after it), at the wall
 * budget, or on a signal to egress-exec. */
static void
sb_supervise(struct sb_run *r)
{
	const struct sandbox_spec *spec = r->spec;
	struct sandbox_result *res = r->res;
	size_t prompt_off = 0, prompt_len = 0;
	uint64_t deadline;

	r->out.fd = r->outp[0];
	r->outp[0] = -1;
	r->errc.fd = r->errp[0];
	r->errp[0] = -1;
	sb_nonblock(r->out.fd);
	sb_nonblock(r->errc.fd);
	if (spec->prompt_transport == PROMPT_STDIN && spec->prompt) {
		prompt_len = strlen(spec->prompt);
		sb_nonblock(r->inp[1]);
	} else {
		sb_close(&r->inp[1]);
	}
	deadline = r->t0 + (uint64_t)spec->limits.wall_seconds * 1000u;
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
			r->interrupted = true;
			break;
		}
		wait_ms = (int)(deadline - now);
		if (wait_ms > 200)
			wait_ms = 200;   /* pids sampling cadence */
		if (!r->child_reaped) {
			p[np] = (struct pollfd){ r->pidfd, POLLIN, 0 };
			ip = (int)np++;
		}
		if (r->out.fd >= 0) {
			p[np] = (struct pollfd){ r->out.fd, POLLIN, 0 };
			io = (int)np++;
		}
		if (r->errc.fd >= 0) {
			p[np] = (struct pollfd){ r->errc.fd, POLLIN, 0 };
			ie = (int)np++;
		}
		if (r->inp[1] >= 0) {
			p[np] = (struct pollfd){ r->inp[1], POLLOUT, 0 };
			np++;
		}
		if (r->child_reaped && r->out.fd < 0 && r->errc.fd < 0)
			break;
		pr = poll(p, np, wait_ms);
		cgroup_sample(r->cg);
		if (pr < 0 && errno != EINTR)
			break;
		if (pr <= 0)
			continue;
		if (io >= 0 && p[io].revents)
			sb_cap_read(&r->out);
		if (ie >= 0 && p[ie].revents)
			sb_cap_read(&r->errc);
		if (r->inp[1] >= 0) {
			ssize_t w = prompt_off < prompt_len ?
			    write(r->inp[1], spec->prompt + prompt_off, prompt_len - prompt_off) : 0;
			if (w > 0)
				prompt_off += (size_t)w;
			if (prompt_off >= prompt_len || (w < 0 && errno != EAGAIN && errno != EINTR))
				sb_close(&r->inp[1]);
		}
		if (ip >= 0 && p[ip].revents) {
			/* init exited: the worker is done; the pid ns is torn down by the kernel. */
			if (waitpid(r->pid, &r->wstatus, 0) == r->pid)
				r->child_reaped = true;
			if (sandbox_pipe_read(r->statp[0], &r->wstatus, sizeof(r->wstatus)) ==
			    (ssize_t)sizeof(r->wstatus))
				r->have_status = true;
			/* Give the pipes a short, bounded time to reach EOF. */
			if (deadline > mono_msec() + SB_DRAIN_TIMEOUT_MS)
				deadline = mono_msec() + SB_DRAIN_TIMEOUT_MS;
		}
	}
	res->wall_ms = mono_msec() - r->t0;
	if (res->timed_out && r->child_reaped && r->have_status)
		res->timed_out = false;     /* the worker ended; only its pipes lingered */
}

/* 14. Teardown, whatever happened: the whole cgroup first (background and setsid children
 * included), then usage, then the rest. The captured output moves to the result. */
static void
sb_teardown(struct sb_run *r)
{
	struct sandbox_result *res = r->res;
	struct cgroup_usage usage;
	bool group_empty = false;       /* every process of the run is gone (cgroup_kill) */

	sb_close(&r->syncp[1]);    /* a child still waiting for "go": EOF makes it leave */
	if (r->attest_started) {
		/* A step failed while the probes ran: collect them (bounded), and keep what
		 * they found in the result. */
		struct attest_row rows[ATTEST__COUNT];

		(void)attest_end_run(r->attesting, r->cg, r->pid, rows);
		r->attesting = NULL;
		r->attest_started = false;
		if (res->attestation == NULL)
			res->attestation = attest_rows_json(rows);
	}
	if (r->cg) {
		if (cgroup_kill(r->cg, 0, r->err, sizeof(r->err)) < 0)
			log_warnx("sandbox %s: cgroup kill: %s", r->run_id, r->err);
		else
			group_empty = true;
		if (cgroup_usage_read(r->cg, &usage, r->err, sizeof(r->err)) == 0) {
			res->cpu_usec = usage.cpu_usec;
			res->peak_memory_bytes = usage.peak_memory_bytes;
			res->oom_kills = usage.oom_kills;
			res->peak_pids = usage.peak_pids;
			res->oom_killed = usage.oom_kills > 0;
		}
	}
	if (r->pid > 0 && !r->child_reaped) {
		/* Bounded: the cgroup is dead, so init is gone or going; woken by its pidfd
		 * the moment it exits (no sleep steps). */
		r->child_reaped = procwait_pidfd(r->pid, r->pidfd, &r->wstatus,
		    SB_REAP_TIMEOUT_MS) == 1;
		if (!r->child_reaped) {
			kill(r->pid, SIGKILL);
			r->child_reaped = waitpid(r->pid, &r->wstatus, 0) == r->pid;
		}
		if (r->statp[0] >= 0 && !r->have_status) {
			sb_nonblock(r->statp[0]);
			r->have_status = sandbox_pipe_read(r->statp[0], &r->wstatus,
			    sizeof(r->wstatus)) == (ssize_t)sizeof(r->wstatus);
		}
	}
	if (r->out.fd >= 0) {
		sb_cap_read(&r->out);
		sb_close(&r->out.fd);
	}
	if (r->errc.fd >= 0) {
		sb_cap_read(&r->errc);
		sb_close(&r->errc.fd);
	}
	if (r->cg && cgroup_destroy(r->cg, r->err, sizeof(r->err)) < 0)
		log_warnx("sandbox %s: cgroup destroy: %s (egress-exec cleanup removes it)",
		    r->run_id, r->err);
	r->cg = NULL;
	if (res->grant_id[0] && r->control &&
	    egressd_grant_revoke(r->control, res->grant_id, r->err, sizeof(r->err)) < 0)
		log_warnx("sandbox %s: grant.revoke: %s (the grant expires on its own)", r->run_id,
		    r->err);
	sb_close(&r->listen_fd);
	/* The veth: when every process of the run is gone (the group is empty and init was
	 * reaped), the worker's network namespace has no user left and the kernel destroys
	 * it, and a veth pair goes with either of its namespaces; the link namespace goes
	 * with our fd and egressd's listener (closed by the revoke). Deleting the pair here
	 * as well only waited for the same RCU grace periods (RTM_DELLINK: 15 ms in a trace
	 * of a teardown), on the path to egress-exec's exit. If a process of the run may have
	 * survived, the pair is deleted now and checked gone, as before. */
	if (r->veth_made && !(group_empty && r->child_reaped)) {
		if (netns_link_destroy(r->link_ns, r->link.host_if) < 0)
			log_warnx("sandbox %s: veth %s still present in its link namespace",
			    r->run_id, r->link.host_if);
		r->link_ns = -1;    /* closed by netns_link_destroy */
	}
	sb_close(&r->link_ns);
	egressd_embedded_stop(&r->emb);
	attest_reap();   /* the namespace probe, killed at attestation, reaped by now */

	res->out = r->out.buf;
	res->out_len = r->out.len;
	res->out_truncated = r->out.truncated;
	res->err = r->errc.buf;
	res->err_len = r->errc.len;
	res->err_truncated = r->errc.truncated;
	r->out.buf = r->errc.buf = NULL;
	if (res->started && r->have_status) {
		if (WIFEXITED(r->wstatus))
			res->exit_code = WEXITSTATUS(r->wstatus);
		else if (WIFSIGNALED(r->wstatus))
			res->term_signal = WTERMSIG(r->wstatus);
	} else if (res->started) {
		res->term_signal = SIGKILL;     /* no status: the teardown's kill ended it */
	}
}

/*
 * The worker's outcome, named once for every caller (simple mode, WorkUnit runs and the
 * manifest read res->reason and res->message; none of them re-derives it). Only for a
 * worker that exec'd; the first that applies wins:
 *   egress-exec was interrupted (SIGTERM, SIGINT, SIGHUP)  worker_failed, names the signal
 *   the wall budget expired                                 timeout
 *   the cgroup recorded an OOM kill                         oom
 *   the worker exited non-zero or was killed by a signal    worker_failed
 *   otherwise                                               allowed
 * An interrupted run's worker reads as killed by SIGKILL (the teardown's), which is why the
 * interruption comes first: the run ended because of the signal egress-exec received.
 */
static void
sb_classify(struct sb_run *r)
{
	const struct sandbox_limits *l = &r->spec->limits;
	struct sandbox_result *res = r->res;

	if (r->interrupted)
		sb_fail(res, REASON_WORKER_FAILED, "egress-exec received signal %d; the worker's "
		    "whole process tree was killed", (int)sb_interrupted);
	else if (res->timed_out)
		sb_fail(res, REASON_WORKER_TIMEOUT, "the worker exceeded its wall budget of %u s "
		    "and its whole process tree was killed", l->wall_seconds);
	else if (res->oom_killed)
		sb_fail(res, REASON_WORKER_OOM, "the worker exceeded its memory limit of %llu "
		    "bytes (%u OOM kill(s))", (unsigned long long)l->memory_bytes, res->oom_kills);
	else if (res->exit_code != 0 || res->term_signal != 0)
		sb_fail(res, REASON_WORKER_FAILED, "the worker %s %d",
		    res->term_signal ? "was killed by signal" : "exited with status",
		    res->term_signal ? res->term_signal : res->exit_code);
	else {
		res->reason = REASON_ALLOWED;
		res->message[0] = '\0';
	}
}

/* 15. After a run that started: the upper layer stays for the caller with a read-only merged
 * view (no view of what the worker changed: the result cannot be trusted). Otherwise the
 * layer goes. Then what is left of the run's scratch, and its state record unless the
 * caller still holds the layer (sandbox_release_upper removes it). */
static void
sb_hand_over(struct sb_run *r, bool ran)
{
	struct sandbox_result *res = r->res;

	/* A caller that reads nothing of the layer gets neither it nor a merged view (an
	 * overlay mount and its unmount on the way to egress-exec's exit). */
	ran = ran && !r->spec->discard_layer;
	if (r->layer_made && ran) {
		if (mounts_merged_create(r->merged, r->upper, r->spec->repo_dir, r->err,
		    sizeof(r->err)) < 0)
			sb_fail(res, REASON_INTERNAL_ERROR, "merged view: %s", r->err);
		else
			snprintf(res->merged_dir, sizeof(res->merged_dir), "%s", r->merged);
		snprintf(res->upper_dir, sizeof(res->upper_dir), "%s", r->upper);
	} else if (r->layer_made) {
		mounts_layer_destroy(r->layer);
	}
	if (r->rootdir[0])
		rmdir(r->rootdir);
	if (r->lowerdir[0])
		rmdir(r->lowerdir);
	if (r->state_written && (!ran || !r->layer_made))
		sandbox_state_remove(r->run_id);
	else if (r->state_written)
		snprintf(res->run_id, sizeof(res->run_id), "%s", r->run_id);
}

static void
sb_run_free(struct sb_run *r)
{
	for (int *fd = &r->syncp[0]; fd <= &r->inp[1]; fd++)
		sb_close(fd);
	sb_close(&r->idmap_fd);
	sb_close(&r->pidfd);
	free(r->out.buf);
	free(r->errc.buf);
	free(r->argv);
	sb_envp_free(r->envp, r->spec, r->placeholder_kv);
	free(r->placeholder_kv);
	free(r->run_ca_cert);
	if (r->run_ca_key != NULL) {
		secret_wipe(r->run_ca_key, strlen(r->run_ca_key));
		free(r->run_ca_key);
	}
}

int
sandbox_run(const struct sandbox_spec *spec, struct sandbox_result *res)
{
	struct sb_sigsave save;
	struct sb_run *r = calloc(1, sizeof(*r));
	int rc;

	if (r == NULL) {
		memset(res, 0, sizeof(*res));
		return sb_fail(res, REASON_INTERNAL_ERROR, "out of memory");
	}
	sb_signals_enter(&save);
	sb_run_init(r, spec, res);
	rc = sb_setup(r);
	if (rc == 0)
		sb_supervise(r);
	sb_teardown(r);
	if (rc == 0)
		sb_classify(r);
	sb_hand_over(r, rc == 0);
	sb_run_free(r);
	free(r);
	sb_signals_leave(&save);
	return rc;
}

enum exec_exit
sandbox_exit_code(enum reason why)
{
	if (why == REASON_ALLOWED)
		return EXEC_EXIT_OK;
	if (why == REASON_CAPABILITY_MISSING)
		return EXEC_EXIT_CAPABILITY;
	if (why == REASON_WORKER_FAILED || why == REASON_WORKER_TIMEOUT ||
	    why == REASON_WORKER_OOM)
		return EXEC_EXIT_WORKER;
	return EXEC_EXIT_INTERNAL;
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
