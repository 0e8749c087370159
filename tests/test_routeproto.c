/* Unit tests for common/routeproto: egressd <-> route helper line protocol. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/routeproto.h"

static int
reply(const char *s, struct routeproto_reply *r)
{
	return routeproto_parse_reply(s, strlen(s), r);
}

static void
test_query_url_is_canonical(void **state)
{
	struct host h;
	char buf[400];

	assert_int_equal(host_parse("API.Example.COM", 15, HOST_NO_PORT, &h), HOST_OK);
	assert_true(routeproto_query_url(SCHEME_HTTPS, &h, 443, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "https://api.example.com:443/");
	assert_true(routeproto_query_url(SCHEME_TCP, &h, 22, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "https://api.example.com:22/");
	assert_true(routeproto_query_url(SCHEME_HTTP, &h, 80, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "http://api.example.com:80/");
	assert_int_equal(host_parse("[2001:db8::1]:443", 17, 0, &h), HOST_OK);
	routeproto_query_url(SCHEME_HTTPS, &h, 443, buf, sizeof(buf));
	assert_string_equal(buf, "https://[2001:db8::1]:443/");
	assert_int_equal(routeproto_query_url(SCHEME_HTTPS, &h, 443, buf, 8), 0);
}

/* The measured libproxy injection: a URL with quotes chose the attacker's proxy. The
 * query URL is built from a canonical host, which can never hold such characters. */
static void
test_injection_url_cannot_be_built(void **state)
{
	struct host h;
	const char *evil = "x.test/\",\"x\") && \"PROXY evil.test:1\"; //";

	assert_int_not_equal(host_parse(evil, strlen(evil), HOST_NO_PORT, &h), HOST_OK);
}

static void
test_request_roundtrip(void **state)
{
	char line[300], url[300];
	uint64_t id;
	size_t n = routeproto_format_request(42, "https://a.example:443/", line, sizeof(line));

	assert_true(n > 0);
	assert_int_equal(line[n - 1], '\n');
	assert_int_equal(routeproto_parse_request(line, n - 1, &id, url, sizeof(url)), 0);
	assert_int_equal(id, 42);
	assert_string_equal(url, "https://a.example:443/");
	assert_int_equal(routeproto_parse_request("42 a b", 6, &id, url, sizeof(url)), -1);
	assert_int_equal(routeproto_parse_request("x a", 3, &id, url, sizeof(url)), -1);
	assert_int_equal(routeproto_parse_request("0 a", 3, &id, url, sizeof(url)), -1);
	assert_int_equal(routeproto_parse_request("5 ", 2, &id, url, sizeof(url)), -1);
	assert_int_equal(routeproto_parse_request("5 a\x01", 4, &id, url, sizeof(url)), -1);
}

static void
test_format_reply(void **state)
{
	char buf[600];
	char *ok[] = { "http://u:secret@proxy.corp:3128", "socks://10.0.0.9:1080", "direct://", NULL };
	char *bad[] = { "http://proxy.corp:3128", "PROXY evil", NULL };
	char *empty[] = { NULL };

	assert_true(routeproto_format_reply(7, ok, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "7 OK http://proxy.corp:3128 socks5://10.0.0.9:1080 direct://\n");
	assert_null(strstr(buf, "secret"));
	assert_true(routeproto_format_reply(8, bad, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "8 ERR bad_answer\n");
	routeproto_format_reply(9, NULL, buf, sizeof(buf));
	assert_string_equal(buf, "9 ERR pac_error\n");
	routeproto_format_reply(10, empty, buf, sizeof(buf));
	assert_string_equal(buf, "10 ERR pac_error\n");
}

static void
test_parse_reply(void **state)
{
	struct routeproto_reply r;

	assert_int_equal(reply("3 OK http://proxy.corp:3128 direct://", &r), 0);
	assert_true(r.ok);
	assert_int_equal(r.id, 3);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.entries[0].kind, PROXY_HTTP);
	assert_int_equal(r.entries[0].proxy.port, 3128);
	assert_int_equal(r.entries[1].kind, PROXY_DIRECT);

	assert_int_equal(reply("4 ERR pac_error", &r), 0);
	assert_false(r.ok);
	assert_string_equal(r.err, "pac_error");

	/* hostile replies: each is malformed as a whole */
	static const char *bad[] = {
		"3 OK", "3 OK ", "3 OK  direct://", "3 OK direct:// ", "OK direct://",
		"3 OK http://u:p@proxy:1", "3 OK ftp://x:1", "3 OK http://proxy:1 garbage",
		"3 ERR ", "3 ERR Bad-Code", "3 NOPE", "-1 OK direct://", "99999999999999999999 OK direct://",
		"3 OK direct:// direct:// direct:// direct:// direct:// direct:// direct:// direct:// direct://",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (reply(bad[i], &r) == 0)
			fail_msg("accepted: %s", bad[i]);
}

/* libproxy's debug output (0.4.18, as captured by the helper) says when it set out to run
 * its own WPAD or fetch a PAC itself. */
static void
test_libproxy_discovers(void **state)
{
	static const char own[] = "pac+file:///var/lib/egressd/pac.copy";
	static const char wpad[] = "Configuration extension is: 23envvar_config_extension\n"
	    "Ignored list is: \nConfig is: \n\twpad://\nTrying to find the PAC using WPAD...\n"
	    "No PAC found...\n";
	static const char upper[] = "Config is: \n\tWPAD://\n";
	static const char pacurl[] = "Config is: \n\tPAC+http://wpad.corp.example/wpad.dat\n"
	    "Unable to download PAC!\n";
	static const char ours[] = "Config is: \n\tpac+file:///var/lib/egressd/pac.copy\n"
	    "PAC received!\nPacrunner returned: PROXY p:3128\n";
	static const char manual[] = "Config is: \n\thttp://proxy.corp.example:3128\n";
	static const char none[] = "Config is: \n";
	/* a PAC's answer printed after the configuration cannot forge a config line */
	static const char forged[] = "Config is: \n\tpac+file:///var/lib/egressd/pac.copy\n"
	    "Pacrunner returned: DIRECT\n\twpad://\nConfig is: \n\twpad://\n";
	static const char other_copy[] = "Config is: \n\tpac+file:///tmp/evil.pac\n";

	(void)state;
	assert_int_equal(routeproto_libproxy_discovers(wpad, sizeof(wpad) - 1, own), 1);
	assert_int_equal(routeproto_libproxy_discovers(upper, sizeof(upper) - 1, NULL), 1);
	assert_int_equal(routeproto_libproxy_discovers(pacurl, sizeof(pacurl) - 1, own), 1);
	assert_int_equal(routeproto_libproxy_discovers(other_copy, sizeof(other_copy) - 1, own),
	    1);
	/* twins: egressd's own copy, a manual proxy, no configuration, no output */
	assert_int_equal(routeproto_libproxy_discovers(ours, sizeof(ours) - 1, own), 0);
	assert_int_equal(routeproto_libproxy_discovers(manual, sizeof(manual) - 1, own), 0);
	assert_int_equal(routeproto_libproxy_discovers(none, sizeof(none) - 1, own), 0);
	assert_int_equal(routeproto_libproxy_discovers("", 0, own), 0);
	assert_int_equal(routeproto_libproxy_discovers(NULL, 0, own), 0);
	assert_int_equal(routeproto_libproxy_discovers(forged, sizeof(forged) - 1, own), 0);
	/* bounded by n: the marker cut short is not a marker */
	assert_int_equal(routeproto_libproxy_discovers(upper, 8, NULL), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_url_is_canonical),
		cmocka_unit_test(test_injection_url_cannot_be_built),
		cmocka_unit_test(test_request_roundtrip),
		cmocka_unit_test(test_format_reply),
		cmocka_unit_test(test_parse_reply),
		cmocka_unit_test(test_libproxy_discovers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
