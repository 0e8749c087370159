/*
 * test_host - canonical destination host[:port] (common/host).
 *
 * Every refused form named in common/host.h has a negative case below, each
 * next to the positive twin it could be confused with.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/host.h"

struct ok_case {
	const char *in;
	int flags;
	enum host_kind kind;
	const char *name;
	uint16_t port;
};

struct bad_case {
	const char *in;
	size_t len;          /* 0: strlen(in) */
	int flags;
	enum host_err err;
};

static const struct ok_case ok_cases[] = {
	{ "example.com", 0, HOST_NAME, "example.com", 0 },
	{ "api.example.com:443", 0, HOST_NAME, "api.example.com", 443 },
	{ "API.Example.COM", 0, HOST_NAME, "api.example.com", 0 },          /* uppercase */
	{ "example.com.", 0, HOST_NAME, "example.com", 0 },                 /* one trailing dot */
	{ "example.com.:8443", 0, HOST_NAME, "example.com", 8443 },
	{ "localhost", 0, HOST_NAME, "localhost", 0 },
	{ "a-b.c-d.example", 0, HOST_NAME, "a-b.c-d.example", 0 },
	{ "ab--cd.example", 0, HOST_NAME, "ab--cd.example", 0 },            /* R-LDH, not xn-- */
	{ "1a.example", 0, HOST_NAME, "1a.example", 0 },
	{ "example.com1", 0, HOST_NAME, "example.com1", 0 },
	{ "x.0xg", 0, HOST_NAME, "x.0xg", 0 },                               /* not hex */
	{ "m\xc3\xbcnchen.de", 0, HOST_NAME, "xn--mnchen-3ya.de", 0 },      /* IDN ü */
	{ "M\xc3\x9cNCHEN.DE:443", 0, HOST_NAME, "xn--mnchen-3ya.de", 443 }, /* IDN Ü upper */
	{ "xn--mnchen-3ya.de", 0, HOST_NAME, "xn--mnchen-3ya.de", 0 },      /* valid A-label */
	{ "XN--MNCHEN-3YA.DE", 0, HOST_NAME, "xn--mnchen-3ya.de", 0 },
	{ "fa\xc3\x9f.de", 0, HOST_NAME, "xn--fa-hia.de", 0 },             /* non-transitional */
	{ "\xe4\xbe\x8b\xe3\x81\x88.\xe3\x83\x86\xe3\x82\xb9\xe3\x83\x88", 0, HOST_NAME,
	  "xn--r8jz45g.xn--zckzah", 0 },                                   /* 例え.テスト */
	{ "m\xc3\xbcnchen.de.", 0, HOST_NAME, "xn--mnchen-3ya.de", 0 },
	{ "198.51.100.7", 0, HOST_IPV4, "198.51.100.7", 0 },
	{ "198.51.100.7:8080", 0, HOST_IPV4, "198.51.100.7", 8080 },       /* v4:port */
	{ "0.0.0.0", 0, HOST_IPV4, "0.0.0.0", 0 },
	{ "198.51.100.7.", 0, HOST_IPV4, "198.51.100.7", 0 },             /* FQDN-style dot */
	{ "[::1]:8080", 0, HOST_IPV6, "::1", 8080 },
	{ "[64:ff9b::c633:6407]:443", 0, HOST_IPV6, "64:ff9b::c633:6407", 443 },
	{ "255.255.255.255:65535", 0, HOST_IPV4, "255.255.255.255", 65535 },
	{ "[2001:db8::1]:443", 0, HOST_IPV6, "2001:db8::1", 443 },        /* [v6]:port */
	{ "[2001:DB8:0:0:0:0:0:1]", 0, HOST_IPV6, "2001:db8::1", 0 },
	{ "[::ffff:198.51.100.7]:80", 0, HOST_IPV6, "::ffff:198.51.100.7", 80 },
	{ "2001:db8::1", HOST_NO_PORT, HOST_IPV6, "2001:db8::1", 0 },     /* bare v6, no port */
	{ "[2001:db8::1]", HOST_NO_PORT, HOST_IPV6, "2001:db8::1", 0 },
	{ "example.com:1", HOST_REQUIRE_PORT, HOST_NAME, "example.com", 1 },
	{ "example.com", HOST_NO_PORT, HOST_NAME, "example.com", 0 },
	/* Fullwidth digits and dots are mapped by TR46, then judged as ASCII. */
	{ "\xef\xbd\x85xample.com", 0, HOST_NAME, "example.com", 0 },
	/* TR46 maps U+3002 to '.', and ignores U+00AD (soft hyphen). */
	{ "example\xe3\x80\x82" "com", 0, HOST_NAME, "example.com", 0 },
	{ "ex\xc2\xad" "ample.com", 0, HOST_NAME, "example.com", 0 },
	/* 63-character label, 253-character name: the limits themselves are fine. */
	{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example", 0, HOST_NAME,
	  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example", 0 },
};

static const struct bad_case bad_cases[] = {
	/* empty */
	{ "", 0, 0, HOST_ERR_EMPTY },
	{ ".", 0, 0, HOST_ERR_EMPTY },
	{ ":443", 0, 0, HOST_ERR_EMPTY },
	/* empty labels */
	{ ".example.com", 0, 0, HOST_ERR_EMPTY_LABEL },                    /* leading dot */
	{ "a..example.com", 0, 0, HOST_ERR_EMPTY_LABEL },
	{ "example.com..", 0, 0, HOST_ERR_EMPTY_LABEL },                   /* two trailing dots */
	{ "..", 0, 0, HOST_ERR_EMPTY_LABEL },
	/* userinfo */
	{ "user@example.com", 0, 0, HOST_ERR_USERINFO },
	{ "user:pw@example.com:443", 0, 0, HOST_ERR_USERINFO },
	{ "example.com@evil.example", 0, 0, HOST_ERR_USERINFO },
	/* percent-encoding */
	{ "ex%61mple.com", 0, 0, HOST_ERR_PERCENT },
	{ "example.com:%34%34%33", 0, 0, HOST_ERR_PERCENT },
	{ "example.com%00", 0, 0, HOST_ERR_PERCENT },
	/* backslash */
	{ "example.com\\evil.example", 0, 0, HOST_ERR_BACKSLASH },
	{ "\\\\example.com", 0, 0, HOST_ERR_BACKSLASH },
	/* NUL and control characters, DEL */
	{ "example.com\0.evil.example", 25, 0, HOST_ERR_CONTROL },
	{ "\0", 1, 0, HOST_ERR_CONTROL },
	{ "example.com\r\nX: y", 0, 0, HOST_ERR_CONTROL },
	{ "exa\tmple.com", 0, 0, HOST_ERR_CONTROL },
	{ "example.com\x7f", 0, 0, HOST_ERR_CONTROL },
	{ "example.com:44\x01", 0, 0, HOST_ERR_CONTROL },
	/* spaces */
	{ "example .com", 0, 0, HOST_ERR_SPACE },
	{ " example.com", 0, 0, HOST_ERR_SPACE },
	{ "example.com: 443", 0, 0, HOST_ERR_SPACE },
	/* '*' */
	{ "*.example.com", 0, 0, HOST_ERR_WILDCARD },
	{ "*", 0, 0, HOST_ERR_WILDCARD },
	{ "a*b.example.com", 0, 0, HOST_ERR_WILDCARD },
	/* other characters */
	{ "exa_mple.com", 0, 0, HOST_ERR_BAD_CHAR },
	{ "example.com/path", 0, 0, HOST_ERR_BAD_CHAR },
	{ "example.com?x", 0, 0, HOST_ERR_BAD_CHAR },
	{ "example.com#x", 0, 0, HOST_ERR_BAD_CHAR },
	{ "exa!mple.com", 0, 0, HOST_ERR_BAD_CHAR },
	{ "example.com]", 0, 0, HOST_ERR_BAD_CHAR },
	/* leading or trailing hyphen */
	{ "-example.com", 0, 0, HOST_ERR_HYPHEN },
	{ "example-.com", 0, 0, HOST_ERR_HYPHEN },
	{ "a.-b.example", 0, 0, HOST_ERR_HYPHEN },
	/* label and name limits */
	{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example", 0, 0,
	  HOST_ERR_LABEL_TOO_LONG },                                       /* 64 */
	/* IDNA: invalid punycode, non-canonical A-labels, disallowed code points */
	{ "xn--zz.example", 0, 0, HOST_ERR_IDNA },                         /* bad punycode */
	{ "xn--.example", 0, 0, HOST_ERR_HYPHEN },
	{ "xn--abc.example", 0, 0, HOST_ERR_IDNA },
	{ "xn--a.example", 0, 0, HOST_ERR_IDNA },
	{ "xn--example-.com", 0, 0, HOST_ERR_HYPHEN },
	{ "xn--abc-.example", 0, 0, HOST_ERR_HYPHEN },
	{ "xn--ls8h.example", 0, 0, HOST_ERR_IDNA },                       /* emoji, disallowed */
	{ "\xf0\x9f\x92\xa9.example", 0, 0, HOST_ERR_IDNA },              /* emoji U-label */
	{ "\xff\xfe.example", 0, 0, HOST_ERR_IDNA },                       /* not UTF-8 */
	/* libidn2 with STD3 rules would drop the '_' and make this "münchen.de": refused. */
	{ "m\xc3\xbc_nchen.de", 0, 0, HOST_ERR_BAD_CHAR },
	{ "\xc3\xbc.a_b.de", 0, 0, HOST_ERR_BAD_CHAR },
	{ "\xc3\xbc\xef\xbc\xbf" "b.de", 0, 0, HOST_ERR_BAD_CHAR },        /* fullwidth '_' */
	{ "\xc3\xbc\xef\xbc\x8f" "x.de", 0, 0, HOST_ERR_IDNA },            /* fullwidth '/' */
	{ "\xef\xbc\xa0" "example.com", 0, 0, HOST_ERR_USERINFO },  /* fullwidth @ mapped to @ */
	/* non-canonical numeric forms */
	{ "127.1", 0, 0, HOST_ERR_NUMERIC },                               /* short */
	{ "127.0.1", 0, 0, HOST_ERR_NUMERIC },
	{ "2130706433", 0, 0, HOST_ERR_NUMERIC },                          /* integer */
	{ "017700000001", 0, 0, HOST_ERR_NUMERIC },                        /* octal integer */
	{ "0177.0.0.1", 0, 0, HOST_ERR_NUMERIC },                          /* octal */
	{ "010.0.0.1", 0, 0, HOST_ERR_NUMERIC },                           /* leading zero */
	{ "0x7f.0.0.1", 0, 0, HOST_ERR_NUMERIC },                          /* hex octet */
	{ "0x7f000001", 0, 0, HOST_ERR_NUMERIC },                          /* hex integer */
	{ "0X7F000001", 0, 0, HOST_ERR_NUMERIC },
	{ "256.0.0.1", 0, 0, HOST_ERR_NUMERIC },
	{ "1.2.3.4.5", 0, 0, HOST_ERR_NUMERIC },
	{ "example.123", 0, 0, HOST_ERR_NUMERIC },                         /* numeric last label */
	{ "example.0x1f", 0, 0, HOST_ERR_NUMERIC },
	{ "\xef\xbc\x91\xef\xbc\x92\xef\xbc\x97\xef\xbc\x8e\xef\xbc\x91", 0, 0,
	  HOST_ERR_NUMERIC },                                              /* fullwidth 127.1 */
	{ "example.com\xe3\x80\x82.", 0, 0, HOST_ERR_EMPTY_LABEL },       /* two final dots */
	/* IPv6 */
	{ "2001:db8::1", 0, 0, HOST_ERR_IPV6 },                            /* unbracketed */
	{ "::1", 0, 0, HOST_ERR_IPV6 },
	{ "[2001:db8::1", 0, 0, HOST_ERR_IPV6 },                           /* no ']' */
	{ "[fe80::1%25eth0]:443", 0, 0, HOST_ERR_IPV6 },                   /* zone id */
	{ "[fe80::1%eth0]", 0, 0, HOST_ERR_IPV6 },
	{ "fe80::1%eth0", 0, HOST_NO_PORT, HOST_ERR_IPV6 },
	{ "[2001:db8::1]x", 0, 0, HOST_ERR_IPV6 },
	{ "[2001:db8::g]", 0, 0, HOST_ERR_IPV6 },
	{ "[198.51.100.7]", 0, 0, HOST_ERR_IPV6 },
	{ "[]:443", 0, 0, HOST_ERR_IPV6 },
	{ "[example.com]", 0, 0, HOST_ERR_IPV6 },
	/* ports */
	{ "example.com:", 0, 0, HOST_ERR_PORT },                           /* empty */
	{ "example.com:0", 0, 0, HOST_ERR_PORT },                          /* zero */
	{ "example.com:65536", 0, 0, HOST_ERR_PORT },                      /* range */
	{ "example.com:99999999999999999999", 0, 0, HOST_ERR_PORT },       /* overflow */
	{ "example.com:4294967739", 0, 0, HOST_ERR_PORT },                 /* 443 mod 2^32 */
	{ "example.com:0443", 0, 0, HOST_ERR_PORT },                       /* leading zero */
	{ "example.com:+443", 0, 0, HOST_ERR_PORT },                       /* sign */
	{ "example.com:-443", 0, 0, HOST_ERR_PORT },
	{ "example.com:443x", 0, 0, HOST_ERR_PORT },
	{ "example.com:0x1bb", 0, 0, HOST_ERR_PORT },
	{ "example.com:44 3", 0, 0, HOST_ERR_SPACE },
	{ "[2001:db8::1]:", 0, 0, HOST_ERR_PORT },
	{ "[2001:db8::1]:0", 0, 0, HOST_ERR_PORT },
	{ "198.51.100.7:65536", 0, 0, HOST_ERR_PORT },
	{ "example.com:\xd9\xa4\xd9\xa4\xd9\xa3", 0, 0, HOST_ERR_PORT },    /* Arabic digits */
	{ "example.com", 0, HOST_REQUIRE_PORT, HOST_ERR_PORT_MISSING },
	{ "[2001:db8::1]", 0, HOST_REQUIRE_PORT, HOST_ERR_PORT_MISSING },
	{ "example.com:443", 0, HOST_NO_PORT, HOST_ERR_PORT_FORBIDDEN },
	{ "[2001:db8::1]:443", 0, HOST_NO_PORT, HOST_ERR_PORT_FORBIDDEN },
	/* a bad host is named as such even when the port is missing */
	{ "user@example.com", 0, HOST_REQUIRE_PORT, HOST_ERR_USERINFO },
	{ "127.1", 0, HOST_REQUIRE_PORT, HOST_ERR_NUMERIC },
};

static void
test_ok(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(ok_cases) / sizeof(ok_cases[0]); i++) {
		const struct ok_case *c = &ok_cases[i];
		struct host h;
		enum host_err e = host_parse(c->in, strlen(c->in), c->flags, &h);

		if (e != HOST_OK)
			print_error("ok case %zu \"%s\": %s\n", i, c->in, host_err_str(e));
		assert_int_equal(e, HOST_OK);
		assert_int_equal(h.kind, c->kind);
		assert_string_equal(h.name, c->name);
		assert_int_equal(h.port, c->port);
	}
}

static void
test_bad(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *c = &bad_cases[i];
		size_t len = c->len ? c->len : strlen(c->in);
		struct host h;
		enum host_err e = host_parse(c->in, len, c->flags, &h);

		if (e != c->err)
			print_error("bad case %zu \"%s\": got %d (%s), want %d (%s)\n", i, c->in,
			    (int)e, host_err_str(e), (int)c->err, host_err_str(c->err));
		assert_int_equal(e, c->err);
		/* A refusal leaves nothing usable behind. */
		assert_string_equal(h.name, "");
		assert_int_equal(h.port, 0);
	}
}

/* 253 is the limit of a name; 254 is refused. 1024 bytes of input, then refused unread. */
static void
test_lengths(void **state)
{
	char buf[EGRESS_HOST_INPUT_MAX + 2];
	struct host h;
	size_t n = 0;

	(void)state;
	/* 4 labels of 63 + 3 dots = 255; trim to 253 with a short last label. */
	for (int l = 0; l < 3; l++) {
		memset(buf + n, 'a', 63);
		n += 63;
		buf[n++] = '.';
	}
	memset(buf + n, 'b', 61);     /* 3*64 + 61 = 253 */
	n += 61;
	buf[n] = '\0';
	assert_int_equal(strlen(buf), 253);
	assert_int_equal(host_parse(buf, n, 0, &h), HOST_OK);
	assert_int_equal(strlen(h.name), 253);
	/* with the allowed trailing dot it is still 253 */
	buf[n] = '.';
	assert_int_equal(host_parse(buf, n + 1, 0, &h), HOST_OK);
	/* 254 */
	buf[n] = 'b';
	assert_int_equal(host_parse(buf, n + 1, 0, &h), HOST_ERR_TOO_LONG);

	memset(buf, 'a', sizeof(buf));
	assert_int_equal(host_parse(buf, EGRESS_HOST_INPUT_MAX + 1, 0, &h), HOST_ERR_TOO_LONG);

	/* an IDN name whose A-label form is too long */
	n = 0;
	for (int l = 0; l < 20; l++) {
		memcpy(buf + n, "m\xc3\xbcnchen.", 9);
		n += 9;
	}
	memcpy(buf + n, "de", 2);
	n += 2;
	assert_int_equal(host_parse(buf, n, 0, &h), HOST_ERR_TOO_LONG);
}

/* Canonical output re-parses to itself, in every flag mode that admits it. */
static void
test_roundtrip(void **state)
{
	char buf[EGRESS_HOSTPORT_MAX + 1];

	(void)state;
	for (size_t i = 0; i < sizeof(ok_cases) / sizeof(ok_cases[0]); i++) {
		struct host h, h2;

		assert_int_equal(host_parse(ok_cases[i].in, strlen(ok_cases[i].in),
		    ok_cases[i].flags, &h), HOST_OK);
		assert_non_null(host_to_str(&h, buf, sizeof(buf)));
		assert_int_equal(host_parse(buf, strlen(buf), ok_cases[i].flags, &h2), HOST_OK);
		assert_int_equal(h2.kind, h.kind);
		assert_string_equal(h2.name, h.name);
		assert_int_equal(h2.port, h.port);
	}
}

static void
test_to_str(void **state)
{
	char buf[EGRESS_HOSTPORT_MAX + 1], small[4];
	struct host h;

	(void)state;
	assert_int_equal(host_parse("[2001:db8::1]:443", 17, 0, &h), HOST_OK);
	assert_string_equal(host_to_str(&h, buf, sizeof(buf)), "[2001:db8::1]:443");
	h.port = 0;
	assert_string_equal(host_to_str(&h, buf, sizeof(buf)), "[2001:db8::1]");
	assert_int_equal(host_parse("Example.COM.:80", 15, 0, &h), HOST_OK);
	assert_string_equal(host_to_str(&h, buf, sizeof(buf)), "example.com:80");
	assert_null(host_to_str(&h, small, sizeof(small)));
	assert_string_equal(small, "");

	/* formatted by hand: equal to "%s:%u" / "[%s]:%u" for every port width and every
	 * buffer size, NULL and "" when it does not fit */
	static const unsigned ports[] = { 0, 1, 9, 10, 99, 100, 999, 1000, 9999, 10000, 65535 };
	static const char *names[] = { "a", "example.com", "[2001:db8::1]", "198.51.100.7" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_int_equal(host_parse(names[i], strlen(names[i]), 0, &h), HOST_OK);
		for (size_t j = 0; j < sizeof(ports) / sizeof(ports[0]); j++) {
			char want[EGRESS_HOSTPORT_MAX + 1];
			int n;

			h.port = (uint16_t)ports[j];
			if (h.kind == HOST_IPV6)
				n = h.port ? snprintf(want, sizeof(want), "[%s]:%u", h.name, ports[j]) :
				    snprintf(want, sizeof(want), "[%s]", h.name);
			else
				n = h.port ? snprintf(want, sizeof(want), "%s:%u", h.name, ports[j]) :
				    snprintf(want, sizeof(want), "%s", h.name);
			assert_true(n > 0);
			assert_string_equal(host_to_str(&h, buf, sizeof(buf)), want);
			assert_string_equal(host_to_str(&h, buf, (size_t)n + 1), want);
			assert_null(host_to_str(&h, buf, (size_t)n));
			assert_string_equal(buf, "");
		}
	}
}

static void
test_err_str(void **state)
{
	(void)state;
	for (int e = HOST_OK; e <= HOST_ERR_HYPHEN; e++) {
		const char *s = host_err_str((enum host_err)e);
		assert_non_null(s);
		assert_true(strlen(s) > 5);
	}
	assert_non_null(strstr(host_err_str(HOST_ERR_USERINFO), "@"));
}

/* NULL out is allowed (validation only); conflicting flags are refused. */
static void
test_api_edges(void **state)
{
	struct host h;

	(void)state;
	assert_int_equal(host_parse("example.com", 11, 0, NULL), HOST_OK);
	assert_int_equal(host_parse(NULL, 0, 0, &h), HOST_ERR_EMPTY);
	assert_int_equal(host_parse("example.com:1", 13, HOST_REQUIRE_PORT | HOST_NO_PORT, &h),
	    HOST_ERR_PORT);
	/* len is honoured: bytes after it are not read */
	assert_int_equal(host_parse("example.com@evil", 11, 0, &h), HOST_OK);
	assert_string_equal(h.name, "example.com");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ok),
		cmocka_unit_test(test_bad),
		cmocka_unit_test(test_lengths),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_to_str),
		cmocka_unit_test(test_err_str),
		cmocka_unit_test(test_api_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
