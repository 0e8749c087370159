/*
 * cgroup - one cgroup per run. See cgroup.h for the contract.
 *
 * Two back ends behind one handle: cgroup v2 (one directory) and cgroup v1 (one directory
 * per distinct hierarchy; co-mounted controllers such as cpu,cpuacct share one). Every
 * write to a control file is followed by a read of the same file: the kernel rounds,
 * clamps and silently ignores, and a limit we did not see take is a limit we do not attest.
 */
#define _GNU_SOURCE 1
#include "executor/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/util.h"

#define CG_FILE_MAX      EGRESS_CGROUP_FILE_MAX /* largest control file read (cgroup.procs) */
#define CG_V1_CTRLS      5
#define CG_RMDIR_TRIES   100     /* x 10 ms */
#define CG_LEFTOVERS_MAX 4096    /* stale groups handled in one cleanup */

/* Test hooks (tests/test_cgroup.c): a fake cgroupfs has no kernel to populate new
 * directories or to allow rmdir of a directory holding "control files". */
TESTABLE void (*cgroup_test_mkdir_hook)(const char *path);
TESTABLE int (*cgroup_test_rmdir)(const char *path);

static const char *const V1_NAMES[CG_V1_CTRLS] = { "memory", "pids", "cpu", "cpuacct", "freezer" };
/* A file that proves the controller at <root>/<name> is a v1 hierarchy of that kind. */
static const char *const V1_MARKERS[CG_V1_CTRLS] = {
	"memory.limit_in_bytes", "tasks", "cpu.cfs_quota_us", "cpuacct.usage", "tasks",
};

struct cgroup {
	enum cgroup_version ver;
	char run_id[CGROUP_RUN_ID_MAX + 1];
	/* v2: dirs[0]. v1: one entry per distinct hierarchy. */
	char dirs[CG_V1_CTRLS][EGRESS_PATH_MAX];
	size_t ndirs;
	bool created[CG_V1_CTRLS];          /* we made dirs[i] (for cleanup on failure) */
	int ctrl_dir[CG_V1_CTRLS];          /* v1: index into dirs for V1_NAMES[i] */
	struct cgroup_applied applied;
	uint32_t sampled_peak_pids;
};

static void
errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void
sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int
path_join(char *out, const char *a, const char *b)
{
	int n = snprintf(out, EGRESS_PATH_MAX, "%s/%s", a, b);
	if (n < 0 || n >= EGRESS_PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* Write s to dir/file. Returns 0 or -1 with errno. No O_CREAT: control files exist. */
static int
cg_write(const char *dir, const char *file, const char *s)
{
	char p[EGRESS_PATH_MAX];
	size_t len = strlen(s);
	ssize_t n;
	int fd, saved;

	if (path_join(p, dir, file) != 0)
		return -1;
	fd = open(p, O_WRONLY | O_CLOEXEC | O_TRUNC);
	if (fd < 0)
		return -1;
	/* cgroupfs reports a refused value on write(); a short write is a failure too. */
	n = write(fd, s, len);
	saved = errno;
	close(fd);
	if (n < 0) {
		errno = saved;
		return -1;
	}
	if ((size_t)n != len) {
		errno = EIO;
		return -1;
	}
	return 0;
}

/* Read dir/file into buf (NUL-terminated, at most len-1 bytes). 0 or -1 with errno. */
static int
cg_read(const char *dir, const char *file, char *buf, size_t len)
{
	char p[EGRESS_PATH_MAX];
	size_t got = 0;
	ssize_t n;
	int fd;

	if (path_join(p, dir, file) != 0)
		return -1;
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (got < len - 1 && (n = read(fd, buf + got, len - 1 - got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int saved = errno;
			close(fd);
			errno = saved;
			return -1;
		}
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return 0;
}

static bool
cg_exists(const char *dir, const char *file)
{
	char p[EGRESS_PATH_MAX];
	return path_join(p, dir, file) == 0 && access(p, F_OK) == 0;
}

/* Parse an unsigned decimal (or "max" = UINT64_MAX when allow_max) from s up to
 * whitespace/end. */
static int
parse_u64(const char *s, bool allow_max, uint64_t *out)
{
	char tmp[32];
	size_t n = 0;
	long long v;
	const char *errstr;

	while (*s == ' ' || *s == '\t')
		s++;
	while (s[n] != '\0' && s[n] != '\n' && s[n] != ' ' && s[n] != '\t') {
		if (n + 1 >= sizeof(tmp))
			return -1;
		tmp[n] = s[n];
		n++;
	}
	tmp[n] = '\0';
	if (allow_max && strcmp(tmp, "max") == 0) {
		*out = UINT64_MAX;
		return 0;
	}
	if (num_parse(tmp, 0, LLONG_MAX, &v, &errstr) != 0)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

static int
cg_read_u64(const char *dir, const char *file, uint64_t *out)
{
	char buf[64];

	if (cg_read(dir, file, buf, sizeof(buf)) != 0)
		return -1;
	if (parse_u64(buf, true, out) != 0) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* "key value" line of a flat-keyed file (cpu.stat, memory.events, memory.oom_control). */
static int
cg_read_keyed(const char *dir, const char *file, const char *key, uint64_t *out)
{
	char buf[4096];
	size_t kl = strlen(key);

	if (cg_read(dir, file, buf, sizeof(buf)) != 0)
		return -1;
	for (char *line = buf; line != NULL && *line != '\0';) {
		char *nl = strchr(line, '\n');
		if (nl != NULL)
			*nl = '\0';
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			return parse_u64(line + kl + 1, false, out);
		line = nl != NULL ? nl + 1 : NULL;
	}
	errno = ENOENT;
	return -1;
}

/* Does the whitespace-separated list in buf contain word? */
static bool
has_token(const char *buf, const char *word)
{
	size_t wl = strlen(word);

	for (const char *p = buf; *p != '\0';) {
		while (*p == ' ' || *p == '\n' || *p == '\t')
			p++;
		size_t n = strcspn(p, " \n\t");
		if (n == wl && strncmp(p, word, wl) == 0)
			return true;
		p += n;
	}
	return false;
}

bool
cgroup_run_id_valid(const char *run_id)
{
	size_t n;

	if (run_id == NULL)
		return false;
	n = strnlen(run_id, CGROUP_RUN_ID_MAX + 1);
	if (n == 0 || n > CGROUP_RUN_ID_MAX || strcmp(run_id, ".") == 0 ||
	    strcmp(run_id, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = run_id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* ---- probing ---- */

static bool
v2_usable(const char *root)
{
	char buf[1024];

	if (cg_read(root, "cgroup.controllers", buf, sizeof(buf)) != 0)
		return false;
	return has_token(buf, "cpu") && has_token(buf, "memory") && has_token(buf, "pids");
}

int
cgroup_probe(const char *root, struct cgroup_probe *out)
{
	char d[EGRESS_PATH_MAX];

	if (root == NULL)
		root = CGROUP_ROOT_DEFAULT;
	memset(out, 0, sizeof(*out));
	if (v2_usable(root)) {
		out->version = CGROUP_VERSION_2;
		out->cpu = out->memory = out->pids = true;
		/* cgroup.freeze and cgroup.kill are not shown in the root group: look in our
		 * parent when it exists. Killing works without them too (pid by pid, repeated
		 * until empty), so kill is true either way. */
		bool parent = path_join(d, root, CGROUP_PARENT) == 0 && access(d, F_OK) == 0;
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
	out->version = CGROUP_VERSION_1;
	bool *have[CG_V1_CTRLS] = { &out->memory, &out->pids, &out->cpu, NULL, &out->freezer };
	bool cpuacct = false;
	char missing[128] = "";
	for (size_t i = 0; i < CG_V1_CTRLS; i++) {
		bool ok = path_join(d, root, V1_NAMES[i]) == 0 && cg_exists(d, V1_MARKERS[i]);
		if (have[i] != NULL)
			*have[i] = ok;
		else
			cpuacct = ok;
		if (!ok) {
			size_t l = strlen(missing);
			snprintf(missing + l, sizeof(missing) - l, " %s", V1_NAMES[i]);
		}
	}
	out->kill = out->freezer;
	if (path_join(d, root, "memory") == 0) {
		out->swap_control = cg_exists(d, "memory.memsw.limit_in_bytes");
		out->peak_memory = cg_exists(d, "memory.max_usage_in_bytes");
	}
	if (path_join(d, root, "pids/" CGROUP_PARENT) == 0)
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

/* ---- creation ---- */

static void
after_mkdir(const char *path)
{
	if (cgroup_test_mkdir_hook != NULL)
		cgroup_test_mkdir_hook(path);
}

static int
do_rmdir(const char *path)
{
	if (cgroup_test_rmdir != NULL)
		return cgroup_test_rmdir(path);
	return rmdir(path);
}

/* mkdir parent/egress (existing is fine) and parent/egress/<id> (existing is not). */
static int
make_group_dir(const char *hier, const char *run_id, char *out, bool *created, char *err,
    size_t errlen)
{
	char parent[EGRESS_PATH_MAX];

	if (path_join(parent, hier, CGROUP_PARENT) != 0 || path_join(out, parent, run_id) != 0) {
		errf(err, errlen, "cgroup: path too long under %s", hier);
		return -1;
	}
	if (mkdir(parent, 0755) == 0)
		after_mkdir(parent);
	else if (errno != EEXIST) {
		errf(err, errlen, "cgroup: mkdir %s: %s", parent, strerror(errno));
		return -1;
	}
	if (mkdir(out, 0755) != 0) {
		if (errno == EEXIST)
			errf(err, errlen, "cgroup: %s already exists (a leftover of a killed run? "
			    "run `egress-exec cleanup`)", out);
		else
			errf(err, errlen, "cgroup: mkdir %s: %s", out, strerror(errno));
		return -1;
	}
	*created = true;
	after_mkdir(out);
	return 0;
}

/* Enable cpu, memory, pids for the children of dir (v2). */
static int
v2_enable(const char *dir, char *err, size_t errlen)
{
	static const char *const ctrls[] = { "cpu", "memory", "pids" };
	char buf[1024];

	if (cg_read(dir, "cgroup.subtree_control", buf, sizeof(buf)) != 0) {
		errf(err, errlen, "cgroup: reading %s/cgroup.subtree_control: %s", dir,
		    strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < EGRESS_NELEM(ctrls); i++) {
		char w[16];
		if (has_token(buf, ctrls[i]))
			continue;
		snprintf(w, sizeof(w), "+%s", ctrls[i]);
		if (cg_write(dir, "cgroup.subtree_control", w) != 0) {
			errf(err, errlen, "cgroup: enabling %s in %s/cgroup.subtree_control: %s%s",
			    ctrls[i], dir, strerror(errno), errno == EBUSY ?
			    " (processes in that group: cgroup v2 needs a delegated, empty parent)" : "");
			return -1;
		}
	}
	return 0;
}

/* Is any swap device active? /proc/swaps has a header line and one line per device. */
static bool
swap_active(void)
{
	char buf[4096];

	if (cg_read("/proc", "swaps", buf, sizeof(buf)) != 0)
		return true; /* unknown: assume the worst */
	char *nl = strchr(buf, '\n');
	return nl != NULL && nl[1] != '\0';
}

static int
write_check_u64(const char *dir, const char *file, uint64_t v, char *err, size_t errlen)
{
	char s[32];
	uint64_t got;

	snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
	if (cg_write(dir, file, s) != 0) {
		errf(err, errlen, "cgroup: writing %s to %s/%s: %s", s, dir, file, strerror(errno));
		return -1;
	}
	if (cg_read_u64(dir, file, &got) != 0 || got != v) {
		errf(err, errlen, "cgroup: %s/%s did not take %s (read back %s)", dir, file, s,
		    cg_read_u64(dir, file, &got) == 0 ? "another value" : "nothing");
		return -1;
	}
	return 0;
}

static uint64_t
page_round(uint64_t bytes)
{
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t p = ps > 0 ? (uint64_t)ps : 4096;
	return bytes - bytes % p;
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
		errf(err, errlen, "cgroup: writing cpu.max \"%s\": %s", s, strerror(errno));
		return -1;
	}
	if (cg_read(d, "cpu.max", buf, sizeof(buf)) != 0 || parse_u64(buf, true, &q) != 0 ||
	    parse_u64(buf + strcspn(buf, " "), false, &per) != 0 || q != a->cpu_quota_us ||
	    per != a->cpu_period_us) {
		errf(err, errlen, "cgroup: cpu.max did not take \"%s\"", s);
		return -1;
	}
	a->memory_bytes = page_round(lim->memory_bytes);
	if (write_check_u64(d, "memory.max", a->memory_bytes, err, errlen) != 0)
		return -1;
	if (cg_exists(d, "memory.swap.max")) {
		if (write_check_u64(d, "memory.swap.max", 0, err, errlen) != 0)
			return -1;
		a->swap_mechanism = "memory.swap.max";
	} else if (!swap_active()) {
		a->swap_mechanism = "no-swap-active";
	} else {
		errf(err, errlen, "cgroup: no memory.swap.max (swap accounting off) and swap is "
		    "active: the memory limit would not bound swap");
		return -1;
	}
	a->swap_limited = true;
	/* An OOM kill takes the whole group, not one process the worker can restart. Not a
	 * limit (memory.max bounds memory either way), so best effort. */
	if (cg_exists(d, "memory.oom.group"))
		(void)cg_write(d, "memory.oom.group", "1");
	a->pids = lim->pids;
	return write_check_u64(d, "pids.max", a->pids, err, errlen);
}

static const char *
v1_dir(const struct cgroup *cg, const char *ctrl)
{
	for (size_t i = 0; i < CG_V1_CTRLS; i++)
		if (strcmp(V1_NAMES[i], ctrl) == 0 && cg->ctrl_dir[i] >= 0)
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
	if (write_check_u64(cpu, "cpu.cfs_period_us", a->cpu_period_us, err, errlen) != 0 ||
	    write_check_u64(cpu, "cpu.cfs_quota_us", a->cpu_quota_us, err, errlen) != 0)
		return -1;
	/* Memory, then memory+swap at the same value: no swap at all. memsw must be >= the
	 * memory limit, hence the order. */
	a->memory_bytes = page_round(lim->memory_bytes);
	if (write_check_u64(mem, "memory.limit_in_bytes", a->memory_bytes, err, errlen) != 0)
		return -1;
	if (cg_exists(mem, "memory.memsw.limit_in_bytes")) {
		if (write_check_u64(mem, "memory.memsw.limit_in_bytes", a->memory_bytes, err,
		    errlen) != 0)
			return -1;
		a->swap_mechanism = "memory.memsw";
	} else if (!swap_active()) {
		a->swap_mechanism = "no-swap-active";
	} else {
		errf(err, errlen, "cgroup: no memory.memsw.limit_in_bytes (boot with "
		    "swapaccount=1) and swap is active: the memory limit would not bound swap");
		return -1;
	}
	a->swap_limited = true;
	/* The OOM killer must be on, or a worker at its limit hangs instead of dying. */
	if (cg_read_keyed(mem, "memory.oom_control", "oom_kill_disable", &v) != 0 || v != 0) {
		errf(err, errlen, "cgroup: %s/memory.oom_control: oom_kill_disable is not 0", mem);
		return -1;
	}
	a->pids = lim->pids;
	if (write_check_u64(pids, "pids.max", a->pids, err, errlen) != 0)
		return -1;
	/* The freezer is how the group is killed: it must be present and thawed. */
	if (cg_read(frz, "freezer.state", buf, sizeof(buf)) != 0 || strncmp(buf, "THAWED", 6) != 0) {
		errf(err, errlen, "cgroup: %s/freezer.state is not THAWED", frz);
		return -1;
	}
	return 0;
}

static void
remove_created(struct cgroup *cg)
{
	for (size_t i = 0; i < cg->ndirs; i++) {
		if (!cg->created[i])
			continue;
		for (int t = 0; t < 10 && do_rmdir(cg->dirs[i]) != 0 && errno == EBUSY; t++)
			sleep_ms(10);
		cg->created[i] = false;
	}
}

/* Fill cg's directories for root/run_id without creating anything. */
static int
cg_layout(struct cgroup *cg, const char *root, enum cgroup_version ver, const char *run_id,
    char *err, size_t errlen)
{
	char real[CG_V1_CTRLS][PATH_MAX];

	cg->ver = ver;
	snprintf(cg->run_id, sizeof(cg->run_id), "%s", run_id);
	cg->ndirs = 0;
	if (ver == CGROUP_VERSION_2) {
		char parent[EGRESS_PATH_MAX];
		if (path_join(parent, root, CGROUP_PARENT) != 0 ||
		    path_join(cg->dirs[0], parent, run_id) != 0) {
			errf(err, errlen, "cgroup: path too long");
			return -1;
		}
		cg->ndirs = 1;
		return 0;
	}
	/* v1: one directory per distinct hierarchy; co-mounts (cpu,cpuacct behind symlinks)
	 * resolve to the same real path and are created once. */
	size_t nh = 0;
	for (size_t i = 0; i < CG_V1_CTRLS; i++) {
		char d[EGRESS_PATH_MAX], r[PATH_MAX];
		if (path_join(d, root, V1_NAMES[i]) != 0 || realpath(d, r) == NULL) {
			errf(err, errlen, "cgroup: v1 controller %s not found under %s", V1_NAMES[i],
			    root);
			return -1;
		}
		size_t j;
		for (j = 0; j < nh; j++)
			if (strcmp(real[j], r) == 0)
				break;
		if (j == nh) {
			snprintf(real[nh], sizeof(real[nh]), "%s", r);
			char parent[EGRESS_PATH_MAX];
			if (path_join(parent, d, CGROUP_PARENT) != 0 ||
			    path_join(cg->dirs[nh], parent, run_id) != 0) {
				errf(err, errlen, "cgroup: path too long");
				return -1;
			}
			nh++;
		}
		cg->ctrl_dir[i] = (int)j;
	}
	cg->ndirs = nh;
	return 0;
}

struct cgroup *
cgroup_create(const char *root, const char *run_id, const struct cgroup_limits *limits,
    char *err, size_t errlen)
{
	struct cgroup_probe pr;
	struct cgroup *cg;

	if (root == NULL)
		root = CGROUP_ROOT_DEFAULT;
	if (!cgroup_run_id_valid(run_id)) {
		errf(err, errlen, "cgroup: invalid run id");
		return NULL;
	}
	if (limits == NULL || limits->cpu_millicores == 0 || limits->memory_bytes == 0 ||
	    limits->pids == 0) {
		errf(err, errlen, "cgroup: every limit (cpu, memory, pids) must be set");
		return NULL;
	}
	/* The kernel refuses a CFS quota under 1 ms. */
	if ((uint64_t)limits->cpu_millicores * CGROUP_CPU_PERIOD_US / 1000u < 1000u) {
		errf(err, errlen, "cgroup: cpu limit below 10 millicores");
		return NULL;
	}
	if (page_round(limits->memory_bytes) == 0) {
		errf(err, errlen, "cgroup: memory limit below one page");
		return NULL;
	}
	if (cgroup_probe(root, &pr) != 0) {
		errf(err, errlen, "cgroup: %s", pr.detail);
		return NULL;
	}
	cg = calloc(1, sizeof(*cg));
	if (cg == NULL) {
		errf(err, errlen, "cgroup: out of memory");
		return NULL;
	}
	for (size_t i = 0; i < CG_V1_CTRLS; i++)
		cg->ctrl_dir[i] = -1;
	if (cg_layout(cg, root, pr.version, run_id, err, errlen) != 0)
		goto fail;
	if (pr.version == CGROUP_VERSION_2) {
		char parent[EGRESS_PATH_MAX];
		/* Controllers must be enabled top-down before the run's group exists: root ->
		 * egress/ -> egress/<run-id> gets cpu.max, memory.max, pids.max. */
		if (v2_enable(root, err, errlen) != 0)
			goto fail;
		if (path_join(parent, root, CGROUP_PARENT) != 0) {
			errf(err, errlen, "cgroup: path too long");
			goto fail;
		}
		if (mkdir(parent, 0755) == 0) {
			after_mkdir(parent);
		} else if (errno != EEXIST) {
			errf(err, errlen, "cgroup: mkdir %s: %s", parent, strerror(errno));
			goto fail;
		}
		if (v2_enable(parent, err, errlen) != 0 ||
		    make_group_dir(root, run_id, cg->dirs[0], &cg->created[0], err, errlen) != 0 ||
		    v2_apply(cg, limits, err, errlen) != 0)
			goto fail;
	} else {
		for (size_t i = 0; i < cg->ndirs; i++) {
			char hier[EGRESS_PATH_MAX];
			/* dirs[i] is <hier>/egress/<id>: recover <hier>. */
			snprintf(hier, sizeof(hier), "%s", cg->dirs[i]);
			char *slash = strrchr(hier, '/');
			if (slash != NULL)
				*slash = '\0';
			slash = strrchr(hier, '/');
			if (slash != NULL)
				*slash = '\0';
			if (make_group_dir(hier, run_id, cg->dirs[i], &cg->created[i], err, errlen) != 0)
				goto fail;
		}
		if (v1_apply(cg, limits, err, errlen) != 0)
			goto fail;
	}
	return cg;
fail:
	remove_created(cg);
	free(cg);
	return NULL;
}

enum cgroup_version
cgroup_version(const struct cgroup *cg)
{
	return cg != NULL ? cg->ver : CGROUP_VERSION_NONE;
}

const struct cgroup_applied *
cgroup_applied(const struct cgroup *cg)
{
	return &cg->applied;
}

json_t *
cgroup_applied_json(const struct cgroup *cg)
{
	const struct cgroup_applied *a = &cg->applied;

	return json_pack("{s:s, s:I, s:I, s:I, s:b, s:s, s:I}",
	    "cgroup_version", cg->ver == CGROUP_VERSION_2 ? "v2" : "v1",
	    "cpu_quota_us", (json_int_t)a->cpu_quota_us,
	    "cpu_period_us", (json_int_t)a->cpu_period_us,
	    "memory_bytes", (json_int_t)a->memory_bytes,
	    "swap_limited", a->swap_limited,
	    "swap_mechanism", a->swap_mechanism != NULL ? a->swap_mechanism : "none",
	    "pids", (json_int_t)a->pids);
}

const char *
cgroup_path(const struct cgroup *cg, const char *controller)
{
	if (cg == NULL)
		return NULL;
	if (cg->ver == CGROUP_VERSION_2)
		return cg->dirs[0];
	return controller != NULL ? v1_dir(cg, controller) : NULL;
}

/* ---- processes ---- */

/* Does dir/cgroup.procs list pid? -1 on read error. */
static int
procs_has(const char *dir, const char *file, pid_t pid)
{
	char buf[CG_FILE_MAX];

	if (cg_read(dir, file, buf, sizeof(buf)) != 0)
		return -1;
	for (char *p = buf; *p != '\0';) {
		uint64_t v;
		size_t n = strcspn(p, "\n");
		/* Only whole lines: a read cut at the buffer end must not yield a shorter pid. */
		if (p[n] == '\n' && n > 0 && parse_u64(p, false, &v) == 0 && v == (uint64_t)pid)
			return 1;
		p += n;
		if (*p == '\n')
			p++;
	}
	return 0;
}

int
cgroup_attach(struct cgroup *cg, pid_t pid, char *err, size_t errlen)
{
	char s[32];
	pid_t who = pid == 0 ? getpid() : pid;

	if (pid < 0) {
		errf(err, errlen, "cgroup: invalid pid");
		return -1;
	}
	/* "0" means the writing process to the kernel, whatever pid namespace it is in. */
	snprintf(s, sizeof(s), "%d\n", (int)pid);
	for (size_t i = 0; i < cg->ndirs; i++) {
		if (cg_write(cg->dirs[i], "cgroup.procs", s) != 0) {
			errf(err, errlen, "cgroup: attaching pid %d to %s: %s", (int)who, cg->dirs[i],
			    strerror(errno));
			return -1;
		}
	}
	/* Read back: the pid must be listed in every hierarchy. */
	for (size_t i = 0; i < cg->ndirs; i++) {
		if (procs_has(cg->dirs[i], "cgroup.procs", who) != 1) {
			errf(err, errlen, "cgroup: pid %d is not listed in %s/cgroup.procs after "
			    "attaching", (int)who, cg->dirs[i]);
			return -1;
		}
	}
	return 0;
}

long
cgroup_sample(struct cgroup *cg)
{
	const char *d = cg->ver == CGROUP_VERSION_2 ? cg->dirs[0] : v1_dir(cg, "pids");
	uint64_t v;

	if (d == NULL || cg_read_u64(d, "pids.current", &v) != 0 || v > UINT32_MAX)
		return -1;
	if (v > cg->sampled_peak_pids)
		cg->sampled_peak_pids = (uint32_t)v;
	return (long)v;
}

/* Is the procs-style file empty (no pid)? Missing directory counts as empty. */
static bool
dir_empty(const char *dir)
{
	char buf[CG_FILE_MAX];

	if (cg_read(dir, "cgroup.procs", buf, sizeof(buf)) != 0)
		return errno == ENOENT;
	for (const char *p = buf; *p != '\0'; p++)
		if (*p >= '0' && *p <= '9')
			return false;
	return true;
}

bool
cgroup_empty(struct cgroup *cg)
{
	for (size_t i = 0; i < cg->ndirs; i++)
		if (!dir_empty(cg->dirs[i]))
			return false;
	return true;
}

/* SIGKILL every pid listed in dir/file. Returns how many were signalled. */
static unsigned
kill_listed(const char *dir, const char *file)
{
	char buf[CG_FILE_MAX];
	unsigned n = 0;

	if (cg_read(dir, file, buf, sizeof(buf)) != 0)
		return 0;
	for (char *p = buf; *p != '\0';) {
		uint64_t v;
		size_t len = strcspn(p, "\n");
		/* Never pid 0/1 or ourselves: a corrupt read must not signal the wrong thing. */
		if (p[len] == '\n' && len > 0 && parse_u64(p, false, &v) == 0 && v > 1 &&
		    v <= INT32_MAX && (pid_t)v != getpid()) {
			if (kill((pid_t)v, SIGKILL) == 0)
				n++;
		}
		p += len;
		if (*p == '\n')
			p++;
	}
	return n;
}

/* Wait (bounded by deadline_ms, monotonic) until file in dir reads want as its first word
 * (or for v2 cgroup.events the "frozen 1" line). */
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
		sleep_ms(5);
	}
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
		sleep_ms(5);
	}
}

/* One kill pass. v1 / v2 without cgroup.kill: freeze so nothing forks or exits while the
 * pid list is read (pids stay valid: no reuse while frozen), SIGKILL all, thaw so the
 * signals are delivered. */
static void
kill_pass(struct cgroup *cg, uint64_t deadline_ms)
{
	/* A task stuck in uninterruptible sleep can keep a group FREEZING for long: wait at
	 * most a quarter second per pass for the freeze, then kill what is listed anyway. */
	uint64_t freeze_by = mono_msec() + 250;
	if (freeze_by > deadline_ms)
		freeze_by = deadline_ms;

	if (cg->ver == CGROUP_VERSION_2) {
		const char *d = cg->dirs[0];
		if (cg_exists(d, "cgroup.kill") && cg_write(d, "cgroup.kill", "1") == 0)
			return;
		bool can_freeze = cg_write(d, "cgroup.freeze", "1") == 0;
		if (can_freeze)
			(void)wait_frozen_v2(d, freeze_by);
		kill_listed(d, "cgroup.procs");
		if (can_freeze)
			(void)cg_write(d, "cgroup.freeze", "0");
		return;
	}
	const char *frz = v1_dir(cg, "freezer");
	bool frozen = false;
	if (frz != NULL && cg_write(frz, "freezer.state", "FROZEN") == 0)
		frozen = wait_frozen_v1(frz, freeze_by);
	/* Even if freezing timed out, kill what we see: the loop repeats until empty. The
	 * freezer's "tasks" lists every thread; other hierarchies are covered too in case a
	 * process is in one but not another (half-done attach). */
	if (frz != NULL)
		kill_listed(frz, "tasks");
	for (size_t i = 0; i < cg->ndirs; i++)
		kill_listed(cg->dirs[i], "cgroup.procs");
	if (frz != NULL)
		(void)cg_write(frz, "freezer.state", "THAWED");
	(void)frozen;
}

int
cgroup_kill(struct cgroup *cg, unsigned timeout_ms, char *err, size_t errlen)
{
	uint64_t deadline;

	if (timeout_ms == 0)
		timeout_ms = CGROUP_KILL_TIMEOUT_MS;
	deadline = mono_msec() + timeout_ms;
	for (;;) {
		if (cgroup_empty(cg))
			return 0;
		kill_pass(cg, deadline);
		/* Give the kernel a moment to reap the killed tasks out of the group. */
		for (int i = 0; i < 10 && !cgroup_empty(cg); i++)
			sleep_ms(5);
		if (cgroup_empty(cg))
			return 0;
		if (mono_msec() >= deadline) {
			errf(err, errlen, "cgroup: %s still has processes after %u ms of killing",
			    cg->dirs[0], timeout_ms);
			return -1;
		}
	}
}

int
cgroup_usage_read(struct cgroup *cg, struct cgroup_usage *out, char *err, size_t errlen)
{
	uint64_t v;

	memset(out, 0, sizeof(*out));
	(void)cgroup_sample(cg);
	if (cg->ver == CGROUP_VERSION_2) {
		const char *d = cg->dirs[0];
		if (cg_read_keyed(d, "cpu.stat", "usage_usec", &v) != 0) {
			errf(err, errlen, "cgroup: reading %s/cpu.stat usage_usec: %s", d,
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
	const char *acct = v1_dir(cg, "cpuacct"), *mem = v1_dir(cg, "memory");
	const char *pids = v1_dir(cg, "pids");
	if (cg_read_u64(acct, "cpuacct.usage", &v) != 0) {
		errf(err, errlen, "cgroup: reading %s/cpuacct.usage: %s", acct, strerror(errno));
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

/* ---- removal ---- */

static int
rmdir_bounded(const char *dir)
{
	for (int t = 0; t < CG_RMDIR_TRIES; t++) {
		if (do_rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		/* EBUSY: tasks still leaving the group (exit in progress). */
		if (errno != EBUSY)
			return -1;
		sleep_ms(10);
	}
	return -1;
}

int
cgroup_destroy(struct cgroup *cg, char *err, size_t errlen)
{
	int rc = 0;

	if (cg == NULL)
		return 0;
	if (!cgroup_empty(cg) && cgroup_kill(cg, 0, err, errlen) != 0)
		rc = -1;
	for (size_t i = 0; i < cg->ndirs; i++) {
		if (rmdir_bounded(cg->dirs[i]) != 0) {
			if (rc == 0)
				errf(err, errlen, "cgroup: rmdir %s: %s", cg->dirs[i], strerror(errno));
			rc = -1;
		}
	}
	free(cg);
	return rc;
}

/* Add name to the set names[*n] (bounded, deduplicated). */
static void
name_add(char (*names)[CGROUP_RUN_ID_MAX + 1], size_t *n, const char *name)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp(names[i], name) == 0)
			return;
	size_t len = strnlen(name, CGROUP_RUN_ID_MAX + 1);
	if (*n < CG_LEFTOVERS_MAX && len <= CGROUP_RUN_ID_MAX) {
		memcpy(names[*n], name, len);
		names[*n][len] = '\0';
		(*n)++;
	}
}

int
cgroup_cleanup_leftovers(const char *root, bool (*is_live)(const char *run_id, void *arg),
    void *arg, unsigned *removed, char *err, size_t errlen)
{
	struct cgroup_probe pr;
	struct cgroup layout;
	char (*names)[CGROUP_RUN_ID_MAX + 1];
	size_t n = 0;
	unsigned done = 0;
	int rc = 0;

	if (removed != NULL)
		*removed = 0;
	if (root == NULL)
		root = CGROUP_ROOT_DEFAULT;
	if (cgroup_probe(root, &pr) != 0) {
		errf(err, errlen, "cgroup: %s", pr.detail);
		return -1;
	}
	/* Learn the hierarchy directories from a layout for a dummy id. */
	memset(&layout, 0, sizeof(layout));
	if (cg_layout(&layout, root, pr.version, "x", err, errlen) != 0)
		return -1;
	names = calloc(CG_LEFTOVERS_MAX, sizeof(*names));
	if (names == NULL) {
		errf(err, errlen, "cgroup: out of memory");
		return -1;
	}
	for (size_t i = 0; i < layout.ndirs; i++) {
		char parent[EGRESS_PATH_MAX];
		snprintf(parent, sizeof(parent), "%s", layout.dirs[i]);
		char *slash = strrchr(parent, '/');
		if (slash != NULL)
			*slash = '\0'; /* <hier>/egress */
		DIR *d = opendir(parent);
		if (d == NULL)
			continue;
		struct dirent *de;
		while ((de = readdir(d)) != NULL) {
			if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
				continue;
			if (!cgroup_run_id_valid(de->d_name))
				continue;
			name_add(names, &n, de->d_name);
		}
		closedir(d);
	}
	for (size_t i = 0; i < n; i++) {
		if (is_live != NULL && is_live(names[i], arg))
			continue;
		struct cgroup *cg = calloc(1, sizeof(*cg));
		char e[256] = "";
		if (cg == NULL) {
			rc = -1;
			break;
		}
		for (size_t k = 0; k < CG_V1_CTRLS; k++)
			cg->ctrl_dir[k] = -1;
		if (cg_layout(cg, root, pr.version, names[i], e, sizeof(e)) != 0) {
			free(cg);
			if (rc == 0)
				errf(err, errlen, "%s", e);
			rc = -1;
			continue;
		}
		if (cgroup_destroy(cg, e, sizeof(e)) != 0) {
			if (rc == 0)
				errf(err, errlen, "%s", e);
			rc = -1;
			continue;
		}
		done++;
	}
	free(names);
	if (removed != NULL)
		*removed = done;
	return rc;
}
