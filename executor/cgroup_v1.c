/*
 * cgroup_v1 - the cgroup v1 back end: one directory per distinct hierarchy (memory, pids,
 * cpu, cpuacct, freezer; co-mounted controllers such as cpu,cpuacct share one). See
 * cgroup.h for the contract and cgroup_impl.h for what it shares with v2.
 *
 * Where the run's groups go: in each hierarchy under the caller's own cgroup there
 * (/proc/self/cgroup, one line per hierarchy), as <that cgroup>/egress/<run-id>, so a limit
 * on it or above it (a CI job's memory cgroup, a systemd slice) still applies. v1 has no
 * "no internal processes" rule: nothing moves.
 */
#define _GNU_SOURCE 1
#include "executor/cgroup_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

const char *const cg_v1_names[CG_V1_CTRLS] = { "memory", "pids", "cpu", "cpuacct", "freezer" };
/* A file that proves the controller at <root>/<name> is a v1 hierarchy of that kind. */
static const char *const V1_MARKERS[CG_V1_CTRLS] = {
	"memory.limit_in_bytes", "tasks", "cpu.cfs_quota_us", "cpuacct.usage", "tasks",
};

static int
v1_probe(const char *root, struct cgroup_probe *out)
{
	char d[EGRESS_PATH_MAX];

	memset(out, 0, sizeof(*out));
	out->version = CGROUP_VERSION_1;
	bool *have[CG_V1_CTRLS] = { &out->memory, &out->pids, &out->cpu, NULL, &out->freezer };
	bool cpuacct = false;
	char missing[128] = "";
	for (size_t i = 0; i < CG_V1_CTRLS; i++) {
		bool ok = cg_path_join(d, root, cg_v1_names[i]) == 0 && cg_exists(d, V1_MARKERS[i]);
		if (have[i] != NULL)
			*have[i] = ok;
		else
			cpuacct = ok;
		if (!ok) {
			size_t l = strlen(missing);
			snprintf(missing + l, sizeof(missing) - l, " %s", cg_v1_names[i]);
		}
	}
	out->kill = out->freezer;
	if (cg_path_join(d, root, "memory") == 0) {
		out->swap_control = cg_exists(d, "memory.memsw.limit_in_bytes");
		out->peak_memory = cg_exists(d, "memory.max_usage_in_bytes");
	}
	if (cg_path_join(d, root, "pids/" CGROUP_PARENT) == 0)
		out->peak_pids = cg_exists(d, "pids.peak");
	if (out->memory && out->pids && out->cpu && cpuacct && out->freezer) {
		snprintf(out->detail, sizeof(out->detail),
		    "cgroup v1 at %s: memory, pids, cpu, cpuacct, freezer%s", root,
		    out->swap_control ? ", memsw" : " (no memsw: swap accounting off)");
		return 0;
	}
	out->version = CGROUP_VERSION_NONE;
	snprintf(out->detail, sizeof(out->detail),
	    "no usable cgroup: no cgroup v2 with cpu, memory, pids at %s, and v1 controllers "
	    "missing:%s", root, missing);
	return -1;
}

/* v1: one directory per distinct hierarchy; co-mounts (cpu,cpuacct behind symlinks)
 * resolve to the same real path and are created once. In each, the run nests under the
 * caller's own cgroup of that hierarchy. */
static int
v1_layout(struct cgroup *cg, const char *root, const char *run_id, char *err, size_t errlen)
{
	char real[CG_V1_CTRLS][PATH_MAX];
	size_t nh = 0;

	for (size_t i = 0; i < CG_V1_CTRLS; i++) {
		char d[EGRESS_PATH_MAX], r[PATH_MAX], parent[EGRESS_PATH_MAX];
		size_t j;

		if (cg_path_join(d, root, cg_v1_names[i]) != 0 || realpath(d, r) == NULL) {
			errbuf_set(err, errlen, 0, "cgroup: v1 controller %s not found under %s",
			    cg_v1_names[i], root);
			return -1;
		}
		for (j = 0; j < nh; j++)
			if (strcmp(real[j], r) == 0)
				break;
		if (j == nh) {
			snprintf(real[nh], sizeof(real[nh]), "%s", r);
			if (cg_self_base(d, cg_v1_names[i], cg->bases[nh], err, errlen) != 0)
				return -1;
			if (cg_path_join(parent, cg->bases[nh], CGROUP_PARENT) != 0 ||
			    cg_path_join(cg->dirs[nh], parent, run_id) != 0) {
				errbuf_set(err, errlen, 0, "cgroup: path too long");
				return -1;
			}
			nh++;
		}
		cg->ctrl_dir[i] = (int)j;
	}
	cg->ndirs = nh;
	return 0;
}

static const char *
v1_dir(const struct cgroup *cg, const char *ctrl)
{
	for (size_t i = 0; i < CG_V1_CTRLS; i++)
		if (strcmp(cg_v1_names[i], ctrl) == 0 && cg->ctrl_dir[i] >= 0)
			return cg->dirs[cg->ctrl_dir[i]];
	return NULL;
}

static int
v1_apply(struct cgroup *cg, const struct cgroup_limits *lim, char *err, size_t errlen)
{
	struct cgroup_applied *a = &cg->applied;
	const char *mem = v1_dir(cg, "memory"), *cpu = v1_dir(cg, "cpu");
	const char *pids = v1_dir(cg, "pids"), *frz = v1_dir(cg, "freezer");
	char buf[1024];
	uint64_t v;

	/* CPU: period first so the quota is interpreted against it. */
	a->cpu_period_us = CGROUP_CPU_PERIOD_US;
	a->cpu_quota_us = (uint64_t)lim->cpu_millicores * CGROUP_CPU_PERIOD_US / 1000u;
	if (cg_write_check_u64(cpu, "cpu.cfs_period_us", a->cpu_period_us, err, errlen) != 0 ||
	    cg_write_check_u64(cpu, "cpu.cfs_quota_us", a->cpu_quota_us, err, errlen) != 0)
		return -1;
	/* Memory, then memory+swap at the same value: no swap at all. memsw must be >= the
	 * memory limit, hence the order. */
	a->memory_bytes = cg_page_round(lim->memory_bytes);
	if (cg_write_check_u64(mem, "memory.limit_in_bytes", a->memory_bytes, err, errlen) != 0)
		return -1;
	if (cg_exists(mem, "memory.memsw.limit_in_bytes")) {
		if (cg_write_check_u64(mem, "memory.memsw.limit_in_bytes", a->memory_bytes, err,
		    errlen) != 0)
			return -1;
		a->swap_mechanism = "memory.memsw";
	} else if (!cg_swap_active()) {
		a->swap_mechanism = "no-swap-active";
	} else {
		errbuf_set(err, errlen, 0, "cgroup: no memory.memsw.limit_in_bytes (boot with "
		    "swapaccount=1) and swap is active: the memory limit would not bound swap");
		return -1;
	}
	a->swap_limited = true;
	/* The OOM killer must be on, or a worker at its limit hangs instead of dying. */
	if (cg_read_keyed(mem, "memory.oom_control", "oom_kill_disable", &v) != 0 || v != 0) {
		errbuf_set(err, errlen, 0, "cgroup: %s/memory.oom_control: oom_kill_disable is not 0", mem);
		return -1;
	}
	a->pids = lim->pids;
	if (cg_write_check_u64(pids, "pids.max", a->pids, err, errlen) != 0)
		return -1;
	/* The freezer is how the group is killed: it must be present and thawed. */
	if (cg_read(frz, "freezer.state", buf, sizeof(buf)) != 0 || strncmp(buf, "THAWED", 6) != 0) {
		errbuf_set(err, errlen, 0, "cgroup: %s/freezer.state is not THAWED", frz);
		return -1;
	}
	return 0;
}

static int
v1_create(struct cgroup *cg, const char *root, const struct cgroup_limits *lim, char *err,
    size_t errlen)
{
	(void)root;
	for (size_t i = 0; i < cg->ndirs; i++)
		if (cg_mkdir_group(cg->bases[i], cg->run_id, cg->dirs[i], &cg->created[i], err,
		    errlen) != 0)
			return -1;
	return v1_apply(cg, lim, err, errlen);
}

/* Wait (bounded by deadline_ms, monotonic) until freezer.state reads FROZEN. */
static bool
wait_frozen_v1(const char *frz, uint64_t deadline_ms)
{
	char buf[64];

	for (;;) {
		if (cg_read(frz, "freezer.state", buf, sizeof(buf)) == 0 &&
		    strncmp(buf, "FROZEN", 6) == 0)
			return true;
		if (mono_msec() >= deadline_ms)
			return false;
		cg_sleep_ms(5);
	}
}

/* One kill pass: freeze so nothing forks or exits while the pid list is read (pids stay
 * valid: no reuse while frozen), SIGKILL all, thaw so the signals are delivered. */
static void
v1_kill_pass(struct cgroup *cg, uint64_t freeze_by)
{
	const char *frz = v1_dir(cg, "freezer");

	if (frz != NULL && cg_write(frz, "freezer.state", "FROZEN") == 0)
		(void)wait_frozen_v1(frz, freeze_by);
	/* Even if freezing timed out, kill what we see: the loop repeats until empty. The
	 * freezer's "tasks" lists every thread; other hierarchies are covered too in case a
	 * process is in one but not another (half-done attach). */
	if (frz != NULL)
		cg_kill_listed(frz, "tasks");
	for (size_t i = 0; i < cg->ndirs; i++)
		cg_kill_listed(cg->dirs[i], "cgroup.procs");
	if (frz != NULL)
		(void)cg_write(frz, "freezer.state", "THAWED");
}

static int
v1_usage(struct cgroup *cg, struct cgroup_usage *out, char *err, size_t errlen)
{
	uint64_t v;

	const char *acct = v1_dir(cg, "cpuacct"), *mem = v1_dir(cg, "memory");
	const char *pids = v1_dir(cg, "pids");
	if (cg_read_u64(acct, "cpuacct.usage", &v) != 0) {
		errbuf_set(err, errlen, 0, "cgroup: reading %s/cpuacct.usage: %s", acct, strerror(errno));
		return -1;
	}
	out->cpu_usec = v / 1000u; /* nanoseconds */
	if (cg_read_u64(mem, "memory.max_usage_in_bytes", &v) == 0)
		out->peak_memory_bytes = v;
	/* oom_kill in memory.oom_control since 4.13. */
	if (cg_read_keyed(mem, "memory.oom_control", "oom_kill", &v) == 0)
		out->oom_kills = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	if (cg_read_u64(pids, "pids.peak", &v) == 0) {
		out->peak_pids = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	} else {
		out->peak_pids = cg->sampled_peak_pids;
		out->peak_pids_sampled = true;
	}
	return 0;
}


const struct cg_backend cg_backend_v1 = {
	.ver = CGROUP_VERSION_1,
	.probe = v1_probe,
	.layout = v1_layout,
	.create = v1_create,
	.kill_pass = v1_kill_pass,
	.usage = v1_usage,
	.dir = v1_dir,
};
