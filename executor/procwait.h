/*
 * procwait - wait for one child process to end, with a deadline, without sleeping in steps.
 *
 * Owns nothing. Callers: executor/seccomp.c (the self-test child), executor/attest.c,
 * executor/sandbox.c (teardown), executor/egressd_client.c (the private egressd).
 *
 * The wait is event-driven: a pidfd (pidfd_open(2), Linux >= 5.3) becomes readable the
 * moment the child exits, so the caller wakes at that moment instead of on the next tick of
 * a sleep loop (the 10 ms and 20 ms polls these waits used to be cost a tick on average at
 * every start and teardown). Where pidfd_open is unavailable the wait falls back to 1 ms
 * polls, still bounded by the same deadline.
 */
#ifndef EGRESS_PROCWAIT_H
#define EGRESS_PROCWAIT_H

#include <sys/types.h>

/*
 * Reap child `pid` if it ends within timeout_ms (0: only look). Returns 1 with *status set
 * when it was reaped, 0 when it is still running at the deadline (the caller decides: kill
 * and reap), -1 with errno when waitpid fails (ECHILD: not our child, or already reaped).
 * EINTR never ends the wait early.
 */
int procwait_deadline(pid_t pid, int *status, int timeout_ms);

/*
 * The same for a caller that already holds a pidfd for `pid` (it is not closed).
 */
int procwait_pidfd(pid_t pid, int pidfd, int *status, int timeout_ms);

#endif
