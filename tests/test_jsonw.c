/* test_jsonw.c - the hot path's JSON member writer against jansson, byte for byte: the
 * decision records it writes must be what json_dumps(JSON_COMPACT | JSON_ENSURE_ASCII)
 * wrote for the same object before (jsonw.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/addrcheck.h"
#include "egressd/jsonw.h"

/* jansson's members of o (its dump without the braces), NUL-terminated; caller frees. */
static char *
jansson_members(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	size_t n;

	assert_non_null(s);
	n = strlen(s);
	assert_true(n >= 2 && s[0] == '{' && s[n - 1] == '}');
	memmove(s, s + 1, n - 2);
	s[n - 2] = '\0';
	json_decref(o);
	return s;
}

static void
assert_members(struct jsonw *w, json_t *o)
{
	char *want = jansson_members(o);
	bool ok;
	size_t n = jsonw_len(w, &ok);

	assert_true(ok);
	if (n != strlen(want) || memcmp(w->buf, want, n) != 0)
		fail_msg("jsonw [%.*s]\njansson [%s]", (int)n, w->buf, want);
	free(want);
}

/* One string value both ways; returns false when jansson refuses it (not UTF-8). */
static bool
same_string(const char *v, size_t n)
{
	char buf[4096];
	struct jsonw w;
	json_t *s = json_stringn(v, n), *o;

	if (s == NULL)
		return false;
	o = json_object();
	json_object_set_new(o, "k", s);
	jsonw_init(&w, buf, sizeof(buf));
	jsonw_strn(&w, "k", v, n);
	assert_members(&w, o);
	return true;
}

static void
test_record_shape(void **state)
{
	char buf[4096];
	struct jsonw w;
	json_t *o = json_object(), *a = json_array(), *e = json_array();

	(void)state;
	jsonw_init(&w, buf, sizeof(buf));
	jsonw_str(&w, "conn", "c-4c4aeefb-1");
	jsonw_str(&w, "parent_hop", NULL);
	jsonw_bool(&w, "credentials_stripped", false);
	jsonw_bool(&w, "attested", true);
	jsonw_null(&w, "route");
	jsonw_int(&w, "resolve_us", 0);
	jsonw_int(&w, "connect_us", 1234567);
	jsonw_int(&w, "neg", -42);
	jsonw_int(&w, "min", LLONG_MIN);
	jsonw_int(&w, "max", LLONG_MAX);
	jsonw_array_begin(&w, "resolved");
	jsonw_array_str(&w, "127.0.9.1");
	jsonw_array_str(&w, "2001:db8::1");
	jsonw_array_end(&w);
	jsonw_array_begin(&w, "classes_dropped");
	jsonw_array_end(&w);
	jsonw_str(&w, "target", "GET /a\"b\\c/d\x7f HTTP/1.1");

	json_object_set_new(o, "conn", json_string("c-4c4aeefb-1"));
	json_object_set_new(o, "parent_hop", json_null());
	json_object_set_new(o, "credentials_stripped", json_false());
	json_object_set_new(o, "attested", json_true());
	json_object_set_new(o, "route", json_null());
	json_object_set_new(o, "resolve_us", json_integer(0));
	json_object_set_new(o, "connect_us", json_integer(1234567));
	json_object_set_new(o, "neg", json_integer(-42));
	json_object_set_new(o, "min", json_integer(LLONG_MIN));
	json_object_set_new(o, "max", json_integer(LLONG_MAX));
	json_array_append_new(a, json_string("127.0.9.1"));
	json_array_append_new(a, json_string("2001:db8::1"));
	json_object_set_new(o, "resolved", a);
	json_object_set_new(o, "classes_dropped", e);
	json_object_set_new(o, "target", json_string("GET /a\"b\\c/d\x7f HTTP/1.1"));
	assert_members(&w, o);
}

/* Every single byte, every byte pair, and UTF-8 of every length, the surrogates' edges
 * and the invalid forms jansson refuses (jsonw then writes the bytes as \u00XX). */
static void
test_escaping_exhaustive(void **state)
{
	char v[8];
	unsigned refused = 0;

	(void)state;
	for (unsigned b = 0; b < 256; b++) {
		v[0] = (char)b;
		if (!same_string(v, 1))
			refused++;
		for (unsigned c = 0; c < 256; c++) {
			v[1] = (char)c;
			(void)same_string(v, 2);
		}
	}
	assert_int_equal(refused, 128);   /* 0x80-0xff alone are not UTF-8 */
	{
		static const char *const u[] = {
			"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xef\xbf\xbf",
			"\xed\x9f\xbf", "\xee\x80\x80", "\xf4\x8f\xbf\xbf", "\xf0\x90\x80\x80",
			"a\xc2\x80z", "\x00", "x\x00y",
		};
		static const size_t ul[] = { 2, 3, 4, 3, 3, 3, 4, 4, 4, 1, 3 };

		for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
			assert_true(same_string(u[i], ul[i]));
	}
	{
		/* refused by jansson: overlong, surrogate, above U+10FFFF, truncated */
		static const char *const bad[] = {
			"\xc0\x80", "\xe0\x80\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
			"\xe2\x82", "\xf0\x9f\x98",
		};
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char buf[64];
			struct jsonw w;
			bool ok;
			size_t n, bl = strlen(bad[i]);

			assert_false(same_string(bad[i], bl));
			jsonw_init(&w, buf, sizeof(buf));
			jsonw_strn(&w, "k", bad[i], bl);
			n = jsonw_len(&w, &ok);
			assert_true(ok);
			/* "k":"" + 6 per byte: still JSON, each byte visible */
			assert_int_equal(n, 6 + 6 * bl);
			{
				char obj[70];
				json_t *back;

				obj[0] = '{';
				memcpy(obj + 1, buf, n);
				obj[n + 1] = '}';
				back = json_loadb(obj, n + 2, 0, NULL);
				assert_non_null(back);
				json_decref(back);
			}
		}
	}
}

/* Random strings of interesting pieces: escapes, controls, 0x7f, UTF-8 of each length,
 * and (rarely) a piece jansson refuses. */
static void
test_escaping_random(void **state)
{
	static const char *const piece[] = { "a", " ", "\"", "\\", "/", "\x7f", "\x01", "\x1f",
		"\n", "\t", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xef\xbf\xbd",
		"\xed\xa0\x80", "\xff" };
	const size_t npiece = sizeof(piece) / sizeof(piece[0]);
	unsigned seed = 1234567;
	unsigned same = 0;

	(void)state;
	for (int i = 0; i < 20000; i++) {
		char v[128];
		size_t n = 0, k = (size_t)(i % 12) + 1;

		for (size_t j = 0; j < k; j++) {
			const char *pc;

			seed = seed * 1103515245u + 12345u;
			pc = piece[(seed >> 16) % npiece];
			memcpy(v + n, pc, strlen(pc));
			n += strlen(pc);
		}
		if (same_string(v, n))
			same++;
	}
	assert_true(same > 5000);   /* enough of them valid UTF-8 to compare */
}

/* The member form of a classes mask is addrcheck_classes_json's array. */
static void
test_classes(void **state)
{
	char buf[512];
	struct jsonw w;
	uint64_t mask = ADDRCHECK_BIT(ADDR_CLASS_LOOPBACK) | ADDRCHECK_BIT(ADDR_CLASS_PRIVATE) |
	    ADDRCHECK_SELF_BIT;
	json_t *o = json_object();

	(void)state;
	jsonw_init(&w, buf, sizeof(buf));
	addrcheck_classes_w(&w, "classes_dropped", mask);
	json_object_set_new(o, "classes_dropped", addrcheck_classes_json(mask));
	assert_members(&w, o);
}

/* Bounded: what does not fit fails the writer (the record is refused, never cut). */
static void
test_bounds(void **state)
{
	char buf[16];
	struct jsonw w;
	bool ok;

	(void)state;
	jsonw_init(&w, buf, sizeof(buf));
	jsonw_str(&w, "k", "0123456789");   /* "k":"0123456789" = 16 bytes: fits */
	assert_int_equal(jsonw_len(&w, &ok), 16);
	assert_true(ok);
	jsonw_bool(&w, "b", true);
	assert_int_equal(jsonw_len(&w, &ok), 0);
	assert_false(ok);
	/* a key that is not a literal of [a-z_0-9] is a programming error */
	jsonw_init(&w, buf, sizeof(buf));
	jsonw_null(&w, "A\"");
	(void)jsonw_len(&w, &ok);
	assert_false(ok);
	/* an array left open */
	jsonw_init(&w, buf, sizeof(buf));
	jsonw_array_begin(&w, "a");
	(void)jsonw_len(&w, &ok);
	assert_false(ok);
	/* an escape that does not fit whole */
	jsonw_init(&w, buf, sizeof(buf));
	jsonw_strn(&w, "k", "abcdefghi\x01", 10);
	(void)jsonw_len(&w, &ok);
	assert_false(ok);
}

/* Ready members between written ones: a comma where jansson has one; none in an array;
 * bounded like any member. */
static void
test_members(void **state)
{
	char buf[64], small[12];
	struct jsonw w;
	bool ok;

	(void)state;
	jsonw_init(&w, buf, sizeof(buf));
	jsonw_members(&w, "", 0);
	jsonw_members(&w, "\"a\":1,\"b\":[]", 12);
	jsonw_int(&w, "c", 2);
	jsonw_members(&w, "\"d\":null", 8);
	assert_members(&w, json_pack("{s:i, s:[], s:i, s:n}", "a", 1, "b", "c", 2, "d"));
	jsonw_init(&w, buf, sizeof(buf));
	jsonw_array_begin(&w, "x");
	jsonw_members(&w, "\"a\":1", 5);
	(void)jsonw_len(&w, &ok);
	assert_false(ok);
	jsonw_init(&w, small, sizeof(small));
	jsonw_members(&w, "\"a\":1", 5);
	jsonw_members(&w, "\"bb\":22", 7);
	(void)jsonw_len(&w, &ok);
	assert_false(ok);
	jsonw_init(&w, buf, sizeof(buf));
	jsonw_fail(&w);
	assert_int_equal(jsonw_len(&w, &ok), 0);
	assert_false(ok);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_shape),
		cmocka_unit_test(test_escaping_exhaustive),
		cmocka_unit_test(test_escaping_random),
		cmocka_unit_test(test_classes),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_members),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
