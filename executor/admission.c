/*
 * admission - the admission table and every refusal (see executor/admission.h).
 */
#include "executor/admission.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/pathglob.h"
#include "common/pattern.h"
#include "common/util.h"
#include "executor/env.h"
#include "executor/robind.h"

__attribute__((format(printf, 3, 4)))
static void
refuse(struct admission *a, enum reason r, const char *fmt, ...)
{
	va_list ap;

	a->admitted = false;
	if (a->nrefusals >= ADM_REFUSALS_MAX) {
		a->refusals_truncated = true;
		return;
	}
	a->refusals[a->nrefusals].reason = r;
	va_start(ap, fmt);
	vsnprintf(a->refusals[a->nrefusals].detail, sizeof(a->refusals[0].detail), fmt, ap);
	va_end(ap);
	a->nrefusals++;
}

void
admission_refuse(struct admission *a, enum reason r, const char *detail)
{
	refuse(a, r, "%s", detail);
}

void
admission_free(struct admission *a)
{
	if (a == NULL)
		return;
	strlist_free(&a->grant);
}

static void
check_paths(struct admission *a, const struct workunit *wu, const char *what,
    const struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		enum path_err pe = path_check(l->v[i]);
		if (pe != PATH_OK) {
			refuse(a, REASON_ADM_INVALID_PATH, "%s:%u: %s entry '%.200s': %s", wu->file,
			    l->line, what, l->v[i], path_err_str(pe));
		} else if (strlen(l->v[i]) > EGRESS_GLOB_MAX) {
			refuse(a, REASON_ADM_INVALID_PATH, "%s:%u: %s entry longer than %d bytes",
			    wu->file, l->line, what, EGRESS_GLOB_MAX);
		} else if (strcmp(what, "forbidden_paths") != 0 && path_has_dotgit(l->v[i])) {
			/* The repository's own metadata is never a write scope: .git in any case
			 * and what NTFS or HFS+ would take for it (git's own rules). */
			refuse(a, REASON_ADM_INVALID_PATH, "%s:%u: %s entry '%.200s' names .git",
			    wu->file, l->line, what, l->v[i]);
		}
	}
}

static void
check_scope(struct admission *a, const struct workunit *wu)
{
	if (!wu->allowed_paths.present || !wu->forbidden_paths.present)
		refuse(a, REASON_ADM_SCOPE_MISSING, "%s: constraints.%s is missing", wu->file,
		    !wu->allowed_paths.present ? "allowed_paths" : "forbidden_paths");
	if (!wu->filesystem_write.present || !wu->allowed_paths.present ||
	    !strlist_set_equal(&wu->filesystem_write, &wu->allowed_paths))
		refuse(a, REASON_ADM_WRITE_SCOPE, "%s:%u: permissions.filesystem_write must list "
		    "exactly the entries of constraints.allowed_paths", wu->file,
		    wu->filesystem_write.line);
	check_paths(a, wu, "allowed_paths", &wu->allowed_paths);
	check_paths(a, wu, "forbidden_paths", &wu->forbidden_paths);
	check_paths(a, wu, "filesystem_write", &wu->filesystem_write);
}

/* Parse every WorkUnit destination into pats (canonical), refusing bad entries. */
static size_t
parse_destinations(struct admission *a, const struct workunit *wu,
    struct dest_pattern *pats)
{
	size_t n = 0;

	if (wu->destinations.n > EGRESS_GRANT_ENTRIES_MAX) {
		refuse(a, REASON_ADM_INVALID_DESTINATION, "%s:%u: more than %d destinations",
		    wu->file, wu->destinations.line, EGRESS_GRANT_ENTRIES_MAX);
		return 0;
	}
	for (size_t i = 0; i < wu->destinations.n; i++) {
		const char *perr = NULL;
		if (pattern_parse(wu->destinations.v[i], &pats[n], &perr) != 0) {
			refuse(a, REASON_ADM_INVALID_DESTINATION, "%s:%u: destination '%.200s': %s",
			    wu->file, wu->destinations.line, wu->destinations.v[i],
			    perr ? perr : "invalid");
			continue;
		}
		n++;
	}
	return n;
}

static void
check_network(struct admission *a, const struct workunit *wu, const struct preset *p,
    const struct strlist *trusted)
{
	struct dest_pattern *pats = NULL;
	size_t npats = 0;

	a->net = SANDBOX_NET_NONE;
	switch (wu->network) {
	case WU_NET_ABSENT:
		refuse(a, REASON_ADM_NETWORK_MISMATCH, "%s: permissions.network is required "
		    "(none or allowlist)", wu->file);
		return;
	case WU_NET_UNRESTRICTED:
		refuse(a, REASON_ADM_NETWORK_UNRESTRICTED, "%s:%u: permissions.network = "
		    "unrestricted is never admissible", wu->file, wu->network_line);
		return;
	case WU_NET_NONE:
		if (p->network != PN_DISABLED)
			refuse(a, REASON_ADM_NETWORK_MISMATCH, "WorkUnit network none needs a preset "
			    "with network_policy = disabled (preset '%s' is %s)", p->name,
			    preset_net_str(p->network));
		if (wu->destinations.n > 0)
			refuse(a, REASON_ADM_NETWORK_MISMATCH, "%s:%u: destinations given with "
			    "permissions.network = none", wu->file, wu->destinations.line);
		return;
	case WU_NET_ALLOWLIST:
		break;
	}

	if (wu->destinations.n == 0) {
		refuse(a, REASON_ADM_INVALID_DESTINATION, "%s:%u: permissions.network = allowlist "
		    "needs at least one destination", wu->file, wu->network_line);
		return;
	}
	pats = calloc(wu->destinations.n, sizeof(*pats));
	if (pats == NULL) {
		refuse(a, REASON_INTERNAL_ERROR, "out of memory");
		return;
	}
	npats = parse_destinations(a, wu, pats);

	switch (p->network) {
	case PN_ALLOWLISTED:
		break;
	case PN_MODEL_ONLY:
		if (trusted == NULL || !trusted->present || trusted->n == 0) {
			refuse(a, REASON_ADM_MODEL_DEST_MISSING, "preset '%s' is model_only and no "
			    "trusted model destinations were supplied for connection '%s'", p->name,
			    p->model_connection ? p->model_connection : "?");
			goto out;
		}
		for (size_t i = 0; i < npats; i++) {
			bool covered = false;
			char buf[EGRESS_DEST_PATTERN_MAX + 1];
			for (size_t j = 0; j < trusted->n && !covered; j++) {
				struct dest_pattern tp;
				const char *perr = NULL;
				/* A trusted entry that does not parse admits nothing. */
				if (pattern_parse(trusted->v[j], &tp, &perr) != 0)
					continue;
				covered = pattern_covers(&tp, &pats[i]);
			}
			if (!covered)
				refuse(a, REASON_ADM_DEST_NOT_TRUSTED, "destination '%s' is not within "
				    "the trusted model destinations of connection '%s'",
				    pattern_to_str(&pats[i], buf, sizeof(buf)), p->model_connection);
		}
		break;
	case PN_DISABLED:
	case PN_ABSENT:
		refuse(a, REASON_ADM_NETWORK_MISMATCH, "WorkUnit network allowlist needs a preset "
		    "with network_policy allowlisted or model_only (preset '%s' is %s)", p->name,
		    preset_net_str(p->network));
		goto out;
	}

	/* The grant is exactly the WorkUnit allowlist, in canonical form. */
	a->net = SANDBOX_NET_ALLOWLIST;
	a->grant.v = calloc(npats + 1, sizeof(char *));  /* NULL-terminated */
	if (a->grant.v == NULL) {
		refuse(a, REASON_INTERNAL_ERROR, "out of memory");
		goto out;
	}
	a->grant.present = true;
	for (size_t i = 0; i < npats; i++) {
		char buf[EGRESS_DEST_PATTERN_MAX + 1];
		a->grant.v[i] = strdup(pattern_to_str(&pats[i], buf, sizeof(buf)));
		if (a->grant.v[i] == NULL) {
			refuse(a, REASON_INTERNAL_ERROR, "out of memory");
			goto out;
		}
		a->grant.n++;
	}
out:
	free(pats);
}

static void
check_ceilings(struct admission *a, const struct workunit *wu, const struct preset *p)
{
	uint64_t eff[CEIL__COUNT] = { 0 };

	for (int i = 0; i < CEIL__COUNT; i++) {
		enum ceiling_state ws = wu->budget.state[i], ps = p->ceilings.state[i];
		bool req = ceiling_required((enum ceiling_id)i);

		if (ws == CEIL_INVALID || (req && ws == CEIL_ABSENT)) {
			refuse(a, REASON_ADM_BUDGET, "%s:%u: budget.%s is %s", wu->file,
			    wu->budget.line[i], ceiling_key((enum ceiling_id)i),
			    ws == CEIL_ABSENT ? "missing" : "not a positive number within bounds");
			continue;
		}
		if (ps == CEIL_INVALID || (req && ps == CEIL_ABSENT)) {
			refuse(a, REASON_ADM_BUDGET, "%s:%u: ceilings.%s is %s", p->file,
			    p->ceilings.line[i], ceiling_key((enum ceiling_id)i),
			    ps == CEIL_ABSENT ? "missing" : "not a positive number within bounds");
			continue;
		}
		/* Stricter of the two; the default only when neither file sets one. */
		if (ws == CEIL_OK && ps == CEIL_OK)
			eff[i] = wu->budget.value[i] < p->ceilings.value[i] ?
			    wu->budget.value[i] : p->ceilings.value[i];
		else if (ws == CEIL_OK)
			eff[i] = wu->budget.value[i];
		else if (ps == CEIL_OK)
			eff[i] = p->ceilings.value[i];
		else
			eff[i] = EGRESS_DIFF_DEFAULT_MAX;
	}
	/* The bounds in workunit.c keep every value within its field's type. */
	a->limits.wall_seconds = (uint32_t)eff[CEIL_WALL_SECONDS];
	a->limits.cpu_millicores = (uint32_t)eff[CEIL_CPU_MILLICORES];
	a->limits.memory_bytes = eff[CEIL_MEMORY_BYTES];
	a->limits.disk_bytes = eff[CEIL_DISK_BYTES];
	a->limits.pids = (uint32_t)eff[CEIL_PROCESSES];
	a->limits.output_bytes = eff[CEIL_OUTPUT_BYTES];
	a->limits.open_files = 1024;
	a->diff_bytes = eff[CEIL_DIFF_BYTES];
}

static void
check_env(struct admission *a, const struct preset *p, const char *const *caller_env)
{
	char msg[256];

	for (size_t i = 0; i < p->env_allowlist.n; i++) {
		enum reason r = env_name_check(p->env_allowlist.v[i], msg, sizeof(msg));
		if (r != REASON_ALLOWED)
			refuse(a, r, "%s:%u: env_allowlist: %s", p->file, p->env_allowlist.line, msg);
	}
	/* Every explicit caller value, allowlisted or not: socket authority must not ride in
	 * under any name. */
	for (size_t i = 0; caller_env != NULL && caller_env[i] != NULL; i++) {
		const char *eq = strchr(caller_env[i], '=');
		char name[ENV_NAME_MAX + 1];
		size_t nl;
		enum reason r;

		if (eq == NULL)
			continue;
		nl = (size_t)(eq - caller_env[i]);
		if (nl > ENV_NAME_MAX)
			nl = ENV_NAME_MAX;
		memcpy(name, caller_env[i], nl);
		name[nl] = '\0';
		r = env_value_check(name, eq + 1, msg, sizeof(msg));
		if (r != REASON_ALLOWED)
			refuse(a, r, "caller environment: %s", msg);
		/* The placeholder variable is egress-exec's: a caller never supplies it (it
		 * could carry the real credential into the sandbox). */
		if (p->placeholder_env != NULL && strcmp(name, p->placeholder_env) == 0)
			refuse(a, REASON_ADM_ENV_FORBIDDEN, "caller environment: %s is the preset's "
			    "placeholder_env; egress-exec sets it, a caller may not", name);
	}
}

/* How a flag that is not true reads in a refusal. */
static const char *
wu_flag_word(enum wu_flag f)
{
	switch (f) {
	case WU_FLAG_ABSENT: return "missing";
	case WU_FLAG_INVALID: return "neither true nor false; only those two words are accepted";
	case WU_FLAG_TRUE:
	case WU_FLAG_NOT_TRUE: break;
	}
	return "false";
}

/* Preset read-only binds: operation authority, but never a sensitive location. Then the
 * executable: found now, not after the whole budget ran in a view that lacks it. */
static void
check_binds(struct admission *a, const struct preset *p)
{
	char msg[384];
	char *real;

	for (size_t i = 0; i < p->ro_binds.n; i++) {
		enum reason r = robind_check(p->ro_binds.v[i], msg, sizeof(msg));
		if (r != REASON_ALLOWED)
			refuse(a, r, "%s:%u: %s", p->file, p->ro_binds.line, msg);
	}
	real = realpath(p->executable, NULL);
	if (real == NULL || access(real, X_OK) != 0)
		refuse(a, REASON_ADM_EXECUTABLE_HIDDEN, "%s: executable %s: %s", p->file,
		    p->executable, strerror(errno));
	else if (!robind_visible(real, (const char *const *)p->ro_binds.v) ||
	    !robind_visible(p->executable, (const char *const *)p->ro_binds.v))
		refuse(a, REASON_ADM_EXECUTABLE_HIDDEN, "%s: executable %s (%s) is outside the "
		    "sandbox's view: it shows /usr, /bin, /sbin, /lib* and the preset's ro_bind "
		    "paths; add its directory as ro_bind", p->file, p->executable, real);
	free(real);
}

bool
admission_decide(const struct workunit *wu, const struct preset *p,
    const struct strlist *trusted, const char *const *caller_env, struct admission *out)
{
	memset(out, 0, sizeof(*out));
	out->admitted = true;

	if (wu->sandbox_required != WU_FLAG_TRUE)
		refuse(out, REASON_ADM_SANDBOX_REQUIRED, "%s:%u: security.sandbox_required must "
		    "be true (it is %s)", wu->file, wu->sandbox_required_line,
		    wu_flag_word(wu->sandbox_required));
	if (wu->process_execution != WU_FLAG_TRUE)
		refuse(out, REASON_ADM_PROCESS_EXECUTION, "%s:%u: permissions.process_execution "
		    "must be true (it is %s)", wu->file, wu->process_execution_line,
		    wu_flag_word(wu->process_execution));
	if (!wu->secrets.present)
		refuse(out, REASON_ADM_SECRETS, "%s: permissions.secrets must be present and "
		    "empty (`secrets =`)", wu->file);
	else if (wu->secrets.n > 0)
		refuse(out, REASON_ADM_SECRETS, "%s:%u: permissions.secrets names %zu secret(s); "
		    "a worker gets none", wu->file, wu->secrets.line, wu->secrets.n);

	check_network(out, wu, p, trusted);
	check_ceilings(out, wu, p);
	check_scope(out, wu);

	switch (p->transport) {
	case PT_STDIN:
		out->transport = PROMPT_STDIN;
		break;
	case PT_ARGUMENT:
		out->transport = PROMPT_ARGUMENT;
		/* One argv string is limited to MAX_ARG_STRLEN (32 pages) by the kernel: refuse
		 * here rather than let execve fail inside the sandbox. */
		if (strlen(wu->objective) >= 32 * 4096)
			refuse(out, REASON_ADM_INVALID_FILE, "%s: the objective (%zu bytes) is too "
			    "long for prompt_transport = argument; use a stdin preset", wu->file,
			    strlen(wu->objective));
		break;
	case PT_FILE:
		refuse(out, REASON_ADM_PROMPT_FILE, "%s: prompt_transport = file is refused until "
		    "an isolated input mount exists", p->file);
		break;
	case PT_ABSENT:
		refuse(out, REASON_ADM_INVALID_FILE, "%s: prompt_transport is missing", p->file);
		break;
	}

	check_env(out, p, caller_env);
	check_binds(out, p);

	if (!out->admitted)
		strlist_free(&out->grant);
	return out->admitted;
}

static const char *
net_str(enum sandbox_net n)
{
	return n == SANDBOX_NET_ALLOWLIST ? "allowlist" : "none";
}

static const char *
transport_str(enum prompt_transport t)
{
	switch (t) {
	case PROMPT_STDIN: return "stdin";
	case PROMPT_ARGUMENT: return "argument";
	case PROMPT_NONE: break;
	}
	return "none";
}

json_t *
admission_to_json(const struct admission *a)
{
	json_t *o = json_object();
	json_t *rs = json_array();

	if (o == NULL || rs == NULL) {
		json_decref(o);
		json_decref(rs);
		return NULL;
	}
	json_object_set_new(o, "admitted", json_boolean(a->admitted));
	for (size_t i = 0; i < a->nrefusals; i++) {
		json_array_append_new(rs, json_pack("{s:s, s:s, s:s}",
		    "reason", reason_str(a->refusals[i].reason),
		    "text", reason_text(a->refusals[i].reason),
		    "detail", a->refusals[i].detail));
	}
	json_object_set_new(o, "reasons", rs);
	if (a->refusals_truncated)
		json_object_set_new(o, "reasons_truncated", json_true());
	if (a->admitted) {
		json_t *g = json_array();
		for (size_t i = 0; i < a->grant.n; i++)
			json_array_append_new(g, json_string(a->grant.v[i]));
		json_object_set_new(o, "network", json_string(net_str(a->net)));
		json_object_set_new(o, "grant", g);
		json_object_set_new(o, "limits", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		    "wall_seconds", (json_int_t)a->limits.wall_seconds,
		    "cpu_millicores", (json_int_t)a->limits.cpu_millicores,
		    "memory_bytes", (json_int_t)a->limits.memory_bytes,
		    "disk_bytes", (json_int_t)a->limits.disk_bytes,
		    "processes", (json_int_t)a->limits.pids,
		    "output_bytes", (json_int_t)a->limits.output_bytes,
		    "diff_bytes", (json_int_t)a->diff_bytes));
		json_object_set_new(o, "prompt_transport",
		    json_string(transport_str(a->transport)));
	}
	return o;
}

void
admission_summary(const struct admission *a, char *buf, size_t len)
{
	if (a->admitted) {
		snprintf(buf, len, "admission: admitted (network %s, %zu destination%s, wall %us, "
		    "memory %llu bytes)", net_str(a->net), a->grant.n, a->grant.n == 1 ? "" : "s",
		    a->limits.wall_seconds, (unsigned long long)a->limits.memory_bytes);
		return;
	}
	if (a->nrefusals == 0) {
		snprintf(buf, len, "admission: refused");
		return;
	}
	snprintf(buf, len, "admission: refused: %s: %s%s", reason_str(a->refusals[0].reason),
	    a->refusals[0].detail, a->nrefusals > 1 ? " (and more; see the JSON)" : "");
}

bool
admission_from_files(const char *wu_path, const char *preset_path,
    const char *trusted_path, const char *const *caller_env, struct workunit **wu,
    struct preset **p, struct admission *a)
{
	char err[512];
	enum reason why = REASON_ADM_INVALID_FILE;
	struct strlist trusted;
	bool have_trusted = false;

	memset(a, 0, sizeof(*a));
	memset(&trusted, 0, sizeof(trusted));
	*wu = workunit_load(wu_path, &why, err, sizeof(err));
	if (*wu == NULL)
		refuse(a, why, "%s", err);
	why = REASON_ADM_INVALID_FILE;
	*p = preset_load(preset_path, &why, err, sizeof(err));
	if (*p == NULL)
		refuse(a, why, "%s", err);
	if (*wu == NULL || *p == NULL)
		return false;

	if ((*p)->network == PN_MODEL_ONLY && trusted_path != NULL) {
		if (trusted_models_load(trusted_path, (*p)->model_connection, &trusted, err,
		    sizeof(err)) != 0) {
			refuse(a, REASON_ADM_INVALID_FILE, "trusted model destinations: %s", err);
			return false;
		}
		have_trusted = true;
	}
	admission_decide(*wu, *p, have_trusted ? &trusted : NULL, caller_env, a);
	strlist_free(&trusted);
	return a->admitted;
}
