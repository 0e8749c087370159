/*
 * resolve.c - c-ares on the libevent loop, plus a bounded TTL cache. Contract: resolve.h.
 *
 * c-ares tells us which sockets it wants watched (ARES_OPT_SOCK_STATE_CB); each gets a
 * persistent libevent event that calls ares_process_fd. One timer follows ares_timeout so
 * retransmissions and deadlines run without polling.
 */
#include "egressd/resolve.h"

#include <ares.h>
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "common/log.h"
#include "common/util.h"

#define RESOLVE_DEFAULT_TIMEOUT_MS 2000
#define RESOLVE_DEFAULT_ATTEMPTS   2

struct sock_watch {
	LIST_ENTRY(sock_watch) link;
	ares_socket_t fd;
	struct event *ev;
	struct resolver *r;
};

struct cache_entry {
	struct cache_entry *hnext;          /* hash chain */
	TAILQ_ENTRY(cache_entry) lru;       /* most recently used first */
	char name[EGRESS_HOSTNAME_MAX + 1];
	struct addr addrs[EGRESS_DNS_ADDRS_MAX];
	size_t naddrs;
	uint64_t expires_ms;                /* mono_msec */
};

/*
 * One DNS lookup in c-ares, shared by every request for the same name that arrives while
 * it runs (single flight: one A and one AAAA query however many hops wait for the name).
 * The flight, not a request, is what c-ares holds: a request that is cancelled just
 * leaves its flight. A flight ends at the c-ares answer or at its deadline
 * (timeout x attempts, resolve.h), whichever is first; a flight whose deadline passed is
 * "abandoned" (unlinked, no waiters) until c-ares lets go of it.
 */
struct flight {
	struct flight *hnext;               /* flight table chain (not when abandoned) */
	struct resolver *r;
	char name[EGRESS_HOSTNAME_MAX + 1];
	LIST_HEAD(, resolve_req) waiters;
	struct event *deadline;
	bool abandoned;
};

struct resolve_req {
	LIST_ENTRY(resolve_req) link;       /* r->reqs */
	LIST_ENTRY(resolve_req) flink;      /* fl->waiters, while fl != NULL */
	struct resolver *r;
	struct flight *fl;     /* the flight it waits for, or NULL (answer ready/deferred) */
	resolve_cb cb;
	void *arg;
	char name[EGRESS_HOSTNAME_MAX + 1];
	uint64_t start_us;
	bool cancelled;
	struct event *ev;      /* delivery from the loop: made at lookup, so it cannot fail */
	struct resolve_answer ans;
};

#define RESOLVE_FLIGHT_BUCKETS 256

struct resolver {
	struct event_base *base;
	ares_channel ch;
	struct event *timer;
	LIST_HEAD(, sock_watch) socks;
	LIST_HEAD(, resolve_req) reqs;
	size_t pending;
	struct flight *flights[RESOLVE_FLIGHT_BUCKETS];
	uint64_t deadline_ms;               /* of one flight: timeout x attempts */
	bool destroying;
	bool retiring;
	struct event *retire_ev;
	LIST_ENTRY(resolver) retired_link;
	bool prefer_ipv4, no_cache;
	unsigned cache_max, ttl_cap_s;
	struct cache_entry **buckets;
	size_t nbuckets;                    /* power of two */
	TAILQ_HEAD(cache_lru_head, cache_entry) lru;
	size_t ncache;
};

/* Retired resolvers waiting for their last request; a global list keeps them reachable
 * (no leak report when the process exits before they drain). Loop thread only. */
static LIST_HEAD(, resolver) retired = LIST_HEAD_INITIALIZER(retired);

static void retire_check(struct resolver *r);

/* ---- cache ---- */

static size_t
name_hash(const char *s, size_t nb)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return (size_t)(h & (nb - 1));
}

static struct cache_entry **
cache_slot(struct resolver *r, const char *name)
{
	struct cache_entry **pp = &r->buckets[name_hash(name, r->nbuckets)];

	while (*pp != NULL && strcmp((*pp)->name, name) != 0)
		pp = &(*pp)->hnext;
	return pp;
}

static void
cache_remove(struct resolver *r, struct cache_entry **pp)
{
	struct cache_entry *e = *pp;

	*pp = e->hnext;
	TAILQ_REMOVE(&r->lru, e, lru);
	r->ncache--;
	free(e);
}

static void
cache_put(struct resolver *r, const char *name, const struct resolve_answer *ans,
    uint32_t ttl)
{
	struct cache_entry **pp, *e;

	if (r->no_cache || ttl == 0 || r->cache_max == 0)
		return;   /* TTL 0 is never cached: a rebinding answer is asked again */
	if (ttl > r->ttl_cap_s)
		ttl = r->ttl_cap_s;
	pp = cache_slot(r, name);
	if (*pp != NULL)
		cache_remove(r, pp);
	if (r->ncache >= r->cache_max) {
		struct cache_entry *old = TAILQ_LAST(&r->lru, cache_lru_head);

		cache_remove(r, cache_slot(r, old->name));
		pp = cache_slot(r, name);
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return;   /* a cache is an optimization: no entry is fine */
	snprintf(e->name, sizeof(e->name), "%s", name);
	memcpy(e->addrs, ans->addrs, ans->naddrs * sizeof(ans->addrs[0]));
	e->naddrs = ans->naddrs;
	e->expires_ms = mono_msec() + (uint64_t)ttl * 1000;
	e->hnext = *pp;
	*pp = e;
	TAILQ_INSERT_HEAD(&r->lru, e, lru);
	r->ncache++;
}

/* A live entry for name, or NULL (expired entries are dropped here). */
static struct cache_entry *
cache_get(struct resolver *r, const char *name)
{
	struct cache_entry **pp;

	if (r->no_cache)
		return NULL;
	pp = cache_slot(r, name);
	if (*pp == NULL)
		return NULL;
	if ((*pp)->expires_ms <= mono_msec()) {
		cache_remove(r, pp);
		return NULL;
	}
	TAILQ_REMOVE(&r->lru, *pp, lru);
	TAILQ_INSERT_HEAD(&r->lru, *pp, lru);
	return *pp;
}

void
resolver_flush(struct resolver *r)
{
	struct cache_entry *e;

	while ((e = TAILQ_FIRST(&r->lru)) != NULL)
		cache_remove(r, cache_slot(r, e->name));
}

size_t
resolver_cache_size(const struct resolver *r)
{
	return r->ncache;
}

/* ---- event integration ---- */

static void
timer_update(struct resolver *r)
{
	struct timeval tv, *tvp;

	if (r->destroying)
		return;
	tvp = ares_timeout(r->ch, NULL, &tv);
	if (tvp != NULL)
		evtimer_add(r->timer, tvp);
	else
		evtimer_del(r->timer);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct resolver *r = arg;

	(void)fd;
	(void)what;
	ares_process_fd(r->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	timer_update(r);
}

static void
on_sock(evutil_socket_t fd, short what, void *arg)
{
	struct sock_watch *w = arg;
	struct resolver *r = w->r;

	/* w may be freed inside ares_process_fd (c-ares closes the socket): use r only */
	ares_process_fd(r->ch, (what & EV_READ) ? (ares_socket_t)fd : ARES_SOCKET_BAD,
	    (what & EV_WRITE) ? (ares_socket_t)fd : ARES_SOCKET_BAD);
	timer_update(r);
}

static void
sock_state_cb(void *data, ares_socket_t fd, int readable, int writable)
{
	struct resolver *r = data;
	struct sock_watch *w;

	LIST_FOREACH(w, &r->socks, link)
		if (w->fd == fd)
			break;
	if (!readable && !writable) {
		if (w != NULL) {
			LIST_REMOVE(w, link);
			event_free(w->ev);
			free(w);
		}
		return;
	}
	if (w == NULL) {
		w = calloc(1, sizeof(*w));
		if (w == NULL) {
			log_warnx("resolver: out of memory watching a DNS socket");
			return;   /* the query times out via the timer: fails closed */
		}
		w->fd = fd;
		w->r = r;
		LIST_INSERT_HEAD(&r->socks, w, link);
	} else {
		event_free(w->ev);
	}
	w->ev = event_new(r->base, fd, (short)((readable ? EV_READ : 0) |
	    (writable ? EV_WRITE : 0) | EV_PERSIST), on_sock, w);
	if (w->ev == NULL || event_add(w->ev, NULL) != 0)
		log_warnx("resolver: cannot watch DNS socket %d", (int)fd);
}

/* ---- requests ---- */

static void
req_free(struct resolve_req *q)
{
	LIST_REMOVE(q, link);
	if (q->fl != NULL)
		LIST_REMOVE(q, flink);
	if (q->ev != NULL)
		event_free(q->ev);
	free(q);
}

static void
deliver(struct resolve_req *q)
{
	struct resolver *r = q->r;
	resolve_cb cb = q->cb;
	void *arg = q->arg;

	r->pending--;
	q->ans.duration_us = mono_usec() - q->start_us;
	q->ans.name = q->name;
	/* the callback may start or cancel other requests, never this one (resolve.h) */
	cb(&q->ans, arg);
	req_free(q);
	retire_check(r);
}

static void
on_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	deliver(arg);
}

/* Schedule delivery from the loop (never from inside resolver_lookup or a c-ares
 * callback). The event exists since the lookup, so this cannot fail. */
static void
defer(struct resolve_req *q)
{
	event_active(q->ev, 0, 0);
}

static enum reason
map_status(int st)
{
	switch (st) {
	case ARES_SUCCESS:
		return REASON_ALLOWED;
	case ARES_ENOTFOUND:
	case ARES_ENONAME:
		return REASON_DNS_NXDOMAIN;
	case ARES_ENODATA:
		return REASON_DNS_NO_ADDRESS;
	case ARES_ESERVFAIL:
	case ARES_EREFUSED:
	case ARES_ENOTIMP:
	case ARES_ECONNREFUSED:
		return REASON_DNS_SERVFAIL;
	case ARES_ETIMEOUT:
		return REASON_DNS_TIMEOUT;
	default:
		return REASON_DNS_ERROR;
	}
}

static bool
addr_seen(const struct addr *v, size_t n, const struct addr *a)
{
	for (size_t i = 0; i < n; i++)
		if (addr_equal(&v[i], a))
			return true;
	return false;
}

/*
 * Final addresses of the answer, families interleaved (see resolve.h), min TTL.
 * Exposed to tests through TESTABLE.
 */
TESTABLE void resolve_collect(const struct ares_addrinfo *ai, bool prefer_ipv4,
    struct resolve_answer *ans);
TESTABLE void
resolve_collect(const struct ares_addrinfo *ai, bool prefer_ipv4,
    struct resolve_answer *ans)
{
	struct addr v4[EGRESS_DNS_ADDRS_MAX], v6[EGRESS_DNS_ADDRS_MAX];
	size_t n4 = 0, n6 = 0, i4 = 0, i6 = 0;
	long ttl = -1;
	const struct ares_addrinfo_node *n;
	const struct ares_addrinfo_cname *c;

	ans->naddrs = 0;
	for (n = ai ? ai->nodes : NULL; n != NULL; n = n->ai_next) {
		struct addr a;

		if (n->ai_addr == NULL)
			continue;
		if (n->ai_family == AF_INET && n->ai_addrlen >= sizeof(struct sockaddr_in)) {
			addr_from_sockaddr(&a, n->ai_addr);
			if (n4 < EGRESS_DNS_ADDRS_MAX && !addr_seen(v4, n4, &a))
				v4[n4++] = a;
		} else if (n->ai_family == AF_INET6 &&
		    n->ai_addrlen >= sizeof(struct sockaddr_in6)) {
			addr_from_sockaddr(&a, n->ai_addr);
			if (n6 < EGRESS_DNS_ADDRS_MAX && !addr_seen(v6, n6, &a))
				v6[n6++] = a;
		} else {
			continue;
		}
		if (ttl < 0 || n->ai_ttl < ttl)
			ttl = n->ai_ttl < 0 ? 0 : n->ai_ttl;
	}
	/* a CNAME in the chain bounds how long the final answer may be trusted */
	for (c = ai ? ai->cnames : NULL; c != NULL; c = c->next)
		if (ttl >= 0 && c->ttl < ttl)
			ttl = c->ttl < 0 ? 0 : c->ttl;
	while ((i4 < n4 || i6 < n6) && ans->naddrs < EGRESS_DNS_ADDRS_MAX) {
		bool take6 = prefer_ipv4 ? (i4 >= n4) : (i6 < n6);

		if (!prefer_ipv4 && i6 < n6 && ans->naddrs > 0 &&
		    ans->addrs[ans->naddrs - 1].family == AF_INET6 && i4 < n4)
			take6 = false;
		if (prefer_ipv4 && i4 < n4 && i6 < n6 && ans->naddrs > 0 &&
		    ans->addrs[ans->naddrs - 1].family == AF_INET)
			take6 = true;
		if (take6)
			ans->addrs[ans->naddrs++] = v6[i6++];
		else
			ans->addrs[ans->naddrs++] = v4[i4++];
	}
	ans->ttl_s = ttl < 0 ? 0 : (uint32_t)ttl;
}

/* ---- flights ---- */

static struct flight **
flight_slot(struct resolver *r, const char *name)
{
	struct flight **pp = &r->flights[name_hash(name, RESOLVE_FLIGHT_BUCKETS)];

	while (*pp != NULL && strcmp((*pp)->name, name) != 0)
		pp = &(*pp)->hnext;
	return pp;
}

/* Take fl out of the table: new lookups of its name start a new flight. */
static void
flight_unlink(struct flight *fl)
{
	struct resolver *r = fl->r;
	struct flight **pp;

	if (fl->abandoned)
		return;
	pp = flight_slot(r, fl->name);
	if (*pp == fl)
		*pp = fl->hnext;
	fl->hnext = NULL;
	fl->abandoned = true;
}

/* Hand ans (status, addresses, TTL) to every waiter, each delivered from the loop. */
static void
flight_finish(struct flight *fl, const struct resolve_answer *ans)
{
	struct resolve_req *q;

	flight_unlink(fl);
	if (fl->deadline != NULL)
		event_del(fl->deadline);
	while ((q = LIST_FIRST(&fl->waiters)) != NULL) {
		LIST_REMOVE(q, flink);
		q->fl = NULL;
		q->ans.status = ans->status;
		q->ans.ares_status = ans->ares_status;
		q->ans.naddrs = ans->naddrs;
		memcpy(q->ans.addrs, ans->addrs, ans->naddrs * sizeof(ans->addrs[0]));
		q->ans.ttl_s = ans->ttl_s;
		defer(q);
	}
}

static void
flight_free(struct flight *fl)
{
	flight_unlink(fl);
	if (fl->deadline != NULL)
		event_free(fl->deadline);
	free(fl);
}

/* The total bound of one lookup passed (resolve.h): a timeout for every waiter, whatever
 * c-ares' own retransmission schedule still had in mind. */
static void
on_flight_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct flight *fl = arg;
	struct resolve_answer ans;

	(void)fd;
	(void)what;
	memset(&ans, 0, sizeof(ans));
	ans.status = REASON_DNS_TIMEOUT;
	ans.ares_status = ARES_ETIMEOUT;
	flight_finish(fl, &ans);
	/* c-ares still holds fl: on_ares frees it */
}

static void
on_ares(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	struct flight *fl = arg;
	struct resolver *r = fl->r;
	struct resolve_answer ans;

	(void)timeouts;
	if (r->destroying || fl->abandoned) {
		struct resolve_req *q;

		if (res != NULL)
			ares_freeaddrinfo(res);
		/* destroying: resolver_free frees the requests, without callbacks */
		while ((q = LIST_FIRST(&fl->waiters)) != NULL) {
			LIST_REMOVE(q, flink);
			q->fl = NULL;
		}
		flight_free(fl);
		return;
	}
	memset(&ans, 0, sizeof(ans));
	ans.ares_status = status;
	ans.status = map_status(status);
	if (status == ARES_SUCCESS) {
		resolve_collect(res, r->prefer_ipv4, &ans);
		if (ans.naddrs == 0)
			ans.status = REASON_DNS_NO_ADDRESS;
		else
			cache_put(r, fl->name, &ans, ans.ttl_s);
	}
	if (ans.status != REASON_ALLOWED)
		ans.naddrs = 0;
	if (res != NULL)
		ares_freeaddrinfo(res);
	flight_finish(fl, &ans);
	flight_free(fl);
	retire_check(r);
}

/* Start a flight for name (not in the table) with q as its first waiter. -1 on ENOMEM.
 * c-ares may answer inside this call (q is then already scheduled for delivery). */
static int
flight_start(struct resolver *r, const char *name, struct resolve_req *q)
{
	struct ares_addrinfo_hints hints;
	char fqdn[EGRESS_HOSTNAME_MAX + 2];
	size_t len = strlen(name);
	struct flight *fl = calloc(1, sizeof(*fl)), **pp;
	struct timeval tv;

	if (fl == NULL)
		return -1;
	fl->r = r;
	memcpy(fl->name, name, len + 1);
	LIST_INIT(&fl->waiters);
	fl->deadline = evtimer_new(r->base, on_flight_deadline, fl);
	if (fl->deadline == NULL) {
		free(fl);
		return -1;
	}
	tv.tv_sec = (time_t)(r->deadline_ms / 1000);
	tv.tv_usec = (suseconds_t)((r->deadline_ms % 1000) * 1000);
	evtimer_add(fl->deadline, &tv);
	pp = flight_slot(r, name);
	fl->hnext = *pp;
	*pp = fl;
	q->fl = fl;
	LIST_INSERT_HEAD(&fl->waiters, q, flink);
	/* absolute name: no search domains, ever */
	memcpy(fqdn, name, len);
	fqdn[len] = '.';
	fqdn[len + 1] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;      /* one A and one AAAA query */
	hints.ai_flags = ARES_AI_NOSORT;  /* keep the server's order; no route probing */
	ares_getaddrinfo(r->ch, fqdn, NULL, &hints, on_ares, fl);
	timer_update(r);
	return 0;                       /* fl may be gone already: do not touch it */
}

bool
resolver_would_query(struct resolver *r, const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > EGRESS_HOSTNAME_MAX || name[len - 1] == '.' ||
	    addr_parse_literal(name, len, NULL) != ADDR_LIT_NONE)
		return false;           /* refused without a query */
	return *flight_slot(r, name) == NULL && cache_get(r, name) == NULL;
}

struct resolve_req *
resolver_lookup(struct resolver *r, const char *name, resolve_cb cb, void *arg)
{
	struct resolve_req *q;
	struct cache_entry *e;
	struct flight *fl;
	size_t len = strlen(name);
	enum addr_literal lit;

	q = calloc(1, sizeof(*q));
	if (q == NULL || (q->ev = event_new(r->base, -1, 0, on_deferred, q)) == NULL) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->r = r;
	q->cb = cb;
	q->arg = arg;
	q->start_us = mono_usec();
	LIST_INSERT_HEAD(&r->reqs, q, link);
	r->pending++;
	lit = len == 0 || len > EGRESS_HOSTNAME_MAX ? ADDR_LIT_INVALID :
	    addr_parse_literal(name, len, NULL);
	if (lit != ADDR_LIT_NONE || name[len - 1] == '.') {
		/* literals and numeric tricks never reach c-ares (resolve.h) */
		snprintf(q->name, sizeof(q->name), "%.*s", EGRESS_HOSTNAME_MAX, name);
		q->ans.status = REASON_DNS_ERROR;
		q->ans.ares_status = ARES_EBADNAME;
		defer(q);
		return q;
	}
	memcpy(q->name, name, len + 1);
	if ((e = cache_get(r, name)) != NULL) {
		uint64_t left = e->expires_ms - mono_msec();

		q->ans.status = REASON_ALLOWED;
		memcpy(q->ans.addrs, e->addrs, e->naddrs * sizeof(e->addrs[0]));
		q->ans.naddrs = e->naddrs;
		q->ans.ttl_s = (uint32_t)((left + 999) / 1000);
		q->ans.from_cache = true;
		defer(q);
		return q;
	}
	fl = *flight_slot(r, name);
	if (fl != NULL) {
		/* the same lookup is running: wait for its answer instead of asking again */
		q->fl = fl;
		LIST_INSERT_HEAD(&fl->waiters, q, flink);
		return q;
	}
	if (flight_start(r, name, q) != 0) {
		r->pending--;
		req_free(q);
		errno = ENOMEM;
		return NULL;
	}
	timer_update(r);
	return q;
}

void
resolve_cancel(struct resolve_req *q)
{
	struct resolver *r;

	if (q == NULL || q->cancelled)
		return;
	r = q->r;
	q->cancelled = true;
	r->pending--;
	/* Leaves its flight (which goes on for the other waiters, or until c-ares lets go);
	 * a pending delivery is dropped with the event. */
	req_free(q);
	retire_check(r);
}

static void
on_retire(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	resolver_free(arg);   /* from the loop, never inside a c-ares callback */
}

static void
retire_check(struct resolver *r)
{
	if (!r->retiring || r->pending > 0 || r->retire_ev != NULL)
		return;
	r->retire_ev = event_new(r->base, -1, 0, on_retire, r);
	if (r->retire_ev != NULL)
		event_active(r->retire_ev, 0, 0);
	/* on ENOMEM the resolver stays on the retired list: memory only, no callbacks */
}

void
resolver_retire(struct resolver *r)
{
	if (r == NULL || r->retiring)
		return;
	r->retiring = true;
	resolver_flush(r);
	LIST_INSERT_HEAD(&retired, r, retired_link);
	retire_check(r);
}

size_t
resolver_pending(const struct resolver *r)
{
	return r->pending;
}

/* ---- set-up ---- */

static int
parse_server(const char *s, struct ares_addr_port_node *n, char *err, size_t errlen,
    size_t idx)
{
	const char *host = s, *port = NULL, *colon;
	char hbuf[EGRESS_ADDRSTR_MAX];
	size_t hlen;
	struct addr a;
	long long p = 53;
	const char *perr;

	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (rb == NULL || (rb[1] != '\0' && rb[1] != ':'))
			goto bad;
		host = s + 1;
		hlen = (size_t)(rb - host);
		if (rb[1] == ':')
			port = rb + 2;
	} else if ((colon = strchr(s, ':')) != NULL && strchr(colon + 1, ':') == NULL) {
		hlen = (size_t)(colon - s);
		port = colon + 1;
	} else {
		hlen = strlen(s);
	}
	if (hlen == 0 || hlen >= sizeof(hbuf))
		goto bad;
	memcpy(hbuf, host, hlen);
	hbuf[hlen] = '\0';
	switch (addr_parse_literal(hbuf, hlen, &a)) {
	case ADDR_LIT_V4:
	case ADDR_LIT_V6:
		break;
	case ADDR_LIT_NONE:
	case ADDR_LIT_INVALID:
		goto bad;
	}
	if (port != NULL && num_parse(port, 1, 65535, &p, &perr) != 0)
		goto bad;
	memset(n, 0, sizeof(*n));
	n->family = a.family;
	if (a.family == AF_INET)
		n->addr.addr4 = a.u.v4;
	else
		memcpy(&n->addr.addr6, &a.u.v6, sizeof(n->addr.addr6));
	n->udp_port = (int)p;
	n->tcp_port = (int)p;
	return 0;
bad:
	snprintf(err, errlen, "servers[%zu]: \"%s\" is not ip, ip:port or [ipv6]:port", idx, s);
	return -1;
}

struct resolver *
resolver_new(struct event_base *base, const struct resolver_config *cfg, char *err,
    size_t errlen)
{
	struct resolver *r;
	struct ares_options opts;
	struct ares_addr_port_node nodes[RESOLVE_SERVERS_MAX];
	char lookups[] = "b";
	int optmask, rc;
	static bool lib_init;

	if (cfg->nservers > RESOLVE_SERVERS_MAX) {
		snprintf(err, errlen, "at most %d DNS servers", RESOLVE_SERVERS_MAX);
		return NULL;
	}
	for (size_t i = 0; i < cfg->nservers; i++) {
		if (parse_server(cfg->servers[i], &nodes[i], err, errlen, i) != 0)
			return NULL;
		nodes[i].next = i + 1 < cfg->nservers ? &nodes[i + 1] : NULL;
	}
	if (!lib_init) {
		if ((rc = ares_library_init(ARES_LIB_INIT_ALL)) != ARES_SUCCESS) {
			snprintf(err, errlen, "c-ares init: %s", ares_strerror(rc));
			return NULL;
		}
		lib_init = true;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	r->base = base;
	LIST_INIT(&r->socks);
	LIST_INIT(&r->reqs);
	TAILQ_INIT(&r->lru);
	r->prefer_ipv4 = cfg->prefer_ipv4;
	r->no_cache = cfg->no_cache;
	r->cache_max = cfg->cache_max == 0 || cfg->cache_max > EGRESS_DNS_CACHE_MAX ?
	    EGRESS_DNS_CACHE_MAX : cfg->cache_max;
	r->ttl_cap_s = cfg->ttl_cap_s ? cfg->ttl_cap_s : EGRESS_DNS_TTL_CAP_S;
	for (r->nbuckets = 16; r->nbuckets < r->cache_max; r->nbuckets *= 2)
		;
	r->buckets = calloc(r->nbuckets, sizeof(*r->buckets));
	r->timer = evtimer_new(base, on_timer, r);
	if (r->buckets == NULL || r->timer == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}

	memset(&opts, 0, sizeof(opts));
	/* NOSEARCH: names are absolute. NOALIASES: HOSTALIASES must not redirect names. */
	opts.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
	opts.timeout = (int)(cfg->timeout_ms ? cfg->timeout_ms : RESOLVE_DEFAULT_TIMEOUT_MS);
	opts.tries = (int)(cfg->attempts ? cfg->attempts : RESOLVE_DEFAULT_ATTEMPTS);
	/* c-ares doubles the timeout of every later round (2 s + 4 s for two tries): the
	 * total a lookup may take is ours to bound, timeout x attempts (resolve.h). */
	r->deadline_ms = (uint64_t)opts.timeout * (uint64_t)opts.tries;
	opts.lookups = lookups;          /* DNS only: no /etc/hosts */
	opts.ndomains = 0;
	opts.domains = NULL;
	opts.sock_state_cb = sock_state_cb;
	opts.sock_state_cb_data = r;
	optmask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_LOOKUPS |
	    ARES_OPT_DOMAINS | ARES_OPT_SOCK_STATE_CB;
	rc = ares_init_options(&r->ch, &opts, optmask);
	if (rc != ARES_SUCCESS) {
		r->ch = NULL;
		snprintf(err, errlen, "c-ares init: %s", ares_strerror(rc));
		goto fail;
	}
	if (cfg->nservers > 0 &&
	    (rc = ares_set_servers_ports(r->ch, nodes)) != ARES_SUCCESS) {
		snprintf(err, errlen, "c-ares servers: %s", ares_strerror(rc));
		goto fail;
	}
	return r;
fail:
	resolver_free(r);
	return NULL;
}

void
resolver_free(struct resolver *r)
{
	struct resolve_req *q;
	struct sock_watch *w;

	if (r == NULL)
		return;
	if (r->retiring)
		LIST_REMOVE(r, retired_link);
	if (r->retire_ev != NULL)
		event_free(r->retire_ev);
	r->destroying = true;
	if (r->ch != NULL)
		ares_destroy(r->ch);   /* on_ares frees the requests c-ares held */
	while ((q = LIST_FIRST(&r->reqs)) != NULL)
		req_free(q);
	while ((w = LIST_FIRST(&r->socks)) != NULL) {
		LIST_REMOVE(w, link);
		event_free(w->ev);
		free(w);
	}
	if (r->buckets != NULL)
		resolver_flush(r);
	free(r->buckets);
	if (r->timer != NULL)
		event_free(r->timer);
	free(r);
}
