/*
 * fuzz_rectpl - egressd/rectpl against jansson (differential): a record made from a
 * template must be the bytes json_dumps(JSON_COMPACT | JSON_ENSURE_ASCII) writes for
 * json_copy(base) with the same members set in the same order.
 *
 * The input is read as a program: a base object (keys from a pool that mixes the slots
 * with other names; values of every JSON kind, strings from the input), then the members
 * one record sets (slots, distinct, in any order; strings from the input, any bytes).
 *
 * Invariants: the record is byte-identical to jansson's, a set string that is not UTF-8
 * compared as jansson writes its bytes read as U+0080-U+00FF (jsonw.h); in the one case
 * left (NUL and invalid bytes in one string) it is still valid, 7-bit JSON; a buffer too small fails the writer
 * whole (never written past); a second record from the template is the same.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "egressd/jsonw.h"
#include "fuzz/jsoncheck.h"
#include "egressd/rectpl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const slots[] = {
	"hop", "parent_hop", "hop_kind", "intercepted", "credential", "method", "target",
	"verdict", "reason", "tls_error", "status", "bytes_up", "bytes_down",
};
#define NSLOTS (sizeof(slots) / sizeof(slots[0]))
static const char *const others[] = {
	"conn", "principal", "grant_id", "client", "dest", "resolved", "pinned", "route",
	"classes_dropped", "resolve_us", "x0",
};
#define NOTHERS (sizeof(others) / sizeof(others[0]))

/*
 * What jansson writes for a set string: the string itself, or when it is not UTF-8 (jsonw
 * then writes each invalid byte as \u00XX), the same bytes read as those code points
 * (utf8_lossy_dup). NULL when neither applies (a string with NUL and invalid bytes both).
 */
static json_t *
expect_string(const char *s, size_t n)
{
	json_t *j = json_stringn(s, n);
	char *c, *lossy;

	if (j != NULL || memchr(s, '\0', n) != NULL)
		return j;
	if ((c = malloc(n + 1)) == NULL)
		return NULL;
	memcpy(c, s, n);
	c[n] = '\0';
	lossy = utf8_lossy_dup(c);
	j = lossy != NULL ? json_string(lossy) : NULL;
	free(lossy);
	free(c);
	return j;
}

struct in {
	const uint8_t *p;
	size_t n;
};

static unsigned
byte(struct in *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

/* up to 31 bytes of the input as a string's bytes */
static const char *
bytes(struct in *in, size_t *len)
{
	size_t l = byte(in) % 32;
	const char *s = (const char *)in->p;

	if (l > in->n)
		l = in->n;
	in->p += l;
	in->n -= l;
	*len = l;
	return s;
}

static long long
integer(struct in *in)
{
	unsigned long long v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | byte(in);
	return (long long)v;
}

/* a base value; strings jansson refuses become null (a base is jansson's own) */
static json_t *
value(struct in *in, int depth)
{
	size_t l;
	const char *s;
	json_t *v;

	switch (byte(in) % 7) {
	case 0:
		s = bytes(in, &l);
		v = json_stringn(s, l);
		return v != NULL ? v : json_null();
	case 1: return json_integer(integer(in));
	case 2: return json_boolean(byte(in) & 1);
	case 3: return json_null();
	case 4: return json_real((double)(int8_t)byte(in) / 4.0);
	case 5:
		v = json_array();
		for (unsigned k = byte(in) % 4; k > 0 && depth < 3; k--)
			json_array_append_new(v, value(in, depth + 1));
		return v;
	default:
		v = json_object();
		for (unsigned k = byte(in) % 3; k > 0 && depth < 3; k--)
			json_object_set_new(v, others[byte(in) % NOTHERS], value(in, depth + 1));
		return v;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	struct rectpl_val vals[RECTPL_SLOTS_MAX];
	bool used[NSLOTS] = { false }, exact = true, ok;
	static char buf[65536], again[65536];
	char small[48];
	json_t *base = json_object(), *copy;
	struct rectpl *t;
	struct jsonw w;
	size_t n = 0, len;

	if (size > 4096 || base == NULL)
		return 0;
	for (unsigned k = byte(&in) % 24; k > 0; k--) {
		unsigned c = byte(&in);
		const char *key = c & 1 ? slots[(c >> 1) % NSLOTS] : others[(c >> 1) % NOTHERS];

		json_object_set_new(base, key, value(&in, 0));
	}
	for (unsigned k = byte(&in) % (NSLOTS + 1); k > 0; k--) {
		unsigned si = byte(&in) % NSLOTS;
		struct rectpl_val *v = &vals[n];

		if (used[si])
			continue;
		used[si] = true;
		memset(v, 0, sizeof(*v));
		v->key = slots[si];
		v->kind = (enum rectpl_kind)(byte(&in) % 4);
		if (v->kind == RV_STR) {
			v->s = byte(&in) % 8 == 0 ? NULL : bytes(&in, &v->n);
			if (v->s != NULL) {
				json_t *j = expect_string(v->s, v->n);

				exact = exact && j != NULL;
				json_decref(j);
			}
		} else {
			v->i = integer(&in);
		}
		n++;
	}
	t = rectpl_new(base, slots, NSLOTS);
	if (t == NULL) {
		json_decref(base);
		return 0;    /* out of memory only: every key here is plain */
	}
	jsonw_init(&w, buf + 1, sizeof(buf) - 2);
	rectpl_write(t, &w, vals, n);
	len = jsonw_len(&w, &ok);
	if (!ok)
		abort();     /* distinct slots, and 64 KiB holds any of these records */
	members_check(buf, len);
	if (exact) {
		char *want;

		copy = json_copy(base);
		for (size_t i = 0; i < n; i++) {
			const struct rectpl_val *v = &vals[i];
			json_t *j = v->kind == RV_STR ? (v->s != NULL ? expect_string(v->s, v->n) :
			    json_null()) : v->kind == RV_NULL ? json_null() : v->kind == RV_BOOL ?
			    json_boolean(v->i != 0) : json_integer(v->i);

			json_object_set_new(copy, v->key, j);
		}
		want = json_dumps(copy, JSON_COMPACT | JSON_ENSURE_ASCII);
		if (want == NULL || strlen(want) != len + 2 || memcmp(want, buf, len + 2) != 0)
			abort();
		free(want);
		json_decref(copy);
	}
	/* the same record again: nothing of the first stays in the template */
	jsonw_init(&w, again, sizeof(again));
	rectpl_write(t, &w, vals, n);
	if (jsonw_len(&w, &ok) != len || !ok || memcmp(again, buf + 1, len) != 0)
		abort();
	/* bounded: a small buffer fails whole, never overruns */
	jsonw_init(&w, small, sizeof(small));
	rectpl_write(t, &w, vals, n);
	(void)jsonw_len(&w, &ok);
	if (ok != (len <= sizeof(small)))
		abort();
	rectpl_free(t);
	json_decref(base);
	return 0;
}
