/*
 * sandbox - run one worker confined, and report what it used.
 *
 * Owns: the ordered sandbox steps (docs/sandbox.md) and everything they create (cgroup,
 * namespaces, veth, mounts, upper layer, grant); all of it is gone when sandbox_run
 * returns, whatever happened, except the overlay upper directory, which is kept for the
 * caller (changed-set computation) until sandbox_release_upper.
 * Callers: executor/main.c (simple `run -- cmd`), executor/orchestrate.c (WorkUnits).
 *
 * Contract: sandbox_attest() probes all nine capabilities; sandbox_run() refuses
 * (SANDBOX_CAPABILITY_MISSING) unless every capability the spec needs is attested.
 * Degraded never means unconfined: there is no code path that runs the worker with a
 * step skipped.
 */
#ifndef EGRESS_SANDBOX_H
#define EGRESS_SANDBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/reasons.h"

enum sandbox_net { SANDBOX_NET_NONE, SANDBOX_NET_ALLOWLIST };

enum prompt_transport { PROMPT_NONE, PROMPT_STDIN, PROMPT_ARGUMENT };

struct sandbox_limits {
	uint32_t cpu_millicores;    /* CPU quota: 1000 = one CPU */
	uint64_t memory_bytes;      /* memory limit, no swap */
	uint64_t disk_bytes;        /* upper layer + /tmp tmpfs sizes, RLIMIT_FSIZE */
	uint32_t pids;              /* pids limit */
	uint64_t output_bytes;      /* per stream (stdout, stderr) kept by the supervisor */
	uint32_t wall_seconds;      /* wall budget; whole cgroup killed at expiry */
	uint32_t open_files;        /* RLIMIT_NOFILE */
};

struct sandbox_spec {
	/* What runs (owned by the preset / caller, never by WorkUnit text). */
	const char *executable;     /* absolute path, inside the sandbox's view (host /usr etc.) */
	const char *const *argv;    /* argv[0] included, NULL-terminated */
	const char *const *ro_binds; /* preset ro_bind paths (admission-checked), or NULL */
	bool java_proxy;            /* preset java_proxy: JAVA_TOOL_OPTIONS names the listener */
	enum prompt_transport prompt_transport;
	const char *prompt;         /* stdin bytes, or the argument value */
	const char *prompt_flag;    /* for PROMPT_ARGUMENT: "--prompt" (argv gets flag, prompt) */

	/* Environment: exactly these NAME=VALUE strings (already filtered by env_build). */
	const char *const *envp;

	/* Files. */
	const char *repo_dir;       /* host path of the repository work tree (lower layer) */
	const char *workdir;        /* path inside the sandbox where the repo appears: /work */
	const char *const *forbidden_paths; /* repository-relative, masked; NULL-terminated */

	/* Network. */
	enum sandbox_net net;
	const char *const *allowlist;      /* grant entries ("https://host"), NULL-terminated */
	const char *egressd_control;       /* control socket path; NULL = start embedded */
	const char *principal;             /* principal label for the grant */

	/* Identity and limits. */
	uid_t uid;                  /* worker uid/gid (unprivileged) */
	gid_t gid;
	struct sandbox_limits limits;

	/* Where the run's scratch (upper layer, embedded egressd log) lives. An existing,
	 * root-owned directory without ',' ':' or '\\' in its path (overlay options). */
	const char *run_dir;

	/* Optional (NULL = default); appended fields, zero-initialized callers keep working. */
	const char *net_pool;              /* veth address pool, "169.254.0.0/16" by default */
	const char *const *egressd_settings; /* "key=value" lines added to the embedded
	                                    * egressd's [egressd] section (lab: dns_server,
	                                    * allow_special_address); NULL-terminated */
	const char *connection;            /* model connection named in the grant (its
	                                    * credential held by egressd), or NULL */
	const char *placeholder_env;       /* with connection: the variable that gets this
	                                    * run's random placeholder, or NULL */
	bool no_transparent;               /* transparent capture off (preset transparent =
	                                    * no, or --transparent=off); on by default for an
	                                    * allowlist run: docs/transparent.md */
	bool discard_layer;                /* nobody reads what the worker wrote (simple run
	                                    * without --out): the upper layer goes at once,
	                                    * no merged view is made (step 15) */
};

struct sandbox_result {
	enum reason reason;         /* REASON_ALLOWED on a clean run; else why it failed */
	char message[512];          /* one line a person can act on */
	bool started;               /* the worker was exec'd */
	int exit_code;              /* valid when exited */
	int term_signal;            /* 0 unless killed by a signal */
	bool timed_out;
	bool oom_killed;
	uint64_t wall_ms;
	uint64_t cpu_usec;
	uint64_t peak_memory_bytes;
	uint32_t oom_kills;
	uint32_t peak_pids;
	/* Captured output (heap, bounded by limits.output_bytes), freed by sandbox_result_free. */
	char *out;
	size_t out_len;
	bool out_truncated;
	char *err;
	size_t err_len;
	bool err_truncated;
	/* Grant issued for the run (empty when no network). */
	char grant_id[2 * 16 + 1];
	/* Transparent capture was on for the run (stub resolver and redirect installed). */
	bool transparent;
	/* Host path of the overlay upper dir: every path the worker wrote or deleted
	 * (whiteouts). Valid until sandbox_release_upper. */
	char upper_dir[4096];
	/* The merged view for changed-set computation (upper over lower, read-only). */
	char merged_dir[4096];
	/* Decision-log records of this principal (JSON Lines file path), when networked. */
	char decisions_path[4096];
	json_t *attestation;        /* the nine capabilities, as printed in the manifest */
	json_t *limits_applied;     /* limits read back from the cgroup */
	/* The run's id (cgroup name, state record); kept until sandbox_release_upper. */
	char run_id[64];
};

/*
 * The worker's uid and gid when it cannot be the repository owner: a root-owned repository
 * (then idmapped to it) and `egress-exec run` without --repo. A uid of its own: not 65534
 * (nobody, shared with every other unprivileged daemon, and the uid egressd drops to when
 * no `egressd` account exists) and not the collector's 65001 (executor/collector.h).
 * docs/sandbox.md ("Identity").
 */
#define SANDBOX_WORKER_UID 65000

/* Exit codes of egress-exec (docs/workunit.md). */
enum exec_exit {
	EXEC_EXIT_OK = 0,              /* candidate accepted / worker succeeded */
	EXEC_EXIT_REJECTED = 10,       /* candidate rejected: scope or artifact bound */
	EXEC_EXIT_ADMISSION = 11,      /* admission refused */
	EXEC_EXIT_CAPABILITY = 12,     /* a required capability is missing */
	EXEC_EXIT_WORKER = 13,         /* worker failed, timed out or went over budget */
	EXEC_EXIT_INTERNAL = 14,       /* internal error */
	EXEC_EXIT_USAGE = 2,           /* bad command line */
};

/* Probe the nine capabilities on this machine (without running a worker). The JSON object
 * maps each capability to {"attested": bool, "mechanism": "...", "detail": "..."}.
 * Returns true when all nine are attested. New reference in *out. */
bool sandbox_attest(bool with_network, json_t **out);

/* Run the worker. Returns 0 when the worker ran (whatever its exit status) and the result
 * is filled; -1 when the sandbox could not be built (result->reason says why).
 * When the worker ran, result->reason and ->message are its outcome, classified here once
 * (allowed, timeout, oom, worker_failed — a signal to egress-exec during the run is named
 * as such); callers report them and never re-derive them from the exit fields. */
int sandbox_run(const struct sandbox_spec *spec, struct sandbox_result *result);

/* The egress-exec exit code for a sandbox reason: allowed 0, capability_missing 12,
 * worker_failed / timeout / oom 13, anything else 14. */
enum exec_exit sandbox_exit_code(enum reason why);

/* Unmount the merged view and remove the upper layer. */
void sandbox_release_upper(struct sandbox_result *result);
void sandbox_result_free(struct sandbox_result *result);

#endif
