/*
 * attest - probe and verify the nine capabilities (see attest.h for what each probe does).
 */
#define _GNU_SOURCE
#include "executor/attest.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "executor/cgroup.h"
#include "executor/env.h"
#include "executor/netns.h"
#include "executor/privs.h"
#include "executor/sandbox.h"
#include "executor/seccomp.h"

#define ATTEST_PROBE_TIMEOUT_MS 10000

static const char *const attest_names[ATTEST__COUNT] = {
	"network_enforcement", "process_tree_isolation", "cpu_limit", "memory_limit",
	"disk_limit", "process_limit", "filesystem_isolation", "writable_path_enforcement",
	"credential_isolation",
};

const char *
attest_cap_name(enum attest_cap c)
{
	return (unsigned)c < ATTEST__COUNT ? attest_names[c] : "unknown";
}

static void row_set(struct attest_row *r, bool ok, const char *mech, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
row_set(struct attest_row *r, bool ok, const char *mech, const char *fmt, ...)
{
	va_list ap;

	r->attested = ok;
	snprintf(r->mechanism, sizeof(r->mechanism), "%s", mech);
	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof(r->detail), fmt, ap);
	va_end(ap);
}

/* What the namespace/mount child found. One failure message per probe. */
struct ns_probe {
	bool ns, pid1, netns_empty, veth, tmpfs_bound, overlay, ro_bind, pivot, privs;
	char ns_err[96], net_err[96], veth_err[96], disk_err[96], ovl_err[96], ro_err[96];
	char pivot_err[96], privs_err[96];
};

static void
np_err(char *dst, const char *what, int e)
{
	snprintf(dst, 96, "%s%s%s", what, e ? ": " : "", e ? strerror(e) : "");
}

static int
np_write_file(const char *path, size_t bytes, char fill)
{
	char buf[4096];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc = 0;

	if (fd < 0)
		return -1;
	memset(buf, fill, sizeof(buf));
	while (bytes > 0) {
		size_t n = bytes < sizeof(buf) ? bytes : sizeof(buf);
		if (write_all(fd, buf, n) != 0) {
			rc = -1;
			break;
		}
		bytes -= n;
	}
	if (close(fd) < 0)
		rc = -1;
	return rc;
}

static bool
np_file_is(const char *path, char c)
{
	char b[2];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, b, 2);
	close(fd);
	return n == 1 && b[0] == c;
}

/* True when the current network namespace holds only lo. */
static bool
np_netns_only_lo(void)
{
	struct if_nameindex *ifs = if_nameindex();
	bool only_lo = false;

	if (ifs) {
		only_lo = ifs[0].if_name && strcmp(ifs[0].if_name, "lo") == 0 &&
		    ifs[1].if_name == NULL;
		if_freenameindex(ifs);
	}
	return only_lo;
}

/* Run in a forked child; fills p. Everything it mounts lives in its own mount ns.
 * veth_probe: also create and delete a veth pair in the probe's namespace (doctor and
 * attest_probe_all; a run proves its veth by making its own). run_netns: a run, whose
 * own child's new network namespace is checked instead (attest_run_netns), so the probe
 * makes none: each network namespace destroyed costs the kernel a walk of the global TCP
 * hash (inet_twsk_purge over 262,144 buckets here, ~4 ms of a kworker's CPU on the two
 * cores the run starts on). */
static void
np_run(struct ns_probe *p, bool veth_probe, bool run_netns, const char *probe_dir)
{
	char dir[64], a[128], b[128], opt[512];
	pid_t c;
	int st, e;

	snprintf(dir, sizeof(dir), "%s", probe_dir);
	if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
	    (run_netns ? 0 : CLONE_NEWNET) | CLONE_NEWCGROUP) < 0) {
		np_err(p->ns_err, "unshare(all namespaces)", errno);
		return;
	}
	p->ns = true;

	if (!run_netns) {
		p->netns_empty = np_netns_only_lo();
		if (!p->netns_empty)
			np_err(p->net_err, "a new network namespace is not empty", 0);
	}
	if (veth_probe) {
		char err[96];
		if (netns_probe_veth(err, sizeof(err)) == 0)
			p->veth = true;
		else
			snprintf(p->veth_err, sizeof(p->veth_err), "%s", err);
	}

	/* privileges: drop in a grandchild and read everything back */
	{
		int ep[2];

		if (pipe2(ep, O_CLOEXEC) == 0) {
			/* The first child after unshare(CLONE_NEWPID) is pid 1 of the new
			 * namespace; once it exits nothing more can fork there, so this one
			 * child checks both pid 1 and the privilege drop. */
			c = fork();
			if (c == 0) {
				struct privs_spec ps = { 65534, 65534, 1024 * 1024, 64, 0 };
				char err[96] = "";

				close(ep[0]);
				if (getpid() != 1)
					_exit(3);
				if (privs_drop(&ps, err, sizeof(err)) == 0 &&
				    privs_verify(&ps, err, sizeof(err)) == 0)
					_exit(0);
				if (write(ep[1], err, strlen(err)) < 0)
					_exit(2);
				_exit(1);
			}
			close(ep[1]);
			st = -1;
			if (c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st)) {
				p->pid1 = WEXITSTATUS(st) != 3;
				p->privs = WEXITSTATUS(st) == 0;
			}
			if (!p->privs) {
				char e2[80] = "";
				ssize_t n = read(ep[0], e2, sizeof(e2) - 1);
				e2[n > 0 ? n : 0] = '\0';
				snprintf(p->privs_err, sizeof(p->privs_err), "privilege drop: %s", e2);
			}
			close(ep[0]);
		}
	}

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		np_err(p->disk_err, "private propagation", errno);
		return;
	}
	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=256k,mode=0700") < 0) {
		np_err(p->disk_err, "tmpfs with size", errno);
		return;
	}
	/* disk: 512 KiB into a 256 KiB tmpfs must stop with ENOSPC */
	snprintf(a, sizeof(a), "%s/fill", dir);
	errno = 0;
	if (np_write_file(a, 512 * 1024, 'x') < 0 && (errno == ENOSPC || errno == EFBIG))
		p->tmpfs_bound = true;
	else
		np_err(p->disk_err, "a size-bounded tmpfs accepted more than its size", 0);
	unlink(a);

	/* overlay: a write through the merged view lands in upper; lower unchanged */
	{
		static const char *const sub[] = { "lower", "upper", "work", "merged", "robind" };
		bool ok = true;
		for (size_t i = 0; i < EGRESS_NELEM(sub); i++) {
			snprintf(a, sizeof(a), "%s/%s", dir, sub[i]);
			if (mkdir(a, 0755) < 0)
				ok = false;
		}
		snprintf(a, sizeof(a), "%s/lower/f", dir);
		if (!ok || np_write_file(a, 1, 'a') < 0) {
			np_err(p->ovl_err, "prepare overlay dirs", errno);
		} else {
			snprintf(opt, sizeof(opt), "lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work",
			    dir, dir, dir);
			snprintf(b, sizeof(b), "%s/merged", dir);
			if (mount("overlay", b, "overlay", 0, opt) < 0) {
				np_err(p->ovl_err, "overlay mount", errno);
			} else {
				snprintf(b, sizeof(b), "%s/merged/f", dir);
				e = np_write_file(b, 1, 'b');
				snprintf(b, sizeof(b), "%s/upper/f", dir);
				p->overlay = e == 0 && np_file_is(a, 'a') && np_file_is(b, 'b');
				if (!p->overlay)
					np_err(p->ovl_err, "overlay copy-up changed the lower layer", 0);
			}
		}
		/* read-only bind: root writing through it gets EROFS */
		snprintf(a, sizeof(a), "%s/lower", dir);
		snprintf(b, sizeof(b), "%s/robind", dir);
		if (mount(a, b, NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, b, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0) {
			np_err(p->ro_err, "read-only bind", errno);
		} else {
			snprintf(b, sizeof(b), "%s/robind/g", dir);
			errno = 0;
			if (open(b, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) < 0 && errno == EROFS)
				p->ro_bind = true;
			else
				np_err(p->ro_err, "a read-only bind accepted a write", 0);
		}
	}

	/* pivot_root into the tmpfs: the host's credentials must be gone */
	if (chdir(dir) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0) {
		np_err(p->pivot_err, "pivot_root", errno);
		return;
	}
	{
		struct stat sb;
		p->pivot = stat("/etc/shadow", &sb) < 0 && stat("/root", &sb) < 0 &&
		    stat("/home", &sb) < 0 && stat("/proc/1", &sb) < 0;
		if (!p->pivot)
			np_err(p->pivot_err, "host files visible after pivot_root", 0);
	}
}

/* The namespace probe runs in a child; _start forks it (the other probes run meanwhile),
 * _finish collects its report. */
struct ns_probe_run {
	char dir[64];
	int rd;
	pid_t pid;
};

static int
attest_ns_probe_start(bool veth_probe, bool run_netns, struct ns_probe_run *nr,
    struct ns_probe *out)
{
	int pp[2];

	memset(out, 0, sizeof(*out));
	nr->rd = -1;
	nr->pid = -1;
	/* The probe's tmpfs goes over /run/egress-exec itself, inside the probe's own mount
	 * namespace (private propagation first): no directory of its own is made and removed
	 * on the host's disk per run (here /run is on the root disk, an ext4 mounted with
	 * discard, where each rmdir waited for a synchronous discard on the path to "go"). */
	if (mkdir("/run/egress-exec", 0700) < 0 && errno != EEXIST) {
		np_err(out->ns_err, "mkdir /run/egress-exec", errno);
		return -1;
	}
	snprintf(nr->dir, sizeof(nr->dir), "/run/egress-exec");
	if (pipe2(pp, O_CLOEXEC) < 0)
		return -1;
	fflush(NULL);
	nr->pid = fork();
	if (nr->pid == 0) {
		struct ns_probe p;

		close(pp[0]);
		memset(&p, 0, sizeof(p));
		np_run(&p, veth_probe, run_netns, nr->dir);
		if (write(pp[1], &p, sizeof(p)) != (ssize_t)sizeof(p))
			_exit(1);
		_exit(0);
	}
	close(pp[1]);
	if (nr->pid < 0) {
		close(pp[0]);
		return -1;
	}
	nr->rd = pp[0];
	return 0;
}

/* Probes killed after their report and reaped later (attest_reap): a probe's exit tears
 * down its mount namespace, which waits for an expedited RCU grace period (1-3 ms
 * measured here), and waiting for that exit was on the run's path to "go". Its report is
 * all the attestation reads; the process only has to be gone before egress-exec is. */
#define ATTEST_DEFERRED_MAX 8
static pid_t attest_deferred[ATTEST_DEFERRED_MAX];

void
attest_reap(void)
{
	for (size_t i = 0; i < ATTEST_DEFERRED_MAX; i++) {
		int st;

		if (attest_deferred[i] > 0)
			(void)waitpid(attest_deferred[i], &st, 0);   /* SIGKILLed: bounded */
		attest_deferred[i] = 0;
	}
}

/* SIGKILL the probe; reap it now, or later when defer (a run) and a slot is free. */
static void
attest_probe_kill(pid_t pid, bool defer)
{
	int st;

	kill(pid, SIGKILL);
	if (defer && waitpid(pid, &st, WNOHANG) == 0)
		for (size_t i = 0; i < ATTEST_DEFERRED_MAX; i++)
			if (attest_deferred[i] <= 0) {
				attest_deferred[i] = pid;
				return;
			}
	(void)waitpid(pid, &st, 0);
}

static int
attest_ns_probe_finish(struct ns_probe_run *nr, struct ns_probe *out, bool defer_reap)
{
	struct pollfd pfd;
	ssize_t n = 0;

	if (nr->pid < 0)
		return -1;
	pfd = (struct pollfd){ nr->rd, POLLIN, 0 };
	if (poll(&pfd, 1, ATTEST_PROBE_TIMEOUT_MS) == 1) {
		size_t got = 0;
		while (got < sizeof(*out)) {
			n = read(nr->rd, (char *)out + got, sizeof(*out) - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		n = (ssize_t)got;
	}
	attest_probe_kill(nr->pid, defer_reap);
	close(nr->rd);
	if (n != (ssize_t)sizeof(*out)) {
		memset(out, 0, sizeof(*out));
		np_err(out->ns_err, "namespace probe did not report", 0);
		return -1;
	}
	return 0;
}

/* The children started by attest_begin, collected by attest_end. */
struct attest_pending {
	bool with_network;
	bool veth_probe;                /* false for a run: its own veth is the proof */
	bool run_netns;                 /* a run: its own child's netns is checked */
	pid_t sec_pid;
	struct ns_probe_run nr;
	struct ns_probe np;
	char secerr[256];
};

static struct attest_pending *
attest_start(bool with_network, bool veth_probe, bool run_netns)
{
	struct attest_pending *ap = calloc(1, sizeof(*ap));

	if (ap == NULL)
		return NULL;
	ap->with_network = with_network;
	ap->veth_probe = with_network && veth_probe;
	ap->run_netns = run_netns;
	/* The slow probes run at the same time as each other and as whatever the caller
	 * does until attest_end: the seccomp self-test and the namespace probe in children of
	 * their own, the cgroup probe in attest_end. Each checks everything it checked when
	 * they ran one after another; only the waiting overlaps. The namespace probe (the
	 * longest) is forked first: it needs no filter, and the self-test's start compiles
	 * the filter (seccomp_profile_prepare, once per process) while the probe runs. */
	attest_ns_probe_start(ap->veth_probe, ap->run_netns, &ap->nr, &ap->np);
	ap->sec_pid = seccomp_profile_selftest_start(ap->secerr, sizeof(ap->secerr));
	return ap;
}

struct attest_pending *
attest_begin(bool with_network)
{
	return attest_start(with_network, true, false);
}

struct attest_pending *
attest_begin_run(bool with_network)
{
	return attest_start(with_network, false, true);
}

/*
 * A run's network namespace, for network_enforcement: the run's child made a new one with
 * its clone and does nothing in it before "go" (it only attaches itself to the cgroup and
 * waits), so at attestation time it must hold only lo, the check the probe made in a
 * namespace of its own. The supervisor enters it (the child is unreaped, so its pid is
 * not reused), lists the links and comes back; running on in the wrong namespace is never
 * an option (exit 70).
 */
static void
attest_run_netns(pid_t run_pid, struct ns_probe *np)
{
	char path[64];
	int fd, home;

	np->netns_empty = false;
	if (run_pid <= 0) {
		np_err(np->net_err, "the run has no child (no network namespace)", 0);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)run_pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || home < 0 || setns(fd, CLONE_NEWNET) != 0) {
		np_err(np->net_err, "enter the run's network namespace", errno);
		if (fd >= 0)
			close(fd);
		if (home >= 0)
			close(home);
		return;
	}
	np->netns_empty = np_netns_only_lo();
	if (setns(home, CLONE_NEWNET) != 0) {
		log_warn("setns back to egress-exec's network namespace");
		_exit(70);
	}
	close(home);
	close(fd);
	if (!np->netns_empty)
		np_err(np->net_err, "the run's new network namespace is not empty", 0);
}

/* run_cg: the run's own group (limits already written and read back), or NULL for a
 * throwaway group made and removed here. */
static bool
attest_finish(struct attest_pending *pend, const struct cgroup *run_cg, pid_t run_pid,
    struct attest_row rows[ATTEST__COUNT])
{
	struct cgroup_probe cp;
	struct cgroup_limits lim = { 500, 64ull * 1024 * 1024, 16 };
	struct cgroup *cg = NULL;
	const struct cgroup_applied *ap = NULL;
	struct ns_probe np;
	bool with_network, veth_probe;
	char cgerr[256] = "", secerr[256] = "", id[CGROUP_RUN_ID_MAX];
	bool cg_ok, sec_ok, env_ok, all = true;
	static unsigned seq;

	memset(rows, 0, sizeof(struct attest_row) * ATTEST__COUNT);
	if (pend == NULL) {
		for (int c = 0; c < ATTEST__COUNT; c++)
			row_set(&rows[c], false, "attestation", "out of memory starting the probes");
		return false;
	}
	with_network = pend->with_network;
	veth_probe = pend->veth_probe;

	/* cgroup: probe, then the run's group or a throwaway one, limits written and read
	 * back */
	cg_ok = cgroup_probe(NULL, &cp) == 0;
	if (cg_ok && run_cg != NULL) {
		ap = cgroup_applied(run_cg);
	} else if (cg_ok) {
		snprintf(id, sizeof(id), "egx-probe-%d-%u", (int)getpid(), seq++);
		cg = cgroup_create(NULL, id, &lim, cgerr, sizeof(cgerr));
		if (cg)
			ap = cgroup_applied(cg);
	} else {
		snprintf(cgerr, sizeof(cgerr), "%s", cp.detail);
	}
	np = pend->np;
	attest_ns_probe_finish(&pend->nr, &np, pend->run_netns);
	if (pend->run_netns)
		attest_run_netns(run_pid, &np);
	snprintf(secerr, sizeof(secerr), "%s", pend->secerr);
	sec_ok = pend->sec_pid > 0 && seccomp_profile_selftest_finish(pend->sec_pid, secerr,
	    sizeof(secerr)) == 0;
	free(pend);
	env_ok = env_name_check("GITHUB_TOKEN", NULL, 0) == REASON_ADM_ENV_FORBIDDEN &&
	    env_name_check("AWS_SECRET_ACCESS_KEY", NULL, 0) == REASON_ADM_ENV_FORBIDDEN &&
	    env_value_check("DOCKER_HOST", "unix:///var/run/docker.sock", NULL, 0) ==
	    REASON_ADM_ENV_SOCKET &&
	    env_name_check("LANG", NULL, 0) == REASON_ALLOWED;

	if (with_network && !veth_probe) {
		/* A run: the veth is its own, made after this and before the worker exists;
		 * attest_network_granted / attest_network_failed replace this row then. */
		row_set(&rows[ATTEST_NETWORK_ENFORCEMENT], np.netns_empty,
		    "network namespace with one veth to egressd; grant per run",
		    np.netns_empty ? "a new network namespace holds only lo; the run's veth and "
		    "its grant are verified before the worker starts" : "%s%s", np.ns_err,
		    np.net_err);
	} else if (with_network) {
		/* The veth's host end lives in a link namespace of the run's own (only egressd's
		 * listener there), so nothing in egressd's namespace is reachable through it. */
		row_set(&rows[ATTEST_NETWORK_ENFORCEMENT], np.netns_empty && np.veth,
		    "network namespace with one veth to egressd; grant per run",
		    np.netns_empty && np.veth ? "empty netns and veth verified; the veth's host "
		    "end lives in the run's own link namespace with only egressd's listener; "
		    "the grant is attested at run time" : "%s%s", np.net_err, np.veth_err);
	} else
		row_set(&rows[ATTEST_NETWORK_ENFORCEMENT], np.netns_empty,
		    "empty network namespace (lo only)",
		    np.netns_empty ? "a new network namespace holds only lo" : "%s%s",
		    np.ns_err, np.net_err);
	row_set(&rows[ATTEST_PROCESS_TREE_ISOLATION], np.ns && np.pid1 && sec_ok && cp.kill,
	    "pid/ipc/uts/mount/cgroup namespaces, init as pid 1, seccomp filter, whole-cgroup kill",
	    "%s%s%s%s", np.ns ? "namespaces created; " : np.ns_err,
	    np.pid1 ? "first child is pid 1; " : " not pid 1 in a new pid ns;",
	    sec_ok ? "seccomp self-test passed; " : secerr,
	    cp.kill ? "cgroup kill present" : " no cgroup kill mechanism");
	if (ap) {
		row_set(&rows[ATTEST_CPU_LIMIT], ap->cpu_quota_us > 0, "cgroup cpu quota",
		    "cgroup v%d: quota %llu/%llu us read back%s",
		    (int)cgroup_version(run_cg ? run_cg : cg),
		    (unsigned long long)ap->cpu_quota_us, (unsigned long long)ap->cpu_period_us,
		    run_cg ? " (the run's own group)" : "");
		row_set(&rows[ATTEST_MEMORY_LIMIT], ap->memory_bytes > 0 && ap->swap_limited,
		    "cgroup memory limit, no swap", "limit %llu read back; swap: %s",
		    (unsigned long long)ap->memory_bytes, ap->swap_limited ? ap->swap_mechanism :
		    "NOT limited");
		row_set(&rows[ATTEST_PROCESS_LIMIT], ap->pids > 0, "cgroup pids.max",
		    "pids.max %llu read back", (unsigned long long)ap->pids);
	} else {
		row_set(&rows[ATTEST_CPU_LIMIT], false, "cgroup cpu quota", "%s", cgerr);
		row_set(&rows[ATTEST_MEMORY_LIMIT], false, "cgroup memory limit", "%s", cgerr);
		row_set(&rows[ATTEST_PROCESS_LIMIT], false, "cgroup pids.max", "%s", cgerr);
	}
	if (cg)
		cgroup_destroy(cg, NULL, 0);   /* the throwaway group; never run_cg */
	row_set(&rows[ATTEST_DISK_LIMIT], np.tmpfs_bound,
	    "size-bounded tmpfs for the upper layer and /tmp, RLIMIT_FSIZE",
	    np.tmpfs_bound ? "a full tmpfs refused more bytes (ENOSPC)" : "%s", np.disk_err);
	row_set(&rows[ATTEST_FILESYSTEM_ISOLATION], np.pivot && np.ro_bind,
	    "mount namespace, tmpfs root, read-only binds, pivot_root",
	    np.pivot && np.ro_bind ? "host files gone after pivot_root; read-only bind "
	    "refused a write" : "%s %s", np.pivot_err, np.ro_err);
	row_set(&rows[ATTEST_WRITABLE_PATH_ENFORCEMENT], np.overlay && np.ro_bind,
	    "overlay over the repository (writes land in a bounded upper layer), .git read-only",
	    np.overlay ? "copy-up left the lower layer unchanged" : "%s", np.ovl_err);
	row_set(&rows[ATTEST_CREDENTIAL_ISOLATION], env_ok && np.privs && np.pivot,
	    "environment from nothing, credential names refused, host homes not mounted, "
	    "unprivileged uid without capabilities",
	    "%s%s%s", env_ok ? "credential names and container sockets refused; " :
	    "environment rules did not refuse a credential; ",
	    np.privs ? "drop to 65534 read back (no caps, no_new_privs); " : np.privs_err,
	    np.pivot ? "host homes and /etc/shadow absent after pivot_root" :
	    " host files visible");
	for (int i = 0; i < ATTEST__COUNT; i++)
		all = all && rows[i].attested;
	return all;
}

bool
attest_end(struct attest_pending *pend, struct attest_row rows[ATTEST__COUNT])
{
	return attest_finish(pend, NULL, -1, rows);
}

bool
attest_end_run(struct attest_pending *pend, const struct cgroup *run_cg, pid_t run_pid,
    struct attest_row rows[ATTEST__COUNT])
{
	if (run_cg == NULL) {
		/* No group of the run's (its creation failed): collect the children, and
		 * fail closed on the limits, which only a run's own group attests. */
		(void)attest_finish(pend, NULL, run_pid, rows);
		row_set(&rows[ATTEST_CPU_LIMIT], false, "cgroup cpu quota", "the run has no cgroup");
		row_set(&rows[ATTEST_MEMORY_LIMIT], false, "cgroup memory limit",
		    "the run has no cgroup");
		row_set(&rows[ATTEST_PROCESS_LIMIT], false, "cgroup pids.max",
		    "the run has no cgroup");
		return false;
	}
	return attest_finish(pend, run_cg, run_pid, rows);
}

json_t *
attest_rows_json(const struct attest_row rows[ATTEST__COUNT])
{
	json_t *o = json_object();

	for (int i = 0; o && i < ATTEST__COUNT; i++)
		json_object_set_new(o, attest_names[i], json_pack("{s:b, s:s, s:s}", "attested",
		    rows[i].attested, "mechanism", rows[i].mechanism, "detail", rows[i].detail));
	return o;
}

bool
attest_probe_all(bool with_network, struct attest_row rows[ATTEST__COUNT])
{
	return attest_end(attest_begin(with_network), rows);
}

bool
sandbox_attest(bool with_network, json_t **out)
{
	struct attest_row rows[ATTEST__COUNT];
	bool ok = attest_probe_all(with_network, rows);

	*out = attest_rows_json(rows);
	return ok && *out != NULL;
}

void
attest_missing(const json_t *att, char *out, size_t outlen)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < ATTEST__COUNT; i++) {
		json_t *r = json_object_get(att, attest_names[i]);
		if (r && json_is_true(json_object_get(r, "attested")))
			continue;
		const char *det = r ? json_string_value(json_object_get(r, "detail")) : NULL;
		int n = snprintf(out + used, outlen - used, "%s%s (%s)", used ? "; " : "",
		    attest_names[i], det && *det ? det : "not probed");
		if (n < 0 || (size_t)n >= outlen - used)
			break;
		used += (size_t)n;
	}
	if (used == 0)
		snprintf(out, outlen, "none");
}

void
attest_network_granted(json_t *att, const char *ifname, const char *grant_id)
{
	char d[256];

	snprintf(d, sizeof(d), "veth %s up with a /30; egressd issued grant %s bound to it",
	    ifname, grant_id);
	json_object_set_new(att, "network_enforcement", json_pack("{s:b, s:s, s:s}", "attested",
	    1, "mechanism", "network namespace with one veth to egressd; grant per run",
	    "detail", d));
}

void
attest_network_failed(json_t *att, const char *why)
{
	json_object_set_new(att, "network_enforcement", json_pack("{s:b, s:s, s:s}", "attested",
	    0, "mechanism", "network namespace with one veth to egressd; grant per run",
	    "detail", why ? why : "egressd did not issue the grant"));
}
