/*
 * config - egressd.ini: the [egressd] settings, static listeners and static grants.
 *
 * Owns: struct egressd_config and everything it points to (config_free accepts NULL).
 * A loaded config is immutable; a reload builds a whole new one and swaps it in only when
 * it loaded without error (all-or-nothing). Callers: egressd/main (start-up, -t, SIGHUP),
 * egressd/control (reload), tests/test_config.
 * Schema and defaults are documented in docs/egressd.md and conf/egressd.ini.
 */
#ifndef EGRESS_CONFIG_H
#define EGRESS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/cidr.h"
#include "common/grant.h"
#include "common/paths.h"
#include "egressd/dlog.h"
#include "egressd/route.h"

#define CONFIG_USER_MAX        63   /* bytes of an account name in [egressd] user / -u */

struct config_listener {
	char *name;                     /* section label */
	struct sockaddr_storage addr;   /* bind address */
	socklen_t addrlen;
	char *grant_name;               /* a [grant NAME] of the same file */
	unsigned line;
};

struct connections;
struct mitm_ca;
struct ssl_ctx_st;

struct config_grant {
	char *name;                     /* section label = principal */
	struct grant *grant;            /* owned */
	unsigned line;
};

struct egressd_config {
	char *path;
	char *control_socket;           /* NULL when "none" */
	char *decision_log;
	char *state_file;               /* static-grant journal (grantstate.h); default
					 * "<config path>.state". Start-up only */
	enum dlog_sync log_sync;
	uint64_t log_max_bytes;         /* size rotation of the decision log; 0 = off */
	char *log_hmac_key;             /* HMAC key file for the chain; NULL = plain SHA-256 */
	char *log_syslog;               /* syslog mirror target; NULL = none */
	unsigned log_syslog_line;       /* its line, for -t messages */
	char *log_syslog_ca;            /* tls://: the collector's CA file */
	char *log_syslog_name;          /* tls://: the name its certificate carries; NULL =
					 * its address */
	char *log_syslog_cert;          /* tls://: client certificate and key (optional) */
	char *log_syslog_key;
	uint64_t log_syslog_spool;      /* tcp://, tls://: spool bytes; 0 = the default.
					 * All log_syslog* settings are start-up only */
	char *user;                     /* account egressd drops to when started as root;
					 * NULL = the default (egressd, else nobody);
					 * syntax-checked here, resolved by main (NSS) */
	unsigned user_line;             /* its line, for -t messages */
	uint64_t connect_timeout_ms;
	uint64_t header_timeout_ms;
	uint64_t idle_timeout_ms;
	uint64_t tunnel_max_lifetime_ms;
	uint64_t drain_timeout_ms;
	uint32_t max_connections;
	uint32_t max_dns_pending;
	char **dns_servers;
	size_t ndns_servers;
	uint64_t dns_timeout_ms;
	unsigned dns_attempts;
	struct cidr_set allow_special;  /* operator override */
	bool has_metrics;
	struct sockaddr_storage metrics_addr;
	socklen_t metrics_addrlen;
	struct route_config route;      /* the host route (route.h) */
	bool splice;
	struct config_listener *listeners;
	size_t nlisteners;
	struct config_grant *grants;
	size_t ngrants;
	/* Model connections (docs/model-connections.md): the file and what it held when this
	 * configuration was loaded, credentials included (a reload replaces the set whole;
	 * the credentials are start-up's, see config_reload). */
	char *connections_path;         /* NULL = no connections */
	struct connections *conns;      /* owned */
	struct mitm_ca *mitm_ca;        /* the operator's interception CA (intercept_ca_cert,
	                                   intercept_ca_key: root-only), or NULL; one
	                                   reference (a reload shares start-up's) */
	char *mitm_ca_cert, *mitm_ca_key; /* their paths (a reload compares them) */
	struct ssl_ctx_st *origin_ctx;  /* TLS client context for intercepted origins (host
	                                   trust store, or origin_ca_file); set with
	                                   connections; owned */
};

/*
 * Load and validate a file (or a string named name, for tests). NULL on error with the
 * first problem in err as "file:line: message". Every listener must name a grant of the
 * same file; listener addresses must be literal addr:port; metrics_listen must be loopback.
 */
struct egressd_config *config_load(const char *path, char *err, size_t errlen);
/*
 * config_load for a reload: prev is the running configuration. The root-only secrets that
 * start-up read before the privilege drop (the connections' credential files, the
 * operator's interception CA key) are taken from prev when the new file names the same
 * files, never read again; naming other ones is an error that says a restart is needed
 * (as for proxy_credentials, route.c). Every other setting is read afresh.
 */
struct egressd_config *config_reload(const char *path, const struct egressd_config *prev,
    char *err, size_t errlen);
struct egressd_config *config_load_string(const char *name, const char *text, size_t len,
    char *err, size_t errlen);
void config_free(struct egressd_config *c);

/* The static grant called name, or NULL. */
const struct config_grant *config_find_grant(const struct egressd_config *c,
    const char *name);

/*
 * Does grant g's "connection" (if any) name a usable model connection of c? A grant
 * without one passes. Otherwise the connection must exist, have destinations and a
 * credential; else the problem in err. conn_check_code gives the control protocol's
 * error code ("unknown_connection", ...). Used for static grants at load and for
 * grant.create.
 */
enum conn_check { CONN_CHECK_OK = 0, CONN_CHECK_UNKNOWN, CONN_CHECK_NO_DESTINATIONS,
	CONN_CHECK_NO_CREDENTIAL };
enum conn_check config_check_connection(const struct egressd_config *c,
    const struct grant *g, char *err, size_t errlen);
const char *conn_check_code(enum conn_check k);

/*
 * True when s has the shape of an account name or decimal uid for [egressd] user and -u:
 * 1..CONFIG_USER_MAX bytes of [A-Za-z0-9._-], not starting with '-'. Says nothing about
 * whether the account exists or is root (sandbox_egressd_lookup decides that).
 */
bool config_user_valid(const char *s);

/*
 * Parse a literal "addr:port" ("127.0.0.1:3128", "[::1]:3128"); port 0 only when
 * allow_port0. Returns 0 or -1 with *err set to a static sentence.
 */
int config_parse_sockaddr(const char *s, bool allow_port0, struct sockaddr_storage *ss,
    socklen_t *len, const char **err);

#endif
