/* rectpl.c - a record's base members serialized once, with slots (rectpl.h). */
#include "egressd/rectpl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/jsonw.h"

/* A stretch of the text: base members not in a slot (slot < 0; one or more, separated by
 * commas), or the one base member of a slot (its key and value as the base had them). */
struct piece {
	size_t off, len;
	int slot;
};

struct rectpl {
	const char *const *slots;
	size_t nslots;
	bool in_base[RECTPL_SLOTS_MAX];
	struct piece *pieces;
	size_t npieces;
	char *text;
	size_t len, cap;
};

/* The slot named key, or -1. Callers pass the very literals of the slot list: those are
 * found by address, without a string compare per slot. */
static int
slot_of(const struct rectpl *t, const char *key)
{
	for (size_t k = 0; k < t->nslots; k++)
		if (key == t->slots[k])
			return (int)k;
	for (size_t k = 0; k < t->nslots; k++)
		if (strcmp(key, t->slots[k]) == 0)
			return (int)k;
	return -1;
}

/* Keys as jsonw takes them: [a-z_0-9]+, which jansson dumps as they are. */
static bool
key_plain(const char *k)
{
	if (*k == '\0')
		return false;
	for (; *k != '\0'; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '_'))
			return false;
	return true;
}

static bool
text_put(struct rectpl *t, const char *p, size_t n)
{
	if (n > t->cap - t->len) {
		size_t cap = t->cap > 0 ? t->cap : 1024;
		char *nt;

		while (cap - t->len < n) {
			if (cap > (size_t)-1 / 2)
				return false;
			cap *= 2;
		}
		if ((nt = realloc(t->text, cap)) == NULL)
			return false;
		t->text = nt;
		t->cap = cap;
	}
	memcpy(t->text + t->len, p, n);
	t->len += n;
	return true;
}

/* "key":value (jansson's compact dump of the value) at the end of the text: 0, or
 * EINVAL (a value jansson cannot dump), ENOMEM. */
static int
member_put(struct rectpl *t, const char *key, const json_t *value)
{
	char *v = json_dumps(value, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
	bool ok;

	if (v == NULL)
		return EINVAL;
	ok = text_put(t, "\"", 1) && text_put(t, key, strlen(key)) && text_put(t, "\":", 2) &&
	    text_put(t, v, strlen(v));
	free(v);
	return ok ? 0 : ENOMEM;
}

void
rectpl_free(struct rectpl *t)
{
	if (t == NULL)
		return;
	free(t->pieces);
	free(t->text);
	free(t);
}

struct rectpl *
rectpl_new(json_t *base, const char *const *slots, size_t nslots)
{
	struct rectpl *t;
	size_t nmem;
	int e;

	if (!json_is_object(base) || nslots > RECTPL_SLOTS_MAX) {
		errno = EINVAL;
		return NULL;
	}
	for (size_t k = 0; k < nslots; k++) {
		if (!key_plain(slots[k])) {
			errno = EINVAL;
			return NULL;
		}
		for (size_t j = 0; j < k; j++)
			if (strcmp(slots[j], slots[k]) == 0) {
				errno = EINVAL;
				return NULL;
			}
	}
	if ((t = calloc(1, sizeof(*t))) == NULL)
		return NULL;
	t->slots = slots;
	t->nslots = nslots;
	nmem = json_object_size(base);
	/* at most one piece per member */
	if (nmem > 0 && (t->pieces = calloc(nmem, sizeof(*t->pieces))) == NULL) {
		e = ENOMEM;
		goto fail;
	}
	for (void *it = json_object_iter(base); it != NULL;
	    it = json_object_iter_next(base, it)) {
		const char *key = json_object_iter_key(it);
		int k = slot_of(t, key);
		struct piece *last = t->npieces > 0 ? &t->pieces[t->npieces - 1] : NULL;
		size_t off = t->len;

		/* a key with a NUL inside would read as its prefix (and could match a slot) */
		if (!key_plain(key) || json_object_iter_key_len(it) != strlen(key)) {
			e = EINVAL;
			goto fail;
		}
		if (k < 0 && last != NULL && last->slot < 0) {
			/* one more member of the current run */
			if (!text_put(t, ",", 1)) {
				e = ENOMEM;
				goto fail;
			}
			if ((e = member_put(t, key, json_object_iter_value(it))) != 0)
				goto fail;
			last->len = t->len - last->off;
			continue;
		}
		if (t->npieces == nmem) {       /* at most one piece per member: cannot happen */
			e = EINVAL;
			goto fail;
		}
		if ((e = member_put(t, key, json_object_iter_value(it))) != 0)
			goto fail;
		t->pieces[t->npieces++] = (struct piece){ off, t->len - off, k };
		if (k >= 0)
			t->in_base[k] = true;
	}
	return t;
fail:
	rectpl_free(t);
	errno = e;
	return NULL;
}

static void
put_val(struct jsonw *w, const struct rectpl_val *v)
{
	switch (v->kind) {
	case RV_STR: jsonw_strn(w, v->key, v->s, v->n); break;
	case RV_NULL: jsonw_null(w, v->key); break;
	case RV_BOOL: jsonw_bool(w, v->key, v->i != 0); break;
	case RV_INT: jsonw_int(w, v->key, v->i); break;
	default: jsonw_fail(w); break;
	}
}

void
rectpl_write(const struct rectpl *t, struct jsonw *w, const struct rectpl_val *vals, size_t n)
{
	int at[RECTPL_SLOTS_MAX];     /* slot -> the value set for it, or -1 */
	int slot[RECTPL_SLOTS_MAX];   /* value -> its slot */

	if (n > RECTPL_SLOTS_MAX) {
		jsonw_fail(w);
		return;
	}
	for (size_t k = 0; k < RECTPL_SLOTS_MAX; k++)
		at[k] = -1;
	for (size_t i = 0; i < n; i++) {
		int k = slot_of(t, vals[i].key);

		if (k < 0 || at[k] >= 0) {
			jsonw_fail(w);
			return;
		}
		at[k] = (int)i;
		slot[i] = k;
	}
	for (size_t p = 0; p < t->npieces; p++) {
		const struct piece *pc = &t->pieces[p];

		if (pc->slot >= 0 && at[pc->slot] >= 0)
			put_val(w, &vals[at[pc->slot]]);
		else
			jsonw_members(w, t->text + pc->off, pc->len);
	}
	for (size_t i = 0; i < n; i++)
		if (!t->in_base[slot[i]])
			put_val(w, &vals[i]);
}
