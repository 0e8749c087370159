/*
 * config.c - egressd.ini schema, typed settings, static listeners and grants.
 * Static grants go through grant_from_json, so a [grant] section and a control-socket
 * grant are validated by exactly the same code.
 */
#include "egressd/config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/addr.h"
#include "common/conf.h"
#include "common/host.h"
#include "common/log.h"
#include "common/util.h"
#include "egressd/connections.h"
#include "egressd/mitm.h"
#include "egressd/mitmca.h"
#include "egressd/resolve.h"

static const struct conf_key config_schema[] = {
	{ "egressd", "control_socket", 0 },
	{ "egressd", "decision_log", 0 },
	{ "egressd", "log_sync", 0 },
	{ "egressd", "log_max_bytes", 0 },
	{ "egressd", "log_hmac_key", 0 },
	{ "egressd", "log_syslog", 0 },
	{ "egressd", "user", 0 },
	{ "egressd", "connect_timeout", 0 },
	{ "egressd", "header_timeout", 0 },
	{ "egressd", "idle_timeout", 0 },
	{ "egressd", "tunnel_max_lifetime", 0 },
	{ "egressd", "drain_timeout", 0 },
	{ "egressd", "max_connections", 0 },
	{ "egressd", "max_dns_pending", 0 },
	{ "egressd", "dns_server", CONF_LIST },
	{ "egressd", "dns_timeout", 0 },
	{ "egressd", "dns_attempts", 0 },
	{ "egressd", "allow_special_address", CONF_LIST },
	{ "egressd", "metrics_listen", 0 },
	{ "egressd", "route", 0 },
	{ "egressd", "allow_direct", 0 },
	{ "egressd", "route_helper", 0 },
	{ "egressd", "route_timeout", 0 },
	{ "egressd", "route_cache_ttl", 0 },
	{ "egressd", "pac_copy", 0 },
	{ "egressd", "pac_timeout", 0 },
	{ "egressd", "pac_refresh", 0 },
	{ "egressd", "proxy_credentials", 0 },
	{ "egressd", "proxy_ca_file", 0 },
	{ "egressd", "upstream_timeout", 0 },
	{ "egressd", "splice", 0 },
	{ "egressd", "connections", 0 },
	{ "egressd", "intercept_ca_cert", 0 },
	{ "egressd", "intercept_ca_key", 0 },
	{ "egressd", "origin_ca_file", 0 },
	{ "listener *", "listen", CONF_REQUIRED },
	{ "listener *", "grant", CONF_REQUIRED },
	{ "grant *", "allow", CONF_LIST },
	{ "grant *", "allow_address", CONF_LIST },
	{ "grant *", "pinning", 0 },
	{ "grant *", "credential_origin", CONF_LIST },
	{ "grant *", "connections", 0 },
	{ "grant *", "bytes", 0 },
	{ "grant *", "lifetime", 0 },
	{ "grant *", "model_connection", 0 },
};

#define HOUR_MS (3600ULL * 1000)
#define DAY_MS  (24 * HOUR_MS)

int
config_parse_sockaddr(const char *s, bool allow_port0, struct sockaddr_storage *ss,
    socklen_t *len, const char **err)
{
	struct host h;
	size_t n = strlen(s);
	bool zero = false;
	char tmp[EGRESS_HOSTPORT_MAX + 8];

	/* host_parse refuses port 0; accept ":0" here only when asked (dynamic listeners). */
	if (allow_port0 && n >= 2 && strcmp(s + n - 2, ":0") == 0 && n < sizeof(tmp)) {
		memcpy(tmp, s, n - 2);
		memcpy(tmp + n - 2, ":1", 3);
		s = tmp;
		zero = true;
	}
	if (host_parse(s, strlen(s), HOST_REQUIRE_PORT, &h) != HOST_OK) {
		*err = "expected a literal address and port, e.g. 127.0.0.1:3128 or [::1]:3128";
		return -1;
	}
	if (h.kind == HOST_NAME) {
		*err = "the address must be an IP literal, not a host name";
		return -1;
	}
	*len = addr_to_sockaddr(&h.addr, zero ? 0 : h.port, ss);
	if (*len == 0) {
		*err = "unsupported address family";
		return -1;
	}
	return 0;
}

bool
config_user_valid(const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;

	if (n == 0 || n > CONFIG_USER_MAX || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

static char *
xstrdup(const char *s)
{
	char *p = strdup(s);

	if (p == NULL)
		fatal("strdup");
	return p;
}

void
config_free(struct egressd_config *c)
{
	if (c == NULL)
		return;
	free(c->path);
	free(c->control_socket);
	free(c->decision_log);
	free(c->log_hmac_key);
	free(c->log_syslog);
	free(c->user);
	for (size_t i = 0; i < c->ndns_servers; i++)
		free(c->dns_servers[i]);
	free(c->dns_servers);
	cidr_set_free(&c->allow_special);
	route_config_clear(&c->route);
	for (size_t i = 0; i < c->nlisteners; i++) {
		free(c->listeners[i].name);
		free(c->listeners[i].grant_name);
	}
	free(c->listeners);
	for (size_t i = 0; i < c->ngrants; i++) {
		free(c->grants[i].name);
		grant_free(c->grants[i].grant);
	}
	free(c->grants);
	free(c->connections_path);
	connections_free(c->conns);
	mitm_ca_free(c->mitm_ca);
	SSL_CTX_free(c->origin_ctx);
	free(c);
}

const struct config_grant *
config_find_grant(const struct egressd_config *c, const char *name)
{
	for (size_t i = 0; i < c->ngrants; i++)
		if (strcmp(c->grants[i].name, name) == 0)
			return &c->grants[i];
	return NULL;
}

/* JSON array of a list key (empty array when absent). */
static json_t *
list_json(const struct conf *cf, size_t sec, const char *key)
{
	size_t n = 0;
	const char *const *v = conf_get_list(cf, sec, key, &n);
	json_t *a = json_array();

	if (a == NULL)
		fatal("json_array");
	for (size_t i = 0; v != NULL && i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static int
load_grant(const struct conf *cf, size_t sec, struct config_grant *out, char *err,
    size_t errlen)
{
	const char *label = conf_section_label(cf, sec);
	unsigned line = conf_line(cf, sec, "allow");
	uint64_t bytes = 0, lifetime_ms = 0;
	long long conns = GRANT_DEFAULT_CONNECTIONS;
	char gerr[256];
	json_t *obj, *limits;
	const char *pin;

	if (line == 0)
		line = 1;
	if (conf_get_int(cf, sec, "connections", 1, 1000000, GRANT_DEFAULT_CONNECTIONS, &conns,
	    err, errlen) != 0 ||
	    conf_get_size(cf, sec, "bytes", UINT64_MAX, 0, &bytes, err, errlen) != 0 ||
	    conf_get_duration_ms(cf, sec, "lifetime", 365 * DAY_MS, 0, &lifetime_ms, err,
	    errlen) != 0)
		return -1;
	if (!grant_principal_valid(label)) {
		snprintf(err, errlen, "%s: [grant %s]: invalid principal label (use A-Z a-z 0-9 . _ -, "
		    "1-64 characters)", conf_file(cf), label);
		return -1;
	}
	obj = json_object();
	limits = json_object();
	if (obj == NULL || limits == NULL)
		fatal("json_object");
	json_object_set_new(obj, "principal", json_string(label));
	json_object_set_new(obj, "allow", list_json(cf, sec, "allow"));
	json_object_set_new(obj, "allow_address", list_json(cf, sec, "allow_address"));
	pin = conf_get(cf, sec, "pinning", NULL);
	json_object_set_new(obj, "pinning", json_string(pin != NULL ? pin : "preferred"));
	json_object_set_new(obj, "credential_origin", list_json(cf, sec, "credential_origin"));
	json_object_set_new(limits, "connections", json_integer(conns));
	json_object_set_new(limits, "bytes", json_integer((json_int_t)(bytes > INT64_MAX ?
	    INT64_MAX : bytes)));
	json_object_set_new(limits, "lifetime_s", json_integer((json_int_t)(lifetime_ms / 1000)));
	json_object_set_new(obj, "limits", limits);
	if ((pin = conf_get(cf, sec, "model_connection", NULL)) != NULL)
		json_object_set_new(obj, "connection", json_string(pin));
	out->grant = grant_from_json(obj, gerr, sizeof(gerr));
	json_decref(obj);
	if (out->grant == NULL) {
		snprintf(err, errlen, "%s:%u: [grant %s]: %s", conf_file(cf), line, label, gerr);
		return -1;
	}
	out->name = xstrdup(label);
	out->line = line;
	return 0;
}

const char *
conn_check_code(enum conn_check k)
{
	switch (k) {
	case CONN_CHECK_UNKNOWN:         return "unknown_connection";
	case CONN_CHECK_NO_DESTINATIONS: return "connection_without_destinations";
	case CONN_CHECK_NO_CREDENTIAL:   return "connection_without_credential";
	case CONN_CHECK_OK:              break;
	}
	return "ok";
}

enum conn_check
config_check_connection(const struct egressd_config *c, const struct grant *g, char *err,
    size_t errlen)
{
	const struct connection *conn;

	if (g->connection[0] == '\0')
		return CONN_CHECK_OK;
	if (c->conns == NULL) {
		snprintf(err, errlen, "connection '%s': egressd has no connections file "
		    "([egressd] connections = PATH)", g->connection);
		return CONN_CHECK_UNKNOWN;
	}
	conn = connections_find(c->conns, g->connection);
	if (conn == NULL) {
		snprintf(err, errlen, "connection '%s' is not in %s", g->connection,
		    c->conns->path);
		return CONN_CHECK_UNKNOWN;
	}
	if (conn->ndest == 0) {
		snprintf(err, errlen, "connection '%s' in %s has no destinations", g->connection,
		    c->conns->path);
		return CONN_CHECK_NO_DESTINATIONS;
	}
	if (conn->apply == CONN_APPLY_NONE) {
		snprintf(err, errlen, "connection '%s' in %s has no credential_file: there is "
		    "nothing for egressd to apply", g->connection, c->conns->path);
		return CONN_CHECK_NO_CREDENTIAL;
	}
	return CONN_CHECK_OK;
}

static struct egressd_config *
config_build(struct conf *cf, char *err, size_t errlen)
{
	struct egressd_config *c = calloc(1, sizeof(*c));
	const char *s, *es;
	unsigned line;
	long long v;
	long sec;
	size_t n;
	const char *const *list;

	if (c == NULL)
		fatal("calloc");
	c->path = xstrdup(conf_file(cf));
	c->control_socket = xstrdup(CONFIG_DEFAULT_CONTROL);
	c->decision_log = xstrdup(CONFIG_DEFAULT_DLOG);
	c->log_sync = DLOG_SYNC_BATCH;
	c->connect_timeout_ms = 10000;
	c->header_timeout_ms = 10000;
	c->idle_timeout_ms = 300000;
	c->tunnel_max_lifetime_ms = DAY_MS;
	c->drain_timeout_ms = 30000;
	c->max_connections = 4096;
	c->max_dns_pending = EGRESS_DNS_PENDING_MAX;
	c->dns_timeout_ms = 2000;
	c->dns_attempts = 2;
	c->route.kind = ROUTE_KIND_DIRECT;
	c->route.allow_direct = true;
	c->route.timeout_ms = 5000;
	c->route.cache_ttl_ms = 60000;
	c->route.pac_timeout_ms = 10000;
	c->route.pac_refresh_ms = 300000;
	c->route.upstream_timeout_ms = 10000;
	c->splice = true;

	sec = conf_find_section(cf, "egressd");
	if (sec >= 0) {
		size_t i = (size_t)sec;
		bool b;

		if ((s = conf_get(cf, i, "control_socket", &line)) != NULL) {
			free(c->control_socket);
			c->control_socket = NULL;
			if (strcmp(s, "none") != 0) {
				if (s[0] != '/' || strlen(s) >= 108) {
					snprintf(err, errlen, "%s:%u: control_socket: an absolute path "
					    "shorter than 108 bytes, or none", conf_file(cf), line);
					goto fail;
				}
				c->control_socket = xstrdup(s);
			}
		}
		if ((s = conf_get(cf, i, "decision_log", &line)) != NULL) {
			if (s[0] != '/' || strlen(s) >= EGRESS_PATH_MAX) {
				snprintf(err, errlen, "%s:%u: decision_log: an absolute path",
				    conf_file(cf), line);
				goto fail;
			}
			free(c->decision_log);
			c->decision_log = xstrdup(s);
		}
		if ((s = conf_get(cf, i, "log_sync", &line)) != NULL &&
		    dlog_sync_parse(s, &c->log_sync) != 0) {
			snprintf(err, errlen, "%s:%u: log_sync: always, batch or none", conf_file(cf),
			    line);
			goto fail;
		}
		/* rotation size (docs/audit.md): 0 = off; smaller than two records would
		 * rotate on every write */
		if (conf_get_size(cf, i, "log_max_bytes", UINT64_MAX, c->log_max_bytes,
		    &c->log_max_bytes, err, errlen) != 0)
			goto fail;
		if (c->log_max_bytes != 0 && c->log_max_bytes < 2 * EGRESS_LOG_RECORD_MAX) {
			snprintf(err, errlen, "%s: log_max_bytes: 0 (no rotation) or at least %d",
			    conf_file(cf), 2 * EGRESS_LOG_RECORD_MAX);
			goto fail;
		}
		if ((s = conf_get(cf, i, "log_hmac_key", &line)) != NULL) {
			if (s[0] != '/' || strlen(s) >= EGRESS_PATH_MAX) {
				snprintf(err, errlen, "%s:%u: log_hmac_key: an absolute path",
				    conf_file(cf), line);
				goto fail;
			}
			free(c->log_hmac_key);
			c->log_hmac_key = xstrdup(s);
		}
		if ((s = conf_get(cf, i, "log_syslog", &line)) != NULL) {
			free(c->log_syslog);
			c->log_syslog = strcmp(s, "none") == 0 ? NULL : xstrdup(s);
		}
		if (conf_get_duration_ms(cf, i, "connect_timeout", HOUR_MS, c->connect_timeout_ms,
		    &c->connect_timeout_ms, err, errlen) != 0 ||
		    conf_get_duration_ms(cf, i, "header_timeout", HOUR_MS, c->header_timeout_ms,
		    &c->header_timeout_ms, err, errlen) != 0 ||
		    conf_get_duration_ms(cf, i, "idle_timeout", 7 * DAY_MS, c->idle_timeout_ms,
		    &c->idle_timeout_ms, err, errlen) != 0 ||
		    conf_get_duration_ms(cf, i, "tunnel_max_lifetime", 365 * DAY_MS,
		    c->tunnel_max_lifetime_ms, &c->tunnel_max_lifetime_ms, err, errlen) != 0 ||
		    conf_get_duration_ms(cf, i, "drain_timeout", HOUR_MS, c->drain_timeout_ms,
		    &c->drain_timeout_ms, err, errlen) != 0 ||
		    conf_get_duration_ms(cf, i, "dns_timeout", 60000, c->dns_timeout_ms,
		    &c->dns_timeout_ms, err, errlen) != 0)
			goto fail;
		/* A zero timeout would mean "never" in libevent: refuse it, say what to do. */
		const struct { const char *k; uint64_t v; } nz[] = {
			{ "connect_timeout", c->connect_timeout_ms },
			{ "header_timeout", c->header_timeout_ms },
			{ "idle_timeout", c->idle_timeout_ms },
			{ "tunnel_max_lifetime", c->tunnel_max_lifetime_ms },
			{ "dns_timeout", c->dns_timeout_ms },
		};
		for (size_t k = 0; k < EGRESS_NELEM(nz); k++) {
			if (nz[k].v == 0) {
				snprintf(err, errlen, "%s:%u: %s: must be greater than zero",
				    conf_file(cf), conf_line(cf, i, nz[k].k), nz[k].k);
				goto fail;
			}
		}
		if (conf_get_int(cf, i, "max_connections", 1, 100000, c->max_connections, &v, err,
		    errlen) != 0)
			goto fail;
		c->max_connections = (uint32_t)v;
		if (conf_get_int(cf, i, "max_dns_pending", 1, 100000, c->max_dns_pending, &v, err,
		    errlen) != 0)
			goto fail;
		c->max_dns_pending = (uint32_t)v;
		if (conf_get_int(cf, i, "dns_attempts", 1, 10, c->dns_attempts, &v, err,
		    errlen) != 0)
			goto fail;
		c->dns_attempts = (unsigned)v;
		list = conf_get_list(cf, i, "dns_server", &n);
		if (list != NULL && n > 0) {
			if (n > RESOLVE_SERVERS_MAX) {
				snprintf(err, errlen, "%s:%u: dns_server: at most %d servers",
				    conf_file(cf), conf_line(cf, i, "dns_server"),
				    RESOLVE_SERVERS_MAX);
				goto fail;
			}
			c->dns_servers = calloc(n, sizeof(char *));
			if (c->dns_servers == NULL)
				fatal("calloc");
			for (size_t k = 0; k < n; k++) {
				struct addr a;
				struct sockaddr_storage ss;
				socklen_t sl;
				const char *perr;
				bool ok = addr_parse_literal(list[k], strlen(list[k]), &a) == ADDR_LIT_V4 ||
				    addr_parse_literal(list[k], strlen(list[k]), &a) == ADDR_LIT_V6 ||
				    config_parse_sockaddr(list[k], false, &ss, &sl, &perr) == 0;
				if (!ok) {
					snprintf(err, errlen, "%s:%u: dns_server: '%s' is not an address "
					    "or address:port", conf_file(cf),
					    conf_line(cf, i, "dns_server"), list[k]);
					goto fail;
				}
				c->dns_servers[k] = xstrdup(list[k]);
				c->ndns_servers++;
			}
		}
		list = conf_get_list(cf, i, "allow_special_address", &n);
		for (size_t k = 0; list != NULL && k < n; k++) {
			const char *cerr = NULL;
			if (cidr_set_add_str(&c->allow_special, list[k], &cerr) != 0) {
				snprintf(err, errlen, "%s:%u: allow_special_address: '%s': %s",
				    conf_file(cf), conf_line(cf, i, "allow_special_address"), list[k],
				    cerr != NULL ? cerr : "invalid");
				goto fail;
			}
		}
		if ((s = conf_get(cf, i, "user", &line)) != NULL) {
			/* Only the shape here: the account is looked up (NSS) by main before
			 * start-up and by -t, never at a reload, which runs under the filter. */
			if (!config_user_valid(s)) {
				snprintf(err, errlen, "%s:%u: user: an account name or a decimal uid "
				    "(letters, digits, '.', '_', '-', at most %d bytes)", conf_file(cf),
				    line, CONFIG_USER_MAX);
				goto fail;
			}
			free(c->user);
			c->user = xstrdup(s);
			c->user_line = line;
		}
		if ((s = conf_get(cf, i, "metrics_listen", &line)) != NULL) {
			struct addr a;
			if (config_parse_sockaddr(s, false, &c->metrics_addr, &c->metrics_addrlen,
			    &es) != 0) {
				snprintf(err, errlen, "%s:%u: metrics_listen: %s", conf_file(cf), line,
				    es);
				goto fail;
			}
			addr_from_sockaddr(&a, (struct sockaddr *)&c->metrics_addr);
			if (addr_classify(&a, NULL) != ADDR_CLASS_LOOPBACK) {
				snprintf(err, errlen, "%s:%u: metrics_listen: must be a loopback address",
				    conf_file(cf), line);
				goto fail;
			}
			c->has_metrics = true;
		}
		if ((s = conf_get(cf, i, "route", &line)) != NULL &&
		    route_config_parse(s, &c->route, &es) != 0) {
			snprintf(err, errlen, "%s:%u: route: %s", conf_file(cf), line, es);
			goto fail;
		}
		if (conf_get_bool(cf, i, "allow_direct", true, &b, err, errlen) != 0)
			goto fail;
		c->route.allow_direct = b;
		{
			static const struct { const char *key; size_t off; } paths[] = {
				{ "route_helper", offsetof(struct route_config, helper) },
				{ "pac_copy", offsetof(struct route_config, pac_copy) },
				{ "proxy_credentials", offsetof(struct route_config, credentials) },
				{ "proxy_ca_file", offsetof(struct route_config, proxy_ca_file) },
			};
			for (size_t k = 0; k < EGRESS_NELEM(paths); k++) {
				char **dst = (char **)((char *)&c->route + paths[k].off);
				if ((s = conf_get(cf, i, paths[k].key, &line)) == NULL)
					continue;
				if (s[0] != '/') {
					snprintf(err, errlen, "%s:%u: %s: an absolute path", conf_file(cf),
					    line, paths[k].key);
					goto fail;
				}
				*dst = xstrdup(s);
			}
		}
		if (conf_get_duration_ms(cf, i, "route_timeout", 60000, c->route.timeout_ms,
		    &c->route.timeout_ms, err, errlen) != 0 ||
		    conf_get_duration_ms(cf, i, "route_cache_ttl", HOUR_MS, c->route.cache_ttl_ms,
		    &c->route.cache_ttl_ms, err, errlen) != 0 ||
		    conf_get_duration_ms(cf, i, "pac_timeout", 120000, c->route.pac_timeout_ms,
		    &c->route.pac_timeout_ms, err, errlen) != 0 ||
		    conf_get_duration_ms(cf, i, "pac_refresh", DAY_MS, c->route.pac_refresh_ms,
		    &c->route.pac_refresh_ms, err, errlen) != 0 ||
		    conf_get_duration_ms(cf, i, "upstream_timeout", 300000,
		    c->route.upstream_timeout_ms, &c->route.upstream_timeout_ms, err, errlen) != 0)
			goto fail;
		if (c->route.timeout_ms == 0 || c->route.pac_timeout_ms == 0 ||
		    c->route.upstream_timeout_ms == 0) {
			snprintf(err, errlen, "%s: route_timeout, pac_timeout and upstream_timeout must "
			    "be positive", conf_file(cf));
			goto fail;
		}
		if (conf_get_bool(cf, i, "splice", true, &b, err, errlen) != 0)
			goto fail;
		c->splice = b;
		if ((s = conf_get(cf, i, "connections", &line)) != NULL) {
			char e2[512];
			if (s[0] != '/') {
				snprintf(err, errlen, "%s:%u: connections: an absolute path",
				    conf_file(cf), line);
				goto fail;
			}
			c->connections_path = xstrdup(s);
			/* Credential files are root-only: read here, as root, before the drop
			 * (a reload after the drop cannot read them and fails whole). */
			c->conns = connections_load(s, geteuid() == 0, e2, sizeof(e2));
			if (c->conns == NULL) {
				snprintf(err, errlen, "%s:%u: connections: %s", conf_file(cf), line, e2);
				goto fail;
			}
			/* Intercepted origins are verified against the host trust store (or the
			 * file named here: labs, private CAs). */
			s = conf_get(cf, i, "origin_ca_file", &line);
			c->origin_ctx = mitm_client_ctx(s, e2, sizeof(e2));
			if (c->origin_ctx == NULL) {
				snprintf(err, errlen, "%s:%u: origin_ca_file: %s", conf_file(cf), line, e2);
				goto fail;
			}
		} else if (conf_get(cf, i, "origin_ca_file", &line) != NULL) {
			snprintf(err, errlen, "%s:%u: origin_ca_file is only for connections",
			    conf_file(cf), line);
			goto fail;
		}
		{
			const char *cert = conf_get(cf, i, "intercept_ca_cert", &line);
			const char *key = conf_get(cf, i, "intercept_ca_key", NULL);
			char e2[512];

			if ((cert == NULL) != (key == NULL)) {
				snprintf(err, errlen, "%s:%u: intercept_ca_cert and intercept_ca_key go "
				    "together", conf_file(cf), line ? line : conf_line(cf, i,
				    "intercept_ca_key"));
				goto fail;
			}
			if (cert != NULL) {
				c->mitm_ca = mitm_ca_load(cert, key, geteuid() == 0, e2, sizeof(e2));
				if (c->mitm_ca == NULL) {
					snprintf(err, errlen, "%s:%u: intercept_ca_cert: %s", conf_file(cf),
					    line, e2);
					goto fail;
				}
			}
		}
	}
	if (c->route.pac_copy == NULL) {
		/* The fetched PAC's good copy lives beside the decision log by default. */
		const char *slash = strrchr(c->decision_log, '/');
		size_t dl = slash ? (size_t)(slash - c->decision_log) : 0;
		size_t cap = dl + sizeof("/egressd-pac.js");
		c->route.pac_copy = malloc(cap);
		if (c->route.pac_copy == NULL)
			fatal("malloc");
		snprintf(c->route.pac_copy, cap, "%.*s/egressd-pac.js", (int)dl, c->decision_log);
	}

	/* Grants first, so listeners can name them. */
	for (size_t i = 0; i < conf_nsections(cf); i++) {
		if (strncmp(conf_section_name(cf, i), "grant ", 6) != 0)
			continue;
		const char *label = conf_section_label(cf, i);
		if (config_find_grant(c, label) != NULL) {
			snprintf(err, errlen, "%s:%u: [grant %s] defined twice", conf_file(cf),
			    conf_line(cf, i, "allow"), label);
			goto fail;
		}
		struct config_grant *ng = realloc(c->grants, (c->ngrants + 1) * sizeof(*ng));
		if (ng == NULL)
			fatal("realloc");
		c->grants = ng;
		memset(&c->grants[c->ngrants], 0, sizeof(c->grants[0]));
		if (load_grant(cf, i, &c->grants[c->ngrants], err, errlen) != 0)
			goto fail;
		c->ngrants++;
		if (config_check_connection(c, c->grants[c->ngrants - 1].grant, err, errlen) != 0) {
			char e2[512];
			snprintf(e2, sizeof(e2), "%s", err);
			snprintf(err, errlen, "%s:%u: [grant %s] model_connection: %s",
			    conf_file(cf), conf_line(cf, i, "model_connection"), label, e2);
			goto fail;
		}
		/* A static grant has no run CA: the operator's must be configured. */
		if (c->grants[c->ngrants - 1].grant->connection[0] != '\0' && c->mitm_ca == NULL) {
			snprintf(err, errlen, "%s:%u: [grant %s] model_connection: a static grant "
			    "needs the operator's interception CA (intercept_ca_cert and "
			    "intercept_ca_key)", conf_file(cf), conf_line(cf, i, "model_connection"),
			    label);
			goto fail;
		}
	}
	for (size_t i = 0; i < conf_nsections(cf); i++) {
		if (strncmp(conf_section_name(cf, i), "listener ", 9) != 0)
			continue;
		const char *label = conf_section_label(cf, i);
		struct config_listener *nl = realloc(c->listeners,
		    (c->nlisteners + 1) * sizeof(*nl));
		if (nl == NULL)
			fatal("realloc");
		c->listeners = nl;
		struct config_listener *L = &c->listeners[c->nlisteners];
		memset(L, 0, sizeof(*L));
		s = conf_get(cf, i, "listen", &line);
		if (s == NULL || config_parse_sockaddr(s, false, &L->addr, &L->addrlen, &es) != 0) {
			snprintf(err, errlen, "%s:%u: [listener %s] listen: %s", conf_file(cf), line,
			    label, s == NULL ? "missing" : es);
			goto fail;
		}
		for (size_t k = 0; k < c->nlisteners; k++) {
			if (c->listeners[k].addrlen == L->addrlen &&
			    memcmp(&c->listeners[k].addr, &L->addr, L->addrlen) == 0) {
				snprintf(err, errlen, "%s:%u: [listener %s] listen: address already "
				    "used by [listener %s]", conf_file(cf), line, label,
				    c->listeners[k].name);
				goto fail;
			}
		}
		s = conf_get(cf, i, "grant", &line);
		if (s == NULL || config_find_grant(c, s) == NULL) {
			snprintf(err, errlen, "%s:%u: [listener %s] grant: no [grant %s] in this file",
			    conf_file(cf), line, label, s == NULL ? "" : s);
			goto fail;
		}
		L->name = xstrdup(label);
		L->grant_name = xstrdup(s);
		L->line = line;
		c->nlisteners++;
	}
	/* Sections other than the schema's are refused by conf already; a bare [listener]
	 * or [grant] without a label would be an exact-name section: refuse it here. */
	for (size_t i = 0; i < conf_nsections(cf); i++) {
		const char *nm = conf_section_name(cf, i);
		if (strcmp(nm, "egressd") != 0 && strcmp(nm, "") != 0 &&
		    strncmp(nm, "grant ", 6) != 0 && strncmp(nm, "listener ", 9) != 0) {
			snprintf(err, errlen, "%s: unknown section [%s]", conf_file(cf), nm);
			goto fail;
		}
	}
	return c;
fail:
	config_free(c);
	return NULL;
}

struct egressd_config *
config_load(const char *path, char *err, size_t errlen)
{
	struct conf *cf = conf_load(path, config_schema, EGRESS_NELEM(config_schema), err,
	    errlen);
	struct egressd_config *c;

	if (cf == NULL)
		return NULL;
	c = config_build(cf, err, errlen);
	conf_free(cf);
	return c;
}

struct egressd_config *
config_load_string(const char *name, const char *text, size_t len, char *err, size_t errlen)
{
	struct conf *cf = conf_load_string(name, text, len, config_schema,
	    EGRESS_NELEM(config_schema), err, errlen);
	struct egressd_config *c;

	if (cf == NULL)
		return NULL;
	c = config_build(cf, err, errlen);
	conf_free(cf);
	return c;
}
