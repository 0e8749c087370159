/*
 * cgroup - one cgroup per run: the interface (cgroup.h) over two back ends,
 * executor/cgroup_v1.c and executor/cgroup_v2.c (struct cg_backend, cgroup_impl.h).
 *
 * Here: what does not depend on the version. Every write to a control file is followed by
 * a read of the same file (the kernel rounds, clamps and silently ignores, and a limit we
 * did not see take is a limit we do not attest); the caller's own cgroup, under which
 * every run nests; attach, kill and removal with bounded waits; leftovers of killed runs,
 * wherever they nest.
 */
#define _GNU_SOURCE 1
#include "executor/cgroup_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

#define CG_WALK_DEPTH    16      /* cleanup: how deep a run may nest in a hierarchy */
#define CG_WALK_DIRS     20000   /* cleanup: directories visited per hierarchy */
#define CG_SELF_FILE_MAX 8192    /* /proc/self/cgroup */

/* Test hooks (tests/test_cgroup.c): a fake cgroupfs has no kernel to populate new
 * directories or to allow rmdir of a directory holding "control files"; the fake's
 * /proc/self/cgroup says where "the caller" is. */
TESTABLE void (*cgroup_test_mkdir_hook)(const char *path);
TESTABLE int (*cgroup_test_rmdir)(const char *path);
TESTABLE const char *cgroup_test_self_file;

void
cg_sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int
cg_path_join(char *out, const char *a, const char *b)
{
	int n = snprintf(out, EGRESS_PATH_MAX, "%s/%s", a, b);
	if (n < 0 || n >= EGRESS_PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* Write s to dir/file. Returns 0 or -1 with errno. No O_CREAT: control files exist. */
int
cg_write(const char *dir, const char *file, const char *s)
{
	char p[EGRESS_PATH_MAX];
	size_t len = strlen(s);
	ssize_t n;
	int fd, saved;

	if (cg_path_join(p, dir, file) != 0)
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
int
cg_read(const char *dir, const char *file, char *buf, size_t len)
{
	char p[EGRESS_PATH_MAX];

	if (cg_path_join(p, dir, file) != 0)
		return -1;
	return file_read_text(p, 0, buf, len) < 0 ? -1 : 0;
}

bool
cg_exists(const char *dir, const char *file)
{
	char p[EGRESS_PATH_MAX];
	return cg_path_join(p, dir, file) == 0 && access(p, F_OK) == 0;
}

/* Parse an unsigned decimal (or "max" = UINT64_MAX when allow_max) from s up to
 * whitespace/end. */
int
cg_parse_u64(const char *s, bool allow_max, uint64_t *out)
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

int
cg_read_u64(const char *dir, const char *file, uint64_t *out)
{
	char buf[64];

	if (cg_read(dir, file, buf, sizeof(buf)) != 0)
		return -1;
	if (cg_parse_u64(buf, true, out) != 0) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* "key value" line of a flat-keyed file (cpu.stat, memory.events, memory.oom_control). */
int
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
			return cg_parse_u64(line + kl + 1, false, out);
		line = nl != NULL ? nl + 1 : NULL;
	}
	errno = ENOENT;
	return -1;
}

/* Does the whitespace-separated list in buf contain word? */
bool
cg_has_token(const char *buf, const char *word)
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

/* Write v to dir/file and read it back. */
int
cg_write_check_u64(const char *dir, const char *file, uint64_t v, char *err, size_t errlen)
{
	char s[32];
	uint64_t got;

	snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
	if (cg_write(dir, file, s) != 0) {
		errbuf_set(err, errlen, 0, "cgroup: writing %s to %s/%s: %s", s, dir, file, strerror(errno));
		return -1;
	}
	if (cg_read_u64(dir, file, &got) != 0 || got != v) {
		errbuf_set(err, errlen, 0, "cgroup: %s/%s did not take %s (read back %s)", dir, file, s,
		    cg_read_u64(dir, file, &got) == 0 ? "another value" : "nothing");
		return -1;
	}
	return 0;
}

uint64_t
cg_page_round(uint64_t bytes)
{
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t p = ps > 0 ? (uint64_t)ps : 4096;
	return bytes - bytes % p;
}

/* Is any swap device active? /proc/swaps has a header line and one line per device. */
bool
cg_swap_active(void)
{
	char buf[4096];

	if (cg_read("/proc", "swaps", buf, sizeof(buf)) != 0)
		return true; /* unknown: assume the worst */
	char *nl = strchr(buf, '\n');
	return nl != NULL && nl[1] != '\0';
}

void
cg_after_mkdir(const char *path)
{
	if (cgroup_test_mkdir_hook != NULL)
		cgroup_test_mkdir_hook(path);
}

static int
cg_rmdir(const char *path)
{
	if (cgroup_test_rmdir != NULL)
		return cgroup_test_rmdir(path);
	return rmdir(path);
}

int
cg_mkdir_parent(const char *base, char *parent, char *err, size_t errlen)
{
	if (cg_path_join(parent, base, CGROUP_PARENT) != 0) {
		errbuf_set(err, errlen, 0, "cgroup: path too long under %s", base);
		return -1;
	}
	if (mkdir(parent, 0755) == 0)
		cg_after_mkdir(parent);
	else if (errno != EEXIST) {
		errbuf_set(err, errlen, 0, "cgroup: mkdir %s: %s", parent, strerror(errno));
		return -1;
	}
	return 0;
}

int
cg_mkdir_group(const char *base, const char *run_id, char *out, bool *created, char *err,
    size_t errlen)
{
	char parent[EGRESS_PATH_MAX];

	/* A concurrent run's destroy removes an empty egress/ (it is ours to remove): if it
	 * goes between the two mkdirs, make it again, a bounded number of times. */
	for (int t = 0;; t++) {
		if (cg_mkdir_parent(base, parent, err, errlen) != 0)
			return -1;
		if (cg_path_join(out, parent, run_id) != 0) {
			errbuf_set(err, errlen, 0, "cgroup: path too long under %s", base);
			return -1;
		}
		if (mkdir(out, 0755) == 0)
			break;
		if (errno == ENOENT && t < 3)
			continue;
		if (errno == EEXIST)
			errbuf_set(err, errlen, 0, "cgroup: %s already exists (a leftover of a killed run? "
			    "run `egress-exec cleanup`)", out);
		else
			errbuf_set(err, errlen, 0, "cgroup: mkdir %s: %s", out, strerror(errno));
		return -1;
	}
	*created = true;
	cg_after_mkdir(out);
	return 0;
}

/* Is the comma-separated list (a /proc/self/cgroup controllers field) holding name? */
static bool
list_has(const char *list, size_t len, const char *name)
{
	size_t nl = strlen(name);

	for (size_t i = 0; i < len;) {
		size_t n = 0;
		while (i + n < len && list[i + n] != ',')
			n++;
		if (n == nl && memcmp(list + i, name, nl) == 0)
			return true;
		i += n + 1;
	}
	return false;
}

/* A cgroup path from the kernel, checked anyway: absolute, no "." / ".." / empty
 * components, no " (deleted)". */
static bool
self_path_ok(const char *p, size_t len)
{
	if (len == 0 || p[0] != '/' || len >= EGRESS_PATH_MAX / 2)
		return false;
	if (len >= 10 && memcmp(p + len - 10, " (deleted)", 10) == 0)
		return false;
	for (size_t i = 1; i < len;) {
		size_t n = 0;
		while (i + n < len && p[i + n] != '/')
			n++;
		if ((n == 0 && i + n < len) || (n == 1 && p[i] == '.') ||
		    (n == 2 && p[i] == '.' && p[i + 1] == '.'))
			return false;
		i += n + 1;
	}
	return true;
}

int
cg_self_base(const char *hier, const char *controller, char *out, char *err, size_t errlen)
{
	const char *file = cgroup_test_self_file != NULL ? cgroup_test_self_file :
	    "/proc/self/cgroup";
	char buf[CG_SELF_FILE_MAX], path[EGRESS_PATH_MAX];
	bool found = false;
	char *slash;
	int fd;
	ssize_t n;

	fd = open(file, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n < 0) {
		errbuf_set(err, errlen, 0, "cgroup: reading %s: %s", file, strerror(errno));
		return -1;
	}
	buf[n] = '\0';
	/* "id:controllers:path" per line; v2 is "0::path". */
	for (char *line = buf; *line != '\0' && !found;) {
		size_t ll = strcspn(line, "\n");
		char *c1 = memchr(line, ':', ll), *c2 = NULL;

		if (c1 != NULL)
			c2 = memchr(c1 + 1, ':', ll - (size_t)(c1 + 1 - line));
		if (c2 != NULL) {
			size_t cl = (size_t)(c2 - c1 - 1), pl = ll - (size_t)(c2 + 1 - line);
			bool match = controller == NULL ?
			    (cl == 0 && c1 - line == 1 && line[0] == '0') :
			    list_has(c1 + 1, cl, controller);

			if (match) {
				if (!self_path_ok(c2 + 1, pl)) {
					errbuf_set(err, errlen, 0, "cgroup: %s names an unusable cgroup for %s",
					    file, controller ? controller : "the unified hierarchy");
					return -1;
				}
				memcpy(path, c2 + 1, pl);
				path[pl] = '\0';
				found = true;
			}
		}
		line += ll;
		if (*line == '\n')
			line++;
	}
	if (!found) {
		errbuf_set(err, errlen, 0, "cgroup: %s has no line for %s", file,
		    controller ? controller : "the unified hierarchy (0::)");
		return -1;
	}
	/* A supervisor that moved itself into its leaf nests beside it. */
	slash = strrchr(path, '/');
	if (strcmp(slash + 1, CG_SUPERVISOR_LEAF) == 0)
		*(slash == path ? slash + 1 : slash) = '\0';
	if (snprintf(out, EGRESS_PATH_MAX, "%s%s", hier, strcmp(path, "/") == 0 ? "" : path) >=
	    EGRESS_PATH_MAX) {
		errbuf_set(err, errlen, 0, "cgroup: path too long");
		return -1;
	}
	return 0;
}

bool
cgroup_run_id_valid(const char *run_id)
{
	return label_valid(run_id, CGROUP_RUN_ID_MAX);
}

/* ---- probing and creation ---- */

static const struct cg_backend *
backend_for(const char *root, struct cgroup_probe *pr)
{
	if (cg_backend_v2.probe(root, pr) == 0)
		return &cg_backend_v2;
	/* A machine with an empty cgroup2 mount and v1 controllers (hybrid) uses v1. */
	if (cg_backend_v1.probe(root, pr) == 0)
		return &cg_backend_v1;
	return NULL;
}

int
cgroup_probe(const char *root, struct cgroup_probe *out)
{
	return backend_for(root != NULL ? root : CGROUP_ROOT_DEFAULT, out) != NULL ? 0 : -1;
}

int
cgroup_nest_check(const char *root, char *out, size_t outlen, char *err, size_t errlen)
{
	struct cgroup_probe pr;
	const struct cg_backend *be;
	char hier[EGRESS_PATH_MAX], base[EGRESS_PATH_MAX];

	if (root == NULL)
		root = CGROUP_ROOT_DEFAULT;
	if ((be = backend_for(root, &pr)) == NULL) {
		errbuf_set(err, errlen, 0, "cgroup: %s", pr.detail);
		return -1;
	}
	if (be->ver == CGROUP_VERSION_2)
		snprintf(hier, sizeof(hier), "%s", root);
	else if (cg_path_join(hier, root, "memory") != 0) {
		errbuf_set(err, errlen, 0, "cgroup: path too long");
		return -1;
	}
	if (cg_self_base(hier, be->ver == CGROUP_VERSION_2 ? NULL : "memory", base, err,
	    errlen) != 0)
		return -1;
	snprintf(out, outlen, "%s", base);
	if (be->ver == CGROUP_VERSION_2 && cg_v2_nest_check(root, base, err, errlen) < 0)
		return -1;
	return 0;
}

static struct cgroup *
cg_alloc(const struct cg_backend *be, const char *run_id)
{
	struct cgroup *cg = calloc(1, sizeof(*cg));

	if (cg == NULL)
		return NULL;
	cg->be = be;
	cg->ver = be->ver;
	snprintf(cg->run_id, sizeof(cg->run_id), "%s", run_id);
	for (size_t i = 0; i < CG_V1_CTRLS; i++)
		cg->ctrl_dir[i] = -1;
	return cg;
}

static void
remove_created(struct cgroup *cg)
{
	for (size_t i = 0; i < cg->ndirs; i++) {
		if (!cg->created[i])
			continue;
		for (int t = 0; t < 10 && cg_rmdir(cg->dirs[i]) != 0 && errno == EBUSY; t++)
			cg_sleep_ms(10);
		cg->created[i] = false;
	}
}

struct cgroup *
cgroup_create(const char *root, const char *run_id, const struct cgroup_limits *limits,
    char *err, size_t errlen)
{
	struct cgroup_probe pr;
	const struct cg_backend *be;
	struct cgroup *cg;

	if (root == NULL)
		root = CGROUP_ROOT_DEFAULT;
	if (!cgroup_run_id_valid(run_id)) {
		errbuf_set(err, errlen, 0, "cgroup: invalid run id");
		return NULL;
	}
	if (limits == NULL || limits->cpu_millicores == 0 || limits->memory_bytes == 0 ||
	    limits->pids == 0) {
		errbuf_set(err, errlen, 0, "cgroup: every limit (cpu, memory, pids) must be set");
		return NULL;
	}
	/* The kernel refuses a CFS quota under 1 ms. */
	if ((uint64_t)limits->cpu_millicores * CGROUP_CPU_PERIOD_US / 1000u < 1000u) {
		errbuf_set(err, errlen, 0, "cgroup: cpu limit below 10 millicores");
		return NULL;
	}
	if (cg_page_round(limits->memory_bytes) == 0) {
		errbuf_set(err, errlen, 0, "cgroup: memory limit below one page");
		return NULL;
	}
	if ((be = backend_for(root, &pr)) == NULL) {
		errbuf_set(err, errlen, 0, "cgroup: %s", pr.detail);
		return NULL;
	}
	if ((cg = cg_alloc(be, run_id)) == NULL) {
		errbuf_set(err, errlen, 0, "cgroup: out of memory");
		return NULL;
	}
	if (be->layout(cg, root, run_id, err, errlen) != 0 ||
	    be->create(cg, root, limits, err, errlen) != 0) {
		remove_created(cg);
		free(cg);
		return NULL;
	}
	return cg;
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
	if (cg == NULL || (controller == NULL && cg->ver != CGROUP_VERSION_2))
		return NULL;
	return cg->be->dir(cg, controller);
}

/* ---- processes ---- */

/* Does dir/cgroup.procs list pid? -1 on read error. */
int
cg_procs_has(const char *dir, const char *file, pid_t pid)
{
	char buf[CG_FILE_MAX];

	if (cg_read(dir, file, buf, sizeof(buf)) != 0)
		return -1;
	for (char *p = buf; *p != '\0';) {
		uint64_t v;
		size_t n = strcspn(p, "\n");
		/* Only whole lines: a read cut at the buffer end must not yield a shorter pid. */
		if (p[n] == '\n' && n > 0 && cg_parse_u64(p, false, &v) == 0 && v == (uint64_t)pid)
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
		errbuf_set(err, errlen, 0, "cgroup: invalid pid");
		return -1;
	}
	/* "0" means the writing process to the kernel, whatever pid namespace it is in. */
	snprintf(s, sizeof(s), "%d\n", (int)pid);
	for (size_t i = 0; i < cg->ndirs; i++) {
		if (cg_write(cg->dirs[i], "cgroup.procs", s) != 0) {
			errbuf_set(err, errlen, 0, "cgroup: attaching pid %d to %s: %s", (int)who, cg->dirs[i],
			    strerror(errno));
			return -1;
		}
	}
	return cgroup_attach_check(cg, who, err, errlen);
}

int
cgroup_attach_self(const struct cgroup *cg, char *err, size_t errlen)
{
	/* v1: the calling thread alone, through tasks. For "0" on tasks the kernel takes no
	 * global threadgroup lock (cgroup_procs_write_start: a lone current thread cannot exit
	 * or exec under it), so the first attach of a run no longer waits for the RCU grace
	 * period that lock's first write-acquisition costs (4-22 ms measured here, on every
	 * run's critical path). The caller is single-threaded, so that thread is the whole
	 * process. v2 has no thread file in a domain group: cgroup.procs (the lock and its
	 * wait remain, now in the child while the supervisor goes on). */
	const char *file = cg->ver == CGROUP_VERSION_1 ? "tasks" : "cgroup.procs";

	for (size_t i = 0; i < cg->ndirs; i++)
		if (cg_write(cg->dirs[i], file, "0\n") != 0)
			return errbuf_set(err, errlen, errno, "cgroup: attaching itself to %s/%s",
			    cg->dirs[i], file);
	return 0;
}

int
cgroup_attach_check(struct cgroup *cg, pid_t pid, char *err, size_t errlen)
{
	pid_t who = pid;

	/* Read back: the pid must be listed in every hierarchy. */
	for (size_t i = 0; i < cg->ndirs; i++) {
		if (cg_procs_has(cg->dirs[i], "cgroup.procs", who) != 1) {
			errbuf_set(err, errlen, 0, "cgroup: pid %d is not listed in %s/cgroup.procs after "
			    "attaching", (int)who, cg->dirs[i]);
			return -1;
		}
	}
	return 0;
}

long
cgroup_sample(struct cgroup *cg)
{
	const char *d = cg->be->dir(cg, "pids");
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
unsigned
cg_kill_listed(const char *dir, const char *file)
{
	char buf[CG_FILE_MAX];
	unsigned n = 0;

	if (cg_read(dir, file, buf, sizeof(buf)) != 0)
		return 0;
	for (char *p = buf; *p != '\0';) {
		uint64_t v;
		size_t len = strcspn(p, "\n");
		/* Never pid 0/1 or ourselves: a corrupt read must not signal the wrong thing. */
		if (p[len] == '\n' && len > 0 && cg_parse_u64(p, false, &v) == 0 && v > 1 &&
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
		/* A task stuck in uninterruptible sleep can keep a group FREEZING for long:
		 * wait at most a quarter second per pass for the freeze, then kill what is
		 * listed anyway. */
		uint64_t freeze_by = mono_msec() + 250;
		cg->be->kill_pass(cg, freeze_by < deadline ? freeze_by : deadline);
		/* Give the kernel a moment to reap the killed tasks out of the group. */
		for (int i = 0; i < 10 && !cgroup_empty(cg); i++)
			cg_sleep_ms(5);
		if (cgroup_empty(cg))
			return 0;
		if (mono_msec() >= deadline) {
			errbuf_set(err, errlen, 0, "cgroup: %s still has processes after %u ms of killing",
			    cg->dirs[0], timeout_ms);
			return -1;
		}
	}
}

int
cgroup_usage_read(struct cgroup *cg, struct cgroup_usage *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	(void)cgroup_sample(cg);
	return cg->be->usage(cg, out, err, errlen);
}

/* ---- removal ---- */

static int
rmdir_bounded(const char *dir)
{
	for (int t = 0; t < CG_RMDIR_TRIES; t++) {
		if (cg_rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		/* EBUSY: tasks still leaving the group (exit in progress). */
		if (errno != EBUSY)
			return -1;
		cg_sleep_ms(10);
	}
	return -1;
}

/* The parent egress/ of a run's group, once empty: egress-exec's own directory, removed
 * with its last run (rmdir fails harmlessly while another run is in it). */
static void
rmdir_parent(const char *dir)
{
	char parent[EGRESS_PATH_MAX];
	char *slash;

	snprintf(parent, sizeof(parent), "%s", dir);
	slash = strrchr(parent, '/');
	if (slash == NULL)
		return;
	*slash = '\0';
	slash = strrchr(parent, '/');
	if (slash != NULL && strcmp(slash + 1, CGROUP_PARENT) == 0)
		(void)cg_rmdir(parent);
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
				errbuf_set(err, errlen, 0, "cgroup: rmdir %s: %s", cg->dirs[i],
				    strerror(errno));
			rc = -1;
			continue;
		}
		rmdir_parent(cg->dirs[i]);
	}
	free(cg);
	return rc;
}

/* ---- leftovers ---- */

/* One group directory of a stale run found by the walk. */
struct cg_found {
	char run_id[CGROUP_RUN_ID_MAX + 1];
	unsigned hier;                    /* index into the walk's hierarchy roots */
	char dir[EGRESS_PATH_MAX];
};

struct cg_walk {
	struct cg_found *found;
	size_t nfound, visited;
	unsigned hier;
};

/* Depth-first over one hierarchy (bounded in depth and directories): every egress/
 * directory's children with run-id names are recorded; egress/ itself is not descended. */
static void
walk(struct cg_walk *w, const char *dir, unsigned depth)
{
	DIR *d;
	struct dirent *de;
	const char *base = strrchr(dir, '/');
	bool is_parent = base != NULL && strcmp(base + 1, CGROUP_PARENT) == 0;

	if (depth > CG_WALK_DEPTH || w->visited >= CG_WALK_DIRS || (d = opendir(dir)) == NULL)
		return;
	w->visited++;
	while ((de = readdir(d)) != NULL) {
		char p[EGRESS_PATH_MAX];

		if (de->d_type != DT_DIR || de->d_name[0] == '.' ||
		    cg_path_join(p, dir, de->d_name) != 0)
			continue;
		if (!is_parent && strcmp(de->d_name, CG_SUPERVISOR_LEAF) == 0) {
			/* a v2 supervisor leaf: gone once its egress-exec is (rmdir fails while
			 * a process is in it) */
			(void)cg_rmdir(p);
			continue;
		}
		if (is_parent) {
			if (!cgroup_run_id_valid(de->d_name) ||
			    w->nfound >= CG_LEFTOVERS_MAX * CG_V1_CTRLS)
				continue;
			struct cg_found *f = &w->found[w->nfound++];
			/* cgroup_run_id_valid: at most CGROUP_RUN_ID_MAX bytes */
			memcpy(f->run_id, de->d_name, strlen(de->d_name) + 1);
			snprintf(f->dir, sizeof(f->dir), "%s", p);
			f->hier = w->hier;
		} else {
			walk(w, p, depth + 1);
		}
	}
	closedir(d);
}

int
cgroup_cleanup_leftovers(const char *root, bool (*is_live)(const char *run_id, void *arg),
    void *arg, unsigned *removed, char *err, size_t errlen)
{
	struct cgroup_probe pr;
	const struct cg_backend *be;
	struct cgroup *layout;
	struct cg_walk w = { 0 };
	unsigned done = 0;
	int rc = 0;

	if (removed != NULL)
		*removed = 0;
	if (root == NULL)
		root = CGROUP_ROOT_DEFAULT;
	if ((be = backend_for(root, &pr)) == NULL) {
		errbuf_set(err, errlen, 0, "cgroup: %s", pr.detail);
		return -1;
	}
	/* The hierarchies (and, v1, which controller lives in which) from the layout of a
	 * dummy run; the walk starts at each hierarchy's top, since a killed run may have
	 * nested anywhere (under whoever started it). */
	layout = cg_alloc(be, "x");
	w.found = calloc(CG_LEFTOVERS_MAX * CG_V1_CTRLS, sizeof(*w.found));
	if (layout == NULL || w.found == NULL) {
		free(layout);
		free(w.found);
		errbuf_set(err, errlen, 0, "cgroup: out of memory");
		return -1;
	}
	if (be->layout(layout, root, "x", err, errlen) != 0) {
		free(layout);
		free(w.found);
		return -1;
	}
	for (size_t i = 0; i < layout->ndirs; i++) {
		char top[EGRESS_PATH_MAX];

		if (be->ver == CGROUP_VERSION_2) {
			snprintf(top, sizeof(top), "%s", root);
		} else {
			/* the hierarchy of dirs[i]: the controller mounted there */
			size_t k;
			for (k = 0; k < CG_V1_CTRLS && layout->ctrl_dir[k] != (int)i; k++)
				;
			if (k == CG_V1_CTRLS || cg_path_join(top, root, cg_v1_names[k]) != 0)
				continue;
		}
		w.hier = (unsigned)i;
		w.visited = 0;
		walk(&w, top, 0);
	}
	for (size_t i = 0; i < w.nfound; i++) {
		struct cgroup *cg;
		char e[256] = "";
		bool seen = false;

		for (size_t j = 0; j < i && !seen; j++)
			seen = strcmp(w.found[j].run_id, w.found[i].run_id) == 0;
		if (seen || (is_live != NULL && is_live(w.found[i].run_id, arg)))
			continue;
		if ((cg = cg_alloc(be, w.found[i].run_id)) == NULL) {
			rc = -1;
			break;
		}
		/* Every directory of this run, in whichever hierarchy it was found. */
		for (size_t j = i; j < w.nfound && cg->ndirs < CG_V1_CTRLS; j++) {
			if (strcmp(w.found[j].run_id, w.found[i].run_id) != 0)
				continue;
			snprintf(cg->dirs[cg->ndirs], sizeof(cg->dirs[0]), "%s", w.found[j].dir);
			for (size_t k = 0; k < CG_V1_CTRLS; k++)
				if (layout->ctrl_dir[k] == (int)w.found[j].hier)
					cg->ctrl_dir[k] = (int)cg->ndirs;
			cg->ndirs++;
		}
		if (cgroup_destroy(cg, e, sizeof(e)) != 0) {
			if (rc == 0)
				errbuf_set(err, errlen, 0, "%s", e);
			rc = -1;
			continue;
		}
		done++;
	}
	free(layout);
	free(w.found);
	if (removed != NULL)
		*removed = done;
	return rc;
}
