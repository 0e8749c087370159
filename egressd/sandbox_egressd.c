/*
 * sandbox_egressd - drop egressd to an unprivileged user and install its seccomp allow-list.
 * See sandbox_egressd.h for the order and docs/SECURITY.md "Privilege design" for why.
 *
 * The allow-list below was measured, not guessed: egressd and its route helper were run
 * under `strace -f -c` through the integration suite (basic, http, reload, log, PAC,
 * SOCKS, proxy auth, https proxy, Negotiate, system route, upstream, fault tests) in the
 * ASan build, and every call seen is listed with the reason egressd (or the helper, which
 * inherits this filter) makes it. A call that is not listed fails with EPERM; the short
 * KILL list is what only an attacker would call.
 */
#define _GNU_SOURCE 1
#include "egressd/sandbox_egressd.h"

#include <cap-ng.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <pwd.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/scfilter.h"
#include "common/util.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define SANDBOX_HAVE_VALGRIND 1
#endif
#endif

#define SOCK_TYPE_MASK_KERNEL 0xfULL   /* include/linux/net.h SOCK_TYPE_MASK */

#if defined(__SANITIZE_ADDRESS__)
#define SANDBOX_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define SANDBOX_UNDER_SANITIZER 1
#endif
#endif


/* Allowed as they are (arguments unchecked). */
static const struct scf_rule allowed[] = {
	/* moving bytes: sockets, pipes, the decision log, the PAC copy */
	{ "read", "sockets, pipes, the route helper's replies, files at reload" },
	{ "write", "sockets, pipes, the decision log, stderr" },
	{ "readv", "libevent evbuffer reads" },
	{ "writev", "libevent evbuffer writes" },
	{ "pread64", "reading files (config at reload, PAC file, CA store)" },
	{ "pwrite64", "glibc/openssl file writes" },
	{ "splice", "tunnels between plain sockets (splice mode)" },
	{ "tee", "not used today; the splice family, harmless" },
	{ "pipe2", "splice pipes, the route helper's stdio, libevent's notify pipe" },
	{ "pipe", "older glibc paths of pipe2" },
	{ "sendfile", "openssl/glibc may use it; harmless on fds egressd holds" },
	{ "close", "every fd" },
	{ "close_range", "the route helper closes every inherited fd before exec (closefrom)" },
	{ "dup", "stdio of the route helper" },
	{ "dup2", "stdio of the route helper" },
	{ "dup3", "stdio of the route helper" },
	{ "memfd_create", "the route helper captures libproxy's debug output per lookup in an "
	    "anonymous memory file (its own WPAD/PAC is refused, egressd/helper/main.c)" },
	{ "fcntl", "O_NONBLOCK, FD_CLOEXEC, F_SETPIPE_SZ, decision-log lock (F_OFD_SETLK)" },
	{ "flock", "the decision log: two writers on one chain would fork it" },
	{ "lseek", "files (decision log tail at reopen, PAC copy)" },
	{ "fsync", "log_sync = always / batch" },
	{ "fdatasync", "log_sync = always / batch" },
	{ "ftruncate", "a torn decision-log tail is cut back at open/reopen" },
	/* files: config at reload, PAC copy, CA store, /proc for the metrics */
	{ "openat", "config (reload), decision log (SIGUSR1 reopen), PAC copy, CA files, /proc" },
	{ "open", "older glibc paths of openat" },
	{ "newfstatat", "stat of files and fds" },
	{ "fstat", "stat of fds" },
	{ "stat", "older glibc paths of newfstatat" },
	{ "lstat", "older glibc paths of newfstatat" },
	{ "statx", "glibc stat family" },
	{ "statfs", "glibc / openssl" },
	{ "fstatfs", "glibc / openssl" },
	{ "access", "the route helper path check (X_OK) at reload" },
	{ "faccessat", "the route helper path check (X_OK) at reload" },
	{ "faccessat2", "the route helper path check (X_OK) at reload" },
	{ "readlink", "/proc/self/exe: the route helper next to egressd" },
	{ "readlinkat", "/proc/self/exe: the route helper next to egressd" },
	{ "getdents64", "the CA directory, closefrom fallbacks" },
	{ "rename", "the PAC copy is installed by rename" },
	{ "renameat", "the PAC copy is installed by rename" },
	{ "renameat2", "the PAC copy is installed by rename" },
	{ "unlink", "temporary PAC copy after a failed install; control socket at exit" },
	{ "unlinkat", "temporary PAC copy after a failed install; control socket at exit" },
	{ "fchmod", "the PAC copy's mode" },
	{ "chmod", "the control socket's mode (start-up; after the drop only on files it owns)" },
	{ "umask", "glibc/openssl" },
	{ "getcwd", "glibc realpath" },
	/* memory */
	{ "brk", "malloc" },
	{ "mmap", "malloc, thread stacks, shared libraries of the route helper" },
	{ "munmap", "malloc" },
	{ "mremap", "realloc of large buffers" },
	{ "mprotect", "thread stack guards, the helper's dynamic loader" },
	{ "madvise", "malloc trimming" },
	{ "mincore", "the sanitizers' and libunwind's pointer checks" },
	{ "membarrier", "glibc/libstdc++ of the helper's JavaScript engine" },
	/* time and waiting */
	{ "clock_gettime", "timers, record times (vDSO fallback)" },
	{ "clock_getres", "libevent" },
	{ "clock_nanosleep", "bounded waits" },
	{ "nanosleep", "bounded waits" },
	{ "gettimeofday", "libevent/c-ares (vDSO fallback)" },
	{ "time", "vDSO fallback" },
	{ "epoll_create1", "the event loop" },
	{ "epoll_create", "the event loop (older libevent)" },
	{ "epoll_ctl", "the event loop" },
	{ "epoll_wait", "the event loop" },
	{ "epoll_pwait", "the event loop" },
	{ "epoll_pwait2", "the event loop" },
	{ "poll", "c-ares, openssl, the route helper" },
	{ "ppoll", "c-ares, openssl" },
	{ "select", "libevent fallback" },
	{ "pselect6", "libevent fallback" },
	{ "eventfd2", "libevent thread notification" },
	{ "timerfd_create", "libevent timers" },
	{ "timerfd_settime", "libevent timers" },
	{ "futex", "the decision-log writer thread, GSS threads" },
	{ "futex_waitv", "glibc locks" },
	{ "sched_yield", "glibc locks" },
	{ "sched_getaffinity", "glibc (nproc) and the sanitizers" },
	{ "restart_syscall", "interrupted sleeps" },
	/* network (socket itself is filtered by family and type below) */
	{ "socketpair", "libevent signal delivery; the route helper, started under this filter, compiles its own (common/scfilter)" },
	{ "bind", "new listeners for dynamic grants, upstream sockets" },
	{ "listen", "new listeners for dynamic grants" },
	{ "accept", "client connections" },
	{ "accept4", "client connections" },
	{ "connect", "origins, upstream proxies, DNS servers" },
	{ "getsockname", "listener and connection addresses" },
	{ "getpeername", "client addresses, the control peer" },
	{ "setsockopt", "SO_BINDTODEVICE once on a new listener, TCP options, buffer sizes" },
	{ "getsockopt", "SO_ERROR after connect, SO_PEERCRED on the control socket, "
	    "SO_ORIGINAL_DST of a captured connection, SO_TYPE of a passed stub socket" },
	{ "sendto", "DNS over UDP, the run stub resolver's answers, sockets" },
	{ "recvfrom", "DNS over UDP, sockets" },
	{ "sendmsg", "sockets" },
	{ "recvmsg", "sockets, netlink replies" },
	{ "sendmmsg", "glibc resolver paths" },
	{ "recvmmsg", "glibc resolver paths" },
	{ "shutdown", "half-close of tunnels" },
	/* processes: threads, the route helper */
	{ "execve", "starting the route helper (egressd-route-helper); see docs/SECURITY.md" },
	{ "wait4", "reaping the route helper" },
	{ "waitid", "reaping the route helper" },
	{ "kill", "killing a hung route helper" },
	{ "tgkill", "glibc raise/abort, sanitizers" },
	{ "tkill", "glibc raise" },
	{ "exit", "threads" },
	{ "exit_group", "exit" },
	{ "getpid", "records, logs" },
	{ "gettid", "logs, glibc" },
	{ "getppid", "the route helper notices a dead parent" },
	{ "getuid", "proxycreds ownership check" },
	{ "geteuid", "proxycreds ownership check, the helper's drop check" },
	{ "getgid", "glibc" },
	{ "getegid", "glibc" },
	{ "getresuid", "privilege read-back" },
	{ "getresgid", "privilege read-back" },
	{ "getgroups", "privilege read-back" },
	{ "getpgrp", "glibc" },
	{ "setsid", "the route helper gets its own session" },
	{ "setpgid", "the route helper gets its own process group" },
	{ "rt_sigaction", "signal handlers (libevent), the helper resets them" },
	{ "rt_sigprocmask", "threads block signals" },
	{ "rt_sigreturn", "signal delivery" },
	{ "rt_sigtimedwait", "glibc" },
	{ "sigaltstack", "the sanitizers' and the helper's stacks" },
	{ "set_robust_list", "new threads" },
	{ "get_robust_list", "glibc" },
	{ "set_tid_address", "new threads/processes" },
	{ "rseq", "glibc registers restartable sequences per thread" },
	{ "arch_prctl", "thread-local storage of a new process (the route helper)" },
	{ "prctl", "thread names, PR_SET_NO_NEW_PRIVS/PDEATHSIG in the helper, sanitizers" },
	{ "getrlimit", "glibc/sanitizers" },
	{ "prlimit64", "glibc getrlimit; raising the soft fd limit" },
	{ "setrlimit", "glibc" },
	{ "getrusage", "CPU time in the metrics" },
	{ "times", "glibc clock()" },
	{ "sysinfo", "glibc/openssl" },
	{ "uname", "glibc/openssl" },
	{ "getrandom", "openssl, c-ares query ids, hash seeds" },
	{ "getpriority", "glibc" },
	{ "capget", "libcap-ng read-back in the route helper" },
	{ "setgroups", "the route helper's drop (only when it starts as root: not after the drop)" },
	{ "setresuid", "the route helper's drop (only when it starts as root: not after the drop)" },
	{ "setresgid", "the route helper's drop (only when it starts as root: not after the drop)" },
	{ "seccomp", "the route helper installs its own, stricter filter" },
	{ "landlock_create_ruleset", "the route helper restricts its own file access" },
	{ "landlock_add_rule", "the route helper restricts its own file access" },
	{ "landlock_restrict_self", "the route helper restricts its own file access" },
#ifdef SANDBOX_UNDER_SANITIZER
	/* LeakSanitizer stops the world at exit with a ptracing clone of the process. */
	{ "ptrace", "sanitizer builds only: LeakSanitizer's StopTheWorld" },
	{ "process_vm_readv", "sanitizer builds only: LeakSanitizer" },
	{ "getdents", "sanitizer builds only: LeakSanitizer lists /proc/self/task with it "
	    "(the x86_64 sanitizer runtime uses the old call)" },
#endif
};

/* Kill the process: no egressd code path makes these calls; an attacker would. (Keyrings
 * are not here: a Kerberos KEYRING: credential cache would use them; they get EPERM.) */
static const struct scf_rule killed[] = {
#ifndef SANDBOX_UNDER_SANITIZER
	{ "ptrace", "inspect or control another process" },
	{ "process_vm_readv", "read another process's memory" },
#endif
	{ "process_vm_writev", "write another process's memory" },
	{ "mount", "change the file system view" },
	{ "umount2", "change the file system view" },
	{ "pivot_root", "change the file system view" },
	{ "chroot", "change the file system view" },
	{ "unshare", "new namespaces" },
	{ "setns", "enter other namespaces" },
	{ "init_module", "kernel modules" },
	{ "finit_module", "kernel modules" },
	{ "delete_module", "kernel modules" },
	{ "kexec_load", "replace the kernel" },
	{ "kexec_file_load", "replace the kernel" },
	{ "reboot", "reboot" },
	{ "bpf", "kernel attack surface" },
	{ "perf_event_open", "kernel attack surface, side channels" },
	{ "userfaultfd", "kernel exploitation primitive" },
	{ "open_by_handle_at", "escape a mount namespace by file handle" },
	{ "name_to_handle_at", "file handles" },
	{ "swapon", "system administration" },
	{ "swapoff", "system administration" },
	{ "acct", "system administration" },
	{ "settimeofday", "system administration" },
	{ "clock_settime", "system administration" },
	{ "adjtimex", "system administration" },
	{ "iopl", "port I/O" },
	{ "ioperm", "port I/O" },
	{ "io_uring_setup", "bypasses seccomp for the operations it performs" },
	{ "io_uring_enter", "bypasses seccomp for the operations it performs" },
	{ "io_uring_register", "bypasses seccomp for the operations it performs" },
	{ "fanotify_init", "file system monitoring" },
	{ "lookup_dcookie", "kernel attack surface" },
	{ "move_mount", "change the file system view" },
	{ "open_tree", "change the file system view" },
	{ "fsopen", "change the file system view" },
	{ "fsmount", "change the file system view" },
	{ "fsconfig", "change the file system view" },
	{ "fspick", "change the file system view" },
	{ "mount_setattr", "change the file system view" },
	{ "pidfd_getfd", "steal another process's fds" },
};

static int
filter_build(scmp_filter_ctx ctx, char *err, size_t errlen)
{
	static const int families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
	static const int types[] = { SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET };
	static const unsigned long ioctls[] = { FIONREAD, FIONBIO, FIOCLEX, FIONCLEX, TCGETS };
	int nr, rc;

	if (scf_add_table(ctx, SCMP_ACT_ALLOW, allowed, EGRESS_NELEM(allowed), err, errlen) != 0 ||
	    scf_add_table(ctx, SCMP_ACT_KILL_PROCESS, killed, EGRESS_NELEM(killed), err,
	    errlen) != 0)
		return -1;
	/* ioctl: only what libevent and stdio ask (measured: FIONREAD, FIONBIO); never
	 * TIOCSTI or other terminal/device requests. */
	for (size_t i = 0; i < EGRESS_NELEM(ioctls); i++) {
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
		    SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)ioctls[i], 0));
		if (rc != 0)
			return scf_rule_failed("ioctl", rc, err, errlen);
	}
	/* clone3 passes its flags in memory the filter cannot read: ENOSYS makes glibc fall
	 * back to clone(2), whose flags it can. */
	if ((nr = scf_resolve("clone3")) >= 0 &&
	    (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0)) != 0)
		return scf_rule_failed("clone3", rc, err, errlen);
	/* clone for threads and the route helper; never a new namespace. */
	rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, (scmp_datum_t)(CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID |
	    CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWTIME), 0));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(vfork), 0);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fork), 0);
	if (rc != 0)
		return scf_rule_failed("clone", rc, err, errlen);
	/* socket: the families egressd uses (control socket and stderr logging; IPv4/IPv6;
	 * netlink for interface lookups), and among those never a raw or packet socket. */
	for (size_t i = 0; i < EGRESS_NELEM(families); i++) {
		for (size_t j = 0; j < EGRESS_NELEM(types); j++) {
			rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
			    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i], 0),
			    SCMP_A1(SCMP_CMP_MASKED_EQ, SOCK_TYPE_MASK_KERNEL,
			    (scmp_datum_t)types[j]));
			if (rc != 0)
				return scf_rule_failed("socket", rc, err, errlen);
		}
	}
	/* netlink route sockets only raw-typed: glibc's if_nametoindex/getifaddrs use
	 * socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE); allowed for NETLINK_ROUTE only. */
	rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 3,
	    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)AF_NETLINK, 0),
	    SCMP_A1(SCMP_CMP_MASKED_EQ, SOCK_TYPE_MASK_KERNEL, (scmp_datum_t)SOCK_RAW),
	    SCMP_A2(SCMP_CMP_EQ, 0 /* NETLINK_ROUTE */, 0));
	if (rc != 0)
		return scf_rule_failed("netlink", rc, err, errlen);
	return 0;
}

int
sandbox_egressd_filter(char *err, size_t errlen)
{
	/* An allow list. The decision-log writer thread (and any GSS thread) already runs:
	 * every thread gets the filter, or none does. */
	static const struct scf_spec spec = { .default_action = SCMP_ACT_ERRNO(EPERM),
		.tsync = true };
	scmp_filter_ctx ctx = scf_new(&spec, err, errlen);

	if (ctx == NULL)
		return -1;
	if (filter_build(ctx, err, errlen) != 0) {
		seccomp_release(ctx);
		return -1;
	}
	if (scf_load(ctx, err, errlen) != 0)
		return -1;
	if (!sandbox_egressd_filtered()) {
		snprintf(err, errlen, "seccomp filter not in effect after loading it");
		return -1;
	}
	return 0;
}

/* The value of "Key:\t..." in /proc/self/status, or NULL. */
static const char *
status_field(const char *status, const char *key, char *out, size_t outlen)
{
	size_t kl = strlen(key);
	const char *p = status;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, key, kl) == 0 && p[kl] == ':') {
			const char *v = p + kl + 1, *e;
			size_t n;

			while (*v == ' ' || *v == '\t')
				v++;
			e = strchr(v, '\n');
			n = e != NULL ? (size_t)(e - v) : strlen(v);
			if (n >= outlen)
				n = outlen - 1;
			memcpy(out, v, n);
			out[n] = '\0';
			return out;
		}
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return NULL;
}

static int
read_status(char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/status", "re");
	size_t n;

	if (f == NULL)
		return -1;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	return 0;
}

bool
sandbox_egressd_filtered(void)
{
	return scf_active();
}

int
sandbox_egressd_lookup(const char *user, struct sandbox_egressd_user *out, char *err,
    size_t errlen)
{
	struct passwd *pw;
	long long n;
	const char *e = NULL;

	memset(out, 0, sizeof(*out));
	if (user == NULL || user[0] == '\0' || strlen(user) >= sizeof(out->name)) {
		snprintf(err, errlen, "no user to run as");
		return -1;
	}
	if (num_parse(user, 0, 0x7fffffffLL, &n, &e) == 0) {
		out->uid = (uid_t)n;
		pw = getpwuid(out->uid);
		out->gid = pw != NULL ? pw->pw_gid : (gid_t)n;
	} else {
		pw = getpwnam(user);
		if (pw == NULL) {
			snprintf(err, errlen, "user %s does not exist (create the egressd system "
			    "user, see docs/SECURITY.md)", user);
			return -1;
		}
		out->uid = pw->pw_uid;
		out->gid = pw->pw_gid;
	}
	snprintf(out->name, sizeof(out->name), "%s", user);
	if (out->uid == 0 || out->gid == 0) {
		snprintf(err, errlen, "user %s is uid/gid 0: egressd must not keep root", user);
		return -1;
	}
	return 0;
}

int
sandbox_egressd_resolve(const char *user, struct sandbox_egressd_user *out, bool *fell_back,
    char *err, size_t errlen)
{
	*fell_back = false;
	if (user != NULL)
		return sandbox_egressd_lookup(user, out, err, errlen);
	/* The dedicated account when the administrator created it (make install does). */
	if (getpwnam(SANDBOX_EGRESSD_DEFAULT_USER) != NULL)
		return sandbox_egressd_lookup(SANDBOX_EGRESSD_DEFAULT_USER, out, err, errlen);
	if (getpwnam(SANDBOX_EGRESSD_FALLBACK_USER) == NULL) {
		snprintf(err, errlen, "neither the %s nor the %s account exists: create the %s "
		    "system user (make install does; see docs/SECURITY.md) or name one with -u or "
		    "[egressd] user", SANDBOX_EGRESSD_DEFAULT_USER, SANDBOX_EGRESSD_FALLBACK_USER,
		    SANDBOX_EGRESSD_DEFAULT_USER);
		return -1;
	}
	*fell_back = true;
	return sandbox_egressd_lookup(SANDBOX_EGRESSD_FALLBACK_USER, out, err, errlen);
}

/* "Uid:"/"Gid:" of a status file: four ids (real, effective, saved, fs) all equal to id. */
static bool
status_ids_are(const char *status, const char *key, unsigned id)
{
	char v[128], want[16];
	const char *p;
	int n = 0;

	if (status_field(status, key, v, sizeof(v)) == NULL)
		return false;
	snprintf(want, sizeof(want), "%u", id);
	for (p = v; *p != '\0'; n++) {
		size_t l = strcspn(p, " \t");

		if (l != strlen(want) || memcmp(p, want, l) != 0)
			return false;
		p += l;
		p += strspn(p, " \t");
	}
	return n == 4;
}

/* One thread's status file: the checks described in sandbox_egressd.h. */
static int
thread_check(const char *status, const char *tid, const struct sandbox_egressd_user *u,
    bool bnd, char *err, size_t errlen)
{
	static const char *const dropped[] = { "CapInh", "CapPrm", "CapEff", "CapAmb" };
	char v[64];

	if (bnd && (status_field(status, "CapBnd", v, sizeof(v)) == NULL ||
	    strspn(v, "0") != strlen(v))) {
		snprintf(err, errlen, "thread %s: CapBnd is %s, want 0", tid,
		    status_field(status, "CapBnd", v, sizeof(v)) != NULL ? v : "missing");
		return -1;
	}
	if (status_field(status, "NoNewPrivs", v, sizeof(v)) == NULL || strcmp(v, "1") != 0) {
		snprintf(err, errlen, "thread %s: no_new_privs not set", tid);
		return -1;
	}
	if (u == NULL)
		return 0;   /* no drop (confine): see sandbox_egressd_verify_threads */
	for (size_t i = 0; i < EGRESS_NELEM(dropped); i++) {
		if (status_field(status, dropped[i], v, sizeof(v)) == NULL) {
			if (strcmp(dropped[i], "CapAmb") == 0)
				continue;   /* kernels before 4.3 */
			snprintf(err, errlen, "thread %s: %s missing", tid, dropped[i]);
			return -1;
		}
		if (strspn(v, "0") != strlen(v)) {
			snprintf(err, errlen, "thread %s: %s is %s, want 0", tid,
			    dropped[i], v);
			return -1;
		}
	}
	if (!status_ids_are(status, "Uid", (unsigned)u->uid) ||
	    !status_ids_are(status, "Gid", (unsigned)u->gid)) {
		snprintf(err, errlen, "thread %s: uids/gids not all %u/%u after the drop", tid,
		    (unsigned)u->uid, (unsigned)u->gid);
		return -1;
	}
	return 0;
}

int
sandbox_egressd_verify_threads(const struct sandbox_egressd_user *u, bool bnd, char *err,
    size_t errlen)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *de;
	int rc = 0, n = 0;

	if (dir == NULL) {
		snprintf(err, errlen, "cannot list /proc/self/task: %s", strerror(errno));
		return -1;
	}
	while (rc == 0 && (de = readdir(dir)) != NULL) {
		char path[sizeof("/proc/self/task//status") + 256], buf[4096];
		int fd;
		ssize_t len;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;   /* the thread exited meanwhile */
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			rc = -1;
			break;
		}
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0) {
			if (len == 0 || errno == ESRCH)
				continue;   /* exited between open and read */
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			rc = -1;
			break;
		}
		buf[len] = '\0';
		rc = thread_check(buf, de->d_name, u, bnd, err, errlen);
		n++;
	}
	closedir(dir);
	if (rc == 0 && n == 0) {
		snprintf(err, errlen, "no thread found in /proc/self/task");
		rc = -1;
	}
	return rc;
}

int
sandbox_egressd_early(char *err, size_t errlen)
{
	/* Per thread, inherited by threads created later: done before the first one (the
	 * decision-log writer, GSS threads), so no thread ever holds a bounding set or may
	 * gain privileges through exec. Nothing egressd executes needs either: the route
	 * helper is started after the drop, as the egressd user. Root empties the bounding
	 * set (keeping its effective capabilities for start-up: binding, reading root-only
	 * files); another user can only when it holds CAP_SETPCAP. */
	if (capng_get_caps_process() != 0) {
		snprintf(err, errlen, "cannot read the process capabilities");
		return -1;
	}
	if (geteuid() == 0 || capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP)) {
		capng_clear(CAPNG_SELECT_BOUNDS);
		if (capng_apply(CAPNG_SELECT_BOUNDS) != 0) {
			snprintf(err, errlen, "cannot empty the capability bounding set");
			return -1;
		}
		/* capng keeps its own view: load the process's again for later callers */
		if (capng_get_caps_process() != 0) {
			snprintf(err, errlen, "cannot read the process capabilities");
			return -1;
		}
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		snprintf(err, errlen, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* CapInh/CapPrm/CapEff/CapAmb (and CapBnd when bnd) all zero, NoNewPrivs 1. */
static int
verify_caps(bool bnd, char *err, size_t errlen)
{
	static const char *const caps[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
	char buf[4096], v[64];

	if (read_status(buf, sizeof(buf)) != 0) {
		snprintf(err, errlen, "cannot read /proc/self/status: %s", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < EGRESS_NELEM(caps); i++) {
		if (!bnd && strcmp(caps[i], "CapBnd") == 0)
			continue;
		if (status_field(buf, caps[i], v, sizeof(v)) == NULL) {
			if (strcmp(caps[i], "CapAmb") == 0)
				continue;   /* kernels before 4.3 */
			snprintf(err, errlen, "%s missing from /proc/self/status", caps[i]);
			return -1;
		}
		if (strspn(v, "0") != strlen(v)) {
			snprintf(err, errlen, "%s is %s after the drop, want 0", caps[i], v);
			return -1;
		}
	}
	if (status_field(buf, "NoNewPrivs", v, sizeof(v)) == NULL || strcmp(v, "1") != 0) {
		snprintf(err, errlen, "no_new_privs not set after the drop");
		return -1;
	}
	return 0;
}

static int
verify(const struct sandbox_egressd_user *u, char *err, size_t errlen)
{
	uid_t r, e, s;
	gid_t rg, eg, sg, groups[4];
	int ng;

	if (getresuid(&r, &e, &s) != 0 || r != u->uid || e != u->uid || s != u->uid) {
		snprintf(err, errlen, "uids not all %u after the drop", (unsigned)u->uid);
		return -1;
	}
	if (getresgid(&rg, &eg, &sg) != 0 || rg != u->gid || eg != u->gid || sg != u->gid) {
		snprintf(err, errlen, "gids not all %u after the drop", (unsigned)u->gid);
		return -1;
	}
	ng = getgroups((int)EGRESS_NELEM(groups), groups);
	if (ng < 0 || ng > 1 || (ng == 1 && groups[0] != u->gid)) {
		snprintf(err, errlen, "supplementary groups left after the drop");
		return -1;
	}
	if (verify_caps(true, err, errlen) != 0)
		return -1;
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) {
		snprintf(err, errlen, "still dumpable after the drop");
		return -1;
	}
	if (sandbox_egressd_verify_threads(u, true, err, errlen) != 0)
		return -1;
	/* Try the thing that must now fail. */
	if (setresuid(0, 0, 0) == 0) {
		snprintf(err, errlen, "setresuid(0) succeeded after the drop");
		return -1;
	}
	return 0;
}

/* Empty the permitted, effective, inheritable and ambient sets of the calling thread. */
static int
caps_clear(char *err, size_t errlen)
{
	capng_clear(CAPNG_SELECT_ALL);
	if (capng_apply(CAPNG_SELECT_CAPS) != 0) {
		snprintf(err, errlen, "cannot clear the capability sets");
		return -1;
	}
#ifdef CAPNG_SELECT_AMBIENT
	(void)capng_apply(CAPNG_SELECT_AMBIENT);
#endif
	return 0;
}

int
sandbox_egressd_drop(const struct sandbox_egressd_user *u, char *err, size_t errlen)
{
	gid_t g = u->gid;
	int pdeath = 0;
	pid_t ppid = getppid();

	if (u->uid == 0 || u->gid == 0) {
		snprintf(err, errlen, "refusing to drop to uid/gid 0");
		return -1;
	}
	/* egress-exec starts its private egressd with PR_SET_PDEATHSIG so that it dies with
	 * it; the kernel clears that signal when the credentials change below. Remember it
	 * (and the parent it was about) to arm it again afterwards. */
	if (prctl(PR_GET_PDEATHSIG, (unsigned long)&pdeath, 0, 0, 0) != 0) {
		snprintf(err, errlen, "PR_GET_PDEATHSIG: %s", strerror(errno));
		return -1;
	}
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0) {
		snprintf(err, errlen, "PR_SET_KEEPCAPS: %s", strerror(errno));
		return -1;
	}
	/* The bounding set is emptied while CAP_SETPCAP is still held. */
	capng_clear(CAPNG_SELECT_ALL);
	if (capng_apply(CAPNG_SELECT_BOUNDS) != 0) {
		snprintf(err, errlen, "cannot empty the capability bounding set (not root?)");
		return -1;
	}
	if (setgroups(1, &g) != 0) {
		snprintf(err, errlen, "setgroups: %s", strerror(errno));
		return -1;
	}
	if (setresgid(u->gid, u->gid, u->gid) != 0) {
		snprintf(err, errlen, "setresgid(%u): %s", (unsigned)u->gid, strerror(errno));
		return -1;
	}
	if (setresuid(u->uid, u->uid, u->uid) != 0) {
		snprintf(err, errlen, "setresuid(%u): %s", (unsigned)u->uid, strerror(errno));
		return -1;
	}
	/* The uid change cleared permitted and effective; clear inheritable and ambient too. */
	if (caps_clear(err, errlen) != 0)
		return -1;
	/* Not dumpable: the route helper now shares egressd's uid and must not ptrace it or
	 * read /proc/<egressd>/mem (its own filter also denies ptrace). No core dumps with
	 * credentials in them. Only after the uid change: a change of the effective uid
	 * resets the flag to fs.suid_dumpable (which may be 1), undoing an earlier one. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
		snprintf(err, errlen, "PR_SET_DUMPABLE: %s", strerror(errno));
		return -1;
	}
	if (pdeath != 0) {
		if (prctl(PR_SET_PDEATHSIG, (unsigned long)pdeath, 0, 0, 0) != 0) {
			snprintf(err, errlen, "PR_SET_PDEATHSIG: %s", strerror(errno));
			return -1;
		}
		/* A parent that died while no signal was armed sent none: notice it here. */
		if (getppid() != ppid) {
			snprintf(err, errlen, "the parent process (pid %ld) exited during the drop "
			    "and egressd was started to die with it", (long)ppid);
			return -1;
		}
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		snprintf(err, errlen, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -1;
	}
	return verify(u, err, errlen);
}

int
sandbox_egressd_give(int fd, const char *name, const struct sandbox_egressd_user *u,
    char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s: %s", name, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || (st.st_uid != 0 && st.st_uid != u->uid)) {
		snprintf(err, errlen, "%s: not a single-link regular file of root or %s; left as "
		    "it is", name, u->name);
		return -1;
	}
	if ((st.st_uid != u->uid || st.st_gid != u->gid) && fchown(fd, u->uid, u->gid) != 0) {
		snprintf(err, errlen, "%s: fchown: %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

int
sandbox_egressd_confine(char *err, size_t errlen)
{
	if (getuid() == 0 || geteuid() == 0) {
		snprintf(err, errlen, "confine is for a non-root egressd; root must drop");
		return -1;
	}
	/* No core dump or same-uid ptrace of a process holding proxy credentials (no
	 * credential change happens here, so the parent-death signal stays armed). */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
		snprintf(err, errlen, "PR_SET_DUMPABLE: %s", strerror(errno));
		return -1;
	}
	/* Capabilities a service manager may have given (AmbientCapabilities= for a low
	 * port, file capabilities): start-up is done, nothing at run time needs them. The
	 * bounding set can only be emptied while CAP_SETPCAP is held; without it,
	 * no_new_privs already keeps an exec from gaining anything. */
	if (capng_get_caps_process() != 0) {
		snprintf(err, errlen, "cannot read the process capabilities");
		return -1;
	}
	if (capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP)) {
		capng_clear(CAPNG_SELECT_ALL);
		if (capng_apply(CAPNG_SELECT_BOUNDS) != 0) {
			snprintf(err, errlen, "cannot empty the capability bounding set");
			return -1;
		}
	}
	if (caps_clear(err, errlen) != 0)
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		snprintf(err, errlen, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -1;
	}
	if (verify_caps(false, err, errlen) != 0)
		return -1;
	/* Every thread (the decision-log writer runs already): no_new_privs from
	 * sandbox_egressd_early. Capability sets are per thread and nothing can clear
	 * another thread's (no set*id transition from uid 0 here to do it for us): a thread
	 * started holding capabilities a service manager gave keeps them (docs/SECURITY.md). */
	return sandbox_egressd_verify_threads(NULL, false, err, errlen);
}

bool
sandbox_egressd_under_valgrind(void)
{
#ifdef SANDBOX_HAVE_VALGRIND
	return RUNNING_ON_VALGRIND != 0;
#else
	return false;
#endif
}

bool
sandbox_egressd_valgrind_optin(void)
{
	const char *v = getenv("EGRESSD_VALGRIND");

	return v != NULL && strcmp(v, "1") == 0;
}
