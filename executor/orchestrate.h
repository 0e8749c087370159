/*
 * orchestrate - one WorkUnit run end to end: load WorkUnit and AgentPreset, admission,
 * sandbox_run, changed set, scope check, artifacts, manifest.
 *
 * Owns: the run's output folder contents. Callers: executor/cmd_run.c when invoked with
 * --workunit/--preset; executor/cmd_check.c uses the admission part alone.
 */
#ifndef EGRESS_ORCHESTRATE_H
#define EGRESS_ORCHESTRATE_H

#include <stdbool.h>

struct orchestrate_opts {
	const char *workunit_path;     /* WorkUnit .ini */
	const char *preset_path;       /* AgentPreset .ini (maintainer-owned) */
	const char *repo_dir;          /* repository work tree (host path) */
	const char *out_dir;           /* output folder for artifacts and manifest */
	const char *egressd_control;   /* control socket of a running egressd, or NULL: embedded */
	const char *trusted_models;    /* file of trusted model destinations (model_only), or NULL */
	const char *const *caller_env; /* explicit caller environment NAME=VALUE, NULL-terminated */
	/* Optional, appended (zero-initialized callers keep working); passed to sandbox_spec. */
	const char *const *egressd_settings; /* extra [egressd] lines for the embedded egressd */
	const char *net_pool;          /* veth address pool, NULL = the sandbox default */
	bool no_transparent;           /* --transparent=off: no capture whatever the preset */
};

/* Returns an exit code from enum exec_exit (executor/sandbox.h) and writes manifest.json
 * into out_dir in every case where out_dir is usable. */
int orchestrate_run(const struct orchestrate_opts *o);

#endif
