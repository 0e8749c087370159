/*
 * hostroute - the host route and proxy authentication of egress-exec's private egressd.
 *
 * Owns: struct hostroute (hostroute_clear wipes the password it may hold) and the
 * generated credentials file of one run.
 * Callers: executor/egressd_client (egressd_embedded_start: the private egressd's config),
 * executor/doctor (what a run will do, and why).
 *
 * A private egressd reaches allowed destinations the way the person who ran egress-exec
 * would (DESIGN: the host route is honoured by default): `route = system`, i.e. libproxy
 * with the caller's proxy variables (egressd inherits egress-exec's environment), its
 * system settings and PAC (`pac+URL`). It authenticates to that route as that person,
 * with what only egressd will hold (docs/routing.md, "A private egressd"):
 *
 *  - the operator's proxy credentials file: $EGRESS_PROXY_CREDENTIALS, else
 *    /etc/egressd/proxy-credentials.ini when present (root-only, else ignored with a reason);
 *  - for the proxy named in the caller's own proxy variable (https_proxy, HTTPS_PROXY,
 *    http_proxy, HTTP_PROXY, all_proxy, ALL_PROXY, first usable), unless the operator's file
 *    has an entry for it: Basic with the variable's user:password, or else Negotiate with
 *    the person's Kerberos cache — KRB5CCNAME (FILE: caches only), or under sudo the
 *    default cache of SUDO_UID (/tmp/krb5cc_UID), or the caller's own default cache. egressd
 *    copies that cache into memory at start-up, before its privilege drop (`ccache_import`).
 *    EGRESS_PROXY_AUTH=none turns this off (the operator's file is still used).
 *
 * Everything is written to a root-only file in the run folder, which the worker never
 * sees (its mount namespace has no /run/egress-exec). Proxies a PAC chooses are
 * authenticated only through the operator's file.
 */
#ifndef EGRESS_HOSTROUTE_H
#define EGRESS_HOSTROUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/limits.h"

#define HOSTROUTE_OPERATOR_CREDENTIALS "/etc/egressd/proxy-credentials.ini"
#define HOSTROUTE_USERINFO_MAX         256   /* user or password from a proxy URL */

struct hostroute {
	char var[32];                  /* the variable naming the proxy, "" when none */
	char bad[400];                 /* a proxy variable set but unreadable (common/proxyurl
	                                  proxyenv_check): the private egressd refuses every
	                                  hop with route_unavailable; "" when none */
	char shown[EGRESS_PATH_MAX];   /* its value with any user:password hidden */
	char proxy[EGRESS_HOSTPORT_MAX]; /* canonical host:port of that proxy, "" for none/PAC */
	bool pac;                      /* the value is pac+URL or wpad:// */
	bool by_address;               /* the proxy is an IP literal (no Negotiate possible) */
	char user[HOSTROUTE_USERINFO_MAX];
	char pass[HOSTROUTE_USERINFO_MAX];   /* wiped by hostroute_clear */
	char ccache[EGRESS_PATH_MAX];  /* the person's Kerberos cache file, "" when none */
	char ccache_from[64];          /* "KRB5CCNAME", "SUDO_UID 1000", "uid 0" */
	char ccache_why[256];          /* why none was found (for doctor) */
	char operator_file[EGRESS_PATH_MAX]; /* the operator's credentials file, "" none */
	char operator_why[160];        /* why it is not used (for doctor), "" when used/absent */
	bool operator_has_proxy;       /* the operator's file has an entry for `proxy` */
	bool auth_off;                 /* EGRESS_PROXY_AUTH=none */
	char scheme[16];               /* what the run uses for `proxy`: "basic", "negotiate",
	                                  "operator file", or "" (none) */
};

/* Work out the plan from env (NAME=VALUE, NULL-terminated: the caller's environment). */
void hostroute_plan(char *const *env, struct hostroute *h);

/*
 * Write the private egressd's credentials file at path (0600, O_EXCL): the operator's
 * file verbatim, then a section for h->proxy when the plan has one. Returns 1 when written,
 * 0 when there is nothing to write (no file made), -1 with err.
 */
int hostroute_write_credentials(const struct hostroute *h, const char *path, char *err,
    size_t errlen);

/* Wipe the password. */
void hostroute_clear(struct hostroute *h);

/* For tests: parse a proxy variable's value. Returns 0 and fills proxy/shown/user/pass/
 * pac/by_address of h; -1 when the value is not a usable proxy URL. */
int hostroute_parse_proxy(const char *value, struct hostroute *h);

#endif
