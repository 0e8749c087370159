/*
 * session.c - per-connection state machine of egressd (see session.h for the order).
 */
#define _GNU_SOURCE        /* memmem */
#include "egressd/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <jansson.h>

#include "common/addr.h"
#include "common/grant.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/reasons.h"
#include "common/util.h"
#include "egressd/addrcheck.h"
#include "egressd/daemon.h"
#include "egressd/dlog.h"
#include "egressd/grants.h"
#include "egressd/http.h"
#include "egressd/httpresp.h"
#include "egressd/metrics.h"
#include "egressd/connections.h"
#include "egressd/mitm.h"
#include "egressd/mitmca.h"
#include "egressd/sniguard.h"
#include "egressd/resolve.h"
#include "egressd/route.h"
#include "egressd/tunnel.h"
#include "egressd/proxycreds.h"
#include "egressd/redirect.h"
#include "egressd/redirmemo.h"
#include "egressd/upool.h"
#include "egressd/upstream.h"

#define SELF_ADDRS_MAX 256
/* Happy Eyeballs (RFC 8305, simplified): a new attempt to the next checked address starts
 * when the current ones have not connected within HE_DELAY_US, or at once when one fails;
 * at most HE_ATTEMPTS_MAX are in flight; the first to connect wins, the others are closed. */
#define HE_ATTEMPTS_MAX 4
#define HE_DELAY_US     250000

enum sstate {
	S_HEAD,         /* reading the request head */
	S_ROUTE,        /* waiting for the route */
	S_RESOLVE,      /* waiting for DNS */
	S_CONNECT,      /* connecting upstream */
	S_LOG,          /* waiting for the allow record */
	S_TUNNEL,       /* relaying */
	S_REFUSE,       /* writing a refusal, then close */
};

struct session {
	struct grant_conn gc;           /* first: kill() gets this pointer */
	struct daemon *d;
	struct lgrant *lg;              /* our reference */
	bool attached;
	bool released;                  /* no longer counted in lg->nconns */
	uint64_t id;
	char conn[40];                  /* "c-<boot id>-<n>": unique across restarts */
	enum sstate st;
	int cfd;
	struct bufferevent *cbev;
	char client[EGRESS_HOSTPORT_MAX + 1];
	struct event *timer;            /* header timeout, then refusal-flush timeout */
	char *head;                     /* copy of the request head (req borrows it) */
	struct http_request req;
	bool parsed;
	char reqline[EGRESS_LOG_TARGET_MAX + 1];  /* escaped first line, for malformed heads */
	struct route_req *rreq;
	struct resolve_req *dreq;
	bool dns_counted;
	struct dlog_ticket *ticket;
	struct addr resolved[EGRESS_DNS_ADDRS_MAX];
	size_t nresolved;
	bool did_resolve;
	bool routed;
	struct addrcheck_result ac;
	bool checked;
	size_t ci;                      /* address being tried */
	int ufd;
	struct event *cev;              /* Happy Eyeballs stagger timer */
	struct he_attempt {
		struct session *s;
		int fd;
		size_t idx;             /* index into ac.kept */
		struct event *ev;       /* NULL: slot free */
	} he[HE_ATTEMPTS_MAX];
	size_t nhe;
	int last_err;
	bool any_timeout;
	uint64_t t0_us, resolve_us, connect_us, connect_start_us, connect_deadline_us;
	bool connected;
	struct tunnel *tun;
	bool freeing;                   /* session_free is closing the tunnel */
	uint64_t tunnel_start_us;
	/* the host route: entries tried in order (failover only after connect/TLS failures) */
	struct route_result route;
	size_t ri;
	bool via_proxy;                 /* the current entry is an upstream proxy */
	bool pin_local;                 /* resolve and check locally, send the literal */
	struct upstream_req *ureq;
	struct upstream_result up;      /* the proxy exchange, for the record */
	bool have_up;
	/* issue 7: hop chains, redirects, credentials, keep-alive */
	unsigned hop_n;                 /* hops decided on this client connection so far */
	char hop[64];                   /* this request's hop id, "<conn>/<n>" */
	char parent_hop[64];            /* the redirect this request follows ("" = none) */
	unsigned chain_depth;           /* redirects before this request in its chain */
	bool strip_creds;               /* forward without Authorization and Cookie */
	bool creds_stripped;            /* ... and the request carried one of them */
	bool client_kept;               /* the tunnel handed the client socket back */
	bool keepalive_wait;            /* waiting for the next request on a kept connection */
	char *carry;                    /* client bytes after this request (pipelined) */
	size_t ncarry;
	struct event *next_ev;          /* starts the next request outside tunnel_done */
	bool up_reused;                 /* the upstream socket came from egressd/upool */
	bool up_retried;                /* ... it failed at once and a fresh one was used */
	int kept_ufd;                   /* the tunnel left this upstream socket open, or -1 */
	/* issue 16: model connections (docs/model-connections.md) */
	struct sniguard *sni;           /* waiting for the ClientHello of an opaque tunnel */
	struct mitm *mitm;              /* an intercepted tunnel */
	bool tls_done;                  /* the 200 was sent and the TLS step decided */
	bool sni_checked;               /* the close record carries "sni" and "tls" */
	bool tls_seen;                  /* ... the tunnel started with a ClientHello */
	char sni_name[EGRESS_HOSTNAME_MAX + 1];
};

static void session_free(struct session *s);
static void refuse_event(struct bufferevent *bev, short what, void *arg);
static void session_refuse(struct session *s, enum reason r);
static void step_route(struct session *s);
static void try_route_entry(struct session *s);
static void step_proxy(struct session *s, const struct addr *pinned);
static void tunnel_done(enum reason why, uint64_t up, uint64_t down, void *arg);
static void sni_end(struct session *s, enum reason why);

/*
 * Has the grant been taken away (revoked, expired)? A static grant replaced by a reload is
 * not: connections accepted under it finish with that old, immutable authority, exactly
 * like its tunnels do.
 */
static enum reason
grant_gone(const struct lgrant *lg)
{
	return lg->dead == REASON_GRANT_REVOKED || lg->dead == REASON_GRANT_EXPIRED ?
	    lg->dead : REASON_ALLOWED;
}

/* ---- hops and the redirect memo (issue 7) ---- */

/*
 * One memo for the daemon, keyed by grant id (egressd/redirmemo). It lives as long as the
 * process: bounded in principals and entries, and it never grants anything, so a memo
 * that outlives a grant only keeps stripping credentials a little longer.
 */
static struct redirmemo *
session_memo(void)
{
	static struct redirmemo *memo;

	if (memo == NULL)
		memo = redirmemo_new(0);
	return memo;
}

/*
 * Idle upstream connections (egressd/upool): reused only by the same grant for the same
 * pinned address and port on the direct route, after the hop was authorized and checked
 * from scratch. Lives as long as the process, bounded.
 */
static struct upool *
session_pool(struct event_base *base)
{
	static struct upool *pool;

	if (pool == NULL)
		pool = upool_new(base, 0);
	return pool;
}

/* This request's hop id, assigned on first use ("c-<boot>-<n>/<k>"). */
static const char *
hop_id(struct session *s)
{
	if (s->hop[0] == '\0')
		snprintf(s->hop, sizeof(s->hop), "%s/%u", s->conn, ++s->hop_n);
	return s->hop;
}

/* ---- decision records ---- */

static json_t *
addrs_json(const struct addr *a, size_t n)
{
	json_t *arr = json_array();
	char buf[EGRESS_ADDRSTR_MAX];

	for (size_t i = 0; arr != NULL && i < n; i++)
		json_array_append_new(arr, json_string(addr_to_str(&a[i], buf, sizeof(buf))));
	return arr;
}

static const char *
hop_dest(const struct session *s, char *buf, size_t len)
{
	char hp[EGRESS_HOSTPORT_MAX + 1];
	struct host h = s->req.host;

	h.port = s->req.port;
	snprintf(buf, len, "%s", host_to_str(&h, hp, sizeof(hp)));
	return buf;
}

static json_t *
decision_fields(struct session *s, bool allow, enum reason r)
{
	json_t *o = json_object();
	char buf[EGRESS_HOSTPORT_MAX + 32];
	char tgt[EGRESS_LOG_TARGET_MAX + 1];

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "conn", json_string(s->conn));
	json_object_set_new(o, "principal", json_string(s->lg->g->principal));
	json_object_set_new(o, "grant_id", json_string(s->lg->id));
	json_object_set_new(o, "client", json_string(s->client));
	json_object_set_new(o, "hop", json_string(hop_id(s)));
	json_object_set_new(o, "parent_hop", s->parent_hop[0] != '\0' ?
	    json_string(s->parent_hop) : json_null());
	json_object_set_new(o, "hop_kind", json_string(s->parsed &&
	    s->req.method == HTTP_CONNECT ? "connect" : "request"));
	json_object_set_new(o, "credentials_stripped", json_boolean(s->creds_stripped));
	json_object_set_new(o, "upstream_reused", json_boolean(s->up_reused));
	if (s->parsed) {
		size_t n = s->req.target_len < EGRESS_LOG_TARGET_MAX ? s->req.target_len :
		    EGRESS_LOG_TARGET_MAX;
		/* The parser admitted only printable ASCII in the target. */
		memcpy(tgt, s->req.target, n);
		tgt[n] = '\0';
		json_object_set_new(o, "method", json_string(http_method_str(s->req.method)));
		json_object_set_new(o, "target", json_string(tgt));
		json_object_set_new(o, "target_truncated",
		    json_boolean(s->req.target_len > EGRESS_LOG_TARGET_MAX));
		json_object_set_new(o, "dest", json_string(hop_dest(s, buf, sizeof(buf))));
	} else {
		json_object_set_new(o, "method", json_null());
		json_object_set_new(o, "target", s->reqline[0] != '\0' ?
		    json_string(s->reqline) : json_null());
		json_object_set_new(o, "dest", json_null());
	}
	json_object_set_new(o, "verdict", json_string(allow ? "allow" : "deny"));
	json_object_set_new(o, "reason", json_string(reason_str(r)));
	if (s->routed && s->ri < s->route.n) {
		char rb[EGRESS_HOSTPORT_MAX + 32];
		json_object_set_new(o, "route", json_string(proxyurl_to_str(&s->route.entries[s->ri],
		    rb, sizeof(rb))));
		json_object_set_new(o, "route_source", json_string(s->route.source));
	} else {
		json_object_set_new(o, "route", json_null());
		json_object_set_new(o, "route_source", json_null());
	}
	if (s->have_up && s->up.have_proxy_addr) {
		char pb[EGRESS_ADDRSTR_MAX];
		json_object_set_new(o, "proxy_addr", json_string(addr_to_str(&s->up.proxy_addr, pb,
		    sizeof(pb))));
		json_object_set_new(o, "proxy_status", s->up.proxy_status ?
		    json_integer(s->up.proxy_status) : json_null());
		json_object_set_new(o, "proxy_auth", s->up.auth ? json_string(s->up.auth) :
		    json_null());
	}
	json_object_set_new(o, "resolved", addrs_json(s->resolved, s->nresolved));
	if (s->connected && (!s->via_proxy || s->pin_local)) {
		char ab[EGRESS_ADDRSTR_MAX];
		json_object_set_new(o, "pinned", json_string(addr_to_str(&s->ac.kept[s->ci], ab,
		    sizeof(ab))));
	} else {
		json_object_set_new(o, "pinned", json_null());
	}
	json_object_set_new(o, "classes_dropped", s->checked ?
	    addrcheck_classes_json(s->ac.dropped_classes) : json_array());
	json_object_set_new(o, "override", json_boolean(s->checked &&
	    s->ac.lifted_override != 0));
	/* attested: egressd itself resolved (or took the literal) and chose the address that
	 * was connected to — directly, or as the literal sent to the proxy under pinning.
	 * When an upstream proxy resolved the name, egressd cannot know the address. */
	json_object_set_new(o, "attested", json_boolean(s->connected &&
	    (!s->via_proxy || s->pin_local)));
	json_object_set_new(o, "resolve_us", json_integer((json_int_t)s->resolve_us));
	json_object_set_new(o, "connect_us", json_integer((json_int_t)s->connect_us));
	return o;
}

/* Fire-and-forget record (denials and close records have nothing waiting on them). */
static void
log_record(struct session *s, const char *event, json_t *fields)
{
	if (fields == NULL) {
		log_warnx("conn %llu: out of memory building a %s record",
		    (unsigned long long)s->id, event);
		return;
	}
	if (dlog_append(s->d->dlog, event, fields, NULL, NULL, NULL) != 0)
		log_warn("conn %llu: decision log refused a %s record", (unsigned long long)s->id,
		    event);
}

/* ---- life cycle ---- */

static void
session_detach(struct session *s)
{
	if (s->attached) {
		lgrant_detach(s->lg, &s->gc);
		s->attached = false;
	}
}

/* Close every connect attempt still in flight. */
static void
he_close_all(struct session *s)
{
	for (size_t k = 0; k < HE_ATTEMPTS_MAX; k++) {
		if (s->he[k].ev == NULL)
			continue;
		event_free(s->he[k].ev);
		s->he[k].ev = NULL;
		close(s->he[k].fd);
		s->he[k].fd = -1;
	}
	s->nhe = 0;
}

static void
cancel_pending(struct session *s)
{
	if (s->rreq != NULL) {
		route_cancel(s->rreq);
		s->rreq = NULL;
	}
	if (s->dreq != NULL) {
		resolve_cancel(s->dreq);
		s->dreq = NULL;
	}
	if (s->dns_counted) {
		s->lg->dns_pending--;
		s->dns_counted = false;
	}
	if (s->ticket != NULL) {
		dlog_ticket_cancel(s->ticket);
		s->ticket = NULL;
	}
	he_close_all(s);
	if (s->cev != NULL) {
		event_free(s->cev);
		s->cev = NULL;
	}
	if (s->ureq != NULL) {
		upstream_cancel(s->ureq);
		s->ureq = NULL;
	}
	if (s->up.proxy_authorization != NULL) {
		secret_wipe(s->up.proxy_authorization, strlen(s->up.proxy_authorization));
		free(s->up.proxy_authorization);
		s->up.proxy_authorization = NULL;
	}
	if (s->ufd >= 0) {
		close(s->ufd);
		s->ufd = -1;
	}
}

static void
session_free(struct session *s)
{
	cancel_pending(s);
	sniguard_free(s->sni);
	s->sni = NULL;
	mitm_free(s->mitm);                 /* closes both sockets itself */
	if (s->mitm != NULL)
		s->cfd = -1;
	s->mitm = NULL;
	if (s->tun != NULL) {
		/* tunnel_done runs from tunnel_close: let it log, not free us a second time. */
		struct tunnel *t = s->tun;
		s->freeing = true;
		tunnel_close(t, REASON_CLOSE_ERROR);
		s->tun = NULL;
	}
	if (s->timer != NULL)
		event_free(s->timer);
	if (s->cbev != NULL)
		bufferevent_free(s->cbev);
	if (s->cfd >= 0)
		close(s->cfd);
	session_detach(s);
	if (!s->released)
		s->lg->nconns--;
	lgrant_unref(s->lg);
	s->d->nconns--;
	free(s->head);
	free(s->carry);
	if (s->next_ev != NULL)
		event_free(s->next_ev);
	free(s);
}

static void
refuse_drain(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);

	evbuffer_drain(in, evbuffer_get_length(in));
}

/*
 * The refusal is written: half-close and read (discarding) until the client closes or the
 * refusal timer fires. Closing with unread request bytes (a body, a pipelined request)
 * would make the kernel send a reset that can destroy the refusal before the client
 * read it (the "lingering close" of HTTP servers).
 */
static void
refuse_flushed(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)) != 0)
		return;
	if (shutdown(s->cfd, SHUT_WR) != 0) {
		session_free(s);
		return;
	}
	refuse_drain(bev, s);
	bufferevent_setcb(bev, refuse_drain, NULL, refuse_event, s);
	bufferevent_enable(bev, EV_READ);
}

static void
refuse_event(struct bufferevent *bev, short what, void *arg)
{
	session_free(arg);
}

static void
refuse_timeout(evutil_socket_t fd, short what, void *arg)
{
	session_free(arg);
}

/* Log the denial, answer the client with the reason, close when written. */
static void
session_refuse(struct session *s, enum reason r)
{
	char buf[512];
	size_t n;
	struct timeval tv = { 2, 0 };

	cancel_pending(s);
	session_detach(s);          /* a revoke walking the list must not see us again */
	if (!s->released) {
		/* A refused connection no longer counts against its principal's limit while
		 * the refusal drains (it still counts globally: it holds an fd). */
		s->lg->nconns--;
		s->released = true;
	}
	log_record(s, "decision", decision_fields(s, false, r));
	metrics_decision(&s->d->stats, 0, r);
	log_debug("conn %llu %s: deny %s", (unsigned long long)s->id, s->client, reason_str(r));
	s->st = S_REFUSE;
	n = http_format_refusal(r, buf, sizeof(buf));
	if (s->cbev == NULL || n == 0) {
		session_free(s);
		return;
	}
	bufferevent_disable(s->cbev, EV_READ);
	bufferevent_setcb(s->cbev, NULL, refuse_flushed, refuse_event, s);
	bufferevent_write(s->cbev, buf, n);
	/* Bounded: a client that does not read its refusal is dropped. */
	event_free(s->timer);
	s->timer = evtimer_new(s->d->base, refuse_timeout, s);
	if (s->timer == NULL) {
		session_free(s);
		return;
	}
	evtimer_add(s->timer, &tv);
}

/* grant_conn kill: revoke, expiry or drain end. */
static void
session_kill(struct grant_conn *gc, enum reason why)
{
	struct session *s = (struct session *)gc;

	session_detach(s);
	if (s->st == S_TUNNEL && s->tun != NULL) {
		struct tunnel *t = s->tun;
		tunnel_close(t, why);          /* its callback logs the close and frees s */
		return;
	}
	if (s->st == S_TUNNEL && s->mitm != NULL) {
		mitm_close(s->mitm, why);      /* likewise (mitm_ended) */
		return;
	}
	if (s->st == S_TUNNEL && s->sni != NULL) {
		sni_end(s, why);               /* the 200 is out: a close record, no refusal */
		return;
	}
	if (s->st == S_REFUSE) {
		session_free(s);
		return;
	}
	session_refuse(s, why == REASON_CLOSE_SHUTDOWN ? REASON_SHUTTING_DOWN :
	    s->lg->dead == REASON_GRANT_EXPIRED ? REASON_GRANT_EXPIRED : REASON_GRANT_REVOKED);
}

/* ---- tunnel ---- */

static void
tunnel_done(enum reason why, uint64_t up, uint64_t down, void *arg)
{
	struct session *s = arg;
	json_t *o = json_object();

	s->tun = NULL;
	if (!s->client_kept || s->freeing)
		s->cfd = -1;                /* the tunnel closed both sockets */
	if (s->kept_ufd >= 0) {
		/* a framed HTTP/1.1 exchange left the upstream connection clean: park it for
		 * this grant and this pinned address only */
		if (s->freeing || !s->connected || s->via_proxy)
			close(s->kept_ufd);
		else
			upool_put(session_pool(s->d->base), s->lg, &s->ac.kept[s->ci], s->req.port,
			    s->kept_ufd);
		s->kept_ufd = -1;
	}
	if (s->up_retried)
		log_info("conn %llu: hop %s: reused upstream connection was closed by the origin "
		    "before any response; retried once on a fresh connection to the same pinned "
		    "address", (unsigned long long)s->id, hop_id(s));
	s->lg->ntunnels--;
	if (o != NULL) {
		char db[EGRESS_HOSTPORT_MAX + 32], ab[EGRESS_ADDRSTR_MAX];
		json_object_set_new(o, "conn", json_string(s->conn));
		json_object_set_new(o, "hop", json_string(hop_id(s)));
		json_object_set_new(o, "principal", json_string(s->lg->g->principal));
		json_object_set_new(o, "grant_id", json_string(s->lg->id));
		json_object_set_new(o, "dest", json_string(hop_dest(s, db, sizeof(db))));
		/* as in the decision: only an address egressd chose itself is "pinned" */
		json_object_set_new(o, "pinned", s->connected && (!s->via_proxy || s->pin_local) ?
		    json_string(addr_to_str(&s->ac.kept[s->ci], ab, sizeof(ab))) : json_null());
		json_object_set_new(o, "reason", json_string(reason_str(why)));
		json_object_set_new(o, "bytes_up", json_integer((json_int_t)up));
		json_object_set_new(o, "bytes_down", json_integer((json_int_t)down));
		json_object_set_new(o, "duration_us",
		    json_integer((json_int_t)(mono_usec() - s->tunnel_start_us)));
		if (s->sni_checked) {
			json_object_set_new(o, "tls", json_boolean(s->tls_seen));
			json_object_set_new(o, "sni", s->sni_name[0] != '\0' ?
			    json_string(s->sni_name) : json_null());
		}
	}
	log_record(s, "close", o);
	log_debug("conn %llu: closed (%s), %llu up, %llu down", (unsigned long long)s->id,
	    reason_str(why), (unsigned long long)up, (unsigned long long)down);
	if (s->freeing)
		return;
	if (s->client_kept && s->cfd >= 0 && s->next_ev != NULL) {
		/* Keep-alive: the next request is a new hop, read outside this callback (the
		 * tunnel is freed when we return). */
		s->st = S_HEAD;
		s->parsed = false;      /* a refusal before the next head is a hop of its own */
		s->hop[0] = '\0';
		s->parent_hop[0] = '\0';
		s->creds_stripped = false;
		event_active(s->next_ev, EV_TIMEOUT, 0);
		return;
	}
	session_free(s);
}

static void session_next(evutil_socket_t fd, short what, void *arg);

/*
 * How many of the n client bytes after the head belong to this request's body (the rest
 * is a pipelined request: kept for the next hop, never forwarded with this one). -1 on
 * malformed chunked framing.
 */
static long
body_bytes(const struct http_request *req, const unsigned char *p, size_t n)
{
	struct http_chunked ch;
	bool done = false;

	switch (req->body) {
	case HTTP_BODY_NONE:
		return 0;
	case HTTP_BODY_LENGTH:
		return (long)(n < req->content_length ? n : req->content_length);
	case HTTP_BODY_CHUNKED:
		http_chunked_init(&ch);
		return http_chunked_feed(&ch, (const char *)p, n, &done);
	}
	return 0;
}

/* Printable copy of origin bytes for a record (\xNN for anything else), cut to fit out;
 * returns how many input bytes it holds. */
static size_t
escape_into(char *out, size_t outlen, const char *p, size_t n)
{
	size_t o = 0, i;

	for (i = 0; i < n && o + 5 < outlen; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c >= 0x20 && c < 0x7f && c != '\\') {
			out[o++] = (char)c;
		} else {
			snprintf(out + o, 5, "\\x%02x", c);
			o += 4;
		}
	}
	out[o] = '\0';
	return i;
}

/*
 * The tunnel's response hook (issue 7): a 3xx with a Location is a new hop. Resolve it,
 * bound the chain, authorize it with this principal's grant, record the decision, and
 * remember an allowed one (credential stripping, chain links). Denied: the client gets
 * the refusal naming the target instead of the redirect.
 */
static enum reason
session_on_response(const struct httpresp *r, char *refusal, size_t *nrefusal, void *arg)
{
	struct session *s = arg;
	const struct grant *g = s->lg->g;
	struct redirect_target *t;
	const char *detail = NULL, *loc;
	size_t loclen;
	long li;
	enum reason rr;
	enum redirect_err e = REDIRECT_ERR_INTERNAL;
	bool cross = false;
	char rhop[64], lb[EGRESS_LOG_TARGET_MAX + 1];
	json_t *o;

	*nrefusal = 0;
	if (!redirect_status_checked(r->status) || (li = httpresp_find(r, "location", 0)) < 0)
		return REASON_ALLOWED;
	loc = r->headers[li].value;
	loclen = r->headers[li].value_len;
	t = calloc(1, sizeof(*t));
	if (t == NULL) {
		rr = REASON_INTERNAL_ERROR;
	} else if (httpresp_find(r, "location", 1) >= 0) {
		rr = REASON_REDIRECT_INVALID;
		detail = "more than one Location";
	} else if ((e = redirect_resolve(loc, loclen, &s->req.host, s->req.port, s->req.path,
	    s->req.path_len, t)) != REDIRECT_OK) {
		rr = redirect_err_reason(e);
		detail = redirect_err_str(e);
	} else if (s->chain_depth + 1 > EGRESS_REDIRECT_CHAIN_MAX) {
		rr = REASON_REDIRECT_LOOP;
	} else {
		rr = redirect_authorize(g, t, &g->allow_address, &s->d->cfg->allow_special,
		    &detail);
		if (rr == REASON_ALLOWED && t->host.kind != HOST_NAME) {
			struct addr self[SELF_ADDRS_MAX];
			size_t nself = grants_self_addrs(s->d->grants, self, SELF_ADDRS_MAX);
			if (addrcheck_is_self(&t->host.addr, self, nself)) {
				rr = REASON_REDIRECT_DENIED;
				detail = "egressd's own address";
			}
		}
		cross = !redirect_same_origin(t, &s->req.host, s->req.port);
	}
	(void)hop_id(s);                /* the request's id comes first */
	snprintf(rhop, sizeof(rhop), "%s/%u", s->conn, ++s->hop_n);
	if (rr == REASON_ALLOWED && redirmemo_record(session_memo(), s->lg->id, t->scheme,
	    &t->host, t->port, t->path, strlen(t->path), rhop, s->chain_depth + 1, cross,
	    mono_msec()) != 0)
		rr = REASON_INTERNAL_ERROR;     /* stripping could not be remembered */
	o = json_object();
	if (o != NULL) {
		char db[EGRESS_HOSTPORT_MAX + 1];
		bool resolved = t != NULL && e == REDIRECT_OK;
		size_t kept = escape_into(lb, sizeof(lb), loc, loclen);
		json_object_set_new(o, "conn", json_string(s->conn));
		json_object_set_new(o, "principal", json_string(g->principal));
		json_object_set_new(o, "grant_id", json_string(s->lg->id));
		json_object_set_new(o, "client", json_string(s->client));
		json_object_set_new(o, "hop", json_string(rhop));
		json_object_set_new(o, "parent_hop", json_string(hop_id(s)));
		json_object_set_new(o, "hop_kind", json_string("redirect"));
		json_object_set_new(o, "method", json_string(http_method_str(s->req.method)));
		json_object_set_new(o, "target", json_string(lb));
		json_object_set_new(o, "target_truncated", json_boolean(kept < loclen));
		if (resolved) {
			struct host hh = t->host;
			hh.port = t->port;
			json_object_set_new(o, "dest", json_string(host_to_str(&hh, db, sizeof(db))));
			json_object_set_new(o, "location", json_string(t->url));
		} else {
			json_object_set_new(o, "dest", json_null());
			json_object_set_new(o, "location", json_null());
		}
		json_object_set_new(o, "status", json_integer(r->status));
		json_object_set_new(o, "cross_origin", json_boolean(cross));
		json_object_set_new(o, "chain_depth", json_integer(s->chain_depth + 1));
		json_object_set_new(o, "verdict", json_string(rr == REASON_ALLOWED ? "allow" :
		    "deny"));
		json_object_set_new(o, "reason", json_string(reason_str(rr)));
		json_object_set_new(o, "detail", detail != NULL ? json_string(detail) :
		    json_null());
	}
	log_record(s, "decision", o);
	metrics_decision(&s->d->stats, rr == REASON_ALLOWED, rr);
	log_debug("conn %llu: redirect %d to %s: %s", (unsigned long long)s->id, r->status,
	    t != NULL && e == REDIRECT_OK ? t->url : "(unresolved)", reason_str(rr));
	if (rr != REASON_ALLOWED) {
		const char *tg = t != NULL && e == REDIRECT_OK ? t->url : loc;
		size_t tl = t != NULL && e == REDIRECT_OK ? strlen(t->url) : loclen;
		*nrefusal = redirect_format_refusal(rr, tg, tl, detail, refusal,
		    TUNNEL_REFUSAL_MAX);
	}
	free(t);
	return rr;
}

static void start_tunnel(struct session *s);

/* End a tunnel that waited for its ClientHello: both sockets closed, the close record. */
static void
sni_end(struct session *s, enum reason why)
{
	sniguard_free(s->sni);
	s->sni = NULL;
	if (s->ufd >= 0)
		close(s->ufd);
	s->ufd = -1;
	if (s->cfd >= 0)
		close(s->cfd);
	tunnel_done(why, 0, 0, s);          /* takes s->cfd as closed; frees s */
}

static void
mitm_ended(enum reason why, uint64_t up, uint64_t down, void *arg)
{
	struct session *s = arg;

	s->mitm = NULL;
	s->cfd = -1;                        /* closed by the mitm */
	tunnel_done(why, up, down, s);
}

static void
sni_decided(enum reason r, const struct clienthello *ch, void *arg)
{
	struct session *s = arg;

	s->sni_checked = true;
	s->tls_seen = ch != NULL;
	if (ch != NULL && ch->has_sni)
		snprintf(s->sni_name, sizeof(s->sni_name), "%s", ch->sni);
	sniguard_free(s->sni);              /* ch lives in it */
	s->sni = NULL;
	if (r != REASON_ALLOWED) {
		json_t *f = decision_fields(s, false, r);
		if (f != NULL && s->tls_seen)
			json_object_set_new(f, "sni", s->sni_name[0] != '\0' ?
			    json_string(s->sni_name) : json_null());
		log_record(s, "decision", f);
		metrics_decision(&s->d->stats, 0, r);
		sni_end(s, r);
		return;
	}
	s->lg->ntunnels--;                  /* start_tunnel counts the tunnel again */
	start_tunnel(s);
}

/*
 * The TLS step of a CONNECT (docs/model-connections.md): a grant whose model connection
 * covers this host is intercepted (egressd/mitm.h); any other tunnel to port 443 first
 * shows its ClientHello (egressd/sniguard.h). Returns true when it took the session over
 * (or refused it), false when the opaque tunnel starts as before.
 */
static bool
modelconn_tunnel(struct session *s, const char *ok200, size_t n200, size_t npending)
{
	const struct lgrant *lg = s->lg;
	const struct connection *conn = NULL;
	struct mitm_ca *ca = lg->ca != NULL ? lg->ca : s->d->cfg->mitm_ca;
	char err[256];
	ssize_t w;

	if (lg->g->connection[0] != '\0') {
		conn = connections_find(s->d->cfg->conns, lg->g->connection);
		/* A reload removed the connection (or its credential): the grant's tunnels can
		 * no longer be told apart, and none may fall back to opaque. */
		if (conn == NULL || conn->apply == CONN_APPLY_NONE || s->d->cfg->origin_ctx == NULL) {
			session_refuse(s, REASON_CONNECTION_UNAVAILABLE);
			return true;
		}
	}
	if (conn != NULL && connection_covers(conn, &s->req.host, s->req.port)) {
		struct mitm_opts o;
		json_t *base = decision_fields(s, true, REASON_ALLOWED);

		memset(&o, 0, sizeof(o));
		o.server_ctx = ca != NULL ? mitm_ca_server_ctx(ca, &s->req.host, err,
		    sizeof(err)) : NULL;
		/* Never opaque, never without the credential: refuse instead. */
		if (npending > 0 || o.server_ctx == NULL || base == NULL) {
			if (o.server_ctx == NULL)
				log_warnx("conn %llu: no leaf for %s: %s", (unsigned long long)s->id,
				    s->req.host.name, ca != NULL ? err : "no interception CA");
			SSL_CTX_free(o.server_ctx);
			json_decref(base);
			session_refuse(s, npending > 0 ? REASON_TLS_EXPECTED : ca == NULL ?
			    REASON_CONNECTION_UNAVAILABLE : REASON_INTERNAL_ERROR);
			return true;
		}
		o.base = s->d->base;
		o.dlog = s->d->dlog;
		o.record_base = base;
		o.hop = hop_id(s);
		o.host = s->req.host;
		o.port = s->req.port;
		o.conns = s->d->cfg->conns;
		o.conn = conn;
		o.client_ctx = s->d->cfg->origin_ctx;
		o.grant = lg->g;
		/* No operator override for redirects inside: the configuration may be replaced
		 * by a reload while the tunnel lives (a special-class literal then needs the
		 * grant's own allow_address: stricter, never looser). */
		o.override = NULL;
		o.idle_ms = s->d->cfg->idle_timeout_ms;
		o.lifetime_ms = s->d->cfg->tunnel_max_lifetime_ms;
		o.bytes_total = &s->lg->bytes;
		o.bytes_limit = s->lg->g->max_bytes;
		o.placeholder = lg->placeholder[0] != '\0' ? lg->placeholder : NULL;
		o.done = mitm_ended;
		o.arg = s;
		s->mitm = mitm_start(s->cfd, s->ufd, ok200, n200, &o);
		SSL_CTX_free(o.server_ctx);
		json_decref(base);
		if (s->mitm == NULL) {
			session_refuse(s, REASON_INTERNAL_ERROR);
			return true;
		}
		s->ufd = -1;                    /* both sockets are the mitm's now */
		bufferevent_free(s->cbev);
		s->cbev = NULL;
		if (s->timer != NULL)
			event_del(s->timer);
		s->tls_done = true;
		s->st = S_TUNNEL;
		s->lg->ntunnels++;
		return true;
	}
	if (s->req.port != 443)
		return false;
	/* Opaque tunnel to 443: the 200 now, then the ClientHello is peeked (sniguard.h). */
	do
		w = send(s->cfd, ok200, n200, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)n200) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return true;
	}
	s->tls_done = true;
	bufferevent_disable(s->cbev, EV_READ);
	if (s->timer != NULL)
		event_del(s->timer);
	{
		struct evbuffer *in = bufferevent_get_input(s->cbev);
		const unsigned char *pre = npending > 0 ? evbuffer_pullup(in, -1) : NULL;
		s->sni = sniguard_start(s->d->base, s->cfd, &s->req.host, pre, npending,
		    EGRESS_CLIENTHELLO_WAIT_MS, sni_decided, s);
	}
	s->st = S_TUNNEL;
	s->lg->ntunnels++;
	if (s->sni == NULL)
		sni_end(s, REASON_INTERNAL_ERROR);
	return true;
}

static void
start_tunnel(struct session *s)
{
	static const char ok200[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
	struct evbuffer *in = bufferevent_get_input(s->cbev);
	size_t npending = evbuffer_get_length(in);
	unsigned char *pending = npending > 0 ? evbuffer_pullup(in, -1) : NULL;
	struct tunnel_opts o;
	char *fwd = NULL;
	size_t nfwd = 0;
	int ufd = s->ufd;

	memset(&o, 0, sizeof(o));
	o.splice = s->d->cfg->splice;
	o.idle_ms = s->d->cfg->idle_timeout_ms;
	o.lifetime_ms = s->d->cfg->tunnel_max_lifetime_ms;
	o.bytes_total = &s->lg->bytes;
	o.bytes_limit = s->lg->g->max_bytes;   /* the budget holds inside a tunnel too */
	o.bytes_up_total = &s->d->stats.bytes_up;
	o.bytes_down_total = &s->d->stats.bytes_down;
	if (s->req.method != HTTP_CONNECT) {
		size_t cap = EGRESS_REQUEST_HEAD_MAX + 4096;
		bool proxy_form = s->via_proxy && s->have_up &&
		    s->route.entries[s->ri].kind != PROXY_SOCKS5;
		/* only direct HTTP/1.1 connections to the pinned address are ever pooled */
		bool pool_ok = !s->via_proxy && s->req.minor == 1;
		int flags = (proxy_form ? HTTP_FWD_PROXY_FORM : 0) |
		    (s->strip_creds ? HTTP_FWD_STRIP_CREDENTIALS : 0) |
		    (pool_ok ? HTTP_FWD_KEEPALIVE : 0);
		fwd = malloc(cap);
		if (fwd != NULL)
			/* Under pinning the URL names the checked address: the proxy connects to it
			 * and does not resolve the name itself (Host still names it). */
			nfwd = http_build_request_head(&s->req, flags,
			    s->pin_local ? &s->ac.kept[0] : NULL, s->up.proxy_authorization, NULL,
			    fwd, cap);
		if (s->up.proxy_authorization != NULL) {
			secret_wipe(s->up.proxy_authorization, strlen(s->up.proxy_authorization));
			free(s->up.proxy_authorization);
			s->up.proxy_authorization = NULL;
		}
		if (fwd == NULL || nfwd == 0) {
			free(fwd);
			session_refuse(s, REASON_INTERNAL_ERROR);
			return;
		}
		o.via_proxy = proxy_form;
		o.proxy_auth_sent = proxy_form && s->up.auth != NULL;
		o.http = true;
		o.req_body = s->req.body == HTTP_BODY_LENGTH ? 1 :
		    s->req.body == HTTP_BODY_CHUNKED ? 2 : 0;
		o.req_body_len = s->req.content_length;
		o.head_request = s->req.method == HTTP_HEAD;
		o.keep_upstream = pool_ok;
		o.upstream_kept_fd = &s->kept_ufd;
		s->kept_ufd = -1;
		/* A reused connection the origin closed just as it was reused: a bodiless request
		 * is sent again once on a fresh connection to the same pinned address. */
		if (s->up_reused && s->req.body == HTTP_BODY_NONE &&
		    (s->req.method == HTTP_GET || s->req.method == HTTP_HEAD ||
		    s->req.method == HTTP_OPTIONS || s->req.method == HTTP_DELETE)) {
			o.retry_salen = addr_to_sockaddr(&s->ac.kept[s->ci], s->req.port,
			    &o.retry_sa);
			o.retried = &s->up_retried;
		}
		o.on_response = session_on_response;
		/* Client keep-alive (HTTP/1.1 without Connection: close): bytes after this
		 * request's body are the next request, a new hop: keep them for it. */
		if (!s->req.conn_close && s->req.minor == 1 && s->next_ev == NULL)
			s->next_ev = evtimer_new(s->d->base, session_next, s);
		if (!s->req.conn_close && s->req.minor == 1 && s->next_ev != NULL) {
			long nb = body_bytes(&s->req, pending, npending);
			if (nb >= 0 && (size_t)nb < npending) {
				s->carry = malloc(npending - (size_t)nb);
				if (s->carry != NULL) {
					memcpy(s->carry, pending + nb, npending - (size_t)nb);
					s->ncarry = npending - (size_t)nb;
				}
			}
			if (nb >= 0 && (s->carry != NULL || (size_t)nb == npending)) {
				npending = (size_t)nb;
				o.keep_client = true;
				o.client_kept = &s->client_kept;
			}
		}
	}
	s->tunnel_start_us = mono_usec();
	/* Model connections: an intercepted tunnel, or the SNI check before an opaque one. */
	if (s->req.method == HTTP_CONNECT && !s->tls_done &&
	    modelconn_tunnel(s, ok200, sizeof(ok200) - 1, npending))
		return;
	s->tun = tunnel_new(s->d->base, s->d->pipes, s->cfd, ufd,
	    s->req.method == HTTP_CONNECT && !s->tls_done ? ok200 : NULL,
	    s->req.method == HTTP_CONNECT && !s->tls_done ? sizeof(ok200) - 1 : 0,
	    fwd, nfwd, pending, npending, &o, tunnel_done, s);
	if (fwd != NULL)
		secret_wipe(fwd, nfwd);       /* may hold egressd's proxy credential */
	free(fwd);
	if (s->tun == NULL) {
		session_refuse(s, errno == EINVAL ? REASON_BAD_FRAMING : REASON_INTERNAL_ERROR);
		return;
	}
	/* The tunnel owns both sockets now. */
	s->ufd = -1;
	bufferevent_free(s->cbev);
	s->cbev = NULL;
	if (s->timer != NULL)
		event_del(s->timer);
	s->st = S_TUNNEL;
	s->lg->ntunnels++;
}

/* ---- allow record ---- */

static void
allow_logged(int err, void *arg)
{
	struct session *s = arg;

	s->ticket = NULL;
	if (err != 0) {
		/* Never an allow without its record. */
		log_warnx("conn %llu: allow record not written (%s): refusing",
		    (unsigned long long)s->id, strerror(err));
		s->connected = false;
		close(s->ufd);
		s->ufd = -1;
		session_refuse(s, REASON_AUDIT_UNAVAILABLE);
		return;
	}
	if (grant_gone(s->lg) != REASON_ALLOWED) {
		session_refuse(s, grant_gone(s->lg));
		return;
	}
	metrics_decision(&s->d->stats, 1, REASON_ALLOWED);
	start_tunnel(s);
}

static void
step_log_allow(struct session *s)
{
	json_t *f;

	if (grant_gone(s->lg) != REASON_ALLOWED) {
		session_refuse(s, grant_gone(s->lg));
		return;
	}
	s->st = S_LOG;
	f = decision_fields(s, true, REASON_ALLOWED);
	if (f == NULL || dlog_append(s->d->dlog, "decision", f, allow_logged, s,
	    &s->ticket) != 0) {
		s->ticket = NULL;
		s->connected = false;
		close(s->ufd);
		s->ufd = -1;
		session_refuse(s, REASON_AUDIT_UNAVAILABLE);
	}
}

/* ---- connect ---- */

static void he_start(struct session *s);

/* Every checked address failed: fail over to the next route entry, or refuse. */
static void
connect_failed_all(struct session *s)
{
	he_close_all(s);
	if (s->cev != NULL)
		evtimer_del(s->cev);
	if (s->ri + 1 < s->route.n) {
		/* the route lists a fallback: a connect failure may move on to it */
		log_info("conn %llu: direct connect failed; trying route entry %zu",
		    (unsigned long long)s->id, s->ri + 2);
		s->ri++;
		try_route_entry(s);
		return;
	}
	session_refuse(s, s->any_timeout ? REASON_CONNECT_TIMEOUT :
	    s->last_err == ECONNREFUSED ? REASON_CONNECT_REFUSED : REASON_CONNECT_FAILED);
}

static void
he_done(evutil_socket_t fd, short what, void *arg)
{
	struct he_attempt *a = arg;
	struct session *s = a->s;
	int err = 0;
	socklen_t el = sizeof(err);

	event_free(a->ev);
	a->ev = NULL;
	s->nhe--;
	if (what & EV_TIMEOUT) {
		err = ETIMEDOUT;
		s->any_timeout = true;
	} else if (getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) {
		err = errno;
	}
	if (err == 0) {
		/* The winner: pinned is exactly this checked address. */
		s->ufd = a->fd;
		a->fd = -1;
		s->ci = a->idx;
		he_close_all(s);
		evtimer_del(s->cev);
		s->connected = true;
		s->connect_us = mono_usec() - s->connect_start_us;
		metrics_observe(&s->d->stats.connect, s->connect_us);
		step_log_allow(s);
		return;
	}
	s->last_err = err;
	close(a->fd);
	a->fd = -1;
	if (s->ci < s->ac.nkept && mono_usec() < s->connect_deadline_us) {
		he_start(s);                    /* a failure moves on at once */
		return;
	}
	if (s->nhe == 0)
		connect_failed_all(s);
}

static void
he_stagger(evutil_socket_t fd, short what, void *arg)
{
	he_start(arg);
}

/*
 * Start the next attempt(s) to the checked addresses in order (pinning: only these, never
 * re-resolving), each bounded by the overall connect deadline.
 */
static void
he_start(struct session *s)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	uint64_t now;
	int fd;

	while (s->ci < s->ac.nkept && s->nhe < HE_ATTEMPTS_MAX) {
		now = mono_usec();
		if (now >= s->connect_deadline_us) {
			s->any_timeout = true;
			break;
		}
		size_t idx = s->ci++;
		sl = addr_to_sockaddr(&s->ac.kept[idx], s->req.port, &ss);
		if (sl == 0)
			continue;
		fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			s->last_err = errno;
			log_warn("conn %llu: socket", (unsigned long long)s->id);
			break;
		}
		if (connect(fd, (struct sockaddr *)&ss, sl) != 0 && errno != EINPROGRESS) {
			s->last_err = errno;
			close(fd);
			continue;
		}
		size_t k = 0;
		while (s->he[k].ev != NULL)
			k++;                    /* nhe < HE_ATTEMPTS_MAX: a slot is free */
		uint64_t left = s->connect_deadline_us - now;
		struct timeval tv = { (time_t)(left / 1000000), (suseconds_t)(left % 1000000) };
		s->he[k].s = s;
		s->he[k].fd = fd;
		s->he[k].idx = idx;
		s->he[k].ev = event_new(s->d->base, fd, EV_WRITE, he_done, &s->he[k]);
		if (s->he[k].ev == NULL) {
			close(fd);
			s->he[k].fd = -1;
			session_refuse(s, REASON_INTERNAL_ERROR);
			return;
		}
		event_add(s->he[k].ev, &tv);
		s->nhe++;
		if (s->ci < s->ac.nkept && s->nhe < HE_ATTEMPTS_MAX) {
			uint64_t d = left < HE_DELAY_US ? left : HE_DELAY_US;
			struct timeval st = { (time_t)(d / 1000000), (suseconds_t)(d % 1000000) };
			evtimer_add(s->cev, &st);
		}
		return;
	}
	if (s->nhe == 0)
		connect_failed_all(s);
}

static void
step_connect(struct session *s)
{
	if (!dlog_writable(s->d->dlog)) {
		/* Do not even open the upstream connection when it could not be recorded. */
		session_refuse(s, REASON_AUDIT_UNAVAILABLE);
		return;
	}
	s->st = S_CONNECT;
	s->ci = 0;
	s->connect_start_us = mono_usec();
	/* Plain HTTP on the direct route: an idle connection this grant left to one of the
	 * addresses just checked saves the connect (never another grant's, never another
	 * address: the pool's key is exactly that). */
	if (s->req.method != HTTP_CONNECT && !s->via_proxy) {
		for (size_t i = 0; i < s->ac.nkept; i++) {
			int fd = upool_take(session_pool(s->d->base), s->lg, &s->ac.kept[i],
			    s->req.port);
			if (fd >= 0) {
				s->ufd = fd;
				s->ci = i;
				s->connected = true;
				s->up_reused = true;
				s->connect_us = 0;
				step_log_allow(s);
				return;
			}
		}
	}
	s->connect_deadline_us = s->connect_start_us + s->d->cfg->connect_timeout_ms * 1000;
	if (s->cev == NULL && (s->cev = evtimer_new(s->d->base, he_stagger, s)) == NULL) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	he_start(s);
}

/* ---- address check ---- */

static void
step_check(struct session *s, const struct addr *in, size_t n)
{
	struct addr self[SELF_ADDRS_MAX];
	size_t nself = grants_self_addrs(s->d->grants, self, SELF_ADDRS_MAX);
	struct addr cand[EGRESS_DNS_ADDRS_MAX];
	size_t ncand = 0;
	enum reason r;

	if (nself < SELF_ADDRS_MAX && s->d->cfg->has_metrics)
		addr_from_sockaddr(&self[nself++], (struct sockaddr *)&s->d->cfg->metrics_addr);
	/* egressd's own listeners are never a destination, whatever the grant or the class
	 * override says: take them out first, so the refusal names the real reason. */
	for (size_t i = 0; i < n && i < EGRESS_DNS_ADDRS_MAX; i++)
		if (!addrcheck_is_self(&in[i], self, nself))
			cand[ncand++] = in[i];
	if (ncand == 0) {
		session_refuse(s, REASON_SELF_ADDRESS);
		return;
	}
	if (s->req.host.kind != HOST_NAME)
		r = addrcheck_literal(&cand[0], &s->lg->g->allow_address,
		    &s->d->cfg->allow_special, &s->ac);
	else
		r = addrcheck_filter(cand, ncand, &s->lg->g->allow_address,
		    &s->d->cfg->allow_special, &s->ac);
	s->checked = true;
	if (r != REASON_ALLOWED) {
		session_refuse(s, r);
		return;
	}
	if (s->ac.lifted_override != 0) {
		char cb[128];
		/* per hop at debug level only: the record says override: true, and egressd
		 * names the override once at start-up */
		log_debug("conn %llu: allow_special_address override lifted class(es) %s for %s",
		    (unsigned long long)s->id, addrcheck_classes_str(s->ac.lifted_override, cb,
		    sizeof(cb)), s->req.host.name);
	}
	if (s->via_proxy) {
		step_proxy(s, &s->ac.kept[0]);
		return;
	}
	step_connect(s);
}

/* ---- resolve ---- */

static void
resolved(const struct resolve_answer *ans, void *arg)
{
	struct session *s = arg;

	s->dreq = NULL;
	if (s->dns_counted) {
		s->lg->dns_pending--;
		s->dns_counted = false;
	}
	s->did_resolve = true;
	s->resolve_us = ans->duration_us;
	metrics_observe(&s->d->stats.dns, ans->duration_us);
	if (ans->status != REASON_ALLOWED) {
		if (s->via_proxy) {
			/* The grant requires pinning, and egressd could not resolve the name itself:
			 * sending the name to the proxy would be an unattested hop. */
			log_info("conn %llu: pinning required for %s but local resolution failed (%s); "
			    "refusing instead of letting the proxy resolve", (unsigned long long)s->id,
			    s->req.host.name, reason_str(ans->status));
			session_refuse(s, REASON_PINNING_UNAVAILABLE);
			return;
		}
		session_refuse(s, ans->status);
		return;
	}
	s->nresolved = ans->naddrs < EGRESS_DNS_ADDRS_MAX ? ans->naddrs : EGRESS_DNS_ADDRS_MAX;
	memcpy(s->resolved, ans->addrs, s->nresolved * sizeof(s->resolved[0]));
	step_check(s, s->resolved, s->nresolved);
}

static void
step_resolve(struct session *s)
{
	if (s->req.host.kind != HOST_NAME) {
		s->resolved[0] = s->req.host.addr;
		s->nresolved = 1;
		step_check(s, s->resolved, 1);
		return;
	}
	if (s->lg->dns_pending >= s->d->cfg->max_dns_pending) {
		session_refuse(s, REASON_LIMIT_DNS_PENDING);
		return;
	}
	s->st = S_RESOLVE;
	s->dreq = resolver_lookup(s->d->resolver, s->req.host.name, resolved, s);
	if (s->dreq == NULL) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	s->lg->dns_pending++;
	s->dns_counted = true;
}

/* ---- route ---- */

/* ---- upstream proxies ---- */

static void
proxied(const struct upstream_result *r, void *arg)
{
	struct session *s = arg;

	s->ureq = NULL;
	if (s->up.proxy_authorization != NULL) {
		secret_wipe(s->up.proxy_authorization, strlen(s->up.proxy_authorization));
		free(s->up.proxy_authorization);
	}
	s->up = *r;
	s->have_up = true;
	s->connect_us = mono_usec() - s->connect_start_us;
	if (r->status == REASON_ALLOWED) {
		s->ufd = r->fd;
		s->connected = true;
		s->ci = 0;
		metrics_observe(&s->d->stats.connect, s->connect_us);
		step_log_allow(s);
		return;
	}
	log_info("conn %llu: route entry %zu: %s", (unsigned long long)s->id, s->ri + 1,
	    r->detail);
	if (r->failover_ok && s->ri + 1 < s->route.n) {
		s->ri++;
		s->have_up = false;
		try_route_entry(s);
		return;
	}
	session_refuse(s, r->status);
}

static void
step_proxy(struct session *s, const struct addr *pinned)
{
	const struct proxy_route *via = &s->route.entries[s->ri];
	struct upstream_params p;

	if (!dlog_writable(s->d->dlog)) {
		session_refuse(s, REASON_AUDIT_UNAVAILABLE);
		return;
	}
	memset(&p, 0, sizeof(p));
	p.via = via;
	p.target_name = s->req.host.name;
	p.target_addr = pinned;
	p.target_port = s->req.port;
	p.cred = proxycreds_find(router_credentials(s->d->router), &via->proxy);
	p.res = s->d->resolver;
	p.gss = router_gssauth(s->d->router);
	p.tls = router_tls_ctx(s->d->router);
	p.timeout_ms = (uint32_t)router_upstream_timeout_ms(s->d->router);
	/* Plain HTTP through an http(s) proxy is forwarded in absolute form (proxies commonly
	 * refuse CONNECT to port 80); SOCKS5 carries it as a TCP stream like CONNECT. */
	p.forward = s->req.method != HTTP_CONNECT && via->kind != PROXY_SOCKS5;
	s->st = S_CONNECT;
	s->connect_start_us = mono_usec();
	s->ureq = upstream_connect(s->d->base, &p, proxied, s);
	if (s->ureq == NULL)
		session_refuse(s, REASON_INTERNAL_ERROR);
}

/* ---- route ---- */

static void
try_route_entry(struct session *s)
{
	const struct proxy_route *e = &s->route.entries[s->ri];

	s->via_proxy = e->kind != PROXY_DIRECT;
	/* Pinning through a proxy: resolve and check locally, send the checked literal. An IP
	 * literal destination is always sent as itself (after the class check). */
	s->pin_local = s->via_proxy && (s->lg->g->pinning == PINNING_REQUIRED ||
	    s->req.host.kind != HOST_NAME);
	if (!s->via_proxy || s->pin_local) {
		if (s->did_resolve || s->checked) {
			/* already resolved and checked for an earlier entry: reuse, never re-resolve */
			if (s->via_proxy)
				step_proxy(s, &s->ac.kept[0]);
			else
				step_connect(s);
			return;
		}
		step_resolve(s);
		return;
	}
	step_proxy(s, NULL);
}

static void
routed(const struct route_result *res, void *arg)
{
	struct session *s = arg;

	s->rreq = NULL;
	if (res->status != REASON_ALLOWED || res->n == 0) {
		session_refuse(s, res->status != REASON_ALLOWED ? res->status :
		    REASON_ROUTE_UNAVAILABLE);
		return;
	}
	s->route = *res;
	s->ri = 0;
	s->routed = true;
	try_route_entry(s);
}

static void
step_route(struct session *s)
{
	s->st = S_ROUTE;
	s->rreq = route_lookup(s->d->router, s->req.scheme, &s->req.host, s->req.port,
	    routed, s);
	if (s->rreq == NULL)
		session_refuse(s, REASON_INTERNAL_ERROR);
}

/* ---- authorization ---- */

/*
 * Issue 7: does this request follow a redirect egressd let through? The memo links the
 * record to it (parent_hop, chain depth) and, after a cross-origin redirect, makes the
 * request go without Authorization and Cookie unless the grant binds credentials to this
 * origin. It never grants anything: the hop is authorized below like any other.
 */
static void
follow_memo(struct session *s)
{
	const struct grant *g = s->lg->g;
	struct redirmemo_hit hit;
	bool connect = s->req.method == HTTP_CONNECT;

	redirmemo_lookup(session_memo(), s->lg->id, connect ? SCHEME_HTTPS : SCHEME_HTTP,
	    &s->req.host, s->req.port, connect ? NULL : s->req.path,
	    connect ? 0 : s->req.path_len, mono_msec(), &hit);
	if (hit.linked) {
		memcpy(s->parent_hop, hit.parent_hop, sizeof(s->parent_hop));
		s->chain_depth = hit.depth;
	}
	if (connect || !hit.strip ||
	    grant_credentials_bound(g, SCHEME_HTTP, &s->req.host, s->req.port))
		return;
	s->strip_creds = true;
	for (size_t i = 0; i < s->req.nheaders; i++) {
		const struct http_header *h = &s->req.headers[i];
		if ((h->name_len == 13 && strncasecmp(h->name, "authorization", 13) == 0) ||
		    (h->name_len == 6 && strncasecmp(h->name, "cookie", 6) == 0))
			s->creds_stripped = true;
	}
}

static void
authorize(struct session *s)
{
	const struct grant *g = s->lg->g;

	follow_memo(s);

	if (grant_gone(s->lg) != REASON_ALLOWED) {
		session_refuse(s, grant_gone(s->lg));
		return;
	}
	if (s->d->draining) {
		session_refuse(s, REASON_SHUTTING_DOWN);
		return;
	}
	if (s->req.method != HTTP_CONNECT && s->req.upgrade) {
		session_refuse(s, REASON_UPGRADE_REFUSED);
		return;
	}
	/* The run's credential placeholder belongs in its model connection's intercepted
	 * credential header only: seen in any head egressd reads in clear, it is refused. */
	if (s->lg->placeholder[0] != '\0' && s->head != NULL &&
	    memmem(s->head, s->req.head_len, s->lg->placeholder,
	    strlen(s->lg->placeholder)) != NULL) {
		log_info("conn %llu: the run's credential placeholder in a request to %s: refused",
		    (unsigned long long)s->id, s->req.host.name);
		session_refuse(s, REASON_CREDENTIAL_MISDIRECTED);
		return;
	}
	/* A grant naming a model connection that a reload removed: refused before anything
	 * opens upstream (start_tunnel checks again, a reload may come in between). */
	if (g->connection[0] != '\0' && s->req.method == HTTP_CONNECT) {
		const struct connection *c = connections_find(s->d->cfg->conns, g->connection);
		if (c == NULL || c->apply == CONN_APPLY_NONE || s->d->cfg->origin_ctx == NULL) {
			session_refuse(s, REASON_CONNECTION_UNAVAILABLE);
			return;
		}
	}
	if (!grant_allows(g, s->req.scheme, &s->req.host, s->req.port, NULL)) {
		session_refuse(s, s->req.host.kind == HOST_NAME ? REASON_NOT_GRANTED :
		    REASON_IP_LITERAL_NOT_GRANTED);
		return;
	}
	if (g->max_bytes > 0 && s->lg->bytes >= g->max_bytes) {
		session_refuse(s, REASON_LIMIT_BYTES);
		return;
	}
	if (!dlog_writable(s->d->dlog)) {
		session_refuse(s, REASON_AUDIT_UNAVAILABLE);
		return;
	}
	step_route(s);
}

/* ---- request head ---- */

/* Printable, escaped copy of the first line for the record of a malformed head. */
static void
keep_reqline(struct session *s, const unsigned char *p, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n && p[i] != '\r' && p[i] != '\n'; i++) {
		if (o + 5 > EGRESS_LOG_TARGET_MAX)
			break;
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') {
			s->reqline[o++] = (char)p[i];
		} else {
			snprintf(s->reqline + o, 5, "\\x%02x", p[i]);
			o += 4;
		}
	}
	s->reqline[o] = '\0';
}

static void
head_read(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	size_t look = len < EGRESS_REQUEST_HEAD_MAX + 1 ? len : EGRESS_REQUEST_HEAD_MAX + 1;
	unsigned char *p = evbuffer_pullup(in, (ev_ssize_t)look);
	struct http_request *tmp;
	enum reason why;
	enum http_parse pr;

	if (s->st != S_HEAD)
		return;
	tmp = malloc(sizeof(*tmp));
	if (p == NULL || tmp == NULL) {
		free(tmp);
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	pr = http_parse_request((const char *)p, look, tmp, &why);
	if (pr == HTTP_PARSE_INCOMPLETE) {
		free(tmp);
		return;
	}
	if (pr == HTTP_PARSE_ERROR) {
		free(tmp);
		keep_reqline(s, p, look);
		session_refuse(s, why);
		return;
	}
	/* Keep our own copy of the head (the request borrows it), leave the rest queued. */
	size_t hl = tmp->head_len;
	free(tmp);
	s->head = malloc(hl);
	if (s->head == NULL) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	evbuffer_remove(in, s->head, hl);
	if (http_parse_request(s->head, hl, &s->req, &why) != HTTP_PARSE_OK) {
		session_refuse(s, REASON_INTERNAL_ERROR);   /* cannot happen: same bytes */
		return;
	}
	s->parsed = true;
	bufferevent_disable(bev, EV_READ);
	event_del(s->timer);
	log_debug("conn %llu %s: %s %.*s", (unsigned long long)s->id, s->client,
	    http_method_str(s->req.method), (int)(s->req.target_len > 200 ? 200 :
	    s->req.target_len), s->req.target);
	authorize(s);
}

static void
head_event(struct bufferevent *bev, short what, void *arg)
{
	struct session *s = arg;

	/* The client left before a complete head: there is no hop to decide. */
	if (s->st == S_HEAD)
		session_free(s);
}

static void
head_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;

	if (s->st != S_HEAD)
		return;
	/* An idle kept-alive connection that sent nothing more has no hop to decide. */
	if (s->keepalive_wait && s->cbev != NULL &&
	    evbuffer_get_length(bufferevent_get_input(s->cbev)) == 0) {
		session_free(s);
		return;
	}
	session_refuse(s, REASON_HEADER_TIMEOUT);
}

/* While the decision is pending the client may close: notice it and stop. */
static void
pending_event(struct bufferevent *bev, short what, void *arg)
{
	struct session *s = arg;

	if (s->st == S_HEAD)
		session_free(s);
}

void
session_new(struct daemon *d, struct lgrant *lg, int fd, const struct sockaddr *peer,
    socklen_t peerlen)
{
	struct session *s = calloc(1, sizeof(*s));
	struct addr a;
	char ab[EGRESS_ADDRSTR_MAX];
	uint16_t port;
	struct timeval tv;

	if (s == NULL) {
		close(fd);
		return;
	}
	s->d = d;
	s->lg = lg;
	lgrant_ref(lg);
	lg->nconns++;
	lg->total_conns++;
	d->nconns++;
	d->stats.connections_total++;
	s->id = ++d->next_conn_id;
	snprintf(s->conn, sizeof(s->conn), "c-%08x-%llu", d->boot_id,
	    (unsigned long long)s->id);
	s->cfd = fd;
	s->ufd = -1;
	s->kept_ufd = -1;
	s->t0_us = mono_usec();
	s->gc.kill = session_kill;
	lgrant_attach(lg, &s->gc);
	s->attached = true;
	addr_from_sockaddr(&a, peer);
	port = ntohs(peer->sa_family == AF_INET6 ?
	    ((const struct sockaddr_in6 *)peer)->sin6_port :
	    ((const struct sockaddr_in *)peer)->sin_port);
	snprintf(s->client, sizeof(s->client), peer->sa_family == AF_INET6 ? "[%s]:%u" : "%s:%u",
	    addr_to_str(&a, ab, sizeof(ab)), port);
	(void)peerlen;

	s->cbev = bufferevent_socket_new(d->base, fd, 0);
	s->timer = evtimer_new(d->base, head_timeout, s);
	if (s->cbev == NULL || s->timer == NULL) {
		session_free(s);
		return;
	}
	s->st = S_HEAD;
	/* Checks that need no request: the refusal still names this principal. */
	if (d->draining) {
		session_refuse(s, REASON_SHUTTING_DOWN);
		return;
	}
	if (d->nconns > d->cfg->max_connections) {
		session_refuse(s, REASON_LIMIT_CONNECTIONS);
		return;
	}
	if (lg->nconns > lg->g->max_connections) {
		session_refuse(s, REASON_LIMIT_PRINCIPAL);
		return;
	}
	if (grant_gone(lg) != REASON_ALLOWED) {
		session_refuse(s, grant_gone(lg));
		return;
	}
	/* Accept only a bounded head before the decision; the parser enforces limits, the
	 * watermark keeps libevent from reading further ahead. */
	bufferevent_setwatermark(s->cbev, EV_READ, 0, EGRESS_REQUEST_HEAD_MAX + 1);
	bufferevent_setcb(s->cbev, head_read, NULL, head_event, s);
	bufferevent_enable(s->cbev, EV_READ);
	tv.tv_sec = (time_t)(d->cfg->header_timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)((d->cfg->header_timeout_ms % 1000) * 1000);
	evtimer_add(s->timer, &tv);
	(void)pending_event;
}

/*
 * Keep-alive (issue 7): the tunnel delivered a framed response and handed the client
 * socket back. The next request on it is a new hop: a fresh session (every per-request
 * field starts clean, nothing of the previous hop's authorization carries over) that
 * keeps the connection's identity (conn id, hop counter, principal, client address, the
 * connection count) and the bytes the client already pipelined.
 */
static void
session_next(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	struct session *n = calloc(1, sizeof(*n));
	struct daemon *d = s->d;
	struct timeval tv;

	cancel_pending(s);
	log_debug("conn %llu: next request (%zu bytes pipelined)", (unsigned long long)s->id,
	    s->ncarry);
	if (n == NULL || s->cfd < 0 || s->tun != NULL) {
		free(n);
		session_free(s);
		return;
	}
	n->d = d;
	n->lg = s->lg;                  /* the reference moves to n */
	n->id = s->id;
	memcpy(n->conn, s->conn, sizeof(n->conn));
	memcpy(n->client, s->client, sizeof(n->client));
	n->hop_n = s->hop_n;
	n->cfd = s->cfd;
	n->ufd = -1;
	n->kept_ufd = -1;
	n->t0_us = mono_usec();
	n->carry = steal_pointer(&s->carry);
	n->ncarry = s->ncarry;
	n->keepalive_wait = true;
	n->gc.kill = session_kill;
	session_detach(s);
	lgrant_attach(n->lg, &n->gc);
	n->attached = true;
	/* s goes without closing the socket or touching the counts n inherited */
	if (s->timer != NULL)
		event_free(s->timer);
	if (s->cbev != NULL)
		bufferevent_free(s->cbev);
	event_free(s->next_ev);
	free(s->head);
	free(s);

	n->st = S_HEAD;
	n->cbev = bufferevent_socket_new(d->base, n->cfd, 0);
	n->timer = evtimer_new(d->base, head_timeout, n);
	if (n->cbev == NULL || n->timer == NULL) {
		session_free(n);
		return;
	}
	if (grant_gone(n->lg) != REASON_ALLOWED || d->draining) {
		session_free(n);        /* no new hop starts; the client simply reconnects */
		return;
	}
	bufferevent_setwatermark(n->cbev, EV_READ, 0, EGRESS_REQUEST_HEAD_MAX + 1);
	bufferevent_setcb(n->cbev, head_read, NULL, head_event, n);
	if (n->carry != NULL) {
		/* a socket bufferevent keeps the end of its input frozen for everybody but
		 * itself: thaw it for the bytes already read from this socket */
		struct evbuffer *in = bufferevent_get_input(n->cbev);
		int rc = evbuffer_unfreeze(in, 0);
		if (rc == 0)
			rc = evbuffer_add(in, n->carry, n->ncarry);
		(void)evbuffer_freeze(in, 0);
		free(n->carry);
		n->carry = NULL;
		n->ncarry = 0;
		if (rc != 0) {
			session_free(n);
			return;
		}
	}
	bufferevent_enable(n->cbev, EV_READ);
	tv.tv_sec = (time_t)(d->cfg->header_timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)((d->cfg->header_timeout_ms % 1000) * 1000);
	evtimer_add(n->timer, &tv);
	if (evbuffer_get_length(bufferevent_get_input(n->cbev)) > 0)
		head_read(n->cbev, n);
}
