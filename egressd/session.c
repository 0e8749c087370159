/*
 * session.c - the per-connection step machine of egressd, written in the order a request
 * travels (session.h states it): accept and request head, authorization, route (upstream
 * proxies), resolve, address check, connect, allow record, tunnel; then the keep-alive
 * hand-off and the life cycle (free, refuse, kill). Its records are session_record.c.
 */
#define _GNU_SOURCE        /* memmem */
#include "egressd/session.h"
#include "egressd/session_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
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
#include "common/host.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/reasons.h"
#include "common/util.h"
#include "egressd/addrcheck.h"
#include "egressd/connector.h"
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
#include "egressd/tpool.h"
#include "egressd/tunnel.h"
#include "egressd/proxycreds.h"
#include "egressd/redirect.h"
#include "egressd/redirmemo.h"
#include "egressd/upool.h"
#include "egressd/upstream.h"

/* The steps, in the order a request travels (each calls the next); then the keep-alive
 * hand-off and the life cycle shared by all of them. */
static enum reason grant_gone(const struct lgrant *lg);
static void keep_reqline(struct session *s, const unsigned char *p, size_t n);
static void head_read(struct bufferevent *bev, void *arg);
static bool head_keep(struct session *s, const char *p);
static void head_done(struct session *s);
static void transparent_head_read(struct session *s, struct evbuffer *in,
    const unsigned char *p, size_t look);
static void head_event(struct bufferevent *bev, short what, void *arg);
static void head_timeout(evutil_socket_t fd, short what, void *arg);
static void sni_decided(enum reason r, const struct clienthello *ch, void *arg);
static void follow_memo(struct session *s);
static void authorize(struct session *s);
static void log_probed(int err, void *arg);
static void try_route_entry(struct session *s);
static void routed(const struct route_result *res, void *arg);
static void step_route(struct session *s);
static void proxied(const struct upstream_result *r, void *arg);
static void proxy_gate(struct upstream_req *u, const struct upstream_result *so_far,
    void *arg);
static void step_proxy(struct session *s, const struct addr *pinned);
static void resolved(const struct resolve_answer *ans, void *arg);
static void step_resolve(struct session *s);
static void step_check(struct session *s, const struct addr *in, size_t n);
static void connect_failed_all(struct session *s, const struct connector_result *r);
static void connected(const struct connector_result *r, void *arg);
static void step_connect(struct session *s);
static void allow_logged(int err, void *arg);
static void step_log_allow(struct session *s);
static void tunnel_done(enum reason why, uint64_t up, uint64_t down, void *arg);
static long body_bytes(const struct http_request *req, const unsigned char *p, size_t n);
static enum reason session_on_response(const struct httpresp *r, char *refusal,
    size_t *nrefusal, void *arg);
static void start_tunnel(struct session *s);
static void sni_end(struct session *s, enum reason why);
static void setup_free(struct session *s);
static void session_detach(struct session *s);
static void cancel_pending(struct session *s);
static void session_free(struct session *s);
static void refuse_drain(struct bufferevent *bev, void *arg);
static void refuse_flushed(struct bufferevent *bev, void *arg);
static void refuse_event(struct bufferevent *bev, short what, void *arg);
static void refuse_timeout(evutil_socket_t fd, short what, void *arg);
static void session_refuse(struct session *s, enum reason r);
static void session_kill(struct grant_conn *gc, enum reason why);

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

/* The current route entry goes through an upstream proxy (false before the route). */
static bool
via_proxy(const struct session *s)
{
	const struct session_setup *su = s->se_su;

	return su->su_route.n > 0 && su->su_route.entries[su->su_route_i].kind != PROXY_DIRECT;
}

/*
 * Pinning through a proxy: resolve and check locally, send the checked literal. An IP
 * literal destination is always sent as itself (after the class check). Without pinning
 * (the default, "preferred") egressd still resolves and checks the classes itself where
 * it can (check-without-pinning: a name that resolves only to refused classes is
 * refused), and sends the name: the proxy resolves (attested: false, checked: local).
 * Where it cannot resolve the name, the name goes to the proxy unchecked (checked: none);
 * pinning = required refuses instead (docs/routing.md).
 */
static bool
pin_local(const struct session *s)
{
	return via_proxy(s) && (s->se_lg->g->pinning == PINNING_REQUIRED ||
	    s->se_su->su_req.host.kind != HOST_NAME);
}

/*
 * Connected to the checked address kept[idx] (or, through a proxy, at its gate): from
 * now on that is the hop's pinned address when egressd chose it (attested).
 */
static void
pin(struct session *s, size_t idx)
{
	s->se_attested = !via_proxy(s) || pin_local(s);
	if (s->se_attested)
		s->se_pinned = s->se_su->su_ac.kept[idx];
}

/*
 * The allow record could not be written: the upstream socket is closed before the
 * refusal. A direct hop is then no longer connected (its deny record names no pinned
 * address); at a proxy's gate the literal egressd chose stays what it would have sent.
 */
static void
unpin(struct session *s)
{
	struct session_setup *su = s->se_su;

	if (!via_proxy(s))
		s->se_attested = false;
	if (su->su_ufd >= 0)
		close(su->su_ufd);
	su->su_ufd = -1;
}

/* ---- hops ---- */

/* The n bytes at b into out (len bytes), cut to fit and terminated, as snprintf would. */
static void
copy_cut(char *out, size_t len, const char *b, size_t n)
{
	if (n >= len)
		n = len - 1;
	memcpy(out, b, n);
	out[n] = '\0';
}

const char *
session_hop_id(struct session *s)
{
	/* "%s/%u" of se_conn and the hop's number, by hand (once per hop) */
	if (s->se_hop[0] == '\0') {
		char b[sizeof(s->se_conn) + 1 + 20];
		size_t o = strnlen(s->se_conn, sizeof(s->se_conn) - 1);

		memcpy(b, s->se_conn, o);
		b[o++] = '/';
		o += u64_to_dec(b + o, ++s->se_hop_n);
		copy_cut(s->se_hop, sizeof(s->se_hop), b, o);
	}
	return s->se_hop;
}

/* ---- request head ---- */

/* Printable, escaped copy of the first line for the record of a malformed head. */
static void
keep_reqline(struct session *s, const unsigned char *p, size_t n)
{
	char *line = s->se_su->su_reqline;
	size_t o = 0;

	for (size_t i = 0; i < n && p[i] != '\r' && p[i] != '\n'; i++) {
		if (o + 5 > EGRESS_LOG_TARGET_MAX)
			break;
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') {
			line[o++] = (char)p[i];
		} else {
			snprintf(line + o, 5, "\\x%02x", p[i]);
			o += 4;
		}
	}
	line[o] = '\0';
}

/* ---- transparent capture (docs/transparent.md) ---- */

/*
 * A captured connection: the worker dialled an address of the grant's synthetic pool and
 * the run's link namespace redirected it here; SO_ORIGINAL_DST (the connection's conntrack
 * entry in that namespace) says which. A connection to the listener itself (a
 * proxy-aware client) has no translation: its original destination is the listener.
 * Returns REASON_ALLOWED (se_cap says whether it is captured), or the refusal.
 */
static enum reason
transparent_detect(struct session *s)
{
	struct sockaddr_in od, loc;
	socklen_t ol = sizeof(od), ll = sizeof(loc);
	struct session_capture *cap;
	struct host h;
	const char *name;
	char ab[INET_ADDRSTRLEN];

	if (s->se_lg->tpool == NULL)
		return REASON_ALLOWED;
	memset(&od, 0, sizeof(od));
	if (getsockopt(s->se_cfd, SOL_IP, SO_ORIGINAL_DST, &od, &ol) != 0 ||
	    getsockname(s->se_cfd, (struct sockaddr *)&loc, &ll) != 0 ||
	    od.sin_family != AF_INET || loc.sin_family != AF_INET ||
	    (od.sin_addr.s_addr == loc.sin_addr.s_addr && od.sin_port == loc.sin_port))
		return REASON_ALLOWED;
	if ((cap = calloc(1, sizeof(*cap))) == NULL)
		return REASON_INTERNAL_ERROR;
	s->se_cap = cap;
	snprintf(cap->cap_orig_dst, sizeof(cap->cap_orig_dst), "%s:%u",
	    inet_ntop(AF_INET, &od.sin_addr, ab, sizeof(ab)) != NULL ? ab : "?",
	    (unsigned)ntohs(od.sin_port));
	name = tpool_lookup(s->se_lg->tpool, ntohl(od.sin_addr.s_addr));
	if (name == NULL || od.sin_port == 0 ||
	    host_parse(name, strlen(name), HOST_NO_PORT, &h) != HOST_OK)
		return REASON_TRANSPARENT_UNMAPPED;
	snprintf(cap->cap_name, sizeof(cap->cap_name), "%s", name);
	cap->cap_port = ntohs(od.sin_port);
	/* A name granted for this port only as http:// is plain HTTP: its requests are read
	 * and forwarded one by one like absolute-form ones. Anything else is the CONNECT a
	 * proxy-aware client would have sent. */
	cap->cap_http = grant_allows(s->se_lg->g, SCHEME_HTTP, &h, cap->cap_port, NULL) &&
	    !grant_allows(s->se_lg->g, SCHEME_HTTPS, &h, cap->cap_port, NULL);
	return REASON_ALLOWED;
}

/* The CONNECT the worker would have sent; authorized like one (no "200" is ever written:
 * the worker believes it is talking to the origin). */
static void
transparent_connect(struct session *s)
{
	struct session_setup *su = s->se_su;
	const struct session_capture *cap = s->se_cap;
	char head[EGRESS_HOSTNAME_MAX + 64];
	enum reason why;
	int hl = snprintf(head, sizeof(head), "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n\r\n",
	    cap->cap_name, (unsigned)cap->cap_port, cap->cap_name, (unsigned)cap->cap_port);

	if (hl <= 0 || (size_t)hl >= sizeof(head) || (su->su_head = malloc((size_t)hl)) == NULL) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	memcpy(su->su_head, head, (size_t)hl);
	if (http_parse_request(su->su_head, (size_t)hl, &su->su_req, &why) != HTTP_PARSE_OK) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	s->se_state = SE_AUTHORIZE;
	s->se_method = su->su_req.method;
	authorize(s);
}

/*
 * Plain HTTP captured: the worker's origin-form head ("GET /x HTTP/1.1") becomes the
 * absolute-form head a proxy-aware client sends ("GET http://name:port/x HTTP/1.1"), then
 * the one parser decides as for any request. Its Host header must name the same host as
 * the address stood for (a worker cannot dial one granted name's address and ask another
 * origin behind it): host_mismatch otherwise.
 */
static void
transparent_head_read(struct session *s, struct evbuffer *in, const unsigned char *p,
    size_t look)
{
	struct session_setup *su = s->se_su;
	const struct session_capture *cap = s->se_cap;
	char pre[EGRESS_HOSTNAME_MAX + 32];
	size_t m, pl, rl;
	char *rw;
	struct http_request *tmp;
	enum http_parse pr;
	enum reason why;
	int n;

	if (p == NULL) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	/* The method token (at most 24 bytes), one space, then an origin-form target. */
	for (m = 0; m < look && m <= 24 && p[m] != ' '; m++)
		;
	if (m == look || m + 1 == look)
		return;                         /* not that far yet */
	if (m == 0 || m > 24 || p[m + 1] != '/') {
		keep_reqline(s, p, look);
		session_refuse(s, REASON_MALFORMED_REQUEST);
		return;
	}
	n = snprintf(pre, sizeof(pre), "http://%s:%u", cap->cap_name, (unsigned)cap->cap_port);
	if (n <= 0 || (size_t)n >= sizeof(pre)) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	pl = (size_t)n;
	rl = look + pl;
	rw = malloc(rl);
	tmp = malloc(sizeof(*tmp));
	if (rw == NULL || tmp == NULL) {
		free(rw);
		free(tmp);
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	memcpy(rw, p, m + 1);
	memcpy(rw + m + 1, pre, pl);
	memcpy(rw + m + 1 + pl, p + m + 1, look - m - 1);
	pr = http_parse_request(rw, rl, tmp, &why);
	if (pr == HTTP_PARSE_INCOMPLETE) {
		free(rw);
		free(tmp);
		return;
	}
	if (pr == HTTP_PARSE_ERROR) {
		free(rw);
		free(tmp);
		keep_reqline(s, p, look);
		session_refuse(s, why);
		return;
	}
	su->su_head = malloc(tmp->head_len);
	if (su->su_head == NULL) {
		free(rw);
		free(tmp);
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	memcpy(su->su_head, rw, tmp->head_len);
	evbuffer_drain(in, tmp->head_len - pl);
	rl = tmp->head_len;
	free(rw);
	free(tmp);
	if (http_parse_request(su->su_head, rl, &su->su_req, &why) != HTTP_PARSE_OK) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	s->se_state = SE_AUTHORIZE;
	s->se_method = su->su_req.method;
	bufferevent_disable(su->su_cbev, EV_READ);
	event_del(su->su_timer);
	for (size_t i = 0; i < su->su_req.nheaders; i++) {
		const struct http_header *hh = &su->su_req.headers[i];
		struct host hv;

		if (hh->name_len != 4 || strncasecmp(hh->name, "host", 4) != 0)
			continue;
		if (host_parse(hh->value, hh->value_len, 0, &hv) != HOST_OK ||
		    hv.kind != HOST_NAME || strcmp(hv.name, cap->cap_name) != 0 ||
		    (hv.port != 0 && hv.port != cap->cap_port)) {
			log_info("conn %llu: captured request to %s carries Host %.*s: refused",
			    (unsigned long long)s->se_id, cap->cap_name,
			    (int)(hh->value_len > 200 ? 200 : hh->value_len), hh->value);
			session_refuse(s, REASON_HOST_MISMATCH);
			return;
		}
	}
	authorize(s);
}

static void
head_read(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;
	struct session_setup *su = s->se_su;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len, look;
	unsigned char *p;
	struct http_request *req = &su->su_req;   /* parsed in place, once */
	enum reason why;
	enum http_parse pr;

	/* Reading stays on after the head (below): what arrives meanwhile waits in the
	 * input untouched (no pullup per read) */
	if (s->se_state != SE_HEAD)
		return;
	len = evbuffer_get_length(in);
	look = len < EGRESS_REQUEST_HEAD_MAX + 1 ? len : EGRESS_REQUEST_HEAD_MAX + 1;
	p = evbuffer_pullup(in, (ev_ssize_t)look);
	if (s->se_cap != NULL && s->se_cap->cap_http) {
		transparent_head_read(s, in, p, look);
		return;
	}
	if (p == NULL) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	pr = http_parse_request((const char *)p, look, req, &why);
	if (pr != HTTP_PARSE_OK)
		/* no request yet, or none at all: nothing half-parsed (pointing into the
		 * input buffer) stays behind for the records */
		memset(req, 0, sizeof(*req));
	if (pr == HTTP_PARSE_INCOMPLETE)
		return;
	if (pr == HTTP_PARSE_ERROR) {
		keep_reqline(s, p, look);
		session_refuse(s, why);
		return;
	}
	if (!head_keep(s, (const char *)p)) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	/* The rest stays queued. Reading stays enabled while the hop is decided and
	 * connected: head_read ignores what arrives meanwhile (not SE_HEAD), the input's
	 * high-water mark bounds it, and the tunnel gets it as pending bytes. For a CONNECT
	 * (early client bytes or not, an SNI check or not) the tunnel adds its read event on
	 * this socket before the bufferevent is freed (start_tunnel), so the socket stays in
	 * the epoll set throughout: two epoll_ctl calls fewer than a disable here and an add
	 * there. HTTP forwarding only activates the tunnel's event: the socket leaves the set
	 * at bufferevent_free and comes back later. A refusal disables reading itself. */
	evbuffer_drain(in, su->su_req.head_len);
	head_done(s);
}

/*
 * The head is parsed in place at p (su_req points into it): keep egressd's own copy, which
 * the request's pointers follow from now on (parsed once). False on ENOMEM, with nothing
 * left pointing at p.
 */
static bool
head_keep(struct session *s, const char *p)
{
	struct session_setup *su = s->se_su;
	size_t hl = su->su_req.head_len;

	su->su_head = malloc(hl);
	if (su->su_head == NULL) {
		memset(&su->su_req, 0, sizeof(su->su_req));
		return false;
	}
	memcpy(su->su_head, p, hl);
	http_request_rebase(&su->su_req, p, su->su_head);
	return true;
}

/* The head is kept: the hop is decided from here on. */
static void
head_done(struct session *s)
{
	struct session_setup *su = s->se_su;

	s->se_state = SE_AUTHORIZE;
	s->se_method = su->su_req.method;
	if (su->su_timer != NULL)
		event_del(su->su_timer);
	log_debug("conn %llu %s: %s %.*s", (unsigned long long)s->se_id, s->se_client,
	    http_method_str(su->su_req.method), (int)(su->su_req.target_len > 200 ? 200 :
	    su->su_req.target_len), su->su_req.target);
	authorize(s);
}

static void
head_event(struct bufferevent *bev, short what, void *arg)
{
	struct session *s = arg;

	/* The client left before a complete head: there is no hop to decide. */
	if (s->se_state == SE_HEAD)
		session_free(s);
}

static void
head_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;

	if (s->se_state == SE_TLS_CHECK) {
		/* no whole ClientHello within EGRESS_CLIENTHELLO_WAIT_MS (sniguard.h) */
		sni_decided(REASON_HEADER_TIMEOUT, NULL, s);
		return;
	}
	if (s->se_state != SE_HEAD)
		return;
	/* An idle kept-alive connection (an earlier hop was decided on it) that sent nothing
	 * more has no hop to decide. */
	if (s->se_hop_n > 0 && s->se_su->su_cbev != NULL &&
	    evbuffer_get_length(bufferevent_get_input(s->se_su->su_cbev)) == 0) {
		session_free(s);
		return;
	}
	session_refuse(s, REASON_HEADER_TIMEOUT);
}

/* A request's setup state, sockets not yet there. NULL on ENOMEM. */
static struct session_setup *
setup_new(void)
{
	struct session_setup *su = calloc(1, sizeof(*su));

	if (su == NULL)
		return NULL;
	su->su_ufd = -1;
	su->su_kept_ufd = -1;
	su->su_client_ours = true;
	return su;
}

/* "c-<boot id, 8 hex digits>-<n>", as "c-%08x-%llu" (by hand: once per connection, and
 * snprintf was a measurable share of a transaction's user-space time). */
static void
conn_name(char *out, size_t len, uint32_t boot_id, uint64_t n)
{
	static const char hx[] = "0123456789abcdef";
	char b[2 + 8 + 1 + 20 + 1];
	size_t o = 0;

	b[o++] = 'c';
	b[o++] = '-';
	for (int i = 7; i >= 0; i--)
		b[o++] = hx[(boot_id >> (i * 4)) & 0xf];
	b[o++] = '-';
	o += u64_to_dec(b + o, n);
	copy_cut(out, len, b, o);
}

/* "a.b.c.d:port" or "[v6]:port", as "%s:%u" / "[%s]:%u" (cut to len like snprintf). */
static void
client_name(char *out, size_t len, const char *addr, bool v6, unsigned port)
{
	char b[EGRESS_ADDRSTR_MAX + 8];
	size_t o = 0, n = strnlen(addr, EGRESS_ADDRSTR_MAX - 1);

	if (v6)
		b[o++] = '[';
	memcpy(b + o, addr, n);
	o += n;
	if (v6)
		b[o++] = ']';
	b[o++] = ':';
	o += u64_to_dec(b + o, port);
	copy_cut(out, len, b, o);
}

/*
 * The client's bufferevent and the session's timer are made when first needed: a head
 * that arrives whole in the first read (head_start) is decided and handed to the tunnel
 * without either, unless a refusal is written or a ClientHello awaited. NULL on ENOMEM.
 */
static struct bufferevent *
client_bev(struct session *s)
{
	struct session_setup *su = s->se_su;

	if (su->su_cbev == NULL)
		su->su_cbev = bufferevent_socket_new(s->se_d->base, s->se_cfd, 0);
	return su->su_cbev;
}

static struct event *
setup_timer(struct session *s)
{
	struct session_setup *su = s->se_su;

	if (su->su_timer == NULL)
		su->su_timer = evtimer_new(s->se_d->base, head_timeout, s);
	return su->su_timer;
}

/* Bytes already read from the client socket go into its bufferevent's input as the
 * bufferevent's own read would put them (a socket bufferevent keeps the end of its input
 * frozen for everybody but itself). */
static int
client_input_add(struct bufferevent *bev, const void *p, size_t n)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	int rc = evbuffer_unfreeze(in, 0);

	if (rc == 0)
		rc = evbuffer_add(in, p, n);
	(void)evbuffer_freeze(in, 0);
	return rc;
}

/*
 * Wait for the request head through the client's bufferevent, under the header timeout,
 * with p/n (already read from the socket) at the front of its input; a head already
 * there is judged at once. False when the bufferevent, the timer or the queued bytes
 * could not be had (ENOMEM): nothing was started, the caller ends the session.
 */
static bool
head_wait(struct session *s, const void *p, size_t n)
{
	struct session_setup *su = s->se_su;
	const struct egressd_config *cfg = s->se_d->cfg;
	struct timeval tv;

	if (client_bev(s) == NULL || setup_timer(s) == NULL)
		return false;
	/* Accept only a bounded head before the decision; the parser enforces limits, the
	 * watermark keeps libevent from reading further ahead. */
	bufferevent_setwatermark(su->su_cbev, EV_READ, 0, EGRESS_REQUEST_HEAD_MAX + 1);
	bufferevent_setcb(su->su_cbev, head_read, NULL, head_event, s);
	if (n > 0 && client_input_add(su->su_cbev, p, n) != 0)
		return false;
	bufferevent_enable(su->su_cbev, EV_READ);
	tv.tv_sec = (time_t)(cfg->header_timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)((cfg->header_timeout_ms % 1000) * 1000);
	evtimer_add(su->su_timer, &tv);
	if (n > 0)
		head_read(su->su_cbev, s);   /* last: it may decide (and free) the session */
	return true;
}

/*
 * A client sends its request right behind its connect, so it is usually there when the
 * connection is accepted: read it now, at most EARLY_READ bytes, instead of one turn of
 * the loop later. A read that holds exactly one whole head and nothing more (a CONNECT;
 * an HTTP request whose body, if any, comes later) is decided from it: the hop needs no
 * bufferevent and no header timer, and what the client sends after it waits in the
 * socket for the tunnel. Anything else (part of a head, more than a head, a captured
 * connection's, nothing yet, the end of the stream, an error) goes to head_wait, which
 * sees the same as before.
 */
#define EARLY_READ 4096

static void
head_start(struct session *s)
{
	struct session_setup *su = s->se_su;
	char b[EARLY_READ];
	enum reason why;
	ssize_t n;

	do
		n = recv(s->se_cfd, b, sizeof(b), MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		if (!head_wait(s, NULL, 0))
			session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	if (s->se_cap != NULL || http_parse_request(b, (size_t)n, &su->su_req, &why) !=
	    HTTP_PARSE_OK || su->su_req.head_len != (size_t)n) {
		memset(&su->su_req, 0, sizeof(su->su_req));   /* nothing points into b */
		if (!head_wait(s, b, (size_t)n))
			session_refuse(s, REASON_INTERNAL_ERROR);   /* the bytes read are lost */
		return;
	}
	if (!head_keep(s, b)) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	head_done(s);
}

void
session_new(struct daemon *d, struct lgrant *lg, int fd, const struct sockaddr *peer,
    socklen_t peerlen)
{
	struct session *s = calloc(1, sizeof(*s));
	struct session_setup *su = s != NULL ? setup_new() : NULL;
	struct addr a;
	char ab[EGRESS_ADDRSTR_MAX];
	uint16_t port;

	if (su == NULL) {
		free(s);
		close(fd);
		return;
	}
	s->se_su = su;
	s->se_d = d;
	s->se_lg = lg;
	lgrant_ref(lg);
	lg->nconns++;
	lg->total_conns++;
	d->nconns++;
	d->stats.connections_total++;
	s->se_id = ++d->next_conn_id;
	conn_name(s->se_conn, sizeof(s->se_conn), d->boot_id, s->se_id);
	s->se_cfd = fd;
	s->se_gc.kill = session_kill;
	lgrant_attach(lg, &s->se_gc);
	s->se_attached = true;
	addr_from_sockaddr(&a, peer);
	port = ntohs(peer->sa_family == AF_INET6 ?
	    ((const struct sockaddr_in6 *)peer)->sin6_port :
	    ((const struct sockaddr_in *)peer)->sin_port);
	client_name(s->se_client, sizeof(s->se_client), addr_to_str(&a, ab, sizeof(ab)),
	    peer->sa_family == AF_INET6, port);
	(void)peerlen;

	s->se_state = SE_HEAD;
	{
		enum reason tr = transparent_detect(s);
		if (tr != REASON_ALLOWED) {
			session_refuse(s, tr);
			return;
		}
	}
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
	if (s->se_cap != NULL && !s->se_cap->cap_http) {
		transparent_connect(s);
		return;
	}
	head_start(s);    /* last: it may decide (and free) the session */
}

/* ---- authorization ---- */

/*
 * docs/redirects.md, "Hop chains": does this request follow a redirect egressd let
 * through? The memo links the
 * record to it (parent_hop, chain depth) and, after a cross-origin redirect, makes the
 * request go without Authorization and Cookie unless the grant binds credentials to this
 * origin. It never grants anything: the hop is authorized below like any other.
 */
static void
follow_memo(struct session *s)
{
	struct session_setup *su = s->se_su;
	const struct grant *g = s->se_lg->g;
	struct redirmemo_hit hit;
	bool connect = su->su_req.method == HTTP_CONNECT;

	redirmemo_lookup(s->se_d->memo, s->se_lg->id, connect ? SCHEME_HTTPS : SCHEME_HTTP,
	    &su->su_req.host, su->su_req.port, connect ? NULL : su->su_req.path,
	    connect ? 0 : su->su_req.path_len, mono_msec(), &hit);
	if (hit.linked) {
		memcpy(su->su_parent_hop, hit.parent_hop, sizeof(su->su_parent_hop));
		su->su_chain_depth = hit.depth;
	}
	if (connect || !hit.strip ||
	    grant_credentials_bound(g, SCHEME_HTTP, &su->su_req.host, su->su_req.port))
		return;
	su->su_strip_creds = true;
	for (size_t i = 0; i < su->su_req.nheaders; i++) {
		const struct http_header *h = &su->su_req.headers[i];
		if ((h->name_len == 13 && strncasecmp(h->name, "authorization", 13) == 0) ||
		    (h->name_len == 6 && strncasecmp(h->name, "cookie", 6) == 0))
			su->su_creds_stripped = true;
	}
}

static void
authorize(struct session *s)
{
	struct session_setup *su = s->se_su;
	const struct grant *g = s->se_lg->g;

	follow_memo(s);

	if (grant_gone(s->se_lg) != REASON_ALLOWED) {
		session_refuse(s, grant_gone(s->se_lg));
		return;
	}
	if (s->se_d->draining) {
		session_refuse(s, REASON_SHUTTING_DOWN);
		return;
	}
	if (su->su_req.method != HTTP_CONNECT && su->su_req.upgrade) {
		session_refuse(s, REASON_UPGRADE_REFUSED);
		return;
	}
	/* The run's credential placeholder belongs in its model connection's intercepted
	 * credential header only: seen in any head egressd reads in clear, it is refused. */
	if (s->se_lg->placeholder[0] != '\0' && su->su_head != NULL &&
	    memmem(su->su_head, su->su_req.head_len, s->se_lg->placeholder,
	    strlen(s->se_lg->placeholder)) != NULL) {
		log_info("conn %llu: the run's credential placeholder in a request to %s: refused",
		    (unsigned long long)s->se_id, su->su_req.host.name);
		session_refuse(s, REASON_CREDENTIAL_MISDIRECTED);
		return;
	}
	/* A grant naming a model connection that a reload removed: refused before anything
	 * opens upstream (start_tunnel checks again, a reload may come in between). */
	if (g->connection[0] != '\0' && su->su_req.method == HTTP_CONNECT) {
		const struct connection *c = connections_find(s->se_d->cfg->conns, g->connection);
		if (c == NULL || c->apply == CONN_APPLY_NONE || s->se_d->cfg->origin_ctx == NULL) {
			session_refuse(s, REASON_CONNECTION_UNAVAILABLE);
			return;
		}
	}
	if (!grant_allows(g, su->su_req.scheme, &su->su_req.host, su->su_req.port, NULL)) {
		session_refuse(s, su->su_req.host.kind == HOST_NAME ? REASON_NOT_GRANTED :
		    REASON_IP_LITERAL_NOT_GRANTED);
		return;
	}
	if (g->max_bytes > 0 && s->se_lg->bytes >= g->max_bytes) {
		session_refuse(s, REASON_LIMIT_BYTES);
		return;
	}
	if (!dlog_writable(s->se_d->dlog)) {
		/* The log failed. Past its retry interval this hop probes it (a log_recovered
		 * record) before anything else; until then, and when the probe fails, refuse:
		 * a hop that could not be recorded never opens an upstream connection. */
		if (!dlog_accepting(s->se_d->dlog) || dlog_probe(s->se_d->dlog, log_probed, s,
		    &su->su_ticket) != 0) {
			su->su_ticket = NULL;
			session_refuse(s, REASON_AUDIT_UNAVAILABLE);
			return;
		}
		s->se_state = SE_LOG_PROBE;
		return;
	}
	step_route(s);
}

/* The probe of a failed log (above): written, the log works again and the hop goes on. */
static void
log_probed(int err, void *arg)
{
	struct session *s = arg;

	s->se_su->su_ticket = NULL;
	if (err != 0) {
		session_refuse(s, REASON_AUDIT_UNAVAILABLE);
		return;
	}
	if (grant_gone(s->se_lg) != REASON_ALLOWED) {
		session_refuse(s, grant_gone(s->se_lg));
		return;
	}
	step_route(s);
}

/* ---- route ---- */

static void
try_route_entry(struct session *s)
{
	const struct session_setup *su = s->se_su;

	/* pin_local (above) decides whether this entry resolves and checks locally */
	if (su->su_checked) {
		/* already resolved and checked for an earlier entry: reuse, never re-resolve */
		if (via_proxy(s))
			step_proxy(s, pin_local(s) ? &su->su_ac.kept[0] : NULL);
		else
			step_connect(s);
		return;
	}
	if (su->su_did_resolve) {
		/* an earlier entry's lookup failed: only an unpinned proxy can do without it */
		if (via_proxy(s) && !pin_local(s))
			step_proxy(s, NULL);
		else
			session_refuse(s, via_proxy(s) ? REASON_PINNING_UNAVAILABLE :
			    su->su_dns_status);
		return;
	}
	step_resolve(s);
}

static void
routed(const struct route_result *res, void *arg)
{
	struct session *s = arg;
	struct session_setup *su = s->se_su;

	su->su_rreq = NULL;
	if (res->status != REASON_ALLOWED || res->n == 0) {
		session_refuse(s, res->status != REASON_ALLOWED ? res->status :
		    REASON_ROUTE_UNAVAILABLE);
		return;
	}
	su->su_route = *res;         /* n > 0: routed */
	su->su_route_i = 0;
	try_route_entry(s);
}

static void
step_route(struct session *s)
{
	struct session_setup *su = s->se_su;

	s->se_state = SE_ROUTE;
	/* Direct, or one static proxy: the route is known without a lookup (route.h), and
	 * an idle loop goes on at once. With other callbacks ready in this turn the answer
	 * waits its turn (route_lookup): this turn's connects then go out together and the
	 * origin wakes once for them (docs/performance.md, "The eighteenth round"). */
	if (event_base_get_num_events(s->se_d->base, EVENT_BASE_COUNT_ACTIVE) == 0 &&
	    route_static(s->se_d->router, &su->su_route)) {
		su->su_route_i = 0;
		try_route_entry(s);
		return;
	}
	su->su_rreq = route_lookup(s->se_d->router, su->su_req.scheme,
	    &su->su_req.host, su->su_req.port, routed, s);
	if (su->su_rreq == NULL)
		session_refuse(s, REASON_INTERNAL_ERROR);
}

/* ---- upstream proxies ---- */

/* egressd's Proxy-Authorization value for a forwarded request: wiped, then freed. */
static void
proxy_authz_free(struct session_setup *su)
{
	if (su->su_proxy_authz != NULL) {
		secret_wipe(su->su_proxy_authz, strlen(su->su_proxy_authz));
		free(su->su_proxy_authz);
		su->su_proxy_authz = NULL;
	}
}

/* The proxy's answer so far, for the records (the gate's, then the end's). */
static void
proxy_facts(struct session *s, const struct upstream_result *r)
{
	s->se_proxy_known = true;
	s->se_proxy_have_addr = r->have_proxy_addr;
	s->se_proxy_addr = r->proxy_addr;
	s->se_proxy_status = r->proxy_status;
	s->se_proxy_auth = r->auth;
}

static void
proxied(const struct upstream_result *r, void *arg)
{
	struct session *s = arg;
	struct session_setup *su = s->se_su;

	su->su_ureq = NULL;
	proxy_authz_free(su);
	su->su_proxy_authz = r->proxy_authorization;    /* ours now */
	proxy_facts(s, r);
	su->su_connect_us = mono_usec() - su->su_connect_start_us;
	if (r->status == REASON_ALLOWED) {
		su->su_ufd = r->fd;
		pin(s, 0);              /* under pinning the literal sent is kept[0] */
		metrics_observe(&s->se_d->stats.connect, su->su_connect_us);
		if (!s->se_allow_open) {
			step_log_allow(s);      /* no gate ran (cannot happen with proxy_gate) */
			return;
		}
		if (grant_gone(s->se_lg) != REASON_ALLOWED) {
			session_refuse(s, grant_gone(s->se_lg));
			return;
		}
		start_tunnel(s);
		return;
	}
	log_info("conn %llu: route entry %zu: %s", (unsigned long long)s->se_id,
	    su->su_route_i + 1, r->detail);
	/* Failover only before the gate (connect or TLS to the proxy): after it, the allow
	 * record names this entry and the hop ends here with its close. */
	if (!s->se_allow_open && r->failover_ok && su->su_route_i + 1 < su->su_route.n) {
		su->su_route_i++;
		s->se_proxy_known = false;
		try_route_entry(s);
		return;
	}
	session_refuse(s, r->status);
}

/*
 * The upstream's gate: connected to the proxy (TLS up for https://), nothing of the
 * proxy protocol sent. The allow record comes first (docs/decision-log.md): the proxy
 * sees the CONNECT line, the SOCKS5 request or the forwarded request only once it is on
 * disk; if it cannot be written the connection is closed with nothing sent.
 */
static void
proxy_gate(struct upstream_req *u, const struct upstream_result *so_far, void *arg)
{
	struct session *s = arg;

	(void)u;
	s->se_proxy_known = true;
	s->se_proxy_have_addr = so_far->have_proxy_addr;
	s->se_proxy_addr = so_far->proxy_addr;
	s->se_proxy_auth = so_far->auth;
	s->se_proxy_status = 0;
	pin(s, 0);                      /* under pinning the literal sent is kept[0] */
	s->se_su->su_connect_us = mono_usec() - s->se_su->su_connect_start_us;
	step_log_allow(s);
}

static void
step_proxy(struct session *s, const struct addr *pinned)
{
	struct session_setup *su = s->se_su;
	const struct proxy_route *via = &su->su_route.entries[su->su_route_i];
	struct upstream_params p;

	if (!dlog_writable(s->se_d->dlog)) {
		session_refuse(s, REASON_AUDIT_UNAVAILABLE);
		return;
	}
	memset(&p, 0, sizeof(p));
	p.via = via;
	p.target_name = su->su_req.host.name;
	p.target_addr = pinned;
	p.target_port = su->su_req.port;
	p.cred = proxycreds_find(router_credentials(s->se_d->router), &via->proxy);
	p.res = s->se_d->resolver;
	p.gss = router_gssauth(s->se_d->router);
	/* Only an https:// proxy needs the trust store (loaded by the first such hop). */
	p.tls = via->kind == PROXY_HTTPS ? router_tls_ctx(s->se_d->router) : NULL;
	p.timeout_ms = (uint32_t)router_upstream_timeout_ms(s->se_d->router);
	p.gate = proxy_gate;
	/* Plain HTTP through an http(s) proxy is forwarded in absolute form (proxies commonly
	 * refuse CONNECT to port 80); SOCKS5 carries it as a TCP stream like CONNECT. */
	p.forward = su->su_req.method != HTTP_CONNECT && via->kind != PROXY_SOCKS5;
	s->se_state = SE_CONNECT;
	su->su_connect_start_us = mono_usec();
	su->su_ureq = upstream_connect(s->se_d->base, &p, proxied, s);
	if (su->su_ureq == NULL)
		session_refuse(s, REASON_INTERNAL_ERROR);
}

/* ---- resolve ---- */

static void
resolved(const struct resolve_answer *ans, void *arg)
{
	struct session *s = arg;
	struct session_setup *su = s->se_su;

	su->su_dreq = NULL;
	if (su->su_dns_counted) {
		s->se_lg->dns_pending--;
		su->su_dns_counted = false;
	}
	su->su_did_resolve = true;
	su->su_dns_status = ans->status;
	su->su_resolve_us = ans->duration_us;
	metrics_observe(&s->se_d->stats.dns, ans->duration_us);
	if (ans->status != REASON_ALLOWED) {
		if (via_proxy(s) && !pin_local(s)) {
			/* check-without-pinning could not resolve: the proxy resolves, unchecked
			 * (checked: none in the record) */
			log_debug("conn %llu: %s: no local answer (%s); the proxy resolves it unchecked",
			    (unsigned long long)s->se_id, su->su_req.host.name, reason_str(ans->status));
			step_proxy(s, NULL);
			return;
		}
		if (via_proxy(s)) {
			/* The grant requires pinning, and egressd could not resolve the name itself:
			 * sending the name to the proxy would be an unattested hop. */
			log_info("conn %llu: pinning required for %s but local resolution failed (%s); "
			    "refusing instead of letting the proxy resolve", (unsigned long long)s->se_id,
			    su->su_req.host.name, reason_str(ans->status));
			session_refuse(s, REASON_PINNING_UNAVAILABLE);
			return;
		}
		session_refuse(s, ans->status);
		return;
	}
	su->su_nresolved = ans->naddrs < EGRESS_DNS_ADDRS_MAX ? ans->naddrs :
	    EGRESS_DNS_ADDRS_MAX;
	memcpy(su->su_resolved, ans->addrs,
	    su->su_nresolved * sizeof(su->su_resolved[0]));
	step_check(s, su->su_resolved, su->su_nresolved);
}

static void
step_resolve(struct session *s)
{
	struct session_setup *su = s->se_su;

	if (su->su_req.host.kind != HOST_NAME) {
		su->su_resolved[0] = su->su_req.host.addr;
		su->su_nresolved = 1;
		step_check(s, su->su_resolved, 1);
		return;
	}
	/* max_dns_pending counts lookups that ask the DNS server: a hop that joins a running
	 * lookup of the same name (resolve.h, single flight) or is served by the cache sends
	 * nothing and is not counted. */
	bool joins = !resolver_would_query(s->se_d->resolver, su->su_req.host.name);
	if (!joins && s->se_lg->dns_pending >= s->se_d->cfg->max_dns_pending) {
		session_refuse(s, REASON_LIMIT_DNS_PENDING);
		return;
	}
	s->se_state = SE_RESOLVE;
	su->su_dreq = resolver_lookup(s->se_d->resolver, su->su_req.host.name, resolved, s);
	if (su->su_dreq == NULL) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return;
	}
	if (!joins) {
		s->se_lg->dns_pending++;
		su->su_dns_counted = true;
	}
}

/* ---- address check ---- */

static void
step_check(struct session *s, const struct addr *in, size_t n)
{
	struct session_setup *su = s->se_su;
	struct addr self[SELF_ADDRS_MAX];
	size_t nself = grants_self_addrs(s->se_d->grants, self, SELF_ADDRS_MAX);
	enum reason r;

	if (nself < SELF_ADDRS_MAX && s->se_d->cfg->has_metrics)
		addr_from_sockaddr(&self[nself++], (struct sockaddr *)&s->se_d->cfg->metrics_addr);
	/* egressd's own listeners are never a destination, whatever the grant or the class
	 * override says: addrcheck_hop takes them out first (listed as "self"). */
	r = addrcheck_hop(in, n, su->su_req.host.kind != HOST_NAME, self, nself,
	    &s->se_lg->g->allow_address, &s->se_d->cfg->allow_special, &su->su_ac);
	su->su_checked = true;
	if (r != REASON_ALLOWED) {
		session_refuse(s, r);
		return;
	}
	if (su->su_ac.lifted_override != 0) {
		char cb[128];
		/* per hop at debug level only: the record says override: true, and egressd
		 * names the override once at start-up */
		log_debug("conn %llu: allow_special_address override lifted class(es) %s for %s",
		    (unsigned long long)s->se_id, addrcheck_classes_str(su->su_ac.lifted_override, cb,
		    sizeof(cb)), su->su_req.host.name);
	}
	if (via_proxy(s)) {
		/* pinned: the checked literal; unpinned: the name, after the check */
		step_proxy(s, pin_local(s) ? &su->su_ac.kept[0] : NULL);
		return;
	}
	step_connect(s);
}

/* ---- connect ---- */

/* Every checked address failed: fail over to the next route entry, or refuse. */
static void
connect_failed_all(struct session *s, const struct connector_result *r)
{
	struct session_setup *su = s->se_su;

	if (su->su_route_i + 1 < su->su_route.n) {
		/* the route lists a fallback: a connect failure may move on to it */
		log_info("conn %llu: direct connect failed; trying route entry %zu",
		    (unsigned long long)s->se_id, su->su_route_i + 2);
		su->su_route_i++;
		try_route_entry(s);
		return;
	}
	session_refuse(s, r->timed_out ? REASON_CONNECT_TIMEOUT :
	    r->err == ECONNREFUSED ? REASON_CONNECT_REFUSED : REASON_CONNECT_FAILED);
}

/* The connector's end: the winner is exactly one checked address (pinned). */
static void
connected(const struct connector_result *r, void *arg)
{
	struct session *s = arg;
	struct session_setup *su = s->se_su;

	su->su_connector = NULL;         /* it frees itself */
	if (r->fd < 0) {
		connect_failed_all(s, r);
		return;
	}
	su->su_ufd = r->fd;
	pin(s, r->idx);
	su->su_connect_us = mono_usec() - su->su_connect_start_us;
	metrics_observe(&s->se_d->stats.connect, su->su_connect_us);
	step_log_allow(s);
}

static void
step_connect(struct session *s)
{
	struct session_setup *su = s->se_su;

	if (!dlog_writable(s->se_d->dlog)) {
		/* Do not even open the upstream connection when it could not be recorded. */
		session_refuse(s, REASON_AUDIT_UNAVAILABLE);
		return;
	}
	s->se_state = SE_CONNECT;
	su->su_connect_start_us = mono_usec();
	/* Plain HTTP on the direct route: an idle connection this grant left to one of the
	 * addresses just checked saves the connect (never another grant's, never another
	 * address: the pool's key is exactly that). */
	if (su->su_req.method != HTTP_CONNECT && !via_proxy(s)) {
		for (size_t i = 0; i < su->su_ac.nkept; i++) {
			int fd = upool_take(s->se_d->upool, s->se_lg, &su->su_ac.kept[i],
			    su->su_req.port);
			if (fd >= 0) {
				su->su_ufd = fd;
				pin(s, i);
				su->su_up_reused = true;
				su->su_connect_us = 0;
				step_log_allow(s);
				return;
			}
		}
	}
	struct connector_opts co = { .max_inflight = HE_ATTEMPTS_MAX, .stagger_us = HE_DELAY_US,
		.deadline_us = su->su_connect_start_us +
		    s->se_d->cfg->connect_timeout_ms * 1000 };
	/* Only the checked addresses, in order, never re-resolving (pinning). */
	su->su_connector = connector_start(s->se_d->base, su->su_ac.kept,
	    su->su_ac.nkept, su->su_req.port, &co, connected, NULL, s);
	if (su->su_connector == NULL)
		session_refuse(s, REASON_INTERNAL_ERROR);
}

/* ---- allow record ---- */

static void
allow_logged(int err, void *arg)
{
	struct session *s = arg;
	struct session_setup *su = s->se_su;

	su->su_ticket = NULL;
	if (err != 0) {
		/* Never an allow without its record: none was written, so no close either. */
		s->se_allow_open = false;
		log_warnx("conn %llu: allow record not written (%s): refusing",
		    (unsigned long long)s->se_id, strerror(err));
		unpin(s);
		session_refuse(s, REASON_AUDIT_UNAVAILABLE);   /* cancels a gated proxy request */
		return;
	}
	s->se_allow_open = true;
	s->se_tunnel_start_us = mono_usec();
	metrics_decision(&s->se_d->stats, 1, REASON_ALLOWED);
	if (grant_gone(s->se_lg) != REASON_ALLOWED) {
		session_refuse(s, grant_gone(s->se_lg));
		return;
	}
	if (su->su_ureq != NULL) {
		/* proxied route, at the gate: only now the proxy protocol begins */
		s->se_state = SE_PROXY;
		upstream_proceed(su->su_ureq);
		return;
	}
	start_tunnel(s);
}

static void
step_log_allow(struct session *s)
{
	if (grant_gone(s->se_lg) != REASON_ALLOWED) {
		session_refuse(s, grant_gone(s->se_lg));
		return;
	}
	s->se_state = SE_LOG_ALLOW;
	/* the close record's destination, kept past the setup */
	free(s->se_dest);
	s->se_dest = record_dest(s);
	if (s->se_dest == NULL || record_allow_append(s, allow_logged, s,
	    &s->se_su->su_ticket) != 0) {
		s->se_su->su_ticket = NULL;
		unpin(s);
		session_refuse(s, REASON_AUDIT_UNAVAILABLE);
		return;
	}
	/* The allow record is on its way to the disk (the writer thread, or written already
	 * with its callback still due): a hop that ends before that callback (a revoke, the
	 * client leaving, shutdown) still owes its close record, never a second decision. */
	s->se_allow_open = true;
	s->se_tunnel_start_us = mono_usec();
}

/* ---- tunnel ---- */

static void
tunnel_done(enum reason why, uint64_t up, uint64_t down, void *arg)
{
	struct session *s = arg;
	struct session_setup *su = s->se_su;    /* NULL once a CONNECT tunnel ran */
	bool freeing = s->se_state == SE_FREEING;
	bool kept = su != NULL && su->su_client_kept && !freeing;

	s->se_tun = NULL;
	if (!kept)
		s->se_cfd = -1;                /* the tunnel closed both sockets */
	if (su != NULL && su->su_kept_ufd >= 0) {
		/* a framed HTTP/1.1 exchange left the upstream connection clean: park it for
		 * this grant and this pinned address only */
		if (freeing || !s->se_attested || via_proxy(s))
			close(su->su_kept_ufd);
		else
			upool_put(s->se_d->upool, s->se_lg, &s->se_pinned, su->su_req.port,
			    su->su_kept_ufd);
		su->su_kept_ufd = -1;
	}
	if (su != NULL && su->su_up_retried)
		log_info("conn %llu: hop %s: reused upstream connection was closed by the origin "
		    "before any response; retried once on a fresh connection to the same pinned "
		    "address", (unsigned long long)s->se_id, session_hop_id(s));
	s->se_lg->ntunnels--;
	s->se_allow_open = false;
	record_close_write(s, why, up, down);
	log_debug("conn %llu: closed (%s), %llu up, %llu down", (unsigned long long)s->se_id,
	    reason_str(why), (unsigned long long)up, (unsigned long long)down);
	if (freeing)
		return;
	if (kept && s->se_cfd >= 0 && su->su_next_ev != NULL) {
		/* Keep-alive: the next request is a new hop, read outside this callback (the
		 * tunnel is freed when we return). A refusal before the next head is a hop of
		 * its own (SE_HEAD: no request parsed). */
		s->se_state = SE_HEAD;
		s->se_hop[0] = '\0';
		su->su_parent_hop[0] = '\0';
		su->su_creds_stripped = false;
		s->se_resp_status = 0;
		event_active(su->su_next_ev, EV_TIMEOUT, 0);
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

/*
 * The tunnel's response hook (docs/redirects.md): a 3xx with a Location is a new hop. Resolve it,
 * bound the chain, authorize it with this principal's grant, record the decision, and
 * remember an allowed one (credential stripping, chain links). Denied: the client gets
 * the refusal naming the target instead of the redirect.
 */
static enum reason
session_on_response(const struct httpresp *r, char *refusal, size_t *nrefusal, void *arg)
{
	struct session *s = arg;
	struct session_setup *su = s->se_su;
	const struct grant *g = s->se_lg->g;
	struct redirect_target *t;
	const char *detail = NULL, *loc;
	size_t loclen;
	long li;
	enum reason rr;
	enum redirect_err e = REDIRECT_ERR_INTERNAL;
	bool cross = false;
	char rhop[64];

	*nrefusal = 0;
	s->se_resp_status = r->status;   /* final heads only: interim ones never come here */
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
	} else if ((e = redirect_resolve(loc, loclen, &su->su_req.host, su->su_req.port, su->su_req.path,
	    su->su_req.path_len, t)) != REDIRECT_OK) {
		rr = redirect_err_reason(e);
		detail = redirect_err_str(e);
	} else if (su->su_chain_depth + 1 > EGRESS_REDIRECT_CHAIN_MAX) {
		rr = REASON_REDIRECT_LOOP;
	} else {
		rr = redirect_authorize(g, t, &g->allow_address, &s->se_d->cfg->allow_special,
		    &detail);
		if (rr == REASON_ALLOWED && t->host.kind != HOST_NAME) {
			struct addr self[SELF_ADDRS_MAX];
			size_t nself = grants_self_addrs(s->se_d->grants, self, SELF_ADDRS_MAX);
			if (addrcheck_is_self(&t->host.addr, self, nself)) {
				rr = REASON_REDIRECT_DENIED;
				detail = "egressd's own address";
			}
		}
		cross = !redirect_same_origin(t, &su->su_req.host, su->su_req.port);
	}
	(void)session_hop_id(s);                /* the request's id comes first */
	snprintf(rhop, sizeof(rhop), "%s/%u", s->se_conn, ++s->se_hop_n);
	if (rr == REASON_ALLOWED && redirmemo_record(s->se_d->memo, s->se_lg->id, t->scheme,
	    &t->host, t->port, t->path, strlen(t->path), rhop, su->su_chain_depth + 1, cross,
	    mono_msec()) != 0)
		rr = REASON_INTERNAL_ERROR;     /* stripping could not be remembered */
	record_write(s, "decision", record_redirect(s, r, t, t != NULL && e == REDIRECT_OK,
	    rhop, loc, loclen, cross, rr, detail));
	metrics_decision(&s->se_d->stats, rr == REASON_ALLOWED, rr);
	log_debug("conn %llu: redirect %d to %s: %s", (unsigned long long)s->se_id, r->status,
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

/* ---- model connections (docs/model-connections.md) ---- */

/* End a tunnel that waited for its ClientHello: both sockets closed, the close record. */
static void
sni_end(struct session *s, enum reason why)
{
	struct session_setup *su = s->se_su;

	/* reading stops before the socket closes (the bufferevent read the hello) */
	if (su->su_cbev != NULL)
		bufferevent_disable(su->su_cbev, EV_READ);
	if (su->su_timer != NULL)
		event_del(su->su_timer);
	if (su->su_ufd >= 0)
		close(su->su_ufd);
	su->su_ufd = -1;
	if (s->se_cfd >= 0)
		close(s->se_cfd);
	tunnel_done(why, 0, 0, s);          /* takes s->se_cfd as closed; frees s */
}

static void
mitm_ended(enum reason why, uint64_t up, uint64_t down, void *arg)
{
	struct session *s = arg;

	s->se_mitm = NULL;
	s->se_cfd = -1;                     /* closed by the mitm */
	tunnel_done(why, up, down, s);
}

static void
sni_decided(enum reason r, const struct clienthello *ch, void *arg)
{
	struct session *s = arg;

	s->se_sni_checked = true;
	s->se_tls_seen = ch != NULL;
	if (ch != NULL && ch->has_sni && (s->se_sni_name = strdup(ch->sni)) == NULL) {
		log_warnx("conn %llu: out of memory keeping the server name",
		    (unsigned long long)s->se_id);
		r = REASON_INTERNAL_ERROR;
	}
	if (s->se_su->su_timer != NULL)
		event_del(s->se_su->su_timer);
	/* Captured and granted as https://: bytes that are not TLS have no name to check. */
	if (r == REASON_ALLOWED && ch == NULL && s->se_cap != NULL)
		r = REASON_TLS_EXPECTED;
	if (r == REASON_CLOSE_CLIENT || r == REASON_CLOSE_ERROR) {
		/* The client left (or its connection failed) before its ClientHello: nothing
		 * was refused, so no second decision; the close record says why. */
		sni_end(s, r);
		return;
	}
	if (r != REASON_ALLOWED) {
		json_t *f = record_hop_decision(s, false, r);
		if (f != NULL && s->se_tls_seen)
			json_object_set_new(f, "sni", s->se_sni_name != NULL ?
			    json_string(s->se_sni_name) : json_null());
		record_write(s, "decision", f);
		metrics_decision(&s->se_d->stats, 0, r);
		sni_end(s, r);
		return;
	}
	s->se_lg->ntunnels--;               /* start_tunnel counts the tunnel again */
	start_tunnel(s);
}

/* The ClientHello wait (sniguard.h, step 3): the client's bytes are read into the
 * bufferevent's input, judged after each read, and handed to the tunnel as pending bytes
 * when allowed. A head read through the bufferevent left the socket registered (no
 * epoll_ctl here); a head decided from the first read (head_start) has the bufferevent
 * made for this wait. */
static void
sni_read(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in);
	const unsigned char *p;
	struct clienthello ch;
	bool have_ch = false;
	enum reason r = REASON_INTERNAL_ERROR;

	if (s->se_state != SE_TLS_CHECK)
		return;
	if (n > SNIGUARD_HELLO_MAX)
		n = SNIGUARD_HELLO_MAX;
	p = evbuffer_pullup(in, (ev_ssize_t)n);
	if (p != NULL && !sniguard_judge(p, n, &s->se_su->su_req.host, &ch, &have_ch, &r))
		return;                         /* more must arrive */
	sni_decided(r, have_ch ? &ch : NULL, s);
}

static void
sni_event(struct bufferevent *bev, short what, void *arg)
{
	struct session *s = arg;

	int e = EVUTIL_SOCKET_ERROR();

	(void)bev;
	if (s->se_state != SE_TLS_CHECK)
		return;
	/* the worker left (or its socket failed) before a whole hello: a reset is the
	 * worker leaving, as the tunnel counts it */
	sni_decided((what & BEV_EVENT_EOF) || e == ECONNRESET || e == EPIPE ?
	    REASON_CLOSE_CLIENT : REASON_CLOSE_ERROR, NULL, s);
}

/*
 * The TLS step of a CONNECT: a grant whose model connection covers this host is
 * intercepted (egressd/mitm.h); any other tunnel to port 443, or admitted by an https://
 * entry on another port, first shows its ClientHello (egressd/sniguard.h). Returns true
 * when it took the session over (or refused it), false when the opaque tunnel starts as
 * before.
 */
static bool
modelconn_tunnel(struct session *s, const char *ok200, size_t n200, size_t npending)
{
	struct session_setup *su = s->se_su;
	const struct lgrant *lg = s->se_lg;
	const struct connection *conn = NULL;
	struct mitm_ca *ca = lg->ca != NULL ? lg->ca : s->se_d->cfg->mitm_ca;
	char err[256];
	ssize_t w;

	if (lg->g->connection[0] != '\0') {
		conn = connections_find(s->se_d->cfg->conns, lg->g->connection);
		/* A reload removed the connection (or its credential): the grant's tunnels can
		 * no longer be told apart, and none may fall back to opaque. */
		if (conn == NULL || conn->apply == CONN_APPLY_NONE ||
		    s->se_d->cfg->origin_ctx == NULL) {
			session_refuse(s, REASON_CONNECTION_UNAVAILABLE);
			return true;
		}
	}
	if (conn != NULL && connection_covers(conn, &su->su_req.host, su->su_req.port)) {
		struct mitm_opts o;
		json_t *base = record_hop_decision(s, true, REASON_ALLOWED);
		bool took;

		memset(&o, 0, sizeof(o));
		o.server_ctx = ca != NULL ? mitm_ca_server_ctx(ca, &su->su_req.host, err,
		    sizeof(err)) : NULL;
		/* Never opaque, never without the credential: refuse instead. */
		if (npending > 0 || o.server_ctx == NULL || base == NULL) {
			if (o.server_ctx == NULL)
				log_warnx("conn %llu: no leaf for %s: %s", (unsigned long long)s->se_id,
				    su->su_req.host.name, ca != NULL ? err : "no interception CA");
			SSL_CTX_free(o.server_ctx);
			json_decref(base);
			session_refuse(s, npending > 0 ? REASON_TLS_EXPECTED : ca == NULL ?
			    REASON_CONNECTION_UNAVAILABLE : REASON_INTERNAL_ERROR);
			return true;
		}
		o.base = s->se_d->base;
		o.dlog = s->se_d->dlog;
		o.record_base = base;
		o.hop = session_hop_id(s);
		o.host = su->su_req.host;
		o.port = su->su_req.port;
		o.conns = s->se_d->cfg->conns;
		o.conn = conn;
		o.client_ctx = s->se_d->cfg->origin_ctx;
		o.grant = lg->g;
		/* No operator override for redirects inside: the configuration may be replaced
		 * by a reload while the tunnel lives (a special-class literal then needs the
		 * grant's own allow_address: stricter, never looser). */
		o.override = NULL;
		o.idle_ms = s->se_d->cfg->idle_timeout_ms;
		o.lifetime_ms = s->se_d->cfg->tunnel_max_lifetime_ms;
		o.bytes_total = &s->se_lg->bytes;
		o.bytes_limit = s->se_lg->g->max_bytes;
		o.placeholder = lg->placeholder[0] != '\0' ? lg->placeholder : NULL;
		o.stats = &s->se_d->stats;
		o.done = mitm_ended;
		o.arg = s;
		s->se_mitm = mitm_start(s->se_cfd, su->su_ufd, ok200,
		    s->se_cap != NULL ? 0 : n200, &o, &took);
		SSL_CTX_free(o.server_ctx);
		json_decref(base);
		if (s->se_mitm == NULL) {
			if (took) {
				/* the 200 went out and both sockets are closed: the refusal is
				 * recorded, never written */
				s->se_cfd = -1;
				su->su_ufd = -1;
				su->su_client_ours = false;
				if (su->su_cbev != NULL)
					bufferevent_free(su->su_cbev);
				su->su_cbev = NULL;
			}
			session_refuse(s, REASON_INTERNAL_ERROR);
			return true;
		}
		su->su_ufd = -1;         /* both sockets are the mitm's now */
		su->su_client_ours = false;
		setup_free(s);                 /* the mitm holds what it needs */
		s->se_state = SE_TUNNEL;
		s->se_lg->ntunnels++;
		return true;
	}
	/* Captured: a tcp:// entry is an opaque stream (ssh, git, a server that speaks
	 * first: nothing is waited for); anything else was granted as https:// and must show
	 * a ClientHello naming its host on whatever port (docs/transparent.md). */
	if (s->se_cap != NULL) {
		if (grant_allows(lg->g, SCHEME_TCP, &su->su_req.host, su->su_req.port, NULL))
			return false;
	} else if (su->su_req.port != 443 &&
	    !grant_expects_tls(lg->g, &su->su_req.host, su->su_req.port)) {
		/* checked: port 443, or an https:// entry (the grant's mark for TLS) on any
		 * port */
		return false;
	}
	/* Opaque TLS tunnel: the 200 now, then the ClientHello is judged (sniguard.h). */
	do
		w = s->se_cap != NULL ? (ssize_t)n200 :
		    send(s->se_cfd, ok200, n200, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)n200) {
		session_refuse(s, REASON_INTERNAL_ERROR);
		return true;
	}
	{
		const unsigned char *pre = npending > 0 ?
		    evbuffer_pullup(bufferevent_get_input(su->su_cbev), -1) : NULL;
		struct timeval tv = { EGRESS_CLIENTHELLO_WAIT_MS / 1000,
		    (EGRESS_CLIENTHELLO_WAIT_MS % 1000) * 1000 };
		struct clienthello ch;
		bool have_ch;
		enum reason r;

		s->se_state = SE_TLS_CHECK;
		s->se_lg->ntunnels++;
		if (npending > 0 && pre == NULL) {
			sni_end(s, REASON_INTERNAL_ERROR);   /* the 200 is out */
			return true;
		}
		/* A hello queued already (a captured client speaks first; a fast one sends
		 * it right behind the 200) is decided now, without a loop turn. */
		if (sniguard_try(s->se_cfd, &su->su_req.host, pre, npending, &ch, &have_ch, &r)) {
			sni_decided(r, have_ch ? &ch : NULL, s);
			return true;
		}
		/* Otherwise the bufferevent reads it (made here if the head needed none; a
		 * captured connection starts reading here), sni_read judges it, the head
		 * timer is the deadline. The input holds at most what a hello may take (the
		 * judge decides there at the latest). */
		if (client_bev(s) == NULL || setup_timer(s) == NULL) {
			sni_end(s, REASON_INTERNAL_ERROR);
			return true;
		}
		bufferevent_setcb(su->su_cbev, sni_read, NULL, sni_event, s);
		bufferevent_setwatermark(su->su_cbev, EV_READ, 0, SNIGUARD_HELLO_MAX);
		if (bufferevent_enable(su->su_cbev, EV_READ) != 0 ||
		    evtimer_add(su->su_timer, &tv) != 0)
			sni_end(s, REASON_INTERNAL_ERROR);
	}
	return true;
}

/* start_tunnel could not start the tunnel: after the ClientHello check the 200 is out
 * already, so the hop ends with a close record instead of an HTTP refusal. */
static void
tunnel_failed(struct session *s, enum reason why)
{
	if (s->se_state == SE_TLS_CHECK) {
		s->se_lg->ntunnels++;           /* sni_decided uncounted it for start_tunnel */
		sni_end(s, why);
		return;
	}
	session_refuse(s, why);
}

static void
start_tunnel(struct session *s)
{
	struct session_setup *su = s->se_su;
	static const char ok200[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
	/* without a bufferevent (head_start) whatever the client sent after its head is
	 * still in the socket, and the tunnel reads it from there */
	struct evbuffer *in = su->su_cbev != NULL ? bufferevent_get_input(su->su_cbev) : NULL;
	size_t npending = in != NULL ? evbuffer_get_length(in) : 0;
	unsigned char *pending = npending > 0 ? evbuffer_pullup(in, -1) : NULL;
	struct tunnel_opts o;
	char *fwd = NULL;
	size_t nfwd = 0;
	int ufd = su->su_ufd;
	/* a CONNECT whose 200 is not out yet (after the ClientHello check it is); a captured
	 * connection never hears it: the worker thinks it reached the origin */
	bool send200 = s->se_method == HTTP_CONNECT && s->se_state != SE_TLS_CHECK;
	bool tell200 = send200 && s->se_cap == NULL;

	if (npending > 0 && pending == NULL) {
		tunnel_failed(s, REASON_INTERNAL_ERROR);
		return;
	}
	memset(&o, 0, sizeof(o));
	o.splice = s->se_d->cfg->splice;
	o.idle_ms = s->se_d->cfg->idle_timeout_ms;
	o.lifetime_ms = s->se_d->cfg->tunnel_max_lifetime_ms;
	o.bytes_total = &s->se_lg->bytes;
	o.bytes_limit = s->se_lg->g->max_bytes;   /* the budget holds inside a tunnel too */
	o.bytes_up_total = &s->se_d->stats.bytes_up;
	o.bytes_down_total = &s->se_d->stats.bytes_down;
	if (su->su_req.method != HTTP_CONNECT) {
		size_t cap = EGRESS_REQUEST_HEAD_MAX + 4096;
		bool proxy_form = via_proxy(s) && s->se_proxy_known &&
		    su->su_route.entries[su->su_route_i].kind != PROXY_SOCKS5;
		/* only direct HTTP/1.1 connections to the pinned address are ever pooled */
		bool pool_ok = !via_proxy(s) && su->su_req.minor == 1;
		int flags = (proxy_form ? HTTP_FWD_PROXY_FORM : 0) |
		    (su->su_strip_creds ? HTTP_FWD_STRIP_CREDENTIALS : 0) |
		    (pool_ok ? HTTP_FWD_KEEPALIVE : 0);
		fwd = malloc(cap);
		if (fwd != NULL)
			/* Under pinning the URL names the checked address: the proxy connects to it
			 * and does not resolve the name itself (Host still names it). */
			nfwd = http_build_request_head(&su->su_req, flags,
			    pin_local(s) ? &su->su_ac.kept[0] : NULL, su->su_proxy_authz,
			    NULL, fwd, cap);
		proxy_authz_free(s->se_su);
		if (fwd == NULL || nfwd == 0) {
			free(fwd);
			session_refuse(s, REASON_INTERNAL_ERROR);
			return;
		}
		o.via_proxy = proxy_form;
		o.proxy_auth_sent = proxy_form && s->se_proxy_auth != NULL;
		o.proxy_status = &s->se_proxy_status;
		o.http = true;
		o.req_body = su->su_req.body == HTTP_BODY_LENGTH ? 1 :
		    su->su_req.body == HTTP_BODY_CHUNKED ? 2 : 0;
		o.req_body_len = su->su_req.content_length;
		o.head_request = su->su_req.method == HTTP_HEAD;
		o.keep_upstream = pool_ok;
		o.upstream_kept_fd = &su->su_kept_ufd;
		su->su_kept_ufd = -1;
		/* A reused connection the origin closed just as it was reused: a bodiless request
		 * is sent again once on a fresh connection to the same pinned address. */
		if (su->su_up_reused && su->su_req.body == HTTP_BODY_NONE &&
		    (su->su_req.method == HTTP_GET || su->su_req.method == HTTP_HEAD ||
		    su->su_req.method == HTTP_OPTIONS || su->su_req.method == HTTP_DELETE)) {
			o.retry = true;
			o.retry_addr = s->se_pinned;
			o.retry_port = su->su_req.port;
			o.retried = &su->su_up_retried;
		}
		o.on_response = session_on_response;
		/* Client keep-alive (HTTP/1.1 without Connection: close): bytes after this
		 * request's body are the next request, a new hop: keep them for it. */
		if (!su->su_req.conn_close && su->su_req.minor == 1 && su->su_next_ev == NULL)
			su->su_next_ev = evtimer_new(s->se_d->base, session_next, s);
		if (!su->su_req.conn_close && su->su_req.minor == 1 && su->su_next_ev != NULL) {
			long nb = body_bytes(&su->su_req, pending, npending);
			if (nb >= 0 && (size_t)nb < npending) {
				su->su_carry = malloc(npending - (size_t)nb);
				if (su->su_carry != NULL) {
					memcpy(su->su_carry, pending + nb, npending - (size_t)nb);
					su->su_ncarry = npending - (size_t)nb;
				}
			}
			if (nb >= 0 && (su->su_carry != NULL || (size_t)nb == npending)) {
				npending = (size_t)nb;
				o.keep_client = true;
				o.client_kept = &su->su_client_kept;
			}
		}
	}
	s->se_tunnel_start_us = mono_usec();
	/* Model connections: an intercepted tunnel, or the SNI check before an opaque one. */
	if (send200 && modelconn_tunnel(s, ok200, sizeof(ok200) - 1, npending))
		return;
	s->se_tun = tunnel_new(s->se_d->base, s->se_d->pipes, s->se_cfd, ufd,
	    tell200 ? ok200 : NULL, tell200 ? sizeof(ok200) - 1 : 0,
	    fwd, nfwd, pending, npending, &o, tunnel_done, s);
	if (fwd != NULL)
		secret_wipe(fwd, nfwd);       /* may hold egressd's proxy credential */
	free(fwd);
	if (s->se_tun == NULL) {
		tunnel_failed(s, errno == EINVAL ? REASON_BAD_FRAMING : REASON_INTERNAL_ERROR);
		return;
	}
	/* The tunnel owns both sockets now. */
	su->su_ufd = -1;
	su->su_client_ours = false;
	if (su->su_cbev != NULL)
		bufferevent_free(su->su_cbev);
	su->su_cbev = NULL;
	if (su->su_timer != NULL)
		event_del(su->su_timer);
	s->se_state = SE_TUNNEL;
	s->se_lg->ntunnels++;
	/* A CONNECT tunnel needs nothing of the setup any more: an idle tunnel holds only
	 * struct session and the tunnel (docs/performance.md). An HTTP exchange keeps it
	 * (its response hook and keep-alive read the request). */
	if (s->se_method == HTTP_CONNECT)
		setup_free(s);
}

/* ---- keep-alive: the next request on a kept client connection ---- */

/*
 * Keep-alive (docs/redirects.md, "HTTP/1.1 forwarding"): the tunnel delivered a framed
 * response and handed the client
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
	struct session_setup *su = n != NULL ? setup_new() : NULL;
	struct daemon *d = s->se_d;
	char *carry;
	size_t ncarry;

	cancel_pending(s);
	log_debug("conn %llu: next request (%zu bytes pipelined)", (unsigned long long)s->se_id,
	    s->se_su->su_ncarry);
	if (su == NULL || s->se_cfd < 0 || s->se_tun != NULL) {
		free(su);
		free(n);
		session_free(s);
		return;
	}
	n->se_su = su;
	n->se_d = d;
	n->se_lg = s->se_lg;                  /* the reference moves to n */
	n->se_id = s->se_id;
	memcpy(n->se_conn, s->se_conn, sizeof(n->se_conn));
	memcpy(n->se_client, s->se_client, sizeof(n->se_client));
	n->se_hop_n = s->se_hop_n;            /* > 0: head_timeout knows a kept connection */
	n->se_cfd = s->se_cfd;
	su->su_carry = steal_pointer(&s->se_su->su_carry);
	su->su_ncarry = s->se_su->su_ncarry;
	n->se_cap = steal_pointer(&s->se_cap);  /* the next request is captured alike */
	n->se_gc.kill = session_kill;
	session_detach(s);
	lgrant_attach(n->se_lg, &n->se_gc);
	n->se_attached = true;
	/* s goes without closing the socket or touching the counts n inherited */
	setup_free(s);
	free(s->se_dest);
	free(s->se_sni_name);
	free(s);

	n->se_state = SE_HEAD;
	if (grant_gone(n->se_lg) != REASON_ALLOWED || d->draining) {
		session_free(n);        /* no new hop starts; the client simply reconnects */
		return;
	}
	/* the bytes already read from this socket first */
	carry = steal_pointer(&su->su_carry);
	ncarry = su->su_ncarry;
	su->su_ncarry = 0;
	if (!head_wait(n, carry, carry != NULL ? ncarry : 0))
		session_free(n);        /* as if the client had gone: no hop, no answer */
	free(carry);
}

/* ---- life cycle ---- */

static void
session_detach(struct session *s)
{
	if (s->se_attached) {
		lgrant_detach(s->se_lg, &s->se_gc);
		s->se_attached = false;
	}
}

/* Cancel every request the setup started and close the upstream socket it holds. */
static void
cancel_pending(struct session *s)
{
	struct session_setup *su = s->se_su;

	if (su == NULL)
		return;
	if (su->su_rreq != NULL) {
		route_cancel(su->su_rreq);
		su->su_rreq = NULL;
	}
	if (su->su_dreq != NULL) {
		resolve_cancel(su->su_dreq);
		su->su_dreq = NULL;
	}
	if (su->su_dns_counted) {
		s->se_lg->dns_pending--;
		su->su_dns_counted = false;
	}
	if (su->su_ticket != NULL) {
		/* The allow record is on its way and the hop ends before its callback, which
		 * would have counted it (its close follows: se_allow_open): the metrics count it
		 * once it is written, one per decision record. The log probe's ticket is only
		 * taken before any allow. */
		if (s->se_allow_open)
			dlog_ticket_retarget(su->su_ticket, metrics_allow_written, &s->se_d->stats);
		else
			dlog_ticket_cancel(su->su_ticket);
		su->su_ticket = NULL;
	}
	connector_free(su->su_connector);
	su->su_connector = NULL;
	if (su->su_ureq != NULL) {
		upstream_cancel(su->su_ureq);
		su->su_ureq = NULL;
	}
	proxy_authz_free(su);
	if (su->su_ufd >= 0) {
		close(su->su_ufd);
		su->su_ufd = -1;
	}
}

/* Free the setup state (cancelling what it started); the client socket stays open.
 * Accepts a session without one. */
static void
setup_free(struct session *s)
{
	struct session_setup *su = s->se_su;

	if (su == NULL)
		return;
	cancel_pending(s);
	if (su->su_timer != NULL)
		event_free(su->su_timer);
	if (su->su_cbev != NULL)
		bufferevent_free(su->su_cbev);  /* not BEV_OPT_CLOSE_ON_FREE */
	if (su->su_kept_ufd >= 0)
		close(su->su_kept_ufd);
	if (su->su_next_ev != NULL)
		event_free(su->su_next_ev);
	free(su->su_head);
	free(su->su_carry);
	free(su);
	s->se_su = NULL;
}

static void
session_free(struct session *s)
{
	if (s->se_refusing) {
		struct daemon *d = s->se_d;

		if (s->se_gc.prev != NULL)
			s->se_gc.prev->next = s->se_gc.next;
		else
			d->refusing = s->se_gc.next;
		if (s->se_gc.next != NULL)
			s->se_gc.next->prev = s->se_gc.prev;
		s->se_gc.next = s->se_gc.prev = NULL;
		s->se_refusing = false;
	}
	s->se_state = SE_FREEING;
	cancel_pending(s);
	mitm_free(s->se_mitm);              /* closes both sockets itself */
	if (s->se_mitm != NULL)
		s->se_cfd = -1;
	s->se_mitm = NULL;
	if (s->se_tun != NULL) {
		/* tunnel_done runs from tunnel_close: SE_FREEING lets it log, not free us a
		 * second time. */
		struct tunnel *t = s->se_tun;
		tunnel_close(t, REASON_CLOSE_ERROR);
		s->se_tun = NULL;
	}
	if (s->se_allow_open) {
		/* an allowed hop freed before its tunnel (shutdown): it still gets its close */
		s->se_allow_open = false;
		record_write(s, "close", record_close(s, REASON_CLOSE_ERROR, 0, 0));
	}
	setup_free(s);
	if (s->se_cfd >= 0)
		close(s->se_cfd);
	session_detach(s);
	if (!s->se_released)
		s->se_lg->nconns--;
	lgrant_unref(s->se_lg);
	s->se_d->nconns--;
	free(s->se_dest);
	free(s->se_sni_name);
	free(s->se_cap);
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
	if (shutdown(s->se_cfd, SHUT_WR) != 0) {
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
	struct session_setup *su = s->se_su;
	char buf[512];
	size_t n;
	struct timeval tv = { 2, 0 };

	if (s->se_su == NULL) {
		/* a running CONNECT tunnel ends through tunnel_close, never here; should it
		 * happen, the hop still ends with its close (session_free writes it) */
		log_warnx("conn %llu: refusal (%s) after the setup ended", (unsigned long long)s->se_id,
		    reason_str(r));
		session_free(s);
		return;
	}
	cancel_pending(s);
	session_detach(s);          /* a revoke walking the list must not see us again */
	if (!s->se_released) {
		/* A refused connection no longer counts against its principal's limit while
		 * the refusal drains (it still counts globally: it holds an fd). */
		s->se_lg->nconns--;
		s->se_released = true;
	}
	if (s->se_allow_open) {
		/* The allow record is on disk (the proxy's answer, a revoke, ... came after
		 * it): the hop ends with its close, never with a second decision. */
		s->se_allow_open = false;
		record_write(s, "close", record_close(s, r, 0, 0));
	} else {
		record_write(s, "decision", record_hop_decision(s, false, r));
		metrics_decision(&s->se_d->stats, 0, r);
	}
	log_debug("conn %llu %s: deny %s", (unsigned long long)s->se_id, s->se_client, reason_str(r));
	s->se_state = SE_REFUSE;
	/* A captured non-HTTP stream gets no HTTP answer (it would be garbage to TLS or ssh):
	 * it is closed; the record says why. */
	n = s->se_cap != NULL && !s->se_cap->cap_http ? 0 :
	    http_format_refusal(r, buf, sizeof(buf));
	if (n > 0 && su->su_client_ours)
		(void)client_bev(s);
	if (su->su_cbev == NULL || n == 0) {
		session_free(s);
		return;
	}
	bufferevent_disable(su->su_cbev, EV_READ);
	bufferevent_setcb(su->su_cbev, NULL, refuse_flushed, refuse_event, s);
	bufferevent_write(su->su_cbev, buf, n);
	/* Bounded: a client that does not read its refusal is dropped. */
	if (su->su_timer != NULL)
		event_free(su->su_timer);
	su->su_timer = evtimer_new(s->se_d->base, refuse_timeout, s);
	if (su->su_timer == NULL) {
		session_free(s);
		return;
	}
	evtimer_add(su->su_timer, &tv);
	/* Off the grant's list since session_detach: the daemon keeps it for shutdown. */
	s->se_gc.prev = NULL;
	s->se_gc.next = s->se_d->refusing;
	if (s->se_d->refusing != NULL)
		s->se_d->refusing->prev = &s->se_gc;
	s->se_d->refusing = &s->se_gc;
	s->se_refusing = true;
}

void
session_free_refusing(struct daemon *d)
{
	while (d->refusing != NULL)
		session_free((struct session *)d->refusing);
}

/* grant_conn kill: revoke, expiry or drain end. */
static void
session_kill(struct grant_conn *gc, enum reason why)
{
	struct session *s = (struct session *)gc;

	session_detach(s);
	if (s->se_state == SE_TUNNEL && s->se_tun != NULL) {
		struct tunnel *t = s->se_tun;
		tunnel_close(t, why);          /* its callback logs the close and frees s */
		return;
	}
	if (s->se_state == SE_TUNNEL && s->se_mitm != NULL) {
		mitm_close(s->se_mitm, why);   /* likewise (mitm_ended) */
		return;
	}
	if (s->se_state == SE_TLS_CHECK) {
		sni_end(s, why);               /* the 200 is out: a close record, no refusal */
		return;
	}
	if (s->se_state == SE_REFUSE) {
		session_free(s);
		return;
	}
	session_refuse(s, why == REASON_CLOSE_SHUTDOWN ? REASON_SHUTTING_DOWN :
	    s->se_lg->dead == REASON_GRANT_EXPIRED ? REASON_GRANT_EXPIRED : REASON_GRANT_REVOKED);
}
