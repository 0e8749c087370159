/*
 * preset - the AgentPreset file (maintainer-owned): what runs and how.
 *
 * Owns: struct preset and every string in it (preset_free, which accepts NULL).
 * Callers: executor/admission, executor/orchestrate, executor/cmd_check.
 *
 * Like the WorkUnit loader this only parses; admission decides. Layout: one [preset]
 * section (name, executable, argv, prompt_transport, prompt_flag, network_policy,
 * model_connection, env_allowlist, ro_bind, java_proxy) and one [ceilings] section (docs/workunit.md).
 *
 * Trusted model destinations (for network_policy = model_only) come from a separate file
 * owned by the connection layer: sections "[connection NAME]" with repeated
 * `destination = https://host[:port]` (and, read by egressd only, the credential keys of
 * egressd/connections.h); the preset names one with model_connection.
 */
#ifndef EGRESS_PRESET_H
#define EGRESS_PRESET_H

#include <stdbool.h>
#include <stddef.h>

#include "common/reasons.h"
#include "executor/workunit.h"

enum preset_transport { PT_ABSENT = 0, PT_STDIN, PT_ARGUMENT, PT_FILE };
enum preset_net { PN_ABSENT = 0, PN_DISABLED, PN_ALLOWLISTED, PN_MODEL_ONLY };

struct preset {
	char *file;
	char *name;                 /* [A-Za-z0-9._-]{1,64} */
	char *executable;           /* absolute path (checked at load) */
	struct strlist argv;        /* fixed argv, argv[0] first; empty: argv = { executable } */
	enum preset_transport transport;
	char *prompt_flag;          /* for argument transport ("--prompt"), else NULL */
	enum preset_net network;
	char *model_connection;     /* for model_only: connection name in the trusted file */
	char *placeholder_env;      /* with model_connection: the variable the worker gets a
	                               random per-run placeholder in (never a real value) */
	struct strlist env_allowlist;
	struct strlist ro_binds;    /* ro_bind: host paths shown read-only (robind.h rules) */
	bool java_proxy;            /* java_proxy = yes: JAVA_TOOL_OPTIONS names the proxy */
	bool no_transparent;        /* transparent = no: no stub resolver, no capture */
	struct ceilings ceilings;
};

/* Load a preset. NULL with *why and err ("file:line: ...") on refusal. */
struct preset *preset_load(const char *path, enum reason *why, char *err, size_t errlen);
struct preset *preset_load_string(const char *name, const char *text, size_t len,
    enum reason *why, char *err, size_t errlen);
void preset_free(struct preset *p);

const char *preset_transport_str(enum preset_transport t);
const char *preset_net_str(enum preset_net n);

/*
 * Trusted model destinations of connection `connection` from the trusted file at path.
 * Returns 0 and fills *out (present = the connection exists); -1 with err when the file
 * cannot be read or is invalid (unknown keys refused with file:line).
 */
int trusted_models_load(const char *path, const char *connection, struct strlist *out,
    char *err, size_t errlen);
int trusted_models_load_string(const char *name, const char *text, size_t len,
    const char *connection, struct strlist *out, char *err, size_t errlen);

/*
 * Does connection `connection` of the trusted file carry a credential (credential_file)?
 * Then egress-exec names it in the grant and egressd applies it (docs/model-connections.md);
 * egress-exec never reads the credential itself. 0 with *bound, -1 with err.
 */
int trusted_models_bound(const char *path, const char *connection, bool *bound, char *err,
    size_t errlen);

#endif
