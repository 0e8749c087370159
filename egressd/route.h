/*
 * route - the host route of an already-authorized hop: how this machine reaches it.
 *
 * Owns: struct router and every struct route_req until its callback ran or it was
 * cancelled. Callers: egressd/session, on the event-loop thread only.
 *
 * Why a module of its own with an asynchronous interface: DESIGN rule 1 puts routing after
 * authorization, and the host-route issue will answer from a libproxy helper process (PAC,
 * system proxy) that takes time and can fail. Today only `direct` exists; the session
 * already waits for a callback, so the helper plugs in here without touching the session.
 * An unavailable route is a denial (REASON_ROUTE_UNAVAILABLE / REASON_ROUTE_TIMEOUT), never
 * a silent fallback to direct.
 */
#ifndef EGRESS_ROUTE_H
#define EGRESS_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "common/pattern.h"
#include "common/reasons.h"

struct event_base;
struct router;
struct route_req;

/* Configured route source (egressd.ini `route`). */
enum route_kind { ROUTE_KIND_DIRECT = 0 };

/* "direct" -> 0 and *out, or -1. */
int route_kind_parse(const char *s, enum route_kind *out);
const char *route_kind_str(enum route_kind k);

enum route_entry_kind { ROUTE_DIRECT, ROUTE_PROXY };

struct route_entry {
	enum route_entry_kind kind;
	char url[EGRESS_ROUTE_LINE_MAX];     /* ROUTE_PROXY: "http://proxy:3128"; else "" */
};

struct route_result {
	enum reason status;                  /* REASON_ALLOWED, or why there is no route */
	struct route_entry entries[EGRESS_ROUTE_PROXIES_MAX];   /* try in order */
	size_t n;
};

/* Called once on the loop thread unless cancelled first; res valid only during the call. */
typedef void (*route_cb)(const struct route_result *res, void *arg);

/* NULL with err on failure. Free before the event_base. */
struct router *router_new(struct event_base *base, enum route_kind kind, char *err,
    size_t errlen);
/* Frees outstanding requests without calling their callbacks. Accepts NULL. */
void router_free(struct router *r);

/*
 * Route for scheme://host:port (host canonical). Returns a handle, or NULL on ENOMEM.
 * The callback never runs from inside route_lookup.
 */
struct route_req *route_lookup(struct router *r, enum dest_scheme scheme, const char *host,
    uint16_t port, route_cb cb, void *arg);
/* Cancel before the callback ran; accepts NULL. */
void route_cancel(struct route_req *req);

#endif
