/*
 * repocheck - is --repo something a run can produce a candidate for, and is it clean?
 *
 * Owns: struct repocheck (plain data). Callers: executor/orchestrate (before the sandbox:
 * a repository that cannot give a candidate is refused before the budget is spent) and
 * executor/cmd_check (`egress-exec check --repo`, which also reports a dirty tree).
 *
 * A run needs the root of a git work tree (a linked worktree counts) whose HEAD names a
 * commit: the candidate is that commit against the worker's final work tree. An unborn
 * HEAD (git init without a commit) is refused by check and run alike (repo_no_commit),
 * before the sandbox: the fix is a first commit. A dirty tree
 * is allowed — the host's uncommitted changes would show up in the candidate as if the
 * agent had made them — so it is reported before the run, not blamed on the agent after.
 * Read only (libgit2, no hooks or filters run); the owner check is off as in changes.c.
 */
#ifndef EGRESS_REPOCHECK_H
#define EGRESS_REPOCHECK_H

#include <stdbool.h>
#include <stddef.h>

#define REPOCHECK_DIRTY_SHOWN 5   /* changed paths named in the report */

struct repocheck {
	bool worktree_root;       /* a git work tree, and repo is its root */
	bool has_head;            /* HEAD names a commit */
	char head[41];
	size_t dirty;             /* paths differing from HEAD (untracked included) */
	char dirty_paths[512];    /* the first few of them, ", "-separated */
	char why[384];            /* when !worktree_root || !has_head: what and how to fix */
};

/* Inspect repo (a host path). Returns 0 with *out filled (check the flags), -1 when
 * libgit2 fails unexpectedly (out->why says why). */
int repocheck_inspect(const char *repo, struct repocheck *out);

#endif
