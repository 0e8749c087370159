/*
 * scfilter - the one seccomp table type and installer of egress.
 *
 * Four filters use it: the worker's (executor/seccomp.c), the collector's
 * (executor/collector.c), egressd's own (egressd/sandbox_egressd.c) and the route
 * helper's (egressd/helper/pacsandbox.c). Each keeps its table and the reason of every
 * row in its own file (what a process may do is that process's business); what they share
 * is here: the row type of a table of calls named with a reason, resolving a name (with the
 * number of a call newer than libseccomp's table), creating the context with its
 * attributes, adding a table under one action, compiling it to BPF, installing it with
 * seccomp(2) (the one installer: scf_load is compile + install), and reading back that
 * the kernel filters this process.
 *
 * Owns nothing beyond one call; the caller owns the context between scf_new and
 * scf_compile/scf_load (they release it, also on failure; seccomp_release it yourself when
 * not loading), and the struct scf_prog it compiles into.
 * Knows nothing of the programs. Errors: -1 (or NULL) with one line in err.
 */
#ifndef EGRESS_SCFILTER_H
#define EGRESS_SCFILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/filter.h>
#include <sched.h>
#include <seccomp.h>

/* Namespace flags the filters compare clone's argument against; older headers lack the
 * newest. */
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

/* One row of a table: a system call by name, and why the table treats it so (NULL when
 * the table's comments give the reason per group). */
struct scf_rule {
	const char *name;
	const char *why;
};

struct scf_spec {
	uint32_t default_action;    /* SCMP_ACT_ALLOW for a deny list, an errno for an allow list */
	bool tsync;                 /* every thread of the process, or the load fails */
	bool badarch_kill;          /* a call through another architecture's ABI kills */
	bool optimize;              /* binary search over numbers (speed only; best effort) */
	bool nnp_first;             /* no_new_privs must already be set (the caller's step
	                             * order says so): the install refuses rather than set it */
};

/* A context with spec's default action and attributes; NULL with err. */
scmp_filter_ctx scf_new(const struct scf_spec *spec, char *err, size_t errlen);

/* The number of name here, or -1 when it is not a system call on this architecture
 * (nothing can call it: no rule needed). Calls newer than libseccomp 2.5.4's table
 * (fchmodat2, setxattrat, removexattrat, file_setattr) resolve to their number, which is
 * the same on every architecture. */
int scf_resolve(const char *name);

/* Add every row of rows[0..n) under action, without argument checks. Rows whose call
 * does not exist here are skipped. Returns 0, or -1 with "seccomp rule <name>: ..." */
int scf_add_table(scmp_filter_ctx ctx, uint32_t action, const struct scf_rule *rows,
    size_t n, char *err, size_t errlen);

/* Format a failed seccomp_rule_add* (rc < 0) for what; returns -1. */
int scf_rule_failed(const char *what, int rc, char *err, size_t errlen);

/* A compiled filter: libseccomp's BPF for a context and how to install it. A supervisor
 * compiles once; a child it forks inherits the memory and only installs (the slow half of
 * a load is the compile). */
struct scf_prog {
	struct sock_filter insns[BPF_MAXINSNS];
	unsigned short len;         /* 0: nothing compiled */
	bool tsync;                 /* the spec's tsync */
	bool set_nnp;               /* the install sets no_new_privs (the spec's !nnp_first) */
};

/* Compile ctx into out and release ctx (always). Allocates (libseccomp, a socket pair).
 * Returns 0, or -1 with err. */
int scf_compile(scmp_filter_ctx ctx, struct scf_prog *out, char *err, size_t errlen);

/* Install a compiled filter into the calling process with seccomp(2): no_new_privs first
 * (set here, or refused when it is not set and the spec said nnp_first), then the program,
 * for every thread when tsync. Allocates nothing. Returns 0, or -1 with err. */
int scf_install(struct scf_prog *p, char *err, size_t errlen);   /* p is not changed */

/* scf_compile then scf_install; ctx is released (always). Returns 0, or -1 with err. */
int scf_load(scmp_filter_ctx ctx, char *err, size_t errlen);

/* True when /proc/self/status says this process runs under a seccomp filter (mode 2):
 * the read-back after scf_load. */
bool scf_active(void);

#endif
