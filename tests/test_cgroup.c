/*
 * test_cgroup - the run's cgroup.
 *
 * v2: always, against a fake cgroupfs root (a temp directory holding the files a v2 kernel
 * shows; a mkdir hook plays the kernel populating a new group, an rmdir hook removes the
 * fake files). v1: for real when running as root on a machine whose /sys/fs/cgroup is v1
 * (skipped otherwise): create, limits read back, attach a forked child, usage, OOM, pids
 * limit, kill of a setsid grandchild, destroy, cleanup of a leftover.
 */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "executor/cgroup.h"

/* Test hooks in executor/cgroup.c (TESTABLE). */
extern void (*cgroup_test_mkdir_hook)(const char *path);
extern int (*cgroup_test_rmdir)(const char *path);
extern const char *cgroup_test_self_file;

/* ---------- helpers ---------- */

static void
put(const char *dir, const char *file, const char *content)
{
	char p[8200];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	FILE *f = fopen(p, "we");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static char *
get(const char *dir, const char *file, char *buf, size_t len)
{
	char p[8200];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	FILE *f = fopen(p, "re");
	if (f == NULL)
		return NULL;
	size_t n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static bool
exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* ---------- v2 fake root ---------- */

static char fake_root[256];
static bool fake_no_swap_file;   /* simulate a kernel without memory.swap.max */
static bool fake_ignore_memory;  /* simulate memory.max not taking the write */
static bool fake_no_kill;        /* simulate a kernel without cgroup.kill (< 5.14) */

static void
fake_populate(const char *dir)
{
	put(dir, "cgroup.controllers", "cpu memory pids\n");
	put(dir, "cgroup.subtree_control", "");
	put(dir, "cgroup.procs", "");
	put(dir, "cgroup.freeze", "0\n");
	put(dir, "cgroup.events", "populated 0\nfrozen 0\n");
	if (!fake_no_kill)
		put(dir, "cgroup.kill", "");
	put(dir, "cpu.max", "max 100000\n");
	put(dir, "cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n");
	if (fake_ignore_memory) {
		char p[4200];
		snprintf(p, sizeof(p), "%s/memory.max", dir);
		assert_int_equal(symlink("/dev/null", p), 0);
	} else {
		put(dir, "memory.max", "max\n");
	}
	if (!fake_no_swap_file)
		put(dir, "memory.swap.max", "max\n");
	put(dir, "memory.peak", "0\n");
	put(dir, "memory.current", "0\n");
	put(dir, "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
	put(dir, "memory.oom.group", "0\n");
	put(dir, "pids.max", "max\n");
	put(dir, "pids.current", "0\n");
	put(dir, "pids.peak", "0\n");
}

static int
rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int
fake_rmdir(const char *path)
{
	/* A real cgroupfs lets rmdir succeed despite the control files, but not while the
	 * group has child groups; emulate both. */
	struct stat st;
	if (lstat(path, &st) != 0)
		return -1;
	DIR *d = opendir(path);
	struct dirent *de;
	bool sub = false;
	while (d != NULL && (de = readdir(d)) != NULL)
		sub = sub || (de->d_type == DT_DIR && de->d_name[0] != '.');
	if (d != NULL)
		closedir(d);
	if (sub) {
		errno = ENOTEMPTY;
		return -1;
	}
	return nftw(path, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

static int
rm_tree(const char *path)
{
	return nftw(path, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

/* The fake's /proc/self/cgroup. */
static char fake_self[300];

static void
fake_self_set(const char *text)
{
	FILE *f = fopen(fake_self, "we");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int
v2_setup(void **state)
{
	(void)state;
	snprintf(fake_root, sizeof(fake_root), "/tmp/egress-cgv2-%d-XXXXXX", (int)getpid());
	assert_non_null(mkdtemp(fake_root));
	put(fake_root, "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
	put(fake_root, "cgroup.subtree_control", "");
	put(fake_root, "cgroup.procs", "1\n");
	cgroup_test_mkdir_hook = fake_populate;
	cgroup_test_rmdir = fake_rmdir;
	fake_no_swap_file = fake_ignore_memory = fake_no_kill = false;
	/* "the caller" sits in the root cgroup unless a test says otherwise */
	snprintf(fake_self, sizeof(fake_self), "%s.self", fake_root);
	fake_self_set("0::/\n");
	cgroup_test_self_file = fake_self;
	return 0;
}

static int
v2_teardown(void **state)
{
	(void)state;
	rm_tree(fake_root);
	unlink(fake_self);
	cgroup_test_mkdir_hook = NULL;
	cgroup_test_rmdir = NULL;
	cgroup_test_self_file = NULL;
	return 0;
}

static const struct cgroup_limits LIM = {
	.cpu_millicores = 1500, .memory_bytes = 256u * 1024 * 1024 + 123, .pids = 64,
};

static void
test_run_id(void **state)
{
	(void)state;
	assert_true(cgroup_run_id_valid("run-1.abc_DEF"));
	assert_false(cgroup_run_id_valid(""));
	assert_false(cgroup_run_id_valid(NULL));
	assert_false(cgroup_run_id_valid("."));
	assert_false(cgroup_run_id_valid(".."));
	assert_false(cgroup_run_id_valid("a/b"));
	assert_false(cgroup_run_id_valid("a b"));
	assert_false(cgroup_run_id_valid("a\nb"));
	char longid[CGROUP_RUN_ID_MAX + 2];
	memset(longid, 'a', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	assert_false(cgroup_run_id_valid(longid));
	longid[CGROUP_RUN_ID_MAX] = '\0';
	assert_true(cgroup_run_id_valid(longid));
}

static void
test_v2_probe(void **state)
{
	(void)state;
	struct cgroup_probe pr;
	assert_int_equal(cgroup_probe(fake_root, &pr), 0);
	assert_int_equal(pr.version, CGROUP_VERSION_2);
	assert_true(pr.cpu && pr.memory && pr.pids && pr.kill);

	/* negative twin: a cgroup2 root without the controllers enabled (this machine's
	 * empty unified hierarchy) is not usable, and there is no v1 under it either */
	put(fake_root, "cgroup.controllers", "cpuset io\n");
	assert_int_equal(cgroup_probe(fake_root, &pr), -1);
	assert_int_equal(pr.version, CGROUP_VERSION_NONE);
	assert_non_null(strstr(pr.detail, "missing"));
	char err[256];
	assert_null(cgroup_create(fake_root, "r1", &LIM, err, sizeof(err)));
}

static void
test_v2_create_limits(void **state)
{
	(void)state;
	char err[512] = "", buf[256], dir[4096];
	struct cgroup *cg = cgroup_create(fake_root, "run-v2", &LIM, err, sizeof(err));
	if (cg == NULL)
		fail_msg("create: %s", err);
	assert_int_equal(cgroup_version(cg), CGROUP_VERSION_2);
	snprintf(dir, sizeof(dir), "%s/egress/run-v2", fake_root);
	assert_string_equal(cgroup_path(cg, NULL), dir);
	assert_string_equal(get(dir, "cpu.max", buf, sizeof(buf)), "150000 100000");
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t mem = LIM.memory_bytes - LIM.memory_bytes % (uint64_t)ps;
	char want[64];
	snprintf(want, sizeof(want), "%llu", (unsigned long long)mem);
	assert_string_equal(get(dir, "memory.max", buf, sizeof(buf)), want);
	assert_string_equal(get(dir, "memory.swap.max", buf, sizeof(buf)), "0");
	assert_string_equal(get(dir, "pids.max", buf, sizeof(buf)), "64");
	assert_string_equal(get(dir, "memory.oom.group", buf, sizeof(buf)), "1");
	const struct cgroup_applied *a = cgroup_applied(cg);
	assert_int_equal(a->cpu_quota_us, 150000);
	assert_int_equal(a->cpu_period_us, 100000);
	assert_int_equal(a->memory_bytes, mem);
	assert_true(a->swap_limited);
	assert_string_equal(a->swap_mechanism, "memory.swap.max");
	assert_int_equal(a->pids, 64);
	/* controllers were enabled for the children of root and of egress/ */
	assert_non_null(get(fake_root, "cgroup.subtree_control", buf, sizeof(buf)));
	assert_true(buf[0] == '+');
	json_t *j = cgroup_applied_json(cg);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "cgroup_version")), "v2");
	assert_int_equal(json_integer_value(json_object_get(j, "pids")), 64);
	json_decref(j);

	/* a second create of the same run id is a leftover: refused */
	assert_null(cgroup_create(fake_root, "run-v2", &LIM, err, sizeof(err)));
	assert_non_null(strstr(err, "already exists"));

	/* attach: the pid is written and read back */
	assert_int_equal(cgroup_attach(cg, 4242, err, sizeof(err)), 0);
	assert_string_equal(get(dir, "cgroup.procs", buf, sizeof(buf)), "4242\n");
	/* a fake kernel that does not list the pid afterwards: attach must fail */
	put(dir, "cgroup.procs", "");
	char procs[4200];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	assert_int_equal(unlink(procs), 0);
	assert_int_equal(symlink("/dev/null", procs), 0);
	assert_int_equal(cgroup_attach(cg, 4242, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not listed"));
	assert_int_equal(unlink(procs), 0);
	put(dir, "cgroup.procs", "4242\n");

	/* the sandbox's first process attaching itself: v2 writes "0" to cgroup.procs (the
	 * fake file keeps what was written); the supervisor's check reads the pid back */
	put(dir, "cgroup.procs", "");
	assert_int_equal(cgroup_attach_self(cg, err, sizeof(err)), 0);
	assert_string_equal(get(dir, "cgroup.procs", buf, sizeof(buf)), "0\n");
	/* negative twin: the pid is not listed, the check fails */
	assert_int_equal(cgroup_attach_check(cg, 4242, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not listed"));
	put(dir, "cgroup.procs", "4242\n");
	assert_int_equal(cgroup_attach_check(cg, 4242, err, sizeof(err)), 0);

	/* usage */
	put(dir, "cpu.stat", "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n");
	put(dir, "memory.peak", "99999744\n");
	put(dir, "memory.events", "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n");
	put(dir, "pids.peak", "7\n");
	put(dir, "pids.current", "3\n");
	struct cgroup_usage u;
	assert_int_equal(cgroup_usage_read(cg, &u, err, sizeof(err)), 0);
	assert_int_equal(u.cpu_usec, 1234567);
	assert_int_equal(u.peak_memory_bytes, 99999744);
	assert_int_equal(u.oom_kills, 2);
	assert_int_equal(u.peak_pids, 7);
	assert_false(u.peak_pids_sampled);
	/* without pids.peak: the sampled maximum */
	char p[4200];
	snprintf(p, sizeof(p), "%s/pids.peak", dir);
	assert_int_equal(unlink(p), 0);
	put(dir, "pids.current", "5\n");
	assert_int_equal(cgroup_sample(cg), 5);
	put(dir, "pids.current", "2\n");
	assert_int_equal(cgroup_usage_read(cg, &u, err, sizeof(err)), 0);
	assert_int_equal(u.peak_pids, 5);
	assert_true(u.peak_pids_sampled);

	/* kill: cgroup.kill is written; the fake never empties, so the wait is bounded */
	uint64_t t0 = (uint64_t)time(NULL);
	assert_int_equal(cgroup_kill(cg, 200, err, sizeof(err)), -1);
	assert_true((uint64_t)time(NULL) - t0 <= 2);
	assert_string_equal(get(dir, "cgroup.kill", buf, sizeof(buf)), "1");
	assert_false(cgroup_empty(cg));
	put(dir, "cgroup.procs", "");
	assert_true(cgroup_empty(cg));
	assert_int_equal(cgroup_kill(cg, 200, err, sizeof(err)), 0);

	/* destroy removes the group and, once empty, the egress/ parent it lived in */
	assert_int_equal(cgroup_destroy(cg, err, sizeof(err)), 0);
	assert_false(exists(dir));
	snprintf(p, sizeof(p), "%s/egress", fake_root);
	assert_false(exists(p));
}

/*
 * Issue: runs went to <root>/egress/<run> whatever cgroup egress-exec was started in, so a
 * limit on the caller's cgroup (a systemd slice, a CI job) stopped applying. Now the group
 * nests under the caller's own cgroup; on v2 egress-exec first moves itself into a leaf
 * (a cgroup with limited children may hold no process), after checking it is alone there.
 */
static void
test_v2_nested(void **state)
{
	(void)state;
	char err[512] = "", job[4096], p[4200], buf[256], want[4200];
	char pid[32];

	snprintf(p, sizeof(p), "%s/ci.slice", fake_root);
	assert_int_equal(mkdir(p, 0755), 0);
	fake_populate(p);
	snprintf(job, sizeof(job), "%s/ci.slice/job-7.scope", fake_root);
	assert_int_equal(mkdir(job, 0755), 0);
	fake_populate(job);
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	put(job, "cgroup.procs", pid);
	fake_self_set("0::/ci.slice/job-7.scope\n");

	/* doctor's question first: where would runs nest, could they; nothing is written */
	char base[4096];
	assert_int_equal(cgroup_nest_check(fake_root, base, sizeof(base), err, sizeof(err)), 0);
	assert_string_equal(base, job);
	snprintf(p, sizeof(p), "%s/egress-supervisor", job);
	assert_false(exists(p));

	struct cgroup *cg = cgroup_create(fake_root, "run-n1", &LIM, err, sizeof(err));
	if (cg == NULL)
		fail_msg("create: %s", err);
	snprintf(want, sizeof(want), "%s/egress/run-n1", job);
	assert_string_equal(cgroup_path(cg, NULL), want);
	assert_string_equal(get(want, "pids.max", buf, sizeof(buf)), "64");
	/* egress-exec moved itself into the supervisor leaf before enabling controllers */
	snprintf(p, sizeof(p), "%s/egress-supervisor", job);
	assert_string_equal(get(p, "cgroup.procs", buf, sizeof(buf)), pid);
	assert_non_null(get(job, "cgroup.subtree_control", buf, sizeof(buf)));
	assert_true(buf[0] == '+');
	/* nothing at the top: the negative twin of the old layout */
	snprintf(p, sizeof(p), "%s/egress", fake_root);
	assert_false(exists(p));

	/* a second run from inside the leaf nests beside it, not inside it */
	fake_self_set("12:pids:/elsewhere\n0::/ci.slice/job-7.scope/egress-supervisor\n");
	struct cgroup *cg2 = cgroup_create(fake_root, "run-n2", &LIM, err, sizeof(err));
	if (cg2 == NULL)
		fail_msg("create 2: %s", err);
	snprintf(want, sizeof(want), "%s/egress/run-n2", job);
	assert_string_equal(cgroup_path(cg2, NULL), want);

	/* destroy: the run groups, then the egress/ parent once the last one went */
	snprintf(p, sizeof(p), "%s/egress", job);
	assert_int_equal(cgroup_destroy(cg, err, sizeof(err)), 0);
	assert_true(exists(p));
	assert_int_equal(cgroup_destroy(cg2, err, sizeof(err)), 0);
	assert_false(exists(p));
}

static void
test_v2_nested_refused(void **state)
{
	(void)state;
	char err[512] = "", job[4096], p[4200];

	snprintf(job, sizeof(job), "%s/session-3.scope", fake_root);
	assert_int_equal(mkdir(job, 0755), 0);
	fake_populate(job);
	fake_self_set("0::/session-3.scope\n");
	/* other processes share the caller's cgroup (a login shell): never moved, refused */
	char procs[64];
	snprintf(procs, sizeof(procs), "1234\n%d\n", (int)getpid());
	put(job, "cgroup.procs", procs);
	char base[4096];
	assert_int_equal(cgroup_nest_check(fake_root, base, sizeof(base), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "other processes"));
	assert_null(cgroup_create(fake_root, "run-r1", &LIM, err, sizeof(err)));
	assert_non_null(strstr(err, "other processes"));
	assert_non_null(strstr(err, "Delegate=yes"));
	snprintf(p, sizeof(p), "%s/egress-supervisor", job);
	assert_false(exists(p));
	snprintf(p, sizeof(p), "%s/egress", fake_root);
	assert_false(exists(p));

	/* a cgroup that does not offer the controllers (not delegated): refused */
	char pid[32];
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	put(job, "cgroup.procs", pid);
	put(job, "cgroup.controllers", "cpu pids\n");
	assert_null(cgroup_create(fake_root, "run-r2", &LIM, err, sizeof(err)));
	assert_non_null(strstr(err, "memory"));
	assert_non_null(strstr(err, "delegated"));

	/* /proc/self/cgroup without a usable line: refused, never the top */
	fake_self_set("3:memory:/x\n");
	assert_null(cgroup_create(fake_root, "run-r3", &LIM, err, sizeof(err)));
	assert_non_null(strstr(err, "0::"));
	fake_self_set("0::/a/../b\n");
	assert_null(cgroup_create(fake_root, "run-r4", &LIM, err, sizeof(err)));
	fake_self_set("0::/gone (deleted)\n");
	assert_null(cgroup_create(fake_root, "run-r5", &LIM, err, sizeof(err)));
	snprintf(p, sizeof(p), "%s/egress", fake_root);
	assert_false(exists(p));
}

static void
test_v2_limit_not_taken(void **state)
{
	(void)state;
	char err[512] = "", dir[4096];
	/* memory.max swallows the write (a kernel that ignores it): create must fail and
	 * leave nothing behind. */
	fake_ignore_memory = true;
	assert_null(cgroup_create(fake_root, "run-bad", &LIM, err, sizeof(err)));
	assert_non_null(strstr(err, "memory.max"));
	snprintf(dir, sizeof(dir), "%s/egress/run-bad", fake_root);
	assert_false(exists(dir));
	fake_ignore_memory = false;

	/* zero / tiny limits are refused before anything is created */
	struct cgroup_limits l = LIM;
	l.pids = 0;
	assert_null(cgroup_create(fake_root, "run-z", &l, err, sizeof(err)));
	l = LIM;
	l.cpu_millicores = 5;
	assert_null(cgroup_create(fake_root, "run-z", &l, err, sizeof(err)));
	l = LIM;
	l.memory_bytes = 100;
	assert_null(cgroup_create(fake_root, "run-z", &l, err, sizeof(err)));
	assert_null(cgroup_create(fake_root, "../escape", &LIM, err, sizeof(err)));
	assert_null(cgroup_create(fake_root, "run-z", NULL, err, sizeof(err)));
	snprintf(dir, sizeof(dir), "%s/egress/run-z", fake_root);
	assert_false(exists(dir));
}

static bool
swap_is_active(void)
{
	char buf[4096];
	if (get("/proc", "swaps", buf, sizeof(buf)) == NULL)
		return true;
	char *nl = strchr(buf, '\n');
	return nl != NULL && nl[1] != '\0';
}

static void
test_v2_no_swap_file(void **state)
{
	(void)state;
	char err[512] = "";
	fake_no_swap_file = true;
	struct cgroup *cg = cgroup_create(fake_root, "run-ns", &LIM, err, sizeof(err));
	if (swap_is_active()) {
		/* swap on and no way to bound it: refused */
		assert_null(cg);
		assert_non_null(strstr(err, "swap"));
	} else {
		assert_non_null(cg);
		assert_string_equal(cgroup_applied(cg)->swap_mechanism, "no-swap-active");
		assert_int_equal(cgroup_destroy(cg, err, sizeof(err)), 0);
	}
}

static void
test_v2_kill_fallback(void **state)
{
	(void)state;
	char err[512] = "", buf[64], pidbuf[32];
	/* No cgroup.kill (kernel < 5.14): freeze, SIGKILL each listed pid, thaw. A real child
	 * stands in for the group's process. */
	fake_no_kill = true;
	struct cgroup *cg = cgroup_create(fake_root, "run-fb", &LIM, err, sizeof(err));
	assert_non_null(cg);
	const char *dir = cgroup_path(cg, NULL);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		for (int i = 0; i < 600; i++)
			sleep(1);
		_exit(0);
	}
	/* an unterminated last entry (a read cut short) is never taken for a pid */
	snprintf(pidbuf, sizeof(pidbuf), "%d\n1", (int)child);
	put(dir, "cgroup.procs", pidbuf);
	put(dir, "cgroup.events", "populated 1\nfrozen 1\n");
	int st = 0;
	assert_int_equal(cgroup_kill(cg, 200, err, sizeof(err)), -1); /* fake list never empties */
	assert_int_equal(waitpid(child, &st, 0), child);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGKILL);
	assert_string_equal(get(dir, "cgroup.freeze", buf, sizeof(buf)), "0"); /* thawed */
	put(dir, "cgroup.procs", "");
	assert_int_equal(cgroup_destroy(cg, err, sizeof(err)), 0);
}

static bool
live_only_b(const char *run_id, void *arg)
{
	(*(int *)arg)++;
	return strcmp(run_id, "run-b") == 0;
}

static void
test_v2_cleanup_leftovers(void **state)
{
	(void)state;
	char err[512] = "", p[4096];
	struct cgroup *a = cgroup_create(fake_root, "run-a", &LIM, err, sizeof(err));
	struct cgroup *b = cgroup_create(fake_root, "run-b", &LIM, err, sizeof(err));
	assert_non_null(a);
	assert_non_null(b);
	/* a stray non-run entry is ignored */
	snprintf(p, sizeof(p), "%s/egress/not a run", fake_root);
	assert_int_equal(mkdir(p, 0755), 0);
	unsigned removed = 99;
	int calls = 0;
	assert_int_equal(cgroup_cleanup_leftovers(fake_root, live_only_b, &calls, &removed, err,
	    sizeof(err)), 0);
	assert_int_equal(removed, 1);
	assert_int_equal(calls, 2);
	snprintf(p, sizeof(p), "%s/egress/run-a", fake_root);
	assert_false(exists(p));
	snprintf(p, sizeof(p), "%s/egress/run-b", fake_root);
	assert_true(exists(p));
	/* a killed run nested deep under someone's cgroup is found too, and its emptied
	 * egress/ parent goes with it */
	char deep[4096];
	snprintf(deep, sizeof(deep), "%s/user.slice", fake_root);
	assert_int_equal(mkdir(deep, 0755), 0);
	snprintf(deep, sizeof(deep), "%s/user.slice/egress", fake_root);
	assert_int_equal(mkdir(deep, 0755), 0);
	snprintf(deep, sizeof(deep), "%s/user.slice/egress/run-c", fake_root);
	assert_int_equal(mkdir(deep, 0755), 0);
	fake_populate(deep);
	calls = 0;
	assert_int_equal(cgroup_cleanup_leftovers(fake_root, live_only_b, &calls, &removed, err,
	    sizeof(err)), 0);
	assert_int_equal(removed, 1);
	assert_false(exists(deep));
	snprintf(deep, sizeof(deep), "%s/user.slice/egress", fake_root);
	assert_false(exists(deep));
	/* an emptied v2 supervisor leaf goes too */
	snprintf(deep, sizeof(deep), "%s/user.slice/egress-supervisor", fake_root);
	assert_int_equal(mkdir(deep, 0755), 0);
	fake_populate(deep);
	assert_int_equal(cgroup_cleanup_leftovers(fake_root, live_only_b, &calls, &removed, err,
	    sizeof(err)), 0);
	assert_false(exists(deep));
	/* the handles: a's directory is already gone (destroy treats that as done) */
	assert_int_equal(cgroup_destroy(a, err, sizeof(err)), 0);
	assert_int_equal(cgroup_destroy(b, err, sizeof(err)), 0);
	assert_int_equal(cgroup_destroy(NULL, err, sizeof(err)), 0);
}

/* ---------- v1, for real ---------- */

static bool
v1_available(void)
{
	struct cgroup_probe pr;
	return geteuid() == 0 && cgroup_probe(NULL, &pr) == 0 && pr.version == CGROUP_VERSION_1;
}

static char run_id[64];

static void
make_run_id(const char *tag)
{
	/* "egx-probe-<pid>-..." is what `egress-exec cleanup` treats as live while <pid>
	 * runs: a concurrent cleanup never takes this test's groups away. */
	snprintf(run_id, sizeof(run_id), "egx-probe-%d-t%s", (int)getpid(), tag);
}

/* A fresh group for this test's run_id (make_run_id(tag)) with small limits (200
 * millicores, 32 MiB, 8 pids); the test fails when it cannot be made. */
static struct cgroup *
small_group(const char *tag)
{
	char err[512] = "";
	struct cgroup_limits lim = { .cpu_millicores = 200, .memory_bytes = 32u << 20, .pids = 8 };
	struct cgroup *cg;

	make_run_id(tag);
	cg = cgroup_create(NULL, run_id, &lim, err, sizeof(err));
	if (cg == NULL)
		fail_msg("create: %s", err);
	return cg;
}

/* A child that waits for "go" on a pipe (so it is attached before doing anything). */
static pid_t
spawn_waiting(int (*body)(void), int *gofd)
{
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(100);
		_exit(body());
	}
	close(p[0]);
	*gofd = p[1];
	return pid;
}

static void
go(int fd)
{
	assert_int_equal(write(fd, "g", 1), 1);
	close(fd);
}

static int
body_spin_and_daemon(void)
{
	/* a setsid grandchild that outlives its parent: the kill must still get it */
	pid_t g = fork();
	if (g == 0) {
		setsid();
		for (int i = 0; i < 600; i++)
			sleep(1);
		_exit(0);
	}
	/* touch 16 MiB and burn ~300 ms of CPU */
	size_t sz = 16u << 20;
	char *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	memset(m, 1, sz);
	struct timespec t0, t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	volatile unsigned long x = 0;
	do {
		for (int i = 0; i < 100000; i++)
			x += (unsigned long)i;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 300);
	if (x == 0)
		return 2;
	for (int i = 0; i < 600; i++)
		sleep(1);
	return 0;
}

static void
test_v1_real_lifecycle(void **state)
{
	(void)state;
	if (!v1_available())
		skip();
	char err[512] = "", buf[256];
	struct cgroup_limits lim = { .cpu_millicores = 500, .memory_bytes = 64u << 20, .pids = 32 };
	make_run_id("life");
	struct cgroup *cg = cgroup_create(NULL, run_id, &lim, err, sizeof(err));
	if (cg == NULL)
		fail_msg("create: %s", err);
	assert_int_equal(cgroup_version(cg), CGROUP_VERSION_1);
	/* limits read back by hand, independent of the module's own check */
	const char *mem = cgroup_path(cg, "memory"), *cpu = cgroup_path(cg, "cpu");
	const char *pids = cgroup_path(cg, "pids"), *frz = cgroup_path(cg, "freezer");
	assert_non_null(mem);
	assert_non_null(cpu);
	assert_non_null(pids);
	assert_non_null(frz);
	assert_non_null(cgroup_path(cg, "cpuacct"));
	assert_string_equal(get(mem, "memory.limit_in_bytes", buf, sizeof(buf)), "67108864\n");
	if (exists("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")) {
		assert_string_equal(get(mem, "memory.memsw.limit_in_bytes", buf, sizeof(buf)),
		    "67108864\n");
		assert_string_equal(cgroup_applied(cg)->swap_mechanism, "memory.memsw");
	}
	assert_string_equal(get(cpu, "cpu.cfs_quota_us", buf, sizeof(buf)), "50000\n");
	assert_string_equal(get(cpu, "cpu.cfs_period_us", buf, sizeof(buf)), "100000\n");
	assert_string_equal(get(pids, "pids.max", buf, sizeof(buf)), "32\n");
	assert_true(cgroup_empty(cg));

	int gofd;
	pid_t child = spawn_waiting(body_spin_and_daemon, &gofd);
	assert_int_equal(cgroup_attach(cg, child, err, sizeof(err)), 0);
	go(gofd);
	/* let it work: wait until CPU time has accumulated (bounded) */
	struct cgroup_usage u = { 0 };
	for (int i = 0; i < 300; i++) {
		cgroup_sample(cg);
		assert_int_equal(cgroup_usage_read(cg, &u, err, sizeof(err)), 0);
		if (u.cpu_usec >= 250000 && u.peak_pids >= 2)
			break;
		usleep(10000);
	}
	assert_true(u.cpu_usec >= 250000);
	assert_true(u.peak_memory_bytes >= (16u << 20));
	assert_true(u.peak_pids >= 2);
	assert_int_equal(u.oom_kills, 0);
	assert_false(cgroup_empty(cg));

	assert_int_equal(cgroup_kill(cg, 0, err, sizeof(err)), 0);
	int st = 0;
	assert_int_equal(waitpid(child, &st, 0), child);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGKILL);
	assert_true(cgroup_empty(cg));
	/* the freezer is left thawed (a frozen empty group would still rmdir, but a thawed
	 * one is the documented end state) */
	assert_non_null(get(frz, "freezer.state", buf, sizeof(buf)));
	assert_string_equal(buf, "THAWED\n");

	char memdir[4096];
	snprintf(memdir, sizeof(memdir), "%s", mem);
	assert_int_equal(cgroup_destroy(cg, err, sizeof(err)), 0);
	assert_false(exists(memdir));
}

static int
body_balloon(void)
{
	/* 4x the limit, touched page by page: no swap, so the OOM killer must end it */
	size_t sz = 128u << 20;
	char *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < sz; i += 4096)
		m[i] = 1;
	return 0; /* reaching here means the limit did not hold */
}

static void
test_v1_real_oom(void **state)
{
	(void)state;
	if (!v1_available())
		skip();
	char err[512] = "";
	struct cgroup_limits lim = { .cpu_millicores = 1000, .memory_bytes = 32u << 20, .pids = 16 };
	make_run_id("oom");
	struct cgroup *cg = cgroup_create(NULL, run_id, &lim, err, sizeof(err));
	if (cg == NULL)
		fail_msg("create: %s", err);
	int gofd, st = 0;
	pid_t child = spawn_waiting(body_balloon, &gofd);
	assert_int_equal(cgroup_attach(cg, child, err, sizeof(err)), 0);
	go(gofd);
	/* bounded: the balloon dies within seconds or the kill at the end ends it */
	for (int i = 0; i < 1000; i++) {
		if (waitpid(child, &st, WNOHANG) == child)
			break;
		usleep(10000);
	}
	if (!WIFSIGNALED(st) && !WIFEXITED(st)) {
		cgroup_kill(cg, 0, err, sizeof(err));
		waitpid(child, &st, 0);
		fail_msg("balloon not OOM-killed within 10 s");
	}
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGKILL);
	struct cgroup_usage u;
	assert_int_equal(cgroup_usage_read(cg, &u, err, sizeof(err)), 0);
	assert_true(u.oom_kills >= 1);
	assert_true(u.peak_memory_bytes <= (32u << 20));
	assert_int_equal(cgroup_destroy(cg, err, sizeof(err)), 0);
}

static int
body_forkbomb(void)
{
	/* try 40 children under a pids limit of 8: fork must start failing */
	pid_t kids[40];
	int made = 0, refused = 0;
	for (int i = 0; i < 40; i++) {
		pid_t k = fork();
		if (k == 0) {
			pause();
			_exit(0);
		}
		if (k < 0) {
			if (errno == EAGAIN)
				refused++;
			continue;
		}
		kids[made++] = k;
	}
	for (int i = 0; i < made; i++)
		kill(kids[i], SIGKILL);
	/* the child itself counts as one: at most 7 more */
	return (made <= 7 && refused >= 33) ? 0 : 1;
}

static void
test_v1_real_pids_limit(void **state)
{
	(void)state;
	if (!v1_available())
		skip();
	char err[512] = "";
	struct cgroup_limits lim = { .cpu_millicores = 1000, .memory_bytes = 64u << 20, .pids = 8 };
	make_run_id("pids");
	struct cgroup *cg = cgroup_create(NULL, run_id, &lim, err, sizeof(err));
	if (cg == NULL)
		fail_msg("create: %s", err);
	int gofd, st = 0;
	pid_t child = spawn_waiting(body_forkbomb, &gofd);
	assert_int_equal(cgroup_attach(cg, child, err, sizeof(err)), 0);
	go(gofd);
	for (int i = 0; i < 1000 && waitpid(child, &st, WNOHANG) != child; i++)
		usleep(10000);
	assert_int_equal(cgroup_kill(cg, 0, err, sizeof(err)), 0);
	if (!WIFEXITED(st) && !WIFSIGNALED(st))
		waitpid(child, &st, 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	struct cgroup_usage u;
	assert_int_equal(cgroup_usage_read(cg, &u, err, sizeof(err)), 0);
	assert_true(u.peak_pids <= 8);
	assert_true(u.peak_pids >= 2);
	assert_int_equal(cgroup_destroy(cg, err, sizeof(err)), 0);
}

static bool
live_except_mine(const char *id, void *arg)
{
	/* Other runs on this machine (other engineers' tests) are live: never touch them. */
	return strcmp(id, (const char *)arg) != 0;
}

static void
test_v1_real_cleanup_leftover(void **state)
{
	(void)state;
	if (!v1_available())
		skip();
	char err[512] = "", memdir[4096];
	struct cgroup *cg = small_group("left");
	snprintf(memdir, sizeof(memdir), "%s", cgroup_path(cg, "memory"));
	int gofd, st = 0;
	pid_t child = spawn_waiting(body_spin_and_daemon, &gofd);
	assert_int_equal(cgroup_attach(cg, child, err, sizeof(err)), 0);
	go(gofd);
	usleep(50000);
	/* "egress-exec was killed": the group and its processes are left; cleanup finds them */
	unsigned removed = 0;
	assert_int_equal(cgroup_cleanup_leftovers(NULL, live_except_mine, run_id, &removed, err,
	    sizeof(err)), 0);
	assert_int_equal(removed, 1);
	assert_false(exists(memdir));
	assert_int_equal(waitpid(child, &st, 0), child);
	assert_true(WIFSIGNALED(st));
	/* the stale handle: everything is already gone */
	assert_int_equal(cgroup_destroy(cg, err, sizeof(err)), 0);
}

/* A child that attaches itself to cg (cgroup_attach with pid 0, or cgroup_attach_self),
 * reports whether that worked, then waits to be killed. */
static pid_t
fork_self_attached(struct cgroup *cg, bool through_tasks)
{
	int p[2];
	char r = 0;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		char e[256];
		close(p[0]);
		r = (through_tasks ? cgroup_attach_self(cg, e, sizeof(e)) :
		    cgroup_attach(cg, 0, e, sizeof(e))) == 0 ? 'y' : 'n';
		if (write(p[1], &r, 1) != 1)
			_exit(1);
		for (int i = 0; i < 600; i++)
			sleep(1);
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &r, 1), 1);
	close(p[0]);
	assert_int_equal(r, 'y');
	return child;
}

/* Destroying cg kills the attached child, then removes the group. */
static void
destroy_reaps(struct cgroup *cg, pid_t child)
{
	char err[512] = "";
	int st = 0;

	assert_int_equal(cgroup_destroy(cg, err, sizeof(err)), 0); /* kills, then removes */
	assert_int_equal(waitpid(child, &st, 0), child);
	assert_true(WIFSIGNALED(st));
}

static void
test_v1_real_self_attach(void **state)
{
	(void)state;
	if (!v1_available())
		skip();
	struct cgroup *cg = small_group("self");
	/* the child attaches itself (pid 0) and checks it is listed, then waits to be killed */
	pid_t child = fork_self_attached(cg, false);
	assert_false(cgroup_empty(cg));
	destroy_reaps(cg, child);
}

/* The sandbox's way in on v1 (executor/sandbox_child.c): the child moves its own thread
 * through `tasks`; the parent's check finds its pid in cgroup.procs of every hierarchy,
 * and a pid that did not attach is not found. */
static void
test_v1_real_attach_self_tasks(void **state)
{
	(void)state;
	if (!v1_available())
		skip();
	char err[512] = "";
	struct cgroup *cg = small_group("selft");
	pid_t child = fork_self_attached(cg, true);
	assert_int_equal(cgroup_attach_check(cg, child, err, sizeof(err)), 0);
	/* negative twin: this process never attached */
	assert_int_equal(cgroup_attach_check(cg, getpid(), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not listed"));
	destroy_reaps(cg, child);
}

/* The caller's memory cgroup path from /proc/self/cgroup ("/" at the top). */
static void
self_memory_path(char *out, size_t len)
{
	char buf[8192];
	FILE *f = fopen("/proc/self/cgroup", "re");
	assert_non_null(f);
	out[0] = '\0';
	while (fgets(buf, sizeof(buf), f) != NULL) {
		char *c1 = strchr(buf, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2 == NULL)
			continue;
		*c2 = '\0';
		buf[strcspn(c2 + 1, "\n") + (size_t)(c2 + 1 - buf)] = '\0';
		for (char *t = strtok(c1 + 1, ","); t != NULL; t = strtok(NULL, ","))
			if (strcmp(t, "memory") == 0)
				snprintf(out, len, "%s", c2 + 1);
	}
	fclose(f);
	assert_true(out[0] == '/');
}

/* In the child of test_v1_real_nested: it is in the outer group; returns an exit code. */
static int
nested_child(const char *outer)
{
	char err[512] = "", want[8400], memdir[4096], egress[8400];
	struct cgroup_limits lim = { .cpu_millicores = 1000, .memory_bytes = 256u << 20, .pids = 32 };
	struct cgroup *cg = cgroup_create(NULL, run_id, &lim, err, sizeof(err));
	int st = 0;

	if (cg == NULL) {
		fprintf(stderr, "create: %s\n", err);
		return 2;
	}
	snprintf(want, sizeof(want), "%s/egress/%s", outer, run_id);
	snprintf(memdir, sizeof(memdir), "%s", cgroup_path(cg, "memory"));
	if (strcmp(memdir, want) != 0) {
		fprintf(stderr, "memory group %s, want %s\n", memdir, want);
		cgroup_destroy(cg, err, sizeof(err));
		return 3;
	}
	/* 128 MiB under a 256 MiB run limit, inside a 48 MiB outer limit: the outer wins */
	pid_t b = fork();
	if (b == 0) {
		usleep(100000);
		_exit(body_balloon() == 0 ? 0 : 1);
	}
	if (b < 0 || cgroup_attach(cg, b, err, sizeof(err)) != 0) {
		fprintf(stderr, "attach: %s\n", err);
		return 4;
	}
	for (int i = 0; i < 1000 && waitpid(b, &st, WNOHANG) != b; i++)
		usleep(10000);
	bool oom = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
	if (cgroup_destroy(cg, err, sizeof(err)) != 0) {
		fprintf(stderr, "destroy: %s\n", err);
		return 5;
	}
	if (!oom) {
		fprintf(stderr, "the balloon was not stopped by the outer limit (status %#x)\n", st);
		return 6;
	}
	snprintf(egress, sizeof(egress), "%s/egress", outer);
	if (exists(egress)) {
		fprintf(stderr, "%s left behind\n", egress);
		return 7;
	}
	return 0;
}

/*
 * Issue: egress-exec put its groups at /sys/fs/cgroup/<ctrl>/egress/<run>, outside the
 * caller's cgroup, so an outer limit (a CI job's memory cgroup) stopped applying, and the
 * egress/ parents were never removed. For real on v1: an outer memory group of 48 MiB
 * under this test's own; a child in it creates a run group with a 256 MiB limit, which
 * must nest under the outer one, and a 128 MiB balloon in it must be OOM-killed.
 */
static void
test_v1_real_nested(void **state)
{
	(void)state;
	if (!v1_available())
		skip();
	char self[4096], outer[8300], pidline[32];
	int st = 0;

	self_memory_path(self, sizeof(self));
	/* where doctor says runs of this process nest: our own memory cgroup */
	char base[4096], err[512], want[8300];
	snprintf(want, sizeof(want), "/sys/fs/cgroup/memory%s", strcmp(self, "/") == 0 ? "" : self);
	assert_int_equal(cgroup_nest_check(NULL, base, sizeof(base), err, sizeof(err)), 0);
	assert_string_equal(base, want);
	snprintf(outer, sizeof(outer), "/sys/fs/cgroup/memory%s/egx-outer-%d",
	    strcmp(self, "/") == 0 ? "" : self, (int)getpid());
	assert_int_equal(mkdir(outer, 0755), 0);
	put(outer, "memory.limit_in_bytes", "50331648");
	if (exists("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"))
		put(outer, "memory.memsw.limit_in_bytes", "50331648");
	make_run_id("nest");
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		snprintf(pidline, sizeof(pidline), "%d\n", (int)getpid());
		char p[8400];
		snprintf(p, sizeof(p), "%s/cgroup.procs", outer);
		FILE *f = fopen(p, "we");
		if (f == NULL || fputs(pidline, f) < 0 || fclose(f) != 0)
			_exit(1);
		_exit(nested_child(outer));
	}
	assert_int_equal(waitpid(c, &st, 0), c);
	/* the child has exited: the outer group is empty and can go */
	for (int i = 0; i < 100 && rmdir(outer) != 0 && errno == EBUSY; i++)
		usleep(10000);
	assert_false(exists(outer));
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_run_id),
		cmocka_unit_test_setup_teardown(test_v2_probe, v2_setup, v2_teardown),
		cmocka_unit_test_setup_teardown(test_v2_create_limits, v2_setup, v2_teardown),
		cmocka_unit_test_setup_teardown(test_v2_nested, v2_setup, v2_teardown),
		cmocka_unit_test_setup_teardown(test_v2_nested_refused, v2_setup, v2_teardown),
		cmocka_unit_test_setup_teardown(test_v2_limit_not_taken, v2_setup, v2_teardown),
		cmocka_unit_test_setup_teardown(test_v2_no_swap_file, v2_setup, v2_teardown),
		cmocka_unit_test_setup_teardown(test_v2_kill_fallback, v2_setup, v2_teardown),
		cmocka_unit_test_setup_teardown(test_v2_cleanup_leftovers, v2_setup, v2_teardown),
		cmocka_unit_test(test_v1_real_lifecycle),
		cmocka_unit_test(test_v1_real_oom),
		cmocka_unit_test(test_v1_real_pids_limit),
		cmocka_unit_test(test_v1_real_cleanup_leftover),
		cmocka_unit_test(test_v1_real_self_attach),
		cmocka_unit_test(test_v1_real_attach_self_tasks),
		cmocka_unit_test(test_v1_real_nested),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
