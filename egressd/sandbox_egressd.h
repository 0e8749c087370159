/*
 * sandbox_egressd - egressd's own least privilege (docs/SECURITY.md, "Privilege design:
 * egressd"), applied once, after start-up.
 *
 * Owns: dropping egressd to a dedicated unprivileged user with no capabilities, and
 * egressd's seccomp allow-list (the system calls it uses, each with its reason, in
 * sandbox_egressd.c). The drop is not optional: egressd started as root always drops and
 * there is no way to keep root; started as another user (systemd User=) it keeps its uid
 * but still sheds every capability and installs the same allow-list. Callers:
 * egressd/main.c only, in this order:
 *
 *   0. sandbox_egressd_early()             first thing in main, before any thread exists:
 *                                          bounding set emptied (root), no_new_privs;
 *                                          both are per thread and inherited, so every
 *                                          thread egressd creates starts without them
 *   1. sandbox_egressd_resolve(user)       before start-up (as root): NSS (getpwnam) opens
 *                                          files and loads libraries; never after the filter
 *   2. daemon_start(...)                   as root: binds static listeners (also ports
 *                                          < 1024), opens the decision log and the control
 *                                          socket, loads proxy_credentials (root-only, 0600)
 *      sandbox_egressd_give(fd)            as root: the decision log's open fd to user
 *   3. sandbox_egressd_drop(user)          supplementary groups to {gid}, setresgid/
 *                                          setresuid (every thread: glibc setxid
 *                                          broadcast), every capability cleared, the
 *                                          bounding set emptied, dumpable off (after the
 *                                          uid change, which resets it), the parent-death
 *                                          signal re-armed, no_new_privs; read back for
 *                                          every thread
 *      (or sandbox_egressd_confine()       when not started as root: no user change)
 *   4. sandbox_egressd_filter()            the allow-list, synchronised to every thread
 *                                          (TSYNC: the decision-log writer already runs)
 *
 * After step 3 egressd holds no capability at all. Binding a dynamic grant's listener
 * needs none: SO_BINDTODEVICE may be set once on a fresh socket without CAP_NET_RAW (Linux
 * >= 5.7; measured on this machine's 6.18 kernel as uid 65534), the listener address is the
 * veth host end egress-exec created, and the port (3128) is not privileged. docs/SECURITY.md
 * "Privilege design" says what this costs (reload and low ports, credentials, keytabs).
 */
#ifndef EGRESSD_SANDBOX_EGRESSD_H
#define EGRESSD_SANDBOX_EGRESSD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The account egressd runs as when started as root and no user is named: the dedicated
 * system user when it exists, else the fallback (like squid's cache_effective_user). */
#define SANDBOX_EGRESSD_DEFAULT_USER  "egressd"
#define SANDBOX_EGRESSD_FALLBACK_USER "nobody"

struct sandbox_egressd_user {
	uid_t uid;
	gid_t gid;
	char name[64];
};

/*
 * Resolve user (a name from the password database, or a decimal uid, whose primary group
 * is taken from the database when the uid has an entry, else gid = uid). uid 0 and gid 0
 * are refused. Returns 0, or -1 with a sentence in err.
 */
int sandbox_egressd_lookup(const char *user, struct sandbox_egressd_user *out, char *err,
    size_t errlen);

/*
 * The account to drop to: user when it is not NULL (from -u or [egressd] user; resolved
 * with sandbox_egressd_lookup, so an unknown account or uid 0 is refused), else
 * SANDBOX_EGRESSD_DEFAULT_USER when that account exists, else
 * SANDBOX_EGRESSD_FALLBACK_USER, with *fell_back set true (the caller says so in the log
 * and recommends the dedicated user). A default account that is uid 0 is refused too.
 * Returns 0, or -1 with a sentence in err.
 */
int sandbox_egressd_resolve(const char *user, struct sandbox_egressd_user *out,
    bool *fell_back, char *err, size_t errlen);

/*
 * Before any thread exists (per-thread attributes, inherited by new threads): as root (or
 * holding CAP_SETPCAP) empty the capability bounding set, which leaves the effective
 * capabilities start-up needs; always set no_new_privs. Nothing egressd executes needs
 * privileges from exec (the route helper starts after the drop). Returns 0, or -1 with
 * err (the caller exits).
 */
int sandbox_egressd_early(char *err, size_t errlen);

/*
 * Drop to u (see the order above) and verify: getresuid/getresgid all equal to u, the
 * supplementary groups exactly {gid}, CapPrm/CapEff/CapInh/CapAmb/CapBnd zero and
 * NoNewPrivs 1 in /proc/self/status, the same for every thread
 * (sandbox_egressd_verify_threads), PR_GET_DUMPABLE 0, and setresuid(0) failing. The
 * process must be root (or hold CAP_SETUID, CAP_SETGID, CAP_SETPCAP). The kernel clears the parent-death signal
 * (PR_SET_PDEATHSIG) when the credentials change; a signal that was armed before is armed
 * again, and if the parent of before is gone by then (getppid changed: it died in the
 * window where no signal was armed) the drop fails, so a private egressd never outlives
 * the egress-exec that started it. Returns 0, or -1 with a sentence in err; on -1 the
 * process may be half-dropped and the caller must exit.
 */
int sandbox_egressd_drop(const struct sandbox_egressd_user *u, char *err, size_t errlen);

/*
 * Hand the open file fd (named name in messages; the decision log, which egressd opened
 * as root and reopens by name after a failed write or a rotation) to u with fchown, when
 * it is a regular file with one link owned by root or already by u. No name is looked up
 * again, so nothing planted in the directory meanwhile is chowned. Returns 0, or -1 with
 * err (the caller warns: egressd still runs, but cannot reopen that file).
 */
int sandbox_egressd_give(int fd, const char *name, const struct sandbox_egressd_user *u,
    char *err, size_t errlen);

/*
 * Read back /proc/self/task/<tid>/status of every thread: NoNewPrivs 1, CapBnd zero when
 * bnd, and when u is not NULL (after a drop) CapPrm/CapEff/CapInh/CapAmb zero and all four
 * Uid and Gid values equal to u. Returns 0, or -1 with the first failing thread in err.
 */
int sandbox_egressd_verify_threads(const struct sandbox_egressd_user *u, bool bnd,
    char *err, size_t errlen);

/*
 * For an egressd started as a non-root user: no credential change, but not dumpable,
 * every capability it may hold (systemd AmbientCapabilities=, file capabilities) cleared
 * from the effective, permitted, inheritable and ambient sets, the bounding set emptied
 * when CAP_SETPCAP allows it, and no_new_privs; read back (NoNewPrivs 1 on every thread,
 * CapPrm/CapEff/CapInh/CapAmb zero on the calling thread: capability sets are per thread,
 * and a thread started during start-up keeps what it was started with). Must not be called as uid 0. Returns 0, or -1 with err.
 */
int sandbox_egressd_confine(char *err, size_t errlen);

/*
 * Install egressd's seccomp allow-list on every thread of the process (needs no_new_privs,
 * set by sandbox_egressd_drop, or CAP_SYS_ADMIN). A system call not on the list fails with
 * EPERM; the calls no egressd code path has any use for and that only an exploit would
 * make (ptrace, mount, bpf, namespaces, kernel modules, io_uring, ...) kill the process.
 * clone3 answers ENOSYS so that glibc falls back to clone(2), whose flags the filter can
 * see (no CLONE_NEW*). socket() is limited to AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK
 * (route), never SOCK_RAW or SOCK_PACKET. The filter is inherited by the route helper
 * (which adds its own), so the list covers its calls too. Returns 0, or -1 with err.
 */
int sandbox_egressd_filter(char *err, size_t errlen);

/* True when the calling thread runs under a seccomp filter (Seccomp: 2). */
bool sandbox_egressd_filtered(void);

/*
 * True when the process runs on valgrind's synthetic CPU (RUNNING_ON_VALGRIND; always
 * false natively, and false when built without valgrind's header). valgrind cannot
 * emulate seccomp(2), so main skips the allow-list there, loudly, and still drops, but
 * only with the explicit opt-in below as well; under valgrind without it egressd refuses
 * to run. That keeps `make valgrind`'s egressd session possible without a way to turn
 * the filter off in a native process.
 */
bool sandbox_egressd_under_valgrind(void);

/* True when the environment has EGRESSD_VALGRIND=1 (scripts/valgrind.sh sets it).
 * Consulted only when sandbox_egressd_under_valgrind() is true. */
bool sandbox_egressd_valgrind_optin(void);

#endif
