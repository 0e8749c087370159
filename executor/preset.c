/*
 * preset - parse an AgentPreset file and the trusted model destinations file
 * (see executor/preset.h and docs/workunit.md).
 */
#include "executor/preset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/util.h"
#include "executor/robind.h"

const char *
preset_transport_str(enum preset_transport t)
{
	switch (t) {
	case PT_STDIN: return "stdin";
	case PT_ARGUMENT: return "argument";
	case PT_FILE: return "file";
	case PT_ABSENT: break;
	}
	return "absent";
}

const char *
preset_net_str(enum preset_net n)
{
	switch (n) {
	case PN_DISABLED: return "disabled";
	case PN_ALLOWLISTED: return "allowlisted";
	case PN_MODEL_ONLY: return "model_only";
	case PN_ABSENT: break;
	}
	return "absent";
}

void
preset_free(struct preset *p)
{
	if (p == NULL)
		return;
	free(p->file);
	free(p->name);
	free(p->executable);
	strlist_free(&p->argv);
	free(p->prompt_flag);
	free(p->model_connection);
	free(p->placeholder_env);
	strlist_free(&p->env_allowlist);
	strlist_free(&p->ro_binds);
	free(p);
}

#define PRESET_SCHEMA_MAX 32

static size_t
preset_schema(struct conf_key *s)
{
	size_t n = 0;

#define K(sec, k, f) do { s[n].section = (sec); s[n].key = (k); s[n].flags = (f); n++; } while (0)
	K("preset", "name", CONF_REQUIRED);
	K("preset", "executable", CONF_REQUIRED);
	/* `argv = sh -c 'a ; b'` would reach the worker as "sh -c 'a": refused instead */
	K("preset", "argv", CONF_LIST | CONF_NO_INLINE_COMMENT);
	K("preset", "prompt_transport", CONF_REQUIRED);
	K("preset", "prompt_flag", 0);
	K("preset", "network_policy", CONF_REQUIRED);
	K("preset", "model_connection", 0);
	K("preset", "placeholder_env", 0);
	K("preset", "env_allowlist", CONF_LIST);
	K("preset", "ro_bind", CONF_LIST);
	K("preset", "java_proxy", 0);
	K("preset", "transparent", 0);
#undef K
	n += ceilings_schema("ceilings", s + n, PRESET_SCHEMA_MAX - n);
	return n;
}

/* An absolute path with no ".", ".." or empty components and no control characters:
 * the preset names exactly one file, never something resolved relative to a cwd (the
 * rule of robind_path_canonical; "/" names no file). */
static bool
exec_path_valid(const char *s)
{
	return strcmp(s, "/") != 0 && robind_path_canonical(s);
}

#define REFUSE(...) do { *why = REASON_ADM_INVALID_FILE; snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

static struct preset *
preset_from_conf(const struct conf *c, const char *name, enum reason *why, char *err,
    size_t errlen)
{
	struct preset *p = calloc(1, sizeof(*p));
	long sec = conf_find_section(c, "preset");
	unsigned line = 0;
	const char *v;

	if (p == NULL || (p->file = strdup(name)) == NULL) {
		*why = REASON_INTERNAL_ERROR;
		snprintf(err, errlen, "%s: out of memory", name);
		goto fail;
	}
	if (sec < 0)
		REFUSE("%s: the [preset] section is required", name);

	v = conf_get(c, (size_t)sec, "name", &line);
	if (v == NULL || !label_valid(v, 64))
		REFUSE("%s:%u: name must be 1-64 characters of A-Z a-z 0-9 . _ -", name, line);
	p->name = strdup(v);

	v = conf_get(c, (size_t)sec, "executable", &line);
	if (v == NULL || !exec_path_valid(v))
		REFUSE("%s:%u: executable must be an absolute path without . or .. components",
		    name, line);
	p->executable = strdup(v);

	if (strlist_from_conf(c, (size_t)sec, "argv", &p->argv) != 0 ||
	    strlist_from_conf(c, (size_t)sec, "env_allowlist", &p->env_allowlist) != 0 ||
	    strlist_from_conf(c, (size_t)sec, "ro_bind", &p->ro_binds) != 0 ||
	    p->name == NULL || p->executable == NULL) {
		*why = REASON_INTERNAL_ERROR;
		snprintf(err, errlen, "%s: out of memory", name);
		goto fail;
	}
	if (p->argv.n > 256)
		REFUSE("%s:%u: argv has more than 256 entries", name, p->argv.line);
	v = conf_get(c, (size_t)sec, "java_proxy", &line);
	if (v != NULL) {
		if (strcmp(v, "yes") == 0)
			p->java_proxy = true;
		else if (strcmp(v, "no") != 0)
			REFUSE("%s:%u: java_proxy must be yes or no", name, line);
	}
	/* Transparent capture for proxy-unaware clients (docs/transparent.md): on unless
	 * the preset turns it off. */
	v = conf_get(c, (size_t)sec, "transparent", &line);
	if (v != NULL) {
		if (strcmp(v, "no") == 0)
			p->no_transparent = true;
		else if (strcmp(v, "yes") != 0)
			REFUSE("%s:%u: transparent must be yes or no", name, line);
	}
	/* Syntax only here; which paths may be shown is admission's (robind_check). */
	if (p->ro_binds.n > ROBIND_MAX)
		REFUSE("%s:%u: more than %d ro_bind entries", name, p->ro_binds.line, ROBIND_MAX);
	for (size_t i = 0; i < p->ro_binds.n; i++)
		if (!exec_path_valid(p->ro_binds.v[i]))
			REFUSE("%s:%u: ro_bind must be an absolute path without . or .. components",
			    name, p->ro_binds.line);

	v = conf_get(c, (size_t)sec, "prompt_transport", &line);
	if (v == NULL)
		REFUSE("%s: prompt_transport is required", name);
	if (strcmp(v, "stdin") == 0)
		p->transport = PT_STDIN;
	else if (strcmp(v, "argument") == 0)
		p->transport = PT_ARGUMENT;
	else if (strcmp(v, "file") == 0)
		p->transport = PT_FILE;
	else
		REFUSE("%s:%u: prompt_transport must be stdin, argument or file", name, line);

	v = conf_get(c, (size_t)sec, "prompt_flag", &line);
	if (v != NULL) {
		if (p->transport != PT_ARGUMENT)
			REFUSE("%s:%u: prompt_flag is only for prompt_transport = argument", name,
			    line);
		if (v[0] != '-' || strlen(v) > 64 || strpbrk(v, " \t=") != NULL)
			REFUSE("%s:%u: prompt_flag must be one option such as --prompt", name, line);
		if ((p->prompt_flag = strdup(v)) == NULL) {
			*why = REASON_INTERNAL_ERROR;
			snprintf(err, errlen, "%s: out of memory", name);
			goto fail;
		}
	} else if (p->transport == PT_ARGUMENT) {
		REFUSE("%s: prompt_transport = argument needs the preset's own prompt_flag", name);
	}

	v = conf_get(c, (size_t)sec, "network_policy", &line);
	if (v == NULL)
		REFUSE("%s: network_policy is required", name);
	if (strcmp(v, "disabled") == 0)
		p->network = PN_DISABLED;
	else if (strcmp(v, "allowlisted") == 0)
		p->network = PN_ALLOWLISTED;
	else if (strcmp(v, "model_only") == 0)
		p->network = PN_MODEL_ONLY;
	else
		REFUSE("%s:%u: network_policy must be disabled, allowlisted or model_only", name,
		    line);

	v = conf_get(c, (size_t)sec, "model_connection", &line);
	if (v != NULL) {
		if (p->network != PN_MODEL_ONLY)
			REFUSE("%s:%u: model_connection is only for network_policy = model_only",
			    name, line);
		if (!label_valid(v, 64))
			REFUSE("%s:%u: model_connection must be a connection name", name, line);
		if ((p->model_connection = strdup(v)) == NULL) {
			*why = REASON_INTERNAL_ERROR;
			snprintf(err, errlen, "%s: out of memory", name);
			goto fail;
		}
	} else if (p->network == PN_MODEL_ONLY) {
		REFUSE("%s: network_policy = model_only needs model_connection", name);
	}

	v = conf_get(c, (size_t)sec, "placeholder_env", &line);
	if (v != NULL) {
		bool ok = p->model_connection != NULL && strlen(v) <= 64 &&
		    ((v[0] >= 'A' && v[0] <= 'Z') || v[0] == '_');
		for (const char *q = v; ok && *q; q++)
			ok = (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_';
		if (!ok)
			REFUSE("%s:%u: placeholder_env must be an upper-case variable name, with "
			    "model_connection", name, line);
		for (size_t i = 0; i < p->env_allowlist.n; i++)
			if (strcmp(p->env_allowlist.v[i], v) == 0)
				REFUSE("%s:%u: placeholder_env %s is set by egress-exec: it cannot also "
				    "be in env_allowlist", name, line, v);
		if ((p->placeholder_env = strdup(v)) == NULL) {
			*why = REASON_INTERNAL_ERROR;
			snprintf(err, errlen, "%s: out of memory", name);
			goto fail;
		}
	}

	sec = conf_find_section(c, "ceilings");
	if (sec >= 0)
		ceilings_from_conf(c, (size_t)sec, &p->ceilings);
	return p;
fail:
	preset_free(p);
	return NULL;
}

/* The preset of a loaded file (c is freed). */
static struct preset *
preset_take(struct conf *c, const char *name, enum reason *why, char *err, size_t errlen)
{
	struct preset *p;

	if (c == NULL) {
		*why = REASON_ADM_INVALID_FILE;
		return NULL;
	}
	p = preset_from_conf(c, name, why, err, errlen);
	conf_free(c);
	return p;
}

struct preset *
preset_load_string(const char *name, const char *text, size_t len, enum reason *why,
    char *err, size_t errlen)
{
	struct conf_key schema[PRESET_SCHEMA_MAX];
	size_t n = preset_schema(schema);

	return preset_take(conf_load_string(name, text, len, schema, n, err, errlen), name, why,
	    err, errlen);
}

struct preset *
preset_load(const char *path, enum reason *why, char *err, size_t errlen)
{
	struct conf_key schema[PRESET_SCHEMA_MAX];
	size_t n = preset_schema(schema);

	return preset_take(conf_load(path, schema, n, err, errlen), path, why, err, errlen);
}

/* The connection layer's file is shared with egressd (egressd/connections.h): egressd
 * reads the credential keys; egress-exec only needs to know whether one is bound. */
static const struct conf_key trusted_schema[] = {
	{ "connection *", "destination", CONF_LIST },
	{ "connection *", "credential_file", 0 },
	{ "connection *", "credential_header", 0 },
	{ "connection *", "allow_method", CONF_LIST },
	{ "connection *", "allow_path", CONF_LIST },
};

static int
trusted_from_conf(const struct conf *c, const char *connection, struct strlist *out)
{
	char secname[128];
	long sec;

	memset(out, 0, sizeof(*out));
	if (snprintf(secname, sizeof(secname), "connection %s", connection) >=
	    (int)sizeof(secname))
		return 0;
	sec = conf_find_section(c, secname);
	if (sec < 0)
		return 0;
	if (strlist_from_conf(c, (size_t)sec, "destination", out) != 0)
		return -1;
	/* A connection section that names nothing gives nothing: present only with entries. */
	out->present = out->n > 0;
	return 0;
}

/* The [connection NAME] entries of a loaded file (c is freed). */
static int
trusted_models_take(struct conf *c, const char *name, const char *connection,
    struct strlist *out, char *err, size_t errlen)
{
	int rc;

	if (c == NULL)
		return -1;
	rc = trusted_from_conf(c, connection, out);
	if (rc != 0)
		snprintf(err, errlen, "%s: out of memory", name);
	conf_free(c);
	return rc;
}

int
trusted_models_load_string(const char *name, const char *text, size_t len,
    const char *connection, struct strlist *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	return trusted_models_take(conf_load_string(name, text, len, trusted_schema,
	    EGRESS_NELEM(trusted_schema), err, errlen), name, connection, out, err, errlen);
}

int
trusted_models_load(const char *path, const char *connection, struct strlist *out,
    char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	return trusted_models_take(conf_load(path, trusted_schema,
	    EGRESS_NELEM(trusted_schema), err, errlen), path, connection, out, err, errlen);
}

int
trusted_models_bound(const char *path, const char *connection, bool *bound, char *err,
    size_t errlen)
{
	struct conf *c = conf_load(path, trusted_schema, EGRESS_NELEM(trusted_schema), err,
	    errlen);
	char secname[128];
	long sec;

	*bound = false;
	if (c == NULL)
		return -1;
	if (snprintf(secname, sizeof(secname), "connection %s", connection) <
	    (int)sizeof(secname) && (sec = conf_find_section(c, secname)) >= 0)
		*bound = conf_get(c, (size_t)sec, "credential_file", NULL) != NULL;
	conf_free(c);
	return 0;
}
