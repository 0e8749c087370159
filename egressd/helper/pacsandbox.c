/*
 * pacsandbox - confinement of egressd-route-helper (see pacsandbox.h for what PAC
 * evaluation needs and why everything else is refused).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <grp.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/landlock.h>
#include <linux/netlink.h>

#include "egressd/helper/pacsandbox.h"

#include "common/scfilter.h"
#include "common/util.h"

#define NOBODY 65534

int
pacsandbox_drop(char *err, size_t errlen)
{
	uid_t r, e, s;

	if (getuid() != 0 && geteuid() != 0)
		return 0;
	if (setgroups(0, NULL) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
	    setresuid(NOBODY, NOBODY, NOBODY) != 0) {
		snprintf(err, errlen, "cannot switch to uid %d: %s", NOBODY, strerror(errno));
		return -1;
	}
	if (getresuid(&r, &e, &s) != 0 || r != NOBODY || e != NOBODY || s != NOBODY ||
	    getegid() != NOBODY || getgroups(0, NULL) != 0) {
		snprintf(err, errlen, "the switch to uid %d did not take", NOBODY);
		return -1;
	}
	return 0;
}

/* Calls a PAC evaluator never makes; each fails with EPERM. */
static const struct scf_rule pac_denied[] = {
	{ "execve", NULL }, { "execveat", NULL }, { "ptrace", NULL },
	{ "process_vm_readv", NULL }, { "process_vm_writev", NULL },
	{ "mount", NULL }, { "umount2", NULL }, { "pivot_root", NULL }, { "chroot", NULL },
	{ "unshare", NULL }, { "setns", NULL }, { "bpf", NULL }, { "perf_event_open", NULL },
	{ "keyctl", NULL }, { "add_key", NULL }, { "request_key", NULL },
	{ "init_module", NULL }, { "finit_module", NULL }, { "delete_module", NULL },
	{ "kexec_load", NULL }, { "kexec_file_load", NULL }, { "reboot", NULL },
	{ "swapon", NULL }, { "swapoff", NULL }, { "userfaultfd", NULL },
	{ "io_uring_setup", NULL }, { "io_uring_enter", NULL }, { "io_uring_register", NULL },
	{ "open_by_handle_at", NULL }, { "name_to_handle_at", NULL },
	{ "pidfd_getfd", NULL }, { "fanotify_init", NULL },
	/* No server of any kind, and no socket file: bind is refused outright (its fd 0/1
	 * is an AF_UNIX socket, and a bound path would create an inode wherever the egressd
	 * user may write — the decision-log directory). glibc's netlink helpers then fail
	 * and fall back (getaddrinfo still answers; integ.test_pac_confine). */
	{ "listen", NULL }, { "accept", NULL }, { "accept4", NULL }, { "bind", NULL },
	/* No hold over egressd (same uid after its drop) or another process: signals and
	 * limits are confined to the helper itself by the rules in rules_self(). */
	{ "tkill", NULL }, { "pidfd_open", NULL }, { "pidfd_send_signal", NULL },
	{ "ioprio_set", NULL }, { "process_madvise", NULL }, { "kcmp", NULL },
	/* Nor over files through fds it holds (stderr is egressd's): no truncation,
	 * punching, or locks that would block egressd's own (the log's lock). */
	{ "ftruncate", NULL }, { "fallocate", NULL }, { "flock", NULL },
	/* No file is changed: after egressd's drop the helper shares the egressd user's uid,
	 * which owns the decision-log directory and the PAC copy. */
	{ "creat", NULL }, { "openat2", NULL }, { "truncate", NULL },
	{ "unlink", NULL }, { "unlinkat", NULL }, { "rmdir", NULL },
	{ "rename", NULL }, { "renameat", NULL }, { "renameat2", NULL },
	{ "link", NULL }, { "linkat", NULL }, { "symlink", NULL }, { "symlinkat", NULL },
	{ "mkdir", NULL }, { "mkdirat", NULL }, { "mknod", NULL }, { "mknodat", NULL },
	{ "chmod", NULL }, { "fchmod", NULL }, { "fchmodat", NULL },
	{ "chown", NULL }, { "fchown", NULL }, { "lchown", NULL }, { "fchownat", NULL },
	{ "utime", NULL }, { "utimes", NULL }, { "utimensat", NULL }, { "futimesat", NULL },
	{ "setxattr", NULL }, { "lsetxattr", NULL }, { "fsetxattr", NULL },
	{ "removexattr", NULL }, { "lremovexattr", NULL }, { "fremovexattr", NULL },
};

/* System calls newer than libseccomp 2.5.4's table (common/scfilter resolves them by
 * number): each changes a file. */
static const struct scf_rule pac_denied_new[] = {
	{ "fchmodat2", NULL }, { "setxattrat", NULL }, { "removexattrat", NULL },
	{ "file_setattr", NULL },
};

/* fcntl commands that take a lock or lease (a lock on the decision log blocks egressd). */
static const int pac_fcntl_denied[] = {
	F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE,
};

/*
 * Calls that name a process: allowed only for the helper itself. kill/tgkill and the
 * sigqueue pair take a pid (the helper's own, for raise() and pthread_kill); prlimit and
 * the scheduling calls take 0 for "myself" (glibc's setrlimit/getrlimit pass 0).
 */
static int
rules_self(scmp_filter_ctx ctx)
{
	static const int by_pid[] = {
		SCMP_SYS(kill), SCMP_SYS(tgkill), SCMP_SYS(rt_sigqueueinfo),
		SCMP_SYS(rt_tgsigqueueinfo),
	};
	static const int by_zero[] = {
		SCMP_SYS(prlimit64), SCMP_SYS(sched_setaffinity), SCMP_SYS(sched_setscheduler),
		SCMP_SYS(sched_setparam), SCMP_SYS(sched_setattr),
	};
	static const unsigned long ns_flags[] = {
		CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS,
		CLONE_NEWCGROUP, CLONE_NEWTIME,
	};
	scmp_datum_t me = (scmp_datum_t)getpid();
	int rc = 0;

	for (size_t i = 0; i < sizeof(by_pid) / sizeof(by_pid[0]) && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), by_pid[i], 1,
		    SCMP_A0(SCMP_CMP_NE, me, 0));
	for (size_t i = 0; i < sizeof(by_zero) / sizeof(by_zero[0]) && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), by_zero[i], 1,
		    SCMP_A0(SCMP_CMP_NE, 0, 0));
	/* setpriority(which, who, prio): who 0 is the caller */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setpriority), 1,
		    SCMP_A1(SCMP_CMP_NE, 0, 0));
	for (size_t i = 0; i < sizeof(pac_fcntl_denied) / sizeof(pac_fcntl_denied[0]) &&
	    rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(fcntl), 1,
		    SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)pac_fcntl_denied[i], 0));
	/* threads yes, namespaces no (unshare and setns are denied above); clone3 hides its
	 * flags in memory: ENOSYS makes glibc fall back to clone */
	for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]) && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
		    SCMP_A0(SCMP_CMP_MASKED_EQ, (scmp_datum_t)ns_flags[i], (scmp_datum_t)ns_flags[i]));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	return rc;
}

/* open/openat flags that would write, create or truncate: only read-only opens pass. */
static const int pac_write_flags[] = { O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND };

static int
rules_open(scmp_filter_ctx ctx)
{
	int rc = 0;

	for (size_t i = 0; i < sizeof(pac_write_flags) / sizeof(pac_write_flags[0]) && rc == 0;
	    i++) {
		scmp_datum_t f = (scmp_datum_t)pac_write_flags[i];
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(open), 1,
		    SCMP_A1(SCMP_CMP_MASKED_EQ, f, f));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(openat), 1,
			    SCMP_A2(SCMP_CMP_MASKED_EQ, f, f));
	}
	return rc;
}

/* Socket types refused for AF_INET/AF_INET6: only SOCK_DGRAM (the stub resolver, and the
 * connect-without-sending trick some myIpAddress() implementations use) is kept. */
static const int pac_inet_denied_types[] = {
	SOCK_STREAM, SOCK_RAW, SOCK_RDM, SOCK_SEQPACKET, SOCK_DCCP, SOCK_PACKET,
};

static int
rules_socket(scmp_filter_ctx ctx)
{
	static const int inet[] = { AF_INET, AF_INET6 };
	int rc = 0;

	/* Every address family but the three kept, and any number past the last one. */
	for (int fam = 0; fam < AF_MAX && rc == 0; fam++) {
		if (fam == AF_INET || fam == AF_INET6 || fam == AF_NETLINK)
			continue;
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
		    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam, 0));
	}
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
		    SCMP_A0(SCMP_CMP_GE, (scmp_datum_t)AF_MAX, 0));
	for (size_t f = 0; f < sizeof(inet) / sizeof(inet[0]) && rc == 0; f++)
		for (size_t t = 0; t < sizeof(pac_inet_denied_types) /
		    sizeof(pac_inet_denied_types[0]) && rc == 0; t++)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
			    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)inet[f], 0),
			    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf,
			    (scmp_datum_t)pac_inet_denied_types[t]));
	/* datagram sockets: UDP only (protocol 0 or IPPROTO_UDP) — no ICMP ping sockets, no
	 * UDP-Lite, no L2TP */
	for (size_t f = 0; f < sizeof(inet) / sizeof(inet[0]) && rc == 0; f++) {
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 3,
		    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)inet[f], 0),
		    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_DGRAM),
		    SCMP_A2(SCMP_CMP_GT, IPPROTO_UDP, 0));
		for (int p = 1; p < IPPROTO_UDP && rc == 0; p++)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket),
			    3, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)inet[f], 0),
			    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_DGRAM),
			    SCMP_A2(SCMP_CMP_EQ, (scmp_datum_t)p, 0));
	}
	/* netlink: the routing family only (getifaddrs, address selection) */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
		    SCMP_A0(SCMP_CMP_EQ, AF_NETLINK, 0),
		    SCMP_A2(SCMP_CMP_NE, NETLINK_ROUTE, 0));
	return rc;
}

int
pacsandbox_filter(char *err, size_t errlen)
{
	/* A deny list; every thread, should libproxy ever start one before the filter. */
	static const struct scf_spec spec = { .default_action = SCMP_ACT_ALLOW, .tsync = true };
	scmp_filter_ctx ctx = scf_new(&spec, err, errlen);
	int rc;

	if (ctx == NULL)
		return -1;
	if (scf_add_table(ctx, SCMP_ACT_ERRNO(EPERM), pac_denied, EGRESS_NELEM(pac_denied), err,
	    errlen) != 0 ||
	    scf_add_table(ctx, SCMP_ACT_ERRNO(EPERM), pac_denied_new,
	    EGRESS_NELEM(pac_denied_new), err, errlen) != 0) {
		seccomp_release(ctx);
		return -1;
	}
	rc = rules_self(ctx);
	if (rc == 0)
		rc = rules_socket(ctx);
	if (rc == 0)
		rc = rules_open(ctx);
	if (rc != 0) {
		seccomp_release(ctx);
		return scf_rule_failed("(argument rules)", rc, err, errlen);
	}
	return scf_load(ctx, err, errlen);
}

/* Landlock rights newer than Debian 12's header. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

/* What the helper may read: the system's libraries and data (NSS modules and ICU are
 * loaded lazily), the resolver's and NSS's configuration, /proc (glibc reads
 * /proc/self/maps for the main thread's stack) and the CPU count, two devices, and the
 * PAC copy. Nothing else: not the decision logs, the configuration, keytabs or homes. */
static const char *const pac_read_paths[] = {
	"/usr", "/lib", "/lib64", "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf",
	"/etc/host.conf", "/etc/gai.conf", "/etc/ld.so.cache", "/etc/localtime",
	"/proc", "/sys/devices/system/cpu", "/dev/null", "/dev/urandom",
};

static int
landlock_allow(int ruleset, const char *path, uint64_t handled)
{
	struct landlock_path_beneath_attr pb;
	struct stat st;
	int fd, rc;

	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;   /* what the system lacks needs no rule */
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -1;
	}
	memset(&pb, 0, sizeof(pb));
	pb.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE |
	    (S_ISDIR(st.st_mode) ? LANDLOCK_ACCESS_FS_READ_DIR : 0);
	pb.allowed_access &= handled;
	pb.parent_fd = fd;
	rc = (int)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
	close(fd);
	return rc;
}

int
pacsandbox_landlock(const char *pac_path, char *err, size_t errlen)
{
	struct landlock_ruleset_attr ra;
	uint64_t handled;
	long abi;
	int rs;

	abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 0) {
		if (errno == ENOSYS || errno == EOPNOTSUPP)
			return 1;       /* not built or not enabled: the seccomp filter stays */
		snprintf(err, errlen, "landlock: %s", strerror(errno));
		return -1;
	}
	/* every file-system right this ABI knows is handled; only reads are granted */
	handled = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;
	if (abi >= 2)
		handled |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		handled |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	memset(&ra, 0, sizeof(ra));
	ra.handled_access_fs = handled;
	rs = (int)syscall(SYS_landlock_create_ruleset, &ra, sizeof(ra), 0);
	if (rs < 0) {
		snprintf(err, errlen, "landlock ruleset: %s", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < sizeof(pac_read_paths) / sizeof(pac_read_paths[0]); i++) {
		if (landlock_allow(rs, pac_read_paths[i], handled) != 0) {
			snprintf(err, errlen, "landlock rule %s: %s", pac_read_paths[i],
			    strerror(errno));
			close(rs);
			return -1;
		}
	}
	if (pac_path != NULL && landlock_allow(rs, pac_path, handled) != 0) {
		snprintf(err, errlen, "landlock rule %s: %s", pac_path, strerror(errno));
		close(rs);
		return -1;
	}
	if (syscall(SYS_landlock_restrict_self, rs, 0) != 0) {
		snprintf(err, errlen, "landlock restrict: %s", strerror(errno));
		close(rs);
		return -1;
	}
	close(rs);
	return 0;
}
