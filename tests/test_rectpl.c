/* test_rectpl.c - a record template against jansson, byte for byte: the members of
 * json_copy(base) with the same members set in the same order, dumped compact and 7-bit
 * (rectpl.h); and its refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/jsonw.h"
#include "egressd/rectpl.h"

static const char *const slots[] = {
	"hop", "parent_hop", "hop_kind", "intercepted", "credential", "method", "target",
	"verdict", "reason", "tls_error", "status", "bytes_up", "bytes_down",
};
#define NSLOTS (sizeof(slots) / sizeof(slots[0]))

static json_t *
val_json(const struct rectpl_val *v)
{
	switch (v->kind) {
	case RV_STR: return v->s != NULL ? json_stringn(v->s, v->n) : json_null();
	case RV_NULL: return json_null();
	case RV_BOOL: return json_boolean(v->i != 0);
	case RV_INT: return json_integer(v->i);
	}
	return NULL;
}

/* The template's record for vals equals jansson's copy-and-set, member for member. */
static void
assert_same(json_t *base, const struct rectpl_val *vals, size_t n)
{
	char buf[16384];
	struct rectpl *t = rectpl_new(base, slots, NSLOTS);
	json_t *c = json_copy(base);
	struct jsonw w;
	char *want;
	size_t len, wl;
	bool ok;

	assert_non_null(t);
	assert_non_null(c);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(json_object_set_new(c, vals[i].key, val_json(&vals[i])), 0);
	want = json_dumps(c, JSON_COMPACT | JSON_ENSURE_ASCII);
	assert_non_null(want);
	wl = strlen(want);
	jsonw_init(&w, buf, sizeof(buf));
	rectpl_write(t, &w, vals, n);
	len = jsonw_len(&w, &ok);
	assert_true(ok);
	if (len != wl - 2 || memcmp(buf, want + 1, len) != 0)
		fail_msg("rectpl [%.*s]\njansson [%s]", (int)len, buf, want);
	/* a second record from the same template is the same (nothing of one stays) */
	jsonw_init(&w, buf, sizeof(buf));
	rectpl_write(t, &w, vals, n);
	assert_int_equal(jsonw_len(&w, &ok), len);
	assert_memory_equal(buf, want + 1, len);
	free(want);
	json_decref(c);
	rectpl_free(t);
}

#define S(k, v) { .key = (k), .kind = RV_STR, .s = (v), .n = strlen(v) }
#define I(k, v) { .key = (k), .kind = RV_INT, .i = (v) }

/* A hop's decision as session_record.c writes it: the base of an intercepted tunnel. */
static json_t *
hop_base(void)
{
	json_t *b = json_loads("{\"conn\":\"c-9\",\"principal\":\"ci \\u00e9t\\u00e9\","
	    "\"grant_id\":\"g-1\",\"client\":\"198.51.100.7:40000\",\"hop\":\"c-9/1\","
	    "\"parent_hop\":null,\"hop_kind\":\"connect\",\"credentials_stripped\":false,"
	    "\"upstream_reused\":false,\"method\":\"CONNECT\",\"target\":\"api.example.com:443\","
	    "\"target_truncated\":false,\"dest\":\"api.example.com:443\",\"verdict\":\"allow\","
	    "\"reason\":\"allowed\",\"route\":\"http://proxy.example:3128\","
	    "\"route_source\":\"pac\",\"resolved\":[\"203.0.113.5\",\"203.0.113.6\"],"
	    "\"pinned\":\"203.0.113.5\",\"classes_dropped\":[],\"override\":false,"
	    "\"attested\":true,\"checked\":\"local\",\"resolve_us\":12,\"connect_us\":-3,"
	    "\"nested\":{\"a\":[1,{\"b\":\"\\u0001\\\"\"}],\"c\":1.5}}", 0, NULL);

	assert_non_null(b);
	return b;
}

static void
test_records_of_a_hop(void **state)
{
	json_t *b = hop_base();
	/* the allow of an inner request, a deny with its TLS error, a close */
	struct rectpl_val allow[] = {
		S("hop", "c-9/1.1"), S("parent_hop", "c-9/1"), S("hop_kind", "inner"),
		{ .key = "intercepted", .kind = RV_BOOL, .i = 1 }, S("credential", "model"),
		S("method", "POST"), S("target", "/v1/responses \"q\"\n\xc3\xa9\xf0\x9f\x98\x80"),
		S("verdict", "allow"), S("reason", "allowed"),
	};
	struct rectpl_val deny[] = {
		S("hop", "c-9/1.2"), S("parent_hop", "c-9/1"), S("hop_kind", "inner"),
		{ .key = "intercepted", .kind = RV_BOOL, .i = 1 }, S("credential", "model"),
		{ .key = "method", .kind = RV_NULL }, { .key = "target", .kind = RV_NULL },
		S("verdict", "deny"), S("reason", "origin_tls_failed"),
		S("tls_error", "hostname mismatch"),
	};
	struct rectpl_val close[] = {
		S("hop", "c-9/1.1"), S("parent_hop", "c-9/1"), S("hop_kind", "inner"),
		{ .key = "intercepted", .kind = RV_BOOL, .i = 1 }, S("credential", "model"),
		S("method", "POST"), S("target", "/v1/responses"),
		I("status", 200), S("reason", "allowed"), I("bytes_up", 1234),
		I("bytes_down", LLONG_MAX),
	};

	(void)state;
	assert_same(b, allow, sizeof(allow) / sizeof(allow[0]));
	assert_same(b, deny, sizeof(deny) / sizeof(deny[0]));
	assert_same(b, close, sizeof(close) / sizeof(close[0]));
	assert_same(b, NULL, 0);
	json_decref(b);
}

/* Where the slots fall: first, last, side by side, absent; values of every kind. */
static void
test_slot_places(void **state)
{
	json_t *b = json_loads("{\"hop\":\"h\",\"parent_hop\":\"p\",\"x\":1,\"verdict\":\"v\","
	    "\"y\":[],\"z\":null,\"bytes_down\":0}", 0, NULL);
	json_t *empty = json_object();
	json_t *only = json_loads("{\"a\":\"\\u0001\",\"b\":true}", 0, NULL);
	const char nul[] = { 'a', '\0', 'b' };
	struct rectpl_val v1[] = {
		I("bytes_down", LLONG_MIN), S("status", "s"), { .key = "hop", .kind = RV_NULL },
		{ .key = "verdict", .kind = RV_BOOL, .i = 0 },
		{ .key = "tls_error", .kind = RV_STR, .s = nul, .n = sizeof(nul) },
	};
	struct rectpl_val v2[] = { S("parent_hop", "q") };
	struct rectpl_val v3[] = { I("bytes_up", -1), S("hop", "only"),
		{ .key = "reason", .kind = RV_STR, .s = NULL } };

	(void)state;
	assert_non_null(b);
	assert_non_null(only);
	assert_same(b, v1, 5);
	assert_same(b, v2, 1);
	assert_same(b, v3, 3);
	assert_same(empty, v1, 5);
	assert_same(empty, NULL, 0);
	assert_same(only, v3, 3);
	json_decref(b);
	json_decref(empty);
	json_decref(only);
}

static void
test_refusals(void **state)
{
	static const char *const bad_key[] = { "hop", "Hop" };
	static const char *const twice[] = { "hop", "hop" };
	static const char *const many[RECTPL_SLOTS_MAX + 1] = {
		"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q",
	};
	json_t *b = hop_base(), *arr = json_array(), *odd = json_object();
	struct rectpl *t = rectpl_new(b, slots, NSLOTS);
	struct rectpl_val notslot[] = { S("conn", "c-1") };
	struct rectpl_val dup[] = { S("hop", "a"), S("hop", "b") };
	struct rectpl_val one[] = { S("hop", "a") };
	char buf[16384], small[64];
	struct jsonw w;
	bool ok;

	(void)state;
	assert_non_null(t);
	/* setting a key that is not a slot (it may be a base member: never twice), or twice */
	jsonw_init(&w, buf, sizeof(buf));
	rectpl_write(t, &w, notslot, 1);
	assert_int_equal(jsonw_len(&w, &ok), 0);
	assert_false(ok);
	jsonw_init(&w, buf, sizeof(buf));
	rectpl_write(t, &w, dup, 2);
	(void)jsonw_len(&w, &ok);
	assert_false(ok);
	/* bounded: a record that does not fit fails whole */
	jsonw_init(&w, small, sizeof(small));
	rectpl_write(t, &w, one, 1);
	(void)jsonw_len(&w, &ok);
	assert_false(ok);
	rectpl_free(t);
	/* templates that cannot be made */
	errno = 0;
	assert_null(rectpl_new(b, bad_key, 2));
	assert_int_equal(errno, EINVAL);
	assert_null(rectpl_new(b, twice, 2));
	assert_int_equal(errno, EINVAL);
	assert_null(rectpl_new(b, many, RECTPL_SLOTS_MAX + 1));
	assert_int_equal(errno, EINVAL);
	assert_null(rectpl_new(arr, slots, NSLOTS));
	assert_int_equal(errno, EINVAL);
	/* a base key jsonw could not have written */
	assert_int_equal(json_object_set_new(odd, "Not plain", json_true()), 0);
	assert_null(rectpl_new(odd, slots, NSLOTS));
	assert_int_equal(errno, EINVAL);
	/* a key with a NUL inside: read as "hop" it would match a slot (a duplicate "hop") */
	json_decref(odd);
	odd = json_object();
	assert_int_equal(json_object_setn_new(odd, "hop\0x", 5, json_true()), 0);
	errno = 0;
	assert_null(rectpl_new(odd, slots, NSLOTS));
	assert_int_equal(errno, EINVAL);
	/* a value jansson cannot dump (not UTF-8, set without the check) */
	json_decref(odd);
	odd = json_object();
	assert_int_equal(json_object_set_new(odd, "conn", json_stringn_nocheck("\xff", 1)), 0);
	errno = 0;
	assert_null(rectpl_new(odd, slots, NSLOTS));
	assert_int_equal(errno, EINVAL);
	rectpl_free(NULL);
	json_decref(b);
	json_decref(arr);
	json_decref(odd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_records_of_a_hop),
		cmocka_unit_test(test_slot_places),
		cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
