/*
 * fuzz_gitconfig - executor/gitconfig: the repository config shown to a worker, from
 * hostile bytes.
 *
 * Invariants on every success: the output is NUL-terminated text of the reported length;
 * it contains no "extraheader" key, no credential/include section header and no
 * scheme://user@ user information (case-insensitive checks over the whole output); and
 * sanitizing the output again only prepends its banner line (idempotent).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "executor/gitconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
has_userinfo(const char *s)
{
	for (const char *p = strstr(s, "://"); p != NULL; p = strstr(p + 3, "://")) {
		const char *a = p + 3;
		size_t e = strcspn(a, "/?#\" \t\\;\n");
		if (memchr(a, '@', e) != NULL)
			return 1;
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *out = NULL, *again = NULL;
	size_t outlen = 0, againlen = 0;
	unsigned changed = 0, changed2 = 0;

	if (gitconfig_sanitize((const char *)data, size, &out, &outlen, &changed) != 0)
		return 0;
	if (out == NULL || strlen(out) != outlen)
		abort();
	for (char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *t = l + strspn(l, " \t");
		if (*t == '#' || *t == ';')
			continue;
		if (strncasecmp(t, "extraheader", 11) == 0 && strchr(" \t=\r\n", t[11]) != NULL)
			abort();
		if (*t == '[') {
			char name[64];
			size_t k = 0;
			for (t++; k + 1 < sizeof(name) && *t && strchr(" ].\"\n", *t) == NULL; t++)
				name[k++] = *t;
			name[k] = '\0';
			if (strcasecmp(name, "credential") == 0 || strcasecmp(name, "include") == 0 ||
			    strcasecmp(name, "includeif") == 0)
				abort();
		}
	}
	if (has_userinfo(out))
		abort();
	if (gitconfig_sanitize(out, outlen, &again, &againlen, &changed2) != 0)
		abort();
	/* the second pass only prepends its banner again */
	{
		const char *nl = strchr(again, '\n');
		if (nl == NULL || strcmp(nl + 1, out) != 0 || changed2 != 0)
			abort();
	}
	free(again);
	free(out);
	return 0;
}
