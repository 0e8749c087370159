/*
 * collector - run the part of egress-exec that reads worker-produced content (the overlay's
 * upper layer and merged view, libgit2 over them, the decision log) in a forked child
 * that holds no root: privilege separation in the manner of OpenSSH's privileged monitor
 * and unprivileged child.
 *
 * Owns: the child process, its namespaces and its tiny root; the parent's bounded wait.
 * Callers: executor/orchestrate.c (WorkUnit runs: changed set, scope, diff, manifest,
 * summary), executor/cmd_run.c (simple mode --out: result.json with the upper layer's
 * paths, decision log copies). The caller keeps every mount the child binds until
 * collector_run returns, and releases them afterwards.
 *
 * The child, in this order (each step checked; any failure ends the child with exit code
 * COLLECTOR_SETUP_EXIT_BASE + step, and a log line naming it on stderr):
 *   1. PR_SET_PDEATHSIG(SIGKILL) (and the parent checked still alive); every inherited fd
 *      above 2 closed (close_range), stdin = /dev/null: no fd may point outside the root.
 *   2. unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC): no network at all (only a down
 *      `lo`), no host IPC, a private mount table; `/` made recursively private.
 *   3. a tmpfs (nodev, nosuid, noexec, 1 MiB) at spec->stage_dir; every ro_paths entry
 *      bound non-recursively at its own absolute path inside it, then remounted read-only,
 *      nodev, nosuid, noexec; rw_dir the same but writable; the links. Nothing else: no
 *      /proc, /dev, /etc, /usr. /proc/self/status is opened before the pivot (read-backs).
 *   4. pivot_root into it, the old root detached, `/` remounted read-only.
 *   5. drop: bounding set emptied of everything but COLLECTOR_KEPT_CAP, ambient cleared,
 *      PR_SET_KEEPCAPS 1, setgroups(0), setresgid/setresuid(spec uid/gid), then permitted =
 *      effective = {COLLECTOR_KEPT_CAP}, inheritable empty, PR_SET_KEEPCAPS 0,
 *      PR_SET_DUMPABLE 0, no_new_privs, RLIMIT_CORE 0.
 *   6. seccomp (default allow, deny list in collector.c and docs/seccomp.md: no exec, no
 *      socket but AF_UNIX, no ptrace or signals to other processes, no mounts, namespaces,
 *      handles, links, device nodes ...).
 *   7. read-back: uid/gid, capability sets, NoNewPrivs 1, Seccomp 2 from /proc/self/status.
 * Then it calls spec->fn(spec->arg) and _exit()s with its return value (no atexit
 * handlers: nothing of the parent's runs twice).
 *
 * The kept capability is CAP_DAC_OVERRIDE alone: it reads files of any owner and mode
 * (the worker's upper layer, a repository of another user, mode 0000 files) and writes the
 * root-owned output folder. CAP_DAC_READ_SEARCH is deliberately not kept: everything it
 * grants for reading DAC_OVERRIDE grants too, and it alone enables open_by_handle_at, which
 * opens any file of a file system a bind exposes (the "shocker" escape).
 *
 * Identity: COLLECTOR_UID/GID 65001, a uid of its own in the range Debian leaves unused
 * (65000-65533): not root, not the repository owner (possibly a person's account), not
 * 65534 (nobody: egressd -u and other daemons run as it and could signal the collector),
 * not 65000 (the workers' dedicated uid). Files it writes in the output folder are owned
 * by 65001.
 */
#ifndef EGRESS_COLLECTOR_H
#define EGRESS_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/reasons.h"

#define COLLECTOR_UID 65001
#define COLLECTOR_GID 65001
#define COLLECTOR_RO_MAX 12
#define COLLECTOR_LINKS_MAX 2
#define COLLECTOR_SETUP_EXIT_BASE 100   /* + step number: the child's setup failed */

struct collector_spec {
	/* Absolute host paths (directories or regular files, no symlinks in the path: pass
	 * realpath'd paths) bound read-only at the same path; NULL entries are skipped. */
	const char *ro_paths[COLLECTOR_RO_MAX];
	/* Symlinks made in the root (path -> target, both absolute): lets a trusted host
	 * path that is a link (the preset's /bin/sh) resolve to its bound target as on the
	 * host. NULL path = unused. */
	struct { const char *path, *target; } links[COLLECTOR_LINKS_MAX];
	const char *rw_dir;        /* absolute, canonical: the output folder, writable */
	const char *stage_dir;     /* an existing empty directory for the child's root tmpfs
	                            * (mounted only inside the child's namespace) */
	uid_t uid;                 /* 0 = COLLECTOR_UID */
	gid_t gid;                 /* 0 = COLLECTOR_GID */
	uint32_t wall_ms;          /* 0 = EGRESS_COLLECT_WALL_MS; killed after it */
	/* The collection, in the child after every step above. Its return value becomes the
	 * child's exit code; only codes of enum exec_exit are accepted by the parent. */
	int (*fn)(void *arg);
	void *arg;
};

struct collector_result {
	int exit_code;             /* the child's enum exec_exit code, when collector_run is 0 */
	enum reason reason;        /* REASON_ALLOWED, or REASON_COLLECTOR_FAILED */
	char message[384];         /* what went wrong, for the manifest */
	uint64_t wall_ms;          /* fork to reap */
};

/*
 * Fork the collector, wait for it (bounded by spec->wall_ms, SIGKILL at expiry) and judge
 * its exit. Returns 0 when the child exited with an enum exec_exit code (res->exit_code);
 * -1 with res->reason = REASON_COLLECTOR_FAILED and res->message otherwise: setup failed
 * (which step), killed by a signal, timed out, or an exit code outside the set. Never falls
 * back to collecting in the calling (privileged) process. Must be called as root (or with
 * CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID, CAP_SETPCAP); from a single-threaded process.
 */
int collector_run(const struct collector_spec *spec, struct collector_result *res);

/*
 * In the collector (inside spec->fn): /proc/self/status of this process, read through the
 * descriptor opened before pivot_root (there is no /proc in the collector's root).
 * NUL-terminated. Returns 0, or -1 outside a collector or on a read error.
 */
int collector_status(char *buf, size_t len);

/* The system calls the collector's filter names (docs/seccomp.md lists each; a test
 * checks). Static strings; *n receives the count. */
const char *const *collector_filter_syscalls(size_t *n);

/* True inside the collector child (after its setup). */
bool collector_active(void);

#endif
