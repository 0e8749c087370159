/*
 * procwait - a child's end, waited for on its pidfd with a deadline. See procwait.h.
 */
#define _GNU_SOURCE
#include "executor/procwait.h"

#include <errno.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

/* waitpid without blocking: 1 reaped, 0 still running, -1 error (EINTR retried). */
static int
procwait_try(pid_t pid, int *status)
{
	pid_t w;

	do {
		w = waitpid(pid, status, WNOHANG);
	} while (w < 0 && errno == EINTR);
	if (w == pid)
		return 1;
	return w < 0 ? -1 : 0;
}

int
procwait_pidfd(pid_t pid, int pidfd, int *status, int timeout_ms)
{
	uint64_t deadline = mono_msec() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	int rc;

	for (;;) {
		uint64_t now;
		int left;

		rc = procwait_try(pid, status);
		if (rc != 0)
			return rc;
		now = mono_msec();
		if (now >= deadline)
			return 0;
		left = (int)(deadline - now);
		if (pidfd >= 0) {
			struct pollfd p = { pidfd, POLLIN, 0 };

			/* Readable once the child has exited; EINTR just loops. */
			(void)poll(&p, 1, left);
		} else {
			struct timespec ts = { 0, 1000 * 1000 };   /* fallback: 1 ms polls */

			(void)nanosleep(&ts, NULL);
		}
	}
}

int
procwait_deadline(pid_t pid, int *status, int timeout_ms)
{
	int pidfd, rc;

	/* Already over (the common case at teardown): no pidfd needed. */
	rc = procwait_try(pid, status);
	if (rc != 0 || timeout_ms <= 0)
		return rc;
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	rc = procwait_pidfd(pid, pidfd, status, timeout_ms);
	if (pidfd >= 0)
		close(pidfd);
	return rc;
}
