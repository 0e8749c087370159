/*
 * collector - the unprivileged child that reads what the worker produced. See collector.h
 * for the steps and the identity; docs/SECURITY.md ("egress-exec") for the split, and
 * docs/seccomp.md for the filter table below.
 */
#define _GNU_SOURCE 1
#include "executor/collector.h"

#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <linux/openat2.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cryptolib.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/scfilter.h"
#include "common/util.h"
#include "executor/sandbox.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* The one capability the collector keeps, and why: see collector.h. */
#define COLLECTOR_KEPT_CAP CAP_DAC_OVERRIDE

/* Setup steps; the child exits with COLLECTOR_SETUP_EXIT_BASE + step on failure. */
enum cstep {
	CS_PROCESS = 1,   /* pdeathsig, fds, stdin */
	CS_NAMESPACES,    /* unshare NEWNS|NEWNET|NEWIPC, rprivate */
	CS_MOUNTS,        /* root tmpfs, binds */
	CS_PIVOT,         /* pivot_root, old root detached, / read-only */
	CS_DROP,          /* ids and capabilities */
	CS_SECCOMP,       /* the filter */
	CS_VERIFY,        /* read-backs */
	CS__COUNT
};

static const char *const cstep_names[CS__COUNT] = {
	[CS_PROCESS] = "process (parent-death signal, descriptors)",
	[CS_NAMESPACES] = "namespaces (mount, network, IPC)",
	[CS_MOUNTS] = "mounts (root tmpfs, read-only binds, output folder)",
	[CS_PIVOT] = "pivot_root",
	[CS_DROP] = "privilege drop (uid/gid, capabilities)",
	[CS_SECCOMP] = "seccomp filter",
	[CS_VERIFY] = "read-back of uid, capabilities, no_new_privs, seccomp",
};

static int collector_status_fd = -1;
static bool collector_in_child;

bool
collector_active(void)
{
	return collector_in_child;
}

int
collector_status(char *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	if (collector_status_fd < 0 || len == 0)
		return -1;
	while (got < len - 1 &&
	    (n = pread(collector_status_fd, buf + got, len - 1 - got, (off_t)got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	return got > 0 ? 0 : -1;
}

/* ------------------------------------------------------------------ the filter */

enum crule { CR_ALWAYS, CR_NOT_SELF, CR_CLONE, CR_IOCTL_TTY, CR_DUMPABLE, CR_A0_NOT_ZERO,
	CR_A1_NOT_ZERO, CR_MODE_A1, CR_MODE_A2, CR_MODE_A3 };

struct cfilter_entry {
	const char *syscall;
	enum crule kind;
	int err;
	const char *why;   /* repeated in docs/seccomp.md */
};

#define CA(n, why) { n, CR_ALWAYS, EPERM, why }

/* Default allow; these fail. The collector only reads files and writes a few into the
 * output folder: anything that starts programs, talks to the network, touches other
 * processes, changes its file system view or identity, or reaches rarely needed kernel
 * surface is refused. */
static const struct cfilter_entry CFILTER[] = {
	CA("execve", "the collector runs no program: a hostile file can never become code"),
	CA("execveat", "the collector runs no program"),
	CA("fork", "no new processes"),
	CA("vfork", "no new processes"),
	{ "clone", CR_CLONE, EPERM, "no new processes (a clone without CLONE_THREAD) and no namespaces" },
	{ "clone3", CR_ALWAYS, ENOSYS, "flags in memory cannot be inspected; ENOSYS makes libc use clone" },
	CA("socket", "no sockets at all: the collector has no network and needs none"),
	CA("socketpair", "no sockets at all"),
	{ "kill", CR_NOT_SELF, EPERM, "signals only to itself (abort)" },
	{ "tkill", CR_NOT_SELF, EPERM, "signals only to itself" },
	{ "tgkill", CR_NOT_SELF, EPERM, "signals only to itself" },
	{ "rt_sigqueueinfo", CR_NOT_SELF, EPERM, "signals only to itself" },
	{ "rt_tgsigqueueinfo", CR_NOT_SELF, EPERM, "signals only to itself" },
	{ "prlimit64", CR_A0_NOT_ZERO, EPERM, "limits only of itself (pid 0): no hold over another run's collector (same uid)" },
	{ "sched_setaffinity", CR_A0_NOT_ZERO, EPERM, "scheduling only of itself" },
	{ "sched_setscheduler", CR_A0_NOT_ZERO, EPERM, "scheduling only of itself" },
	{ "sched_setparam", CR_A0_NOT_ZERO, EPERM, "scheduling only of itself" },
	{ "sched_setattr", CR_A0_NOT_ZERO, EPERM, "scheduling only of itself" },
	{ "setpriority", CR_A1_NOT_ZERO, EPERM, "priority only of itself (who 0)" },
	CA("ioprio_set", "no hold over other processes' I/O"),
	CA("process_madvise", "no hold over other processes' memory"),
	CA("pidfd_open", "no handles on other processes"),
	CA("pidfd_send_signal", "no signals to other processes"),
	CA("pidfd_getfd", "no descriptors from other processes"),
	CA("ptrace", "no tracing of other processes"),
	CA("process_vm_readv", "no access to other processes' memory"),
	CA("process_vm_writev", "no access to other processes' memory"),
	CA("kcmp", "no comparisons of other processes' kernel objects"),
	CA("mount", "the root is fixed"),
	CA("umount2", "unmounting could reveal what a bind covers"),
	CA("pivot_root", "the root is fixed"),
	CA("chroot", "the root is fixed"),
	CA("open_tree", "new mount API"),
	CA("move_mount", "new mount API"),
	CA("fsopen", "new mount API"),
	CA("fsconfig", "new mount API"),
	CA("fsmount", "new mount API"),
	CA("fspick", "new mount API"),
	CA("mount_setattr", "new mount API: could clear read-only"),
	CA("unshare", "no new namespaces"),
	CA("setns", "no other namespaces"),
	CA("open_by_handle_at", "opens files by handle past the mount view (shocker); also needs CAP_DAC_READ_SEARCH, which is not kept"),
	CA("name_to_handle_at", "produces handles for open_by_handle_at"),
	CA("link", "no hard links: nothing but the collector's own files in the output folder"),
	CA("linkat", "no hard links"),
	CA("symlink", "no symlinks planted in the output folder"),
	CA("symlinkat", "no symlinks planted in the output folder"),
	{ "chmod", CR_MODE_A1, EPERM, "no set-user-ID or set-group-ID file in the output folder (nosuid only inside the collector)" },
	{ "fchmod", CR_MODE_A1, EPERM, "no set-user-ID or set-group-ID file" },
	{ "fchmodat", CR_MODE_A2, EPERM, "no set-user-ID or set-group-ID file" },
	{ "fchmodat2", CR_MODE_A2, EPERM, "no set-user-ID or set-group-ID file" },
	{ "creat", CR_MODE_A1, EPERM, "no set-user-ID or set-group-ID file" },
	{ "open", CR_MODE_A2, EPERM, "no file created set-user-ID or set-group-ID" },
	{ "openat", CR_MODE_A3, EPERM, "no file created set-user-ID or set-group-ID" },
	CA("mknod", "no device nodes or FIFOs"),
	CA("mknodat", "no device nodes or FIFOs"),
	CA("setuid", "the identity is fixed"),
	CA("setgid", "the identity is fixed"),
	CA("setreuid", "the identity is fixed"),
	CA("setregid", "the identity is fixed"),
	CA("setresuid", "the identity is fixed"),
	CA("setresgid", "the identity is fixed"),
	CA("setgroups", "the identity is fixed"),
	CA("setfsuid", "the identity is fixed"),
	CA("setfsgid", "the identity is fixed"),
	CA("capset", "the capability sets are fixed"),
	{ "prctl", CR_DUMPABLE, EPERM, "PR_SET_DUMPABLE stays 0 (no ptrace or /proc access by the same uid)" },
	{ "ioctl", CR_IOCTL_TTY, EPERM, "no input pushed into the terminal egress-exec's stderr may be" },
	CA("bpf", "kernel attack surface"),
	CA("perf_event_open", "kernel attack surface"),
	CA("userfaultfd", "makes kernel races reliable"),
	CA("io_uring_setup", "I/O outside seccomp's view"),
	CA("io_uring_enter", "I/O outside seccomp's view"),
	CA("io_uring_register", "I/O outside seccomp's view"),
	CA("keyctl", "the kernel keyring is not namespaced"),
	CA("add_key", "the kernel keyring is not namespaced"),
	CA("request_key", "the kernel keyring is not namespaced"),
	CA("kexec_load", "host control"),
	CA("kexec_file_load", "host control"),
	CA("init_module", "host control"),
	CA("finit_module", "host control"),
	CA("delete_module", "host control"),
	CA("reboot", "host control"),
	CA("swapon", "host control"),
	CA("swapoff", "host control"),
	CA("syslog", "the kernel log"),
	CA("acct", "host control"),
	CA("quotactl", "host control"),
	CA("quotactl_fd", "host control"),
	CA("iopl", "raw I/O ports"),
	CA("ioperm", "raw I/O ports"),
	CA("uselib", "obsolete loader interface"),
};

const char *const *
collector_filter_syscalls(size_t *n)
{
	static const char *names[EGRESS_NELEM(CFILTER)];

	for (size_t i = 0; i < EGRESS_NELEM(CFILTER); i++)
		names[i] = CFILTER[i].syscall;
	*n = EGRESS_NELEM(CFILTER);
	return names;
}

static const uint64_t CLONE_NS[] = {
	CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
	CLONE_NEWCGROUP, CLONE_NEWTIME,
};

static int
cfilter_add(scmp_filter_ctx ctx, const struct cfilter_entry *e, int nr, uint64_t self)
{
	uint32_t act = SCMP_ACT_ERRNO((uint32_t)e->err);
	int rc = 0;

	switch (e->kind) {
	case CR_ALWAYS:
		return seccomp_rule_add(ctx, act, nr, 0);
	case CR_NOT_SELF:
		/* 64-bit comparison: upper bits set anywhere also differ from self: denied. */
		return seccomp_rule_add(ctx, act, nr, 1, SCMP_A0(SCMP_CMP_NE, self, 0));
	case CR_CLONE:
		rc = seccomp_rule_add(ctx, act, nr, 1,
		    SCMP_A0(SCMP_CMP_MASKED_EQ, (uint64_t)CLONE_THREAD, 0));
		for (size_t i = 0; i < EGRESS_NELEM(CLONE_NS) && rc == 0; i++)
			rc = seccomp_rule_add(ctx, act, nr, 1,
			    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NS[i], CLONE_NS[i]));
		return rc;
	case CR_IOCTL_TTY: {
		static const uint64_t req[] = { TIOCSTI, TIOCLINUX };
		for (size_t i = 0; i < EGRESS_NELEM(req) && rc == 0; i++)
			rc = seccomp_rule_add(ctx, act, nr, 1,
			    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, req[i]));
		return rc;
	}
	case CR_DUMPABLE:
		/* PR_SET_DUMPABLE with any value but 0 */
		return seccomp_rule_add(ctx, act, nr, 2, SCMP_A0(SCMP_CMP_EQ, PR_SET_DUMPABLE, 0),
		    SCMP_A1(SCMP_CMP_NE, 0, 0));
	case CR_A0_NOT_ZERO:
		return seccomp_rule_add(ctx, act, nr, 1, SCMP_A0(SCMP_CMP_NE, 0, 0));
	case CR_A1_NOT_ZERO:
		return seccomp_rule_add(ctx, act, nr, 1, SCMP_A1(SCMP_CMP_NE, 0, 0));
	case CR_MODE_A1:
	case CR_MODE_A2:
	case CR_MODE_A3: {
		static const uint64_t bits[] = { S_ISUID, S_ISGID };
		unsigned arg = e->kind == CR_MODE_A1 ? 1 : e->kind == CR_MODE_A2 ? 2 : 3;
		for (size_t i = 0; i < EGRESS_NELEM(bits) && rc == 0; i++) {
			struct scmp_arg_cmp c = { arg, SCMP_CMP_MASKED_EQ, bits[i], bits[i] };
			rc = seccomp_rule_add_array(ctx, act, nr, 1, &c);
		}
		return rc;
	}
	}
	return -EINVAL;
}

static int
cfilter_install(char *err, size_t errlen)
{
	/* A deny list; another architecture's calls kill (common/scfilter). */
	static const struct scf_spec spec = { .default_action = SCMP_ACT_ALLOW,
		.badarch_kill = true };
	scmp_filter_ctx ctx = scf_new(&spec, err, errlen);
	uint64_t self = (uint64_t)getpid();
	int rc;

	if (ctx == NULL)
		return -1;
	for (size_t i = 0; i < EGRESS_NELEM(CFILTER); i++) {
		int nr = scf_resolve(CFILTER[i].syscall);
		if (nr < 0)
			continue;   /* not a system call here: nothing to call */
		if ((rc = cfilter_add(ctx, &CFILTER[i], nr, self)) != 0) {
			seccomp_release(ctx);
			return scf_rule_failed(CFILTER[i].syscall, rc, err, errlen);
		}
	}
	return scf_load(ctx, err, errlen);
}

/* ------------------------------------------------------------------ the child */

__attribute__((noreturn, format(printf, 2, 3)))
static void
child_fail(enum cstep step, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warnx("collector: %s: %s", cstep_names[step], msg);
	fflush(stderr);
	_exit(COLLECTOR_SETUP_EXIT_BASE + (int)step);
}

/* mkdir -p of stage + path (every component), the last one a directory or an empty file
 * like the source. Components that exist already (inside an earlier bind) are kept. */
static int
make_target(const char *stage, const char *path, bool is_dir, char *dst, size_t dstlen)
{
	size_t sl = strlen(stage);
	int n = snprintf(dst, dstlen, "%s%s", stage, path);

	if (n < 0 || (size_t)n >= dstlen || path[0] != '/')
		return -1;
	for (char *p = dst + sl + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dst, 0755) != 0 && errno != EEXIST) {
			*p = '/';
			return -1;
		}
		*p = '/';
	}
	if (is_dir)
		return mkdir(dst, 0755) == 0 || errno == EEXIST ? 0 : -1;
	n = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (n < 0)
		return errno == EEXIST || errno == EROFS ? 0 : -1;
	close(n);
	return 0;
}

static void
bind_one(const char *stage, const char *src, bool writable)
{
	char dst[EGRESS_PATH_MAX * 2], via[64];
	struct stat st;
	unsigned long fl = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC |
	    (writable ? 0 : MS_RDONLY);
	/* The sources are canonical (realpath'd by the caller) and were resolved long ago,
	 * before the worker ran: resolve them again without following any symlink, so that
	 * a component swapped for a link since (by whoever owns a directory on the way)
	 * fails instead of binding something else, and bind exactly what was opened. */
	struct open_how how = { .flags = O_PATH | O_CLOEXEC,
	    .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int fd;

	if (src[0] != '/')
		child_fail(CS_MOUNTS, "%s: not an existing absolute directory or file", src);
	fd = (int)syscall(SYS_openat2, AT_FDCWD, src, &how, sizeof(how));
	if (fd < 0 || fstat(fd, &st) != 0 || (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)))
		child_fail(CS_MOUNTS, "%s: not an existing absolute directory or file reached "
		    "without symlinks", src);
	if (writable && !S_ISDIR(st.st_mode))
		child_fail(CS_MOUNTS, "%s: the output folder is not a directory", src);
	if (make_target(stage, src, S_ISDIR(st.st_mode), dst, sizeof(dst)) != 0)
		child_fail(CS_MOUNTS, "mount point for %s: %s", src, strerror(errno));
	snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
	/* Not MS_REC: mounts below the path (none expected) stay out of the root. */
	if (mount(via, dst, NULL, MS_BIND, NULL) != 0)
		child_fail(CS_MOUNTS, "bind %s: %s", src, strerror(errno));
	close(fd);
	if (mount(NULL, dst, NULL, fl, NULL) != 0)
		child_fail(CS_MOUNTS, "remount %s %s: %s", src, writable ? "rw" : "ro",
		    strerror(errno));
}

static int
path_len_cmp(const void *a, const void *b)
{
	size_t x = strlen(*(const char *const *)a), y = strlen(*(const char *const *)b);

	return x < y ? -1 : x > y;
}

static void
child_mounts(const struct collector_spec *s)
{
	const char *paths[COLLECTOR_RO_MAX + 1];
	size_t n = 0;

	if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		child_fail(CS_NAMESPACES, "make / private: %s", strerror(errno));
	if (mount("collector", s->stage_dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "size=1m,nr_inodes=1024,mode=0755") != 0)
		child_fail(CS_MOUNTS, "tmpfs at %s: %s", s->stage_dir, strerror(errno));
	/* Parents before children: a bind nested in another lands on top of it. */
	for (size_t i = 0; i < COLLECTOR_RO_MAX; i++)
		if (s->ro_paths[i] != NULL)
			paths[n++] = s->ro_paths[i];
	paths[n++] = s->rw_dir;
	qsort(paths, n, sizeof(paths[0]), path_len_cmp);
	for (size_t i = 0; i < n; i++)
		bind_one(s->stage_dir, paths[i], paths[i] == s->rw_dir);
	for (size_t i = 0; i < COLLECTOR_LINKS_MAX; i++) {
		char dst[EGRESS_PATH_MAX * 2];

		if (s->links[i].path == NULL)
			continue;
		if (s->links[i].path[0] != '/' || s->links[i].target == NULL ||
		    s->links[i].target[0] != '/' ||
		    make_target(s->stage_dir, s->links[i].path, true, dst, sizeof(dst)) != 0)
			child_fail(CS_MOUNTS, "link %s: %s", s->links[i].path, strerror(errno));
		/* make_target made the last component a directory: replace it with the link */
		if (rmdir(dst) != 0 || symlink(s->links[i].target, dst) != 0)
			child_fail(CS_MOUNTS, "link %s -> %s: %s", s->links[i].path,
			    s->links[i].target, strerror(errno));
	}
}

static void
child_pivot(const char *stage)
{
	if (chdir(stage) != 0)
		child_fail(CS_PIVOT, "chdir %s: %s", stage, strerror(errno));
	if (syscall(SYS_pivot_root, ".", ".") != 0)
		child_fail(CS_PIVOT, "pivot_root: %s", strerror(errno));
	/* The old root is stacked under the new one: detach it. */
	if (umount2(".", MNT_DETACH) != 0)
		child_fail(CS_PIVOT, "detach the old root: %s", strerror(errno));
	if (chdir("/") != 0)
		child_fail(CS_PIVOT, "chdir /: %s", strerror(errno));
	if (mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, NULL) != 0)
		child_fail(CS_PIVOT, "remount / read-only: %s", strerror(errno));
}

static void
child_drop(uid_t uid, gid_t gid)
{
	struct rlimit nocore = { 0, 0 };
	struct rlimit fsize = { EGRESS_COLLECT_FILE_MAX, EGRESS_COLLECT_FILE_MAX };

	/* Bounding set first, while CAP_SETPCAP is still held. EINVAL: past the last cap. */
	for (int cap = 0; cap < 64; cap++) {
		if (cap == COLLECTOR_KEPT_CAP)
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
			child_fail(CS_DROP, "PR_CAPBSET_DROP %d: %s", cap, strerror(errno));
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
		child_fail(CS_DROP, "clear ambient: %s", strerror(errno));
	/* Keep the permitted set across the uid change, trimmed right after. */
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0)
		child_fail(CS_DROP, "PR_SET_KEEPCAPS 1: %s", strerror(errno));
	if (setgroups(0, NULL) != 0)
		child_fail(CS_DROP, "setgroups: %s", strerror(errno));
	if (setresgid(gid, gid, gid) != 0)
		child_fail(CS_DROP, "setresgid %u: %s", (unsigned)gid, strerror(errno));
	if (setresuid(uid, uid, uid) != 0)
		child_fail(CS_DROP, "setresuid %u: %s", (unsigned)uid, strerror(errno));
	capng_clear(CAPNG_SELECT_CAPS);
	if (capng_update(CAPNG_ADD, (capng_type_t)(CAPNG_EFFECTIVE | CAPNG_PERMITTED),
	    COLLECTOR_KEPT_CAP) != 0 || capng_apply(CAPNG_SELECT_CAPS) != 0)
		child_fail(CS_DROP, "capability sets: capng_apply failed");
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0)
		child_fail(CS_DROP, "PR_SET_KEEPCAPS 0: %s", strerror(errno));
	/* Not dumpable: no ptrace and no /proc/<pid> access by anyone without
	 * CAP_SYS_PTRACE, no core file with the worker's data. After the uid change, which
	 * resets it. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		child_fail(CS_DROP, "PR_SET_DUMPABLE 0: %s", strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		child_fail(CS_DROP, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	if (setrlimit(RLIMIT_CORE, &nocore) != 0)
		child_fail(CS_DROP, "RLIMIT_CORE: %s", strerror(errno));
	/* Every file it writes is bounded (the candidate by diff_bytes, the rest small): a
	 * runaway write ends in SIGXFSZ, a collector_failed, not a full disk. */
	if (setrlimit(RLIMIT_FSIZE, &fsize) != 0)
		child_fail(CS_DROP, "RLIMIT_FSIZE: %s", strerror(errno));
}

/* "Key:\t<value>\n" equals want. */
static bool
status_is(const char *buf, const char *key, const char *want)
{
	size_t kl = strlen(key), wl = strlen(want);

	for (const char *p = buf; p != NULL && *p != '\0';) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ':') {
			p += kl + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			return strncmp(p, want, wl) == 0 && (p[wl] == '\n' || p[wl] == '\0');
		}
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return false;
}

static void
child_verify(uid_t uid, gid_t gid)
{
	static const char *const zero[] = { "CapInh", "CapAmb" };
	static const char *const kept[] = { "CapPrm", "CapEff", "CapBnd" };
	char buf[8192], want[32], ids[64];
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (collector_status(buf, sizeof(buf)) != 0)
		child_fail(CS_VERIFY, "cannot read /proc/self/status");
	snprintf(want, sizeof(want), "%016llx", 1ULL << COLLECTOR_KEPT_CAP);
	for (size_t i = 0; i < EGRESS_NELEM(zero); i++)
		if (!status_is(buf, zero[i], "0000000000000000"))
			child_fail(CS_VERIFY, "%s is not empty", zero[i]);
	for (size_t i = 0; i < EGRESS_NELEM(kept); i++)
		if (!status_is(buf, kept[i], want))
			child_fail(CS_VERIFY, "%s is not {CAP_DAC_OVERRIDE}", kept[i]);
	if (!status_is(buf, "NoNewPrivs", "1"))
		child_fail(CS_VERIFY, "NoNewPrivs is not 1");
	if (!status_is(buf, "Seccomp", "2"))
		child_fail(CS_VERIFY, "Seccomp is not 2");
	snprintf(ids, sizeof(ids), "%u\t%u\t%u\t%u", (unsigned)uid, (unsigned)uid,
	    (unsigned)uid, (unsigned)uid);
	if (!status_is(buf, "Uid", ids))
		child_fail(CS_VERIFY, "Uid is not %u (real, effective, saved, fs)", (unsigned)uid);
	snprintf(ids, sizeof(ids), "%u\t%u\t%u\t%u", (unsigned)gid, (unsigned)gid,
	    (unsigned)gid, (unsigned)gid);
	if (!status_is(buf, "Gid", ids))
		child_fail(CS_VERIFY, "Gid is not %u", (unsigned)gid);
	if (!status_is(buf, "Groups", ""))
		child_fail(CS_VERIFY, "supplementary groups are not empty");
	if (getresuid(&ru, &eu, &su) != 0 || ru != uid || eu != uid || su != uid ||
	    getresgid(&rg, &eg, &sg) != 0 || rg != gid || eg != gid || sg != gid)
		child_fail(CS_VERIFY, "ids differ from the request");
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
		child_fail(CS_VERIFY, "still dumpable");
	{
		int sig = 0;
		if (prctl(PR_GET_PDEATHSIG, &sig, 0, 0, 0) != 0 || sig != SIGKILL)
			child_fail(CS_VERIFY, "no parent-death signal");
	}
}

__attribute__((noreturn))
static void
child_main(const struct collector_spec *s, pid_t parent)
{
	uid_t uid = s->uid ? s->uid : COLLECTOR_UID;
	gid_t gid = s->gid ? s->gid : COLLECTOR_GID;
	char err[256];
	int fd, code;

	/* 1. Process: die with the parent; no inherited descriptor may reach the host's
	 * file system past pivot_root (an fd to a host directory would be an escape). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
		_exit(COLLECTOR_SETUP_EXIT_BASE + CS_PROCESS);
	if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
		child_fail(CS_PROCESS, "close_range: %s", strerror(errno));
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || dup2(fd, 0) != 0)
		child_fail(CS_PROCESS, "stdin from /dev/null: %s", strerror(errno));
	close(fd);
	/* stdout and stderr are inherited: a directory there would be a way out of the root
	 * (openat on it, with CAP_DAC_OVERRIDE). Anything but a directory is fine. */
	for (int i = 1; i <= 2; i++) {
		struct stat fst;
		if (fstat(i, &fst) == 0 && S_ISDIR(fst.st_mode)) {
			int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
			if (nul < 0 || dup2(nul, i) != i)
				child_fail(CS_PROCESS, "fd %d is a directory and cannot be replaced", i);
			close(nul);
		}
	}
	collector_status_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (collector_status_fd < 0)
		child_fail(CS_PROCESS, "open /proc/self/status: %s", strerror(errno));

	/* 2. Namespaces: the network namespace has a down lo and nothing else. */
	if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC) != 0)
		child_fail(CS_NAMESPACES, "unshare: %s", strerror(errno));
	/* 3-4. The root. */
	child_mounts(s);
	child_pivot(s->stage_dir);
	/* 5-6. Identity, then the filter (no_new_privs is set by the drop). The uid change
	 * clears the parent-death signal: arm it again, then make sure the parent did not die
	 * in between (a collector must never outlive egress-exec's bounded wait). */
	child_drop(uid, gid);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
		child_fail(CS_DROP, "parent-death signal after the drop, or the parent is gone");
	if (cfilter_install(err, sizeof(err)) != 0)
		child_fail(CS_SECCOMP, "%s", err);
	/* 7. Prove it. */
	child_verify(uid, gid);

	collector_in_child = true;
	code = s->fn(s->arg);
	fflush(stdout);
	fflush(stderr);
	/* _exit: the parent's atexit handlers (and a leak check that would need ptrace) do
	 * not run in the collector. */
	_exit(code);
}

/* ------------------------------------------------------------------ the parent */

__attribute__((format(printf, 2, 3)))
static int
res_fail(struct collector_result *res, const char *fmt, ...)
{
	va_list ap;

	res->reason = REASON_COLLECTOR_FAILED;
	res->exit_code = EXEC_EXIT_INTERNAL;
	va_start(ap, fmt);
	vsnprintf(res->message, sizeof(res->message), fmt, ap);
	va_end(ap);
	return -1;
}

static bool
exec_exit_valid(int c)
{
	switch (c) {
	case EXEC_EXIT_OK: case EXEC_EXIT_REJECTED: case EXEC_EXIT_ADMISSION:
	case EXEC_EXIT_CAPABILITY: case EXEC_EXIT_WORKER: case EXEC_EXIT_INTERNAL:
	case EXEC_EXIT_USAGE:
		return true;
	default:
		return false;
	}
}

enum wait_outcome { WAIT_REAPED, WAIT_TIMEOUT, WAIT_LOST };

/* Wait for pid until deadline (monotonic ms). WAIT_REAPED with status filled; WAIT_LOST
 * when waitpid fails (ECHILD: SIGCHLD ignored, or reaped elsewhere) — the verdict is then
 * unknown and must never read as success. */
static enum wait_outcome
wait_bounded(pid_t pid, uint64_t deadline, int *status)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	enum wait_outcome out = WAIT_REAPED;

	for (;;) {
		pid_t w = waitpid(pid, status, WNOHANG);
		uint64_t now = mono_msec();

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			out = WAIT_LOST;
			break;
		}
		if (now >= deadline) {
			if (pfd >= 0)
				close(pfd);
			return WAIT_TIMEOUT;
		}
		if (pfd >= 0) {
			struct pollfd p = { .fd = pfd, .events = POLLIN };
			uint64_t left = deadline - now;
			(void)poll(&p, 1, left > 1000 ? 1000 : (int)left);
		} else {
			struct timespec ts = { 0, 5 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
	if (pfd >= 0)
		close(pfd);
	return out;
}

int
collector_run(const struct collector_spec *spec, struct collector_result *res)
{
	uint32_t wall = spec->wall_ms ? spec->wall_ms : EGRESS_COLLECT_WALL_MS;
	uint64_t t0 = mono_msec();
	pid_t parent = getpid(), pid;
	int status = -1;
	enum wait_outcome wo;

	memset(res, 0, sizeof(*res));
	res->exit_code = EXEC_EXIT_INTERNAL;
	res->reason = REASON_COLLECTOR_FAILED;
	if (spec->fn == NULL || spec->rw_dir == NULL || spec->rw_dir[0] != '/' ||
	    spec->stage_dir == NULL || spec->stage_dir[0] != '/')
		return res_fail(res, "collector: fn, an absolute output folder and an absolute "
		    "stage directory are required");
	/* libcrypto (the artifacts' SHA-256) is loaded now, by this process, before the fork:
	 * the collector's root holds no libraries to load it from (common/cryptolib.h). */
	{
		char cerr[256];

		if (cryptolib_load(cerr, sizeof(cerr)) != 0)
			return res_fail(res, "collector: libcrypto: %s", cerr);
	}
	/* Nothing buffered in stdio may be written twice (once by the child). */
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return res_fail(res, "collector: fork: %s", strerror(errno));
	if (pid == 0)
		child_main(spec, parent);

	wo = wait_bounded(pid, t0 + wall, &status);
	if (wo == WAIT_LOST) {
		int e = errno;
		/* no kill: a child that is not ours to wait for may already be reaped and its
		 * pid reused */
		res->wall_ms = mono_msec() - t0;
		return res_fail(res, "the collector's exit status was lost (waitpid: %s); its "
		    "verdict is unknown", strerror(e));
	}
	if (wo == WAIT_TIMEOUT) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		res->wall_ms = mono_msec() - t0;
		return res_fail(res, "the collector did not finish within %u ms and was killed",
		    wall);
	}
	res->wall_ms = mono_msec() - t0;
	if (WIFSIGNALED(status))
		return res_fail(res, "the collector was killed by signal %d%s", WTERMSIG(status),
		    WTERMSIG(status) == SIGSYS ? " (seccomp)" : "");
	if (!WIFEXITED(status))
		return res_fail(res, "the collector ended abnormally (status %#x)", status);
	{
		int c = WEXITSTATUS(status);
		int step = c - COLLECTOR_SETUP_EXIT_BASE;

		if (step > 0 && step < CS__COUNT)
			return res_fail(res, "the collector could not be set up: %s (exit %d); "
			    "nothing was collected as root", cstep_names[step], c);
		if (!exec_exit_valid(c))
			return res_fail(res, "the collector exited with %d, not an egress-exec "
			    "exit code", c);
		res->exit_code = c;
		res->reason = REASON_ALLOWED;
	}
	return 0;
}
