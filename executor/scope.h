/*
 * scope - is every changed path inside the WorkUnit's scope? Rejects the whole candidate.
 *
 * Owns: struct scope_verdict and its strings (scope_verdict_free).
 * Callers: executor/orchestrate.
 *
 * Each changed path (and each rename source) is checked in this order, and the first
 * failing rule names it:
 *   1. canonical repository path (common/pathglob path_check)  -> scope_invalid_path
 *   2. no component git takes for .git (any case; NTFS and HFS+
 *      equivalents: path_has_dotgit)                            -> scope_git_dir
 *   3. not a FIFO, socket or device node                        -> scope_special_file
 *   4. .gitmodules, .gitattributes, .gitignore, .mailmap (and
 *      their NTFS/HFS+ equivalents) only as regular files        -> scope_git_link
 *   5. a symbolic link resolves inside the repository, not
 *      through .git (changes.h link_escape)                     -> symlink_escape
 *   6. matches no forbidden_paths entry (forbidden beats allowed) -> scope_forbidden
 *   7. matches some allowed_paths entry (path_glob_match)       -> scope_violation
 * A directory the worker created where the repository had nothing (upper "written",
 * new_dir, no git status) is exempt from rule 7 alone: git records no directories, the
 * files in it are checked one by one (so a glob "src/<star>.py" covers src/new/deep/x.py).
 * A directory that replaces something (opaque, or over a file) is checked like a file:
 * it deletes what the repository had there.
 * Any violation rejects the candidate; every violating path is listed, none dropped.
 */
#ifndef EGRESS_SCOPE_H
#define EGRESS_SCOPE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/reasons.h"
#include "executor/changes.h"
#include "executor/workunit.h"

struct scope_violation {
	char *path;             /* byte-exact */
	enum reason reason;
};

struct scope_verdict {
	bool accepted;
	struct scope_violation *v;
	size_t n;
};

/* Check one path. REASON_ALLOWED when it is in scope, else the reason. */
enum reason scope_path(const char *path, const struct strlist *allowed,
    const struct strlist *forbidden);

/* Check one entry of the changed set (its type decides rules 3-5 and the directory
 * exemption); the rename source, when any, is checked by scope_check with scope_path. */
enum reason scope_change(const struct change *c, const struct strlist *allowed,
    const struct strlist *forbidden);

/* Check the changed set. Returns 0 (verdict filled), -1 on allocation failure (verdict
 * then says not accepted). */
int scope_check(const struct changeset *cs, const struct strlist *allowed,
    const struct strlist *forbidden, struct scope_verdict *out);
void scope_verdict_free(struct scope_verdict *v);

/* {"accepted": bool, "violations": [{"path", "reason"}]}. New reference. */
json_t *scope_to_json(const struct scope_verdict *v);
/* "scope: accepted" or "scope: rejected: scope_forbidden docs/secret/x, ... (N paths)". */
void scope_summary(const struct scope_verdict *v, char *buf, size_t len);

#endif
