/* Unit tests for common/proxyurl: route entries from proxy URLs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/proxyurl.h"

static int
parse(const char *s, struct proxy_route *e)
{
	const char *err = NULL;
	int r = proxyurl_parse(s, strlen(s), e, &err);

	if (r != 0)
		assert_non_null(err);
	return r;
}

static void
test_good(void **state)
{
	struct proxy_route e;
	char buf[300];

	assert_int_equal(parse("direct://", &e), 0);
	assert_int_equal(e.kind, PROXY_DIRECT);
	assert_string_equal(proxyurl_to_str(&e, buf, sizeof(buf)), "direct");

	assert_int_equal(parse("http://Proxy.Corp.Example:3128", &e), 0);
	assert_int_equal(e.kind, PROXY_HTTP);
	assert_string_equal(e.proxy.name, "proxy.corp.example");
	assert_int_equal(e.proxy.port, 3128);
	assert_string_equal(proxyurl_to_str(&e, buf, sizeof(buf)), "http://proxy.corp.example:3128");

	assert_int_equal(parse("http://proxy.corp.example/", &e), 0);
	assert_int_equal(e.proxy.port, 80);
	assert_int_equal(parse("https://proxy.corp.example", &e), 0);
	assert_int_equal(e.kind, PROXY_HTTPS);
	assert_int_equal(e.proxy.port, 443);
	assert_int_equal(parse("socks://10.1.2.3:1080", &e), 0);
	assert_int_equal(e.kind, PROXY_SOCKS5);
	assert_int_equal(parse("socks5://[2001:db8::5]:1081", &e), 0);
	assert_int_equal(e.proxy.kind, HOST_IPV6);
	assert_int_equal(e.proxy.port, 1081);
}

static void
test_userinfo_stripped(void **state)
{
	struct proxy_route e;
	char buf[300];

	assert_int_equal(parse("http://alice:s3cret@proxy.corp.example:8080", &e), 0);
	assert_true(e.had_userinfo);
	proxyurl_to_str(&e, buf, sizeof(buf));
	assert_null(strstr(buf, "s3cret"));
	assert_null(strstr(buf, "alice"));
}

static void
test_bad(void **state)
{
	struct proxy_route e;
	static const char *bad[] = {
		"socks4://10.0.0.1:1080", "ftp://x:21", "http://", "http://proxy:0",
		"http://proxy:99999", "http://proxy/path", "http://proxy?q", "http://pro xy:80",
		"http://proxy:80#f", "direct", "", "http://010.0.0.1:80", "PROXY a:1",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i], &e) == 0)
			fail_msg("accepted: %s", bad[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_userinfo_stripped),
		cmocka_unit_test(test_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
