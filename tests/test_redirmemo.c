/*
 * test_redirmemo - the per-principal memory of allowed redirects (egressd/redirmemo):
 * stripping window, chain links and depth, bounds, expiry, and principal isolation.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "egressd/redirmemo.h"

static struct host
H(const char *s)
{
	struct host h;

	if (host_parse(s, strlen(s), HOST_NO_PORT, &h) != HOST_OK)
		fail_msg("host_parse(%s)", s);
	return h;
}

static void
rec(struct redirmemo *m, const char *key, const char *host, uint16_t port, const char *path,
    const char *hop, unsigned depth, bool cross, uint64_t now)
{
	struct host h = H(host);

	assert_int_equal(redirmemo_record(m, key, SCHEME_HTTP, &h, port, path, strlen(path),
	    hop, depth, cross, now), 0);
}

static struct redirmemo_hit
look(struct redirmemo *m, const char *key, const char *host, uint16_t port, const char *path,
    uint64_t now)
{
	struct host h = H(host);
	struct redirmemo_hit hit;

	redirmemo_lookup(m, key, SCHEME_HTTP, &h, port, path, path ? strlen(path) : 0, now, &hit);
	return hit;
}

static void
test_strip_window(void **state)
{
	struct redirmemo *m = redirmemo_new(1000);
	struct redirmemo_hit hit;

	rec(m, "g1", "b.example", 80, "/x", "c-1/1r", 1, true, 100);
	hit = look(m, "g1", "b.example", 80, "/x", 200);
	assert_true(hit.strip);
	assert_true(hit.linked);
	assert_string_equal(hit.parent_hop, "c-1/1r");
	assert_int_equal(hit.depth, 1);
	/* stripping stays for the window, the link is consumed */
	hit = look(m, "g1", "b.example", 80, "/other", 300);
	assert_true(hit.strip);
	assert_false(hit.linked);
	/* negative twins: other port, other host, other principal, other scheme */
	assert_false(look(m, "g1", "b.example", 8080, "/x", 300).strip);
	assert_false(look(m, "g1", "c.example", 80, "/x", 300).strip);
	assert_false(look(m, "g2", "b.example", 80, "/x", 300).strip);
	{
		struct host h = H("b.example");
		redirmemo_lookup(m, "g1", SCHEME_HTTPS, &h, 80, NULL, 0, 300, &hit);
		assert_false(hit.strip);
	}
	/* expiry */
	assert_false(look(m, "g1", "b.example", 80, "/x", 1100).strip);
	assert_int_equal(redirmemo_count(m, "g1", 1100), 0);
	redirmemo_free(m);
}

static void
test_same_origin_no_strip(void **state)
{
	struct redirmemo *m = redirmemo_new(1000);
	struct redirmemo_hit hit;

	rec(m, "g1", "a.example", 80, "/next", "c-1/1r", 1, false, 0);
	hit = look(m, "g1", "a.example", 80, "/next", 10);
	assert_false(hit.strip);
	assert_true(hit.linked);
	assert_int_equal(hit.depth, 1);
	redirmemo_free(m);
}

static void
test_link_prefers_exact_path(void **state)
{
	struct redirmemo *m = redirmemo_new(0);
	struct redirmemo_hit hit;

	rec(m, "g", "b.example", 80, "/one", "h1", 1, true, 0);
	rec(m, "g", "b.example", 80, "/two", "h2", 3, true, 1);
	hit = look(m, "g", "b.example", 80, "/one", 2);
	assert_string_equal(hit.parent_hop, "h1");
	assert_int_equal(hit.depth, 1);
	/* path differs (client normalization): the newest unlinked entry of that origin */
	hit = look(m, "g", "b.example", 80, "/TWO", 3);
	assert_true(hit.linked);
	assert_string_equal(hit.parent_hop, "h2");
	hit = look(m, "g", "b.example", 80, "/two", 4);
	assert_false(hit.linked);
	assert_true(hit.strip);
	redirmemo_free(m);
}

static void
test_bounds(void **state)
{
	struct redirmemo *m = redirmemo_new(0);
	char path[32], hop[32];

	for (unsigned i = 0; i < EGRESS_REDIRECT_MEMO_MAX + 10; i++) {
		snprintf(path, sizeof(path), "/%u", i);
		snprintf(hop, sizeof(hop), "h%u", i);
		rec(m, "g", "b.example", 80, path, hop, 1, true, i);
	}
	assert_int_equal(redirmemo_count(m, "g", 100), EGRESS_REDIRECT_MEMO_MAX);
	/* the oldest went first: "/10" is the oldest left and links exactly */
	assert_string_equal(look(m, "g", "b.example", 80, "/10", 101).parent_hop, "h10");
	/* "/9" is gone: it falls back to the newest unlinked entry of the origin */
	assert_string_equal(look(m, "g", "b.example", 80, "/9", 101).parent_hop, "h73");
	/* principals are bounded too */
	for (unsigned i = 0; i < EGRESS_GRANTS_MAX + 5; i++) {
		char key[32];
		snprintf(key, sizeof(key), "k%u", i);
		rec(m, key, "b.example", 80, "/", "h", 1, true, 200 + i);
	}
	assert_int_equal(redirmemo_count(m, "k0", 10000), 0);
	redirmemo_forget(m, "k5000");
	redirmemo_forget(m, NULL);
	redirmemo_free(m);
	redirmemo_free(NULL);
}

static void
test_forget_and_long_values(void **state)
{
	struct redirmemo *m = redirmemo_new(0);
	static char longpath[EGRESS_LOCATION_MAX + 100];
	char longhop[200];
	struct host h = H("b.example");
	struct redirmemo_hit hit;

	memset(longpath, 'p', sizeof(longpath) - 1);
	memset(longhop, 'h', sizeof(longhop) - 1);
	longhop[sizeof(longhop) - 1] = '\0';
	assert_int_equal(redirmemo_record(m, "g", SCHEME_HTTP, &h, 80, longpath,
	    sizeof(longpath) - 1, longhop, 2, true, 0), 0);
	redirmemo_lookup(m, "g", SCHEME_HTTP, &h, 80, NULL, 0, 1, &hit);
	assert_true(hit.linked);
	assert_int_equal(strlen(hit.parent_hop), sizeof(hit.parent_hop) - 1);
	rec(m, "g", "b.example", 80, "/", "h", 1, true, 2);
	redirmemo_forget(m, "g");
	assert_int_equal(redirmemo_count(m, "g", 3), 0);
	assert_false(look(m, "g", "b.example", 80, "/", 3).strip);
	assert_int_equal(redirmemo_record(NULL, "g", SCHEME_HTTP, &h, 80, "/", 1, "h", 1, true,
	    0), -1);
	redirmemo_free(m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strip_window),
		cmocka_unit_test(test_same_origin_no_strip),
		cmocka_unit_test(test_link_prefers_exact_path),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_forget_and_long_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
