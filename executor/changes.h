/*
 * changes - the complete set of paths the worker changed, computed after it is gone.
 *
 * Owns: struct changeset and its strings (changes_free); the git_diff handed out by
 * changes_diff (caller frees with git_diff_free).
 * Callers: executor/orchestrate (changed set for scope and manifest), executor/artifacts
 * (the candidate diff).
 *
 * Two independent observations, united:
 *  1. libgit2 over the ORIGINAL repository (repo_dir/.git: its HEAD; the worker's .git in
 *     the merged view is never opened) with the overlay's merged view as the work tree:
 *     modified, added, deleted, renamed (git_diff_find_similar, untracked files count as
 *     rename targets), type-changed, untracked (directories recursed) and ignored files.
 *     Work-tree contents are hashed; no stat cache from the host index is trusted.
 *  2. The overlay upper layer, walked without following links: every regular file,
 *     symlink or special file written; every directory that is new, replaces a non-directory
 *     or is opaque (trusted.overlay.opaque / user.overlay.opaque = "y"); every whiteout
 *     (character device 0/0, or a file with an overlay whiteout xattr) as a deletion. This
 *     catches what git cannot see: paths hidden by worker-written .gitignore rules, .git
 *     writes, rewrites git judges identical.
 * A path the upper layer names is in the set even when git says nothing about it. Paths are
 * kept byte-exact (the scope check refuses non-canonical ones; nothing is normalized).
 * Every symbolic link the worker wrote is resolved in the merged view, lexically and
 * through the links it meets (at most 40 hops, never reading a file), and marked
 * link_escape when it leaves the repository (an absolute target, or ".." above the top)
 * or passes through a component git treats as .git.
 */
#ifndef EGRESS_CHANGES_H
#define EGRESS_CHANGES_H

#include "executor/gitlib.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct change {
	char *path;              /* repository-relative, byte-exact */
	char *old_path;          /* rename source (git), else NULL */
	const char *git_status;  /* "modified", "added", "deleted", "renamed", "typechange",
	                          * "untracked", "ignored", "copied" or NULL (git silent) */
	const char *upper_kind;  /* "written", "deleted", "opaque", "special" or NULL */
	bool is_dir;             /* a directory in the upper layer (new, or opaque) */
	bool new_dir;            /* is_dir, and the repository had nothing at this path */
	bool is_link;            /* a symbolic link the worker wrote */
	bool special;            /* a FIFO, socket or device node (not a whiteout) */
	bool link_escape;        /* is_link, and it resolves outside the repository or through
	                          * .git (changes_compute; see links_check in changes.c) */
};

struct changeset {
	struct change *v;
	size_t n, cap;
	char base_commit[GIT_OID_HEXSZ + 1];  /* HEAD of the original repo, "" when unborn */
};

#define CHANGES_TOO_MANY (-2)
#define CHANGES_UNSAFE   (-3)   /* the upper layer holds something git must not read */
#define CHANGES_UNSAFE_GIT (-4) /* ... namely a nested .git (scope_git_dir) */

/*
 * Compute the changed set. repo_dir: the original repository work tree (with .git);
 * merged_dir: the overlay's merged view of it; upper_dir: the overlay upper layer (may be
 * NULL only in tests that exercise git alone). Returns 0; CHANGES_TOO_MANY with err when
 * the worker's changes exceed a bound (more than EGRESS_CHANGED_PATHS_MAX paths, nesting
 * deeper than 98 directories, a path longer than EGRESS_PATH_MAX): the candidate is too large to
 * judge (nesting: libgit2 reads no deeper than 98 directories); CHANGES_UNSAFE with err when the upper layer holds a FIFO, socket or device, a
 * nested .git, or a .gitattributes/.gitignore/.gitmodules that is not a regular file
 * (checked before libgit2 reads the merged view, which it would block on or follow out of
 * the repository) — cs then holds the changed set from the upper layer alone, for the
 * scope check and the manifest; -1 with err for anything else (unreadable layers, libgit2 errors, no memory).
 */
int changes_compute(const char *repo_dir, const char *merged_dir, const char *upper_dir,
    struct changeset *cs, char *err, size_t errlen);
void changes_free(struct changeset *cs);

enum changes_diff_mode {
	CHANGES_DIFF_STATUS,    /* the changed set: ignored files, typechanges, renames found */
	CHANGES_DIFF_PATCH,     /* the candidate: what `git apply --binary` replays exactly -
	                         * binary patches with full ids, a typechange as deletion +
	                         * addition, no renames, ignored files left out */
};

/*
 * The git diff of the original HEAD against the merged view, untracked contents included.
 * *repo_out receives the repository handle the diff refers to; free both (git_diff_free,
 * then git_repository_free). Returns 0 or -1 with err.
 */
int changes_diff(const char *repo_dir, const char *merged_dir, enum changes_diff_mode mode,
    git_repository **repo_out, git_diff **out, char *err, size_t errlen);

/* JSON array of {"path", "old_path"?, "git", "upper", "in_diff"} (in_diff: whether
 * candidate.diff carries a hunk for it: not for ignored files or upper-only paths); paths that are not valid UTF-8 or
 * hold control characters are written with \xNN escapes (display only). New reference. */
json_t *changes_to_json(const struct changeset *cs);

/*
 * Ignored files (the repository's or the worker's .gitignore) are scope-checked like any
 * other change but are not carried by candidate.diff: a build's output is not part of a
 * candidate. Never silently: this writes the warning line the summary and the manifest
 * show ("N changed paths are ignored ..., not in candidate.diff: a, b, ...") and returns N
 * (0: buf is ""). Always NUL-terminates buf when len > 0.
 */
size_t changes_ignored_summary(const struct changeset *cs, char *buf, size_t len);

/* Display form of a raw path: printable ASCII and valid UTF-8 kept, other bytes as \xNN.
 * Always NUL-terminates buf (truncating). */
void changes_path_display(const char *p, char *buf, size_t len);

#endif
