/*
 * fuzz_preset - executor/preset (AgentPreset INI via conf_load_string) and the trusted
 * model destinations file.
 *
 * Invariants: a refusal has a reason and a message; a loaded preset has an absolute
 * executable, a known transport and network policy, a prompt flag exactly when the
 * transport is `argument`, a model connection exactly when the policy is model_only, and a
 * NULL-terminated argv list.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "executor/preset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum reason why = REASON_ALLOWED;
	char err[512];
	struct preset *p;
	struct strlist t;

	if (size > EGRESS_CONF_FILE_MAX)
		return 0;
	p = preset_load_string("fuzz.ini", (const char *)data, size, &why, err, sizeof(err));
	if (p == NULL) {
		if (why == REASON_ALLOWED || err[0] == '\0')
			abort();
	} else {
		if (p->executable == NULL || p->executable[0] != '/')
			abort();
		if (p->transport == PT_ABSENT || p->network == PN_ABSENT)
			abort();
		if ((p->prompt_flag != NULL) != (p->transport == PT_ARGUMENT))
			abort();
		if ((p->model_connection != NULL) != (p->network == PN_MODEL_ONLY))
			abort();
		if (p->argv.v != NULL && p->argv.v[p->argv.n] != NULL)
			abort();
		preset_free(p);
	}
	/* The same bytes as a trusted-destinations file. */
	if (trusted_models_load_string("trusted.ini", (const char *)data, size, "m", &t, err,
	    sizeof(err)) == 0) {
		if (t.present && t.n == 0)
			abort();
		strlist_free(&t);
	}
	return 0;
}
