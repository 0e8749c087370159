/*
 * rectpl - a record's fixed members serialized once, with slots for the members each
 * record sets: the bytes json_dumps(JSON_COMPACT | JSON_ENSURE_ASCII) writes for
 * json_copy(base) followed by json_object_set_new of the same members in the same order,
 * without the copy, its hash table or the dump (jsonw.h writes the set members).
 *
 * Used where many records share one base: each inner request of an intercepted model
 * connection writes its allow and its close from the hop's decision (mitm.c). The
 * template is built once per tunnel from the base object; a record is then a few copies of
 * ready member text and the set members written by jsonw.
 *
 * jansson's rules kept: a set member that is in the base keeps the base's place and takes
 * the new value; one that is not is added after the base's members, in the order set.
 * The slots (the keys a record may set) are named when the template is made; setting a
 * key that is not a slot, or one key twice in one record, fails the writer (a programming
 * error the tests catch). Owns its text; the base is not kept.
 *
 * Callers: egressd's loop thread (mitm.c); tests/test_rectpl.c and fuzz/fuzz_rectpl.c
 * compare it with jansson byte for byte.
 */
#ifndef EGRESS_RECTPL_H
#define EGRESS_RECTPL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct jsonw;
struct rectpl;

#define RECTPL_SLOTS_MAX 16

enum rectpl_kind { RV_STR, RV_NULL, RV_BOOL, RV_INT };

/* One member a record sets: key (a slot), and its value. RV_STR takes s (n bytes; s NULL:
 * null), RV_BOOL and RV_INT take i. */
struct rectpl_val {
	const char *key;
	enum rectpl_kind kind;
	const char *s;
	size_t n;
	long long i;
};

/*
 * The template of base (an object, only read; members in its order) with the given slots (nslots <=
 * RECTPL_SLOTS_MAX distinct keys of [a-z_0-9]; the array must outlive the template).
 * NULL with errno: ENOMEM, EINVAL (not an object, too many slots, a key that is not
 * [a-z_0-9]+, a value jansson cannot dump).
 */
struct rectpl *rectpl_new(json_t *base, const char *const *slots, size_t nslots);
void rectpl_free(struct rectpl *t);

/* Write the record's members into w: the base's, with the n set members (vals, in the
 * order they are set) in their places. The writer fails (jsonw_len: not ok) on overflow,
 * a key that is not a slot, or a key set twice. */
void rectpl_write(const struct rectpl *t, struct jsonw *w, const struct rectpl_val *vals,
    size_t n);

#endif
