/*
 * admission - may this WorkUnit run under this AgentPreset? Fails closed.
 *
 * Owns: the admission table (docs/workunit.md) and struct admission (admission_free).
 * Callers: executor/orchestrate (before anything runs), executor/cmd_check (alone).
 *
 * Every refusal carries a reason from common/reasons.def (the ADM_* rows) and a detail
 * naming the field. Admission collects every refusal it finds, not only the first, so a
 * person fixes a WorkUnit in one pass; the decision is refused when there is at least one.
 * When admitted, the result carries what the run gets: the network mode and the exact
 * grant allowlist, the stricter of the preset's and the WorkUnit's ceilings, and the
 * prompt transport. A WorkUnit can never loosen a preset ceiling.
 */
#ifndef EGRESS_ADMISSION_H
#define EGRESS_ADMISSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/reasons.h"
#include "executor/preset.h"
#include "executor/sandbox.h"
#include "executor/workunit.h"

#define ADM_REFUSALS_MAX 32

struct adm_refusal {
	enum reason reason;
	char detail[512];
};

struct admission {
	bool admitted;
	struct adm_refusal refusals[ADM_REFUSALS_MAX];
	size_t nrefusals;
	bool refusals_truncated;           /* more refusals than ADM_REFUSALS_MAX */

	/* Valid when admitted. */
	enum sandbox_net net;
	struct strlist grant;              /* canonical grant entries, exactly the WorkUnit's */
	struct sandbox_limits limits;      /* stricter of preset and WorkUnit */
	uint64_t diff_bytes;               /* bound of candidate.diff */
	enum prompt_transport transport;
};

/*
 * Decide. trusted: the connection layer's trusted model destinations for the preset's
 * model_connection, or NULL when none was supplied (model_only is then refused).
 * caller_env: the explicit caller environment (NAME=VALUE, NULL-terminated; may be NULL);
 * every value is checked for container-socket authority.
 * Fills *out (call admission_free afterwards). Returns out->admitted.
 */
bool admission_decide(const struct workunit *wu, const struct preset *p,
    const struct strlist *trusted, const char *const *caller_env, struct admission *out);

/* Record a refusal that happened before admission could look (a file that did not load). */
void admission_refuse(struct admission *a, enum reason r, const char *detail);

/* The decision as JSON (new reference): {"admitted", "reasons": [{"reason", "text",
 * "detail"}], and when admitted "network", "grant", "limits", "prompt_transport"}. */
json_t *admission_to_json(const struct admission *a);
/* One human line: "admission: admitted (network allowlist, 2 destinations)" or
 * "admission: refused: sandbox_required: security.sandbox_required must be true ...". */
void admission_summary(const struct admission *a, char *buf, size_t len);

/*
 * Load the WorkUnit and the preset (and, for a model_only preset with trusted_path
 * non-NULL, the trusted model destinations), then decide. A file that does not load is a
 * refusal recorded in *a like any other. *wu and *p are set to the loaded files or NULL
 * (caller frees with workunit_free / preset_free). Returns a->admitted.
 */
bool admission_from_files(const char *wu_path, const char *preset_path,
    const char *trusted_path, const char *const *caller_env, struct workunit **wu,
    struct preset **p, struct admission *a);

void admission_free(struct admission *a);

#endif
