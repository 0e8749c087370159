/* test_cidr.c - CIDR parsing and set matching (common/cidr). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>

#include "common/cidr.h"
#include "common/limits.h"
#include "common/util.h"

struct parse_case {
	const char *in;
	int ok;
	const char *canon;      /* cidr_to_str of the result */
};

static const struct parse_case parse_cases[] = {
	{ "198.51.100.0/24", 1, "198.51.100.0/24" },
	{ "0.0.0.0/0", 1, "0.0.0.0/0" },
	{ "10.0.0.0/8", 1, "10.0.0.0/8" },
	{ "198.51.100.7", 1, "198.51.100.7/32" },
	{ "198.51.100.7/32", 1, "198.51.100.7/32" },
	{ "198.51.100.128/25", 1, "198.51.100.128/25" },
	{ "2001:db8::/32", 1, "2001:db8::/32" },
	{ "2001:DB8::/32", 1, "2001:db8::/32" },
	{ "::/0", 1, "::/0" },
	{ "::1", 1, "::1/128" },
	{ "fe80::/10", 1, "fe80::/10" },
	{ "2001:db8::1/128", 1, "2001:db8::1/128" },
	{ "::ffff:10.0.0.0/104", 1, "::ffff:10.0.0.0/104" },
	/* refused */
	{ "", 0, NULL },
	{ "/24", 0, NULL },
	{ "10.0.0.1/8", 0, NULL },             /* host bits */
	{ "198.51.100.1/24", 0, NULL },
	{ "2001:db8::1/32", 0, NULL },
	{ "10.0.0.0/33", 0, NULL },
	{ "2001:db8::/129", 0, NULL },
	{ "10.0.0.0/", 0, NULL },
	{ "10.0.0.0/08", 0, NULL },            /* leading zero */
	{ "10.0.0.0/+8", 0, NULL },
	{ "10.0.0.0/-1", 0, NULL },
	{ "10.0.0.0/8/8", 0, NULL },
	{ "10.0.0.0/ 8", 0, NULL },
	{ " 10.0.0.0/8", 0, NULL },
	{ "10.0.0.0/8 ", 0, NULL },
	{ "010.0.0.0/8", 0, NULL },            /* octal */
	{ "10/8", 0, NULL },                   /* short form */
	{ "10.0/16", 0, NULL },
	{ "0x0a000000/8", 0, NULL },
	{ "167772160/8", 0, NULL },            /* bare integer */
	{ "example.com/24", 0, NULL },
	{ "fe80::%eth0/64", 0, NULL },
	{ "[::1]/128", 0, NULL },
	{ "10.0.0.0/4294967304", 0, NULL },    /* would wrap to 8 */
	{ "1111:2222:3333:4444:5555:6666:7777:8888:9999/128", 0, NULL },
};

static void
test_parse(void **state)
{
	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(parse_cases); i++) {
		const struct parse_case *tc = &parse_cases[i];
		struct cidr c;
		const char *err = NULL;
		char buf[EGRESS_ADDRSTR_MAX + 8];
		int rc = cidr_parse(tc->in, &c, &err);

		if (tc->ok) {
			if (rc != 0)
				fail_msg("cidr_parse(\"%s\") failed: %s", tc->in, err);
			assert_string_equal(cidr_to_str(&c, buf, sizeof(buf)), tc->canon);
		} else {
			if (rc == 0)
				fail_msg("cidr_parse(\"%s\") accepted", tc->in);
			assert_non_null(err);
		}
	}
	/* A long input is bounded without reading past its end. */
	char longin[4096];
	memset(longin, '1', sizeof(longin) - 1);
	longin[sizeof(longin) - 1] = '\0';
	struct cidr c;
	const char *err;
	assert_int_equal(cidr_parse(longin, &c, &err), -1);
	assert_int_equal(cidr_parse(NULL, &c, &err), -1);
	char tiny[4];
	assert_int_equal(cidr_parse("10.0.0.0/8", &c, &err), 0);
	assert_string_equal(cidr_to_str(&c, tiny, sizeof(tiny)), "");
}

struct match_case {
	const char *set;        /* comma-free: entries separated by spaces */
	const char *addr;
	bool want;
};

static const struct match_case match_cases[] = {
	{ "198.51.100.0/24", "198.51.100.0", true },
	{ "198.51.100.0/24", "198.51.100.255", true },
	{ "198.51.100.0/24", "198.51.101.0", false },       /* negative twin: just outside */
	{ "198.51.100.0/24", "198.51.99.255", false },
	{ "198.51.100.128/25", "198.51.100.127", false },
	{ "198.51.100.128/25", "198.51.100.128", true },
	{ "198.51.100.7", "198.51.100.7", true },
	{ "198.51.100.7", "198.51.100.6", false },
	{ "0.0.0.0/0", "255.255.255.255", true },
	{ "0.0.0.0/0", "::1", false },                      /* families do not mix */
	{ "::/0", "10.0.0.1", false },
	{ "::/0", "::1", true },
	{ "2001:db8::/32", "2001:db8:ffff::1", true },
	{ "2001:db8::/32", "2001:db9::", false },
	{ "2001:db8::/33", "2001:db8:8000::", false },
	{ "2001:db8::/33", "2001:db8:7fff::", true },
	{ "fe80::/10", "febf::1", true },
	{ "fe80::/10", "fec0::1", false },
	/* v4-mapped IPv6 is matched as its IPv4 address */
	{ "10.0.0.0/8", "::ffff:10.1.2.3", true },
	{ "10.0.0.0/8", "::ffff:11.1.2.3", false },
	{ "10.0.0.0/8", "::10.1.2.3", false },              /* v4-compatible is not mapped */
	{ "10.0.0.0/8", "64:ff9b::10.1.2.3", false },
	/* several entries */
	{ "10.0.0.0/8 2001:db8::/32 198.51.100.7", "198.51.100.7", true },
	{ "10.0.0.0/8 2001:db8::/32 198.51.100.7", "2001:db8::5", true },
	{ "10.0.0.0/8 2001:db8::/32 198.51.100.7", "203.0.113.1", false },
	{ "", "10.0.0.1", false },                          /* empty set matches nothing */
};

static void
build_set(struct cidr_set *set, const char *list)
{
	char buf[512];
	size_t n = 0;

	/* Entries separated by single spaces. */
	for (const char *p = list;; p++) {
		if (*p != ' ' && *p != '\0') {
			assert_true(n < sizeof(buf) - 1);
			buf[n++] = *p;
			continue;
		}
		if (n > 0) {
			const char *err;

			buf[n] = '\0';
			if (cidr_set_add_str(set, buf, &err) != 0)
				fail_msg("cidr_set_add_str(%s): %s", buf, err);
			n = 0;
		}
		if (*p == '\0')
			break;
	}
}

static void
test_match(void **state)
{
	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(match_cases); i++) {
		const struct match_case *tc = &match_cases[i];
		struct cidr_set set = { 0 };
		struct addr a;

		build_set(&set, tc->set);
		enum addr_literal lit = addr_parse_literal(tc->addr, strlen(tc->addr), &a);
		assert_true(lit == ADDR_LIT_V4 || lit == ADDR_LIT_V6);
		if (cidr_set_match(&set, &a) != tc->want)
			fail_msg("set {%s} match %s: want %d", tc->set, tc->addr, tc->want);
		cidr_set_free(&set);
		assert_null(set.v);
		assert_int_equal(set.n, 0);
	}
	cidr_set_free(NULL);
	assert_false(cidr_set_match(NULL, NULL));
	assert_false(cidr_match(NULL, NULL));
}

static void
test_set_limits(void **state)
{
	struct cidr_set set = { 0 };
	const char *err;

	(void)state;
	for (int i = 0; i < EGRESS_GRANT_CIDRS_MAX; i++)
		assert_int_equal(cidr_set_add_str(&set, "198.51.100.0/24", &err), 0);
	assert_int_equal(set.n, EGRESS_GRANT_CIDRS_MAX);
	assert_int_equal(cidr_set_add_str(&set, "203.0.113.0/24", &err), -1);
	assert_non_null(err);
	struct cidr c;
	assert_int_equal(cidr_parse("203.0.113.0/24", &c, &err), 0);
	errno = 0;
	assert_int_equal(cidr_set_add(&set, &c), -1);
	assert_int_equal(errno, E2BIG);
	/* A bad entry leaves the set unchanged. */
	assert_int_equal(cidr_set_add_str(&set, "10.0.0.1/8", &err), -1);
	assert_int_equal(set.n, EGRESS_GRANT_CIDRS_MAX);
	cidr_set_free(&set);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_match),
		cmocka_unit_test(test_set_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
