/*
 * sandbox_child - the child's side of a run (steps 9-12 of docs/sandbox.md): pid 1 of the
 * new namespaces, and the worker it forks.
 *
 * Owns: the supervisor <-> child pipe protocol ("go" with the link description, the
 * environment, the failure report) and everything the child does between clone and the
 * worker's execve. Private to executor/sandbox.c, which clones the child and calls
 * sandbox_child_main in it.
 *
 * The order inside the child, and why: move itself into the run's cgroup (before it does
 * anything else; one byte on the attach pipe tells the supervisor, which reads the
 * membership back before "go"); close every inherited fd; wait for "go" (the supervisor
 * has checked the cgroup membership and made the veth); unshare the cgroup
 * namespace (its root is now the run's group); network up and verified; hostname; mounts
 * and pivot_root, verified; init forks the worker, which sets its session and stdio,
 * closes fds, drops privileges (verified) and installs seccomp last (verified) before
 * execve. A failing step writes one struct sandbox_report to the report pipe and exits;
 * the pipe is O_CLOEXEC, so EOF there means the worker exec'd.
 */
#ifndef EGRESS_SANDBOX_CHILD_H
#define EGRESS_SANDBOX_CHILD_H

#include <stddef.h>
#include <sys/types.h>

#include "executor/mounts.h"
#include "executor/netns.h"
#include "executor/privs.h"
#include "executor/sandbox.h"

/* Parent -> child after the cgroup attach and the veth. */
struct sandbox_go {
	int ok;
	int has_link;
	struct netns_link link;
};

/* Child -> parent when a setup step fails (the pipe is O_CLOEXEC: EOF means exec'd). */
struct sandbox_report {
	char step[32];
	int err;
	char msg[448];
};

struct cgroup;

struct sandbox_child {
	const struct sandbox_spec *spec;
	const struct cgroup *cg;    /* the run's group: the child attaches itself first */
	int attach_wr;              /* one byte once attached (then closed) */
	struct mounts_spec ms;
	struct privs_spec ps;
	char *const *argv;
	char *const *envp;
	int sync_rd, report_wr, status_wr, out_wr, err_wr, in_rd;
	char *wipe;                 /* the run CA key: the child's copy is wiped at once */
};

/* read(2) until len bytes or EOF; the count, or -1 on error. */
ssize_t sandbox_pipe_read(int fd, void *buf, size_t len);
/* The most entries the worker's environment may have: the preset's, the proxy conventions
 * (env.h), a model connection's CA variables and its placeholder (sandbox.c). */
#define SANDBOX_ENV_MAX (EGRESS_ENV_VARS_MAX + ENV_PROXY_CONVENTIONS_MAX + 16)
/* The environment over the sync pipe: u32 count, then u32 length + bytes per entry. */
void sandbox_env_send(int fd, char *const *envp);
/* pid 1 of the new namespaces: runs steps 9-12 and never returns. */
__attribute__((noreturn)) void sandbox_child_main(struct sandbox_child *c);

#endif
