/*
 * cmd_check - `egress-exec check --workunit W --preset P`: admission alone.
 *
 * Placeholder until executor/admission lands: refuses, so no caller mistakes it for an
 * admitted decision.
 */
#include "executor/commands.h"

#include "common/log.h"
#include "executor/sandbox.h"

int
cmd_check(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	log_warnx("check: admission is not built yet");
	return EXEC_EXIT_INTERNAL;
}
