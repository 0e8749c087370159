/*
 * init - the sandbox's pid 1.
 *
 * Owns: nothing but the worker's exit status. Callers: executor/sandbox.c, in the first
 * process of the new pid namespace, after the mounts are in place.
 *
 * Why a separate init: pid 1 of a pid namespace does not get default signal actions and
 * must reap orphans (a setsid daemon the worker leaves behind is re-parented to it). When
 * init exits the kernel SIGKILLs everything left in the namespace, so nothing the worker
 * started outlives the run even before the supervisor kills the cgroup.
 */
#ifndef EGRESS_INIT_H
#define EGRESS_INIT_H

#include <stddef.h>

/*
 * Fork the worker, which runs worker_fn(arg) and must never return (it execs or _exits).
 * After the fork init closes close_fds[0..nclose) (fds only the worker needs, e.g. the
 * write ends of its stdout/stderr pipes and the setup-error pipe), then reaps every child, forward SIGTERM/SIGINT/SIGHUP to the worker, and when the worker
 * itself has exited write its raw wait status (an int) to status_fd (when >= 0), close
 * it, and _exit with the worker's code (128+signal when killed). Never returns.
 */
__attribute__((noreturn)) void init_run(int (*worker_fn)(void *), void *arg, int status_fd,
    const int *close_fds, size_t nclose);

/* Map a raw wait status to the shell convention: exit code, or 128+signal. */
int init_status_code(int wstatus);

#endif
