/*
 * fuzz_env - executor/env: env_name_check, env_value_check and env_build on hostile input.
 *
 * Input: lines. A line starting with '+' adds the rest to the allowlist; any other line is a
 * source entry (NAME=VALUE, or junk). Invariants on every successful build: each output
 * entry is NAME=VALUE with a name that env_name_check allows (or one egress-exec sets
 * itself), a value that env_value_check allows, no duplicate names, at most
 * EGRESS_ENV_VARS_MAX entries, and every copied variable was allowlisted and present in the
 * source with that value. A refusal returns no array and a refusal reason.
 *
 * The same bytes are also an --env-file for env_file_parse, the one parser `run` and
 * `check` share: on success every entry is NAME=VALUE with a non-empty name, no newline,
 * at most EGRESS_ENV_VARS_MAX entries, each a line of the input; on refusal no array and
 * a "name:line:" message.
 */
#define _GNU_SOURCE 1
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "executor/env.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_LINES 64

static bool
set_by_us(const char *name, size_t nl)
{
	static const char *const ours[] = {
		"PATH", "HOME", "LANG", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
		"NO_PROXY", "no_proxy",
	};
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		if (strlen(ours[i]) == nl && memcmp(ours[i], name, nl) == 0)
			return true;
	return false;
}

/* Does any source entry define name? */
static bool
sourced_any(const char *const *source, size_t ns, const char *name, size_t nl)
{
	for (size_t k = 0; k < ns; k++)
		if (strncmp(source[k], name, nl) == 0 && source[k][nl] == '=')
			return true;
	return false;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	const char *allow[MAX_LINES + 1], *source[MAX_LINES + 1];
	size_t na = 0, ns = 0;
	char msg[256];
	char **file = NULL;

	if (text == NULL)
		return 0;
	if (env_file_parse("f", (const char *)data, size, &file, msg, sizeof(msg)) == 0) {
		size_t k = 0;
		if (file == NULL)
			abort();
		for (; file[k] != NULL; k++) {
			const char *eq = strchr(file[k], '=');
			size_t l = strlen(file[k]);
			if (eq == NULL || eq == file[k] || strchr(file[k], '\n') != NULL ||
			    file[k][0] == '#' || l > ENV_NAME_MAX + 1 + ENV_VALUE_MAX ||
			    memmem(data, size, file[k], l) == NULL)
				abort();
		}
		if (k > EGRESS_ENV_VARS_MAX)
			abort();
		env_free(file);
	} else if (file != NULL || strncmp(msg, "f:", 2) != 0) {
		abort();
	}
	memcpy(text, data, size);
	text[size] = '\0';
	for (char *line = text; line != NULL && na < MAX_LINES && ns < MAX_LINES;) {
		char *nl = strchr(line, '\n');
		if (nl != NULL)
			*nl = '\0';
		if (line[0] == '+') {
			allow[na++] = line + 1;
			/* the checks alone must never crash and always give a known reason */
			enum reason r = env_name_check(line + 1, msg, sizeof(msg));
			if (r != REASON_ALLOWED && r != REASON_ADM_ENV_FORBIDDEN)
				abort();
		} else {
			source[ns++] = line;
			enum reason r = env_value_check("X", line, msg, sizeof(msg));
			if (r != REASON_ALLOWED && r != REASON_ADM_ENV_SOCKET &&
			    r != REASON_ADM_ENV_FORBIDDEN)
				abort();
		}
		line = nl != NULL ? nl + 1 : NULL;
	}
	allow[na] = NULL;
	source[ns] = NULL;

	struct env_opts opts = { .proxy_url = (size & 1) ? "http://169.254.1.1:3128" : NULL };
	char **out = NULL;
	enum reason why = REASON_ALLOWED;
	int rc = env_build(allow, source, &opts, &out, &why, msg, sizeof(msg));
	if (rc != 0) {
		if (out != NULL || why == REASON_ALLOWED)
			abort();
		free(text);
		return 0;
	}
	if (out == NULL || why != REASON_ALLOWED)
		abort();
	size_t n = 0;
	for (; out[n] != NULL; n++) {
		const char *eq = strchr(out[n], '=');
		if (eq == NULL || eq == out[n])
			abort();
		size_t nl = (size_t)(eq - out[n]);
		char name[ENV_NAME_MAX + 1];
		if (nl > ENV_NAME_MAX)
			abort();
		memcpy(name, out[n], nl);
		name[nl] = '\0';
		if (env_value_check(name, eq + 1, NULL, 0) != REASON_ALLOWED &&
		    !(set_by_us(name, nl)))
			abort();
		for (size_t k = 0; k < n; k++)
			if (strncmp(out[k], out[n], nl + 1) == 0)
				abort(); /* duplicate name */
		/* PATH and LANG may be ours or copied; the rest of ours is never copied. */
		if (set_by_us(name, nl) && strcmp(name, "PATH") != 0 && strcmp(name, "LANG") != 0)
			continue;
		if (env_name_check(name, NULL, 0) != REASON_ALLOWED)
			abort();
		/* copied: allowlisted and from the source with this exact value */
		bool allowed = false, sourced = false;
		for (size_t k = 0; k < na; k++)
			if (strcmp(allow[k], name) == 0)
				allowed = true;
		for (size_t k = 0; k < ns; k++)
			if (strncmp(source[k], out[n], nl + 1) == 0) {
				sourced = strcmp(source[k], out[n]) == 0;
				break; /* first entry wins */
			}
		bool ours = set_by_us(name, nl); /* PATH / LANG defaults when not copied */
		if (!ours && (!allowed || !sourced))
			abort();
		if (ours && allowed && !sourced && sourced_any(source, ns, name, nl))
			abort();
	}
	if (n > EGRESS_ENV_VARS_MAX)
		abort();
	env_free(out);
	free(text);
	return 0;
}
