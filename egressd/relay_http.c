/*
 * relay_http.c - the HTTP/1.1 exchange of the tunnel's forwarding mode (tunnel_opts.http):
 * the response head is parsed once (egressd/httpresp), judged (407 through a proxy, 101,
 * the session's on_response hook), rebuilt for the client; the body is framed (RFC 9112
 * 6.3); a delivered response may keep the client and upstream connections; a reused
 * upstream connection that closed before any response byte is retried once on a fresh one
 * (through egressd/connector, the one connector for every upstream connection).
 * Moving the bytes is tunnel.c's; the internals both share are tunnel_int.h.
 */
#include "egressd/tunnel_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "egressd/connector.h"
#include "egressd/http.h"
#include "egressd/httpresp.h"

/* How many of n response bytes belong to the body (the one body framer, http.h); sets
 * resp_done at its end, and marks the upstream connection unfit for reuse when bytes
 * follow the body. -1: bad chunked framing. */
long
relay_http_frame_body(struct dir *d, const char *p, size_t n)
{
	bool done = false;
	long k = http_body_framer_feed(&d->dr_frame, p, n, &done);

	if (k < 0)
		return -1;
	if (done)
		d->dr_resp_done = true;
	if ((size_t)k < n)
		d->dr_t->tn_up_dirty = true;
	return k;
}

/* Response head handling (HTTP mode, upstream->client): accumulate, check, pass interim
 * heads on, judge the final one (on_response), rebuild it, frame what follows. */
int
relay_http_take_head(struct dir *d, const char *p, size_t n, enum reason *why)
{
	struct tunnel *t = d->dr_t;
	struct httpresp r;
	long li;

	/* room for a whole head plus one read: no byte of a recv is ever dropped */
	if (d->dr_head == NULL && (d->dr_head = malloc(EGRESS_RESPONSE_HEAD_MAX + TUNNEL_BUF + 1)) ==
	    NULL) {
		*why = REASON_INTERNAL_ERROR;
		return -1;
	}
	if (n > EGRESS_RESPONSE_HEAD_MAX + TUNNEL_BUF + 1 - d->dr_headlen) {
		*why = REASON_RESPONSE_TOO_LARGE;
		return -1;
	}
	memcpy(d->dr_head + d->dr_headlen, p, n);
	d->dr_headlen += n;
	for (;;) {
		size_t head_len;
		int status;
		enum http_resp_body kind = HTTP_RESP_NONE;
		uint64_t blen = 0;
		/* The one response-head parser (egressd/httpresp.h), once over these bytes. */
		switch (httpresp_parse(d->dr_head, d->dr_headlen, 0, &r)) {
		case HTTPRESP_INCOMPLETE:
			return 0;
		case HTTPRESP_TOO_LARGE:
			*why = REASON_RESPONSE_TOO_LARGE;
			return -1;
		case HTTPRESP_INVALID:
			*why = REASON_BAD_RESPONSE;
			return -1;
		case HTTPRESP_OK:
			break;
		}
		head_len = r.head_len;
		status = r.status;
		if (status == 407 && t->tn_o.via_proxy) {
			if (t->tn_o.proxy_status != NULL)
				*t->tn_o.proxy_status = status;
			*why = t->tn_o.proxy_auth_sent ? REASON_UPSTREAM_AUTH_FAILED :
			    REASON_UPSTREAM_AUTH_REQUIRED;
			return -1;
		}
		if (status == 101) {
			*why = REASON_BAD_RESPONSE;   /* no protocol switch through the forwarder */
			return -1;
		}
		bool interim = status < 200;
		if (!interim) {
			if (http_response_framing(&r, t->tn_o.head_request, &kind, &blen) != 0) {
				*why = REASON_BAD_RESPONSE;
				return -1;
			}
			if (t->tn_o.on_response != NULL) {
				char ref[TUNNEL_REFUSAL_MAX];
				size_t nref = 0;
				enum reason rr = t->tn_o.on_response(&r, ref, &nref, t->tn_arg);
				if (rr != REASON_ALLOWED) {
					if (nref > 0 && nref <= sizeof(ref) &&
					    (t->tn_refusal = malloc(nref)) != NULL) {
						memcpy(t->tn_refusal, ref, nref);
						t->tn_nrefusal = nref;
					}
					*why = rr;
					return -1;
				}
			}
		}
		bool keep = !interim && t->tn_o.keep_client && kind != HTTP_RESP_CLOSE;
		size_t rest = d->dr_headlen - head_len;
		if (!tunnel_dir_reserve(d, d->dr_blen + EGRESS_RESPONSE_HEAD_MAX + 512 + rest)) {
			*why = REASON_INTERNAL_ERROR;
			return -1;
		}
		size_t m = http_build_client_response(&r, keep, d->dr_buf + d->dr_blen,
		    d->dr_bcap - d->dr_blen - rest);
		if (m == 0) {
			*why = REASON_RESPONSE_TOO_LARGE;
			return -1;
		}
		d->dr_blen += m;
		if (interim) {
			memmove(d->dr_head, d->dr_head + head_len, rest);
			d->dr_headlen = rest;
			if (rest == 0)
				return 0;
			continue;
		}
		d->dr_final_started = true;
		d->dr_want_head = false;
		t->tn_keep = keep;
		t->tn_resp_reusable = r.minor == 1;
		for (size_t i = 0; (li = httpresp_find(&r, "connection", i)) >= 0; i++)
			if (httpresp_value_has_token(r.headers[li].value, r.headers[li].value_len,
			    "close"))
				t->tn_resp_reusable = false;
		http_body_framer_init(&d->dr_frame, kind, blen);
		long k = relay_http_frame_body(d, d->dr_head + head_len, rest);
		if (k < 0) {
			*why = REASON_BAD_RESPONSE;
			return -1;
		}
		memcpy(d->dr_buf + d->dr_blen, d->dr_head + head_len, (size_t)k);
		d->dr_blen += (size_t)k;
		free(d->dr_head);
		d->dr_head = NULL;
		d->dr_headlen = 0;
		return 1;
	}
}

/* The response was delivered: the exchange is over. The client connection stays open
 * only when it can carry another request: keep-alive asked for, the response framed and
 * the whole request body forwarded. */
void
relay_http_delivered(struct tunnel *t)
{
	struct dir *c2u = &t->tn_d[0];

	bool sent = c2u->dr_frame.done && c2u->dr_boff == c2u->dr_blen && c2u->dr_inpipe == 0;

	if (t->tn_keep && !t->tn_client_eof && sent) {
		t->tn_keep_cfd = true;
		if (t->tn_o.client_kept != NULL)
			*t->tn_o.client_kept = true;
	}
	if (t->tn_o.keep_upstream && t->tn_resp_reusable && !t->tn_up_dirty && sent &&
	    t->tn_d[1].dr_frame.kind != HTTP_RESP_CLOSE) {
		t->tn_keep_ufd = true;
		if (t->tn_o.upstream_kept_fd != NULL)
			*t->tn_o.upstream_kept_fd = t->tn_ufd;
	}
	tunnel_end(t, REASON_CLOSE_UPSTREAM);
}

static void retry_connected(const struct connector_result *r, void *arg);

/*
 * The reused upstream socket failed before the origin said anything: it closed the idle
 * connection as egressd reused it (a race no client can avoid). The request has no body,
 * so the forwarded head kept in rhead is the whole request: connect once more to the same
 * pinned address, through the one connector (egressd/connector.h) like every upstream
 * connection, and send it again (retry_connected). False when that is not allowed or not
 * possible (the caller fails as before).
 */
bool
relay_http_retry_fresh(struct tunnel *t)
{
	struct dir *c2u = &t->tn_d[0], *u2c = &t->tn_d[1];
	/* one address, one attempt; the tunnel's idle timer bounds the wait (an origin that
	 * does not answer is upstream_timeout, as for the first connection's response) */
	struct connector_opts co = { .max_inflight = 1, .stagger_us = 0, .deadline_us = 0 };

	if (!t->tn_o.retry || t->tn_retried || t->tn_up_any || t->tn_closing ||
	    t->tn_o.req_body != 0 || !c2u->dr_frame.done || u2c->dr_final_started || u2c->dr_headlen != 0 ||
	    t->tn_rhead == NULL || !tunnel_dir_reserve(c2u, t->tn_nrhead))
		return false;
	t->tn_retried = true;
	t->tn_retry_conn = connector_start(t->tn_base, &t->tn_o.retry_addr, 1, t->tn_o.retry_port, &co,
	    retry_connected, NULL, t);
	if (t->tn_retry_conn == NULL)
		return false;
	log_debug("tunnel: reused upstream connection closed before any response byte; "
	    "retrying the request once on a fresh connection to the same pinned address");
	/* the failed socket is done with: nothing waits on it while the connector runs */
	event_del(u2c->dr_rev);
	event_del(c2u->dr_wev);
	close(t->tn_ufd);
	t->tn_ufd = -1;
	u2c->dr_src = -1;
	c2u->dr_dst = -1;
	if (t->tn_o.retried != NULL)
		*t->tn_o.retried = true;
	return true;
}

/* The fresh connection of the retry: send the whole head again on it, or end (the origin
 * is unreachable now, as the first failure said). */
static void
retry_connected(const struct connector_result *r, void *arg)
{
	struct tunnel *t = arg;
	struct dir *c2u = &t->tn_d[0], *u2c = &t->tn_d[1];
	struct event *rev = NULL, *wev = NULL;

	t->tn_retry_conn = NULL;           /* it frees itself */
	/* the old socket's events are deleted (relay_http_retry_fresh): the same slots
	 * take the new socket */
	if (r->fd >= 0) {
		rev = tunnel_ev_assign(t, TUNNEL_EV_READ(1), r->fd, EV_READ, tunnel_ev_read, u2c);
		wev = tunnel_ev_assign(t, TUNNEL_EV_WRITE(0), r->fd, EV_WRITE, tunnel_ev_write, c2u);
	}
	if (rev == NULL || wev == NULL) {
		if (r->fd >= 0)
			close(r->fd);
		tunnel_end(t, REASON_UPSTREAM_RESET);
		return;
	}
	u2c->dr_rev = rev;
	c2u->dr_wev = wev;
	t->tn_ufd = r->fd;
	u2c->dr_src = r->fd;
	c2u->dr_dst = r->fd;
	memcpy(c2u->dr_buf, t->tn_rhead, t->tn_nrhead);  /* the whole head again */
	c2u->dr_boff = 0;
	c2u->dr_blen = t->tn_nrhead;
	c2u->dr_done = false;
	c2u->dr_eof = false;
	u2c->dr_eof = false;
	u2c->dr_done = false;
	t->tn_last_ms = mono_msec();
	event_add(c2u->dr_wev, NULL);
	event_add(u2c->dr_rev, NULL);
}
