/*
 * privs - drop the worker to an unprivileged identity with no capabilities, and prove it.
 *
 * Owns: the order of the drop (below) and its read-back.
 * Callers: executor/sandbox.c, in the worker's process after mounts/pivot_root (which need
 * privileges) and before seccomp_profile_install (which needs no_new_privs, set here).
 *
 * privs_drop, in this order (the order matters):
 *   1. rlimits: RLIMIT_CORE 0 (no core dumps with worker memory), RLIMIT_FSIZE at the disk
 *      ceiling, RLIMIT_NOFILE, RLIMIT_NPROC when nproc != 0 (per-uid: the pids cgroup is the
 *      real bound; shared uids make NPROC count other workers too). Soft = hard.
 *   2. prctl(PR_SET_NO_NEW_PRIVS, 1): no setuid/file-capability gain across exec, and the
 *      precondition for an unprivileged seccomp filter.
 *   3. clear the capability bounding set (needs CAP_SETPCAP, so while still root) and the
 *      ambient set (libcap-ng, CAPNG_SELECT_ALL), plus prctl(PR_SET_KEEPCAPS, 0) and
 *      SECBIT_NOROOT|SECBIT_NO_SETUID_FIXUP left unset so the uid change clears caps.
 *   4. setgroups(1, {gid}), setresgid(gid, gid, gid), setresuid(uid, uid, uid).
 *   5. clear effective/permitted/inheritable (libcap-ng) in case anything survived.
 *   6. privs_verify.
 * Returns 0, or -1 with a one-line message; on -1 the caller must not exec (the process may
 * be half-dropped: _exit).
 */
#ifndef EGRESS_PRIVS_H
#define EGRESS_PRIVS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct privs_spec {
	uid_t uid;              /* worker uid; must not be 0 */
	gid_t gid;              /* worker gid; must not be 0 */
	uint64_t fsize_bytes;   /* RLIMIT_FSIZE; must be nonzero */
	uint32_t open_files;    /* RLIMIT_NOFILE; must be nonzero */
	uint32_t nproc;         /* RLIMIT_NPROC; 0 = do not set */
};

int privs_drop(const struct privs_spec *spec, char *err, size_t errlen);

/*
 * Read everything back from the kernel: /proc/self/status CapInh/CapPrm/CapEff/CapBnd/CapAmb
 * all zero, NoNewPrivs 1; getresuid/getresgid all equal to spec; getgroups is empty or
 * exactly {gid}; getrlimit for each limit (soft and hard) as requested.
 * Returns 0, or -1 naming the first thing that does not match.
 */
int privs_verify(const struct privs_spec *spec, char *err, size_t errlen);

#endif
