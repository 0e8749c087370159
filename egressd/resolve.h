/*
 * resolve - egressd's own DNS: c-ares driven by the libevent loop, with a bounded cache.
 *
 * Owns: the c-ares channel, its sockets and timer events, the answer cache, and every
 * struct resolve_req until its callback has returned or it was cancelled.
 * Callers: egressd's session code, on the event-loop thread only (nothing here is
 * thread-safe and nothing here blocks).
 *
 * Policy (why):
 * - Only the servers from the configuration, or the system's resolv.conf when none are
 *   configured, are asked. There is never a fallback to another resolver, to /etc/hosts
 *   or to getaddrinfo(3): an answer egressd did not get from its configured DNS is not an
 *   answer it can attest. c-ares is set to DNS-only lookups ("b"), no search domains,
 *   no /etc/hosts.
 * - Names must already be canonical host names (common/host, kind HOST_NAME). IP literals
 *   are the caller's business (c-ares and glibc disagree on what a literal is); a name that
 *   common/addr considers a literal or a non-canonical numeric form is refused with
 *   REASON_DNS_ERROR and never sent to c-ares.
 * - Only the final addresses of a CNAME chain are returned (c-ares' getaddrinfo follows
 *   the chain); the minimum TTL covers the CNAME records of the chain too.
 * - Address order: the server's order within each family (no RFC 6724 sorting, which
 *   would probe routes with connect()), then the two families interleaved, starting with
 *   IPv6 by default (RFC 8305 style) or IPv4 when cfg->prefer_ipv4. Duplicates removed.
 *   At most EGRESS_DNS_ADDRS_MAX addresses are kept.
 * - Single flight: while a lookup of a name runs, every further request for that name
 *   waits for the same answer instead of asking again, so N simultaneous hops to one
 *   uncached name cost one A and one AAAA query. Each waiter still has its own handle:
 *   cancelling one leaves the others waiting; each gets its own callback and duration.
 * - Time bound: a lookup ends at most timeout_ms x attempts after it started (the c-ares
 *   answer or REASON_DNS_TIMEOUT, whichever comes first). c-ares sends attempt k with
 *   a timeout of timeout_ms x 2^(k-1) (2 s then 4 s: 6 s for 2 attempts); egressd cuts
 *   the lookup at the total the configuration states (4 s), so later attempts get what
 *   is left of it.
 * - Cache: at most cache_max names (LRU eviction), each kept for min(min TTL, ttl_cap_s)
 *   seconds. An answer with TTL 0 is never cached, so a rebinding server that answers
 *   TTL 0 is asked again on every hop. Failures (NXDOMAIN, SERVFAIL, timeout) are not
 *   cached either.
 */
#ifndef EGRESS_RESOLVE_H
#define EGRESS_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/addr.h"
#include "common/limits.h"
#include "common/reasons.h"

struct event_base;
struct resolver;
struct resolve_req;

#define RESOLVE_SERVERS_MAX 8

struct resolver_config {
	/* "ip" or "ip:port" or "[v6]:port" entries; nservers == 0 means the system's
	 * /etc/resolv.conf (c-ares' own parser). At most RESOLVE_SERVERS_MAX. */
	const char *const *servers;
	size_t nservers;
	unsigned timeout_ms;     /* per-attempt timeout; 0 = default 2000 */
	unsigned attempts;       /* attempts; 0 = default 2. A lookup ends after
	                            timeout_ms x attempts in total (see above) */
	unsigned cache_max;      /* 0 = EGRESS_DNS_CACHE_MAX; larger values are capped to it */
	unsigned ttl_cap_s;      /* 0 = EGRESS_DNS_TTL_CAP_S */
	bool prefer_ipv4;        /* interleave starting with IPv4 instead of IPv6 */
	bool no_cache;           /* disable the cache entirely (tests, paranoid setups) */
};

struct resolve_answer {
	enum reason status;      /* REASON_ALLOWED on success; otherwise one of
	                            REASON_DNS_NXDOMAIN, REASON_DNS_SERVFAIL (SERVFAIL,
	                            REFUSED, NOTIMP, connection refused by the server),
	                            REASON_DNS_TIMEOUT, REASON_DNS_NO_ADDRESS (NODATA or no
	                            A/AAAA in the final answer), REASON_DNS_ERROR (malformed
	                            answer, bad name, ENOMEM, shutdown) */
	const char *name;        /* the name that was looked up */
	struct addr addrs[EGRESS_DNS_ADDRS_MAX];
	size_t naddrs;           /* > 0 exactly when status == REASON_ALLOWED */
	uint32_t ttl_s;          /* min TTL of the answer (addresses and CNAMEs), before the
	                            cap; for a cache hit, the seconds left in the cache */
	bool from_cache;
	uint64_t duration_us;    /* from resolver_lookup to the callback */
	int ares_status;         /* raw c-ares status for operator logs (ARES_SUCCESS = 0) */
};

/*
 * Called exactly once per lookup on the loop thread, unless the request was cancelled
 * first. ans and everything it points to are valid only during the call (copy what you
 * keep). The request handle is invalid once the callback starts: do not cancel it from
 * inside the callback or later. The callback may start new lookups and may cancel other
 * requests; it must not call resolver_free.
 */
typedef void (*resolve_cb)(const struct resolve_answer *ans, void *arg);

/*
 * New resolver on base. Returns NULL with a message in err (e.g. "servers[1]: invalid
 * address", "c-ares init: ...") on failure. The resolver must be freed before base.
 */
struct resolver *resolver_new(struct event_base *base, const struct resolver_config *cfg,
    char *err, size_t errlen);

/*
 * Free the resolver, its cache and every outstanding request WITHOUT calling their
 * callbacks (the caller is shutting down; its handles become invalid). Accepts NULL.
 */
void resolver_free(struct resolver *r);

/*
 * Look up A and AAAA for name (canonical, NUL-terminated, <= EGRESS_HOSTNAME_MAX).
 * Returns a handle, or NULL only on ENOMEM (errno set; the callback never fires).
 * The callback never runs from inside resolver_lookup, not even for a cache hit or an
 * immediately refused name: it always runs later from the event loop.
 */
struct resolve_req *resolver_lookup(struct resolver *r, const char *name, resolve_cb cb,
    void *arg);

/*
 * Cancel a request whose callback has not started yet. Afterwards the callback never
 * fires and the handle is invalid (the resolver frees it when c-ares is done with the
 * query). Accepts NULL.
 */
void resolve_cancel(struct resolve_req *req);

/*
 * Retire r (on reload, when a new resolver takes over): its cache is dropped, requests in
 * flight complete (or are cancelled) normally, and r frees itself from the event loop once
 * none is left (at once, from the loop, when none is pending). The caller must not start
 * new lookups on r nor free it afterwards; handles of its outstanding requests stay valid
 * until their callback starts or they are cancelled. The event_base must outlive the
 * drain (a retired resolver still pending when the base is freed is leaked, harmlessly).
 */
void resolver_retire(struct resolver *r);

/*
 * Would resolver_lookup(name) now send queries, i.e. start a new lookup? False when the
 * name is cached, a lookup of it is running (the request would join it), or it would be
 * refused without a query. egressd's per-principal limit on DNS lookups counts only the
 * lookups that ask the DNS server: a hop served by the cache or by a running lookup costs
 * it nothing.
 */
bool resolver_would_query(struct resolver *r, const char *name);

/* Requests whose callback has not yet run, cancelled ones excluded. */
size_t resolver_pending(const struct resolver *r);

/* Drop every cached answer (on reload, or when the servers changed). */
void resolver_flush(struct resolver *r);

/* Number of cached names (metrics, tests). */
size_t resolver_cache_size(const struct resolver *r);

#endif
