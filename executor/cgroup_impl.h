/*
 * cgroup_impl - what the cgroup interface (executor/cgroup.c) and its two back ends
 * (executor/cgroup_v1.c, executor/cgroup_v2.c) share. Private to those three files.
 *
 * struct cgroup is one run's group: one directory on v2, one per distinct hierarchy on v1.
 * A back end is a table of the operations that differ by version; everything that does not
 * (reading and writing control files with read-back, the caller's own cgroup from
 * /proc/self/cgroup, removal, leftovers) lives in cgroup.c.
 */
#ifndef EGRESS_CGROUP_IMPL_H
#define EGRESS_CGROUP_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/limits.h"
#include "executor/cgroup.h"

#define CG_FILE_MAX      EGRESS_CGROUP_FILE_MAX /* largest control file read (cgroup.procs) */
#define CG_V1_CTRLS      5
#define CG_RMDIR_TRIES   100     /* x 10 ms */
#define CG_LEFTOVERS_MAX 4096    /* stale groups handled in one cleanup */

/* v1 controllers, in this order everywhere (ctrl_dir indexes). */
extern const char *const cg_v1_names[CG_V1_CTRLS];

struct cg_backend;

struct cgroup {
	enum cgroup_version ver;
	const struct cg_backend *be;
	char run_id[CGROUP_RUN_ID_MAX + 1];
	/* v2: [0]. v1: one entry per distinct hierarchy. dirs[i] is
	 * bases[i]/CGROUP_PARENT/run_id; bases[i] is the caller's own cgroup in that hierarchy
	 * (docs/sandbox.md "cgroups"), so every limit above it still applies. */
	char dirs[CG_V1_CTRLS][EGRESS_PATH_MAX];
	char bases[CG_V1_CTRLS][EGRESS_PATH_MAX];
	size_t ndirs;
	bool created[CG_V1_CTRLS];          /* we made dirs[i] (for cleanup on failure) */
	int ctrl_dir[CG_V1_CTRLS];          /* v1: index into dirs for cg_v1_names[i] */
	struct cgroup_applied applied;
	uint32_t sampled_peak_pids;
};

/* What differs between cgroup v1 and v2. */
struct cg_backend {
	enum cgroup_version ver;
	/* Fill out for root; 0 when usable (cpu, memory, pids and a kill mechanism). */
	int (*probe)(const char *root, struct cgroup_probe *out);
	/* Fill cg's hierarchy directories for root/run_id, nested under the caller's own
	 * cgroup, creating nothing. */
	int (*layout)(struct cgroup *cg, const char *root, const char *run_id, char *err,
	    size_t errlen);
	/* Create the run's directories (and what the parents need) and apply every limit,
	 * read back. On failure the caller removes what cg->created says. */
	int (*create)(struct cgroup *cg, const char *root, const struct cgroup_limits *lim,
	    char *err, size_t errlen);
	/* One pass of killing every process of the group (the caller repeats until empty);
	 * a freeze is waited for until freeze_by (monotonic ms) at most. */
	void (*kill_pass)(struct cgroup *cg, uint64_t freeze_by);
	int (*usage)(struct cgroup *cg, struct cgroup_usage *out, char *err, size_t errlen);
	/* Directory of one controller (v2: the group, whatever the controller). */
	const char *(*dir)(const struct cgroup *cg, const char *controller);
};

extern const struct cg_backend cg_backend_v1;
extern const struct cg_backend cg_backend_v2;

/* The leaf egress-exec moves itself into on cgroup v2 when its own cgroup must hold the
 * runs' groups (a v2 cgroup with limited children may hold no process itself). */
#define CG_SUPERVISOR_LEAF "egress-supervisor"

/* v2: can the caller's cgroup base (under root) hold the runs' groups? 0 as it is, 1 once
 * egress-exec moved itself into CG_SUPERVISOR_LEAF, -1 (err) never. Writes nothing. */
int cg_v2_nest_check(const char *root, const char *base, char *err, size_t errlen);

/* ---- helpers (cgroup.c) ---- */
void cg_sleep_ms(unsigned ms);
int cg_path_join(char *out, const char *a, const char *b);
int cg_write(const char *dir, const char *file, const char *s);
int cg_read(const char *dir, const char *file, char *buf, size_t len);
bool cg_exists(const char *dir, const char *file);
int cg_parse_u64(const char *s, bool allow_max, uint64_t *out);
int cg_read_u64(const char *dir, const char *file, uint64_t *out);
int cg_read_keyed(const char *dir, const char *file, const char *key, uint64_t *out);
bool cg_has_token(const char *buf, const char *word);
int cg_write_check_u64(const char *dir, const char *file, uint64_t v, char *err,
    size_t errlen);
uint64_t cg_page_round(uint64_t bytes);
bool cg_swap_active(void);
void cg_after_mkdir(const char *path);
/* mkdir base/CGROUP_PARENT (existing is fine); parent gets its path. */
int cg_mkdir_parent(const char *base, char *parent, char *err, size_t errlen);
/* mkdir base/CGROUP_PARENT (existing is fine) and base/CGROUP_PARENT/run_id (existing is
 * not: a leftover); out gets the latter. */
int cg_mkdir_group(const char *base, const char *run_id, char *out, bool *created, char *err,
    size_t errlen);
/* Does dir/file (cgroup.procs, tasks) list pid? -1 on read error. */
int cg_procs_has(const char *dir, const char *file, pid_t pid);
/* SIGKILL every pid listed in dir/file (never 0, 1 or ourselves). */
unsigned cg_kill_listed(const char *dir, const char *file);
/*
 * The caller's own cgroup in one hierarchy, from /proc/self/cgroup: v1 the line whose
 * controller list holds `controller`, v2 (controller NULL) the "0::" line. The path is
 * absolute within the hierarchy ("/" at its root), checked: no "." or ".." components, no
 * " (deleted)". When its last component is CG_SUPERVISOR_LEAF the leaf's parent is given
 * (a supervisor that moved itself there still nests beside it, not inside). Then
 * out = hier + path ("/" adds nothing). 0, or -1 with err.
 */
int cg_self_base(const char *hier, const char *controller, char *out, char *err,
    size_t errlen);

#endif
