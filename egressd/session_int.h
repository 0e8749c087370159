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

struct connector;
struct mitm;
struct sniguard;
struct httpresp;
struct redirect_target;

#define SELF_ADDRS_MAX 256
/* Happy Eyeballs for the checked addresses (egressd/connector): a new attempt every
 * HE_DELAY_US, or at once when one fails; at most HE_ATTEMPTS_MAX in flight. */
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
	struct grant_conn se_gc;        /* first: kill() gets this pointer */
	struct daemon *se_d;
	struct lgrant *se_lg;           /* our reference */
	bool se_attached;
	bool se_released;               /* no longer counted in lg->nconns */
	uint64_t se_id;
	char se_conn[40];               /* "c-<boot id>-<n>": unique across restarts */
	enum sstate se_state;
	int se_cfd;
	struct bufferevent *se_cbev;
	char se_client[EGRESS_HOSTPORT_MAX + 1];
	struct event *se_timer;         /* header timeout, then refusal-flush timeout */
	char *se_head;                  /* copy of the request head (req borrows it) */
	struct http_request se_req;
	bool se_parsed;
	char se_reqline[EGRESS_LOG_TARGET_MAX + 1]; /* escaped first line, for malformed heads */
	struct route_req *se_rreq;
	struct resolve_req *se_dreq;
	bool se_dns_counted;
	struct dlog_ticket *se_ticket;
	struct addr se_resolved[EGRESS_DNS_ADDRS_MAX];
	size_t se_nresolved;
	bool se_did_resolve;
	bool se_routed;
	struct addrcheck_result se_ac;
	bool se_checked;
	enum reason se_dns_status;      /* the local lookup's answer (REASON_ALLOWED: addresses) */
	size_t se_addr_i;               /* address being tried */
	int se_ufd;
	struct connector *se_connector; /* connecting to the checked addresses */
	int se_last_err;
	bool se_any_timeout;
	uint64_t se_t0_us, se_resolve_us, se_connect_us;
	uint64_t se_connect_start_us;
	bool se_connected;
	struct tunnel *se_tun;
	bool se_freeing;                /* session_free is closing the tunnel */
	uint64_t se_tunnel_start_us;
	/* the host route: entries tried in order (failover only after connect/TLS failures) */
	struct route_result se_route;
	size_t se_route_i;
	bool se_via_proxy;              /* the current entry is an upstream proxy */
	bool se_pin_local;              /* resolve and check locally, send the literal */
	struct upstream_req *se_ureq;
	struct upstream_result se_up;   /* the proxy exchange, for the record */
	bool se_have_up;
	/* The allow record of this hop is on disk and its close is not written yet: every
	 * end of the hop from here on is a close record, never a second decision. */
	bool se_allow_open;
	bool se_at_gate;                /* connected to the proxy: the allow record is next */
	/* hop chains, redirects, credentials, keep-alive: docs/redirects.md */
	unsigned se_hop_n;              /* hops decided on this client connection so far */
	char se_hop[64];                /* this request's hop id, "<conn>/<n>" */
	char se_parent_hop[64];         /* the redirect this request follows ("" = none) */
	unsigned se_chain_depth;        /* redirects before this request in its chain */
	int se_resp_status;             /* the origin's final response status of this HTTP
	                                   exchange (0: none yet); the close record's status */
	bool se_strip_creds;            /* forward without Authorization and Cookie */
	bool se_creds_stripped;         /* ... and the request carried one of them */
	bool se_client_kept;            /* the tunnel handed the client socket back */
	bool se_keepalive_wait;         /* waiting for the next request on a kept connection */
	char *se_carry;                 /* client bytes after this request (pipelined) */
	size_t se_ncarry;
	struct event *se_next_ev;       /* starts the next request outside tunnel_done */
	bool se_up_reused;              /* the upstream socket came from egressd/upool */
	bool se_up_retried;             /* ... it failed at once and a fresh one was used */
	int se_kept_ufd;                /* the tunnel left this upstream socket open, or -1 */
	/* issue 16: model connections (docs/model-connections.md) */
	struct sniguard *se_sni;        /* waiting for the ClientHello of an opaque tunnel */
	struct mitm *se_mitm;           /* an intercepted tunnel */
	bool se_tls_done;               /* the 200 was sent and the TLS step decided */
	bool se_sni_checked;            /* the close record carries "sni" and "tls" */
	bool se_tls_seen;               /* ... the tunnel started with a ClientHello */
	char se_sni_name[EGRESS_HOSTNAME_MAX + 1];
};

/* session.c */
/* This request's hop id, assigned on first use ("c-<boot>-<n>/<k>"). */
const char *session_hop_id(struct session *s);

/*
 * session_record.c: one builder per record kind (docs/decision-log.md). Each returns a
 * new JSON object of the record's fields, or NULL on ENOMEM; record_write appends it.
 */
/* The decision on a hop the client asked for (allow: before the client hears 200). */
json_t *record_hop_decision(struct session *s, bool allow, enum reason r);
/* The decision on a redirect hop (a 3xx the origin sent): t resolved (resolved true) or
 * not, the raw Location (loc, loclen) as a printable target either way. */
json_t *record_redirect(struct session *s, const struct httpresp *r,
    const struct redirect_target *t, bool resolved, const char *rhop, const char *loc,
    size_t loclen, bool cross, enum reason rr, const char *detail);
/* The end of a tunnel: why, bytes each way, duration. */
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
