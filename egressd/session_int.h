/*
 * session_int - struct session and what the files of one connection share: session.c (the
 * step machine) and session_record.c (the decision-log records of a hop). Nobody else
 * includes this header: the session's contract is session.h.
 */
#ifndef EGRESS_SESSION_INT_H
#define EGRESS_SESSION_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/addr.h"
#include "common/limits.h"
#include "common/reasons.h"
#include "egressd/addrcheck.h"
#include "egressd/dlog.h"
#include "egressd/grants.h"
#include "egressd/http.h"
#include "egressd/route.h"
#include "egressd/upstream.h"

struct bufferevent;
struct connector;
struct dlog_ticket;
struct event;
struct mitm;
struct resolve_req;
struct route_req;
struct tunnel;
struct upstream_req;
struct httpresp;
struct redirect_target;

#define SELF_ADDRS_MAX 256
/* Happy Eyeballs for the checked addresses (egressd/connector): a new attempt every
 * HE_DELAY_US, or at once when one fails; at most HE_ATTEMPTS_MAX in flight. */
#define HE_ATTEMPTS_MAX 4
#define HE_DELAY_US     250000

/*
 * The states of one connection, in the order a request travels (session.c follows it).
 * A kept-alive client connection starts over at SE_HEAD for its next request (a fresh
 * session, docs/redirects.md). Every refusal goes to SE_REFUSE; the end is SE_FREEING.
 */
enum se_state {
	SE_HEAD,        /* reading the request head (on a kept connection: the next one) */
	SE_AUTHORIZE,   /* the head is parsed: grant, limits, placeholder (no wait) */
	SE_LOG_PROBE,   /* the decision log had failed: waiting for its probe record */
	SE_ROUTE,       /* waiting for the route */
	SE_RESOLVE,     /* waiting for DNS */
	SE_CONNECT,     /* connecting: to the checked addresses, or to the route's proxy */
	SE_LOG_ALLOW,   /* connected (or at the proxy's gate): the allow record is on its way */
	SE_PROXY,       /* the allow record is on disk: the proxy protocol runs */
	SE_TLS_CHECK,   /* 200 sent: waiting for the ClientHello of an opaque tunnel to 443 */
	SE_TUNNEL,      /* relaying: an opaque or intercepted tunnel, or an HTTP exchange */
	SE_REFUSE,      /* writing a refusal, then close */
	SE_FREEING,     /* session_free is ending it (a tunnel's callback must not free it) */
};

/*
 * What one request needs until it is relayed: the head and its parse, the decision's
 * inputs (route, DNS answer, address check), the pending route/DNS/log/connect requests,
 * the upstream socket until the tunnel takes it, the client's bufferevent and timer. Its
 * own allocation: freed as soon as a CONNECT tunnel (opaque or intercepted) runs, so an
 * established tunnel holds only struct session (docs/performance.md, "Memory per idle
 * tunnel"). A forwarded HTTP exchange keeps it until the exchange ends: its response
 * hook re-authorizes redirects against the request, and keep-alive reads what follows.
 */
struct session_setup {
	struct event *su_timer;         /* header timeout or ClientHello deadline, then
	                                   refusal-flush timeout; made when first needed */
	struct bufferevent *su_cbev;    /* the client socket until the tunnel takes it; made
	                                   when first needed (a head that came whole in the
	                                   first read needs none unless it is refused or
	                                   its ClientHello awaited: head_start) */
	/* The client socket is the setup's (not yet the tunnel's or the interception's): a
	 * refusal is written to it, through su_cbev made for it if need be. A fact about the
	 * socket, not a state. */
	bool su_client_ours;
	char *su_head;                  /* copy of the request head (req borrows it) */
	struct http_request su_req;
	char su_reqline[EGRESS_LOG_TARGET_MAX + 1]; /* escaped first line, malformed heads */
	struct route_req *su_rreq;
	struct resolve_req *su_dreq;
	/* This request's lookup counts against the principal's max_dns_pending (it asked the
	 * server itself; a joined or cached lookup does not): a fact about the lookup, not a
	 * state (the count is given back whichever way the lookup ends). */
	bool su_dns_counted;
	struct dlog_ticket *su_ticket;  /* the log probe, then the allow record */
	struct addr su_resolved[EGRESS_DNS_ADDRS_MAX];
	size_t su_nresolved;
	/* The local lookup and the address check are made once per request and kept across
	 * route entries (failover never re-resolves): memos of results, not states (a
	 * request tries a second entry in SE_CONNECT with both already true). */
	bool su_did_resolve;
	bool su_checked;
	enum reason su_dns_status;      /* the local lookup's answer (REASON_ALLOWED: addresses) */
	struct route_result su_route;   /* the host route: entries tried in order (failover
	                                   only after connect/TLS failures); n 0: not routed */
	size_t su_route_i;
	struct addrcheck_result su_ac;
	int su_ufd;                     /* the upstream socket until the tunnel takes it */
	struct connector *su_connector; /* connecting to the checked addresses */
	struct upstream_req *su_ureq;   /* through an upstream proxy */
	char *su_proxy_authz;           /* forward mode: egressd's Proxy-Authorization value
	                                   (wiped before it is freed) */
	uint64_t su_connect_start_us, su_resolve_us, su_connect_us;
	/* hop chains, redirects, credentials, keep-alive: docs/redirects.md */
	char su_parent_hop[64];         /* the redirect this request follows ("" = none) */
	unsigned su_chain_depth;        /* redirects before this request in its chain */
	/* Facts of the request for its records, not states: */
	bool su_strip_creds;            /* forward without Authorization and Cookie */
	bool su_creds_stripped;         /* ... and the request carried one of them */
	bool su_up_reused;              /* the upstream socket came from egressd/upool */
	/* The HTTP tunnel's reports (tunnel_opts out-parameters), read in tunnel_done: */
	bool su_client_kept;            /* it handed the client socket back */
	bool su_up_retried;             /* the reused upstream failed at once; a fresh one
	                                   was used */
	int su_kept_ufd;                /* it left this upstream socket open, or -1 */
	char *su_carry;                 /* client bytes after this request (pipelined) */
	size_t su_ncarry;
	struct event *su_next_ev;       /* starts the next request outside tunnel_done */
};

/*
 * A captured connection (docs/transparent.md): the worker connected to a synthetic address
 * its stub resolver handed out; the hop is the CONNECT (or, for a name granted only as
 * http://, the absolute-form request) it would have sent to the proxy. Kept for the
 * connection's life (the close record and the next kept-alive request read it).
 */
struct session_capture {
	bool cap_http;                  /* plain HTTP: origin-form heads are rewritten */
	uint16_t cap_port;
	char cap_name[EGRESS_HOSTNAME_MAX + 1];     /* the name the address stands for */
	char cap_orig_dst[EGRESS_HOSTPORT_MAX + 1]; /* "198.18.0.3:443" as the worker dialled */
};

/*
 * One client connection, for its whole life: who it is, its state, the relay, and the
 * facts the close record of the current hop needs. Everything else of a request is in
 * se_su (NULL once a CONNECT tunnel runs).
 */
struct session {
	struct grant_conn se_gc;        /* first: kill() gets this pointer */
	struct daemon *se_d;
	struct lgrant *se_lg;           /* our reference */
	struct session_setup *se_su;    /* the request's setup state, or NULL (above) */
	/* Bookkeeping facts, not states: on the grant's list of connections (revoke walks
	 * it); no longer counted in lg->nconns (a refusal draining). */
	bool se_attached;
	bool se_released;
	bool se_refusing;               /* on se_d->refusing (se_gc's links), not a grant's */
	uint64_t se_id;
	char se_conn[40];               /* "c-<boot id>-<n>": unique across restarts */
	enum se_state se_state;
	int se_cfd;
	char se_client[EGRESS_ADDRSTR_MAX + 8];    /* "a.b.c.d:port" or "[v6]:port" */
	enum http_method se_method;     /* of the parsed request (SE_AUTHORIZE on) */
	struct tunnel *se_tun;
	struct mitm *se_mitm;           /* an intercepted tunnel */
	unsigned se_hop_n;              /* hops decided on this client connection so far */
	char se_hop[64];                /* this request's hop id, "<conn>/<n>" */
	/* The allow record of this hop is on disk (or on its way) and its close is not
	 * written yet: every end of the hop from here on is a close record, never a second
	 * decision. A fact about the log, true across SE_LOG_ALLOW .. SE_TUNNEL and into
	 * SE_REFUSE. */
	bool se_allow_open;
	/* What the close record says (docs/decision-log.md), kept past the setup: */
	char *se_dest;                  /* "host:port", set with the allow record */
	/* egressd chose the address connected to (directly, or the literal sent to the proxy
	 * under pinning): se_pinned is the hop's attested address (DESIGN rule 3). A fact
	 * about the hop, set when it connects (or reaches the proxy's gate). */
	bool se_attested;
	struct addr se_pinned;
	uint64_t se_tunnel_start_us;
	int se_resp_status;             /* the origin's final response status of this HTTP
	                                   exchange (0: none yet); the close record's status */
	/* The upstream proxy's answer so far (its gate, then its end): se_proxy_known says
	 * the records carry it (only ever for a proxy route entry). */
	bool se_proxy_known;
	bool se_proxy_have_addr;
	struct addr se_proxy_addr;
	int se_proxy_status;            /* the proxy's HTTP status, 0 if none */
	const char *se_proxy_auth;      /* "basic", "negotiate", "ntlm" or NULL (static) */
	/* model connections (docs/model-connections.md): the ClientHello check's outcome
	 * for the close record ("sni" and "tls" present when checked) */
	bool se_sni_checked;
	bool se_tls_seen;               /* ... the tunnel started with a ClientHello */
	char *se_sni_name;              /* its server name, or NULL */
	/* transparent capture (docs/transparent.md), NULL unless captured: its own
	 * allocation, so that an uncaptured tunnel pays one pointer for it */
	struct session_capture *se_cap;
};

/* session.c */
/* This request's hop id, assigned on first use ("c-<boot>-<n>/<k>"). */
const char *session_hop_id(struct session *s);

/*
 * session_record.c: one builder per record kind (docs/decision-log.md). Each returns a
 * new JSON object of the record's fields, or NULL on ENOMEM; record_write appends it.
 */
/* The decision on a hop the client asked for (allow: before the client hears 200).
 * Needs s->se_su (decisions are made during the setup). */
json_t *record_hop_decision(struct session *s, bool allow, enum reason r);
/* The decision on a redirect hop (a 3xx the origin sent): t resolved (resolved true) or
 * not, the raw Location (loc, loclen) as a printable target either way. */
json_t *record_redirect(struct session *s, const struct httpresp *r,
    const struct redirect_target *t, bool resolved, const char *rhop, const char *loc,
    size_t loclen, bool cross, enum reason rr, const char *detail);
/* The hop's destination "host:port" (the request's), for the close record; a new string
 * (free it), NULL on ENOMEM. Needs s->se_su. */
char *record_dest(const struct session *s);
/* The end of a tunnel: why, bytes each way, duration. Reads only struct session's own
 * members (the setup may be gone). */
json_t *record_close(struct session *s, enum reason why, uint64_t up, uint64_t down);
/* The hot path's two records without a JSON tree (the same bytes as the builders above):
 * the allow decision, appended with cb (the 200 waits for it; returns as dlog_append), and
 * the close of a tunnel (held through a log failure, logged when refused). */
int record_allow_append(struct session *s, dlog_done_cb cb, void *arg,
    struct dlog_ticket **ticket);
void record_close_write(struct session *s, enum reason why, uint64_t up, uint64_t down);
/* Fire-and-forget append (denials and close records have nothing waiting on them);
 * fields NULL (ENOMEM) or a refused append is logged. Steals fields. */
void record_write(struct session *s, const char *event, json_t *fields);

#endif
