/*
 * fuzz_pathglob - common/pathglob: glob_match, path_glob_match, path_check, and git's
 * reserved names (path_has_dotgit, path_is_git_control_file).
 *
 * Input: pattern, a NUL byte, name (no NUL: the name ends at the next NUL or the end).
 * Invariants: a pattern without metacharacters matches exactly the identical name (and,
 * through path_glob_match, names beneath it); "*" matches everything; "?" matches a name
 * of exactly one character; a path path_check accepts has no control characters, no
 * leading '/', and no "." or ".." components. path_has_dotgit is true for a name with a
 * ".git" component in any case, and for "x/" + name whenever for name; it is the OR of
 * path_component_is_dotgit over the components.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/pathglob.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char pat[EGRESS_GLOB_MAX + 64], name[EGRESS_PATH_MAX + 64];
	const uint8_t *z;
	size_t pl, nl;

	if (size > EGRESS_GLOB_MAX + EGRESS_PATH_MAX)
		return 0;
	z = memchr(data, '\0', size);
	pl = z != NULL ? (size_t)(z - data) : size;
	if (pl >= sizeof(pat))
		return 0;
	memcpy(pat, data, pl);
	pat[pl] = '\0';
	nl = 0;
	if (z != NULL) {
		const uint8_t *rest = z + 1;
		size_t rl = size - pl - 1;
		const uint8_t *z2 = memchr(rest, '\0', rl);

		nl = z2 != NULL ? (size_t)(z2 - rest) : rl;
		if (nl >= sizeof(name))
			return 0;
		memcpy(name, rest, nl);
	}
	name[nl] = '\0';

	bool m = glob_match(pat, name);
	bool pm = path_glob_match(pat, name);
	if (m && !pm)
		abort();
	if (glob_valid(pat) && !glob_is_pattern(pat)) {
		if (m != (strcmp(pat, name) == 0))
			abort();
		if (!glob_match(pat, pat))
			abort();
		if (pm && !m && !(strncmp(name, pat, pl) == 0 && name[pl] == '/'))
			abort();
	}
	if (!glob_match("*", name) || !glob_match("**", pat))
		abort();
	(void)glob_match(name, pat);        /* roles swapped: any bytes as a pattern */

	{
		/* git's reserved names: consistent with the components they are made of */
		bool any = false, plain = false;
		const char *c = name;
		char pre[EGRESS_PATH_MAX + 80];

		while (c != NULL) {
			const char *sl = strchr(c, '/');
			size_t cl = sl != NULL ? (size_t)(sl - c) : strlen(c);
			if (path_component_is_dotgit(c, cl))
				any = true;
			if (cl == 4 && (c[0] == '.') && (c[1] | 32) == 'g' && (c[2] | 32) == 'i' &&
			    (c[3] | 32) == 't')
				plain = true;
			c = sl != NULL ? sl + 1 : NULL;
		}
		if (path_has_dotgit(name) != any || (plain && !any))
			abort();
		snprintf(pre, sizeof(pre), "x/%s", name);
		if (any && !path_has_dotgit(pre))
			abort();
		(void)path_is_git_control_file(name);
	}

	enum path_err e = path_check(name);
	if (path_err_str(e) == NULL)
		abort();
	if (e == PATH_OK) {
		if (nl == 0 || name[0] == '/' || strstr(name, "//") != NULL ||
		    name[nl - 1] == '/' || strchr(name, '\\') != NULL)
			abort();
		for (size_t i = 0; i < nl; i++)
			if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
				abort();
		/* every component differs from "." and ".." */
		const char *c = name;
		while (c != NULL) {
			const char *sl = strchr(c, '/');
			size_t cl = sl != NULL ? (size_t)(sl - c) : strlen(c);
			if ((cl == 1 && c[0] == '.') || (cl == 2 && c[0] == '.' && c[1] == '.'))
				abort();
			c = sl != NULL ? sl + 1 : NULL;
		}
	}
	return 0;
}
