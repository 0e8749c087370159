/* test_addr.c - strict literals and IANA special-purpose classification (common/addr). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>

#include "common/addr.h"
#include "common/limits.h"
#include "common/util.h"

/* ---------- literal parsing ---------- */

struct lit_case {
	const char *in;
	enum addr_literal want;
};

static const struct lit_case lit_cases[] = {
	/* canonical IPv4 */
	{ "0.0.0.0", ADDR_LIT_V4 },
	{ "1.2.3.4", ADDR_LIT_V4 },
	{ "198.51.100.7", ADDR_LIT_V4 },
	{ "255.255.255.255", ADDR_LIT_V4 },
	{ "10.0.0.1", ADDR_LIT_V4 },
	/* IPv6 */
	{ "::", ADDR_LIT_V6 },
	{ "::1", ADDR_LIT_V6 },
	{ "2001:db8::1", ADDR_LIT_V6 },
	{ "2001:DB8::1", ADDR_LIT_V6 },
	{ "1:2:3:4:5:6:7:8", ADDR_LIT_V6 },
	{ "::ffff:198.51.100.1", ADDR_LIT_V6 },
	{ "fe80::1", ADDR_LIT_V6 },
	/* names */
	{ "example.com", ADDR_LIT_NONE },
	{ "example.com.", ADDR_LIT_NONE },
	{ "localhost", ADDR_LIT_NONE },
	{ "1a.example", ADDR_LIT_NONE },
	{ "123.example", ADDR_LIT_NONE },
	{ "a", ADDR_LIT_NONE },
	{ "0xg", ADDR_LIT_NONE },
	{ ".", ADDR_LIT_NONE },
	/* refused numeric forms: octal, hex, short, bare integer, leading zeros, trailing dot */
	{ "010.0.0.1", ADDR_LIT_INVALID },
	{ "01.2.3.4", ADDR_LIT_INVALID },
	{ "1.2.3.04", ADDR_LIT_INVALID },
	{ "00.0.0.0", ADDR_LIT_INVALID },
	{ "0177.0.0.1", ADDR_LIT_INVALID },
	{ "0x7f.1", ADDR_LIT_INVALID },
	{ "0x7f.0.0.1", ADDR_LIT_INVALID },
	{ "0x7f000001", ADDR_LIT_INVALID },
	{ "0X7F000001", ADDR_LIT_INVALID },
	{ "0x", ADDR_LIT_INVALID },
	{ "127.0.0.0x1", ADDR_LIT_INVALID },
	{ "127.1", ADDR_LIT_INVALID },
	{ "127.0.1", ADDR_LIT_INVALID },
	{ "2130706433", ADDR_LIT_INVALID },
	{ "017700000001", ADDR_LIT_INVALID },
	{ "0", ADDR_LIT_INVALID },
	{ "1.2.3.4.", ADDR_LIT_INVALID },
	{ "1.2.3.4.5", ADDR_LIT_INVALID },
	{ "1.2.3.256", ADDR_LIT_INVALID },
	{ "1.2.3.1000", ADDR_LIT_INVALID },
	{ "256.1.1.1", ADDR_LIT_INVALID },
	{ "1..2.3", ADDR_LIT_INVALID },
	{ ".1.2.3.4", ADDR_LIT_INVALID },
	{ " 1.2.3.4", ADDR_LIT_INVALID },
	{ "+1.2.3.4", ADDR_LIT_INVALID },
	{ "example.123", ADDR_LIT_INVALID },
	{ "example.123.", ADDR_LIT_INVALID },
	{ "example.0x1f", ADDR_LIT_INVALID },
	{ "a.b.0", ADDR_LIT_INVALID },
	/* refused IPv6 forms: zone ids, brackets, malformed */
	{ "fe80::1%eth0", ADDR_LIT_INVALID },
	{ "fe80::1%25eth0", ADDR_LIT_INVALID },
	{ "::1%1", ADDR_LIT_INVALID },
	{ "[::1]", ADDR_LIT_INVALID },
	{ "::1::", ADDR_LIT_INVALID },
	{ ":::", ADDR_LIT_INVALID },
	{ "1:2:3:4:5:6:7:8:9", ADDR_LIT_INVALID },
	{ "12345::", ADDR_LIT_INVALID },
	{ "g::1", ADDR_LIT_INVALID },
	{ "::1 ", ADDR_LIT_INVALID },
	{ "::ffff:010.0.0.1", ADDR_LIT_INVALID },
	{ "::ffff:1.2.3", ADDR_LIT_INVALID },
	{ "example.com:443", ADDR_LIT_INVALID },
	{ "0000:0000:0000:0000:0000:0000:0000:0000:1", ADDR_LIT_INVALID },
};

static void
test_literals(void **state)
{
	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(lit_cases); i++) {
		struct addr a;
		enum addr_literal got = addr_parse_literal(lit_cases[i].in,
		    strlen(lit_cases[i].in), &a);

		if (got != lit_cases[i].want)
			fail_msg("addr_parse_literal(\"%s\") = %d, want %d", lit_cases[i].in,
			    (int)got, (int)lit_cases[i].want);
		if (got == ADDR_LIT_V4)
			assert_int_equal(a.family, AF_INET);
		if (got == ADDR_LIT_V6)
			assert_int_equal(a.family, AF_INET6);
	}
}

static void
test_literal_edges(void **state)
{
	struct addr a;

	(void)state;
	/* Length, not NUL, bounds the input; an embedded NUL is refused. */
	assert_int_equal(addr_parse_literal("1.2.3.4\0" "5", 9, &a), ADDR_LIT_INVALID);
	assert_int_equal(addr_parse_literal("1.2.3.45", 7, &a), ADDR_LIT_V4);
	assert_int_equal(addr_parse_literal("", 0, &a), ADDR_LIT_NONE);
	assert_int_equal(addr_parse_literal(NULL, 0, &a), ADDR_LIT_NONE);
	assert_int_equal(addr_parse_literal("::1", 3, NULL), ADDR_LIT_V6);
	/* Over-long IPv6 text is refused without copying past the buffer. */
	char longv6[200];
	memset(longv6, '0', sizeof(longv6));
	longv6[0] = ':';
	longv6[1] = ':';
	assert_int_equal(addr_parse_literal(longv6, sizeof(longv6), &a), ADDR_LIT_INVALID);

	/* Round trip through text and sockaddr. */
	char buf[EGRESS_ADDRSTR_MAX];
	assert_int_equal(addr_parse_literal("2001:DB8:0:0::1", 15, &a), ADDR_LIT_V6);
	assert_string_equal(addr_to_str(&a, buf, sizeof(buf)), "2001:db8::1");
	struct sockaddr_storage ss;
	socklen_t sl = addr_to_sockaddr(&a, 443, &ss);
	assert_int_equal(sl, sizeof(struct sockaddr_in6));
	struct addr b;
	addr_from_sockaddr(&b, (struct sockaddr *)&ss);
	assert_true(addr_equal(&a, &b));
	assert_int_equal(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 443);

	assert_int_equal(addr_parse_literal("198.51.100.7", 12, &a), ADDR_LIT_V4);
	assert_string_equal(addr_to_str(&a, buf, sizeof(buf)), "198.51.100.7");
	sl = addr_to_sockaddr(&a, 80, &ss);
	assert_int_equal(sl, sizeof(struct sockaddr_in));
	addr_from_sockaddr(&b, (struct sockaddr *)&ss);
	assert_true(addr_equal(&a, &b));
	assert_int_equal(addr_parse_literal("198.51.100.8", 12, &b), ADDR_LIT_V4);
	assert_false(addr_equal(&a, &b));

	struct addr bad = { .family = AF_UNIX };
	assert_int_equal(addr_to_sockaddr(&bad, 1, &ss), 0);
	assert_int_equal(addr_classify(&bad, NULL), ADDR_CLASS_RESERVED);
}

/* ---------- classification ---------- */

struct cls_case {
	const char *in;
	enum addr_class want;
	bool embedded;
};

#define C(s, c) { s, ADDR_CLASS_##c, false }
#define E(s, c) { s, ADDR_CLASS_##c, true }

/*
 * Every row of both registries: an address inside (first and last where it matters) and
 * one just outside on each side.
 */
static const struct cls_case cls_cases[] = {
	/* 0.0.0.0/8 this network, 0.0.0.0/32 this host */
	C("0.0.0.0", THIS_NETWORK), C("0.255.255.255", THIS_NETWORK), C("0.0.0.1", THIS_NETWORK),
	C("1.0.0.0", PUBLIC),
	/* 10.0.0.0/8 */
	C("9.255.255.255", PUBLIC), C("10.0.0.0", PRIVATE), C("10.255.255.255", PRIVATE),
	C("11.0.0.0", PUBLIC),
	/* 100.64.0.0/10 */
	C("100.63.255.255", PUBLIC), C("100.64.0.0", SHARED), C("100.127.255.255", SHARED),
	C("100.128.0.0", PUBLIC),
	/* 127.0.0.0/8 */
	C("126.255.255.255", PUBLIC), C("127.0.0.1", LOOPBACK), C("127.255.255.255", LOOPBACK),
	C("128.0.0.0", PUBLIC),
	/* 169.254.0.0/16 */
	C("169.253.255.255", PUBLIC), C("169.254.0.0", LINK_LOCAL),
	C("169.254.169.254", LINK_LOCAL), C("169.254.255.255", LINK_LOCAL),
	C("169.255.0.0", PUBLIC),
	/* 172.16.0.0/12 */
	C("172.15.255.255", PUBLIC), C("172.16.0.0", PRIVATE), C("172.31.255.255", PRIVATE),
	C("172.32.0.0", PUBLIC),
	/* 192.0.0.0/24 and its rows */
	C("191.255.255.255", PUBLIC), C("192.0.0.0", IETF), C("192.0.0.7", IETF),
	C("192.0.0.8", DUMMY), C("192.0.0.9", IETF), C("192.0.0.10", IETF),
	C("192.0.0.11", IETF), C("192.0.0.169", IETF), C("192.0.0.170", IETF),
	C("192.0.0.171", IETF), C("192.0.0.172", IETF), C("192.0.0.255", IETF),
	C("192.0.1.0", PUBLIC),
	/* 192.0.2.0/24 */
	C("192.0.1.255", PUBLIC), C("192.0.2.0", DOCUMENTATION), C("192.0.2.255", DOCUMENTATION),
	C("192.0.3.0", PUBLIC),
	/* 192.31.196.0/24 */
	C("192.31.195.255", PUBLIC), C("192.31.196.0", AS112), C("192.31.196.255", AS112),
	C("192.31.197.0", PUBLIC),
	/* 192.52.193.0/24 */
	C("192.52.192.255", PUBLIC), C("192.52.193.0", AMT), C("192.52.193.255", AMT),
	C("192.52.194.0", PUBLIC),
	/* 192.88.99.0/24, 192.88.99.2/32 */
	C("192.88.98.255", PUBLIC), C("192.88.99.0", 6TO4_RELAY), C("192.88.99.2", 6TO4_RELAY),
	C("192.88.99.255", 6TO4_RELAY), C("192.88.100.0", PUBLIC),
	/* 192.168.0.0/16 */
	C("192.167.255.255", PUBLIC), C("192.168.0.0", PRIVATE), C("192.168.255.255", PRIVATE),
	C("192.169.0.0", PUBLIC),
	/* 192.175.48.0/24 */
	C("192.175.47.255", PUBLIC), C("192.175.48.0", AS112), C("192.175.48.255", AS112),
	C("192.175.49.0", PUBLIC),
	/* 198.18.0.0/15 */
	C("198.17.255.255", PUBLIC), C("198.18.0.0", BENCHMARKING),
	C("198.19.255.255", BENCHMARKING), C("198.20.0.0", PUBLIC),
	/* 198.51.100.0/24 */
	C("198.51.99.255", PUBLIC), C("198.51.100.0", DOCUMENTATION),
	C("198.51.100.255", DOCUMENTATION), C("198.51.101.0", PUBLIC),
	/* 203.0.113.0/24 */
	C("203.0.112.255", PUBLIC), C("203.0.113.0", DOCUMENTATION),
	C("203.0.113.255", DOCUMENTATION), C("203.0.114.0", PUBLIC),
	/* 224.0.0.0/4 */
	C("223.255.255.255", PUBLIC), C("224.0.0.0", MULTICAST), C("239.255.255.255", MULTICAST),
	/* 240.0.0.0/4 and broadcast */
	C("240.0.0.0", RESERVED), C("255.255.255.254", RESERVED),
	C("255.255.255.255", BROADCAST),
	/* ordinary public */
	C("8.8.8.8", PUBLIC), C("1.1.1.1", PUBLIC),

	/* ::1/128, ::/128 */
	C("::1", LOOPBACK), C("::", UNSPECIFIED),
	/* ::/96 v4-compatible (deprecated), except :: and ::1 */
	E("::2", THIS_NETWORK), C("::8.8.8.8", V4COMPAT), E("::10.0.0.1", PRIVATE),
	E("::127.0.0.1", LOOPBACK), E("::169.254.1.1", LINK_LOCAL), C("::1:0:0", RESERVED),
	/* ::ffff:0:0/96 v4-mapped */
	C("::ffff:8.8.8.8", V4MAPPED), E("::ffff:10.1.2.3", PRIVATE),
	E("::ffff:127.0.0.1", LOOPBACK), E("::ffff:192.168.1.1", PRIVATE),
	E("::ffff:169.254.169.254", LINK_LOCAL), E("::ffff:0.0.0.0", THIS_NETWORK),
	E("::ffff:198.51.100.1", DOCUMENTATION),
	C("::fffe:ffff:ffff", RESERVED), C("::1:0:0:0", RESERVED),
	/* 64:ff9b::/96 NAT64 well-known prefix (globally reachable) */
	C("64:ff9b::8.8.8.8", PUBLIC), E("64:ff9b::10.0.0.1", PRIVATE),
	E("64:ff9b::127.0.0.1", LOOPBACK), E("64:ff9b::192.168.1.1", PRIVATE),
	C("64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", RESERVED), C("64:ff9b:0:0:0:1::", RESERVED),
	/* 64:ff9b:1::/48 local-use NAT64: /96 and /48 embeddings */
	C("64:ff9b:1::8.8.8.8", NAT64_LOCAL), E("64:ff9b:1::10.0.0.1", PRIVATE),
	E("64:ff9b:1:a00:0:100::", PRIVATE),          /* /48 position: 10.0.0.1 */
	E("64:ff9b:1:0:a9:fe01::", LINK_LOCAL),        /* /64 position: 169.254.1.0 */
	E("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", BROADCAST), /* 255.255.255.255 at /96 */
	C("64:ff9b:2::", RESERVED), C("64:ff9b:0:ffff::", RESERVED),
	/* 100::/64 discard, 100:0:0:1::/64 dummy */
	C("100::", DISCARD), C("100::ffff:ffff:ffff:ffff", DISCARD),
	C("100:0:0:1::", DUMMY), C("100:0:0:1:ffff:ffff:ffff:ffff", DUMMY),
	C("100:0:0:2::", RESERVED), C("ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RESERVED),
	/* 2001::/23 and its rows */
	C("2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PUBLIC), C("2001:1ff:ffff::", IETF),
	C("2001:200::", PUBLIC), C("2001:4:0:0:0:0:0:1", IETF),
	/* 2001::/32 Teredo: client address is the inverted last 32 bits */
	C("2001:0:4136:e378:8000:63bf:f7f7:f7f7", TEREDO),           /* client 8.8.8.8 */
	E("2001:0:4136:e378:8000:63bf:f5ff:fffe", PRIVATE),          /* client 10.0.0.1 */
	E("2001:0:4136:e378:8000:63bf:80ff:fffe", LOOPBACK),         /* client 127.0.0.1 */
	E("2001:0:4136:e378:8000:63bf:3f57:fefe", PRIVATE),          /* client 192.168.1.1 */
	C("2001:1::", IETF),
	/* 2001:1::1/128, 2001:1::2/128, 2001:1::3/128 */
	C("2001:1::1", IETF), C("2001:1::2", IETF), C("2001:1::3", IETF), C("2001:1::4", IETF),
	/* 2001:2::/48 benchmarking */
	C("2001:1:ffff:ffff:ffff:ffff:ffff:ffff", IETF), C("2001:2::", BENCHMARKING),
	C("2001:2:0:ffff:ffff:ffff:ffff:ffff", BENCHMARKING), C("2001:2:1::", IETF),
	/* 2001:3::/32 AMT */
	C("2001:3::", AMT), C("2001:3:ffff:ffff:ffff:ffff:ffff:ffff", AMT), C("2001:4::", IETF),
	/* 2001:4:112::/48 AS112-v6 */
	C("2001:4:111:ffff:ffff:ffff:ffff:ffff", IETF), C("2001:4:112::", AS112),
	C("2001:4:112:ffff:ffff:ffff:ffff:ffff", AS112), C("2001:4:113::", IETF),
	/* 2001:10::/28 ORCHID (deprecated), 2001:20::/28 ORCHIDv2, 2001:30::/28 DRIP */
	C("2001:f:ffff:ffff:ffff:ffff:ffff:ffff", IETF), C("2001:10::", ORCHID),
	C("2001:1f:ffff:ffff:ffff:ffff:ffff:ffff", ORCHID), C("2001:20::", ORCHID),
	C("2001:2f:ffff:ffff:ffff:ffff:ffff:ffff", ORCHID), C("2001:30::", IETF),
	C("2001:3f:ffff:ffff:ffff:ffff:ffff:ffff", IETF), C("2001:40::", IETF),
	/* 2001:db8::/32 */
	C("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", PUBLIC), C("2001:db8::", DOCUMENTATION),
	C("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", DOCUMENTATION), C("2001:db9::", PUBLIC),
	/* 2002::/16 6to4 */
	C("2002:808:808::", 6TO4), E("2002:a00:1::", PRIVATE), E("2002:7f00:1::1", LOOPBACK),
	E("2002:c0a8:101::", PRIVATE), E("2002:a9fe:a9fe::", LINK_LOCAL),
	C("2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PUBLIC), C("2003::", PUBLIC),
	/* 2620:4f:8000::/48 */
	C("2620:4f:7fff:ffff:ffff:ffff:ffff:ffff", PUBLIC), C("2620:4f:8000::", AS112),
	C("2620:4f:8000:ffff:ffff:ffff:ffff:ffff", AS112), C("2620:4f:8001::", PUBLIC),
	/* 3fff::/20 */
	C("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PUBLIC), C("3fff::", DOCUMENTATION),
	C("3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", DOCUMENTATION), C("3fff:1000::", PUBLIC),
	/* 5f00::/16 */
	C("5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RESERVED), C("5f00::", SEGMENT_ROUTING),
	C("5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", SEGMENT_ROUTING), C("5f01::", RESERVED),
	/* fc00::/7 */
	C("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RESERVED), C("fc00::", ULA),
	C("fd12:3456::1", ULA), C("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ULA),
	C("fe00::", RESERVED),
	/* fe80::/10 */
	C("fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RESERVED), C("fe80::", LINK_LOCAL),
	C("fe80::1", LINK_LOCAL), C("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", LINK_LOCAL),
	/* fec0::/10 */
	C("fec0::", SITE_LOCAL), C("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", SITE_LOCAL),
	/* ff00::/8 */
	C("ff00::", MULTICAST), C("ff02::1", MULTICAST),
	C("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", MULTICAST),
	/* ordinary public and unallocated */
	C("2606:4700::1111", PUBLIC), C("2a00:1450::1", PUBLIC), C("4000::", RESERVED),
	C("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RESERVED), C("4000::1", RESERVED),
};

static void
test_classify(void **state)
{
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(cls_cases); i++) {
		const struct cls_case *tc = &cls_cases[i];
		struct addr a;
		bool emb = !tc->embedded;
		enum addr_literal lit = addr_parse_literal(tc->in, strlen(tc->in), &a);

		if (lit != ADDR_LIT_V4 && lit != ADDR_LIT_V6)
			fail_msg("test address \"%s\" did not parse", tc->in);
		enum addr_class got = addr_classify(&a, &emb);
		if (got != tc->want || emb != tc->embedded) {
			print_error("addr_classify(%s) = %s%s, want %s%s\n", tc->in,
			    addr_class_str(got), emb ? " (embedded)" : "", addr_class_str(tc->want),
			    tc->embedded ? " (embedded)" : "");
			bad++;
		}
		/* The NULL 'embedded' pointer is allowed. */
		assert_int_equal(addr_classify(&a, NULL), got);
	}
	assert_int_equal(bad, 0);
}

static void
test_class_names(void **state)
{
	(void)state;
	/* Names are stable API (decision log, metrics): pin a few and require all distinct. */
	assert_string_equal(addr_class_str(ADDR_CLASS_PUBLIC), "public");
	assert_string_equal(addr_class_str(ADDR_CLASS_PRIVATE), "private");
	assert_string_equal(addr_class_str(ADDR_CLASS_LOOPBACK), "loopback");
	assert_string_equal(addr_class_str(ADDR_CLASS_LINK_LOCAL), "link-local");
	assert_string_equal(addr_class_str(ADDR_CLASS_DOCUMENTATION), "documentation");
	assert_string_equal(addr_class_str(ADDR_CLASS__COUNT), "unknown");
	assert_string_equal(addr_class_str((enum addr_class)-1), "unknown");
	for (int i = 0; i < ADDR_CLASS__COUNT; i++) {
		assert_string_not_equal(addr_class_str((enum addr_class)i), "unknown");
		for (int j = i + 1; j < ADDR_CLASS__COUNT; j++)
			assert_string_not_equal(addr_class_str((enum addr_class)i),
			    addr_class_str((enum addr_class)j));
	}
}

/* addr_to_str formats IPv4 by hand: it must equal inet_ntop for every octet value and
 * every buffer size (too small: "", as inet_ntop's failure gave). */
static void
test_to_str_v4_matches_inet_ntop(void **state)
{
	(void)state;
	static const unsigned char oct[] = { 0, 1, 9, 10, 11, 99, 100, 101, 199, 200, 250, 255 };
	char want[INET_ADDRSTRLEN], got[EGRESS_ADDRSTR_MAX];
	struct addr a = { .family = AF_INET };

	for (size_t i = 0; i < sizeof(oct); i++) {
		for (size_t j = 0; j < sizeof(oct); j++) {
			unsigned char *b = (unsigned char *)&a.u.v4.s_addr;

			b[0] = oct[i];
			b[1] = oct[j];
			b[2] = oct[(i + j) % sizeof(oct)];
			b[3] = oct[(i * 7 + j) % sizeof(oct)];
			assert_non_null(inet_ntop(AF_INET, &a.u.v4, want, sizeof(want)));
			assert_string_equal(addr_to_str(&a, got, sizeof(got)), want);
			/* exactly fitting, and one byte short */
			size_t n = strlen(want);
			assert_string_equal(addr_to_str(&a, got, n + 1), want);
			assert_string_equal(addr_to_str(&a, got, n), "");
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_literals),
		cmocka_unit_test(test_literal_edges),
		cmocka_unit_test(test_classify),
		cmocka_unit_test(test_class_names),
		cmocka_unit_test(test_to_str_v4_matches_inet_ntop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
