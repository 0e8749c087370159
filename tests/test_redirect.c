/*
 * test_redirect - Location resolution and redirect re-authorization (egressd/redirect):
 * every Location form, the refusals, and allow/deny twins against a grant.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/grant.h"
#include "egressd/redirect.h"

static struct host
H(const char *s)
{
	struct host h;

	if (host_parse(s, strlen(s), HOST_NO_PORT, &h) != HOST_OK)
		fail_msg("host_parse(%s)", s);
	return h;
}

static struct grant *
G(const char *text)
{
	json_error_t jerr;
	json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	char err[256];
	struct grant *g;

	if (o == NULL)
		fail_msg("bad test JSON: %s", jerr.text);
	g = grant_from_json(o, err, sizeof(err));
	json_decref(o);
	if (g == NULL)
		fail_msg("grant_from_json: %s", err);
	return g;
}

/* Resolve loc against http://a.example:8080/x/y/z?q=1 and expect url. */
static void
ok(const char *loc, const char *url)
{
	struct host b = H("a.example");
	const char *path = "/x/y/z?q=1";
	struct redirect_target t;
	enum redirect_err e = redirect_resolve(loc, strlen(loc), &b, 8080, path, strlen(path),
	    &t);

	if (e != REDIRECT_OK)
		fail_msg("%s: %s", loc, redirect_err_str(e));
	if (strcmp(t.url, url) != 0)
		fail_msg("%s: got %s, want %s", loc, t.url, url);
}

static void
bad(const char *loc, size_t len, enum redirect_err want)
{
	struct host b = H("a.example");
	struct redirect_target t;
	enum redirect_err e = redirect_resolve(loc, len, &b, 80, "/p", 2, &t);

	if (e != want)
		fail_msg("%.*s: got %d (%s), want %d", (int)len, loc, e, redirect_err_str(e), want);
	assert_string_equal(t.url, "");
}

static void
test_forms(void **state)
{
	ok("http://b.example/p", "http://b.example/p");
	ok("/abs", "http://a.example:8080/abs");
	ok("rel", "http://a.example:8080/x/y/rel");
	ok("q/../r", "http://a.example:8080/x/y/r");
	ok("../../../../up", "http://a.example:8080/up");
	ok("./", "http://a.example:8080/x/y/");
	ok("?z=2", "http://a.example:8080/x/y/z?z=2");
	ok("#frag", "http://a.example:8080/x/y/z?q=1");
	ok("//other.example/p", "http://other.example/p");
	ok("//other.example:8080", "http://other.example:8080/");
	ok("HTTP://B.EXAMPLE./a/./b/../c", "http://b.example/a/c");
	ok("http://b.example:80/", "http://b.example/");
	ok("http://b.example:/", "http://b.example/");
	ok("https://b.example/s?x#y", "https://b.example/s?x");
	ok("https://b.example:443/", "https://b.example/");
	ok("https://b.example:8443/", "https://b.example:8443/");
	ok("http://198.51.100.7/", "http://198.51.100.7/");
	ok("http://[2001:DB8::1]:81/v6", "http://[2001:db8::1]:81/v6");
}

static void
test_percent_path_kept(void **state)
{
	ok("/a%20b?c=%2F", "http://a.example:8080/a%20b?c=%2F");
}

static void
test_idn(void **state)
{
	/* raw UTF-8 is not a URI (browsers would encode it; egressd refuses to guess);
	 * an A-label passes and is checked like any name */
	bad("http://b\xc3\xbc.example/", 20, REDIRECT_ERR_SYNTAX);
	ok("http://XN--B-EHA.example/", "http://xn--b-eha.example/");
}

static void
test_refused(void **state)
{
	bad("", 0, REDIRECT_ERR_EMPTY);
	bad("http://u:p@b.example/", 21, REDIRECT_ERR_USERINFO);
	bad("http://a.example@evil.example/", 30, REDIRECT_ERR_USERINFO);
	bad("//u@evil.example/", 17, REDIRECT_ERR_USERINFO);
	bad("ftp://b.example/", 16, REDIRECT_ERR_SCHEME);
	bad("javascript:alert(1)", 19, REDIRECT_ERR_SCHEME);
	bad("///evil.example/", 16, REDIRECT_ERR_SLASHES);
	bad("////evil.example", 16, REDIRECT_ERR_SLASHES);
	bad("http:evil.example", 17, REDIRECT_ERR_NO_HOST);
	bad("http:/evil.example", 18, REDIRECT_ERR_NO_HOST);
	bad("http:///evil.example", 20, REDIRECT_ERR_NO_HOST);
	bad("http://%65vil.example/", 22, REDIRECT_ERR_HOST);
	bad("http://0x7f.1/", 14, REDIRECT_ERR_HOST);
	bad("http://127.1/", 13, REDIRECT_ERR_HOST);
	bad("http://2130706433/", 18, REDIRECT_ERR_HOST);
	bad("http://[v1.x]/", 14, REDIRECT_ERR_HOST);
	bad("http://b_x.example/", 19, REDIRECT_ERR_HOST);
	bad("http://b.example:080/", 21, REDIRECT_ERR_PORT);
	bad("http://b.example:0/", 19, REDIRECT_ERR_PORT);
	bad("http://b.example:65536/", 23, REDIRECT_ERR_PORT);
	bad("http://b.example:123456/", 24, REDIRECT_ERR_PORT);
	bad("http://b.example/a b", 20, REDIRECT_ERR_SYNTAX);
	bad("http:\\\\evil.example", 19, REDIRECT_ERR_SYNTAX);
	bad("/\\evil.example", 14, REDIRECT_ERR_SYNTAX);
	bad("http://b.example/\x01", 18, REDIRECT_ERR_SYNTAX);
	bad("http://b.example/\0x", 19, REDIRECT_ERR_SYNTAX);
	bad("http://b.example/%zz", 20, REDIRECT_ERR_SYNTAX);
	bad("http://b.example/\xc3\xbc", 19, REDIRECT_ERR_SYNTAX);
	bad("http://[::1%25eth0]/", 20, REDIRECT_ERR_SYNTAX);
}

static void
test_too_long(void **state)
{
	static char big[EGRESS_LOCATION_MAX + 2];

	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	bad(big, EGRESS_LOCATION_MAX + 1, REDIRECT_ERR_TOO_LONG);
	/* fits the input, but the resolved URL would not */
	bad(big, EGRESS_LOCATION_MAX, REDIRECT_ERR_TOO_LONG);
}

static void
test_reasons(void **state)
{
	assert_int_equal(redirect_err_reason(REDIRECT_ERR_USERINFO), REASON_REDIRECT_DENIED);
	assert_int_equal(redirect_err_reason(REDIRECT_ERR_SCHEME), REASON_REDIRECT_DENIED);
	assert_int_equal(redirect_err_reason(REDIRECT_ERR_SYNTAX), REASON_REDIRECT_INVALID);
	assert_int_equal(redirect_err_reason(REDIRECT_ERR_HOST), REASON_REDIRECT_INVALID);
	assert_int_equal(redirect_err_reason(REDIRECT_OK), REASON_ALLOWED);
}

static enum reason
authz(const struct grant *g, const char *loc, const char **detail)
{
	struct host b = H("a.example");
	struct redirect_target t;

	if (redirect_resolve(loc, strlen(loc), &b, 80, "/", 1, &t) != REDIRECT_OK)
		fail_msg("resolve %s", loc);
	return redirect_authorize(g, &t, &g->allow_address, NULL, detail);
}

static void
test_authorize(void **state)
{
	struct grant *g = G("{\"principal\":\"p\",\"allow\":[\"http://a.example\","
	    "\"http://b.example\",\"https://c.example\",\"http://10.0.0.5\","
	    "\"http://198.51.100.7\",\"http://10.1.1.1\",\"tcp://d.example:8443\"],"
	    "\"allow_address\":[\"10.1.1.0/24\"]}");
	const char *detail = NULL;

	/* allowed, with negative twins */
	assert_int_equal(authz(g, "/same", NULL), REASON_ALLOWED);
	assert_int_equal(authz(g, "http://b.example/x", NULL), REASON_ALLOWED);
	assert_int_equal(authz(g, "http://evil.example/x", &detail), REASON_REDIRECT_DENIED);
	assert_string_equal(detail, "not in the grant");
	/* another port of a granted host */
	assert_int_equal(authz(g, "http://b.example:8080/x", NULL), REASON_REDIRECT_DENIED);
	/* https Location: judged as the CONNECT it leads to */
	assert_int_equal(authz(g, "https://c.example/", NULL), REASON_ALLOWED);
	assert_int_equal(authz(g, "http://c.example/", NULL), REASON_REDIRECT_DENIED);
	assert_int_equal(authz(g, "https://b.example/", NULL), REASON_REDIRECT_DENIED);
	assert_int_equal(authz(g, "https://d.example:8443/", NULL), REASON_ALLOWED);
	/* literals: named and public */
	assert_int_equal(authz(g, "http://198.51.100.7/", NULL), REASON_REDIRECT_DENIED)
	    /* documentation range is special: not covered by allow_address */;
	assert_int_equal(authz(g, "http://198.51.100.8/", &detail), REASON_REDIRECT_DENIED);
	assert_string_equal(detail, "IP literal not named by the grant");
	/* a private literal named in allow but not lifted by allow_address */
	assert_int_equal(authz(g, "http://10.0.0.5/", &detail), REASON_REDIRECT_DENIED);
	assert_string_equal(detail, "private or special-purpose address");
	/* named and lifted */
	assert_int_equal(authz(g, "http://10.1.1.1/", NULL), REASON_ALLOWED);
	/* metadata address, never named */
	assert_int_equal(authz(g, "http://169.254.169.254/latest", NULL),
	    REASON_REDIRECT_DENIED);
	assert_int_equal(authz(g, "http://[::1]/", NULL), REASON_REDIRECT_DENIED);
	assert_int_equal(redirect_authorize(NULL, NULL, NULL, NULL, NULL),
	    REASON_REDIRECT_DENIED);
	grant_free(g);
}

static void
test_override_lifts_literal(void **state)
{
	struct grant *g = G("{\"principal\":\"p\",\"allow\":[\"http://198.51.100.7\"]}");
	struct cidr_set ov;
	struct host b = H("a.example");
	struct redirect_target t;
	const char *err;

	memset(&ov, 0, sizeof(ov));
	assert_int_equal(cidr_set_add_str(&ov, "198.51.100.0/24", &err), 0);
	assert_int_equal(redirect_resolve("http://198.51.100.7/", 20, &b, 80, "/", 1, &t),
	    REDIRECT_OK);
	assert_int_equal(redirect_authorize(g, &t, &g->allow_address, NULL, NULL),
	    REASON_REDIRECT_DENIED);
	assert_int_equal(redirect_authorize(g, &t, &g->allow_address, &ov, NULL),
	    REASON_ALLOWED);
	cidr_set_free(&ov);
	grant_free(g);
}

static void
test_same_origin(void **state)
{
	struct host a = H("a.example");
	struct redirect_target t;

	assert_int_equal(redirect_resolve("/x", 2, &a, 80, "/", 1, &t), REDIRECT_OK);
	assert_true(redirect_same_origin(&t, &a, 80));
	assert_false(redirect_same_origin(&t, &a, 8080));
	assert_int_equal(redirect_resolve("https://a.example:80/", 21, &a, 80, "/", 1, &t),
	    REDIRECT_OK);
	assert_false(redirect_same_origin(&t, &a, 80));
	assert_int_equal(redirect_resolve("//A.EXAMPLE./y", 14, &a, 80, "/", 1, &t),
	    REDIRECT_OK);
	assert_true(redirect_same_origin(&t, &a, 80));
	assert_int_equal(redirect_resolve("//b.example/y", 13, &a, 80, "/", 1, &t),
	    REDIRECT_OK);
	assert_false(redirect_same_origin(&t, &a, 80));
}

static void
test_base_fallback(void **state)
{
	struct host a = H("a.example");
	struct redirect_target t;
	const char *odd = "/a|b/c\"d";

	/* a request path uriparser refuses: the origin stays exact, the base path is "/" */
	assert_int_equal(redirect_resolve("x", 1, &a, 80, odd, strlen(odd), &t), REDIRECT_OK);
	assert_string_equal(t.url, "http://a.example/x");
	assert_int_equal(redirect_resolve("//b.example/", 12, &a, 80, odd, strlen(odd), &t),
	    REDIRECT_OK);
	assert_string_equal(t.url, "http://b.example/");
	/* IPv6 base */
	struct host v6 = H("2001:db8::2");
	assert_int_equal(redirect_resolve("y", 1, &v6, 8080, "/d/", 3, &t), REDIRECT_OK);
	assert_string_equal(t.url, "http://[2001:db8::2]:8080/d/y");
}

static void
test_status(void **state)
{
	assert_true(redirect_status_checked(301));
	assert_true(redirect_status_checked(302));
	assert_true(redirect_status_checked(303));
	assert_true(redirect_status_checked(307));
	assert_true(redirect_status_checked(308));
	assert_true(redirect_status_checked(300));
	assert_false(redirect_status_checked(304));
	assert_false(redirect_status_checked(200));
	assert_false(redirect_status_checked(400));
}

static void
test_refusal(void **state)
{
	char out[1024];
	size_t n = redirect_format_refusal(REASON_REDIRECT_DENIED, "http://evil.example/", 20,
	    "not in the grant", out, sizeof(out));

	assert_true(n > 0);
	out[n] = '\0';
	assert_non_null(strstr(out, "HTTP/1.1 403 Forbidden\r\n"));
	assert_non_null(strstr(out, "X-Egress-Reason: redirect_denied\r\n"));
	assert_non_null(strstr(out, "\r\n\r\nredirect_denied: "));
	assert_non_null(strstr(out, ": http://evil.example/ (not in the grant)\n"));
	/* hostile bytes in an unresolvable Location are escaped */
	n = redirect_format_refusal(REASON_REDIRECT_INVALID, "a\r\nX: y", 7, NULL, out,
	    sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_non_null(strstr(out, "HTTP/1.1 502 "));
	assert_non_null(strstr(out, "a\\x0d\\x0aX:\\x20y\n"));
	assert_null(strstr(out, "\r\nX: y"));
	assert_int_equal(redirect_format_refusal(REASON_REDIRECT_DENIED, "x", 1, NULL, out, 40),
	    0);
	assert_int_equal(redirect_format_refusal(REASON_CLOSE_IDLE, "x", 1, NULL, out,
	    sizeof(out)), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_percent_path_kept),
		cmocka_unit_test(test_idn),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_reasons),
		cmocka_unit_test(test_authorize),
		cmocka_unit_test(test_override_lifts_literal),
		cmocka_unit_test(test_same_origin),
		cmocka_unit_test(test_base_fallback),
		cmocka_unit_test(test_status),
		cmocka_unit_test(test_refusal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
