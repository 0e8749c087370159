/*
 * cgroup - one cgroup per run: create, limit (read back), attach, kill, usage, destroy.
 *
 * Owns: the directories <C>/egress/<run-id>, where C is the caller's own cgroup as
 * /proc/self/cgroup names it (v2: <root><C>; v1: <root>/<controller><C> for each of
 * memory, pids, cpu, cpuacct, freezer, co-mounted controllers handled once), so any limit
 * on C or above it (a systemd slice, a CI job's cgroup) still applies to the worker; and
 * <C>/egress itself, removed with its last run. On v2, unless C is the root: egress-exec
 * moves itself into the leaf <C>/egress-supervisor and enables cpu, memory, pids in
 * <C>/cgroup.subtree_control and <C>/egress/cgroup.subtree_control, and refuses (with the
 * fix) when C holds other processes or does not offer the controllers (not delegated).
 * Nothing else under the cgroupfs is ever written.
 * Callers: executor/sandbox.c (one handle per run), executor/doctor.c and attestation
 * (cgroup_probe), executor/cleanup.c (cgroup_cleanup_leftovers).
 * Layout: this interface and what both versions share in cgroup.c; the back ends in
 * cgroup_v1.c and cgroup_v2.c (struct cg_backend in cgroup_impl.h).
 *
 * Version choice: v2 when <root>/cgroup.controllers lists cpu, memory and pids (a unified
 * hierarchy with the controllers enabled); v1 otherwise, when every v1 controller directory
 * exists. A machine with an empty cgroup2 mount and v1 controllers (hybrid) uses v1.
 *
 * Fail closed: every limit is written and then READ BACK; a limit that did not take makes
 * cgroup_create fail. There is no "limit skipped" path.
 *
 * Threading: a handle is used by one thread. Functions return 0 / a handle on success and
 * -1 / NULL with a one-line message in err (errlen bytes, always NUL-terminated) otherwise;
 * err may be NULL when errlen is 0.
 */
#ifndef EGRESS_CGROUP_H
#define EGRESS_CGROUP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CGROUP_ROOT_DEFAULT "/sys/fs/cgroup"
#define CGROUP_PARENT       "egress"   /* every run's group lives under this directory */
#define CGROUP_RUN_ID_MAX   64         /* [A-Za-z0-9._-], not "." or "..", not empty */
#define CGROUP_CPU_PERIOD_US 100000u   /* CFS period written with every quota */
#define CGROUP_KILL_TIMEOUT_MS 5000u   /* default bound for cgroup_kill */

enum cgroup_version { CGROUP_VERSION_NONE = 0, CGROUP_VERSION_1 = 1, CGROUP_VERSION_2 = 2 };

/* Limits to apply. Every field must be nonzero: an unlimited run is not supported. */
struct cgroup_limits {
	uint32_t cpu_millicores;    /* 1000 = one CPU; quota = millicores * period / 1000 */
	uint64_t memory_bytes;      /* rounded DOWN to the page size before writing */
	uint32_t pids;              /* pids.max */
};

/* What the kernel reports after writing, for the manifest ("limits_applied"). */
struct cgroup_applied {
	uint64_t cpu_quota_us;      /* per period */
	uint64_t cpu_period_us;
	uint64_t memory_bytes;      /* as read back */
	bool swap_limited;          /* memory.swap.max=0 / memsw == memory read back, or no swap
	                             * device is active (/proc/swaps empty) */
	const char *swap_mechanism; /* static string: "memory.swap.max", "memory.memsw",
	                             * "no-swap-active" */
	uint64_t pids;
};

/* Usage read back at the end of a run. */
struct cgroup_usage {
	uint64_t cpu_usec;          /* cpuacct.usage / 1000, or cpu.stat usage_usec */
	uint64_t peak_memory_bytes; /* memory.max_usage_in_bytes / memory.peak (0 if absent) */
	uint32_t oom_kills;         /* memory.oom_control oom_kill / memory.events oom_kill */
	uint32_t peak_pids;         /* pids.peak when present, else the max cgroup_sample saw */
	bool peak_pids_sampled;     /* true when peak_pids comes from sampling */
};

/* What this machine offers (doctor, attestation). Never writes anything. */
struct cgroup_probe {
	enum cgroup_version version;
	bool cpu, memory, pids, freezer; /* freezer: v1 freezer controller or v2 cgroup.freeze */
	bool kill;                  /* v2 cgroup.kill present, or v1 freezer present */
	bool swap_control;          /* memory.swap.max (v2) / memory.memsw.* (v1) present */
	bool peak_memory;           /* memory.peak (v2) / memory.max_usage_in_bytes (v1) */
	bool peak_pids;             /* pids.peak present in the parent/root (else sampling) */
	char detail[256];           /* one line for doctor: what was found / what is missing */
};

struct cgroup;

/* Probe the cgroupfs at root (NULL = CGROUP_ROOT_DEFAULT). Fills *out; returns 0 when a
 * usable version (all of cpu, memory, pids and a kill mechanism) was found, -1 otherwise
 * (out->detail says what is missing). */
int cgroup_probe(const char *root, struct cgroup_probe *out);

/*
 * Where this process's runs would nest, and whether they can (egress-exec doctor): out
 * (outlen bytes) gets the caller's cgroup directory (v2 the unified one, v1 the memory
 * hierarchy's); 0 when a run could be created under it, -1 with the reason and its fix in
 * err. Writes nothing.
 */
int cgroup_nest_check(const char *root, char *out, size_t outlen, char *err, size_t errlen);

/* True when run_id is acceptable as a directory name (see CGROUP_RUN_ID_MAX). */
bool cgroup_run_id_valid(const char *run_id);

/*
 * Create the run's group(s) under root (NULL = CGROUP_ROOT_DEFAULT), apply every limit and
 * read each one back. Refuses an existing group of the same name (EEXIST: a leftover; run
 * `egress-exec cleanup`). On any failure everything created is removed and NULL returned.
 * The caller owns the handle and must call cgroup_destroy (which frees it).
 */
struct cgroup *cgroup_create(const char *root, const char *run_id,
    const struct cgroup_limits *limits, char *err, size_t errlen);

enum cgroup_version cgroup_version(const struct cgroup *cg);

/* The limits as read back by cgroup_create. */
const struct cgroup_applied *cgroup_applied(const struct cgroup *cg);

/* The same as a new JSON object (for sandbox_result.limits_applied); NULL on OOM. */
json_t *cgroup_applied_json(const struct cgroup *cg);

/* Directory of the group (v2) or of the given v1 controller ("memory", "pids", "cpu",
 * "cpuacct", "freezer"); NULL when unknown. Owned by the handle. */
const char *cgroup_path(const struct cgroup *cg, const char *controller);

/*
 * Move pid (a host-namespace pid; 0 = the calling process) into the group: cgroup.procs on
 * v2; cgroup.procs of every v1 controller. Then checks the pid is listed (v1: in every
 * controller). Call before the worker execs (e.g. the child waits on a pipe until the
 * supervisor has attached it), so that nothing the worker does runs outside the limits.
 */
int cgroup_attach(struct cgroup *cg, pid_t pid, char *err, size_t errlen);

/*
 * The calling process moves itself into the group (the sandbox's first process, as its
 * first step: executor/sandbox_child.c): v1 writes "0" to `tasks` of every hierarchy,
 * which moves the calling thread without the kernel's global threadgroup lock and the
 * RCU grace period its first write-acquisition waits for (the caller must be
 * single-threaded, so that the thread is the whole process); v2 writes "0" to
 * cgroup.procs. Allocates nothing (safe in a fresh clone). The supervisor then checks
 * with cgroup_attach_check before the child may do anything else.
 */
int cgroup_attach_self(const struct cgroup *cg, char *err, size_t errlen);

/* Is pid (host namespace) listed in cgroup.procs of every hierarchy? 0, or -1 with err. */
int cgroup_attach_check(struct cgroup *cg, pid_t pid, char *err, size_t errlen);

/* Sample pids.current and remember the maximum (for kernels without pids.peak). Cheap;
 * call it from the supervisor loop. Returns the current count, or -1 on read error. */
long cgroup_sample(struct cgroup *cg);

/* True when no process is left in the group (v2 cgroup.procs; v1: every controller). */
bool cgroup_empty(struct cgroup *cg);

/*
 * Kill every process of the group, including setsid/double-forked ones: v2 writes
 * cgroup.kill (falls back to cgroup.freeze + SIGKILL of each pid + thaw); v1 freezes
 * (freezer.state FROZEN, so nothing can fork or exit while pids are read), SIGKILLs every
 * pid in tasks, thaws, then waits until the group is empty. Bounded by timeout_ms
 * (0 = CGROUP_KILL_TIMEOUT_MS). Returns 0 when the group is empty, -1 otherwise.
 */
int cgroup_kill(struct cgroup *cg, unsigned timeout_ms, char *err, size_t errlen);

/* Read usage (valid during and after the run, before cgroup_destroy). */
int cgroup_usage_read(struct cgroup *cg, struct cgroup_usage *out, char *err, size_t errlen);

/*
 * Kill what is left (cgroup_kill), rmdir the group(s) with bounded retries, and free the
 * handle. Accepts NULL. Returns 0 when every directory is gone, -1 otherwise (the handle is
 * freed either way; leftovers are found again by cgroup_cleanup_leftovers).
 */
int cgroup_destroy(struct cgroup *cg, char *err, size_t errlen);

/*
 * Find groups in any egress/ directory of the hierarchies (each v1 controller, or v2;
 * bounded walk: 16 levels, 20000 directories per hierarchy) left by runs that died (kill -9
 * of egress-exec), wherever they nested, kill their processes and remove them and their
 * emptied egress/ parents. is_live(run_id, arg) —
 * may be NULL — returns true for groups of runs still in progress, which are left alone.
 * *removed (may be NULL) counts groups removed. Returns 0 when every stale group is gone.
 */
int cgroup_cleanup_leftovers(const char *root, bool (*is_live)(const char *run_id, void *arg),
    void *arg, unsigned *removed, char *err, size_t errlen);

#endif
