/*
 * test_netns - the veth address pool (parse, reserved ranges, free-pair choice) and the
 * other pure helpers of the sandbox runner: repository-relative paths, overlay option
 * paths, grant ids, embedded egressd settings, init's status mapping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "executor/egressd_client.h"
#include "executor/init.h"
#include "executor/mounts.h"
#include "executor/netns.h"

#define IP(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (d))

static void
test_pool_parse(void **state)
{
	struct netns_pool p;

	(void)state;
	assert_int_equal(netns_pool_parse("169.254.0.0/16", &p), 0);
	assert_int_equal(p.base, IP(169, 254, 0, 0));
	assert_int_equal(p.prefix, 16);
	assert_int_equal(netns_pool_parse("10.9.8.0/30", &p), 0);
	/* negative twins: misaligned, out of range, junk */
	assert_int_equal(netns_pool_parse("169.254.0.1/16", &p), -1);
	assert_int_equal(netns_pool_parse("169.254.0.0/31", &p), -1);
	assert_int_equal(netns_pool_parse("169.254.0.0/7", &p), -1);
	assert_int_equal(netns_pool_parse("169.254.0.0", &p), -1);
	assert_int_equal(netns_pool_parse("169.254.0.0/16x", &p), -1);
	assert_int_equal(netns_pool_parse("169.254.0.0/+16", &p), -1);
	assert_int_equal(netns_pool_parse("1.2.3/16", &p), -1);
	assert_int_equal(netns_pool_parse("", &p), -1);
	assert_int_equal(netns_pool_parse(NULL, &p), -1);
}

static void
test_pair_allowed(void **state)
{
	(void)state;
	assert_true(netns_pair_allowed(IP(169, 254, 1, 0)));
	assert_true(netns_pair_allowed(IP(169, 254, 168, 252)));
	assert_true(netns_pair_allowed(IP(169, 254, 170, 0)));
	/* metadata /24 and the RFC 3927 reserved /24s are never used */
	assert_false(netns_pair_allowed(IP(169, 254, 169, 252)));
	assert_false(netns_pair_allowed(IP(169, 254, 169, 0)));
	assert_false(netns_pair_allowed(IP(169, 254, 0, 4)));
	assert_false(netns_pair_allowed(IP(169, 254, 255, 0)));
	/* not /30-aligned */
	assert_false(netns_pair_allowed(IP(169, 254, 1, 2)));
}

static void
test_pick_pair(void **state)
{
	struct netns_pool p;
	uint32_t net, used[4];

	(void)state;
	assert_int_equal(netns_pool_parse("169.254.0.0/16", &p), 0);
	/* every seed lands in the pool, aligned, outside the reserved ranges */
	for (uint32_t seed = 0; seed < 70000; seed += 997) {
		assert_int_equal(netns_pick_pair(&p, NULL, 0, seed, &net), 0);
		assert_int_equal(net & 3u, 0);
		assert_int_equal(net >> 16, 0xa9fe);
		assert_true(netns_pair_allowed(net));
	}
	/* a seed pointing into 169.254.169.0/24 skips past it */
	assert_int_equal(netns_pick_pair(&p, NULL, 0, (169u * 256) / 4, &net), 0);
	assert_int_equal(net, IP(169, 254, 170, 0));
	/* a used address takes its whole /30 */
	used[0] = IP(169, 254, 5, 2);
	assert_int_equal(netns_pick_pair(&p, used, 1, (5u * 256) / 4, &net), 0);
	assert_int_equal(net, IP(169, 254, 5, 4));
	/* a one-pair pool: free, then exhausted */
	assert_int_equal(netns_pool_parse("169.254.200.4/30", &p), 0);
	assert_int_equal(netns_pick_pair(&p, NULL, 0, 12345, &net), 0);
	assert_int_equal(net, IP(169, 254, 200, 4));
	used[0] = IP(169, 254, 200, 5);
	assert_int_equal(netns_pick_pair(&p, used, 1, 0, &net), -1);
	/* a pool entirely inside the metadata range is exhausted from the start */
	assert_int_equal(netns_pool_parse("169.254.169.0/24", &p), 0);
	assert_int_equal(netns_pick_pair(&p, NULL, 0, 7, &net), -1);
	/* other pools work the same way */
	assert_int_equal(netns_pool_parse("10.200.0.0/29", &p), 0);
	used[0] = IP(10, 200, 0, 1);
	assert_int_equal(netns_pick_pair(&p, used, 1, 0, &net), 0);
	assert_int_equal(net, IP(10, 200, 0, 4));
}

static void
test_relpath(void **state)
{
	(void)state;
	assert_true(mounts_relpath_ok("secrets"));
	assert_true(mounts_relpath_ok("a/b/c.txt"));
	assert_true(mounts_relpath_ok(".env"));
	assert_true(mounts_relpath_ok("a/..b"));
	assert_false(mounts_relpath_ok(""));
	assert_false(mounts_relpath_ok(NULL));
	assert_false(mounts_relpath_ok("/etc/passwd"));
	assert_false(mounts_relpath_ok(".."));
	assert_false(mounts_relpath_ok("a/../b"));
	assert_false(mounts_relpath_ok("a/./b"));
	assert_false(mounts_relpath_ok("."));
	assert_false(mounts_relpath_ok("a//b"));
	assert_false(mounts_relpath_ok("a/"));
	assert_false(mounts_relpath_ok("a/.."));
}

static void
test_workdir(void **state)
{
	(void)state;
	assert_true(mounts_workdir_ok("/work"));
	assert_true(mounts_workdir_ok("/src/project"));
	assert_true(mounts_workdir_ok("/usrx"));
	assert_false(mounts_workdir_ok("/usr"));
	assert_false(mounts_workdir_ok("/usr/src/x"));
	assert_false(mounts_workdir_ok("/etc"));
	assert_false(mounts_workdir_ok("/proc/x"));
	assert_false(mounts_workdir_ok("/tmp"));
	assert_false(mounts_workdir_ok("/lib64"));
	assert_false(mounts_workdir_ok("/"));
	assert_false(mounts_workdir_ok("work"));
	assert_false(mounts_workdir_ok("/work/../etc"));
	assert_false(mounts_workdir_ok(NULL));
}

static void
test_option_path(void **state)
{
	(void)state;
	assert_true(mounts_option_path_ok("/tmp/repo"));
	assert_false(mounts_option_path_ok("tmp/repo"));
	assert_false(mounts_option_path_ok("/tmp/a,upperdir=/x"));
	assert_false(mounts_option_path_ok("/tmp/a:b"));
	assert_false(mounts_option_path_ok("/tmp/a\\b"));
	assert_false(mounts_option_path_ok("/tmp/a\nb"));
	assert_false(mounts_option_path_ok(NULL));
}

static void
test_denied_paths_listed(void **state)
{
	static const char *const must[] = { "/root", "/home", "/etc/shadow", "/etc/gshadow",
		"/var/run/docker.sock", "/run/docker.sock", "/run/containerd", "/root/.ssh",
		"/root/.gnupg", "/root/.aws", "/root/.config/gcloud", "/root/.azure",
		"/root/.docker", "/root/.kube" };

	(void)state;
	for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++) {
		bool found = false;
		for (size_t j = 0; mounts_denied_paths[j] && !found; j++)
			found = strcmp(mounts_denied_paths[j], must[i]) == 0;
		assert_true(found);
	}
}

static void
test_grant_id(void **state)
{
	(void)state;
	assert_true(egressd_grant_id_valid("0123456789abcdef0123456789abcdef"));
	assert_false(egressd_grant_id_valid("0123456789ABCDEF0123456789abcdef"));
	assert_false(egressd_grant_id_valid("0123456789abcdef0123456789abcde"));
	assert_false(egressd_grant_id_valid("0123456789abcdef0123456789abcdef0"));
	assert_false(egressd_grant_id_valid("0123456789abcdef0123456789abcdeg"));
	assert_false(egressd_grant_id_valid("../../../../etc/passwd"));
	assert_false(egressd_grant_id_valid(""));
	assert_false(egressd_grant_id_valid(NULL));
}

static void
test_setting(void **state)
{
	(void)state;
	assert_true(egressd_setting_valid("dns_server=198.51.100.53"));
	assert_true(egressd_setting_valid("allow_special_address=198.51.100.0/24"));
	assert_false(egressd_setting_valid("dns_server"));
	assert_false(egressd_setting_valid("=x"));
	assert_false(egressd_setting_valid("Dns=x"));
	assert_false(egressd_setting_valid("[listener x]=y"));
	assert_false(egressd_setting_valid("dns_server=1.2.3.4\n[listener evil]"));
	assert_false(egressd_setting_valid("k=v\r"));
	assert_false(egressd_setting_valid(NULL));
}

static void
test_init_status(void **state)
{
	(void)state;
	assert_int_equal(init_status_code(0), 0);
	assert_int_equal(init_status_code(7 << 8), 7);
	assert_int_equal(init_status_code(SIGKILL), 128 + SIGKILL);
	assert_int_equal(init_status_code(SIGTERM), 128 + SIGTERM);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_parse),
		cmocka_unit_test(test_pair_allowed),
		cmocka_unit_test(test_pick_pair),
		cmocka_unit_test(test_relpath),
		cmocka_unit_test(test_workdir),
		cmocka_unit_test(test_option_path),
		cmocka_unit_test(test_denied_paths_listed),
		cmocka_unit_test(test_grant_id),
		cmocka_unit_test(test_setting),
		cmocka_unit_test(test_init_status),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
