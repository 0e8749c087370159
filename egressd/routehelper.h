/*
 * routehelper - egressd's client of egressd-route-helper (the libproxy process).
 *
 * Owns: a small pool of helper processes (at most EGRESS_ROUTE_HELPERS_MAX, started on
 * demand; each evaluates one lookup at a time, so a lookup stuck in a looping PAC holds up
 * only itself), every struct rh_req until its callback ran or it was cancelled, and a
 * bounded cache of answers (per query URL, with a TTL). A helper that misses a deadline or
 * dies is killed and replaced; lookups queued for a free helper wait within their own
 * deadline.
 * Callers: egressd/route, on the event-loop thread only. Nothing here blocks: the helper is
 * spoken to over a socketpair driven by a bufferevent.
 *
 * Fail closed: a missed deadline answers REASON_ROUTE_TIMEOUT; a dead or unstartable
 * helper or an unusable reply REASON_ROUTE_UNAVAILABLE; a PAC copy the helper cannot read
 * (or that egressd did not write) REASON_PAC_UNAVAILABLE. Never "direct" by default.
 */
#ifndef EGRESS_ROUTEHELPER_H
#define EGRESS_ROUTEHELPER_H

#include <stddef.h>
#include <stdint.h>

#include "common/reasons.h"
#include "common/routeproto.h"

struct event_base;
struct routehelper;
struct rh_req;

struct routehelper_config {
	const char *helper_path;      /* absolute path of egressd-route-helper */
	const char *const *envp;      /* the helper's whole environment (NULL-terminated):
	                                 http_proxy=pac+file://..., or the daemon's proxy vars */
	uint32_t deadline_ms;         /* per lookup */
	uint32_t cache_ttl_s;         /* 0 = no cache */
	size_t cache_max;             /* entries; <= EGRESS_ROUTE_CACHE_MAX */
};

/* status is REASON_ALLOWED with reply->ok set, or the reason there is no route (reply may
 * be NULL then). reply is valid only during the call. */
typedef void (*rh_cb)(enum reason status, const struct routeproto_reply *reply, void *arg);

/* The config's strings are copied. NULL with err on failure. */
struct routehelper *routehelper_new(struct event_base *base,
    const struct routehelper_config *cfg, char *err, size_t errlen);
/* Kills the helper; outstanding requests are freed without callbacks. Accepts NULL. */
void routehelper_free(struct routehelper *rh);

/* Look up the route for a query URL (routeproto_query_url). The callback never runs from
 * inside this call (cache hits are delivered from a zero timer). NULL on ENOMEM. */
struct rh_req *routehelper_lookup(struct routehelper *rh, const char *url, rh_cb cb,
    void *arg);
void routehelper_cancel(struct rh_req *req);

/* Forget cached answers and replace the helpers (a new PAC copy): lookups in flight are
 * asked again of fresh helpers, within their own deadlines. */
void routehelper_reset(struct routehelper *rh);
/* Replace the helpers' environment (copied), then routehelper_reset: egressd/route switching
 * to its own WPAD discovery hands the helpers its PAC copy. Never from inside a lookup's
 * callback. 0, or -1 on ENOMEM (nothing changed). */
int routehelper_set_env(struct routehelper *rh, const char *const *envp);

/* Counters for metrics and tests. */
struct routehelper_stats {
	uint64_t lookups, cache_hits, timeouts, restarts, failures;
	uint64_t start_failures;      /* helpers that could not be started */
	long pid;                     /* the first live helper's pid, 0 when none */
	size_t helpers;               /* live helper processes */
};
void routehelper_stats(const struct routehelper *rh, struct routehelper_stats *out);

#endif
