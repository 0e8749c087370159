/*
 * artifacts - the files of a run's output folder, written by egress-exec after the sandbox
 * is gone: candidate.diff, stdout.log, stderr.log, decisions.jsonl (manifest.json is
 * executor/manifest, through artifact_write).
 *
 * Owns: nothing beyond the call; every file is written atomically (a temporary file in the
 * same folder, fsync, rename), so a reader never sees half an artifact, and each write
 * reports its size and SHA-256 for the manifest.
 * Callers: executor/orchestrate, executor/manifest.
 *
 * Bounds: candidate.diff is at most max_bytes; a larger diff is not written at all and the
 * candidate is rejected (artifact_too_large) - never a truncated diff presented as
 * complete. Logs are bounded by the sandbox (output_bytes per stream) and end with an
 * explicit marker when the sandbox truncated them. decisions.jsonl is bounded by
 * EGRESS_DECISIONS_ARTIFACT_MAX and ends with a marker record when cut.
 */
#ifndef EGRESS_ARTIFACTS_H
#define EGRESS_ARTIFACTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct artifact {
	char name[64];          /* file name in the output folder */
	uint64_t size;
	char sha256[65];        /* lowercase hex */
	bool truncated;         /* logs / decisions: the explicit marker was appended */
};

#define ARTIFACT_TRUNC_MARKER "\n[egress-exec: output truncated at %llu bytes]\n"

/*
 * Make the output folder ready for a run, before anything runs: created (0755) when
 * absent; refused when it is a symlink or not a directory, or when it holds anything but
 * egress-exec's own artifacts (manifest.json, result.json, candidate.diff, stdout.log,
 * stderr.log, decisions.jsonl, egressd.log, and their ".<name>.XXXXXX" temporaries), so
 * a mistyped --out never deletes a person's files. The previous run's artifacts are then
 * removed, manifest.json first, and the folder synced: from here on the folder holds only
 * what this run writes, and a rejected run never leaves an older candidate.diff beside
 * its manifest. Returns 0, or -1 with err (nothing removed when refused).
 */
int artifacts_prepare_out(const char *out_dir, char *err, size_t errlen);

/* Write data as out_dir/name atomically (mode 0644). Returns 0 (a filled), -1 with err. */
int artifact_write(const char *out_dir, const char *name, const void *data, size_t len,
    struct artifact *a, char *err, size_t errlen);

/* SHA-256 of a whole file, lowercase hex into out (65 bytes); size into *size.
 * Returns 0 or -1 with errno. */
int artifact_sha256_file(const char *path, char out[65], uint64_t *size);

enum diff_outcome { DIFF_WRITTEN = 0, DIFF_TOO_LARGE = 1, DIFF_ERROR = -1 };

/*
 * Generate the diff of the original HEAD against the merged view (libgit2,
 * changes_diff CHANGES_DIFF_PATCH: what `git apply --binary` on a clone of HEAD replays
 * exactly - binary files as git binary patches with full index lines, modes, symlinks,
 * type changes as deletion + addition, paths quoted as git quotes them) and write
 * candidate.diff when it fits in max_bytes. DIFF_TOO_LARGE: nothing written, *needed says
 * how far generation got (more than max_bytes), also - before anything is read - when
 * one changed file is larger than EGRESS_DIFF_FILE_MAX or EGRESS_DIFF_RATIO_MAX times
 * max_bytes. An empty change set gives an empty candidate.diff.
 */
enum diff_outcome artifacts_write_diff(const char *out_dir, const char *repo_dir,
    const char *merged_dir, uint64_t max_bytes, struct artifact *a, uint64_t *needed,
    char *err, size_t errlen);

/* Write a captured stream; when truncated, ARTIFACT_TRUNC_MARKER (with len) follows. */
int artifacts_write_log(const char *out_dir, const char *name, const char *data, size_t len,
    bool truncated, struct artifact *a, char *err, size_t errlen);

/*
 * Copy this principal's records from the decision log at decisions_path (JSON Lines) into
 * decisions.jsonl: lines whose "principal" equals principal or whose "grant_id" equals
 * grant_id (either may be NULL/empty to not match on it). Lines are copied byte-exact so
 * the hash chain fields stay verifiable. decisions_path NULL or "" writes an empty file.
 * Otherwise the first line is the anchor (docs/decision-log.md, "A run's extract"): the
 * chain position before the first copied record and the last seq searched, so
 * `egressctl log verify` can check the file alone and against the system log.
 */
int artifacts_write_decisions(const char *out_dir, const char *decisions_path,
    const char *principal, const char *grant_id, struct artifact *a, char *err,
    size_t errlen);

/* {"name", "size", "sha256", "truncated"?}. New reference. */
json_t *artifact_to_json(const struct artifact *a);

#endif
