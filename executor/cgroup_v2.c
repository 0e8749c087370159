/*
 * cgroup_v2 - the cgroup v2 back end (one unified hierarchy). See cgroup.h for the
 * contract and cgroup_impl.h for what it shares with v1.
 *
 * Where the run's group goes: under the caller's own cgroup C (/proc/self/cgroup "0::"),
 * as C/egress/<run-id>, so a limit on C or above it (a systemd slice, a CI job's cgroup)
 * still applies. cgroup v2 lets a cgroup hold limited children only when it holds no
 * process itself ("no internal processes"), and C holds egress-exec. So, unless C is the
 * root (exempt) or already has cpu, memory and pids in cgroup.subtree_control:
 *   - C must offer cpu, memory and pids (cgroup.controllers): it is delegated to us;
 *   - C must hold no process but egress-exec (its own service or scope: otherwise we
 *     would have to move someone else's processes, which we never do);
 *   - egress-exec moves itself into the leaf C/egress-supervisor, then enables the
 *     controllers in C and in C/egress.
 * The leaf stays while egress-exec runs (a process cannot leave its own cgroup to
 * nowhere); it is empty afterwards and goes with C (systemd removes a unit's cgroup tree)
 * or with `egress-exec cleanup`. Anything missing refuses the run with the fix named.
 */
#define _GNU_SOURCE 1
#include "executor/cgroup_impl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

static bool
cg_v2_usable(const char *root)
{
	char buf[1024];

	if (cg_read(root, "cgroup.controllers", buf, sizeof(buf)) != 0)
		return false;
	return cg_has_token(buf, "cpu") && cg_has_token(buf, "memory") &&
	    cg_has_token(buf, "pids");
}

static int
v2_probe(const char *root, struct cgroup_probe *out)
{
	char d[EGRESS_PATH_MAX];
	bool parent;

	memset(out, 0, sizeof(*out));
	if (!cg_v2_usable(root)) {
		snprintf(out->detail, sizeof(out->detail), "no cgroup v2 with cpu, memory, pids "
		    "at %s", root);
		return -1;
	}
	out->version = CGROUP_VERSION_2;
	out->cpu = out->memory = out->pids = true;
	/* cgroup.freeze and cgroup.kill are not shown in the root group: look in our
	 * parent when it exists. Killing works without them too (pid by pid, repeated
	 * until empty), so kill is true either way. */
	parent = cg_path_join(d, root, CGROUP_PARENT) == 0 && access(d, F_OK) == 0;
	out->freezer = parent && cg_exists(d, "cgroup.freeze");
	out->kill = true;
	out->swap_control = cg_exists(root, "memory.swap.max") ||
	    (parent && cg_exists(d, "memory.swap.max"));
	out->peak_memory = parent && cg_exists(d, "memory.peak");
	out->peak_pids = parent && cg_exists(d, "pids.peak");
	snprintf(out->detail, sizeof(out->detail),
	    "cgroup v2 at %s with cpu, memory, pids%s", root,
	    out->swap_control ? ", memory.swap.max" : " (no memory.swap.max)");
	return 0;
}

static int
v2_layout(struct cgroup *cg, const char *root, const char *run_id, char *err, size_t errlen)
{
	char parent[EGRESS_PATH_MAX];

	if (cg_self_base(root, NULL, cg->bases[0], err, errlen) != 0)
		return -1;
	if (cg_path_join(parent, cg->bases[0], CGROUP_PARENT) != 0 ||
	    cg_path_join(cg->dirs[0], parent, run_id) != 0) {
		errbuf_set(err, errlen, 0, "cgroup: path too long");
		return -1;
	}
	cg->ndirs = 1;
	return 0;
}

/* Enable cpu, memory, pids for the children of dir (v2). */
static int
v2_enable(const char *dir, char *err, size_t errlen)
{
	static const char *const ctrls[] = { "cpu", "memory", "pids" };
	char buf[1024];

	if (cg_read(dir, "cgroup.subtree_control", buf, sizeof(buf)) != 0) {
		errbuf_set(err, errlen, 0, "cgroup: reading %s/cgroup.subtree_control: %s", dir,
		    strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < EGRESS_NELEM(ctrls); i++) {
		char w[16];
		if (cg_has_token(buf, ctrls[i]))
			continue;
		snprintf(w, sizeof(w), "+%s", ctrls[i]);
		if (cg_write(dir, "cgroup.subtree_control", w) != 0) {
			errbuf_set(err, errlen, 0, "cgroup: enabling %s in %s/cgroup.subtree_control: %s%s",
			    ctrls[i], dir, strerror(errno), errno == EBUSY ?
			    " (processes in that group: cgroup v2 needs a delegated, empty parent)" : "");
			return -1;
		}
	}
	return 0;
}

/*
 * Can the caller's cgroup `base` hold limited children (see the top of this file)?
 * 0: yes as it is (the root, or its subtree already has the controllers); 1: yes once
 * egress-exec moved itself into the supervisor leaf; -1: no, err names the fix. Writes
 * nothing (egress-exec doctor asks too).
 */
int
cg_v2_nest_check(const char *root, const char *base, char *err, size_t errlen)
{
	static const char *const ctrls[] = { "cpu", "memory", "pids" };
	char buf[CG_FILE_MAX];
	pid_t me = getpid();

	if (strcmp(base, root) == 0)
		return 0;
	if (cg_read(base, "cgroup.subtree_control", buf, sizeof(buf)) == 0 &&
	    cg_has_token(buf, "cpu") && cg_has_token(buf, "memory") && cg_has_token(buf, "pids"))
		return 0;
	if (cg_read(base, "cgroup.controllers", buf, sizeof(buf)) != 0) {
		errbuf_set(err, errlen, 0, "cgroup: reading %s/cgroup.controllers: %s", base,
		    strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < EGRESS_NELEM(ctrls); i++)
		if (!cg_has_token(buf, ctrls[i])) {
			errbuf_set(err, errlen, 0, "cgroup: egress-exec's cgroup %s does not offer the %s "
			    "controller (it is not delegated: run egress-exec as a service with "
			    "Delegate=yes, or under `systemd-run --scope -p Delegate=yes`)", base,
			    ctrls[i]);
			return -1;
		}
	if (cg_read(base, "cgroup.procs", buf, sizeof(buf)) != 0) {
		errbuf_set(err, errlen, 0, "cgroup: reading %s/cgroup.procs: %s", base, strerror(errno));
		return -1;
	}
	for (char *p = buf; *p != '\0';) {
		uint64_t v;
		size_t n = strcspn(p, "\n");

		if (n > 0 && (cg_parse_u64(p, false, &v) != 0 || v != (uint64_t)me)) {
			errbuf_set(err, errlen, 0, "cgroup: egress-exec's cgroup %s holds other processes; "
			    "cgroup v2 nests limited groups only under a cgroup without processes of "
			    "its own: run egress-exec in a cgroup of its own (a service with "
			    "Delegate=yes, or `systemd-run --scope -p Delegate=yes egress-exec ...`)",
			    base);
			return -1;
		}
		p += n;
		if (*p == '\n')
			p++;
	}
	return 1;
}

/* Make the caller's cgroup `base` able to hold limited children: when cg_v2_nest_check
 * says so, move egress-exec into the supervisor leaf. */
static int
v2_adopt(const char *root, const char *base, char *err, size_t errlen)
{
	char leaf[EGRESS_PATH_MAX], self[32];
	pid_t me = getpid();
	int rc = cg_v2_nest_check(root, base, err, errlen);

	if (rc <= 0)
		return rc;
	if (cg_path_join(leaf, base, CG_SUPERVISOR_LEAF) != 0) {
		errbuf_set(err, errlen, 0, "cgroup: path too long");
		return -1;
	}
	snprintf(self, sizeof(self), "%d\n", (int)me);
	/* `egress-exec cleanup` removes empty leaves: if it takes this one between the mkdir
	 * and the move, make it again (bounded). */
	for (int t = 0;; t++) {
		if (mkdir(leaf, 0755) == 0)
			cg_after_mkdir(leaf);
		else if (errno != EEXIST) {
			errbuf_set(err, errlen, 0, "cgroup: mkdir %s: %s", leaf, strerror(errno));
			return -1;
		}
		if (cg_write(leaf, "cgroup.procs", self) == 0)
			break;
		if (errno != ENOENT || t >= 3) {
			errbuf_set(err, errlen, 0, "cgroup: moving egress-exec into %s: %s", leaf,
			    strerror(errno));
			return -1;
		}
	}
	if (cg_procs_has(leaf, "cgroup.procs", me) != 1) {
		errbuf_set(err, errlen, 0, "cgroup: egress-exec is not listed in %s/cgroup.procs after "
		    "moving there", leaf);
		return -1;
	}
	return 0;
}

static int
v2_apply(struct cgroup *cg, const struct cgroup_limits *lim, char *err, size_t errlen)
{
	const char *d = cg->dirs[0];
	struct cgroup_applied *a = &cg->applied;
	char s[64], buf[128];
	uint64_t q, per;

	a->cpu_period_us = CGROUP_CPU_PERIOD_US;
	a->cpu_quota_us = (uint64_t)lim->cpu_millicores * CGROUP_CPU_PERIOD_US / 1000u;
	snprintf(s, sizeof(s), "%llu %llu", (unsigned long long)a->cpu_quota_us,
	    (unsigned long long)a->cpu_period_us);
	if (cg_write(d, "cpu.max", s) != 0) {
		errbuf_set(err, errlen, 0, "cgroup: writing cpu.max \"%s\": %s", s, strerror(errno));
		return -1;
	}
	if (cg_read(d, "cpu.max", buf, sizeof(buf)) != 0 || cg_parse_u64(buf, true, &q) != 0 ||
	    cg_parse_u64(buf + strcspn(buf, " "), false, &per) != 0 || q != a->cpu_quota_us ||
	    per != a->cpu_period_us) {
		errbuf_set(err, errlen, 0, "cgroup: cpu.max did not take \"%s\"", s);
		return -1;
	}
	a->memory_bytes = cg_page_round(lim->memory_bytes);
	if (cg_write_check_u64(d, "memory.max", a->memory_bytes, err, errlen) != 0)
		return -1;
	if (cg_exists(d, "memory.swap.max")) {
		if (cg_write_check_u64(d, "memory.swap.max", 0, err, errlen) != 0)
			return -1;
		a->swap_mechanism = "memory.swap.max";
	} else if (!cg_swap_active()) {
		a->swap_mechanism = "no-swap-active";
	} else {
		errbuf_set(err, errlen, 0, "cgroup: no memory.swap.max (swap accounting off) and swap is "
		    "active: the memory limit would not bound swap");
		return -1;
	}
	a->swap_limited = true;
	/* An OOM kill takes the whole group, not one process the worker can restart. Not a
	 * limit (memory.max bounds memory either way), so best effort. */
	if (cg_exists(d, "memory.oom.group"))
		(void)cg_write(d, "memory.oom.group", "1");
	a->pids = lim->pids;
	return cg_write_check_u64(d, "pids.max", a->pids, err, errlen);
}

static int
v2_create(struct cgroup *cg, const char *root, const struct cgroup_limits *lim, char *err,
    size_t errlen)
{
	const char *base = cg->bases[0];
	char parent[EGRESS_PATH_MAX];

	/* Controllers are enabled top-down before the run's group exists: the caller's
	 * cgroup -> egress/ -> egress/<run-id> gets cpu.max, memory.max, pids.max. The root
	 * is exempt from "no internal processes". */
	if (v2_adopt(root, base, err, errlen) != 0)
		return -1;
	if (v2_enable(base, err, errlen) != 0)
		return -1;
	/* mkdir egress/ then enable in it: cg_mkdir_group makes egress/ again (EEXIST). A
	 * concurrent run's destroy may remove an empty egress/ in between: bounded retry. */
	for (int t = 0;; t++) {
		if (cg_mkdir_parent(base, parent, err, errlen) != 0)
			return -1;
		if (v2_enable(parent, err, errlen) == 0)
			break;
		if (errno != ENOENT || t >= 3)
			return -1;
	}
	if (cg_mkdir_group(base, cg->run_id, cg->dirs[0], &cg->created[0], err, errlen) != 0)
		return -1;
	return v2_apply(cg, lim, err, errlen);
}

static bool
wait_frozen_v2(const char *d, uint64_t deadline_ms)
{
	uint64_t v;

	for (;;) {
		if (cg_read_keyed(d, "cgroup.events", "frozen", &v) == 0 && v == 1)
			return true;
		if (mono_msec() >= deadline_ms)
			return false;
		cg_sleep_ms(5);
	}
}

static void
v2_kill_pass(struct cgroup *cg, uint64_t freeze_by)
{
	const char *d = cg->dirs[0];
	bool can_freeze;

	/* cgroup.kill (5.14+) takes the whole group at once; without it: freeze so nothing
	 * forks or exits while the pid list is read, SIGKILL all, thaw. */
	if (cg_exists(d, "cgroup.kill") && cg_write(d, "cgroup.kill", "1") == 0)
		return;
	can_freeze = cg_write(d, "cgroup.freeze", "1") == 0;
	if (can_freeze)
		(void)wait_frozen_v2(d, freeze_by);
	cg_kill_listed(d, "cgroup.procs");
	if (can_freeze)
		(void)cg_write(d, "cgroup.freeze", "0");
}

static int
v2_usage(struct cgroup *cg, struct cgroup_usage *out, char *err, size_t errlen)
{
	uint64_t v;

	const char *d = cg->dirs[0];
	if (cg_read_keyed(d, "cpu.stat", "usage_usec", &v) != 0) {
		errbuf_set(err, errlen, 0, "cgroup: reading %s/cpu.stat usage_usec: %s", d,
		    strerror(errno));
		return -1;
	}
	out->cpu_usec = v;
	/* memory.peak appeared in 5.19; before that the best we have is the current
	 * value, which the caller samples as it goes. */
	if (cg_read_u64(d, "memory.peak", &v) == 0 || cg_read_u64(d, "memory.current", &v) == 0)
		out->peak_memory_bytes = v;
	if (cg_read_keyed(d, "memory.events", "oom_kill", &v) == 0)
		out->oom_kills = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	if (cg_read_u64(d, "pids.peak", &v) == 0) {
		out->peak_pids = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	} else {
		out->peak_pids = cg->sampled_peak_pids;
		out->peak_pids_sampled = true;
	}
	return 0;
}

static const char *
v2_dir(const struct cgroup *cg, const char *controller)
{
	(void)controller;
	return cg->dirs[0];
}

const struct cg_backend cg_backend_v2 = {
	.ver = CGROUP_VERSION_2,
	.probe = v2_probe,
	.layout = v2_layout,
	.create = v2_create,
	.kill_pass = v2_kill_pass,
	.usage = v2_usage,
	.dir = v2_dir,
};
