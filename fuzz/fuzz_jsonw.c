/*
 * fuzz_jsonw - egressd/jsonw against jansson (differential): the hot path's records must
 * be the bytes json_dumps(JSON_COMPACT | JSON_ENSURE_ASCII) writes.
 *
 * Invariants: for any input jansson accepts as a string (UTF-8, NUL allowed), jsonw's
 * member is byte-identical to jansson's; for any other input jsonw still writes valid
 * JSON that parses back (each invalid byte as \u00XX) and is 7-bit clean; a buffer that
 * is too small fails the writer instead of writing past it or cutting a member.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "egressd/jsonw.h"
#include "fuzz/jsoncheck.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char buf[8 * 1024 + 16], small[32];
	struct jsonw w;
	json_t *s;
	size_t n;
	bool ok;

	if (size > 1024)
		return 0;
	jsonw_init(&w, buf + 1, sizeof(buf) - 2);
	jsonw_strn(&w, "k", (const char *)data, size);
	n = jsonw_len(&w, &ok);
	if (!ok)
		abort();   /* 12 bytes per input byte at most: always fits */
	members_check(buf, n);
	s = json_stringn((const char *)data, size);
	if (s != NULL) {
		json_t *o = json_object();
		char *want;

		json_object_set_new(o, "k", s);
		want = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
		if (want == NULL || strlen(want) != n + 2 || memcmp(want, buf, n + 2) != 0)
			abort();
		free(want);
		json_decref(o);
	}
	/* bounded: a small buffer fails whole, never overruns */
	jsonw_init(&w, small, sizeof(small));
	jsonw_strn(&w, "k", (const char *)data, size);
	(void)jsonw_len(&w, &ok);
	if (ok != (n <= sizeof(small)))
		abort();
	{
		size_t m = strnlen((const char *)data, size);
		char *c = malloc(m + 1), *lossy, *want;
		json_t *o;

		if (c == NULL)
			return 0;
		memcpy(c, data, m);
		c[m] = '\0';
		lossy = utf8_lossy_dup(c);
		if (lossy == NULL || !utf8_valid(lossy, strlen(lossy)))
			abort();
		jsonw_init(&w, buf + 1, sizeof(buf) - 2);
		jsonw_strn(&w, "k", c, m);
		n = jsonw_len(&w, &ok);
		buf[0] = '{';
		buf[n + 1] = '}';
		o = json_object();
		json_object_set_new(o, "k", json_string(lossy));
		want = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
		if (!ok || want == NULL || strlen(want) != n + 2 || memcmp(want, buf, n + 2) != 0)
			abort();
		free(want);
		json_decref(o);
		free(lossy);
		free(c);
	}
	return 0;
}
