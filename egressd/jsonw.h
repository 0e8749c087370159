/*
 * jsonw - a bounded writer of compact JSON object members, for the decision records of the
 * hot path (session_record.c): the bytes jansson's json_dumps(JSON_COMPACT |
 * JSON_ENSURE_ASCII) writes for an object built with the same calls in the same order,
 * without the object (no allocation, no hash table, no formatting by printf).
 *
 * Owns nothing: the caller gives the buffer (its size is the bound). Output is the
 * members without the braces ("k":v,"k2":v2), which is what dlog_append_raw takes.
 * Callers: egressd's loop thread (session_record.c, rectpl.c); tests/test_jsonw.c and
 * fuzz/fuzz_jsonw.c compare it with jansson byte for byte.
 *
 * Strings: escaped exactly as jansson escapes them with JSON_ENSURE_ASCII ('"', '\\',
 * \b \f \n \r \t, other controls as \u00XX, every code point above 0x7F as \uXXXX with
 * upper-case hex, surrogate pairs above the BMP; '/' and 0x7F as they are), so the log stays
 * 7-bit clean. jansson refuses a string that is not UTF-8; no record field can carry one
 * (every string reaching a record is checked ASCII first), and should one ever arrive,
 * each byte of an invalid sequence is written as \u00XX (the field stays, valid JSON,
 * readable) instead of the member silently disappearing.
 *
 * Keys are the caller's string literals: [a-z_0-9] only (checked; anything else marks the
 * writer failed, a programming error the tests catch).
 *
 * Bounded: a member that does not fit marks the writer overflowed and nothing more is
 * written (jsonw_len is then meaningless); the caller refuses the record (EMSGSIZE).
 */
#ifndef EGRESS_JSONW_H
#define EGRESS_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jsonw {
	char *buf;
	size_t cap;
	size_t len;
	bool failed;      /* overflow or an invalid key */
	bool in_array;    /* between jsonw_array_begin and jsonw_array_end */
	bool array_first;
};

/* Start writing members into buf (cap bytes; the output is not NUL-terminated). */
void jsonw_init(struct jsonw *w, char *buf, size_t cap);
/* "key":"val" (val NULL: "key":null). */
void jsonw_str(struct jsonw *w, const char *key, const char *val);
/* "key":"val" of n bytes (val may hold any bytes; NUL is written as \u0000). */
void jsonw_strn(struct jsonw *w, const char *key, const char *val, size_t n);
void jsonw_null(struct jsonw *w, const char *key);
void jsonw_bool(struct jsonw *w, const char *key, bool v);
void jsonw_int(struct jsonw *w, const char *key, long long v);
/* "key":[ ... ]: between begin and end only jsonw_array_str. */
void jsonw_array_begin(struct jsonw *w, const char *key);
void jsonw_array_str(struct jsonw *w, const char *val);
void jsonw_array_end(struct jsonw *w);
/* Members already written as compact JSON ("k":v,... by jsonw, or jansson's JSON_COMPACT |
 * JSON_ENSURE_ASCII dump without its braces; not checked: the caller's guarantee), copied
 * as they are, after a comma unless first. n 0 writes nothing. */
void jsonw_members(struct jsonw *w, const char *members, size_t n);
/* Mark the writer failed (a caller's own check did not hold). */
void jsonw_fail(struct jsonw *w);

/* Bytes written, or 0 with ok false when the writer failed (overflow, a bad key). */
size_t jsonw_len(const struct jsonw *w, bool *ok);

#endif
