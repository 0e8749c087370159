/*
 * attest - the nine capabilities, each attested only when its mechanism is present AND was
 * verified on this machine just now (sandbox_attest in executor/sandbox.h is the entry).
 *
 * Owns: the probes (a throwaway cgroup with limits read back; a child that unshares every
 * namespace, checks it is pid 1 of a new pid namespace and sees only `lo`, creates and
 * deletes a veth pair inside its own namespace, mounts a bounded tmpfs and fills it, an
 * overlay and checks copy-up leaves the lower layer alone, a read-only bind that refuses
 * writes, pivot_root and checks the host credentials are gone, drops privileges and reads
 * them back; seccomp's own self-test; the environment rules) and the attestation JSON.
 * A run (attest_begin_run) leaves out the veth pair and the throwaway cgroup: the run's own
 * veth, grant and cgroup, verified before the worker starts, take their place.
 * Callers: executor/sandbox.c (every run), executor/doctor.c (rows).
 */
#ifndef EGRESS_ATTEST_H
#define EGRESS_ATTEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum attest_cap {
	ATTEST_NETWORK_ENFORCEMENT,
	ATTEST_PROCESS_TREE_ISOLATION,
	ATTEST_CPU_LIMIT,
	ATTEST_MEMORY_LIMIT,
	ATTEST_DISK_LIMIT,
	ATTEST_PROCESS_LIMIT,
	ATTEST_FILESYSTEM_ISOLATION,
	ATTEST_WRITABLE_PATH_ENFORCEMENT,
	ATTEST_CREDENTIAL_ISOLATION,
	ATTEST__COUNT
};

struct attest_row {
	bool attested;
	char mechanism[160];
	char detail[320];
};

/* Stable capability name ("network_enforcement"). */
const char *attest_cap_name(enum attest_cap c);

/* Run every probe; rows[c] for each capability. Returns true when all are attested. */
bool attest_probe_all(bool with_network, struct attest_row rows[ATTEST__COUNT]);

/*
 * attest_probe_all in two halves, so a caller can prepare other things while the probes
 * run: attest_begin forks the seccomp self-test and the namespace probe children and
 * returns at once (NULL when out of memory; attest_end then fails every row);
 * attest_end runs the cgroup probe, collects both children (bounded waits), frees the
 * handle and fills rows as attest_probe_all does. Every begin must be ended exactly once.
 */
struct attest_pending;
struct attest_pending *attest_begin(bool with_network);
bool attest_end(struct attest_pending *pend, struct attest_row rows[ATTEST__COUNT]);

/*
 * The same two halves for a run (executor/sandbox.c), where two probes would only repeat
 * what the run itself makes and verifies before its worker exists:
 *  - no veth pair is made in the probe's namespace: the run's own veth (created, address
 *    read back) and the grant egressd issues for it are the proof, and network_enforcement
 *    stays attested only when both succeed (attest_network_granted / _failed);
 *  - no throwaway cgroup: cpu, memory and process limits are attested from run_cg, the
 *    run's own group, whose limits cgroup_create has written and read back (the group the
 *    worker is attached to, not a stand-in);
 *  - no network namespace in the probe: the new one the run's child (run_pid, cloned with
 *    CLONE_NEWNET, unreaped, waiting for "go") made is checked to hold only lo, from the
 *    supervisor (setns there and back). Call attest_end_run after that clone and before
 *    anything is put into the child's namespace (the veth); run_pid <= 0 fails the row.
 * Everything else is probed exactly as attest_begin/attest_end do.
 */
struct cgroup;
struct attest_pending *attest_begin_run(bool with_network);
bool attest_end_run(struct attest_pending *pend, const struct cgroup *run_cg, pid_t run_pid,
    struct attest_row rows[ATTEST__COUNT]);

/* attest_end_run SIGKILLs the namespace probe once it has reported, but may leave reaping
 * it for later (its exit waits for its mount namespace's teardown): reap what is left.
 * Blocking but bounded (the probes were SIGKILLed). The run's teardown calls it. */
void attest_reap(void);

/* {"<cap>": {"attested": b, "mechanism": s, "detail": s}, ...}; new reference. */
json_t *attest_rows_json(const struct attest_row rows[ATTEST__COUNT]);

/* "name (detail); name (detail)" of the capabilities not attested in att (or "none");
 * truncated to outlen. */
void attest_missing(const json_t *att, char *out, size_t outlen);

/* At run time: network_enforcement proven by this run's veth and the grant egressd issued;
 * or refused because egressd did not issue it. */
void attest_network_granted(json_t *att, const char *ifname, const char *grant_id);
void attest_network_failed(json_t *att, const char *why);

#endif
