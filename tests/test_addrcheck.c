/* test_addrcheck.c - address-class policy: every allow with its negative twin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "egressd/addrcheck.h"

static struct addr
A(const char *s)
{
	struct addr a;
	enum addr_literal k = addr_parse_literal(s, strlen(s), &a);

	if (k != ADDR_LIT_V4 && k != ADDR_LIT_V6)
		fail_msg("not a literal: %s", s);
	return a;
}

static void
set_of(struct cidr_set *set, const char *const *v, size_t n)
{
	const char *err = NULL;

	memset(set, 0, sizeof(*set));
	for (size_t i = 0; i < n; i++)
		if (cidr_set_add_str(set, v[i], &err) != 0)
			fail_msg("cidr %s: %s", v[i], err);
}

/* One address of every special class (and a few embedded forms): all dropped. */
static const struct {
	const char *a;
	const char *cls;
} specials[] = {
	{ "0.1.2.3", "this-network" }, { "10.1.2.3", "private" }, { "172.16.0.1", "private" },
	{ "192.168.1.1", "private" }, { "100.64.0.1", "shared" }, { "127.0.0.1", "loopback" },
	{ "::1", "loopback" }, { "169.254.1.1", "link-local" }, { "fe80::1", "link-local" },
	{ "192.0.0.1", NULL }, { "198.51.100.7", NULL }, { "203.0.113.7", NULL },
	{ "2001:db8::1", NULL }, { "198.18.0.1", NULL }, { "192.88.99.1", NULL },
	{ "224.0.0.1", NULL }, { "ff02::1", NULL }, { "240.0.0.1", NULL },
	{ "255.255.255.255", NULL }, { "::", NULL }, { "fc00::1", NULL }, { "fd12::1", NULL },
	{ "fec0::1", NULL }, { "100::1", NULL }, { "::ffff:10.0.0.1", NULL },
	{ "::ffff:127.0.0.1", NULL }, { "64:ff9b::a00:1", NULL }, { "2002:a00:1::1", NULL },
	{ "0.0.0.0", NULL }, { "192.0.0.8", NULL },
};

static void
test_every_special_dropped(void **state)
{
	struct addrcheck_result res;

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(specials); i++) {
		struct addr a = A(specials[i].a);

		assert_int_equal(addrcheck_filter(&a, 1, NULL, NULL, &res),
		    REASON_PRIVATE_ADDRESS);
		assert_int_equal(res.nkept, 0);
		assert_int_equal(res.ndropped, 1);
		assert_true(res.dropped_classes != 0);
		assert_false(res.dropped_classes & ADDRCHECK_BIT(ADDR_CLASS_PUBLIC));
		if (specials[i].cls != NULL) {
			char buf[256];

			addrcheck_classes_str(res.dropped_classes, buf, sizeof(buf));
			assert_string_equal(buf, specials[i].cls);
		}
		/* the literal helper agrees */
		assert_int_equal(addrcheck_literal(&a, NULL, NULL, &res), REASON_PRIVATE_ADDRESS);
	}
}

static void
test_public_kept(void **state)
{
	struct addr in[] = { A("198.51.99.1"), A("8.8.8.8"), A("2606:4700::1111") };
	struct addrcheck_result res;

	(void)state;
	assert_int_equal(addrcheck_filter(in, 3, NULL, NULL, &res), REASON_ALLOWED);
	assert_int_equal(res.nkept, 3);
	assert_int_equal(res.dropped_classes, 0);
	assert_int_equal(res.seen_classes, ADDRCHECK_BIT(ADDR_CLASS_PUBLIC));
}

static void
test_mixed_keeps_only_public_in_order(void **state)
{
	struct addr in[] = { A("10.0.0.1"), A("8.8.4.4"), A("::ffff:192.168.0.1"),
	    A("2606:4700::1"), A("127.0.0.1"), A("1.1.1.1") };
	struct addrcheck_result res;
	char buf[128];

	(void)state;
	assert_int_equal(addrcheck_filter(in, 6, NULL, NULL, &res), REASON_ALLOWED);
	assert_int_equal(res.nkept, 3);
	assert_true(addr_equal(&res.kept[0], &in[1]));
	assert_true(addr_equal(&res.kept[1], &in[3]));
	assert_true(addr_equal(&res.kept[2], &in[5]));
	assert_int_equal(res.ndropped, 3);
	assert_true(res.dropped_classes & ADDRCHECK_BIT(ADDR_CLASS_PRIVATE));
	assert_true(res.dropped_classes & ADDRCHECK_BIT(ADDR_CLASS_LOOPBACK));
	addrcheck_classes_str(res.dropped_classes, buf, sizeof(buf));
	assert_non_null(strstr(buf, "private"));
	assert_non_null(strstr(buf, "loopback"));
}

static void
test_override_lifts_exactly_its_cidr(void **state)
{
	static const char *const ov[] = { "198.51.100.0/24" };
	struct cidr_set set;
	struct addrcheck_result res;
	struct addr in = A("198.51.100.7"), out = A("198.51.101.7"), doc2 = A("203.0.113.7");

	(void)state;
	set_of(&set, ov, 1);
	assert_int_equal(addrcheck_filter(&in, 1, NULL, &set, &res), REASON_ALLOWED);
	assert_int_equal(res.lifted_override, ADDRCHECK_BIT(ADDR_CLASS_DOCUMENTATION));
	assert_int_equal(res.lifted_grant, 0);
	/* negative twins: the neighbour /24 (public, kept for being public, not lifted) and
	 * another documentation range stay as they are */
	assert_int_equal(addrcheck_filter(&out, 1, NULL, &set, &res), REASON_ALLOWED);
	assert_int_equal(res.lifted_override, 0);
	assert_int_equal(addrcheck_filter(&doc2, 1, NULL, &set, &res), REASON_PRIVATE_ADDRESS);
	/* and without the override the same address is dropped */
	assert_int_equal(addrcheck_filter(&in, 1, NULL, NULL, &res), REASON_PRIVATE_ADDRESS);
	cidr_set_free(&set);
}

static void
test_grant_allow_address(void **state)
{
	static const char *const g[] = { "10.20.0.0/16" };
	struct cidr_set set;
	struct addrcheck_result res;
	struct addr ok = A("10.20.3.4"), no = A("10.21.3.4"), mapped = A("::ffff:10.20.3.4");

	(void)state;
	set_of(&set, g, 1);
	assert_int_equal(addrcheck_filter(&ok, 1, &set, NULL, &res), REASON_ALLOWED);
	assert_int_equal(res.lifted_grant, ADDRCHECK_BIT(ADDR_CLASS_PRIVATE));
	assert_int_equal(addrcheck_filter(&no, 1, &set, NULL, &res), REASON_PRIVATE_ADDRESS);
	/* the v4-mapped form is the same address */
	assert_int_equal(addrcheck_filter(&mapped, 1, &set, NULL, &res), REASON_ALLOWED);
	/* literal: named in allow AND covered by allow_address */
	assert_int_equal(addrcheck_literal(&ok, &set, NULL, &res), REASON_ALLOWED);
	assert_int_equal(addrcheck_literal(&no, &set, NULL, &res), REASON_PRIVATE_ADDRESS);
	cidr_set_free(&set);
}

static void
test_never_liftable(void **state)
{
	static const char *const all[] = { "0.0.0.0/0", "::/0" };
	struct cidr_set set;
	struct addrcheck_result res;
	const char *never[] = { "0.0.0.0", "0.1.2.3", "::", "224.0.0.1", "ff02::1",
	    "255.255.255.255" };

	(void)state;
	set_of(&set, all, 2);
	for (size_t i = 0; i < EGRESS_NELEM(never); i++) {
		struct addr a = A(never[i]);

		assert_int_equal(addrcheck_filter(&a, 1, &set, &set, &res),
		    REASON_PRIVATE_ADDRESS);
	}
	/* ...while an ordinary special class is liftable by the same set */
	{
		struct addr a = A("127.0.0.1");

		assert_int_equal(addrcheck_filter(&a, 1, &set, NULL, &res), REASON_ALLOWED);
	}
	cidr_set_free(&set);
}

static void
test_empty_and_cap(void **state)
{
	struct addrcheck_result res;
	struct addr many[EGRESS_DNS_ADDRS_MAX + 5];

	(void)state;
	assert_int_equal(addrcheck_filter(NULL, 0, NULL, NULL, &res), REASON_DNS_NO_ADDRESS);
	for (size_t i = 0; i < EGRESS_NELEM(many); i++)
		many[i] = A("8.8.8.8");
	assert_int_equal(addrcheck_filter(many, EGRESS_NELEM(many), NULL, NULL, &res),
	    REASON_ALLOWED);
	assert_int_equal(res.nkept, EGRESS_DNS_ADDRS_MAX);
}

static void
test_is_self(void **state)
{
	struct addr self[] = { A("169.254.77.1"), A("127.0.0.1"), A("fe80::1") };
	struct addr v4any[] = { A("0.0.0.0") };
	struct addr a;

	(void)state;
	a = A("169.254.77.1");
	assert_true(addrcheck_is_self(&a, self, 3));
	a = A("::ffff:169.254.77.1");
	assert_true(addrcheck_is_self(&a, self, 3));
	a = A("169.254.77.2");
	assert_false(addrcheck_is_self(&a, self, 3));
	a = A("fe80::1");
	assert_true(addrcheck_is_self(&a, self, 3));
	a = A("fe80::2");
	assert_false(addrcheck_is_self(&a, self, 3));
	a = A("8.8.8.8");
	assert_true(addrcheck_is_self(&a, v4any, 1));
	a = A("2606:4700::1");
	assert_false(addrcheck_is_self(&a, v4any, 1));
	assert_false(addrcheck_is_self(&a, NULL, 0));
}

/* A self address dropped from a mixed answer is listed ("self") among the classes
 * dropped, next to the real classes; all self: self_address, still listed. */
static void
test_hop_lists_self(void **state)
{
	struct addr self[] = { A("169.254.77.1"), A("127.0.0.1") };
	struct addr mixed[] = { A("169.254.77.1"), A("10.0.0.1"), A("8.8.8.8") };
	struct addr only[] = { A("::ffff:169.254.77.1"), A("127.0.0.1") };
	struct addrcheck_result res;
	char buf[128];
	json_t *j;
	char *txt;

	(void)state;
	assert_int_equal(addrcheck_hop(mixed, 3, false, self, 2, NULL, NULL, &res),
	    REASON_ALLOWED);
	assert_int_equal(res.nkept, 1);
	assert_int_equal(res.ndropped, 2);
	assert_true(res.dropped_classes & ADDRCHECK_SELF_BIT);
	j = addrcheck_classes_json(res.dropped_classes);
	txt = json_dumps(j, JSON_COMPACT);
	assert_string_equal(txt, "[\"private\",\"self\"]");
	free(txt);
	json_decref(j);
	assert_string_equal(addrcheck_classes_str(res.dropped_classes, buf, sizeof(buf)),
	    "private,self");
	assert_int_equal(addrcheck_hop(only, 2, false, self, 2, NULL, NULL, &res),
	    REASON_SELF_ADDRESS);
	assert_int_equal(res.nkept, 0);
	assert_int_equal(res.ndropped, 2);
	assert_string_equal(addrcheck_classes_str(res.dropped_classes, buf, sizeof(buf)),
	    "self");
	/* a literal that is not self goes through the literal check */
	assert_int_equal(addrcheck_hop(&mixed[1], 1, true, self, 2, NULL, NULL, &res),
	    REASON_PRIVATE_ADDRESS);
	assert_false(res.dropped_classes & ADDRCHECK_SELF_BIT);
	/* no self list: nothing is self (169.254.77.1 is then dropped as link_local) */
	assert_int_equal(addrcheck_hop(mixed, 3, false, NULL, 0, NULL, NULL, &res),
	    REASON_ALLOWED);
	assert_int_equal(res.nkept, 1);
	assert_false(res.dropped_classes & ADDRCHECK_SELF_BIT);
}

static void
test_classes_json(void **state)
{
	json_t *j = addrcheck_classes_json(ADDRCHECK_BIT(ADDR_CLASS_LOOPBACK) |
	    ADDRCHECK_BIT(ADDR_CLASS_PRIVATE));
	char *s;
	char small[8];

	(void)state;
	assert_non_null(j);
	s = json_dumps(j, JSON_COMPACT);
	assert_string_equal(s, "[\"private\",\"loopback\"]");
	free(s);
	json_decref(j);
	/* truncation keeps whole names only */
	addrcheck_classes_str(ADDRCHECK_BIT(ADDR_CLASS_LOOPBACK) |
	    ADDRCHECK_BIT(ADDR_CLASS_PRIVATE), small, sizeof(small));
	assert_string_equal(small, "private");
	addrcheck_classes_str(0, small, sizeof(small));
	assert_string_equal(small, "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_special_dropped),
		cmocka_unit_test(test_public_kept),
		cmocka_unit_test(test_mixed_keeps_only_public_in_order),
		cmocka_unit_test(test_override_lifts_exactly_its_cidr),
		cmocka_unit_test(test_grant_allow_address),
		cmocka_unit_test(test_never_liftable),
		cmocka_unit_test(test_empty_and_cap),
		cmocka_unit_test(test_is_self),
		cmocka_unit_test(test_hop_lists_self),
		cmocka_unit_test(test_classes_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
