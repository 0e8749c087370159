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

static int
envcheck(const char *v, enum proxyenv_kind *k, char *norm, size_t normlen)
{
	const char *err = NULL;
	int r = proxyenv_check(v, k, norm, normlen, &err);

	if (r != 0)
		assert_non_null(err);
	return r;
}

/* Proxy variables as route = system reads them: what libproxy would silently ignore (and
 * so go direct) is refused here, with a reason. */
static void
test_env_good(void **state)
{
	enum proxyenv_kind k;
	char norm[512];

	assert_int_equal(envcheck("wpad://", &k, norm, sizeof(norm)), 0);
	assert_int_equal(k, PROXYENV_WPAD);
	assert_int_equal(envcheck("WPAD://", &k, norm, sizeof(norm)), 0);
	assert_int_equal(k, PROXYENV_WPAD);
	assert_int_equal(envcheck("pac+file:///etc/proxy.pac", &k, norm, sizeof(norm)), 0);
	assert_int_equal(k, PROXYENV_PAC_FILE);
	assert_int_equal(envcheck("pac+https://pac.corp.example/p.pac", &k, norm, sizeof(norm)), 0);
	assert_int_equal(k, PROXYENV_PAC_URL);
	assert_int_equal(envcheck("http://proxy.corp.example:3128", &k, norm, sizeof(norm)), 0);
	assert_int_equal(k, PROXYENV_PROXY);
	assert_string_equal(norm, "http://proxy.corp.example:3128");
	assert_int_equal(envcheck("http://u:p@proxy.corp.example:3128/", &k, norm, sizeof(norm)), 0);
	assert_int_equal(envcheck("direct://", &k, norm, sizeof(norm)), 0);
	assert_int_equal(envcheck("socks5://10.1.2.3:1080", &k, norm, sizeof(norm)), 0);
	/* no scheme: read as curl reads it, handed to libproxy with http:// */
	assert_int_equal(envcheck("proxy.corp.example:3128", &k, norm, sizeof(norm)), 0);
	assert_int_equal(k, PROXYENV_PROXY);
	assert_string_equal(norm, "http://proxy.corp.example:3128");
	assert_int_equal(envcheck("198.51.100.7:8080", &k, norm, sizeof(norm)), 0);
	assert_string_equal(norm, "http://198.51.100.7:8080");
}

static void
test_env_bad(void **state)
{
	enum proxyenv_kind k;
	char norm[512], big[2048];
	static const char *bad[] = {
		" wpad://", "wpad:// ", "\twpad://", "http://proxy:3128 ", " http://proxy:3128",
		"htp:/x", ":3128", "proxy", "proxy:", "proxy:0", "proxy:99999", "http://",
		"ftp://proxy:21", "socks4://proxy:1080", "pac+", "pac+file://relative.pac",
		"pac+ftp://x/p.pac", "pac+http://", "http://proxy/path", "http://pro xy:80",
		"proxy:3128/", "http://proxy:3128\n", "wpad://\r", "[2001:db8::1]",
		"PROXY proxy:3128", "//proxy:3128",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (envcheck(bad[i], &k, norm, sizeof(norm)) == 0)
			fail_msg("accepted: \"%s\"", bad[i]);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "http://", 7);
	assert_int_equal(envcheck(big, &k, norm, sizeof(norm)), -1);
	assert_int_equal(envcheck("", &k, norm, sizeof(norm)), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_userinfo_stripped),
		cmocka_unit_test(test_bad),
		cmocka_unit_test(test_env_good),
		cmocka_unit_test(test_env_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
