/* upstream.c - CONNECT through http://, https:// and socks5:// proxies (see upstream.h). */
#define _GNU_SOURCE
#include "egressd/upstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/err.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "egressd/connector.h"
#include "egressd/gssauth.h"
#include "egressd/httpresp.h"
#include "egressd/resolve.h"
#include "egressd/socks5.h"
#include "egressd/tlsbridge.h"

enum up_state {
	UP_RESOLVE, UP_CONNECT, UP_TLS, UP_GATE, UP_TOKEN,
	UP_HTTP_SEND, UP_HTTP_HEAD, UP_HTTP_DISCARD,
	UP_SOCKS_GREET, UP_SOCKS_METHOD, UP_SOCKS_AUTH, UP_SOCKS_AUTH_REPLY,
	UP_SOCKS_CONNECT, UP_SOCKS_REPLY,
	UP_DONE,
};

struct upstream_req {
	struct event_base *ur_base;
	struct upstream_params ur_p;
	upstream_cb ur_cb;
	void *ur_arg;
	enum up_state ur_st;
	int ur_fd;
	struct event *ur_ev;          /* fd readiness */
	struct event *ur_deadline;
	struct event *ur_later;       /* deliver an immediate result on the next turn */
	struct resolve_req *ur_rreq;
	struct gss_req *ur_greq;
	struct tlsbridge *ur_tb;
	struct connector *ur_conn;    /* connecting to the proxy's addresses */
	struct addr ur_addrs[EGRESS_DNS_ADDRS_MAX];
	size_t ur_naddrs;
	uint64_t ur_start_us;
	/* outgoing bytes of the current step */
	uint8_t ur_out[EGRESS_REQUEST_HEAD_MAX];
	size_t ur_outlen, ur_outoff;
	/* incoming reply bytes consumed so far (never past the reply) */
	uint8_t *ur_in;
	size_t ur_inlen;
	size_t ur_incap;
	bool ur_sent_auth;
	bool ur_socks_userpass;
	bool ur_gated;                /* the gate ran (p.gate): it runs once */
	/* NTLM: three legs on this one connection */
	struct gss_sec *ur_gsec;
	int ur_ntlm_leg;
	char ur_ntlm_challenge[4096];
	size_t ur_discard_left;
	struct upstream_result ur_res;
};

static void step_send(struct upstream_req *u);
static void connect_proxy(struct upstream_req *u);

size_t
upstream_connect_head(const char *target_name, const struct addr *target_addr, uint16_t port,
    const char *auth, char *buf, size_t len)
{
	char a[EGRESS_ADDRSTR_MAX];
	char hp[EGRESS_HOSTNAME_MAX + EGRESS_ADDRSTR_MAX + 16];
	int n;

	if (target_addr != NULL) {
		addr_to_str(target_addr, a, sizeof(a));
		if (target_addr->family == AF_INET6)
			snprintf(hp, sizeof(hp), "[%s]:%u", a, (unsigned)port);
		else
			snprintf(hp, sizeof(hp), "%s:%u", a, (unsigned)port);
	} else {
		snprintf(hp, sizeof(hp), "%s:%u", target_name, (unsigned)port);
	}
	n = snprintf(buf, len, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s%s%s"
	    "User-Agent: egressd/" EGRESS_VERSION "\r\n\r\n", hp, hp,
	    auth ? "Proxy-Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
	if (n < 0 || (size_t)n >= len)
		return 0;
	return (size_t)n;
}

static void
cleanup(struct upstream_req *u)
{
	if (u->ur_ev) {
		event_free(u->ur_ev);
		u->ur_ev = NULL;
	}
	if (u->ur_deadline) {
		event_free(u->ur_deadline);
		u->ur_deadline = NULL;
	}
	if (u->ur_later) {
		event_free(u->ur_later);
		u->ur_later = NULL;
	}
	connector_free(u->ur_conn);
	u->ur_conn = NULL;
	if (u->ur_rreq) {
		resolve_cancel(u->ur_rreq);
		u->ur_rreq = NULL;
	}
	if (u->ur_greq) {
		gssauth_cancel(u->ur_greq);
		u->ur_greq = NULL;
	}
	if (u->ur_tb) {
		tlsbridge_abort(u->ur_tb);
		u->ur_tb = NULL;
	}
	gssauth_sec_free(u->ur_gsec);
	u->ur_gsec = NULL;
	if (u->ur_fd >= 0) {
		close(u->ur_fd);
		u->ur_fd = -1;
	}
	secret_wipe(u->ur_out, sizeof(u->ur_out));
	free(u->ur_in);
	u->ur_in = NULL;
	if (u->ur_res.proxy_authorization != NULL) {
		secret_wipe(u->ur_res.proxy_authorization, strlen(u->ur_res.proxy_authorization));
		free(u->ur_res.proxy_authorization);
		u->ur_res.proxy_authorization = NULL;
	}
}

static void
finish(struct upstream_req *u, enum reason status, bool failover_ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
finish(struct upstream_req *u, enum reason status, bool failover_ok, const char *fmt, ...)
{
	upstream_cb cb = u->ur_cb;
	void *arg = u->ur_arg;
	struct upstream_result r;
	va_list ap;

	u->ur_res.status = status;
	u->ur_res.failover_ok = failover_ok;
	va_start(ap, fmt);
	vsnprintf(u->ur_res.detail, sizeof(u->ur_res.detail), fmt, ap);
	va_end(ap);
	if (status == REASON_ALLOWED) {
		u->ur_res.fd = u->ur_fd;
		u->ur_fd = -1;         /* handed over */
	} else {
		u->ur_res.fd = -1;
	}
	r = u->ur_res;
	u->ur_res.proxy_authorization = NULL;   /* handed over with r (NULL on failure paths) */
	if (status != REASON_ALLOWED && r.proxy_authorization != NULL) {
		secret_wipe(r.proxy_authorization, strlen(r.proxy_authorization));
		free(r.proxy_authorization);
		r.proxy_authorization = NULL;
	}
	u->ur_st = UP_DONE;
	cleanup(u);
	free(u);
	cb(&r, arg);
}

static void
arm(struct upstream_req *u, short what, event_callback_fn fn)
{
	if (u->ur_ev)
		event_free(u->ur_ev);
	u->ur_ev = event_new(u->ur_base, u->ur_fd, what, fn, u);
	if (u->ur_ev == NULL || event_add(u->ur_ev, NULL) != 0)
		finish(u, REASON_INTERNAL_ERROR, false, "out of memory");
}

/* ---- reading exactly one reply ----
 * Bytes are consumed from the socket only up to the end of the proxy's reply: whatever
 * follows is tunnel data and stays in the socket for the tunnel. 'complete' returns the
 * reply's total length once known and present in u->in (+peeked), 0 when more is needed.
 * Returns: 1 complete (u->in holds exactly the reply), 0 wait, -1 finished with an error. */
typedef size_t (*reply_len_fn)(const uint8_t *buf, size_t len, size_t limit);

static size_t
http_head_len(const uint8_t *buf, size_t len, size_t limit)
{
	(void)limit;
	for (size_t i = 3; i < len; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
			return i + 1;
	return 0;
}

static size_t
socks_reply_len(const uint8_t *buf, size_t len, size_t limit)
{
	enum reason r;
	long n = socks5_parse_connect(buf, len, &r, NULL);

	(void)limit;
	if (n > 0)
		return (size_t)n;
	if (n < 0)
		return len ? len : 1;   /* a failure reply is complete as it stands */
	return 0;
}

static size_t
fixed2(const uint8_t *buf, size_t len, size_t limit)
{
	(void)buf;
	(void)limit;
	return len >= 2 ? 2 : 0;
}

static int
read_reply(struct upstream_req *u, reply_len_fn lenfn, size_t limit)
{
	uint8_t peek[4096];
	ssize_t n;
	size_t total, want;

	if (u->ur_in == NULL) {
		u->ur_incap = limit;
		u->ur_in = malloc(limit);
		u->ur_inlen = 0;
		if (u->ur_in == NULL) {
			finish(u, REASON_INTERNAL_ERROR, false, "out of memory");
			return -1;
		}
	}
	want = u->ur_incap - u->ur_inlen;
	if (want > sizeof(peek))
		want = sizeof(peek);
	if (want == 0) {
		finish(u, REASON_PROXY_BAD_RESPONSE, false, "the proxy's reply exceeds %zu bytes",
		    limit);
		return -1;
	}
	n = recv(u->ur_fd, peek, want, MSG_PEEK);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		finish(u, REASON_PROXY_UNREACHABLE, false, "reading from the proxy: %s",
		    strerror(errno));
		return -1;
	}
	if (n == 0) {
		finish(u, REASON_PROXY_BAD_RESPONSE, false, "the proxy closed the connection "
		    "before answering");
		return -1;
	}
	memcpy(u->ur_in + u->ur_inlen, peek, (size_t)n);
	total = lenfn(u->ur_in, u->ur_inlen + (size_t)n, limit);
	if (total == 0) {
		/* all of it belongs to the reply: consume it */
		if (recv(u->ur_fd, peek, (size_t)n, 0) != n) {
			finish(u, REASON_PROXY_BAD_RESPONSE, false, "short read from the proxy");
			return -1;
		}
		u->ur_inlen += (size_t)n;
		return 0;
	}
	/* consume only up to the end of the reply */
	{
		size_t take = total - u->ur_inlen;
		if (recv(u->ur_fd, peek, take, 0) != (ssize_t)take) {
			finish(u, REASON_PROXY_BAD_RESPONSE, false, "short read from the proxy");
			return -1;
		}
		u->ur_inlen = total;
	}
	return 1;
}

static void
reply_reset(struct upstream_req *u)
{
	free(u->ur_in);
	u->ur_in = NULL;
	u->ur_inlen = 0;
}

/* ---- HTTP CONNECT ---- */

static void
collect_offered(struct upstream_req *u, const struct httpresp *r)
{
	size_t off = 0;

	u->ur_res.offered[0] = '\0';
	for (size_t k = 0;; k++) {
		long i = httpresp_find(r, "proxy-authenticate", k);
		size_t sl = 0;
		if (i < 0)
			break;
		while (sl < r->headers[i].value_len && r->headers[i].value[sl] != ' ')
			sl++;
		if (off + sl + 2 >= sizeof(u->ur_res.offered))
			break;
		if (off)
			u->ur_res.offered[off++] = ',';
		for (size_t c = 0; c < sl; c++) {
			char ch = r->headers[i].value[c];
			/* only token characters reach the log */
			u->ur_res.offered[off++] = (ch >= 0x21 && ch < 0x7f && ch != '"') ? ch : '?';
		}
		u->ur_res.offered[off] = '\0';
	}
}

static void send_connect(struct upstream_req *u, const char *auth);
static void ntlm_next(struct upstream_req *u);

/* The 407 between NTLM legs carries a body: read it away (bounded) on this connection. */
static void
on_discard(evutil_socket_t fd, short what, void *arg)
{
	struct upstream_req *u = arg;
	char buf[4096];
	ssize_t n;

	(void)what;
	while (u->ur_discard_left > 0) {
		n = recv(fd, buf, u->ur_discard_left < sizeof(buf) ? u->ur_discard_left : sizeof(buf), 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			finish(u, REASON_UPSTREAM_AUTH_FAILED, false, "the proxy closed the connection "
			    "between NTLM legs");
			return;
		}
		u->ur_discard_left -= (size_t)n;
	}
	event_free(u->ur_ev);
	u->ur_ev = NULL;
	ntlm_next(u);
}

/* After the first leg's 407: keep its challenge, skip its body, then answer. */
static void
ntlm_challenge(struct upstream_req *u, const struct httpresp *r)
{
	size_t body = 0;
	long i;

	for (size_t k = 0; (i = httpresp_find(r, "proxy-authenticate", k)) >= 0; k++) {
		const struct httpresp_header *h = &r->headers[i];
		if (h->value_len > 5 && strncasecmp(h->value, "NTLM ", 5) == 0 &&
		    h->value_len - 5 < sizeof(u->ur_ntlm_challenge)) {
			memcpy(u->ur_ntlm_challenge, h->value + 5, h->value_len - 5);
			u->ur_ntlm_challenge[h->value_len - 5] = '\0';
			break;
		}
	}
	if (i < 0) {
		finish(u, REASON_UPSTREAM_AUTH_FAILED, false, "the proxy sent no NTLM challenge");
		return;
	}
	if (httpresp_find(r, "transfer-encoding", 0) >= 0) {
		finish(u, REASON_UPSTREAM_AUTH_FAILED, false, "a chunked 407 between NTLM legs is "
		    "not supported");
		return;
	}
	if ((i = httpresp_find(r, "connection", 0)) >= 0 &&
	    httpresp_value_has_token(r->headers[i].value, r->headers[i].value_len, "close")) {
		finish(u, REASON_UPSTREAM_AUTH_FAILED, false, "the proxy closes the connection "
		    "between NTLM legs (NTLM needs one connection)");
		return;
	}
	if ((i = httpresp_find(r, "content-length", 0)) >= 0) {
		char cl[24];
		long long v;
		const char *es;
		if (r->headers[i].value_len >= sizeof(cl)) {
			finish(u, REASON_PROXY_BAD_RESPONSE, false, "bad Content-Length in a 407");
			return;
		}
		memcpy(cl, r->headers[i].value, r->headers[i].value_len);
		cl[r->headers[i].value_len] = '\0';
		if (num_parse(cl, 0, EGRESS_RESPONSE_HEAD_MAX, &v, &es) != 0) {
			finish(u, REASON_PROXY_BAD_RESPONSE, false, "bad Content-Length in a 407");
			return;
		}
		body = (size_t)v;
	}
	u->ur_discard_left = body;
	if (body == 0) {
		ntlm_next(u);
		return;
	}
	u->ur_st = UP_HTTP_DISCARD;
	arm(u, EV_READ | EV_PERSIST, on_discard);
}

static void
on_http_head(evutil_socket_t fd, short what, void *arg)
{
	struct upstream_req *u = arg;
	struct httpresp r;
	int rc;

	(void)fd;
	(void)what;
	rc = read_reply(u, http_head_len, EGRESS_RESPONSE_HEAD_MAX);
	if (rc <= 0)
		return;
	switch (httpresp_parse((const char *)u->ur_in, u->ur_inlen, 0, &r)) {
	case HTTPRESP_OK:
		break;
	case HTTPRESP_INCOMPLETE:
	case HTTPRESP_TOO_LARGE:
	case HTTPRESP_INVALID:
		finish(u, REASON_PROXY_BAD_RESPONSE, false, "the proxy's answer is not HTTP/1.x");
		return;
	}
	u->ur_res.proxy_status = r.status;
	if (r.status >= 200 && r.status <= 299) {
		finish(u, REASON_ALLOWED, false, "CONNECT answered %d", r.status);
		return;
	}
	if (r.status == 407 && u->ur_ntlm_leg == 1) {
		ntlm_challenge(u, &r);
		return;
	}
	if (r.status == 407) {
		collect_offered(u, &r);
		if (u->ur_sent_auth)
			finish(u, REASON_UPSTREAM_AUTH_FAILED, false,
			    "the proxy refused egressd's %s credentials (offers: %s)",
			    u->ur_res.auth ? u->ur_res.auth : "?", u->ur_res.offered[0] ? u->ur_res.offered : "none");
		else
			finish(u, REASON_UPSTREAM_AUTH_REQUIRED, false,
			    "the proxy demands authentication (offers: %s) and the credentials file "
			    "has no entry for it: add one to proxy_credentials, or for Negotiate run "
			    "kinit as the person running egress-exec", u->ur_res.offered[0] ?
			    u->ur_res.offered : "none");
		return;
	}
	finish(u, REASON_PROXY_REFUSED, false, "the proxy answered CONNECT with %d", r.status);
}

static void
send_connect(struct upstream_req *u, const char *auth)
{
	if (u->ur_p.forward) {
		/* plain HTTP through the proxy: the caller sends the request itself */
		if (auth != NULL && (u->ur_res.proxy_authorization = strdup(auth)) == NULL) {
			finish(u, REASON_INTERNAL_ERROR, false, "out of memory");
			return;
		}
		finish(u, REASON_ALLOWED, false, "connected to the proxy for forwarding");
		return;
	}
	u->ur_outlen = upstream_connect_head(u->ur_p.target_name, u->ur_p.target_addr, u->ur_p.target_port,
	    auth, (char *)u->ur_out, sizeof(u->ur_out));
	u->ur_outoff = 0;
	if (u->ur_outlen == 0) {
		finish(u, REASON_INTERNAL_ERROR, false, "CONNECT request too long");
		return;
	}
	u->ur_sent_auth = auth != NULL;
	u->ur_st = UP_HTTP_SEND;
	step_send(u);
}

static void
on_token(const char *token, const char *err, void *arg)
{
	struct upstream_req *u = arg;

	u->ur_greq = NULL;
	if (token == NULL) {
		finish(u, REASON_UPSTREAM_AUTH_FAILED, false, "no Negotiate token for HTTP@%s: %s",
		    u->ur_p.via->proxy.name, err ? err : "unknown error");
		return;
	}
	u->ur_res.auth = "negotiate";
	send_connect(u, token);
}

static void
begin_http(struct upstream_req *u)
{
	const struct proxycred *c = u->ur_p.cred;

	if (c == NULL) {
		send_connect(u, NULL);
		return;
	}
	switch (c->scheme) {
	case PROXY_AUTH_BASIC: {
		char hdr[1024];
		if (proxycreds_basic_header(c, hdr, sizeof(hdr)) == 0) {
			finish(u, REASON_INTERNAL_ERROR, false, "credentials too long");
			return;
		}
		u->ur_res.auth = "basic";
		send_connect(u, hdr);
		secret_wipe(hdr, sizeof(hdr));
		return;
	}
	case PROXY_AUTH_NEGOTIATE:
		if (u->ur_p.gss == NULL || u->ur_p.via->proxy.kind != HOST_NAME) {
			/* Kerberos needs the proxy's NAME (HTTP@name); an address cannot work */
			finish(u, REASON_UPSTREAM_AUTH_FAILED, false, "Negotiate needs the proxy's "
			    "host name, not an address (configure the proxy by name)");
			return;
		}
		u->ur_st = UP_TOKEN;
		u->ur_greq = gssauth_token(u->ur_p.gss, u->ur_p.via->proxy.name, c->keytab, c->ccache,
		    c->principal, on_token, u);
		if (u->ur_greq == NULL)
			finish(u, REASON_INTERNAL_ERROR, false, "cannot start a Negotiate token");
		return;
	case PROXY_AUTH_NTLM:
		if (u->ur_p.gss == NULL || u->ur_p.forward) {
			/* NTLM authenticates a connection: egressd runs it for CONNECT tunnels */
			finish(u, REASON_UPSTREAM_AUTH_FAILED, false, "NTLM is supported for CONNECT "
			    "through the proxy, not for plain-HTTP forwarding");
			return;
		}
		ntlm_next(u);
		return;
	}
	finish(u, REASON_INTERNAL_ERROR, false, "unknown auth scheme");
}

static void
on_ntlm(const char *token, const char *err, struct gss_sec *sec, void *arg)
{
	struct upstream_req *u = arg;

	u->ur_greq = NULL;
	u->ur_gsec = sec;
	if (token == NULL) {
		finish(u, REASON_UPSTREAM_AUTH_FAILED, false, "NTLM for the proxy %s: %s",
		    u->ur_p.via->proxy.name, err ? err : "unknown error");
		return;
	}
	u->ur_res.auth = "ntlm";
	send_connect(u, token);
}

/* Leg 1 (NEGOTIATE) or leg 3 (AUTHENTICATE, answering the stored challenge). */
static void
ntlm_next(struct upstream_req *u)
{
	const struct proxycred *c = u->ur_p.cred;
	struct gss_sec *sec = u->ur_gsec;

	u->ur_gsec = NULL;             /* the step owns it now */
	u->ur_ntlm_leg++;
	u->ur_st = UP_TOKEN;
	u->ur_greq = gssauth_ntlm_step(u->ur_p.gss, sec, u->ur_p.via->proxy.name, c->username,
	    c->password, u->ur_ntlm_leg > 1 ? u->ur_ntlm_challenge : NULL, on_ntlm, u);
	if (u->ur_greq == NULL)
		finish(u, REASON_INTERNAL_ERROR, false, "cannot start an NTLM step");
}

/* ---- SOCKS5 ---- */

static void on_socks(evutil_socket_t fd, short what, void *arg);

static void
socks_send(struct upstream_req *u, enum up_state next_read, size_t n)
{
	u->ur_outlen = n;
	u->ur_outoff = 0;
	u->ur_st = next_read;
	step_send(u);
}

static void
socks_connect_request(struct upstream_req *u)
{
	size_t n = u->ur_p.target_addr != NULL ?
	    socks5_connect_addr(u->ur_p.target_addr, u->ur_p.target_port, u->ur_out, sizeof(u->ur_out)) :
	    socks5_connect_name(u->ur_p.target_name, u->ur_p.target_port, u->ur_out, sizeof(u->ur_out));

	if (n == 0) {
		finish(u, REASON_INTERNAL_ERROR, false, "SOCKS5 request too long");
		return;
	}
	reply_reset(u);
	socks_send(u, UP_SOCKS_REPLY, n);
}

static void
on_socks(evutil_socket_t fd, short what, void *arg)
{
	struct upstream_req *u = arg;
	uint8_t m;
	int rc;

	(void)fd;
	(void)what;
	switch (u->ur_st) {
	case UP_SOCKS_METHOD:
		if ((rc = read_reply(u, fixed2, 2)) <= 0)
			return;
		if (socks5_parse_method(u->ur_in, u->ur_inlen, u->ur_socks_userpass, &m) <= 0) {
			finish(u, REASON_PROXY_BAD_RESPONSE, false, "invalid SOCKS5 method reply");
			return;
		}
		if (m == SOCKS5_METHOD_REFUSED) {
			finish(u, u->ur_socks_userpass ? REASON_SOCKS_AUTH_FAILED :
			    REASON_UPSTREAM_AUTH_REQUIRED, false,
			    "the SOCKS5 proxy accepts none of the offered methods");
			return;
		}
		if (m == SOCKS5_METHOD_USERPASS) {
			size_t n = socks5_userpass(u->ur_p.cred->username, u->ur_p.cred->password, u->ur_out,
			    sizeof(u->ur_out));
			if (n == 0) {
				finish(u, REASON_INTERNAL_ERROR, false, "SOCKS5 credentials too long");
				return;
			}
			u->ur_res.auth = "basic";
			u->ur_sent_auth = true;
			reply_reset(u);
			socks_send(u, UP_SOCKS_AUTH_REPLY, n);
			return;
		}
		socks_connect_request(u);
		return;
	case UP_SOCKS_AUTH_REPLY:
		if ((rc = read_reply(u, fixed2, 2)) <= 0)
			return;
		if (socks5_parse_userpass(u->ur_in, u->ur_inlen) != 1) {
			finish(u, REASON_SOCKS_AUTH_FAILED, false, "the SOCKS5 proxy refused egressd's "
			    "username/password");
			return;
		}
		socks_connect_request(u);
		return;
	case UP_SOCKS_REPLY: {
		enum reason r;
		long n;
		if ((rc = read_reply(u, socks_reply_len, 262)) <= 0)
			return;
		n = socks5_parse_connect(u->ur_in, u->ur_inlen, &r, NULL);
		if (n > 0) {
			finish(u, REASON_ALLOWED, false, "SOCKS5 CONNECT succeeded");
			return;
		}
		finish(u, r, false, "the SOCKS5 proxy answered: %s", reason_str(r));
		return;
	}
	case UP_RESOLVE: case UP_CONNECT: case UP_TLS: case UP_GATE: case UP_TOKEN:
	case UP_HTTP_SEND:
	case UP_HTTP_HEAD: case UP_HTTP_DISCARD: case UP_SOCKS_GREET: case UP_SOCKS_AUTH: case UP_SOCKS_CONNECT:
	case UP_DONE:
		break;
	}
	finish(u, REASON_INTERNAL_ERROR, false, "unexpected SOCKS5 state");
}

static void
begin_socks(struct upstream_req *u)
{
	const struct proxycred *c = u->ur_p.cred;

	u->ur_socks_userpass = c != NULL && c->username != NULL && c->password != NULL;
	if (c != NULL && !u->ur_socks_userpass) {
		finish(u, REASON_SOCKS_AUTH_FAILED, false, "SOCKS5 supports only username/password "
		    "credentials");
		return;
	}
	socks_send(u, UP_SOCKS_METHOD, socks5_greeting(u->ur_socks_userpass, u->ur_out, sizeof(u->ur_out)));
}

/* ---- sending ---- */

static void
on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	step_send(arg);
}

static void
step_send(struct upstream_req *u)
{
	while (u->ur_outoff < u->ur_outlen) {
		ssize_t w = send(u->ur_fd, u->ur_out + u->ur_outoff, u->ur_outlen - u->ur_outoff, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				arm(u, EV_WRITE, on_writable);
				return;
			}
			finish(u, REASON_PROXY_UNREACHABLE, false, "writing to the proxy: %s",
			    strerror(errno));
			return;
		}
		u->ur_outoff += (size_t)w;
	}
	secret_wipe(u->ur_out, u->ur_outlen);   /* may have held credentials */
	if (u->ur_st == UP_HTTP_SEND) {
		u->ur_st = UP_HTTP_HEAD;
		reply_reset(u);
		arm(u, EV_READ | EV_PERSIST, on_http_head);
	} else {
		arm(u, EV_READ | EV_PERSIST, on_socks);
	}
}

/* ---- connecting ---- */

static void
begin_protocol(struct upstream_req *u)
{
	if (!u->ur_gated && u->ur_p.gate != NULL) {
		/* Nothing of the proxy protocol leaves before the caller's allow record is on
		 * disk: wait for upstream_proceed (or upstream_cancel). */
		const struct proxycred *c = u->ur_p.cred;
		u->ur_gated = true;
		u->ur_st = UP_GATE;
		/* the scheme the credential will use, for the caller's allow record */
		if (c != NULL && u->ur_p.via->kind == PROXY_SOCKS5)
			u->ur_res.auth = c->username != NULL && c->password != NULL ? "basic" : NULL;
		else if (c != NULL)
			u->ur_res.auth = c->scheme == PROXY_AUTH_BASIC ? "basic" :
			    c->scheme == PROXY_AUTH_NEGOTIATE ? "negotiate" :
			    c->scheme == PROXY_AUTH_NTLM ? "ntlm" : NULL;
		u->ur_p.gate(u, &u->ur_res, u->ur_arg);
		return;
	}
	if (u->ur_p.via->kind == PROXY_SOCKS5)
		begin_socks(u);
	else
		begin_http(u);
}

static void
on_tls(int app_fd, const char *err, void *arg)
{
	struct upstream_req *u = arg;

	u->ur_tb = NULL;
	if (app_fd < 0) {
		u->ur_fd = -1;   /* the bridge took and closed the socket */
		finish(u, REASON_PROXY_TLS_FAILED, true, "TLS to the proxy %s failed: %s",
		    u->ur_p.via->proxy.name, err ? err : "error");
		return;
	}
	u->ur_fd = app_fd;
	begin_protocol(u);
}

/* One of the proxy's addresses failed; the record names the address being tried (the
 * next one, one at a time), as it did before the connector took over. */
static void
proxy_addr_failed(size_t idx, int err, void *arg)
{
	struct upstream_req *u = arg;
	char a[EGRESS_ADDRSTR_MAX];

	log_info("proxy %s at %s: %s", u->ur_p.via->proxy.name,
	    addr_to_str(&u->ur_addrs[idx], a, sizeof(a)), strerror(err));
	u->ur_res.proxy_addr = u->ur_addrs[idx + 1 < u->ur_naddrs ? idx + 1 : idx];
	u->ur_res.have_proxy_addr = true;
}

static void
proxy_connected(const struct connector_result *r, void *arg)
{
	struct upstream_req *u = arg;

	u->ur_conn = NULL;                 /* it frees itself */
	if (r->fd < 0) {
		if (r->local_error)
			finish(u, REASON_INTERNAL_ERROR, false, "socket: %s", strerror(r->err));
		else
			finish(u, REASON_PROXY_UNREACHABLE, true, "cannot connect to the proxy %s",
			    u->ur_p.via->proxy.name);
		return;
	}
	u->ur_res.proxy_addr = u->ur_addrs[r->idx];
	u->ur_res.have_proxy_addr = true;
	if (u->ur_p.via->kind == PROXY_HTTPS) {
		u->ur_st = UP_TLS;
		u->ur_tb = tlsbridge_new(u->ur_base, r->fd, u->ur_p.tls, &u->ur_p.via->proxy, on_tls, u);
		if (u->ur_tb == NULL)
			finish(u, REASON_PROXY_TLS_FAILED, true, "cannot set up TLS to the proxy");
		return;
	}
	u->ur_fd = r->fd;
	begin_protocol(u);
}

/* The proxy's addresses one at a time (egressd/connector), within the request's deadline
 * (on_deadline). Route infrastructure: no address-class check. */
static void
connect_proxy(struct upstream_req *u)
{
	static const struct connector_opts one_at_a_time = { .max_inflight = 1 };

	u->ur_st = UP_CONNECT;
	if (u->ur_naddrs > 0) {
		u->ur_res.proxy_addr = u->ur_addrs[0];
		u->ur_res.have_proxy_addr = true;
	}
	u->ur_conn = connector_start(u->ur_base, u->ur_addrs, u->ur_naddrs, u->ur_p.via->proxy.port,
	    &one_at_a_time, proxy_connected, proxy_addr_failed, u);
	if (u->ur_conn == NULL)
		finish(u, REASON_INTERNAL_ERROR, false, "out of memory");
}

static void
on_proxy_resolved(const struct resolve_answer *ans, void *arg)
{
	struct upstream_req *u = arg;

	u->ur_rreq = NULL;
	if (ans->status != REASON_ALLOWED) {
		finish(u, REASON_PROXY_UNREACHABLE, true, "cannot resolve the proxy %s: %s",
		    ans->name, reason_str(ans->status));
		return;
	}
	/* Route infrastructure: no address-class check (corporate proxies live on private
	 * addresses); the address used is reported for the log. */
	u->ur_naddrs = ans->naddrs;
	memcpy(u->ur_addrs, ans->addrs, ans->naddrs * sizeof(ans->addrs[0]));
	connect_proxy(u);
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct upstream_req *u = arg;

	(void)fd;
	(void)what;
	if (u->ur_st == UP_GATE)
		finish(u, REASON_UPSTREAM_TIMEOUT, false, "the allow record for the proxy %s "
		    "was not written within %u ms; nothing was sent to it", u->ur_p.via->proxy.name,
		    u->ur_p.timeout_ms);
	else if (u->ur_st == UP_RESOLVE || u->ur_st == UP_CONNECT)
		finish(u, REASON_PROXY_UNREACHABLE, true, "the proxy %s did not accept a connection "
		    "within %u ms", u->ur_p.via->proxy.name, u->ur_p.timeout_ms);
	else if (u->ur_st == UP_TLS)
		finish(u, REASON_PROXY_TLS_FAILED, true, "TLS to the proxy %s took longer than %u ms",
		    u->ur_p.via->proxy.name, u->ur_p.timeout_ms);
	else
		finish(u, REASON_UPSTREAM_TIMEOUT, false, "the proxy %s did not answer within %u ms",
		    u->ur_p.via->proxy.name, u->ur_p.timeout_ms);
}

static void
on_later(evutil_socket_t fd, short what, void *arg)
{
	struct upstream_req *u = arg;

	(void)fd;
	(void)what;
	if (u->ur_st == UP_GATE) {
		/* upstream_proceed: the allow record is on disk */
		u->ur_st = UP_HTTP_SEND;   /* from here a timeout is "the proxy did not answer" */
		begin_protocol(u);
		return;
	}
	if (u->ur_p.via->proxy.kind != HOST_NAME) {
		u->ur_addrs[0] = u->ur_p.via->proxy.addr;
		u->ur_naddrs = 1;
		connect_proxy(u);
		return;
	}
	u->ur_rreq = resolver_lookup(u->ur_p.res, u->ur_p.via->proxy.name, on_proxy_resolved, u);
	if (u->ur_rreq == NULL)
		finish(u, REASON_INTERNAL_ERROR, false, "out of memory");
}

struct upstream_req *
upstream_connect(struct event_base *base, const struct upstream_params *p, upstream_cb cb,
    void *arg)
{
	struct upstream_req *u;
	struct timeval tv = { (time_t)(p->timeout_ms / 1000),
	    (suseconds_t)(p->timeout_ms % 1000) * 1000 };
	static const struct timeval zero = { 0, 0 };

	if (p->via == NULL || p->via->kind == PROXY_DIRECT)
		return NULL;
	u = calloc(1, sizeof(*u));
	if (u == NULL)
		return NULL;
	u->ur_base = base;
	u->ur_p = *p;
	u->ur_cb = cb;
	u->ur_arg = arg;
	u->ur_fd = -1;
	u->ur_st = UP_RESOLVE;
	u->ur_start_us = mono_usec();
	u->ur_deadline = evtimer_new(base, on_deadline, u);
	u->ur_later = evtimer_new(base, on_later, u);
	if (u->ur_deadline == NULL || u->ur_later == NULL) {
		cleanup(u);
		free(u);
		return NULL;
	}
	evtimer_add(u->ur_deadline, &tv);
	evtimer_add(u->ur_later, &zero);     /* the callback never runs from inside this call */
	return u;
}

void
upstream_cancel(struct upstream_req *u)
{
	if (u == NULL)
		return;
	cleanup(u);
	free(u);
}

void
upstream_proceed(struct upstream_req *u)
{
	static const struct timeval zero = { 0, 0 };

	if (u == NULL || u->ur_st != UP_GATE || u->ur_later == NULL)
		return;
	evtimer_add(u->ur_later, &zero);
}

SSL_CTX *
upstream_tls_ctx_new(const char *ca_file, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (ctx == NULL) {
		snprintf(err, errlen, "cannot create a TLS context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* Without ca_file: the system store, on first use (upstream_tls_ctx_load_system).
	 * Until then the context verifies against nothing, so nothing can pass. */
	if (ca_file != NULL && SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
		snprintf(err, errlen, "cannot load the trust store %s", ca_file);
		SSL_CTX_free(ctx);
		ERR_clear_error();
		return NULL;
	}
	return ctx;
}

int
upstream_tls_ctx_load_system(SSL_CTX *ctx, char *err, size_t errlen)
{
	if (ctx == NULL || SSL_CTX_set_default_verify_paths(ctx) != 1) {
		snprintf(err, errlen, "cannot load the trust store (system)");
		ERR_clear_error();
		return -1;
	}
	return 0;
}
