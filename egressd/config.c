/*
 * config.c - egressd.ini schema, typed settings, static listeners and grants.
 * Static grants go through grant_from_json, so a [grant] section and a control-socket
 * grant are validated by exactly the same code.
 */
#include "egressd/config.h"

#include <errno.h>
#include <stdarg.h>
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
#include "egressd/dlog_syslog.h"
#include "egressd/mitm.h"
#include "egressd/mitmca.h"
#include "egressd/resolve.h"

static const struct conf_key config_schema[] = {
	{ "egressd", "control_socket", 0 },
	{ "egressd", "decision_log", 0 },
	{ "egressd", "state_file", 0 },
	{ "egressd", "log_sync", 0 },
	{ "egressd", "log_max_bytes", 0 },
	{ "egressd", "log_hmac_key", 0 },
	{ "egressd", "log_syslog", 0 },
	{ "egressd", "log_syslog_ca", 0 },
	{ "egressd", "log_syslog_name", 0 },
	{ "egressd", "log_syslog_cert", 0 },
	{ "egressd", "log_syslog_key", 0 },
	{ "egressd", "log_syslog_spool", 0 },
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
	{ "egressd", "wpad_domain", 0 },
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
	return s != NULL && s[0] != '-' && label_valid(s, CONFIG_USER_MAX);
}

/*
 * Out of memory while building a configuration fails that load, never the daemon
 * (CONTRIBUTING.md, "Out of memory"): at start-up egressd exits with the message, a
 * SIGHUP reload keeps the running configuration. DUP_OR_OOM jumps to config_build's oom.
 */
#define DUP_OR_OOM(dst, src) do {                                                      \
		if (((dst) = strdup(src)) == NULL)                                           \
			goto oom;                                                            \
	} while (0)

void
config_free(struct egressd_config *c)
{
	if (c == NULL)
		return;
	free(c->path);
	free(c->control_socket);
	free(c->decision_log);
	free(c->state_file);
	free(c->log_hmac_key);
	free(c->log_syslog);
	free(c->log_syslog_ca);
	free(c->log_syslog_name);
	free(c->log_syslog_cert);
	free(c->log_syslog_key);
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
	free(c->mitm_ca_cert);
	free(c->mitm_ca_key);
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

/*
 * Every problem of a file, each as "file:line: message", reported together in file order
 * (one reload attempt shows the operator everything to fix, and the first line printed is
 * the first problem in the file). At most CONFIG_ERRORS_MAX are kept.
 */
#define CONFIG_ERRORS_MAX 32
#define CONFIG_CONN_ERRORS_MAX 8192     /* the connections file's problems, '\n'-separated */

struct cerrs {
	const struct conf *cf;
	const struct egressd_config *prev;  /* a reload: the running configuration */
	size_t n;
	struct {
		unsigned line;
		char msg[512];
	} v[CONFIG_ERRORS_MAX];
	size_t dropped;
	bool oom;                       /* a copy failed: the load fails, not the daemon */
};

/* strdup that marks the load as out of memory instead of dying (CONTRIBUTING.md). */
static char *
cdup(struct cerrs *ce, const char *s)
{
	char *v = strdup(s);

	if (v == NULL)
		ce->oom = true;
	return v;
}

static void cerr_add(struct cerrs *ce, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A problem at line (0: the file as a whole), formatted after "file:line: ". */
static void
cerr_add(struct cerrs *ce, unsigned line, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (ce->n == CONFIG_ERRORS_MAX) {
		ce->dropped++;
		return;
	}
	k = snprintf(ce->v[ce->n].msg, sizeof(ce->v[0].msg), "%s:%u: ", conf_file(ce->cf), line);
	if (k < 0 || (size_t)k >= sizeof(ce->v[0].msg))
		k = 0;
	va_start(ap, fmt);
	vsnprintf(ce->v[ce->n].msg + k, sizeof(ce->v[0].msg) - (size_t)k, fmt, ap);
	va_end(ap);
	ce->v[ce->n].line = line;
	ce->n++;
}

/* A message a conf_get_* helper already formatted as "file:line: ...". */
static void
cerr_raw(struct cerrs *ce, unsigned line, const char *msg)
{
	if (ce->n == CONFIG_ERRORS_MAX) {
		ce->dropped++;
		return;
	}
	snprintf(ce->v[ce->n].msg, sizeof(ce->v[0].msg), "%s", msg);
	ce->v[ce->n].line = line;
	ce->n++;
}

/* All problems into err, one per line, in file order (stable for equal lines). */
static void
cerr_report(struct cerrs *ce, char *err, size_t errlen)
{
	size_t off = 0;

	for (size_t i = 1; i < ce->n; i++) {      /* insertion sort: stable, n <= 32 */
		for (size_t j = i; j > 0 && ce->v[j - 1].line > ce->v[j].line; j--) {
			unsigned tl = ce->v[j].line;
			char tm[sizeof(ce->v[0].msg)];
			memcpy(tm, ce->v[j].msg, sizeof(tm));
			ce->v[j].line = ce->v[j - 1].line;
			memcpy(ce->v[j].msg, ce->v[j - 1].msg, sizeof(tm));
			ce->v[j - 1].line = tl;
			memcpy(ce->v[j - 1].msg, tm, sizeof(tm));
		}
	}
	if (errlen == 0)
		return;
	err[0] = '\0';
	for (size_t i = 0; i < ce->n && off + 1 < errlen; i++) {
		int k = snprintf(err + off, errlen - off, "%s%s", i ? "\n" : "", ce->v[i].msg);
		if (k < 0)
			break;
		off += (size_t)k;
	}
	if (ce->dropped > 0 && off + 1 < errlen)
		snprintf(err + off, errlen - off, "\n%s: ... and %zu more problem(s)",
		    conf_file(ce->cf), ce->dropped);
}

/* JSON array of a list key (empty array when absent). */
static json_t *
list_json(const struct conf *cf, size_t sec, const char *key)
{
	size_t n = 0;
	const char *const *v = conf_get_list(cf, sec, key, &n);
	json_t *a = json_array();

	for (size_t i = 0; a != NULL && v != NULL && i < n; i++) {
		if (json_array_append_new(a, json_string(v[i])) != 0) {
			json_decref(a);
			return NULL;      /* out of memory */
		}
	}
	return a;
}

/* The [grant] keys whose text goes into the grant's JSON as strings. */
static const char *const grant_text_keys[] = {
	"allow", "allow_address", "credential_origin", "pinning", "model_connection",
};

/* One [grant] section; every problem goes to ce. 0 when out is filled. */
static int
load_grant(const struct conf *cf, size_t sec, struct config_grant *out, struct cerrs *ce)
{
	const char *label = conf_section_label(cf, sec);
	unsigned line = conf_line(cf, sec, "allow");
	unsigned sline = conf_section_line(cf, sec);
	uint64_t bytes = 0, lifetime_ms = 0;
	long long conns = GRANT_DEFAULT_CONNECTIONS;
	char gerr[256], e1[512];
	json_t *obj, *limits;
	const char *pin;
	size_t before = ce->n + ce->dropped;

	if (line == 0)
		line = sline;
	if (conf_get_int(cf, sec, "connections", 1, 1000000, GRANT_DEFAULT_CONNECTIONS, &conns,
	    e1, sizeof(e1)) != 0)
		cerr_raw(ce, conf_line(cf, sec, "connections"), e1);
	if (conf_get_size(cf, sec, "bytes", UINT64_MAX, 0, &bytes, e1, sizeof(e1)) != 0)
		cerr_raw(ce, conf_line(cf, sec, "bytes"), e1);
	if (conf_get_duration_ms(cf, sec, "lifetime", 365 * DAY_MS, 0, &lifetime_ms, e1,
	    sizeof(e1)) != 0)
		cerr_raw(ce, conf_line(cf, sec, "lifetime"), e1);
	if (!grant_principal_valid(label))
		cerr_add(ce, sline, "[grant %s]: invalid principal label (use A-Z a-z 0-9 . _ -, "
		    "1-64 characters)", label);
	/* The grant is built through JSON, whose strings are UTF-8: a value that is not would
	 * fail there and read as out of memory. Name it instead. */
	for (size_t k = 0; k < sizeof(grant_text_keys) / sizeof(grant_text_keys[0]); k++) {
		size_t n = 0;
		const char *const *v = conf_get_list(cf, sec, grant_text_keys[k], &n);

		for (size_t i = 0; v != NULL && i < n; i++) {
			if (!utf8_valid(v[i], strlen(v[i]))) {
				unsigned kl = conf_line(cf, sec, grant_text_keys[k]);

				cerr_add(ce, kl != 0 ? kl : sline, "[grant %s]: %s: not valid UTF-8 "
				    "(write names in ASCII, or as UTF-8 text)", label, grant_text_keys[k]);
				break;
			}
		}
	}
	if (ce->n + ce->dropped != before)
		return -1;
	obj = json_object();
	limits = json_object();
	pin = conf_get(cf, sec, "pinning", NULL);
	/* Every set is checked: a member lost to ENOMEM must not read as "absent". */
	if (obj == NULL || limits == NULL ||
	    json_object_set_new(obj, "principal", json_string(label)) != 0 ||
	    json_object_set_new(obj, "allow", list_json(cf, sec, "allow")) != 0 ||
	    json_object_set_new(obj, "allow_address", list_json(cf, sec, "allow_address")) != 0 ||
	    json_object_set_new(obj, "pinning", json_string(pin != NULL ? pin : "preferred")) != 0 ||
	    json_object_set_new(obj, "credential_origin",
	    list_json(cf, sec, "credential_origin")) != 0 ||
	    json_object_set_new(limits, "connections", json_integer(conns)) != 0 ||
	    json_object_set_new(limits, "bytes", json_integer((json_int_t)(bytes > INT64_MAX ?
	    INT64_MAX : bytes))) != 0 ||
	    json_object_set_new(limits, "lifetime_s",
	    json_integer((json_int_t)(lifetime_ms / 1000))) != 0 ||
	    json_object_set_new(obj, "limits", json_incref(limits)) != 0) {
		json_decref(obj);
		json_decref(limits);
		ce->oom = true;
		return -1;
	}
	json_decref(limits);
	if ((pin = conf_get(cf, sec, "model_connection", NULL)) != NULL &&
	    json_object_set_new(obj, "connection", json_string(pin)) != 0) {
		json_decref(obj);
		ce->oom = true;
		return -1;
	}
	out->grant = grant_from_json(obj, gerr, sizeof(gerr));
	json_decref(obj);
	if (out->grant == NULL) {
		/* the JSON path names the entry (allow[2], pinning ...): point at its key */
		unsigned at = line;
		if (strncmp(gerr, "pinning", 7) == 0 && conf_line(cf, sec, "pinning") != 0)
			at = conf_line(cf, sec, "pinning");
		else if (strncmp(gerr, "allow_address", 13) == 0)
			at = conf_line(cf, sec, "allow_address");
		else if (strncmp(gerr, "credential_origin", 17) == 0)
			at = conf_line(cf, sec, "credential_origin");
		cerr_add(ce, at != 0 ? at : sline, "[grant %s]: %s", label, gerr);
		return -1;
	}
	out->name = strdup(label);
	if (out->name == NULL) {
		grant_free(out->grant);
		out->grant = NULL;
		ce->oom = true;
		return -1;
	}
	out->line = line;
	return 0;
}

/* A key whose value is an absolute path (shorter than EGRESS_PATH_MAX): when present and
 * valid, *dst (NULL or owned) is replaced by a copy and the value returned; otherwise the
 * problem is added at its line and NULL returned (absent: NULL, *dst untouched). */
static const char *
path_key(const struct conf *cf, size_t i, const char *key, char **dst, struct cerrs *ce)
{
	unsigned line;
	const char *s = conf_get(cf, i, key, &line);

	if (s == NULL)
		return NULL;
	if (s[0] != '/' || strlen(s) >= EGRESS_PATH_MAX) {
		cerr_add(ce, line, "%s: an absolute path", key);
		return NULL;
	}
	free(*dst);
	*dst = cdup(ce, s);
	return s;
}

/* The [egressd] section. Problems go to ce; keys after a bad one are still checked. */
static void
load_main(const struct conf *cf, size_t i, struct egressd_config *c, struct cerrs *ce)
{
	const char *s, *es;
	unsigned line;
	long long v;
	size_t n;
	const char *const *list;
	char e1[512];
	bool b;

	if ((s = conf_get(cf, i, "control_socket", &line)) != NULL) {
		if (strcmp(s, "none") == 0) {
			free(c->control_socket);
			c->control_socket = NULL;
		} else if (s[0] != '/' || strlen(s) >= 108) {
			cerr_add(ce, line, "control_socket: an absolute path shorter than 108 bytes, "
			    "or none");
		} else {
			free(c->control_socket);
			c->control_socket = cdup(ce, s);
		}
	}
	(void)path_key(cf, i, "decision_log", &c->decision_log, ce);
	(void)path_key(cf, i, "state_file", &c->state_file, ce);
	if ((s = conf_get(cf, i, "log_sync", &line)) != NULL &&
	    dlog_sync_parse(s, &c->log_sync) != 0)
		cerr_add(ce, line, "log_sync: always, batch or none");
	/* rotation size (docs/audit.md): 0 = off; smaller than two records would rotate on
	 * every write */
	if (conf_get_size(cf, i, "log_max_bytes", UINT64_MAX, c->log_max_bytes,
	    &c->log_max_bytes, e1, sizeof(e1)) != 0)
		cerr_raw(ce, conf_line(cf, i, "log_max_bytes"), e1);
	else if (c->log_max_bytes != 0 && c->log_max_bytes < 2 * EGRESS_LOG_RECORD_MAX)
		cerr_add(ce, conf_line(cf, i, "log_max_bytes"), "log_max_bytes: 0 (no rotation) or "
		    "at least %d", 2 * EGRESS_LOG_RECORD_MAX);
	(void)path_key(cf, i, "log_hmac_key", &c->log_hmac_key, ce);
	if ((s = conf_get(cf, i, "log_syslog", &line)) != NULL) {
		free(c->log_syslog);
		c->log_syslog = strcmp(s, "none") == 0 ? NULL : cdup(ce, s);
		c->log_syslog_line = line;
	}
	{
		/* The mirror's transport settings (docs/audit.md); their files are loaded by
		 * egressd -t and at start-up (as root), not here: a reload parses as the
		 * account egressd dropped to, and the client key is root-only. */
		struct { const char *k; char **v; } f[] = {
			{ "log_syslog_ca", &c->log_syslog_ca },
			{ "log_syslog_name", &c->log_syslog_name },
			{ "log_syslog_cert", &c->log_syslog_cert },
			{ "log_syslog_key", &c->log_syslog_key },
		};
		struct dlog_syslog_config sc;
		unsigned sline = conf_line(cf, i, "log_syslog");

		for (size_t k = 0; k < EGRESS_NELEM(f); k++) {
			if ((s = conf_get(cf, i, f[k].k, &line)) == NULL)
				continue;
			if (k != 1 && (s[0] != '/' || strlen(s) >= EGRESS_PATH_MAX)) {
				cerr_add(ce, line, "%s: an absolute path", f[k].k);
				continue;
			}
			free(*f[k].v);
			*f[k].v = cdup(ce, s);
		}
		if (conf_get_size(cf, i, "log_syslog_spool", EGRESS_SYSLOG_SPOOL_MAX,
		    c->log_syslog_spool, &c->log_syslog_spool, e1, sizeof(e1)) != 0)
			cerr_raw(ce, conf_line(cf, i, "log_syslog_spool"), e1);
		sc = (struct dlog_syslog_config){ .target = c->log_syslog, .ca = c->log_syslog_ca,
			.name = c->log_syslog_name, .cert = c->log_syslog_cert,
			.key = c->log_syslog_key, .spool_max = c->log_syslog_spool };
		if (sc.target == NULL && (sc.ca != NULL || sc.name != NULL || sc.cert != NULL ||
		    sc.key != NULL || sc.spool_max != 0))
			cerr_add(ce, sline != 0 ? sline : conf_line(cf, i, "log_syslog_spool") != 0 ?
			    conf_line(cf, i, "log_syslog_spool") : conf_line(cf, i, "log_syslog_ca"),
			    "log_syslog_* settings without log_syslog = tcp://... or tls://...");
		else if (sc.target != NULL && dlog_syslog_check(&sc, false, e1, sizeof(e1)) != 0)
			cerr_raw(ce, sline, e1);
	}
	{
		/* A zero timeout would mean "never" in libevent: refuse it, say what to do. */
		const struct { const char *k; uint64_t max; uint64_t *v; } d[] = {
			{ "connect_timeout", HOUR_MS, &c->connect_timeout_ms },
			{ "header_timeout", HOUR_MS, &c->header_timeout_ms },
			{ "idle_timeout", 7 * DAY_MS, &c->idle_timeout_ms },
			{ "tunnel_max_lifetime", 365 * DAY_MS, &c->tunnel_max_lifetime_ms },
			{ "drain_timeout", HOUR_MS, &c->drain_timeout_ms },
			{ "dns_timeout", 60000, &c->dns_timeout_ms },
			{ "route_timeout", 60000, &c->route.timeout_ms },
			{ "route_cache_ttl", HOUR_MS, &c->route.cache_ttl_ms },
			{ "pac_timeout", 120000, &c->route.pac_timeout_ms },
			{ "pac_refresh", DAY_MS, &c->route.pac_refresh_ms },
			{ "upstream_timeout", 300000, &c->route.upstream_timeout_ms },
		};
		for (size_t k = 0; k < EGRESS_NELEM(d); k++) {
			bool may_be_zero = strcmp(d[k].k, "drain_timeout") == 0 ||
			    strcmp(d[k].k, "route_cache_ttl") == 0 ||
			    strcmp(d[k].k, "pac_refresh") == 0;
			if (conf_get_duration_ms(cf, i, d[k].k, d[k].max, *d[k].v, d[k].v, e1,
			    sizeof(e1)) != 0)
				cerr_raw(ce, conf_line(cf, i, d[k].k), e1);
			else if (*d[k].v == 0 && !may_be_zero)
				cerr_add(ce, conf_line(cf, i, d[k].k), "%s: must be greater than zero",
				    d[k].k);
		}
	}
	if (conf_get_int(cf, i, "max_connections", 1, 100000, c->max_connections, &v, e1,
	    sizeof(e1)) != 0)
		cerr_raw(ce, conf_line(cf, i, "max_connections"), e1);
	else
		c->max_connections = (uint32_t)v;
	if (conf_get_int(cf, i, "max_dns_pending", 1, 100000, c->max_dns_pending, &v, e1,
	    sizeof(e1)) != 0)
		cerr_raw(ce, conf_line(cf, i, "max_dns_pending"), e1);
	else
		c->max_dns_pending = (uint32_t)v;
	if (conf_get_int(cf, i, "dns_attempts", 1, 10, c->dns_attempts, &v, e1,
	    sizeof(e1)) != 0)
		cerr_raw(ce, conf_line(cf, i, "dns_attempts"), e1);
	else
		c->dns_attempts = (unsigned)v;
	list = conf_get_list(cf, i, "dns_server", &n);
	if (list != NULL && n > RESOLVE_SERVERS_MAX) {
		cerr_add(ce, conf_line(cf, i, "dns_server"), "dns_server: at most %d servers",
		    RESOLVE_SERVERS_MAX);
	} else if (list != NULL && n > 0) {
		c->dns_servers = calloc(n, sizeof(char *));
		if (c->dns_servers == NULL) {
			ce->oom = true;
			return;
		}
		for (size_t k = 0; k < n; k++) {
			struct addr a;
			struct sockaddr_storage ss;
			socklen_t sl;
			const char *perr;
			bool ok = addr_parse_literal(list[k], strlen(list[k]), &a) == ADDR_LIT_V4 ||
			    addr_parse_literal(list[k], strlen(list[k]), &a) == ADDR_LIT_V6 ||
			    config_parse_sockaddr(list[k], false, &ss, &sl, &perr) == 0;
			if (!ok) {
				cerr_add(ce, conf_line(cf, i, "dns_server"), "dns_server: '%s' is not "
				    "an address or address:port", list[k]);
				continue;
			}
			c->dns_servers[c->ndns_servers++] = cdup(ce, list[k]);
		}
	}
	list = conf_get_list(cf, i, "allow_special_address", &n);
	for (size_t k = 0; list != NULL && k < n; k++) {
		const char *cerr = NULL;
		if (cidr_set_add_str(&c->allow_special, list[k], &cerr) != 0)
			cerr_add(ce, conf_line(cf, i, "allow_special_address"),
			    "allow_special_address: '%s': %s", list[k],
			    cerr != NULL ? cerr : "invalid");
	}
	if ((s = conf_get(cf, i, "user", &line)) != NULL) {
		/* Only the shape here: the account is looked up (NSS) by main before start-up
		 * and by -t, never at a reload, which runs under the filter. */
		if (!config_user_valid(s)) {
			cerr_add(ce, line, "user: an account name or a decimal uid (letters, digits, "
			    "'.', '_', '-', at most %d bytes)", CONFIG_USER_MAX);
		} else {
			free(c->user);
			c->user = cdup(ce, s);
			c->user_line = line;
		}
	}
	if ((s = conf_get(cf, i, "metrics_listen", &line)) != NULL) {
		struct addr a;
		if (config_parse_sockaddr(s, false, &c->metrics_addr, &c->metrics_addrlen,
		    &es) != 0) {
			cerr_add(ce, line, "metrics_listen: %s", es);
		} else {
			addr_from_sockaddr(&a, (struct sockaddr *)&c->metrics_addr);
			if (addr_classify(&a, NULL) != ADDR_CLASS_LOOPBACK)
				cerr_add(ce, line, "metrics_listen: must be a loopback address");
			else
				c->has_metrics = true;
		}
	}
	if ((s = conf_get(cf, i, "route", &line)) != NULL &&
	    route_config_parse(s, &c->route, &es) != 0)
		cerr_add(ce, line, "route: %s", es);
	if (conf_get_bool(cf, i, "allow_direct", true, &b, e1, sizeof(e1)) != 0)
		cerr_raw(ce, conf_line(cf, i, "allow_direct"), e1);
	else
		c->route.allow_direct = b;
	{
		static const struct { const char *key; size_t off; } paths[] = {
			{ "route_helper", offsetof(struct route_config, helper) },
			{ "pac_copy", offsetof(struct route_config, pac_copy) },
			{ "proxy_credentials", offsetof(struct route_config, credentials) },
			{ "proxy_ca_file", offsetof(struct route_config, proxy_ca_file) },
		};
		for (size_t k = 0; k < EGRESS_NELEM(paths); k++)
			(void)path_key(cf, i, paths[k].key,
			    (char **)((char *)&c->route + paths[k].off), ce);
	}
	if ((s = conf_get(cf, i, "wpad_domain", &line)) != NULL) {
		struct host wh;
		if (host_parse(s, strlen(s), HOST_NO_PORT, &wh) != HOST_OK || wh.kind != HOST_NAME)
			cerr_add(ce, line, "wpad_domain: a DNS domain name");
		else
			c->route.wpad_domain = cdup(ce, wh.name);
	}
	if (conf_get_bool(cf, i, "splice", true, &b, e1, sizeof(e1)) != 0)
		cerr_raw(ce, conf_line(cf, i, "splice"), e1);
	else
		c->splice = b;
	if (conf_get(cf, i, "connections", NULL) != NULL) {
		if ((s = path_key(cf, i, "connections", &c->connections_path, ce)) != NULL) {
			/* Credential files are root-only: read here, as root, before the drop.
			 * A reload (after the drop) keeps what start-up read from the same files,
			 * as proxy_credentials does (docs/model-connections.md). */
			static const struct connections none;   /* a reload that adds the file */
			char *cerr = malloc(CONFIG_CONN_ERRORS_MAX);
			const struct connections *keep = ce->prev == NULL ? NULL :
			    ce->prev->conns != NULL ? ce->prev->conns : &none;

			line = conf_line(cf, i, "connections");
			if (cerr == NULL) {
				ce->oom = true;
			} else {
				c->conns = connections_load(s, geteuid() == 0, keep, cerr,
				    CONFIG_CONN_ERRORS_MAX);
				/* Every problem of the connections file, one entry each. */
				for (char *p = cerr, *nl; c->conns == NULL && p != NULL && *p != '\0';
				    p = nl != NULL ? nl + 1 : NULL) {
					if ((nl = strchr(p, '\n')) != NULL)
						*nl = '\0';
					cerr_add(ce, line, "connections: %s", p);
				}
				free(cerr);
			}
			/* Intercepted origins are verified against the host trust store (or the
			 * file named here: labs, private CAs). */
			s = conf_get(cf, i, "origin_ca_file", &line);
			c->origin_ctx = mitm_client_ctx(s, e1, sizeof(e1));
			if (c->origin_ctx == NULL)
				cerr_add(ce, s != NULL ? line : conf_line(cf, i, "connections"),
				    "origin_ca_file: %s", e1);
		}
	} else if (conf_get(cf, i, "origin_ca_file", &line) != NULL) {
		cerr_add(ce, line, "origin_ca_file is only for connections");
	}
	{
		const char *cert = conf_get(cf, i, "intercept_ca_cert", &line);
		const char *key = conf_get(cf, i, "intercept_ca_key", NULL);

		if ((cert == NULL) != (key == NULL)) {
			cerr_add(ce, line ? line : conf_line(cf, i, "intercept_ca_key"),
			    "intercept_ca_cert and intercept_ca_key go together");
		} else if (cert != NULL && ce->prev != NULL) {
			/* A reload runs after the drop: the root-only key cannot be read again,
			 * so the CA start-up loaded stays in use (as proxy_credentials do). */
			const struct egressd_config *p = ce->prev;

			if (p->mitm_ca == NULL || p->mitm_ca_cert == NULL || p->mitm_ca_key == NULL ||
			    strcmp(p->mitm_ca_cert, cert) != 0 || strcmp(p->mitm_ca_key, key) != 0)
				cerr_add(ce, line, "intercept_ca_cert, intercept_ca_key: another CA than "
				    "at start-up takes a restart (the key is root-only and read once, "
				    "before the privilege drop)");
			else
				c->mitm_ca = mitm_ca_ref(p->mitm_ca);
		} else if (cert != NULL) {
			c->mitm_ca = mitm_ca_load(cert, key, geteuid() == 0, e1, sizeof(e1));
			if (c->mitm_ca == NULL)
				cerr_add(ce, line, "intercept_ca_cert: %s", e1);
		}
		if (cert != NULL && key != NULL) {
			c->mitm_ca_cert = cdup(ce, cert);
			c->mitm_ca_key = cdup(ce, key);
		}
	}
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
config_build(struct conf *cf, const struct egressd_config *prev, char *err, size_t errlen)
{
	struct egressd_config *c = calloc(1, sizeof(*c));
	struct cerrs *ce = calloc(1, sizeof(*ce));
	const char *s, *es;
	unsigned line;
	long sec;

	if (c == NULL || ce == NULL) {
		snprintf(err, errlen, "%s: out of memory loading the configuration", conf_file(cf));
		free(c);
		free(ce);
		return NULL;
	}
	ce->cf = cf;
	ce->prev = prev;
	DUP_OR_OOM(c->path, conf_file(cf));
	DUP_OR_OOM(c->control_socket, EGRESS_CONTROL_SOCKET_DEFAULT);
	DUP_OR_OOM(c->decision_log, EGRESS_DECISION_LOG_DEFAULT);
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
	if (sec >= 0)
		load_main(cf, (size_t)sec, c, ce);
	if (ce->oom)
		goto oom;
	if (c->route.pac_copy == NULL) {
		/* The fetched PAC's good copy lives beside the decision log by default. */
		const char *slash = strrchr(c->decision_log, '/');
		size_t dl = slash ? (size_t)(slash - c->decision_log) : 0;
		size_t cap = dl + sizeof("/egressd-pac.js");
		c->route.pac_copy = malloc(cap);
		if (c->route.pac_copy == NULL)
			goto oom;
		snprintf(c->route.pac_copy, cap, "%.*s/egressd-pac.js", (int)dl, c->decision_log);
	}
	if (c->state_file == NULL) {
		/* Static-grant memory (grantstate.h) beside the configuration by default: one
		 * per configuration file, in a directory root already controls. */
		size_t cap = strlen(c->path) + sizeof(".state");
		c->state_file = malloc(cap);
		if (c->state_file == NULL)
			goto oom;
		snprintf(c->state_file, cap, "%s.state", c->path);
	}

	/* Grants first, so listeners can name them. */
	for (size_t i = 0; i < conf_nsections(cf); i++) {
		if (strncmp(conf_section_name(cf, i), "grant ", 6) != 0)
			continue;
		const char *label = conf_section_label(cf, i);
		if (config_find_grant(c, label) != NULL) {
			cerr_add(ce, conf_section_line(cf, i), "[grant %s] defined twice", label);
			continue;
		}
		struct config_grant *ng = realloc(c->grants, (c->ngrants + 1) * sizeof(*ng));
		if (ng == NULL)
			goto oom;
		c->grants = ng;
		memset(&c->grants[c->ngrants], 0, sizeof(c->grants[0]));
		if (load_grant(cf, i, &c->grants[c->ngrants], ce) != 0)
			continue;
		c->ngrants++;
		{
			/* model_connection: resolved against this configuration's connections file,
			 * and a static grant has no run CA: the operator's must be configured. */
			const struct grant *g = c->grants[c->ngrants - 1].grant;
			unsigned mline = conf_line(cf, i, "model_connection");
			char e2[512];

			if (config_check_connection(c, g, e2, sizeof(e2)) != CONN_CHECK_OK)
				cerr_add(ce, mline, "[grant %s] model_connection: %s", label, e2);
			else if (g->connection[0] != '\0' && c->mitm_ca == NULL)
				cerr_add(ce, mline, "[grant %s] model_connection: a static grant needs "
				    "the operator's interception CA (intercept_ca_cert and "
				    "intercept_ca_key)", label);
		}
	}
	for (size_t i = 0; i < conf_nsections(cf); i++) {
		if (strncmp(conf_section_name(cf, i), "listener ", 9) != 0)
			continue;
		const char *label = conf_section_label(cf, i);
		struct config_listener *nl = realloc(c->listeners,
		    (c->nlisteners + 1) * sizeof(*nl));
		bool bad = false;
		if (nl == NULL)
			goto oom;
		c->listeners = nl;
		struct config_listener *L = &c->listeners[c->nlisteners];
		memset(L, 0, sizeof(*L));
		s = conf_get(cf, i, "listen", &line);
		if (s == NULL || config_parse_sockaddr(s, false, &L->addr, &L->addrlen, &es) != 0) {
			cerr_add(ce, s == NULL ? conf_section_line(cf, i) : line,
			    "[listener %s] listen: %s", label, s == NULL ? "missing" : es);
			bad = true;
		}
		for (size_t k = 0; !bad && k < c->nlisteners; k++) {
			if (c->listeners[k].addrlen == L->addrlen &&
			    memcmp(&c->listeners[k].addr, &L->addr, L->addrlen) == 0) {
				cerr_add(ce, line, "[listener %s] listen: address already used by "
				    "[listener %s]", label, c->listeners[k].name);
				bad = true;
			}
		}
		s = conf_get(cf, i, "grant", &line);
		if (s == NULL || config_find_grant(c, s) == NULL) {
			/* a grant that exists but had its own error is reported there */
			bool defined = false;
			for (size_t k = 0; s != NULL && k < conf_nsections(cf); k++)
				if (strncmp(conf_section_name(cf, k), "grant ", 6) == 0 &&
				    strcmp(conf_section_label(cf, k), s) == 0)
					defined = true;
			if (!defined)
				cerr_add(ce, s == NULL ? conf_section_line(cf, i) : line,
				    "[listener %s] grant: no [grant %s] in this file", label,
				    s == NULL ? "" : s);
			bad = true;
		}
		if (bad)
			continue;
		L->name = cdup(ce, label);
		L->grant_name = cdup(ce, s);
		L->line = line;
		c->nlisteners++;          /* counted first: config_free frees what was copied */
		if (L->name == NULL || L->grant_name == NULL)
			goto oom;
	}
	/* Sections other than the schema's are refused by conf already; a bare [listener]
	 * or [grant] without a label would be an exact-name section: refuse it here. */
	for (size_t i = 0; i < conf_nsections(cf); i++) {
		const char *nm = conf_section_name(cf, i);
		if (strcmp(nm, "egressd") != 0 && strcmp(nm, "") != 0 &&
		    strncmp(nm, "grant ", 6) != 0 && strncmp(nm, "listener ", 9) != 0)
			cerr_add(ce, conf_section_line(cf, i), "unknown section [%s]", nm);
	}
	if (ce->oom)
		goto oom;
	if (ce->n > 0 || ce->dropped > 0) {
		cerr_report(ce, err, errlen);
		free(ce);
		config_free(c);
		return NULL;
	}
	free(ce);
	return c;

oom:
	snprintf(err, errlen, "%s: out of memory loading the configuration", conf_file(cf));
	free(ce);
	config_free(c);
	return NULL;
}

/* The configuration of a loaded file (cf is freed); prev: the running one (a reload). */
static struct egressd_config *
config_take(struct conf *cf, const struct egressd_config *prev, char *err, size_t errlen)
{
	struct egressd_config *c;

	if (cf == NULL)
		return NULL;
	c = config_build(cf, prev, err, errlen);
	conf_free(cf);
	return c;
}

struct egressd_config *
config_reload(const char *path, const struct egressd_config *prev, char *err, size_t errlen)
{
	return config_take(conf_load(path, config_schema, EGRESS_NELEM(config_schema), err,
	    errlen), prev, err, errlen);
}

struct egressd_config *
config_load(const char *path, char *err, size_t errlen)
{
	return config_reload(path, NULL, err, errlen);
}

struct egressd_config *
config_load_string(const char *name, const char *text, size_t len, char *err, size_t errlen)
{
	return config_take(conf_load_string(name, text, len, config_schema,
	    EGRESS_NELEM(config_schema), err, errlen), NULL, err, errlen);
}
