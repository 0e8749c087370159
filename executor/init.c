/*
 * init - pid 1 of the sandbox: fork the worker, reap everything, forward signals.
 */
#include "executor/init.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"

int
init_status_code(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return 255;
}

void
init_run(int (*worker_fn)(void *), void *arg, int status_fd, const int *close_fds,
    size_t nclose)
{
	sigset_t all, old;
	pid_t worker;
	int wstatus = 0;
	bool worker_done = false;

	/*
	 * Block the forwarded signals before fork so none is lost between fork and
	 * sigwaitinfo; the worker restores the old mask before it execs.
	 */
	sigemptyset(&all);
	sigaddset(&all, SIGCHLD);
	sigaddset(&all, SIGTERM);
	sigaddset(&all, SIGINT);
	sigaddset(&all, SIGHUP);
	sigprocmask(SIG_BLOCK, &all, &old);

	worker = fork();
	if (worker < 0)
		_exit(127);
	if (worker == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (status_fd >= 0)
			close(status_fd);
		/* If init dies, the worker dies too (it would anyway: pid-ns teardown). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(worker_fn(arg) & 0xff);
	}
	for (size_t i = 0; i < nclose; i++)
		if (close_fds[i] >= 0)
			close(close_fds[i]);

	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&all, &si);

		if (sig < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (sig != SIGCHLD) {
			kill(worker, sig);
			continue;
		}
		/* Reap every child that is ready: the worker and any orphan re-parented to us. */
		for (;;) {
			int st;
			pid_t p = waitpid(-1, &st, WNOHANG);
			if (p <= 0)
				break;
			if (p == worker) {
				wstatus = st;
				worker_done = true;
			}
		}
		if (worker_done)
			break;
	}
	if (status_fd >= 0) {
		(void)write_all(status_fd, &wstatus, sizeof(wstatus));
		close(status_fd);
	}
	/* Leaving pid 1 makes the kernel kill whatever the worker left in the namespace. */
	_exit(worker_done ? init_status_code(wstatus) & 0xff : 255);
}
