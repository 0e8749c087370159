/* Unit tests for executor/netcapture: the ruleset text a run installs in its link
 * namespace (the live install and the host-ruleset comparison are in
 * integration/test_transparent.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "executor/netcapture.h"

static void
t_ruleset(void **state)
{
	struct netns_link l;
	char buf[2048];
	size_t n;

	(void)state;
	memset(&l, 0, sizeof(l));
	snprintf(l.host_if, sizeof(l.host_if), "egx0a1b2c3dh");
	snprintf(l.host_addr, sizeof(l.host_addr), "169.254.7.1");
	l.net = 0xa9fe0700u;
	n = netcapture_ruleset(&l, 3128, buf, sizeof(buf));
	assert_true(n > 0 && n == strlen(buf));
	/* only the pool is redirected, only from the run's veth, only TCP, to the listener */
	assert_non_null(strstr(buf, "iifname \"egx0a1b2c3dh\" ip daddr 198.18.0.0/15 meta "
	    "l4proto tcp redirect to :3128"));
	assert_non_null(strstr(buf, "type filter hook input priority filter; policy drop;"));
	assert_non_null(strstr(buf, "ip daddr 169.254.7.1 tcp dport 3128 accept"));
	assert_non_null(strstr(buf, "ip daddr 169.254.7.1 udp dport 53 accept"));
	assert_non_null(strstr(buf, "table inet " NETCAPTURE_TABLE " {"));
	/* nothing else is accepted: the two accepts above and established/related only */
	{
		int accepts = 0;
		for (const char *p = buf; (p = strstr(p, " accept\n")) != NULL; p++)
			accepts++;
		assert_int_equal(accepts, 3);
	}
	/* too small a buffer: nothing */
	assert_int_equal(netcapture_ruleset(&l, 3128, buf, 64), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_ruleset),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
