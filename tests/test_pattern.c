/*
 * test_pattern - grant allow entries (common/pattern): parsing, canonical text, matching
 * and covering. Every allow case has a negative twin next to it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/pattern.h"

void pattern_psl_disable(void);   /* TESTABLE hook in common/pattern.c */

static struct dest_pattern
P(const char *s)
{
	struct dest_pattern p;
	const char *err = NULL;

	if (pattern_parse(s, &p, &err) != 0)
		fail_msg("pattern_parse(\"%s\"): %s", s, err);
	return p;
}

static struct host
H(const char *s)
{
	struct host h;
	enum host_err e = host_parse(s, strlen(s), HOST_NO_PORT, &h);

	if (e != HOST_OK)
		fail_msg("host_parse(\"%s\"): %s", s, host_err_str(e));
	return h;
}

static bool
M(const char *pat, enum dest_scheme hop, const char *host, uint16_t port)
{
	struct dest_pattern p = P(pat);
	struct host h = H(host);

	return pattern_match(&p, hop, &h, port);
}

static void
test_parse_ok(void **state)
{
	static const struct {
		const char *in, *canon;
		enum dest_scheme scheme;
		bool wildcard;
		uint16_t port;
	} cases[] = {
		{ "https://api.example.com", "https://api.example.com", SCHEME_HTTPS, false, 443 },
		{ "https://api.example.com:443", "https://api.example.com", SCHEME_HTTPS, false, 443 },
		{ "https://API.Example.com.:8443", "https://api.example.com:8443", SCHEME_HTTPS,
		  false, 8443 },
		{ "http://example.com", "http://example.com", SCHEME_HTTP, false, 80 },
		{ "http://example.com:443", "http://example.com:443", SCHEME_HTTP, false, 443 },
		{ "tcp://git.example.com:22", "tcp://git.example.com:22", SCHEME_TCP, false, 22 },
		{ "tcp://git.example.com:443", "tcp://git.example.com:443", SCHEME_TCP, false, 443 },
		{ "https://*.example.com", "https://*.example.com", SCHEME_HTTPS, true, 443 },
		{ "https://*.Example.COM:8443", "https://*.example.com:8443", SCHEME_HTTPS, true,
		  8443 },
		{ "https://*.foo.github.io", "https://*.foo.github.io", SCHEME_HTTPS, true, 443 },
		{ "https://*.example.co.uk", "https://*.example.co.uk", SCHEME_HTTPS, true, 443 },
		{ "https://*.m\xc3\xbcnchen.de", "https://*.xn--mnchen-3ya.de", SCHEME_HTTPS, true,
		  443 },
		{ "https://198.51.100.7", "https://198.51.100.7", SCHEME_HTTPS, false, 443 },
		{ "tcp://198.51.100.7:5432", "tcp://198.51.100.7:5432", SCHEME_TCP, false, 5432 },
		{ "https://[2001:db8::1]:8443", "https://[2001:db8::1]:8443", SCHEME_HTTPS, false,
		  8443 },
		{ "http://[2001:DB8::1]", "http://[2001:db8::1]", SCHEME_HTTP, false, 80 },
	};
	char buf[EGRESS_DEST_PATTERN_MAX + 1];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct dest_pattern p = P(cases[i].in), p2;
		const char *err = NULL;

		assert_int_equal(p.scheme, cases[i].scheme);
		assert_int_equal(p.wildcard, cases[i].wildcard);
		assert_int_equal(p.port, cases[i].port);
		assert_non_null(pattern_to_str(&p, buf, sizeof(buf)));
		assert_string_equal(buf, cases[i].canon);
		/* the canonical text parses back to the same entry */
		assert_int_equal(pattern_parse(buf, &p2, &err), 0);
		assert_true(pattern_covers(&p, &p2) && pattern_covers(&p2, &p));
	}
}

static void
test_parse_bad(void **state)
{
	static const char *const bad[] = {
		"",
		"api.example.com",                     /* no scheme */
		"HTTPS://api.example.com",             /* scheme case */
		"ftp://api.example.com",
		"https:/api.example.com",
		"https//api.example.com",
		"https://",
		"https://api.example.com/",            /* path */
		"https://api.example.com/v1",
		"https://api.example.com?x=1",
		"https://api.example.com#f",
		"https://user@api.example.com",        /* userinfo */
		"https://api.example.com:0",
		"https://api.example.com:65536",
		"https://api.example.com:0443",
		"https://api.example.com:",
		"tcp://git.example.com",               /* tcp needs a port */
		"tcp://*.example.com",
		"https://*",
		"https://*.",
		"https://**.example.com",
		"https://*.*.example.com",
		"https://a.*.example.com",
		"https://*example.com",
		"https://x*.example.com",
		"https://*.com",                       /* public suffix */
		"https://*.co.uk",
		"https://*.github.io",                 /* private-section public suffix */
		"https://*.s3.amazonaws.com",
		"https://*.foo.kawasaki.jp",           /* public by a '*' rule in the list */
		"https://*.xn--55qx5d.cn",             /* IDN public suffix */
		"https://*.internal",                  /* single label */
		"https://*.localhost",
		"https://*.198.51.100.7",              /* wildcard over an address */
		"https://*.[2001:db8::1]",
		"https://2001:db8::1",                 /* unbracketed v6 */
		"https://127.1",                       /* numeric trick */
		"https://0x7f000001",
		"https://exa mple.com",
		"https://example.com\\@evil.com",
		"https://xn--zz.example",
		" https://api.example.com",
	};
	struct dest_pattern p;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *err = NULL;
		int r = pattern_parse(bad[i], &p, &err);

		if (r == 0)
			fail_msg("pattern_parse(\"%s\") accepted", bad[i]);
		assert_int_equal(r, -1);
		assert_non_null(err);
		assert_false(p.wildcard);
		assert_int_equal(p.port, 0);
	}
	/* over-long entry */
	char longbuf[EGRESS_DEST_PATTERN_MAX + 20];
	memset(longbuf, 'a', sizeof(longbuf) - 1);
	memcpy(longbuf, "https://", 8);
	longbuf[sizeof(longbuf) - 1] = '\0';
	assert_int_equal(pattern_parse(longbuf, &p, NULL), -1);
	assert_int_equal(pattern_parse(NULL, &p, NULL), -1);
}

static void
test_exact_match(void **state)
{
	(void)state;
	assert_true(M("https://api.example.com", SCHEME_HTTPS, "api.example.com", 443));
	/* negative twins: other host, apex, subdomain, suffix trick, port, scheme */
	assert_false(M("https://api.example.com", SCHEME_HTTPS, "example.com", 443));
	assert_false(M("https://api.example.com", SCHEME_HTTPS, "x.api.example.com", 443));
	assert_false(M("https://api.example.com", SCHEME_HTTPS, "api.example.com.evil.example",
	    443));
	assert_false(M("https://api.example.com", SCHEME_HTTPS, "api.example.co", 443));
	assert_false(M("https://api.example.com", SCHEME_HTTPS, "api.example.com", 8443));
	assert_false(M("https://api.example.com", SCHEME_HTTPS, "api.example.com", 80));
	assert_false(M("https://api.example.com", SCHEME_HTTP, "api.example.com", 443));
	assert_false(M("https://api.example.com", SCHEME_HTTPS, "api.example.com", 0));

	assert_true(M("https://api.example.com:8443", SCHEME_HTTPS, "api.example.com", 8443));
	assert_false(M("https://api.example.com:8443", SCHEME_HTTPS, "api.example.com", 443));
}

static void
test_scheme_rules(void **state)
{
	(void)state;
	/* CONNECT (SCHEME_HTTPS) matches https:// and tcp:// entries */
	assert_true(M("tcp://git.example.com:22", SCHEME_HTTPS, "git.example.com", 22));
	assert_false(M("tcp://git.example.com:22", SCHEME_HTTPS, "git.example.com", 23));
	assert_false(M("tcp://git.example.com:22", SCHEME_HTTP, "git.example.com", 22));
	/* CONNECT never matches http:// entries, even on port 80 */
	assert_false(M("http://example.com", SCHEME_HTTPS, "example.com", 80));
	/* absolute-form HTTP matches only http:// */
	assert_true(M("http://example.com", SCHEME_HTTP, "example.com", 80));
	assert_false(M("http://example.com", SCHEME_HTTP, "example.com", 443));
	assert_false(M("https://example.com:80", SCHEME_HTTP, "example.com", 80));
	assert_false(M("tcp://example.com:80", SCHEME_HTTP, "example.com", 80));
	/* SCHEME_TCP hop only matches tcp:// */
	assert_true(M("tcp://example.com:443", SCHEME_TCP, "example.com", 443));
	assert_false(M("https://example.com", SCHEME_TCP, "example.com", 443));
}

static void
test_wildcard_match(void **state)
{
	(void)state;
	assert_true(M("https://*.example.com", SCHEME_HTTPS, "api.example.com", 443));
	assert_true(M("https://*.example.com", SCHEME_HTTPS, "a.b.example.com", 443));
	assert_true(M("https://*.example.com", SCHEME_HTTPS, "API.EXAMPLE.COM.", 443));
	/* never the apex */
	assert_false(M("https://*.example.com", SCHEME_HTTPS, "example.com", 443));
	/* label boundary only */
	assert_false(M("https://*.example.com", SCHEME_HTTPS, "evilexample.com", 443));
	assert_false(M("https://*.example.com", SCHEME_HTTPS, "api.evilexample.com", 443));
	assert_false(M("https://*.example.com", SCHEME_HTTPS, "example.com.evil.example", 443));
	assert_false(M("https://*.example.com", SCHEME_HTTPS, "api.example.co", 443));
	/* port and scheme */
	assert_false(M("https://*.example.com", SCHEME_HTTPS, "api.example.com", 8443));
	assert_false(M("https://*.example.com", SCHEME_HTTP, "api.example.com", 443));
	assert_false(M("https://*.example.com", SCHEME_HTTP, "api.example.com", 80));
	assert_true(M("http://*.example.com", SCHEME_HTTP, "api.example.com", 80));
	assert_false(M("http://*.example.com", SCHEME_HTTPS, "api.example.com", 80));
	/* an IP literal never matches a wildcard */
	assert_false(M("https://*.example.com", SCHEME_HTTPS, "198.51.100.7", 443));
	/* IDN: the hop's canonical A-label form matches the entry's */
	assert_true(M("https://*.m\xc3\xbcnchen.de", SCHEME_HTTPS, "www.xn--mnchen-3ya.de", 443));
	assert_false(M("https://*.m\xc3\xbcnchen.de", SCHEME_HTTPS, "www.munchen.de", 443));
}

static void
test_literal_match(void **state)
{
	(void)state;
	assert_true(M("https://198.51.100.7", SCHEME_HTTPS, "198.51.100.7", 443));
	assert_false(M("https://198.51.100.7", SCHEME_HTTPS, "198.51.100.8", 443));
	/* the v4-mapped IPv6 spelling is a different literal: not granted */
	assert_false(M("https://198.51.100.7", SCHEME_HTTPS, "::ffff:198.51.100.7", 443));
	assert_true(M("https://[2001:db8::1]", SCHEME_HTTPS, "2001:db8:0::1", 443));
	assert_false(M("https://[2001:db8::1]", SCHEME_HTTPS, "2001:db8::2", 443));
	/* a name entry does not match an address, nor an address a name */
	assert_false(M("https://api.example.com", SCHEME_HTTPS, "198.51.100.7", 443));
	assert_false(M("https://198.51.100.7", SCHEME_HTTPS, "api.example.com", 443));
	/* NULL arguments never match */
	struct dest_pattern p = P("https://api.example.com");
	struct host h = H("api.example.com");
	assert_false(pattern_match(NULL, SCHEME_HTTPS, &h, 443));
	assert_false(pattern_match(&p, SCHEME_HTTPS, NULL, 443));
}

static void
test_covers(void **state)
{
	struct dest_pattern wild = P("https://*.example.com");
	struct dest_pattern wild_sub = P("https://*.api.example.com");
	struct dest_pattern exact = P("https://api.example.com");
	struct dest_pattern apex = P("https://example.com");
	struct dest_pattern evil = P("https://api.evilexample.com");
	struct dest_pattern other_port = P("https://api.example.com:8443");
	struct dest_pattern http = P("http://api.example.com:443");
	struct dest_pattern tcp = P("tcp://api.example.com:443");
	struct dest_pattern lit = P("https://198.51.100.7");

	(void)state;
	assert_true(pattern_covers(&wild, &exact));
	assert_true(pattern_covers(&wild, &wild_sub));
	assert_true(pattern_covers(&wild, &wild));
	assert_true(pattern_covers(&exact, &exact));
	assert_true(pattern_covers(&lit, &lit));
	/* negative twins */
	assert_false(pattern_covers(&exact, &wild));
	assert_false(pattern_covers(&wild_sub, &wild));
	assert_false(pattern_covers(&wild, &apex));
	assert_false(pattern_covers(&wild, &evil));
	assert_false(pattern_covers(&wild, &other_port));
	assert_false(pattern_covers(&exact, &other_port));
	assert_false(pattern_covers(&exact, &apex));
	assert_false(pattern_covers(&exact, &http));
	assert_false(pattern_covers(&exact, &tcp));
	assert_false(pattern_covers(&tcp, &exact));
	assert_false(pattern_covers(&wild, &lit));
	assert_false(pattern_covers(NULL, &exact));
	assert_false(pattern_covers(&exact, NULL));
}

static void
test_scheme_str(void **state)
{
	(void)state;
	assert_string_equal(scheme_str(SCHEME_HTTPS), "https");
	assert_string_equal(scheme_str(SCHEME_HTTP), "http");
	assert_string_equal(scheme_str(SCHEME_TCP), "tcp");
	char small[8];
	struct dest_pattern p = P("https://api.example.com");
	assert_null(pattern_to_str(&p, small, sizeof(small)));
}

/* Without a public suffix list, wildcards are refused; exact entries still work. Last
 * test: the list stays disabled for the rest of this process. */
static void
test_psl_fail_closed(void **state)
{
	struct dest_pattern p;
	const char *err = NULL;

	(void)state;
	pattern_psl_disable();
	assert_int_equal(pattern_parse("https://*.example.com", &p, &err), -1);
	assert_non_null(strstr(err, "public suffix list"));
	assert_int_equal(pattern_parse("https://api.example.com", &p, &err), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_ok),
		cmocka_unit_test(test_parse_bad),
		cmocka_unit_test(test_exact_match),
		cmocka_unit_test(test_scheme_rules),
		cmocka_unit_test(test_wildcard_match),
		cmocka_unit_test(test_literal_match),
		cmocka_unit_test(test_covers),
		cmocka_unit_test(test_scheme_str),
		cmocka_unit_test(test_psl_fail_closed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
