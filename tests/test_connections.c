/* Unit tests for egressd/connections: model connections and their root-only credentials. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tmpdir.h"
#include "common/grant.h"
#include "common/runca.h"
#include "egressd/config.h"
#include "egressd/connections.h"
#include "egressd/mitmca.h"

static struct connections *
load(const char *text, char *err, size_t errlen)
{
	return connections_load_string("conns.ini", text, strlen(text), getuid() == 0, NULL, err,
	    errlen);
}

static void
test_load_apply(void **state)
{
	char err[512], text[1024], line[256];
	const char *key = tmpdir_put("anthropic.key", "sk-ant-REAL-123\n", 0600);
	const char *key2 = tmpdir_put("other.key", "tok-XYZ\r\n", 0600);
	struct connections *c;
	const struct connection *a, *b, *d;
	struct host h;

	snprintf(text, sizeof(text),
	    "[connection anthropic]\ndestination = https://api.anthropic.example\n"
	    "credential_file = %s\ncredential_header = x-api-key\n"
	    "[connection openai]\ndestination = https://api.openai.example:8443\n"
	    "credential_file = %s\n"
	    "[connection gemini]\ndestination = https://gen.example\ncredential_file = %s\n"
	    "credential_header = X-Goog-Api-Key\nallow_method = POST\nallow_path = /v1/*\n"
	    "allow_path = /health\n"
	    "[connection plain]\ndestination = https://plain.example\n", key, key2, key2);
	c = load(text, err, sizeof(err));
	assert_non_null(c);
	assert_int_equal(c->n, 4);
	a = connections_find(c, "anthropic");
	b = connections_find(c, "openai");
	d = connections_find(c, "gemini");
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(d);
	assert_null(connections_find(c, "Anthropic"));
	assert_null(connections_find(NULL, "anthropic"));
	assert_int_equal(connections_find(c, "plain")->apply, CONN_APPLY_NONE);
	assert_null(connections_find(c, "plain")->secret);

	assert_int_equal(a->apply, CONN_APPLY_X_API_KEY);
	assert_true(connection_header_line(a, line, sizeof(line)) > 0);
	assert_string_equal(line, "x-api-key: sk-ant-REAL-123\r\n");
	assert_int_equal(connection_header_line(a, line, 10), 0);
	assert_int_equal(b->apply, CONN_APPLY_BEARER);
	assert_true(connection_header_line(b, line, sizeof(line)) > 0);
	assert_string_equal(line, "Authorization: Bearer tok-XYZ\r\n");
	assert_int_equal(d->apply, CONN_APPLY_HEADER);
	assert_string_equal(d->header, "x-goog-api-key");
	assert_true(connection_header_line(d, line, sizeof(line)) > 0);
	assert_string_equal(line, "x-goog-api-key: tok-XYZ\r\n");

	/* destinations: exact host and port; the twin on another port or host is not bound */
	assert_int_equal(host_parse("api.anthropic.example", 21, 0, &h), HOST_OK);
	assert_true(connection_covers(a, &h, 443));
	assert_false(connection_covers(a, &h, 8443));
	assert_false(connection_covers(b, &h, 443));
	assert_int_equal(host_parse("api.openai.example", 18, 0, &h), HOST_OK);
	assert_true(connection_covers(b, &h, 8443));
	assert_false(connection_covers(b, &h, 443));
	assert_int_equal(host_parse("evil.anthropic.example", 22, 0, &h), HOST_OK);
	assert_false(connection_covers(a, &h, 443));

	/* stripping: the worker's credentials of every kind, and the connection's header */
	assert_true(connection_strips_header(a, "Authorization", 13));
	assert_true(connection_strips_header(a, "X-API-KEY", 9));
	assert_true(connection_strips_header(a, "cookie", 6));
	assert_true(connection_strips_header(a, "Proxy-Authorization", 19));
	assert_true(connection_strips_header(d, "X-Goog-Api-Key", 14));
	assert_false(connection_strips_header(a, "X-Goog-Api-Key", 14));
	assert_false(connection_strips_header(a, "content-type", 12));
	assert_false(connection_strips_header(a, "authorizatio", 12));
	connections_free(c);
}

static void
test_rules(void **state)
{
	char err[512], text[512];
	const char *key = tmpdir_put("g.key", "k\n", 0600);
	struct connections *c;
	const struct connection *d;

	snprintf(text, sizeof(text),
	    "[connection g]\ndestination = https://gen.example\ncredential_file = %s\n"
	    "allow_method = POST\nallow_method = GET\nallow_path = /v1/*\nallow_path = /health\n",
	    key);
	c = load(text, err, sizeof(err));
	assert_non_null(c);
	d = connections_find(c, "g");
	assert_int_equal(connection_request_allowed(d, "POST", "/v1/messages", 12), REASON_ALLOWED);
	assert_int_equal(connection_request_allowed(d, "GET", "/health?x=1", 11), REASON_ALLOWED);
	assert_int_equal(connection_request_allowed(d, "GET", "/v1/", 4), REASON_ALLOWED);
	/* negative twins */
	assert_int_equal(connection_request_allowed(d, "DELETE", "/v1/messages", 12),
	    REASON_CONNECTION_METHOD_DENIED);
	assert_int_equal(connection_request_allowed(d, "post", "/v1/messages", 12),
	    REASON_CONNECTION_METHOD_DENIED);
	assert_int_equal(connection_request_allowed(d, "GET", "/healthz", 8),
	    REASON_CONNECTION_PATH_DENIED);
	assert_int_equal(connection_request_allowed(d, "GET", "/v1", 3),
	    REASON_CONNECTION_PATH_DENIED);
	assert_int_equal(connection_request_allowed(d, "GET", "/v1/../admin", 12),
	    REASON_CONNECTION_PATH_DENIED);
	assert_int_equal(connection_request_allowed(d, "GET", "/v1/%2e%2e/admin", 16),
	    REASON_CONNECTION_PATH_DENIED);
	assert_int_equal(connection_request_allowed(d, "GET", "/v1/a%2Fb", 9),
	    REASON_CONNECTION_PATH_DENIED);
	assert_int_equal(connection_request_allowed(d, "GET", "/v1//x", 6),
	    REASON_CONNECTION_PATH_DENIED);
	assert_int_equal(connection_request_allowed(d, "GET", "/v1/x\\y", 7),
	    REASON_CONNECTION_PATH_DENIED);
	assert_int_equal(connection_request_allowed(d, "GET", "/v1/%", 5),
	    REASON_CONNECTION_PATH_DENIED);
	assert_int_equal(connection_request_allowed(d, "GET", "*", 1),
	    REASON_CONNECTION_PATH_DENIED);
	connections_free(c);
}

static void
refused(const char *text, const char *needle)
{
	char err[512] = "";
	struct connections *c = load(text, err, sizeof(err));

	if (c != NULL || strstr(err, needle) == NULL)
		fail_msg("expected refusal with '%s', got '%s'", needle, err);
}

static void
test_refusals(void **state)
{
	char text[1024];
	const char *key = tmpdir_put("r.key", "secret-value\n", 0600);
	const char *bad = tmpdir_put("bad.key", "has space\n", 0600);
	const char *empty = tmpdir_put("empty.key", "\n", 0600);

	snprintf(text, sizeof(text), "[connection a]\ncredential_file = %s\n", key);
	refused(text, "needs at least one destination");
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://*.example.com\n"
	    "credential_file = %s\n", key);
	refused(text, "without wildcards");
	snprintf(text, sizeof(text), "[connection a]\ndestination = http://a.example\n"
	    "credential_file = %s\n", key);
	refused(text, "https://host");
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
	    "credential_file = %s/missing\n", tmpdir);
	refused(text, "No such file");
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
	    "credential_file = %s\n", bad);
	refused(text, "visible ASCII");
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
	    "credential_file = %s\n", empty);
	refused(text, "1-4096 bytes");
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
	    "credential_file = %s\ncredential_header = Host\n", key);
	refused(text, "credential_header 'Host'");
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
	    "credential_file = %s\ncredential_header = Content-Length\n", key);
	refused(text, "credential_header");
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
	    "credential_file = %s\ncredential_header = bad header\n", key);
	refused(text, "credential_header");
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
	    "credential_file = %s\nallow_path = v1\n", key);
	refused(text, "allow_path 'v1'");
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
	    "credential_file = %s\nallow_path = /v1/../x\n", key);
	refused(text, "allow_path");
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
	    "credential_file = %s\nallow_path = /v1*/x\n", key);
	refused(text, "allow_path");
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
	    "credential_file = %s\nallow_method = post\n", key);
	refused(text, "allow_method 'post'");
	refused("[connection a]\ndestination = https://a.example\nallow_path = /x\n",
	    "need credential_file");
	refused("[connection a]\ndestination = https://a.example\npassword = x\n",
	    "unknown key");
	refused("[connection bad name!]\ndestination = https://a.example\n", "");
	/* A secret never appears in a refusal. */
	{
		char err[512] = "";
		snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
		    "credential_file = %s\ncredential_header = Cookie\n", key);
		assert_null(load(text, err, sizeof(err)));
		assert_null(strstr(err, "secret-value"));
	}
}

static void
test_world_readable(void **state)
{
	char err[512] = "", text[512];
	const char *key = tmpdir_put("wr.key", "k\n", 0644);

	if (getuid() != 0)
		skip();
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
	    "credential_file = %s\n", key);
	assert_null(load(text, err, sizeof(err)));
	assert_non_null(strstr(err, "mode 0600"));
	chmod(key, 0600);
	assert_non_null(strstr(err, "model connection"));
	{
		struct connections *c = load(text, err, sizeof(err));
		assert_non_null(c);
		connections_free(c);
	}
	/* a symlink to the key is not the key */
	{
		char link[300];
		snprintf(link, sizeof(link), "%s/link.key", tmpdir);
		assert_int_equal(symlink(key, link), 0);
		snprintf(text, sizeof(text), "[connection a]\ndestination = https://a.example\n"
		    "credential_file = %s\n", link);
		assert_null(load(text, err, sizeof(err)));
		assert_non_null(strstr(err, "symlink"));
		unlink(link);
	}
}

/* The grant carries the name only; the configuration resolves it. */
static void
test_grant_and_config(void **state)
{
	char err[512], conf[1024], conns[512];
	const char *key = tmpdir_put("c.key", "k-1\n", 0600);
	const char *cpath;
	struct egressd_config *cfg;
	json_t *j;
	struct grant *g;

	snprintf(conns, sizeof(conns), "[connection m]\ndestination = https://m.example\n"
	    "credential_file = %s\n[connection bare]\ndestination = https://b.example\n", key);
	cpath = tmpdir_put("conns.ini", conns, 0644);
	/* a static grant needs the operator's CA */
	snprintf(conf, sizeof(conf), "[egressd]\ncontrol_socket = none\nconnections = %s\n"
	    "[grant g1]\nallow = https://m.example\nmodel_connection = m\n", cpath);
	assert_null(config_load_string("e.ini", conf, strlen(conf), err, sizeof(err)));
	assert_non_null(strstr(err, "intercept_ca_cert"));
	{
		char *cert, *cakey;
		const char *cp, *kp;
		assert_int_equal(runca_make("op", NULL, 3600, &cert, &cakey, err, sizeof(err)), 0);
		cp = tmpdir_put("ca.pem", cert, 0644);
		kp = tmpdir_put("ca.key", cakey, 0600);
		snprintf(conf, sizeof(conf), "[egressd]\ncontrol_socket = none\nconnections = %s\n"
		    "intercept_ca_cert = %s\nintercept_ca_key = %s\n"
		    "[grant g1]\nallow = https://m.example\nmodel_connection = m\n", cpath, cp, kp);
		free(cert);
		free(cakey);
	}
	cfg = config_load_string("e.ini", conf, strlen(conf), err, sizeof(err));
	if (cfg == NULL)
		fail_msg("%s", err);
	assert_non_null(cfg->mitm_ca);
	/* twins: a CA that fails to load stops the start-up with the reason */
	{
		char bad[1024];
		const char *junk = tmpdir_put("junk.pem", "not a certificate\n", 0644);
		snprintf(bad, sizeof(bad), "[egressd]\ncontrol_socket = none\n"
		    "intercept_ca_cert = %s\nintercept_ca_key = %s/ca.key\n", junk, tmpdir);
		assert_null(config_load_string("e.ini", bad, strlen(bad), err, sizeof(err)));
		assert_non_null(strstr(err, "intercept_ca_cert"));
		assert_non_null(strstr(err, "not a PEM X.509 certificate"));
		snprintf(bad, sizeof(bad), "[egressd]\ncontrol_socket = none\n"
		    "intercept_ca_cert = %s/ca.pem\n", tmpdir);
		assert_null(config_load_string("e.ini", bad, strlen(bad), err, sizeof(err)));
		assert_non_null(strstr(err, "go together"));
		snprintf(bad, sizeof(bad), "[egressd]\ncontrol_socket = none\n"
		    "origin_ca_file = /etc/ssl/certs/ca-certificates.crt\n");
		assert_null(config_load_string("e.ini", bad, strlen(bad), err, sizeof(err)));
		assert_non_null(strstr(err, "only for connections"));
	}
	assert_non_null(cfg->origin_ctx);
	assert_string_equal(cfg->grants[0].grant->connection, "m");
	j = grant_to_json(cfg->grants[0].grant);
	assert_string_equal(json_string_value(json_object_get(j, "connection")), "m");
	g = grant_from_json(j, err, sizeof(err));
	assert_non_null(g);
	assert_string_equal(g->connection, "m");
	assert_int_equal(config_check_connection(cfg, g, err, sizeof(err)), CONN_CHECK_OK);
	json_decref(j);
	snprintf(g->connection, sizeof(g->connection), "nope");
	assert_int_equal(config_check_connection(cfg, g, err, sizeof(err)), CONN_CHECK_UNKNOWN);
	assert_string_equal(conn_check_code(CONN_CHECK_UNKNOWN), "unknown_connection");
	snprintf(g->connection, sizeof(g->connection), "bare");
	assert_int_equal(config_check_connection(cfg, g, err, sizeof(err)),
	    CONN_CHECK_NO_CREDENTIAL);
	grant_free(g);
	config_free(cfg);

	/* a static grant naming an unknown connection fails the whole file */
	snprintf(conf, sizeof(conf), "[egressd]\ncontrol_socket = none\nconnections = %s\n"
	    "[grant g1]\nallow = https://m.example\nmodel_connection = zzz\n", cpath);
	assert_null(config_load_string("e.ini", conf, strlen(conf), err, sizeof(err)));
	assert_non_null(strstr(err, "connection 'zzz' is not in"));
	/* ... and one without a connections file */
	snprintf(conf, sizeof(conf), "[egressd]\ncontrol_socket = none\n"
	    "[grant g1]\nallow = https://m.example\nmodel_connection = m\n");
	assert_null(config_load_string("e.ini", conf, strlen(conf), err, sizeof(err)));
	assert_non_null(strstr(err, "no connections file"));
	/* the JSON form refuses a bad name */
	j = json_pack("{s:s, s:[], s:s}", "principal", "p", "allow", "connection", "a b");
	assert_null(grant_from_json(j, err, sizeof(err)));
	assert_non_null(strstr(err, "connection:"));
	json_decref(j);
	/* no connection: the key is absent from the JSON form */
	j = json_pack("{s:s, s:[]}", "principal", "p", "allow");
	g = grant_from_json(j, err, sizeof(err));
	json_decref(j);
	assert_non_null(g);
	j = grant_to_json(g);
	assert_null(json_object_get(j, "connection"));
	json_decref(j);
	grant_free(g);
}

/* Every problem of the connections file is reported, each with its file:line; egressd.ini
 * shows them all too (egressd -t prints that text). */
static void
test_every_error(void **state)
{
	char err[4096] = "", text[1024], conf[512];
	const char *key = tmpdir_put("e.key", "k-e\n", 0600);
	const char *cpath;
	struct connections *c;

	snprintf(text, sizeof(text),
	    "[connection a]\n"                              /* 1 */
	    "destination = https://*.example.com\n"         /* 2: wildcard with a credential */
	    "credential_file = %s\n"                        /* 3 */
	    "credential_header = Host\n"                    /* 4: reserved header */
	    "[connection b]\n"                              /* 5 */
	    "destination = https://b.example\n"             /* 6 */
	    "credential_file = %s\n"                        /* 7 */
	    "allow_method = post\n"                         /* 8: lowercase method */
	    "allow_path = v1\n"                             /* 9: not a path */
	    "[connection c]\n"                              /* 10 */
	    "destination = https://c.example\n"             /* 11 */
	    "credential_file = %s/missing\n",               /* 12: unreadable */
	    key, key, tmpdir);
	c = load(text, err, sizeof(err));
	assert_null(c);
	assert_non_null(strstr(err, "conns.ini:2: [connection a] destination"));
	assert_non_null(strstr(err, "conns.ini:4: [connection a] credential_header 'Host'"));
	assert_non_null(strstr(err, "conns.ini:8: allow_method 'post'"));
	assert_non_null(strstr(err, "conns.ini:9: allow_path 'v1'"));
	assert_non_null(strstr(err, "conns.ini:12: [connection c] credential_file"));
	/* one problem per line: five lines */
	{
		size_t lines = 1;
		for (const char *p = err; *p != '\0'; p++)
			lines += *p == '\n';
		assert_int_equal(lines, 5);
	}
	/* negative twin: the same file with the problems fixed loads */
	snprintf(text, sizeof(text),
	    "[connection a]\ndestination = https://a.example\ncredential_file = %s\n"
	    "credential_header = x-api-key\n[connection b]\ndestination = https://b.example\n"
	    "credential_file = %s\nallow_method = POST\nallow_path = /v1\n"
	    "[connection c]\ndestination = https://c.example\ncredential_file = %s\n",
	    key, key, key);
	c = load(text, err, sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	connections_free(c);

	/* Through egressd.ini: each problem is its own "e.ini:LINE: connections: ..." line. */
	snprintf(text, sizeof(text), "[connection a]\ndestination = https://*.example.com\n"
	    "credential_file = %s\n[connection b]\ndestination = https://b.example\n"
	    "credential_file = %s\nallow_method = post\n", key, key);
	cpath = tmpdir_put("every.ini", text, 0644);
	snprintf(conf, sizeof(conf), "[egressd]\ncontrol_socket = none\nconnections = %s\n",
	    cpath);
	assert_null(config_load_string("e.ini", conf, strlen(conf), err, sizeof(err)));
	assert_non_null(strstr(err, "e.ini:3: connections: "));
	assert_non_null(strstr(err, "every.ini:2: [connection a] destination"));
	assert_non_null(strstr(err, "\ne.ini:3: connections: "));
	assert_non_null(strstr(err, "every.ini:7: allow_method 'post'"));
}

/* A reload (after the privilege drop) keeps the credentials start-up read from the same
 * files and never reads them again; another credential file, or another interception CA,
 * takes a restart (as proxy_credentials). */
static void
test_reload_keeps_credentials(void **state)
{
	char err[2048] = "", conns[512], conf[1024], key[300], cpath[300], epath[300];
	char cp[300], kp[300];
	struct egressd_config *prev, *next;
	const struct connection *m;
	char line[256];
	char *cert, *cakey;

	snprintf(key, sizeof(key), "%s", tmpdir_put("rk.key", "k-start\n", 0600));
	assert_int_equal(runca_make("op", NULL, 3600, &cert, &cakey, err, sizeof(err)), 0);
	snprintf(cp, sizeof(cp), "%s", tmpdir_put("rca.pem", cert, 0644));
	snprintf(kp, sizeof(kp), "%s", tmpdir_put("rca.key", cakey, 0600));
	free(cert);
	free(cakey);
	snprintf(conns, sizeof(conns), "[connection m]\ndestination = https://m.example\n"
	    "credential_file = %s\n", key);
	snprintf(cpath, sizeof(cpath), "%s", tmpdir_put("rconns.ini", conns, 0644));
	snprintf(conf, sizeof(conf), "[egressd]\ncontrol_socket = none\nconnections = %s\n"
	    "intercept_ca_cert = %s\nintercept_ca_key = %s\n", cpath, cp, kp);
	snprintf(epath, sizeof(epath), "%s", tmpdir_put("r.ini", conf, 0644));
	prev = config_load(epath, err, sizeof(err));
	if (prev == NULL)
		fail_msg("%s", err);

	/* The key files become unreadable (as they are to the dropped egressd): gone. */
	assert_int_equal(unlink(key), 0);
	assert_int_equal(unlink(kp), 0);
	next = config_reload(epath, prev, err, sizeof(err));
	if (next == NULL)
		fail_msg("reload: %s", err);
	m = connections_find(next->conns, "m");
	assert_non_null(m);
	assert_true(connection_header_line(m, line, sizeof(line)) > 0);
	assert_string_equal(line, "Authorization: Bearer k-start\r\n");
	assert_ptr_equal(next->mitm_ca, prev->mitm_ca);
	/* the running set goes; the reloaded one still holds its CA and secret */
	config_free(prev);
	assert_non_null(mitm_ca_cert(next->mitm_ca));
	prev = next;

	/* Twin: a connection whose credential file start-up never read fails the reload
	 * whole, and says a restart is needed. */
	{
		const char *k3 = tmpdir_put("new.key", "k-new\n", 0600);
		snprintf(conns, sizeof(conns), "[connection m]\ndestination = https://m.example\n"
		    "credential_file = %s/rk.key\n[connection n]\ndestination = https://n.example\n"
		    "credential_file = %s\n", tmpdir, k3);
		tmpdir_put("rconns.ini", conns, 0644);
	}
	assert_null(config_reload(epath, prev, err, sizeof(err)));
	assert_non_null(strstr(err, "[connection n] credential_file"));
	assert_non_null(strstr(err, "takes a restart"));
	assert_null(strstr(err, "[connection m]"));
	/* ... also when the running configuration had no connections file at all */
	{
		char plain[256];
		struct egressd_config *noconn;
		snprintf(plain, sizeof(plain), "[egressd]\ncontrol_socket = none\n");
		tmpdir_put("r.ini", plain, 0644);
		noconn = config_load(epath, err, sizeof(err));
		if (noconn == NULL)
			fail_msg("%s", err);
		snprintf(conf, sizeof(conf), "[egressd]\ncontrol_socket = none\n"
		    "connections = %s\n", cpath);
		tmpdir_put("r.ini", conf, 0644);
		assert_null(config_reload(epath, noconn, err, sizeof(err)));
		assert_non_null(strstr(err, "takes a restart"));
		config_free(noconn);
	}
	/* ... and another CA too */
	tmpdir_put("rconns.ini", "[connection m]\ndestination = https://m.example\n", 0644);
	snprintf(conf, sizeof(conf), "[egressd]\ncontrol_socket = none\nconnections = %s\n"
	    "intercept_ca_cert = %s\nintercept_ca_key = %s/other.key\n", cpath, cp, tmpdir);
	tmpdir_put("r.ini", conf, 0644);
	assert_null(config_reload(epath, prev, err, sizeof(err)));
	assert_non_null(strstr(err, "takes a restart"));
	config_free(prev);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_apply),
		cmocka_unit_test(test_rules),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_world_readable),
		cmocka_unit_test(test_grant_and_config),
		cmocka_unit_test(test_every_error),
		cmocka_unit_test(test_reload_keeps_credentials),
	};
	return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
