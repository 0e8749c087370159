/*
 * orchestrate - one WorkUnit run end to end (see executor/orchestrate.h).
 *
 * Placeholder while the pipeline (workunit, preset, admission, changes, scope, artifacts,
 * manifest) is being built: refuses every run, so nothing runs half-checked.
 */
#include "executor/orchestrate.h"

#include "common/log.h"
#include "executor/sandbox.h"

int
orchestrate_run(const struct orchestrate_opts *o)
{
	(void)o;
	log_warnx("WorkUnit orchestration is not built yet; refusing to run");
	return EXEC_EXIT_INTERNAL;
}
