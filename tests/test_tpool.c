/* Unit tests for egressd/tpool: the synthetic address map of transparent capture. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/addr.h"
#include "common/limits.h"
#include "egressd/tpool.h"

static void
t_assign_and_lookup(void **state)
{
	struct tpool *p = tpool_new(8);
	uint32_t a1, a2, a3;
	bool fresh;

	(void)state;
	assert_non_null(p);
	assert_int_equal(tpool_assign(p, "api.example.com", &a1, &fresh), 0);
	assert_true(fresh);
	assert_int_equal(a1, 0xc6120001u);              /* 198.18.0.1: never the network */
	assert_int_equal(tpool_assign(p, "git.example.com", &a2, &fresh), 0);
	assert_true(fresh);
	assert_int_equal(a2, 0xc6120002u);
	/* the same name keeps its address */
	assert_int_equal(tpool_assign(p, "api.example.com", &a3, &fresh), 0);
	assert_false(fresh);
	assert_int_equal(a3, a1);
	assert_string_equal(tpool_lookup(p, a1), "api.example.com");
	assert_string_equal(tpool_lookup(p, a2), "git.example.com");
	assert_int_equal(tpool_count(p), 2);
	/* negative twins: unassigned, the network address, outside the pool */
	assert_null(tpool_lookup(p, 0xc6120003u));
	assert_null(tpool_lookup(p, 0xc6120000u));
	assert_null(tpool_lookup(p, 0xc6140001u));      /* 198.20.0.1 */
	assert_null(tpool_lookup(p, 0x7f000001u));
	assert_null(tpool_lookup(NULL, a1));
	tpool_free(p);
}

static void
t_contains(void **state)
{
	(void)state;
	assert_true(tpool_contains(0xc6120000u));       /* 198.18.0.0 */
	assert_true(tpool_contains(0xc613ffffu));       /* 198.19.255.255 */
	assert_false(tpool_contains(0xc611ffffu));      /* 198.17.255.255 */
	assert_false(tpool_contains(0xc6140000u));      /* 198.20.0.0 */
	assert_false(tpool_contains(0xc6336401u));      /* 198.51.100.1 */
}

/* Why the pool cannot shadow a real destination: egressd's address classes call every
 * pool address special-purpose (benchmarking), refused for ordinary hops. */
static void
t_pool_is_special(void **state)
{
	static const char *const lits[] = { "198.18.0.1", "198.18.3.255", "198.19.255.254" };
	struct addr a;
	bool emb;

	(void)state;
	for (size_t i = 0; i < sizeof(lits) / sizeof(lits[0]); i++) {
		assert_int_equal(addr_parse_literal(lits[i], strlen(lits[i]), &a), ADDR_LIT_V4);
		assert_int_equal(addr_classify(&a, &emb), ADDR_CLASS_BENCHMARKING);
	}
}

static void
t_exhausted(void **state)
{
	struct tpool *p = tpool_new(3);
	char name[32];
	uint32_t a;
	bool fresh;

	(void)state;
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "h%d.example.com", i);
		assert_int_equal(tpool_assign(p, name, &a, &fresh), 0);
	}
	errno = 0;
	assert_int_equal(tpool_assign(p, "h3.example.com", &a, &fresh), -1);
	assert_int_equal(errno, ENOSPC);
	/* a name it has still answers */
	assert_int_equal(tpool_assign(p, "h1.example.com", &a, &fresh), 0);
	assert_int_equal(a, 0xc6120002u);
	tpool_free(p);
}

static void
t_bad_input(void **state)
{
	struct tpool *p = tpool_new(2);
	char longname[EGRESS_HOSTNAME_MAX + 2];
	uint32_t a;
	bool fresh;

	(void)state;
	assert_null(tpool_new(0));
	assert_null(tpool_new(EGRESS_TPOOL_NAMES_MAX + 1));
	assert_int_equal(tpool_assign(p, "", &a, &fresh), -1);
	assert_int_equal(errno, EINVAL);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(tpool_assign(p, longname, &a, &fresh), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(tpool_count(p), 0);
	tpool_free(p);
	tpool_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_assign_and_lookup),
		cmocka_unit_test(t_contains),
		cmocka_unit_test(t_pool_is_special),
		cmocka_unit_test(t_exhausted),
		cmocka_unit_test(t_bad_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
