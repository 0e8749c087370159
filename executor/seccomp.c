/*
 * seccomp - the worker's system-call filter. See seccomp.h and docs/seccomp.md.
 *
 * The profile is a default-allow deny list: the worker is ordinary build/agent code that
 * needs most of the syscall surface, and what it must not do is a short, known list
 * (re-confining itself out of its namespaces, inspecting other processes, reaching kernel
 * attack surface that unprivileged code has no business with, and opening sockets that
 * would bypass the proxy). Every entry carries its reason in PROFILE below, and
 * docs/seccomp.md repeats the table for readers.
 */
#define _GNU_SOURCE 1
#include "executor/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/scfilter.h"
#include "common/util.h"
#include "executor/procwait.h"

#ifndef SOCK_PACKET
#define SOCK_PACKET 10
#endif
#define SOCK_TYPE_MASK_KERNEL 0xfULL   /* include/linux/net.h SOCK_TYPE_MASK */

/* How an entry is turned into rules. */
enum rule_kind {
	RK_ALWAYS,          /* every call */
	RK_CLONE_NS,        /* clone(2) with any CLONE_NEW* flag in arg 0 */
	RK_SOCKET_FAMILY,   /* socket/socketpair family not AF_UNIX/AF_INET/AF_INET6 */
	RK_SOCKET_RAW,      /* AF_INET/AF_INET6 with SOCK_RAW or SOCK_PACKET */
	RK_SOCKET_PROTO,    /* AF_INET/AF_INET6 with a transport other than TCP/UDP/ICMP */
	RK_IOCTL_TTY,       /* ioctl TIOCSTI / TIOCLINUX */
	RK_PERSONALITY,     /* personality() setting an exploit-mitigation-weakening flag */
};

struct profile_rule {
	struct seccomp_profile_entry e;
	enum rule_kind kind;
};

#define ALWAYS(name, err, why) { { name, "", err, why }, RK_ALWAYS }

static const struct profile_rule PROFILE[] = {
	/* Mounts and root changes: the worker's filesystem view is fixed by the sandbox. */
	ALWAYS("mount", EPERM, "the filesystem view is fixed by the sandbox; remounting could expose or unmask host paths"),
	ALWAYS("umount", EPERM, "unmounting could reveal what a mask or overlay hides"),
	ALWAYS("umount2", EPERM, "unmounting could reveal what a mask or overlay hides"),
	ALWAYS("pivot_root", EPERM, "the root is set once by the sandbox"),
	ALWAYS("chroot", EPERM, "chroot tricks are the classic escape from a confined root"),
	ALWAYS("open_tree", EPERM, "new mount API: would let the worker clone and attach mounts"),
	ALWAYS("move_mount", EPERM, "new mount API: would let the worker attach mounts"),
	ALWAYS("fsopen", EPERM, "new mount API: creating filesystem contexts"),
	ALWAYS("fsconfig", EPERM, "new mount API: configuring filesystem contexts"),
	ALWAYS("fsmount", EPERM, "new mount API: creating mounts"),
	ALWAYS("fspick", EPERM, "new mount API: reconfiguring existing mounts"),
	ALWAYS("mount_setattr", EPERM, "new mount API: changing mount flags (e.g. clearing read-only)"),
	/* Namespaces: the worker stays in the namespaces the sandbox made. */
	ALWAYS("unshare", EPERM, "new namespaces (user namespaces especially) open large kernel attack surface and could undo the network confinement"),
	ALWAYS("setns", EPERM, "joining another namespace would leave the sandbox"),
	{ { "clone", "flags & (CLONE_NEWNS|CLONE_NEWUTS|CLONE_NEWIPC|CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWCGROUP|CLONE_NEWTIME)", EPERM,
	    "creating namespaces at clone time is unshare by another name; plain fork/thread clones stay allowed" }, RK_CLONE_NS },
	ALWAYS("clone3", ENOSYS, "clone3 passes its flags in memory, which seccomp cannot inspect; ENOSYS makes libc fall back to clone, whose flags are checked"),
	/* Looking into or controlling other processes. */
	ALWAYS("ptrace", EPERM, "tracing could inspect or steer the sandbox init and other workers' code paths"),
	ALWAYS("process_vm_readv", EPERM, "reading another process's memory"),
	ALWAYS("process_vm_writev", EPERM, "writing another process's memory"),
	ALWAYS("pidfd_getfd", EPERM, "stealing file descriptors from another process"),
	ALWAYS("kcmp", EPERM, "compares kernel objects of other processes: an information leak"),
	/* Kernel attack surface unprivileged code does not need. */
	ALWAYS("bpf", EPERM, "eBPF is a large and frequently exploited kernel surface"),
	ALWAYS("perf_event_open", EPERM, "performance counters leak information and have a history of kernel exploits"),
	ALWAYS("keyctl", EPERM, "the kernel keyring may hold host credentials and is not namespaced"),
	ALWAYS("add_key", EPERM, "the kernel keyring is not namespaced"),
	ALWAYS("request_key", EPERM, "the kernel keyring is not namespaced"),
	ALWAYS("userfaultfd", EPERM, "userfaultfd makes kernel race exploits reliable"),
	ALWAYS("io_uring_setup", EPERM, "io_uring performs I/O outside seccomp's view and is a frequent exploit target"),
	ALWAYS("io_uring_enter", EPERM, "io_uring performs I/O outside seccomp's view"),
	ALWAYS("io_uring_register", EPERM, "io_uring performs I/O outside seccomp's view"),
	ALWAYS("kexec_load", EPERM, "loading a new kernel"),
	ALWAYS("kexec_file_load", EPERM, "loading a new kernel"),
	ALWAYS("init_module", EPERM, "loading kernel modules"),
	ALWAYS("finit_module", EPERM, "loading kernel modules"),
	ALWAYS("delete_module", EPERM, "unloading kernel modules"),
	ALWAYS("open_by_handle_at", EPERM, "opens files by handle, bypassing the mount view (the 'shocker' container escape)"),
	ALWAYS("name_to_handle_at", EPERM, "produces the handles open_by_handle_at would use"),
	ALWAYS("reboot", EPERM, "rebooting the host"),
	ALWAYS("swapon", EPERM, "host memory configuration"),
	ALWAYS("swapoff", EPERM, "host memory configuration"),
	ALWAYS("syslog", EPERM, "the kernel log leaks host addresses and activity"),
	ALWAYS("acct", EPERM, "process accounting is host-wide"),
	ALWAYS("quotactl", EPERM, "disk quotas are host configuration"),
	ALWAYS("quotactl_fd", EPERM, "disk quotas are host configuration"),
	ALWAYS("iopl", EPERM, "raw I/O port access"),
	ALWAYS("ioperm", EPERM, "raw I/O port access"),
	ALWAYS("uselib", EPERM, "obsolete loader interface, attack surface only"),
	/* Network: only sockets the proxy path can carry. */
	{ { "socket", "family not AF_UNIX, AF_INET or AF_INET6", EAFNOSUPPORT,
	    "no raw link-layer (packet), netlink, vsock, bluetooth ... sockets: only IP through the veth (to the proxy) and local unix sockets" }, RK_SOCKET_FAMILY },
	{ { "socketpair", "family not AF_UNIX, AF_INET or AF_INET6", EAFNOSUPPORT,
	    "same family rule as socket()" }, RK_SOCKET_FAMILY },
	{ { "socket", "family AF_INET/AF_INET6 with type SOCK_RAW or SOCK_PACKET", EPERM,
	    "raw IP sockets send hand-made packets; AF_INET+SOCK_PACKET is silently turned into a packet socket by the kernel" }, RK_SOCKET_RAW },
	{ { "socket", "family AF_INET/AF_INET6 with protocol SCTP, DCCP, UDP-Lite, MPTCP or L2TP", EPROTONOSUPPORT,
	    "the proxy path carries TCP only; these transports would also let unprivileged code load their kernel modules (attack surface)" }, RK_SOCKET_PROTO },
	/* Terminal injection. */
	{ { "ioctl", "request TIOCSTI or TIOCLINUX (low 32 bits)", EPERM,
	    "TIOCSTI/TIOCLINUX push input into a terminal; belt and braces with setsid and no controlling terminal" }, RK_IOCTL_TTY },
	/* Personality. */
	{ { "personality", "sets ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO, ADDR_COMPAT_LAYOUT, ADDR_LIMIT_32BIT or ADDR_LIMIT_3GB (0xffffffff query allowed)", EPERM,
	    "these flags weaken exploit mitigations (ASLR, NX, null-page protection) for what the worker runs next" }, RK_PERSONALITY },
};

static const struct seccomp_profile_entry *entries_cache;

const struct seccomp_profile_entry *
seccomp_profile_entries(size_t *n)
{
	/* PROFILE's first member is the public entry, but the array stride differs; expose a
	 * parallel static array built once. */
	static struct seccomp_profile_entry out[EGRESS_NELEM(PROFILE)];
	if (entries_cache == NULL) {
		for (size_t i = 0; i < EGRESS_NELEM(PROFILE); i++)
			out[i] = PROFILE[i].e;
		entries_cache = out;
	}
	*n = EGRESS_NELEM(PROFILE);
	return entries_cache;
}

static const uint64_t CLONE_NS_FLAGS[] = {
	CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
	CLONE_NEWCGROUP, CLONE_NEWTIME,
};

/* The flags that weaken mitigations (include/uapi/linux/personality.h). */
static const uint32_t PERSONALITY_BAD[] = {
	ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO, ADDR_COMPAT_LAYOUT,
	ADDR_LIMIT_32BIT, ADDR_LIMIT_3GB,
};

static int
add_rules(scmp_filter_ctx ctx, const struct profile_rule *r, int nr, char *err, size_t errlen)
{
	uint32_t act = SCMP_ACT_ERRNO((uint32_t)r->e.err);
	int rc = 0;

	switch (r->kind) {
	case RK_ALWAYS:
		rc = seccomp_rule_add(ctx, act, nr, 0);
		break;
	case RK_CLONE_NS:
		/* clone's flags are a full unsigned long in arg 0 on every 64-bit arch we build
		 * for (x86_64, aarch64: flags first). One rule per flag: libseccomp ANDs the
		 * comparisons of a rule and allows one comparison per argument. */
		for (size_t i = 0; i < EGRESS_NELEM(CLONE_NS_FLAGS) && rc == 0; i++)
			rc = seccomp_rule_add(ctx, act, nr, 1,
			    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NS_FLAGS[i], CLONE_NS_FLAGS[i]));
		break;
	case RK_SOCKET_FAMILY: {
		/* Allowed: 1 (AF_UNIX), 2 (AF_INET), 10 (AF_INET6). Deny 0, 3..9 and > 10. The
		 * comparison is over 64 bits: any value with high bits set is > 10 and denied,
		 * so the kernel's truncation to int cannot smuggle a family past the filter. */
		static const uint64_t small[] = { 0, 3, 4, 5, 6, 7, 8, 9 };
		for (size_t i = 0; i < EGRESS_NELEM(small) && rc == 0; i++)
			rc = seccomp_rule_add(ctx, act, nr, 1, SCMP_A0(SCMP_CMP_EQ, small[i], 0));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, act, nr, 1, SCMP_A0(SCMP_CMP_GT, (uint64_t)AF_INET6, 0));
		break;
	}
	case RK_SOCKET_RAW: {
		static const uint64_t fam[] = { AF_INET, AF_INET6 };
		static const uint64_t type[] = { SOCK_RAW, SOCK_PACKET };
		/* The kernel masks the type with SOCK_TYPE_MASK (flags like SOCK_CLOEXEC live
		 * above it), so the filter does the same. */
		for (size_t i = 0; i < EGRESS_NELEM(fam) && rc == 0; i++)
			for (size_t j = 0; j < EGRESS_NELEM(type) && rc == 0; j++)
				rc = seccomp_rule_add(ctx, act, nr, 2, SCMP_A0(SCMP_CMP_EQ, fam[i], 0),
				    SCMP_A1(SCMP_CMP_MASKED_EQ, SOCK_TYPE_MASK_KERNEL, type[j]));
		break;
	}
	case RK_SOCKET_PROTO: {
		static const uint64_t fam[] = { AF_INET, AF_INET6 };
		/* IPPROTO_SCTP 132, IPPROTO_DCCP 33, IPPROTO_UDPLITE 136, IPPROTO_MPTCP 262,
		 * IPPROTO_L2TP 115; the kernel takes the protocol as int: compare 32 bits */
		static const uint64_t proto[] = { 132, 33, 136, 262, 115 };
		for (size_t i = 0; i < EGRESS_NELEM(fam) && rc == 0; i++)
			for (size_t j = 0; j < EGRESS_NELEM(proto) && rc == 0; j++)
				rc = seccomp_rule_add(ctx, act, nr, 2, SCMP_A0(SCMP_CMP_EQ, fam[i], 0),
				    SCMP_A2(SCMP_CMP_MASKED_EQ, 0xffffffffULL, proto[j]));
		break;
	}
	case RK_IOCTL_TTY: {
		/* The kernel takes the request as unsigned int: compare the low 32 bits only so
		 * TIOCSTI | (1 << 32) is caught too. */
		static const uint64_t req[] = { TIOCSTI, TIOCLINUX };
		for (size_t i = 0; i < EGRESS_NELEM(req) && rc == 0; i++)
			rc = seccomp_rule_add(ctx, act, nr, 1,
			    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, req[i]));
		break;
	}
	case RK_PERSONALITY:
		/* Deny "bad bit b set and the value is not the 0xffffffff query". libseccomp
		 * allows one comparison per argument per rule, so "not all ones" is spelled as
		 * "some other bit c is clear": one rule per (b, c). Only the low 32 bits matter
		 * (the kernel takes unsigned int), so the masks cover the low word only. */
		for (size_t i = 0; i < EGRESS_NELEM(PERSONALITY_BAD) && rc == 0; i++) {
			uint32_t b = PERSONALITY_BAD[i];
			for (unsigned c = 0; c < 32 && rc == 0; c++) {
				uint32_t cb = 1u << c;
				if (cb & b)
					continue;
				rc = seccomp_rule_add(ctx, act, nr, 1,
				    SCMP_A0(SCMP_CMP_MASKED_EQ, (uint64_t)(b | cb), (uint64_t)b));
			}
		}
		break;
	}
	if (rc != 0) {
		errbuf_set(err, errlen, 0, "seccomp: adding the rule for %s failed: %s", r->e.syscall,
		    strerror(-rc));
		return -1;
	}
	return 0;
}

/* Build the filter context; NULL with err on failure. For install and for tests. */
TESTABLE scmp_filter_ctx seccomp_profile_build(char *err, size_t errlen);

TESTABLE scmp_filter_ctx
seccomp_profile_build(char *err, size_t errlen)
{
	/* Other architectures (i386 via int 0x80, x32) never reach the allow default: the
	 * filter holds the native arch only and anything else kills the process. A binary
	 * search over syscall numbers instead of a linear chain: every worker syscall runs
	 * the filter (common/scfilter). */
	static const struct scf_spec spec = { .default_action = SCMP_ACT_ALLOW,
		.tsync = true, .badarch_kill = true, .optimize = true, .nnp_first = true };
	scmp_filter_ctx ctx = scf_new(&spec, err, errlen);

	if (ctx == NULL)
		return NULL;
	for (size_t i = 0; i < EGRESS_NELEM(PROFILE); i++) {
		int nr = scf_resolve(PROFILE[i].e.syscall);
		if (nr < 0)
			continue; /* not a system call here: nothing to call */
		if (add_rules(ctx, &PROFILE[i], nr, err, errlen) != 0) {
			seccomp_release(ctx);
			return NULL;
		}
	}
	return ctx;
}

/*
 * The compiled program, once per process. libseccomp's compile (rule database, then BPF
 * generation) is the slow half of an install; the filter's inputs are all static (PROFILE
 * and the build's libseccomp/arch), so a program compiled once in the supervisor is
 * exactly what a compile in the worker would produce. The supervisor compiles it before
 * the attestation self-test and before the sandbox clone; both children inherit it with
 * their copy of memory and only install it (common/scfilter: scf_compile, scf_install).
 * Nothing is stored on disk or shared across runs, so no other process can substitute it.
 */
static struct scf_prog prog;

/*
 * The program compiled at build time (executor/gen/seccomp_gen.c writes
 * seccomp_builtin.c, linked into egress-exec only; weak, so the unit tests and the
 * generator itself link without it), and the libseccomp version and native architecture
 * it was compiled with. The compile's output depends on nothing else (PROFILE, the
 * attributes of scf_new and libseccomp's syscall table are static), so a program built
 * with the same libseccomp for the same architecture is the one a compile now would
 * give (tests/test_seccomp.c compares them); any other libseccomp or architecture
 * compiles at run time as before. Part of the binary: nothing on disk to substitute.
 */
extern const struct scf_prog seccomp_builtin_prog __attribute__((weak));
extern const char seccomp_builtin_key[] __attribute__((weak));

int
seccomp_profile_key(char *out, size_t outlen)
{
	const struct scmp_version *v = seccomp_version();
	int n;

	if (v == NULL)
		return -1;
	n = snprintf(out, outlen, "libseccomp %u.%u.%u arch %u", v->major, v->minor, v->micro,
	    (unsigned)seccomp_arch_native());
	return n > 0 && (size_t)n < outlen ? 0 : -1;
}

int
seccomp_profile_compile(struct scf_prog *out, char *err, size_t errlen)
{
	scmp_filter_ctx ctx = seccomp_profile_build(err, errlen);

	if (ctx == NULL)
		return -1;
	return scf_compile(ctx, out, err, errlen);
}

int
seccomp_profile_prepare(char *err, size_t errlen)
{
	char key[64];

	if (prog.len > 0)
		return 0;
	if (&seccomp_builtin_prog != NULL && &seccomp_builtin_key != NULL &&
	    seccomp_builtin_prog.len > 0 && seccomp_builtin_prog.len <= BPF_MAXINSNS &&
	    seccomp_profile_key(key, sizeof(key)) == 0 &&
	    strcmp(key, seccomp_builtin_key) == 0) {
		prog = seccomp_builtin_prog;
		return 0;
	}
	return seccomp_profile_compile(&prog, err, errlen);
}

int
seccomp_profile_install(char *err, size_t errlen)
{
	/* no_new_privs is privs_drop's step (the spec's nnp_first): scf_install refuses
	 * when it is missing */
	if (seccomp_profile_prepare(err, errlen) != 0 || scf_install(&prog, err, errlen) != 0)
		return -1;
	return seccomp_profile_verify(err, errlen);
}

int
seccomp_profile_verify(char *err, size_t errlen)
{
	if (!scf_active())
		return errbuf_set(err, errlen, 0, "seccomp: mode is not 2 (filter) after loading");
	return 0;
}

/* Child side of the self-test: exit code names the first failing check. */
static int
selftest_child(void)
{
	char e[256];

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return 10;
	if (seccomp_profile_install(e, sizeof(e)) != 0)
		return 11;
	errno = 0;
	if (unshare(CLONE_NEWNS) != -1 || errno != EPERM)
		return 12;
	errno = 0;
	if (mount("none", "/", NULL, MS_REMOUNT, NULL) != -1 || errno != EPERM)
		return 13;
	errno = 0;
	if (socket(AF_NETLINK, SOCK_RAW, 0) != -1 || errno != EAFNOSUPPORT)
		return 14;
	errno = 0;
	if (syscall(SYS_clone3, NULL, 0) != -1 || errno != ENOSYS)
		return 15;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return 16;
	close(s);
	return 0;
}

pid_t
seccomp_profile_selftest_start(char *err, size_t errlen)
{
	pid_t pid;

	/* Compiled here, so the child and, later, the worker only install. */
	if (seccomp_profile_prepare(err, errlen) != 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		errbuf_set(err, errlen, 0, "seccomp self-test: fork failed: %s", strerror(errno));
		return -1;
	}
	if (pid == 0)
		_exit(selftest_child());
	return pid;
}

int
seccomp_profile_selftest_finish(pid_t pid, char *err, size_t errlen)
{
	int status = 0, rc;

	/* Bounded: at most SECCOMP_SELFTEST_TIMEOUT_MS, woken by the child's exit. */
	rc = procwait_deadline(pid, &status, SECCOMP_SELFTEST_TIMEOUT_MS);
	if (rc < 0) {
		errbuf_set(err, errlen, 0, "seccomp self-test: waitpid: %s", strerror(errno));
		return -1;
	}
	if (rc == 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		errbuf_set(err, errlen, 0, "seccomp self-test: child did not finish within %d ms",
		    SECCOMP_SELFTEST_TIMEOUT_MS);
		return -1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		errbuf_set(err, errlen, 0, "seccomp self-test: child killed by signal %d", WTERMSIG(status));
	else
		errbuf_set(err, errlen, 0, "seccomp self-test: check %d failed (10 nnp, 11 install, "
		    "12 unshare, 13 mount, 14 netlink, 15 clone3, 16 inet socket)",
		    WEXITSTATUS(status));
	return -1;
}

int
seccomp_profile_selftest(char *err, size_t errlen)
{
	pid_t pid = seccomp_profile_selftest_start(err, errlen);

	if (pid < 0)
		return -1;
	return seccomp_profile_selftest_finish(pid, err, errlen);
}
