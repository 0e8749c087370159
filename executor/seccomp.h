/*
 * seccomp - the worker's system-call filter (libseccomp), installed last before exec.
 *
 * Owns: the profile (one table in seccomp.c, documented entry by entry in docs/seccomp.md).
 * Default action: allow. Listed calls fail with EPERM unless the table says otherwise
 * (clone3 -> ENOSYS so libc falls back to clone, whose flags the filter can inspect;
 * socket families other than AF_INET/AF_INET6/AF_UNIX -> EAFNOSUPPORT). Only the native
 * architecture (x86_64 / aarch64 ...) is in the filter; any other architecture (i386 via
 * int 0x80, x32) hits the bad-architecture action, which kills the process.
 * Callers: executor/sandbox.c (in the worker's init/child, after privs_drop, right before
 * execve), doctor/attestation (seccomp_profile_selftest).
 *
 * Names: prefixed seccomp_profile_ so they can never clash with libseccomp's seccomp_*.
 */
#ifndef EGRESS_SECCOMP_H
#define EGRESS_SECCOMP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* One entry of the profile, for docs, doctor and tests. All strings static. */
struct seccomp_profile_entry {
	const char *syscall;    /* libseccomp name ("mount") */
	const char *condition;  /* "" = always; else e.g. "flags & CLONE_NEWNS" */
	int err;                /* errno returned (EPERM, ENOSYS, EAFNOSUPPORT) */
	const char *reason;     /* why the worker must not have it */
};

/* The profile table; *n receives its length. */
const struct seccomp_profile_entry *seccomp_profile_entries(size_t *n);

/*
 * Compile the filter once for this process (scf_compile: libseccomp, exported as BPF into
 * a static struct scf_prog), or take the program compiled at build time when it was made
 * with this libseccomp for this architecture (seccomp_profile_key); later calls return
 * at once. Call it in the supervisor before forking, so the
 * self-test child and the worker inherit the compiled program and only install it (the
 * inputs are all static, so the program is the one a compile in the child would give).
 * Returns 0, or -1 with err filled. Allocates (libseccomp).
 */
int seccomp_profile_prepare(char *err, size_t errlen);

/*
 * Compile the filter now, whatever was prepared, into out (for the build-time generator,
 * executor/gen/seccomp_gen.c, and the test comparing its program with this one). Returns
 * 0, or -1 with err. Allocates (libseccomp).
 */
struct scf_prog;
int seccomp_profile_compile(struct scf_prog *out, char *err, size_t errlen);

/*
 * What a compiled program depends on besides the profile: libseccomp's version and the
 * native architecture, as one string into out. seccomp_profile_prepare uses the program
 * compiled at build time only when its key equals this. 0, or -1 when out is too small.
 */
int seccomp_profile_key(char *out, size_t outlen);

/*
 * Load the filter (compiled by seccomp_profile_prepare, compiling now if it was not) into
 * the calling thread with common/scfilter's installer (seccomp(2) with
 * SECCOMP_FILTER_FLAG_TSYNC: all threads), then read the mode back (seccomp_profile_verify).
 * Requires no_new_privs already set (privs_drop sets it); refuses otherwise (checked with
 * PR_GET_NO_NEW_PRIVS), because without it loading needs CAP_SYS_ADMIN and a later setuid
 * exec could shed the filter's intent. A syscall name unknown on this architecture is
 * skipped (it cannot be called natively); any other failure to add a rule fails the whole
 * install. Returns 0, or -1 with err filled.
 * Allocates when nothing was prepared: not from a signal handler.
 */
int seccomp_profile_install(char *err, size_t errlen);

/* Read /proc/self/status: returns 0 when "Seccomp:\t2" (filter mode), -1 otherwise. */
int seccomp_profile_verify(char *err, size_t errlen);

/*
 * Fork a child that sets no_new_privs, installs the profile, verifies mode 2 and tries a
 * few calls that must now fail (unshare, mount, socket(AF_NETLINK), clone3) and one that
 * must work (socket AF_INET stream). Returns 0 when all behaved, -1 with err otherwise.
 * Bounded: the child is waited for (on its pidfd, no sleep steps) at most
 * SECCOMP_SELFTEST_TIMEOUT_MS, then killed. For doctor and attestation.
 */
int seccomp_profile_selftest(char *err, size_t errlen);

/*
 * The same in two halves, so attestation can run its other probes while the child works:
 * _start compiles (seccomp_profile_prepare) and forks, returning the child's pid or -1 with
 * err; _finish waits for that child (bounded as above) and returns 0 or -1 with err.
 * Every started child must be finished.
 */
#define SECCOMP_SELFTEST_TIMEOUT_MS 5000
pid_t seccomp_profile_selftest_start(char *err, size_t errlen);
int seccomp_profile_selftest_finish(pid_t pid, char *err, size_t errlen);

#endif
