/*
 * jsoncheck.h - what the harnesses of the record writers (fuzz_jsonw, fuzz_rectpl) require
 * of any members they wrote: 7-bit clean, and valid JSON once wrapped in braces.
 */
#ifndef EGRESS_FUZZ_JSONCHECK_H
#define EGRESS_FUZZ_JSONCHECK_H

#include <jansson.h>
#include <stdlib.h>

/* buf holds n bytes of members from buf + 1, with room for a brace on either side. */
static inline void
members_check(char *buf, size_t n)
{
	json_t *back;

	for (size_t i = 1; i <= n; i++)
		if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] > 0x7f)
			abort();
	buf[0] = '{';
	buf[n + 1] = '}';
	back = json_loadb(buf, n + 2, JSON_ALLOW_NUL, NULL);
	if (back == NULL)
		abort();
	json_decref(back);
}

#endif
