/*
 * manifest - the ResultManifest (manifest.json) of one WorkUnit run.
 *
 * Owns: the manifest schema (docs/workunit.md "manifest.json"); nothing allocated outlives
 * a call except the json_t returned by manifest_build (caller decrefs).
 * Callers: executor/orchestrate, which writes a manifest in every case where the output
 * folder is usable - admission refusals and internal errors included.
 *
 * Every input pointer may be NULL when that stage did not happen (a refused admission has
 * no sandbox result, no changed set, no scope verdict); the manifest then says null for
 * it rather than leaving the key out, so a reader never confuses "absent" with "empty".
 */
#ifndef EGRESS_MANIFEST_H
#define EGRESS_MANIFEST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/reasons.h"
#include "executor/admission.h"
#include "executor/artifacts.h"
#include "executor/changes.h"
#include "executor/preset.h"
#include "executor/sandbox.h"
#include "executor/scope.h"
#include "executor/workunit.h"

#define MANIFEST_SCHEMA_VERSION 1

struct manifest_input {
	const char *run_id;
	const struct workunit *wu;
	const struct preset *preset;
	const struct admission *adm;
	const struct sandbox_result *sr;     /* NULL when the worker never ran */
	const struct changeset *cs;
	const struct scope_verdict *scope;
	const struct artifact *artifacts;
	size_t nartifacts;
	int exit_code;                       /* enum exec_exit */
	enum reason reason;                  /* REASON_ALLOWED when accepted */
	const char *message;                 /* one line a person can act on, or NULL */
	const char *egressd_version;         /* NULL: unknown / not networked */
	uint64_t started_ms, finished_ms;    /* wall clock, ms since the epoch */
};

/* "accepted", "rejected", "admission_refused", "capability_missing", "worker_failed",
 * "internal_error", "usage" for an enum exec_exit value. */
const char *manifest_status_str(int exit_code);

/* Build the manifest object (new reference), or NULL on allocation failure. */
json_t *manifest_build(const struct manifest_input *in);

/* Build and write out_dir/manifest.json atomically. Returns 0 or -1 with err. */
int manifest_write(const char *out_dir, const struct manifest_input *in, char *err,
    size_t errlen);

#endif
