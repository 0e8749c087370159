/*
 * opaque - the opaque directories of an overlay's upper layer, found without xattrs.
 *
 * Why: changes_compute (executor/changes.c) recognizes an opaque directory by its
 * trusted.overlay.opaque xattr, which only CAP_SYS_ADMIN may read; unprivileged, the
 * kernel answers "no such attribute". The collector (executor/collector.h), which computes
 * the changed set without root, would therefore never see one. An opaque upper directory
 * hides every lower entry it does not name itself, so the same fact is observable by
 * comparison: a directory of the upper layer that is also a directory in the repository is
 * opaque when some repository entry in it is neither named in the upper directory
 * (written or whited out) nor visible in the merged view. An opaque directory that hides
 * nothing changes nothing the merged view shows and is not reported. This matters when the
 * hidden entries are ones git does not report missing (ignored or untracked files): the
 * directory is then the only trace of the change, for the scope check.
 *
 * Owns: nothing beyond the call. Callers: executor/orchestrate.c (in the collector, after
 * changes_compute).
 */
#ifndef EGRESS_OPAQUE_H
#define EGRESS_OPAQUE_H

#include <stddef.h>

#include "executor/changes.h"

/*
 * Walk upper_dir (never following links; repository paths opened with openat2
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) and mark every opaque directory in cs: an entry
 * already there gets upper_kind "opaque", others are added (path, upper_kind "opaque") and
 * cs is kept sorted by path. Returns 0; CHANGES_TOO_MANY with err when cs would exceed
 * EGRESS_CHANGED_PATHS_MAX or the layer nests deeper than 256; -1 with err on I/O errors or
 * no memory (cs stays valid for changes_free).
 */
int opaque_add(const char *repo_dir, const char *merged_dir, const char *upper_dir,
    struct changeset *cs, char *err, size_t errlen);

#endif
