/* test_config.c - egressd.ini schema, defaults, static listeners and grants (egressd/config). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <netinet/in.h>

#include "egressd/config.h"

static char err[1024];

static struct egressd_config *
load(const char *text)
{
	err[0] = '\0';
	return config_load_string("t.ini", text, strlen(text), err, sizeof(err));
}

static void
expect_error(const char *text, const char *needle)
{
	struct egressd_config *c = load(text);
	if (c != NULL) {
		config_free(c);
		fail_msg("expected an error containing '%s' for:\n%s", needle, text);
	}
	if (strstr(err, needle) == NULL)
		fail_msg("error '%s' does not contain '%s'", err, needle);
}

static void
test_defaults(void **st)
{
	struct egressd_config *c = load("[egressd]\n");

	assert_non_null(c);
	assert_string_equal(c->control_socket, EGRESS_CONTROL_SOCKET_DEFAULT);
	assert_string_equal(c->decision_log, EGRESS_DECISION_LOG_DEFAULT);
	assert_int_equal(c->log_sync, DLOG_SYNC_BATCH);
	assert_int_equal(c->connect_timeout_ms, 10000);
	assert_int_equal(c->header_timeout_ms, 10000);
	assert_int_equal(c->idle_timeout_ms, 300000);
	assert_int_equal(c->drain_timeout_ms, 30000);
	assert_int_equal(c->max_connections, 4096);
	assert_int_equal(c->dns_attempts, 2);
	assert_int_equal(c->ndns_servers, 0);
	assert_int_equal(c->allow_special.n, 0);
	assert_false(c->has_metrics);
	assert_int_equal(c->route.kind, ROUTE_KIND_DIRECT);
	assert_true(c->route.allow_direct);
	assert_string_equal(c->route.pac_copy, "/var/log/egressd/egressd-pac.js");
	assert_true(c->splice);
	assert_int_equal(c->nlisteners, 0);
	assert_null(c->user);   /* the default account is chosen by main (NSS) */
	config_free(c);
}

/* [egressd] user: only its shape is checked here (the account by main and -t). */
static void
test_user_key(void **st)
{
	struct egressd_config *c = load("[egressd]\n\nuser = egressd\n");

	assert_non_null(c);
	assert_string_equal(c->user, "egressd");
	assert_int_equal(c->user_line, 3);
	config_free(c);
	c = load("[egressd]\nuser = 65534\n");
	assert_non_null(c);
	assert_string_equal(c->user, "65534");
	config_free(c);
	/* negative twins: empty, spaces, option-like, path-like, too long */
	expect_error("[egressd]\nuser =\n", "t.ini:2: user:");
	expect_error("[egressd]\nuser = bad user\n", "t.ini:2: user:");
	expect_error("[egressd]\nuser = -u\n", "t.ini:2: user:");
	expect_error("[egressd]\nuser = ../root\n", "t.ini:2: user:");
	expect_error("[egressd]\nuser = "
	    "a123456789012345678901234567890123456789012345678901234567890123\n",
	    "t.ini:2: user:");
	assert_true(config_user_valid("nobody"));
	assert_true(config_user_valid("svc_egress-1.x"));
	assert_false(config_user_valid(NULL));
	assert_false(config_user_valid(""));
	assert_false(config_user_valid("a:b"));
}

static void
test_full(void **st)
{
	struct egressd_config *c = load(
	    "[egressd]\n"
	    "control_socket = none\n"
	    "decision_log = /tmp/x.jsonl\n"
	    "log_sync = always\n"
	    "connect_timeout = 1500ms\n"
	    "header_timeout = 3s\n"
	    "idle_timeout = 2m\n"
	    "tunnel_max_lifetime = 1h\n"
	    "drain_timeout = 5\n"
	    "max_connections = 10\n"
	    "max_dns_pending = 3\n"
	    "dns_server = 127.0.0.1:5353\n"
	    "dns_server = [::1]:53\n"
	    "dns_server = 198.51.100.53\n"
	    "dns_timeout = 500ms\n"
	    "dns_attempts = 1\n"
	    "allow_special_address = 198.51.100.0/24\n"
	    "allow_special_address = 2001:db8::/32\n"
	    "metrics_listen = 127.0.0.1:9464\n"
	    "route = direct\n"
	    "splice = off\n"
	    "[listener a]\nlisten = 127.0.0.1:3128\ngrant = g1\n"
	    "[listener b]\nlisten = [::1]:3128\ngrant = g1\n"
	    "[grant g1]\n"
	    "allow = https://api.example.com\n"
	    "allow = tcp://git.example.org:22\n"
	    "allow_address = 10.1.0.0/16\n"
	    "pinning = required\n"
	    "credential_origin = https://api.example.com\n"
	    "connections = 5\n"
	    "bytes = 1M\n"
	    "lifetime = 1h\n");

	assert_non_null(c);
	assert_null(c->control_socket);
	assert_string_equal(c->decision_log, "/tmp/x.jsonl");
	assert_int_equal(c->log_sync, DLOG_SYNC_ALWAYS);
	assert_int_equal(c->connect_timeout_ms, 1500);
	assert_int_equal(c->header_timeout_ms, 3000);
	assert_int_equal(c->idle_timeout_ms, 120000);
	assert_int_equal(c->tunnel_max_lifetime_ms, 3600000);
	assert_int_equal(c->drain_timeout_ms, 5000);
	assert_int_equal(c->max_connections, 10);
	assert_int_equal(c->max_dns_pending, 3);
	assert_int_equal(c->ndns_servers, 3);
	assert_int_equal(c->dns_timeout_ms, 500);
	assert_int_equal(c->dns_attempts, 1);
	assert_int_equal(c->allow_special.n, 2);
	assert_true(c->has_metrics);
	assert_false(c->splice);
	assert_int_equal(c->nlisteners, 2);
	assert_string_equal(c->listeners[0].grant_name, "g1");
	assert_int_equal(c->listeners[0].addr.ss_family, AF_INET);
	assert_int_equal(c->listeners[1].addr.ss_family, AF_INET6);
	assert_int_equal(c->ngrants, 1);
	const struct config_grant *g = config_find_grant(c, "g1");
	assert_non_null(g);
	assert_string_equal(g->grant->principal, "g1");
	assert_int_equal(g->grant->nallow, 2);
	assert_int_equal(g->grant->pinning, PINNING_REQUIRED);
	assert_int_equal(g->grant->max_connections, 5);
	assert_int_equal(g->grant->max_bytes, 1024 * 1024);
	assert_int_equal(g->grant->lifetime_s, 3600);
	assert_null(config_find_grant(c, "nope"));
	config_free(c);
}

static void
test_errors(void **st)
{
	expect_error("[egressd]\nbogus = 1\n", "t.ini:2");
	expect_error("[nosuch]\n", "t.ini");
	expect_error("[egressd]\nlog_sync = sometimes\n", "t.ini:2: log_sync");
	expect_error("[egressd]\nconnect_timeout = soon\n", "t.ini:2");
	expect_error("[egressd]\nconnect_timeout = 0\n", "must be greater than zero");
	expect_error("[egressd]\nmax_connections = 0\n", "t.ini:2");
	expect_error("[egressd]\ndns_server = resolver.example\n", "dns_server");
	expect_error("[egressd]\nallow_special_address = 10.0.0.1/8\n", "t.ini:2: allow_special");
	expect_error("[egressd]\nmetrics_listen = 198.51.100.1:9464\n", "loopback");
	expect_error("[egressd]\nmetrics_listen = localhost:9464\n", "metrics_listen");
	expect_error("[egressd]\nroute = pac\n", "route");
	expect_error("[egressd]\nsplice = maybe\n", "splice");
	expect_error("[egressd]\ncontrol_socket = relative.sock\n", "control_socket");
	expect_error("[egressd]\ndecision_log = relative.jsonl\n", "decision_log");
	/* listeners */
	expect_error("[listener a]\nlisten = 127.0.0.1:3128\ngrant = missing\n", "no [grant missing]");
	expect_error("[listener a]\nlisten = localhost:3128\ngrant = g\n[grant g]\n"
	    "allow = https://a.example\n", "IP literal");
	expect_error("[listener a]\nlisten = 127.0.0.1\ngrant = g\n[grant g]\n"
	    "allow = https://a.example\n", "listen");
	expect_error("[listener a]\nlisten = 127.0.0.1:3128\ngrant = g\n"
	    "[listener b]\nlisten = 127.0.0.1:3128\ngrant = g\n[grant g]\n"
	    "allow = https://a.example\n", "already used");
	expect_error("[listener a]\ngrant = g\n[grant g]\nallow = https://a.example\n", "listen");
	/* grants */
	expect_error("[grant g]\nallow = https://*.com\n", "[grant g]");
	expect_error("[grant g]\nallow = ftp://a.example\n", "[grant g]");
	expect_error("[grant g]\nallow = https://a.example\npinning = sometimes\n", "[grant g]");
	expect_error("[grant g]\nallow = https://a.example\nconnections = 0\n", "connections");
	expect_error("[grant g]\nallow = https://a.example\nbytes = lots\n", "bytes");
	expect_error("[grant g]\nallow = https://a.example\nunknown = 1\n", "t.ini:3");
	expect_error("[grant bad/label]\nallow = https://a.example\n", "principal");
	expect_error("[grant g]\nallow = https://a.example\n[grant g]\nallow = https://b.example\n",
	    "duplicate section");
}

/* Every problem of a file is reported, each with file:line, in file order (docs/egressd.md;
 * two errors once came out line 4 first, then line 2, some with no line at all). */
static void
test_errors_all_in_file_order(void **st)
{
	struct egressd_config *c;
	const char *a, *b, *d, *e;

	(void)st;
	c = load("[egressd]\n"
	    "dns_timeout = 0\n"                         /* 2 */
	    "decision_log = relative.jsonl\n"           /* 3 */
	    "log_max_bytes = 100\n"                     /* 4 */
	    "route_timeout = 0\n"                       /* 5 */
	    "[grant g]\n"
	    "allow = https://*.com\n"                   /* 7 */
	    "[listener l]\n"
	    "listen = localhost:1\n"                    /* 9 */
	    "grant = g\n");
	assert_null(c);
	a = strstr(err, "t.ini:2: dns_timeout: must be greater than zero");
	b = strstr(err, "t.ini:3: decision_log");
	d = strstr(err, "t.ini:4: log_max_bytes");
	e = strstr(err, "t.ini:5: route_timeout: must be greater than zero");
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(d);
	assert_non_null(e);
	assert_true(a == err && a < b && b < d && d < e);
	a = strstr(err, "t.ini:7: [grant g]");
	b = strstr(err, "t.ini:9: [listener l] listen");
	assert_non_null(a);
	assert_non_null(b);
	assert_true(e < a && a < b);
	/* a listener of a grant that had its own error is not reported twice */
	assert_null(strstr(err, "no [grant g]"));
	/* each problem on its own line */
	assert_int_equal(strchr(err, '\n') - err, (long)strlen("t.ini:2: dns_timeout: must be "
	    "greater than zero"));
	/* errors that used to carry no line number */
	expect_error("[egressd]\n\nlog_max_bytes = 100\n", "t.ini:3: log_max_bytes");
	expect_error("[egressd]\npac_timeout = 0\n", "t.ini:2: pac_timeout");
	expect_error("\n[grant bad/label]\nallow = https://a.example\n", "t.ini:2: [grant bad/label]");
	expect_error("[grant g]\nallow = https://a.example\n\npinning = sometimes\n",
	    "t.ini:4: [grant g]: pinning");
}

/* A grant value that is not UTF-8 is named as such, at its line (it used to fail inside
 * the JSON build, read as "out of memory", and with model_connection present touched the
 * freed grant object: a fuzz finding). */
static void
test_grant_not_utf8(void **st)
{
	(void)st;
	expect_error("[listener l]\nlisten = 127.0.0.1:3128\ngrant = build\n\n"
	    "[grant build]\nallow = https://api.e\xddxample.com\nmodel_connection = 0\n",
	    "t.ini:6: [grant build]: allow: not valid UTF-8");
	expect_error("[listener l]\nlisten = 127.0.0.1:3128\ngrant = build\n\n"
	    "[grant build]\nallow = https://api.example.com\npinning = pref\xc3\n",
	    "t.ini:7: [grant build]: pinning: not valid UTF-8");
	expect_error("[listener l]\nlisten = 127.0.0.1:3128\ngrant = build\n\n"
	    "[grant build]\nallow = https://api.example.com\nmodel_connection = x\xed\xa0\x80\n",
	    "model_connection: not valid UTF-8");
	/* the fuzzer's input itself: refused with errors, no crash (ASan) */
	static const char fz[] = "[egressd]\ncontrol_socket = /run/eg/lasssssss.eplice = off\n\n"
	    "[listener |vc]\nlisten = 490.0.0.1:3128\ngrant = b5ild\n\n[grant build]\n"
	    "allow = https://api.eFindProxy\335ForURL10M\nmodel_connection = 0\n";
	struct egressd_config *c = load(fz);
	assert_null(c);
	assert_non_null(strstr(err, "not valid UTF-8"));
}

static void
test_sockaddr(void **st)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	const char *e;

	assert_int_equal(config_parse_sockaddr("127.0.0.1:3128", false, &ss, &sl, &e), 0);
	assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 3128);
	assert_int_equal(config_parse_sockaddr("169.254.7.1:0", true, &ss, &sl, &e), 0);
	assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 0);
	assert_int_equal(config_parse_sockaddr("169.254.7.1:0", false, &ss, &sl, &e), -1);
	assert_int_equal(config_parse_sockaddr("[fe80::1]:80", false, &ss, &sl, &e), 0);
	assert_int_equal(config_parse_sockaddr("host.example:80", false, &ss, &sl, &e), -1);
	assert_int_equal(config_parse_sockaddr("127.1:80", false, &ss, &sl, &e), -1);
	assert_int_equal(config_parse_sockaddr("::1:80", false, &ss, &sl, &e), -1);
	assert_int_equal(config_parse_sockaddr("", false, &ss, &sl, &e), -1);
}

static void
test_shipped_example(void **st)
{
	char path[4096];
	const char *src = getenv("EGRESS_SOURCE_DIR");
	struct egressd_config *c;

	snprintf(path, sizeof(path), "%s/conf/egressd.ini", src != NULL ? src : EGRESS_SOURCE_DIR);
	c = config_load(path, err, sizeof(err));
	if (c == NULL)
		fail_msg("conf/egressd.ini does not load: %s", err);
	assert_int_equal(c->nlisteners, 1);
	config_free(c);
}

static void
test_route_keys(void **st)
{
	struct egressd_config *c = load(
	    "[egressd]\n"
	    "decision_log = /tmp/d/log.jsonl\n"
	    "route = pac http://pac.corp.example/proxy.pac\n"
	    "allow_direct = no\n"
	    "route_timeout = 2s\n"
	    "route_cache_ttl = 30s\n"
	    "pac_refresh = 10m\n"
	    "upstream_timeout = 7s\n"
	    "proxy_credentials = /etc/egressd/proxy-credentials.ini\n");

	assert_non_null(c);
	assert_int_equal(c->route.kind, ROUTE_KIND_PAC);
	assert_string_equal(c->route.pac, "http://pac.corp.example/proxy.pac");
	assert_false(c->route.allow_direct);
	assert_int_equal(c->route.timeout_ms, 2000);
	assert_int_equal(c->route.cache_ttl_ms, 30000);
	assert_int_equal(c->route.pac_refresh_ms, 600000);
	assert_int_equal(c->route.upstream_timeout_ms, 7000);
	assert_string_equal(c->route.credentials, "/etc/egressd/proxy-credentials.ini");
	assert_string_equal(c->route.pac_copy, "/tmp/d/egressd-pac.js");
	config_free(c);

	c = load("[egressd]\nroute = proxy socks5://10.0.0.5:1080\n");
	assert_non_null(c);
	assert_int_equal(c->route.kind, ROUTE_KIND_PROXY);
	config_free(c);
	c = load("[egressd]\nroute = system\n");
	assert_non_null(c);
	assert_int_equal(c->route.kind, ROUTE_KIND_SYSTEM);
	config_free(c);

	/* credentials never in a URL; relative paths and unknown forms refused */
	expect_error("[egressd]\nroute = proxy http://alice:pw@proxy.corp.example:3128\n",
	    "proxy_credentials");
	expect_error("[egressd]\nroute = proxy ftp://x:21\n", "route");
	expect_error("[egressd]\nroute = pac proxy.pac\n", "route");
	expect_error("[egressd]\nroute = wpad\n", "route");
	expect_error("[egressd]\nproxy_credentials = creds.ini\n", "proxy_credentials");
	expect_error("[egressd]\nroute_timeout = 0\n", "route_timeout");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_user_key),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_route_keys),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_errors_all_in_file_order),
		cmocka_unit_test(test_grant_not_utf8),
		cmocka_unit_test(test_sockaddr),
		cmocka_unit_test(test_shipped_example),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
