/*
 * test_grant - the grant model and its JSON form (common/grant): strict parsing (unknown
 * keys, types, limits), round trip, and the allow / credential checks with negative twins.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/grant.h"

static struct grant *
G(const char *text)
{
	json_error_t jerr;
	json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	char err[256];
	struct grant *g;

	if (o == NULL)
		fail_msg("bad test JSON: %s", jerr.text);
	g = grant_from_json(o, err, sizeof(err));
	json_decref(o);
	if (g == NULL)
		fail_msg("grant_from_json(%s): %s", text, err);
	return g;
}

/* Expect a refusal whose message contains want. */
static void
refused(const char *text, const char *want)
{
	json_error_t jerr;
	json_t *o = json_loads(text, JSON_ALLOW_NUL, &jerr);
	char err[256] = "unset";
	struct grant *g;

	if (o == NULL)
		fail_msg("bad test JSON: %s: %s", text, jerr.text);
	g = grant_from_json(o, err, sizeof(err));
	json_decref(o);
	if (g != NULL) {
		grant_free(g);
		fail_msg("accepted: %s", text);
	}
	if (strstr(err, want) == NULL)
		fail_msg("%s: error \"%s\" does not mention \"%s\"", text, err, want);
}

static struct host
H(const char *s)
{
	struct host h;

	if (host_parse(s, strlen(s), HOST_NO_PORT, &h) != HOST_OK)
		fail_msg("host_parse(%s)", s);
	return h;
}

static void
test_principal(void **state)
{
	char s65[66];

	(void)state;
	assert_true(grant_principal_valid("run-1a2b"));
	assert_true(grant_principal_valid("A.b_c-9"));
	assert_true(grant_principal_valid("..."));
	memset(s65, 'a', 64);
	s65[64] = '\0';
	assert_true(grant_principal_valid(s65));
	s65[64] = 'a';
	s65[65] = '\0';
	assert_false(grant_principal_valid(s65));
	assert_false(grant_principal_valid(""));
	assert_false(grant_principal_valid(NULL));
	assert_false(grant_principal_valid("."));
	assert_false(grant_principal_valid(".."));
	assert_false(grant_principal_valid("a/b"));
	assert_false(grant_principal_valid("a b"));
	assert_false(grant_principal_valid("a\nb"));
	assert_false(grant_principal_valid("r\xc3\xbcn"));
	assert_false(grant_principal_valid("a:b"));
}

static void
test_parse_full(void **state)
{
	struct grant *g = G("{\"principal\": \"run-1a2b\","
	    " \"allow\": [\"https://api.example.com\", \"tcp://git.example.com:22\","
	    " \"http://*.example.org\", \"https://198.51.100.7:8443\"],"
	    " \"allow_address\": [\"198.51.100.0/24\", \"2001:db8::/32\"],"
	    " \"pinning\": \"required\","
	    " \"credential_origin\": [\"https://api.example.com\"],"
	    " \"limits\": {\"connections\": 8, \"bytes\": 1073741824, \"lifetime_s\": 3600}}");

	(void)state;
	assert_string_equal(g->principal, "run-1a2b");
	assert_int_equal(g->nallow, 4);
	assert_int_equal(g->allow_address.n, 2);
	assert_int_equal(g->pinning, PINNING_REQUIRED);
	assert_int_equal(g->ncredential_origin, 1);
	assert_int_equal(g->max_connections, 8);
	assert_int_equal(g->max_bytes, 1073741824ULL);
	assert_int_equal(g->lifetime_s, 3600);
	grant_free(g);
}

static void
test_defaults(void **state)
{
	struct grant *g = G("{\"principal\": \"p\", \"allow\": []}");

	(void)state;
	assert_int_equal(g->nallow, 0);
	assert_int_equal(g->allow_address.n, 0);
	assert_int_equal(g->pinning, PINNING_PREFERRED);
	assert_int_equal(g->ncredential_origin, 0);
	assert_int_equal(g->max_connections, GRANT_DEFAULT_CONNECTIONS);
	assert_int_equal(g->max_bytes, 0);
	assert_int_equal(g->lifetime_s, 0);
	/* an empty grant allows nothing */
	struct host h = H("api.example.com");
	assert_false(grant_allows(g, SCHEME_HTTPS, &h, 443, NULL));
	grant_free(g);

	g = G("{\"principal\": \"p\", \"allow\": [], \"limits\": {}}");
	assert_int_equal(g->max_connections, GRANT_DEFAULT_CONNECTIONS);
	grant_free(g);
}

static void
test_refusals(void **state)
{
	(void)state;
	refused("[]", "object");
	refused("{}", "principal: missing");
	refused("{\"principal\": \"p\"}", "allow: missing");
	refused("{\"allow\": []}", "principal: missing");
	refused("{\"principal\": \"p\", \"allow\": [], \"alow\": []}", "unknown key \"alow\"");
	refused("{\"principal\": \"p\", \"allow\": [], \"grant_id\": \"x\"}", "unknown key");
	refused("{\"principal\": \"\", \"allow\": []}", "principal");
	refused("{\"principal\": \"..\", \"allow\": []}", "principal");
	refused("{\"principal\": \"a/b\", \"allow\": []}", "principal");
	refused("{\"principal\": 7, \"allow\": []}", "principal");
	refused("{\"principal\": \"a\\u0000b\", \"allow\": []}", "principal");
	refused("{\"principal\": \"p\", \"allow\": \"https://api.example.com\"}", "allow: must");
	refused("{\"principal\": \"p\", \"allow\": [1]}", "allow[0]");
	refused("{\"principal\": \"p\", \"allow\": [\"https://api.example.com\\u0000.evil\"]}",
	    "allow[0]");
	refused("{\"principal\": \"p\", \"allow\": [\"https://ok.example\", \"https://*.com\"]}",
	    "allow[1]: a wildcard over");
	refused("{\"principal\": \"p\", \"allow\": [\"tcp://git.example.com\"]}", "allow[0]");
	refused("{\"principal\": \"p\", \"allow\": [\"https://u@example.com\"]}", "allow[0]");
	refused("{\"principal\": \"p\", \"allow\": [\"https://127.1\"]}", "allow[0]");
	refused("{\"principal\": \"p\", \"allow\": [], \"allow_address\": \"10.0.0.0/8\"}",
	    "allow_address");
	refused("{\"principal\": \"p\", \"allow\": [], \"allow_address\": [\"10.0.0.1/8\"]}",
	    "allow_address[0]");
	refused("{\"principal\": \"p\", \"allow\": [], \"allow_address\": [\"010.0.0.0/8\"]}",
	    "allow_address[0]");
	refused("{\"principal\": \"p\", \"allow\": [], \"allow_address\": [null]}",
	    "allow_address[0]");
	refused("{\"principal\": \"p\", \"allow\": [], \"pinning\": \"always\"}", "pinning");
	refused("{\"principal\": \"p\", \"allow\": [], \"pinning\": true}", "pinning");
	refused("{\"principal\": \"p\", \"allow\": [], \"credential_origin\": "
	    "[\"tcp://git.example.com:22\"]}", "credential_origin[0]");
	refused("{\"principal\": \"p\", \"allow\": [], \"credential_origin\": [\"x\"]}",
	    "credential_origin[0]");
	refused("{\"principal\": \"p\", \"allow\": [], \"limits\": []}", "limits");
	refused("{\"principal\": \"p\", \"allow\": [], \"limits\": {\"conections\": 1}}",
	    "limits: unknown key");
	refused("{\"principal\": \"p\", \"allow\": [], \"limits\": {\"connections\": 0}}",
	    "limits.connections");
	refused("{\"principal\": \"p\", \"allow\": [], \"limits\": {\"connections\": -1}}",
	    "limits.connections");
	refused("{\"principal\": \"p\", \"allow\": [], \"limits\": {\"connections\": 4097}}",
	    "limits.connections");
	refused("{\"principal\": \"p\", \"allow\": [], \"limits\": {\"connections\": 1.5}}",
	    "limits.connections");
	refused("{\"principal\": \"p\", \"allow\": [], \"limits\": {\"connections\": \"8\"}}",
	    "limits.connections");
	refused("{\"principal\": \"p\", \"allow\": [], \"limits\": {\"bytes\": -1}}",
	    "limits.bytes");
	refused("{\"principal\": \"p\", \"allow\": [], \"limits\": {\"lifetime_s\": -1}}",
	    "limits.lifetime_s");
	refused("{\"principal\": \"p\", \"allow\": [], \"limits\": {\"lifetime_s\": 2592001}}",
	    "limits.lifetime_s");
	refused("{\"principal\": \"p\", \"allow\": [], \"limits\": {\"lifetime_s\": true}}",
	    "limits.lifetime_s");
}

static void
test_entry_limits(void **state)
{
	json_t *o = json_pack("{s:s, s:[]}", "principal", "p", "allow");
	json_t *arr = json_object_get(o, "allow");
	char err[256];
	struct grant *g;

	(void)state;
	for (int i = 0; i < EGRESS_GRANT_ENTRIES_MAX; i++) {
		char buf[64];
		snprintf(buf, sizeof(buf), "https://h%d.example.com", i);
		json_array_append_new(arr, json_string(buf));
	}
	g = grant_from_json(o, err, sizeof(err));
	assert_non_null(g);
	assert_int_equal(g->nallow, EGRESS_GRANT_ENTRIES_MAX);
	grant_free(g);
	json_array_append_new(arr, json_string("https://one-more.example.com"));
	assert_null(grant_from_json(o, err, sizeof(err)));
	assert_non_null(strstr(err, "more than"));
	json_decref(o);

	o = json_pack("{s:s, s:[], s:[]}", "principal", "p", "allow", "allow_address");
	arr = json_object_get(o, "allow_address");
	for (int i = 0; i <= EGRESS_GRANT_CIDRS_MAX; i++) {
		char buf[64];
		snprintf(buf, sizeof(buf), "198.51.100.%d/32", i);
		json_array_append_new(arr, json_string(buf));
	}
	assert_null(grant_from_json(o, err, sizeof(err)));
	assert_non_null(strstr(err, "allow_address"));
	json_decref(o);
	/* NULL err buffer is tolerated */
	assert_null(grant_from_json(NULL, NULL, 0));
}

static void
test_roundtrip(void **state)
{
	const char *text = "{\"principal\": \"run-1\","
	    " \"allow\": [\"https://API.example.com:443\", \"tcp://git.example.com:22\","
	    " \"http://*.example.org:8080\", \"https://[2001:db8::1]\"],"
	    " \"allow_address\": [\"198.51.100.0/24\"],"
	    " \"pinning\": \"required\","
	    " \"credential_origin\": [\"https://api.example.com\"],"
	    " \"limits\": {\"connections\": 8, \"bytes\": 9007199254740993, \"lifetime_s\": 60}}";
	struct grant *g = G(text), *g2;
	json_t *j = grant_to_json(g), *j2;
	char err[256];

	(void)state;
	assert_non_null(j);
	assert_string_equal(json_string_value(json_array_get(json_object_get(j, "allow"), 0)),
	    "https://api.example.com");
	assert_string_equal(json_string_value(json_array_get(json_object_get(j, "allow"), 3)),
	    "https://[2001:db8::1]");
	assert_string_equal(json_string_value(json_object_get(j, "pinning")), "required");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "limits"),
	    "bytes")), 9007199254740993LL);
	g2 = grant_from_json(j, err, sizeof(err));
	assert_non_null(g2);
	j2 = grant_to_json(g2);
	assert_true(json_equal(j, j2));
	json_decref(j);
	json_decref(j2);
	grant_free(g);
	grant_free(g2);
	assert_null(grant_to_json(NULL));
}

static void
test_allows(void **state)
{
	struct grant *g = G("{\"principal\": \"p\", \"allow\": ["
	    "\"https://api.example.com\", \"tcp://git.example.com:22\","
	    "\"http://*.example.org\", \"https://198.51.100.7\"]}");
	struct host api = H("api.example.com"), git = H("git.example.com");
	struct host sub = H("www.example.org"), apex = H("example.org");
	struct host lit = H("198.51.100.7"), lit2 = H("198.51.100.8");
	struct host mapped = H("::ffff:198.51.100.7"), evil = H("api.example.com.evil.example");
	size_t e = 99;

	(void)state;
	assert_true(grant_allows(g, SCHEME_HTTPS, &api, 443, &e));
	assert_int_equal(e, 0);
	assert_false(grant_allows(g, SCHEME_HTTPS, &api, 8443, NULL));
	assert_false(grant_allows(g, SCHEME_HTTP, &api, 443, NULL));
	assert_false(grant_allows(g, SCHEME_HTTPS, &evil, 443, NULL));

	assert_true(grant_allows(g, SCHEME_HTTPS, &git, 22, &e));
	assert_int_equal(e, 1);
	assert_false(grant_allows(g, SCHEME_HTTP, &git, 22, NULL));
	assert_false(grant_allows(g, SCHEME_HTTPS, &git, 443, NULL));

	assert_true(grant_allows(g, SCHEME_HTTP, &sub, 80, &e));
	assert_int_equal(e, 2);
	assert_false(grant_allows(g, SCHEME_HTTP, &apex, 80, NULL));
	assert_false(grant_allows(g, SCHEME_HTTPS, &sub, 80, NULL));

	/* IP literal: only the entry naming that literal */
	assert_true(grant_allows(g, SCHEME_HTTPS, &lit, 443, &e));
	assert_int_equal(e, 3);
	assert_false(grant_allows(g, SCHEME_HTTPS, &lit2, 443, NULL));
	assert_false(grant_allows(g, SCHEME_HTTPS, &mapped, 443, NULL));
	assert_false(grant_allows(g, SCHEME_HTTP, &lit, 80, NULL));
	assert_false(grant_allows(NULL, SCHEME_HTTPS, &api, 443, NULL));
	assert_false(grant_allows(g, SCHEME_HTTPS, NULL, 443, NULL));
	grant_free(g);

	/* An address granted by allow_address is not a destination grant. */
	g = G("{\"principal\": \"p\", \"allow\": [\"https://api.example.com\"],"
	    " \"allow_address\": [\"198.51.100.0/24\"]}");
	assert_false(grant_allows(g, SCHEME_HTTPS, &lit, 443, NULL));
	assert_true(cidr_set_match(&g->allow_address, &lit.addr));
	grant_free(g);
}

static void
test_credentials(void **state)
{
	struct grant *g = G("{\"principal\": \"p\", \"allow\": [\"https://api.example.com\","
	    " \"https://*.example.net\", \"http://api.example.com\"],"
	    " \"credential_origin\": [\"https://api.example.com\", \"https://*.example.net\"]}");
	struct host api = H("api.example.com"), other = H("www.example.com");
	struct host net = H("a.example.net"), netapex = H("example.net");

	(void)state;
	assert_true(grant_credentials_bound(g, SCHEME_HTTPS, &api, 443));
	/* never downgraded to http, another port or another host */
	assert_false(grant_credentials_bound(g, SCHEME_HTTP, &api, 443));
	assert_false(grant_credentials_bound(g, SCHEME_HTTP, &api, 80));
	assert_false(grant_credentials_bound(g, SCHEME_HTTPS, &api, 8443));
	assert_false(grant_credentials_bound(g, SCHEME_HTTPS, &other, 443));
	assert_true(grant_credentials_bound(g, SCHEME_HTTPS, &net, 443));
	assert_false(grant_credentials_bound(g, SCHEME_HTTPS, &netapex, 443));
	assert_false(grant_credentials_bound(NULL, SCHEME_HTTPS, &api, 443));
	grant_free(g);

	g = G("{\"principal\": \"p\", \"allow\": [\"https://api.example.com\"]}");
	assert_false(grant_credentials_bound(g, SCHEME_HTTPS, &api, 443));
	grant_free(g);
	grant_free(NULL);
}

/* An https:// entry marks its destination as TLS on any port; tcp:// and http:// do not. */
static void
test_expects_tls(void **state)
{
	struct grant *g = G("{\"principal\": \"p\", \"allow\": ["
	    "\"https://api.example.com:8443\", \"tcp://raw.example.com:9443\","
	    "\"http://web.example.com:8080\", \"https://*.tls.example.com:8443\"]}");
	struct host api = H("api.example.com"), raw = H("raw.example.com");
	struct host web = H("web.example.com"), sub = H("a.tls.example.com");

	(void)state;
	assert_true(grant_expects_tls(g, &api, 8443));
	assert_true(grant_expects_tls(g, &sub, 8443));
	/* twins: another port of the same host, a tcp:// entry, an http:// entry */
	assert_false(grant_expects_tls(g, &api, 9443));
	assert_false(grant_expects_tls(g, &raw, 9443));
	assert_false(grant_expects_tls(g, &web, 8080));
	assert_false(grant_expects_tls(NULL, &api, 8443));
	grant_free(g);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_principal),
		cmocka_unit_test(test_parse_full),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_entry_limits),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_allows),
		cmocka_unit_test(test_expects_tls),
		cmocka_unit_test(test_credentials),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
