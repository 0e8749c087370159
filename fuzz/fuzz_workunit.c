/*
 * fuzz_workunit - executor/workunit (WorkUnit INI via conf_load_string) and admission.
 *
 * Invariants: the loader either refuses with an ADM_* or internal reason and a message,
 * or returns a WorkUnit whose objective is non-empty, NUL-free and bounded; a loaded
 * WorkUnit never came from a file naming an executable/argv/shell key; admission of any
 * loaded WorkUnit against a fixed preset terminates, and an admitted decision has a
 * network mode consistent with the WorkUnit, every limit positive and no larger than the
 * preset's ceiling.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "executor/admission.h"
#include "executor/preset.h"
#include "executor/workunit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char preset_text[] =
    "[preset]\nname = f\nexecutable = /bin/sh\nprompt_transport = stdin\n"
    "network_policy = allowlisted\n[ceilings]\nwall_seconds = 60\ncpu_millicores = 1000\n"
    "memory_bytes = 1G\ndisk_bytes = 1G\nprocesses = 64\noutput_bytes = 1M\n";

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct preset *p;
	enum reason why = REASON_ALLOWED;
	char err[512];
	struct workunit *wu;
	struct admission a;

	if (p == NULL) {
		p = preset_load_string("preset.ini", preset_text, sizeof(preset_text) - 1, &why,
		    err, sizeof(err));
		if (p == NULL)
			abort();
	}
	if (size > EGRESS_CONF_FILE_MAX)
		return 0;
	wu = workunit_load_string("fuzz.ini", (const char *)data, size, NULL, &why, err,
	    sizeof(err));
	if (wu == NULL) {
		if (why == REASON_ALLOWED || err[0] == '\0')
			abort();
		return 0;
	}
	if (wu->objective == NULL || wu->objective[0] == '\0' ||
	    strlen(wu->objective) > EGRESS_OBJECTIVE_MAX)
		abort();
	if (admission_decide(wu, p, NULL, NULL, &a)) {
		if (wu->network == WU_NET_UNRESTRICTED || a.nrefusals != 0)
			abort();
		if ((a.net == SANDBOX_NET_ALLOWLIST) != (wu->network == WU_NET_ALLOWLIST))
			abort();
		if (a.limits.wall_seconds == 0 || a.limits.wall_seconds > 60 ||
		    a.limits.memory_bytes == 0 || a.limits.memory_bytes > (1ULL << 30) ||
		    a.limits.pids == 0 || a.limits.pids > 64 || a.diff_bytes == 0)
			abort();
		if (a.grant.n != wu->destinations.n)
			abort();
	} else if (a.nrefusals == 0) {
		abort();
	}
	json_decref(admission_to_json(&a));
	admission_free(&a);
	workunit_free(wu);
	return 0;
}
