/*
 * route - the host route of an already-authorized hop: how this machine reaches it.
 *
 * Owns: struct router (its route helper, PAC fetcher, proxy credentials and TLS context for
 * https:// proxies) and every struct route_req until its callback ran or it was cancelled.
 * Callers: egressd/session and egressd/control (route queries), loop thread only.
 *
 * Sources (egressd.ini `route`):
 *   direct            every hop goes straight to its pinned address
 *   system            libproxy with egressd's own environment (http_proxy, https_proxy,
 *                     no_proxy; a "pac+URL" value is fetched by egressd, see below; a
 *                     "wpad://" value is WPAD discovery by DNS, egressd/wpad.h); a
 *                     variable set but unreadable (proxyenv_check: " wpad://", "htp:/x")
 *                     refuses every hop with route_unavailable, where libproxy would go
 *                     direct; router_pac_status names it, egressd -t fails on it
 *   pac URL|FILE      a PAC file: an http(s) URL egressd fetches itself (pacfetch), or a
 *                     local file egressd copies; evaluated by libproxy in the helper
 *   proxy URL         one static upstream proxy (http://, https://, socks5://)
 * system and pac run libproxy in egressd-route-helper (routehelper): never on the loop.
 *
 * Why a module of its own with an asynchronous interface: DESIGN rule 1 puts routing after
 * authorization — a route is never a grant. An unavailable route is a denial
 * (REASON_ROUTE_UNAVAILABLE, ROUTE_TIMEOUT, PAC_UNAVAILABLE), never a silent fallback to
 * direct; a DIRECT answer is dropped when allow_direct is off (DIRECT_NOT_PERMITTED when
 * nothing else remains). direct and proxy need no lookup: route_static answers them at
 * once, for a caller that may go on in the same call.
 */
#ifndef EGRESS_ROUTE_H
#define EGRESS_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/host.h"
#include "common/limits.h"
#include "common/pattern.h"
#include "common/reasons.h"
#include "common/proxyurl.h"

struct event_base;
struct resolver;
struct router;
struct route_req;
struct proxycreds;

/* Configured route source (egressd.ini `route`). */
enum route_kind { ROUTE_KIND_DIRECT = 0, ROUTE_KIND_SYSTEM, ROUTE_KIND_PAC, ROUTE_KIND_PROXY };

struct route_config {
	enum route_kind kind;
	char *pac;                  /* ROUTE_KIND_PAC: http(s) URL or absolute file path */
	char *proxy;                /* ROUTE_KIND_PROXY: the proxy URL */
	bool allow_direct;          /* may a system/PAC answer of DIRECT be used? */
	char *helper;               /* egressd-route-helper path; NULL = next to egressd */
	uint64_t timeout_ms;        /* per route lookup (PAC evaluation deadline) */
	uint64_t cache_ttl_ms;      /* route answers cached per destination */
	char *pac_copy;             /* where the fetched PAC's good copy lives */
	uint64_t pac_timeout_ms;
	uint64_t pac_refresh_ms;
	char *credentials;          /* proxy credentials file (root-only), or NULL */
	char *proxy_ca_file;        /* trust anchors for https:// proxies; NULL = system */
	uint64_t upstream_timeout_ms; /* connect + handshake with an upstream proxy */
	char *wpad_domain;          /* WPAD search domain; NULL = resolv.conf's (egressd/wpad) */
};

/* Parse the `route` value ("direct", "system", "pac URL|FILE", "proxy URL") into c->kind,
 * c->pac, c->proxy (heap strings). Returns 0, or -1 with *err a static sentence. */
int route_config_parse(const char *s, struct route_config *c, const char **err);
void route_config_clear(struct route_config *c);   /* frees the strings */
/* What `egressd -t` checks beyond parsing, without starting anything: the credentials file
 * (root-only, well-formed), a local PAC file (readable, a PAC), the route helper binary,
 * the directory of the PAC copy, and for route = system that every proxy variable set is
 * readable. Returns 0, or -1 with err. */
int route_config_check(const struct route_config *c, char *err, size_t errlen);
const char *route_kind_str(enum route_kind k);

struct route_result {
	enum reason status;                  /* REASON_ALLOWED, or why there is no route */
	struct proxy_route entries[EGRESS_ROUTE_PROXIES_MAX];   /* try in order */
	size_t n;
	const char *source;                  /* "direct", "system", "pac", "proxy" */
	bool from_cache;
};

/* Called once on the loop thread unless cancelled first; res valid only during the call. */
typedef void (*route_cb)(const struct route_result *res, void *arg);

/* cfg is copied. res resolves PAC servers and proxies. NULL with err on failure (a bad
 * proxy URL, an unreadable PAC file, a missing helper, a credentials file that is not
 * root-only). Free before the event_base and the resolver.
 * prev (a reload: the running router, or NULL): when cfg names the same
 * proxy_credentials file, its credentials are shared, not read again — the file is
 * root-only and egressd no longer is; another file than at start-up is an error (it
 * takes a restart). */
struct router *router_new(struct event_base *base, struct resolver *res,
    const struct route_config *cfg, const struct router *prev, char *err, size_t errlen);
/* Frees outstanding requests without calling their callbacks. Accepts NULL. */
void router_free(struct router *r);

/*
 * Route for a hop to canonical host h on port (scheme as authorized). Returns a handle, or
 * NULL on ENOMEM. The callback never runs from inside route_lookup.
 */
struct route_req *route_lookup(struct router *r, enum dest_scheme scheme,
    const struct host *h, uint16_t port, route_cb cb, void *arg);
/*
 * The route when it does not depend on the destination (route = direct, or one static
 * proxy): true with res's status, entries[0], n, source and from_cache set, the same
 * answer route_lookup would deliver, with nothing to wait for (no allocation, no event:
 * the session goes on at once). False for PAC and system routes: ask route_lookup.
 */
bool route_static(const struct router *r, struct route_result *res);
/* Cancel before the callback ran; accepts NULL. */
void route_cancel(struct route_req *req);
/* Lookups whose callback has not run yet (reload swaps routers only when 0). */
size_t router_pending(const struct router *r);

/* What the session needs to go through a proxy entry. */
const struct proxycreds *router_credentials(const struct router *r);
/* SSL_CTX * for https:// proxies; the system trust store is loaded by the first call
 * (upstream.h), so call it only for an https:// proxy. NULL when it cannot be loaded (the
 * hop fails proxy_tls_failed; logged once per router). */
void *router_tls_ctx(struct router *r);
struct gssauth *router_gssauth(const struct router *r);
uint64_t router_upstream_timeout_ms(const struct router *r);
enum route_kind router_kind(const struct router *r);

/* For status and egressctl: a one-line description of the PAC state ("" when no PAC). */
const char *router_pac_status(const struct router *r);

#endif
