/* mitm.c - an intercepted model-connection tunnel (see mitm.h). */
#define _GNU_SOURCE
#include "egressd/mitm.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "egressd/dlog.h"
#include "egressd/http.h"
#include "egressd/httpresp.h"
#include "egressd/jsonw.h"
#include "egressd/metrics.h"
#include "egressd/rectpl.h"
#include "egressd/redirect.h"

#define MITM_HIGH_WATER (256 * 1024)   /* bytes queued toward one side before reads pause */
#define MITM_MOVE_MAX   (64 * 1024)    /* bytes moved per step (chunked framing) */
#define MITM_ONE_RECORD 16384          /* a TLS record's plaintext, at most (RFC 8446 5.1) */
#define MITM_HEAD_OUT   (EGRESS_REQUEST_HEAD_MAX + 8192)

enum mstate {
	M_HANDSHAKE,     /* client TLS handshake */
	M_REQ_HEAD,      /* waiting for an inner request head */
	M_WAIT_UP,       /* head accepted, origin TLS not ready yet */
	M_LOG,           /* allow record in flight */
	M_EXCHANGE,      /* request body and/or response flowing */
	M_CLOSING,       /* last bytes to the client, then end */
};

struct mitm {
	struct mitm_opts mi_o;
	struct rectpl *mi_tpl;           /* every record's members: o.record_base's, with slots */
	struct bufferevent *mi_cb;       /* worker side (egressd is the TLS server) */
	struct bufferevent *mi_ub;       /* origin side (egressd is the TLS client) */
	enum mstate mi_st;
	bool mi_client_ready, mi_up_ready, mi_up_failed, mi_up_eof;
	char mi_up_error[256];           /* the origin's verification error, for the record */
	enum reason mi_close_reason;     /* M_CLOSING: why, once flushed */
	struct event *mi_idle;
	struct event *mi_closer;         /* ends the tunnel outside the current callback */
	uint64_t mi_last_us;
	uint64_t mi_start_us;
	uint64_t mi_up, mi_down;         /* TLS payload bytes, worker -> origin and back */
	struct dlog_ticket *mi_ticket;
	unsigned mi_n;                   /* inner requests so far */
	char mi_hop[96];                 /* current inner hop id */
	/* the current request */
	char *mi_head;                   /* its head (req borrows it) */
	struct http_request mi_req;
	bool mi_req_done;                /* request body fully sent */
	struct http_body_framer mi_req_body;
	uint64_t mi_req_up;              /* bytes of this exchange, both ways */
	uint64_t mi_req_down;
	/* the current response */
	bool mi_resp_head_done;
	int mi_status;
	enum http_resp_body mi_resp_kind;
	struct http_body_framer mi_resp_body;
	bool mi_keep;                    /* both sides keep the connection after this one */
	bool mi_allowed;                 /* its allow record is written */
	/* its allow record is on its way or written, and no close or deny has ended it: any
	 * end of the tunnel from here on writes its close (as the session's se_allow_open) */
	bool mi_allow_open;
};

static void process(struct mitm *m);

SSL_CTX *
mitm_client_ctx(const char *ca_file, char *err, size_t errlen)
{
	static const unsigned char h11[] = "\x08http/1.1";
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (ctx == NULL) {
		snprintf(err, errlen, "SSL_CTX_new failed");
		return NULL;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
	    (ca_file != NULL ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL) :
	    SSL_CTX_set_default_verify_paths(ctx)) != 1 ||
	    SSL_CTX_set_alpn_protos(ctx, h11, sizeof(h11) - 1) != 0) {
		snprintf(err, errlen, "origin trust store %s could not be loaded",
		    ca_file != NULL ? ca_file : "(OpenSSL default paths)");
		SSL_CTX_free(ctx);
		ERR_clear_error();
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
	return ctx;
}

/* ---- records ---- */

/*
 * A record: the hop's decision (the template of its members, made once per tunnel) with
 * this inner request's members set in it (rectpl.h: the bytes a copy of the hop's object
 * with these members set would dump as). The keys any record sets, in one list:
 */
static const char *const rec_slots[] = {
	"hop", "parent_hop", "hop_kind", "intercepted", "credential", "method", "target",
	"verdict", "reason", "tls_error", "status", "bytes_up", "bytes_down",
};

#define REC_STR(k, v)  ((struct rectpl_val){ .key = (k), .kind = RV_STR, .s = (v), \
	.n = (v) != NULL ? strlen(v) : 0 })
#define REC_INT(k, v)  ((struct rectpl_val){ .key = (k), .kind = RV_INT, .i = (long long)(v) })

/*
 * The members every record of this request sets first (vals has room for RECTPL_SLOTS_MAX;
 * path holds the target without its query): their count.
 */
static size_t
record_vals(const struct mitm *m, struct rectpl_val *vals, char path[EGRESS_LOG_TARGET_MAX + 1])
{
	size_t n = 0;

	vals[n++] = REC_STR("hop", m->mi_hop);
	vals[n++] = REC_STR("parent_hop", m->mi_o.hop);
	vals[n++] = REC_STR("hop_kind", "inner");
	vals[n++] = (struct rectpl_val){ .key = "intercepted", .kind = RV_BOOL, .i = 1 };
	vals[n++] = REC_STR("credential", m->mi_o.conn->name);
	if (m->mi_head != NULL) {
		const char *q = memchr(m->mi_req.path, '?', m->mi_req.path_len);
		size_t pl = q != NULL ? (size_t)(q - m->mi_req.path) : m->mi_req.path_len;

		/* The path without its query: queries may carry secrets of the worker's own. */
		if (pl > EGRESS_LOG_TARGET_MAX)
			pl = EGRESS_LOG_TARGET_MAX;
		memcpy(path, m->mi_req.path, pl);
		path[pl] = '\0';
		vals[n++] = REC_STR("method", http_method_str(m->mi_req.method));
		vals[n++] = REC_STR("target", path);
	} else {
		vals[n++] = (struct rectpl_val){ .key = "method", .kind = RV_NULL };
		vals[n++] = (struct rectpl_val){ .key = "target", .kind = RV_NULL };
	}
	return n;
}

/* A close that waited out a log failure and could not be written after all: said once,
 * like the session's (the mitm may be gone by then: nothing of it is used). */
static void
close_lost(int err, void *arg)
{
	(void)arg;
	log_warnx("intercepted: decision log refused a close record (%s)", strerror(err));
}

/* This request's record with vals set, as members in buf (EGRESS_LOG_RECORD_MAX bytes):
 * their length, or 0 with errno EMSGSIZE when they do not fit a record. */
static size_t
members(const struct mitm *m, const struct rectpl_val *vals, size_t n, char *buf)
{
	struct jsonw w;
	size_t len;
	bool ok;

	jsonw_init(&w, buf, EGRESS_LOG_RECORD_MAX);
	rectpl_write(m->mi_tpl, &w, vals, n);
	len = jsonw_len(&w, &ok);
	if (!ok)
		errno = EMSGSIZE;
	return len;
}

static void
record_decision(struct mitm *m, bool allow, enum reason r, const char *tls_error)
{
	struct rectpl_val v[RECTPL_SLOTS_MAX];
	char path[EGRESS_LOG_TARGET_MAX + 1], buf[EGRESS_LOG_RECORD_MAX];
	size_t len, n = record_vals(m, v, path);

	v[n++] = REC_STR("verdict", allow ? "allow" : "deny");
	v[n++] = REC_STR("reason", reason_str(r));
	if (tls_error != NULL)
		v[n++] = REC_STR("tls_error", tls_error);
	m->mi_allow_open = false;          /* a deny after the allow ends the hop */
	if ((len = members(m, v, n, buf)) == 0 || dlog_append_raw(m->mi_o.dlog, "decision", buf,
	    len, false, false, NULL, NULL, NULL) != 0)
		log_warn("intercepted %s: decision log refused a decision record", m->mi_hop);
	metrics_decision(m->mi_o.stats, allow, r);
	/* A deny after this request's allow record: the hop was let through, then failed. */
	if (!allow && m->mi_allowed)
		metrics_hop_failed(m->mi_o.stats, r);
}

static void
record_close(struct mitm *m, enum reason r)
{
	struct rectpl_val v[RECTPL_SLOTS_MAX];
	char path[EGRESS_LOG_TARGET_MAX + 1], buf[EGRESS_LOG_RECORD_MAX];
	size_t len, n = record_vals(m, v, path);

	if (m->mi_ticket != NULL) {
		/* The allow is on its way and the tunnel ends before its callback, which would
		 * have counted it: this close follows it, and the metrics count the allow once it
		 * is written (one per decision record); the tunnel's callback is gone now. */
		dlog_ticket_retarget(m->mi_ticket, metrics_allow_written, m->mi_o.stats);
		m->mi_ticket = NULL;
	}
	if (m->mi_status)
		v[n++] = REC_INT("status", m->mi_status);
	else
		v[n++] = (struct rectpl_val){ .key = "status", .kind = RV_NULL };
	v[n++] = REC_STR("reason", reason_str(r));
	v[n++] = REC_INT("bytes_up", m->mi_req_up);
	v[n++] = REC_INT("bytes_down", m->mi_req_down);
	m->mi_allow_open = false;
	/* held through a log failure (keep; every inner allow has its close, like the
	 * session's); close_lost speaks only when it could not be written */
	if ((len = members(m, v, n, buf)) == 0 || dlog_append_raw(m->mi_o.dlog, "close", buf, len,
	    true, true, close_lost, NULL, NULL) != 0)
		log_warn("intercepted %s: decision log refused a close record", m->mi_hop);
	metrics_close(m->mi_o.stats, r);
}

/* ---- life cycle ---- */

static void
reset_request(struct mitm *m)
{
	free(m->mi_head);
	m->mi_head = NULL;
	memset(&m->mi_req, 0, sizeof(m->mi_req));
	m->mi_req_done = false;
	m->mi_req_up = m->mi_req_down = 0;
	m->mi_resp_head_done = false;
	m->mi_status = 0;
	m->mi_keep = false;
	m->mi_allowed = false;
}

static void
release(struct mitm *m)
{
	if (m->mi_ticket != NULL)
		dlog_ticket_cancel(m->mi_ticket);
	if (m->mi_cb != NULL)
		bufferevent_free(m->mi_cb);        /* closes the socket (SSL shut down quietly) */
	if (m->mi_ub != NULL)
		bufferevent_free(m->mi_ub);
	if (m->mi_idle != NULL)
		event_free(m->mi_idle);
	if (m->mi_closer != NULL)
		event_free(m->mi_closer);
	free(m->mi_head);
	rectpl_free(m->mi_tpl);
	SSL_CTX_free(m->mi_o.server_ctx);
	SSL_CTX_free(m->mi_o.client_ctx);
	connections_free(m->mi_o.conns);
	free(m);
}

void
mitm_free(struct mitm *m)
{
	if (m != NULL)
		release(m);
}

static void end(struct mitm *m, enum reason why);

void
mitm_close(struct mitm *m, enum reason why)
{
	if (m->mi_allow_open)
		record_close(m, why);
	end(m, why);
}

static void
end(struct mitm *m, enum reason why)
{
	mitm_done_cb done = m->mi_o.done;
	void *arg = m->mi_o.arg;
	uint64_t up = m->mi_up, down = m->mi_down;

	release(m);
	done(why, up, down, arg);
}

static void
on_closer(evutil_socket_t fd, short what, void *arg)
{
	struct mitm *m = arg;

	end(m, m->mi_close_reason);
}

/* Stop reading, let what is queued for the worker go out, then end with r. Never ends
 * (frees) inside the call: callers may still be on the stack. */
static void
close_after_flush(struct mitm *m, enum reason r)
{
	m->mi_close_reason = r;
	m->mi_st = M_CLOSING;
	bufferevent_disable(m->mi_ub, EV_READ);
	bufferevent_disable(m->mi_cb, EV_READ);
	bufferevent_setwatermark(m->mi_cb, EV_WRITE, 0, 0);
	if (evbuffer_get_length(bufferevent_get_output(m->mi_cb)) == 0)
		event_active(m->mi_closer, EV_TIMEOUT, 0);
}

/* Answer the worker with a refusal (a deny record first), then close once it is out. */
static void
refuse(struct mitm *m, enum reason r, const char *tls_error)
{
	char buf[1024];
	size_t n = http_format_refusal(r, buf, sizeof(buf));

	log_debug("intercepted %s: refused: %s", m->mi_hop, reason_str(r));
	record_decision(m, false, r, tls_error);
	if (n > 0)
		bufferevent_write(m->mi_cb, buf, n);
	close_after_flush(m, r);
}

/* ---- moving bytes ---- */

static bool
count(struct mitm *m, size_t n, bool upward)
{
	if (upward) {
		m->mi_up += n;
		m->mi_req_up += n;
	} else {
		m->mi_down += n;
		m->mi_req_down += n;
	}
	m->mi_last_us = mono_usec();
	if (m->mi_o.bytes_total != NULL) {
		*m->mi_o.bytes_total += n;
		if (m->mi_o.bytes_limit != 0 && *m->mi_o.bytes_total > m->mi_o.bytes_limit)
			return false;
	}
	return true;
}

/* Move n bytes src -> dst. Returns bytes moved. */
static size_t
move(struct bufferevent *src, struct bufferevent *dst, size_t n)
{
	if (n == 0)
		return 0;
	return evbuffer_remove_buffer(bufferevent_get_input(src), bufferevent_get_output(dst),
	    n) < 0 ? 0 : n;
}

/* evbuffer_add_reference's cleanup for egressd's own buffers: wiped (a request head holds
 * the connection's credential), then freed. */
static void
wipe_free(const void *data, size_t len, void *extra)
{
	void *p = (void *)(uintptr_t)data;     /* ours, handed to libevent as const */

	(void)extra;
	secret_wipe(p, len);
	free(p);
}

/*
 * What is queued toward dst in one piece when it fits one TLS record. bufferevent_openssl
 * writes one record (one SSL_write, one write(2)) per evbuffer chain, and a head written
 * here and a body moved from the other side's input are two chains: an exchange's small
 * request or answer then leaves as one record instead of two. The bytes and their order
 * are the same; only where they lie in memory changes, which libevent's SSL writes allow
 * (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER; a blocked write is retried with at least its
 * length and the same leading bytes). The one piece is egressd's own buffer, wiped when
 * libevent lets it go, like the head it may hold (never a libevent chain with the
 * credential in it). False when the bytes could not be put back (memory): the tunnel
 * cannot go on.
 */
static bool
coalesce(struct bufferevent *dst)
{
	struct evbuffer *out = bufferevent_get_output(dst);
	size_t len = evbuffer_get_length(out);
	char *one;

	if (len == 0 || len > MITM_ONE_RECORD || evbuffer_peek(out, -1, NULL, NULL, 0) < 2 ||
	    (one = malloc(len)) == NULL)
		return true;                /* as it is: correct, only one record more */
	if (evbuffer_copyout(out, one, len) != (ev_ssize_t)len || evbuffer_drain(out, len) != 0) {
		wipe_free(one, len, NULL);  /* nothing was taken out */
		return true;
	}
	if (evbuffer_add_reference(out, one, len, wipe_free, NULL) != 0) {
		wipe_free(one, len, NULL);
		return false;
	}
	return true;
}

/* Pause reading src while dst has too much queued (resumed from dst's write callback). */
static void
pace(struct bufferevent *src, struct bufferevent *dst)
{
	if (evbuffer_get_length(bufferevent_get_output(dst)) >= MITM_HIGH_WATER)
		bufferevent_disable(src, EV_READ);
	else
		bufferevent_enable(src, EV_READ);
}

/* Body bytes from src to dst as f frames them (http_body_framer). Returns 1 when the body
 * is complete, 0 when more is needed, -1 on malformed chunked framing, -2 past the byte
 * limit. */
static int
move_body(struct mitm *m, struct bufferevent *src, struct bufferevent *dst,
    struct http_body_framer *f, bool upward)
{
	struct evbuffer *in = bufferevent_get_input(src);

	for (;;) {
		size_t avail = evbuffer_get_length(in), moved;
		size_t take = avail < MITM_MOVE_MAX ? avail : MITM_MOVE_MAX;
		const char *p = NULL;
		bool done = false;
		long k;

		if (evbuffer_get_length(bufferevent_get_output(dst)) >= MITM_HIGH_WATER)
			return 0;
		if (f->kind == HTTP_RESP_CHUNKED && take > 0)
			p = (const char *)evbuffer_pullup(in, (ssize_t)take);
		k = http_body_framer_feed(f, p, take, &done);
		if (k < 0)
			return -1;
		moved = move(src, dst, (size_t)k);
		if (!count(m, moved, upward))
			return -2;
		if (done)
			return 1;
		if (moved == 0)
			return 0;
	}
}

/* ---- the inner request ---- */

static bool
strip(const struct mitm *m, const struct http_header *h)
{
	return connection_strips_header(m->mi_o.conn, h->name, h->name_len) ||
	    http_is_hop_header(h->name, h->name_len) ||
	    (h->name_len == 4 && strncasecmp(h->name, "host", 4) == 0);
}

/* Does the Connection header of req name this header (then it is hop-by-hop)? */
static bool
named_by_connection(const struct http_request *req, const struct http_header *h)
{
	for (size_t i = 0; i < req->nheaders; i++) {
		const struct http_header *c = &req->headers[i];
		const char *p = c->value, *e = c->value + c->value_len;
		if (!(c->name_len == 10 && strncasecmp(c->name, "connection", 10) == 0))
			continue;
		while (p < e) {
			const char *t;
			while (p < e && (*p == ',' || *p == ' ' || *p == '\t'))
				p++;
			t = p;
			while (p < e && *p != ',' && *p != ' ' && *p != '\t')
				p++;
			if ((size_t)(p - t) == h->name_len && strncasecmp(t, h->name, h->name_len) == 0)
				return true;
		}
	}
	return false;
}

/* The head egressd sends to the origin: origin-form line, canonical Host, the worker's
 * headers minus credentials and hop-by-hop ones, then the connection's credential. */
static size_t
build_head(struct mitm *m, char *out, size_t cap)
{
	char hostb[EGRESS_HOSTPORT_MAX + 1], cred[EGRESS_CREDENTIAL_MAX + 256];
	size_t o = 0, cl;
	int k;

	if (m->mi_req.host.kind == HOST_IPV6)
		snprintf(hostb, sizeof(hostb), "[%s]", m->mi_req.host.name);
	else
		snprintf(hostb, sizeof(hostb), "%s", m->mi_req.host.name);
	if (m->mi_o.port != 443) {
		size_t l = strlen(hostb);
		snprintf(hostb + l, sizeof(hostb) - l, ":%u", (unsigned)m->mi_o.port);
	}
	k = snprintf(out, cap, "%s %.*s HTTP/1.1\r\nHost: %s\r\n", http_method_str(m->mi_req.method),
	    (int)m->mi_req.path_len, m->mi_req.path, hostb);
	if (k < 0 || (size_t)k >= cap)
		return 0;
	o = (size_t)k;
	for (size_t i = 0; i < m->mi_req.nheaders; i++) {
		const struct http_header *h = &m->mi_req.headers[i];
		if (strip(m, h) || named_by_connection(&m->mi_req, h))
			continue;
		if (o + h->name_len + h->value_len + 4 >= cap)
			return 0;
		memcpy(out + o, h->name, h->name_len);
		o += h->name_len;
		memcpy(out + o, ": ", 2);
		o += 2;
		memcpy(out + o, h->value, h->value_len);
		o += h->value_len;
		memcpy(out + o, "\r\n", 2);
		o += 2;
	}
	if (m->mi_req.body == HTTP_BODY_CHUNKED) {
		/* Transfer-Encoding is hop-by-hop here; the body passes as it is, framed */
		static const char te[] = "Transfer-Encoding: chunked\r\n";
		if (o + sizeof(te) >= cap)
			return 0;
		memcpy(out + o, te, sizeof(te) - 1);
		o += sizeof(te) - 1;
	}
	cl = connection_header_line(m->mi_o.conn, cred, sizeof(cred));
	if (cl == 0 || o + cl + 3 >= cap) {
		secret_wipe(cred, sizeof(cred));
		return 0;
	}
	memcpy(out + o, cred, cl);
	o += cl;
	secret_wipe(cred, sizeof(cred));
	memcpy(out + o, "\r\n", 2);
	return o + 2;
}

static void
logged(int err, void *arg)
{
	struct mitm *m = arg;
	char *out;
	size_t n;

	m->mi_ticket = NULL;
	if (err != 0) {
		refuse(m, REASON_AUDIT_UNAVAILABLE, NULL);
		return;
	}
	m->mi_allowed = true;
	metrics_decision(m->mi_o.stats, 1, REASON_ALLOWED);
	out = malloc(MITM_HEAD_OUT);
	n = out != NULL ? build_head(m, out, MITM_HEAD_OUT) : 0;
	if (n == 0) {
		free(out);
		refuse(m, REASON_INTERNAL_ERROR, NULL);
		return;
	}
	/* it holds the credential: by reference, wiped when libevent lets it go */
	if (evbuffer_add_reference(bufferevent_get_output(m->mi_ub), out, n, wipe_free,
	    NULL) != 0) {
		wipe_free(out, n, NULL);
		refuse(m, REASON_INTERNAL_ERROR, NULL);
		return;
	}
	if (!count(m, n, true)) {
		refuse(m, REASON_LIMIT_BYTES, NULL);
		return;
	}
	http_body_framer_init(&m->mi_req_body, m->mi_req.body == HTTP_BODY_CHUNKED ? HTTP_RESP_CHUNKED :
	    m->mi_req.body == HTTP_BODY_LENGTH ? HTTP_RESP_LENGTH : HTTP_RESP_NONE,
	    m->mi_req.content_length);
	m->mi_req_done = m->mi_req_body.done;
	m->mi_st = M_EXCHANGE;
	bufferevent_enable(m->mi_ub, EV_READ);
	process(m);
}

/* Does the placeholder appear in a header that is not a stripped credential header, or in
 * the target? Then it would reach the origin as it is: refuse. */
static bool
placeholder_leaks(const struct mitm *m)
{
	size_t pl;

	if (m->mi_o.placeholder == NULL || (pl = strlen(m->mi_o.placeholder)) == 0)
		return false;
	if (memmem(m->mi_req.target, m->mi_req.target_len, m->mi_o.placeholder, pl) != NULL)
		return true;
	for (size_t i = 0; i < m->mi_req.nheaders; i++) {
		const struct http_header *h = &m->mi_req.headers[i];
		if (connection_strips_header(m->mi_o.conn, h->name, h->name_len))
			continue;
		if (memmem(h->value, h->value_len, m->mi_o.placeholder, pl) != NULL)
			return true;
	}
	return false;
}

static void
start_request(struct mitm *m)
{
	struct rectpl_val v[RECTPL_SLOTS_MAX];
	char path[EGRESS_LOG_TARGET_MAX + 1], buf[EGRESS_LOG_RECORD_MAX];
	size_t len, n;
	enum reason r;

	if (m->mi_req.host.kind != m->mi_o.host.kind || strcmp(m->mi_req.host.name, m->mi_o.host.name) != 0 ||
	    m->mi_req.port != m->mi_o.port) {
		refuse(m, REASON_INNER_HOST_MISMATCH, NULL);
		return;
	}
	if (m->mi_req.upgrade) {
		refuse(m, REASON_UPGRADE_REFUSED, NULL);
		return;
	}
	r = connection_request_allowed(m->mi_o.conn, http_method_str(m->mi_req.method), m->mi_req.path,
	    m->mi_req.path_len);
	if (r != REASON_ALLOWED) {
		refuse(m, r, NULL);
		return;
	}
	if (placeholder_leaks(m)) {
		refuse(m, REASON_CREDENTIAL_MISDIRECTED, NULL);
		return;
	}
	if (m->mi_up_failed) {
		refuse(m, REASON_ORIGIN_TLS_FAILED, m->mi_up_error);
		return;
	}
	if (!m->mi_up_ready) {
		m->mi_st = M_WAIT_UP;
		return;
	}
	/* The allow record is written before any byte of this request goes upstream. */
	n = record_vals(m, v, path);
	v[n++] = REC_STR("verdict", "allow");
	v[n++] = REC_STR("reason", reason_str(REASON_ALLOWED));
	m->mi_st = M_LOG;
	bufferevent_disable(m->mi_cb, EV_READ);
	if ((len = members(m, v, n, buf)) == 0 || dlog_append_raw(m->mi_o.dlog, "decision", buf,
	    len, false, false, logged, m, &m->mi_ticket) != 0) {
		log_warn("intercepted %s: allow record refused", m->mi_hop);
		m->mi_ticket = NULL;
		refuse(m, REASON_AUDIT_UNAVAILABLE, NULL);
		return;
	}
	m->mi_allow_open = true;
}

static void
read_head(struct mitm *m)
{
	struct evbuffer *in = bufferevent_get_input(m->mi_cb);
	size_t len = evbuffer_get_length(in);
	size_t look = len < EGRESS_REQUEST_HEAD_MAX + 1 ? len : EGRESS_REQUEST_HEAD_MAX + 1;
	enum reason why;
	enum http_parse pr;

	if (len == 0)
		return;
	pr = http_parse_origin_request((const char *)evbuffer_pullup(in, (ssize_t)look), look,
	    &m->mi_req, &why);
	if (pr == HTTP_PARSE_INCOMPLETE)
		return;
	if (pr == HTTP_PARSE_ERROR) {
		memset(&m->mi_req, 0, sizeof(m->mi_req));
		snprintf(m->mi_hop, sizeof(m->mi_hop), "%s.%u", m->mi_o.hop, ++m->mi_n);
		refuse(m, why, NULL);
		return;
	}
	/* Keep a copy the request can point into, and consume the head. */
	m->mi_head = malloc(m->mi_req.head_len);
	if (m->mi_head == NULL) {
		refuse(m, REASON_INTERNAL_ERROR, NULL);
		return;
	}
	evbuffer_remove(in, m->mi_head, m->mi_req.head_len);
	if (http_parse_origin_request(m->mi_head, m->mi_req.head_len, &m->mi_req, &why) != HTTP_PARSE_OK) {
		refuse(m, REASON_INTERNAL_ERROR, NULL);
		return;
	}
	snprintf(m->mi_hop, sizeof(m->mi_hop), "%s.%u", m->mi_o.hop, ++m->mi_n);
	start_request(m);
}

/* A 3xx with a Location: follow-able only where the grant allows (as for plain HTTP). */
static enum reason
check_redirect(struct mitm *m, const struct httpresp *r)
{
	struct redirect_target *t;
	const char *loc, *detail = NULL;
	size_t loclen;
	char tmp[EGRESS_LOCATION_MAX + 8];
	long li;
	enum reason rr;
	enum redirect_err e;

	if (!redirect_status_checked(r->status) || (li = httpresp_find(r, "location", 0)) < 0)
		return REASON_ALLOWED;
	if (httpresp_find(r, "location", 1) >= 0)
		return REASON_REDIRECT_INVALID;
	loc = r->headers[li].value;
	loclen = r->headers[li].value_len;
	/* Relative references stay on this origin (https, this host and port). */
	if (loclen > 0 && loc[0] != '/' && memchr(loc, ':', loclen) == NULL)
		return REASON_ALLOWED;
	if (loclen > 0 && loc[0] == '/' && (loclen == 1 || loc[1] != '/'))
		return REASON_ALLOWED;
	if (loclen >= 2 && loc[0] == '/' && loc[1] == '/') {
		/* scheme-relative: the scheme of this request, https */
		if (loclen + 6 >= sizeof(tmp))
			return REASON_REDIRECT_INVALID;
		memcpy(tmp, "https:", 6);
		memcpy(tmp + 6, loc, loclen);
		loc = tmp;
		loclen += 6;
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return REASON_INTERNAL_ERROR;
	e = redirect_resolve(loc, loclen, &m->mi_o.host, m->mi_o.port, m->mi_req.path, m->mi_req.path_len, t);
	if (e != REDIRECT_OK)
		rr = redirect_err_reason(e);
	else
		rr = redirect_authorize(m->mi_o.grant, t, &m->mi_o.grant->allow_address, m->mi_o.override,
		    &detail);
	free(t);
	return rr;
}

static void
read_response_head(struct mitm *m)
{
	struct evbuffer *in = bufferevent_get_input(m->mi_ub);
	size_t len = evbuffer_get_length(in);
	size_t look = len < EGRESS_RESPONSE_HEAD_MAX ? len : EGRESS_RESPONSE_HEAD_MAX;
	struct httpresp *r;
	char *out;
	size_t n;
	enum reason rr;
	uint64_t resp_len = 0;
	bool keep;

	if (len == 0)
		return;
	r = malloc(sizeof(*r));
	if (r == NULL) {
		refuse(m, REASON_INTERNAL_ERROR, NULL);
		return;
	}
	switch (httpresp_parse((const char *)evbuffer_pullup(in, (ssize_t)look), look, 0, r)) {
	case HTTPRESP_OK:
		break;
	case HTTPRESP_INCOMPLETE:
		free(r);
		if (m->mi_up_eof)
			refuse(m, REASON_UPSTREAM_RESET, NULL);
		return;
	case HTTPRESP_TOO_LARGE:
		free(r);
		refuse(m, REASON_RESPONSE_TOO_LARGE, NULL);
		return;
	case HTTPRESP_INVALID:
	default:
		free(r);
		refuse(m, REASON_BAD_RESPONSE, NULL);
		return;
	}
	if (r->status == 101 || r->status < 100) {
		free(r);
		refuse(m, REASON_BAD_RESPONSE, NULL);
		return;
	}
	rr = r->status >= 300 && r->status < 400 ? check_redirect(m, r) : REASON_ALLOWED;
	if (rr != REASON_ALLOWED) {
		free(r);
		refuse(m, rr, NULL);
		return;
	}
	keep = r->status < 200 || (!m->mi_req.conn_close && r->minor == 1 &&
	    !(httpresp_find(r, "connection", 0) >= 0 &&
	    httpresp_value_has_token(r->headers[httpresp_find(r, "connection", 0)].value,
	    r->headers[httpresp_find(r, "connection", 0)].value_len, "close")));
	if (r->status >= 200) {
		if (http_response_framing(r, m->mi_req.method == HTTP_HEAD, &m->mi_resp_kind,
		    &resp_len) != 0) {
			free(r);
			refuse(m, REASON_BAD_RESPONSE, NULL);
			return;
		}
		if (m->mi_resp_kind == HTTP_RESP_CLOSE)
			keep = false;
		http_body_framer_init(&m->mi_resp_body, m->mi_resp_kind, resp_len);
	}
	out = malloc(EGRESS_RESPONSE_HEAD_MAX + 512);
	n = out != NULL ? http_build_client_response(r, keep, out,
	    EGRESS_RESPONSE_HEAD_MAX + 512) : 0;
	if (n == 0) {
		free(out);
		free(r);
		refuse(m, REASON_INTERNAL_ERROR, NULL);
		return;
	}
	evbuffer_drain(in, r->head_len);
	bufferevent_write(m->mi_cb, out, n);
	free(out);
	count(m, n, false);
	if (r->status < 200) {
		free(r);
		return;                     /* an interim answer; the final one follows */
	}
	m->mi_status = r->status;
	m->mi_keep = keep;
	m->mi_resp_head_done = true;
	free(r);
}

/* The response is complete: close record, then the next request or the end. */
static void
exchange_done(struct mitm *m)
{
	record_close(m, REASON_ALLOWED);
	if (!m->mi_keep || !m->mi_req_done || m->mi_up_eof) {
		close_after_flush(m, m->mi_up_eof ? REASON_CLOSE_UPSTREAM : REASON_CLOSE_CLIENT);
		return;
	}
	reset_request(m);
	m->mi_st = M_REQ_HEAD;
	bufferevent_enable(m->mi_cb, EV_READ);
	process(m);
}

static void
process(struct mitm *m)
{
	int rc;

	switch (m->mi_st) {
	case M_HANDSHAKE:
	case M_LOG:
	case M_CLOSING:
		return;
	case M_WAIT_UP:
		if (m->mi_up_ready || m->mi_up_failed)
			start_request(m);
		return;
	case M_REQ_HEAD:
		read_head(m);
		return;
	case M_EXCHANGE:
		break;
	}
	if (!m->mi_req_done) {
		rc = move_body(m, m->mi_cb, m->mi_ub, &m->mi_req_body, true);
		if (rc < 0) {
			refuse(m, rc == -2 ? REASON_LIMIT_BYTES : REASON_BAD_FRAMING, NULL);
			return;
		}
		m->mi_req_done = rc == 1;
		if (!coalesce(m->mi_ub)) {
			refuse(m, REASON_INTERNAL_ERROR, NULL);
			return;
		}
		/* reading the client goes on only while its body does (no enable that the
		 * disable below takes back: each is a system call) */
		if (!m->mi_req_done)
			pace(m->mi_cb, m->mi_ub);
	}
	if (m->mi_req_done)
		bufferevent_disable(m->mi_cb, EV_READ);    /* the next request waits its turn */
	if (!m->mi_resp_head_done) {
		read_response_head(m);
		if (m->mi_st != M_EXCHANGE || !m->mi_resp_head_done)
			return;
	}
	rc = move_body(m, m->mi_ub, m->mi_cb, &m->mi_resp_body, false);
	if (rc == 0 && m->mi_resp_kind == HTTP_RESP_CLOSE && m->mi_up_eof)
		rc = 1;                     /* a body framed by the origin's close */
	if (rc < 0) {
		refuse(m, rc == -2 ? REASON_LIMIT_BYTES : REASON_BAD_RESPONSE, NULL);
		return;
	}
	if (!coalesce(m->mi_cb)) {
		refuse(m, REASON_INTERNAL_ERROR, NULL);
		return;
	}
	pace(m->mi_ub, m->mi_cb);
	if (rc == 1 && m->mi_req_done) {
		exchange_done(m);
		return;
	}
	if (rc == 0 && m->mi_up_eof) {
		/* the origin went away mid-response */
		record_close(m, REASON_UPSTREAM_RESET);
		end(m, REASON_UPSTREAM_RESET);
	}
}

/* ---- events ---- */

static void
on_read(struct bufferevent *bev, void *arg)
{
	struct mitm *m = arg;

	m->mi_last_us = mono_usec();
	process(m);
}

static void
on_write(struct bufferevent *bev, void *arg)
{
	struct mitm *m = arg;

	if (m->mi_st == M_CLOSING) {
		if (bev == m->mi_cb && evbuffer_get_length(bufferevent_get_output(m->mi_cb)) == 0)
			event_active(m->mi_closer, EV_TIMEOUT, 0);
		return;
	}
	process(m);
}

static const char *
ssl_err(struct bufferevent *bev, char *buf, size_t len)
{
	unsigned long e = bufferevent_get_openssl_error(bev);

	if (e == 0)
		snprintf(buf, len, "connection closed during the handshake");
	else
		ERR_error_string_n(e, buf, len);
	while (bufferevent_get_openssl_error(bev) != 0)
		;
	return buf;
}

static void
on_client_event(struct bufferevent *bev, short what, void *arg)
{
	struct mitm *m = arg;
	char eb[256];

	if (what & BEV_EVENT_CONNECTED) {
		m->mi_client_ready = true;
		m->mi_st = M_REQ_HEAD;
		m->mi_last_us = mono_usec();
		process(m);
		return;
	}
	if (!m->mi_client_ready) {
		/* The worker refused our leaf (does it trust the run CA?) or is not TLS. */
		log_info("intercepted %s: worker TLS handshake failed: %s", m->mi_o.hop,
		    ssl_err(bev, eb, sizeof(eb)));
		end(m, REASON_CLIENT_TLS_FAILED);
		return;
	}
	if (m->mi_allow_open)
		record_close(m, REASON_CLOSE_CLIENT);
	end(m, (what & BEV_EVENT_EOF) ? REASON_CLOSE_CLIENT : REASON_CLOSE_ERROR);
}

static void
on_up_event(struct bufferevent *bev, short what, void *arg)
{
	struct mitm *m = arg;
	char eb[256];

	if (what & BEV_EVENT_CONNECTED) {
		m->mi_up_ready = true;
		process(m);
		return;
	}
	if (!m->mi_up_ready) {
		SSL *ssl = bufferevent_openssl_get_ssl(bev);
		long vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;

		if (vr != X509_V_OK)
			snprintf(m->mi_up_error, sizeof(m->mi_up_error), "%s",
			    X509_verify_cert_error_string(vr));
		else
			snprintf(m->mi_up_error, sizeof(m->mi_up_error), "%s", ssl_err(bev, eb, sizeof(eb)));
		log_info("intercepted %s: TLS to the origin failed: %s", m->mi_o.hop, m->mi_up_error);
		m->mi_up_failed = true;
		bufferevent_disable(bev, EV_READ | EV_WRITE);
		process(m);
		return;
	}
	m->mi_up_eof = true;
	if (m->mi_st == M_EXCHANGE) {
		process(m);
		return;
	}
	if (m->mi_st == M_REQ_HEAD || m->mi_st == M_WAIT_UP) {
		/* Idle between requests and the origin closed: this tunnel cannot carry more
		 * (a new one gets a fresh, re-authorized connection). */
		end(m, REASON_CLOSE_UPSTREAM);
	}
}

static void
on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct mitm *m = arg;

	uint64_t now = mono_usec();

	if (m->mi_o.lifetime_ms > 0 && now - m->mi_start_us >= m->mi_o.lifetime_ms * 1000) {
		if (m->mi_allow_open)
			record_close(m, REASON_CLOSE_LIFETIME);
		end(m, REASON_CLOSE_LIFETIME);
		return;
	}
	if (m->mi_o.idle_ms > 0 && now - m->mi_last_us >= m->mi_o.idle_ms * 1000) {
		if (m->mi_allow_open)
			record_close(m, REASON_CLOSE_IDLE);
		end(m, REASON_CLOSE_IDLE);
	}
}

struct mitm *
mitm_start(int cfd, int ufd, const char *ok200, size_t n200, const struct mitm_opts *o,
    bool *took)
{
	struct mitm *m = calloc(1, sizeof(*m));
	SSL *cs = NULL, *us = NULL;
	ssize_t w;

	*took = false;
	if (m == NULL)
		return NULL;
	m->mi_o = *o;
	m->mi_o.server_ctx = NULL;
	m->mi_o.client_ctx = NULL;
	m->mi_o.conns = NULL;
	m->mi_o.record_base = NULL;
	m->mi_tpl = rectpl_new(o->record_base, rec_slots,
	    sizeof(rec_slots) / sizeof(rec_slots[0]));
	if (m->mi_tpl == NULL) {
		free(m);
		return NULL;
	}
	cs = SSL_new(o->server_ctx);
	us = SSL_new(o->client_ctx);
	if (cs == NULL || us == NULL)
		goto fail;
	/* The origin's name: SNI (names only) and the identity its certificate must prove. */
	if (o->host.kind == HOST_NAME) {
		char sni[sizeof(o->host.name)];   /* the SNI macro takes a non-const pointer */
		memcpy(sni, o->host.name, sizeof(sni));
		if (SSL_set_tlsext_host_name(us, sni) != 1 ||
		    SSL_set1_host(us, o->host.name) != 1)
			goto fail;
	} else if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(us), o->host.name) != 1) {
		goto fail;
	}
	/* Both sockets must not block the event loop (the session's are already). */
	if (evutil_make_socket_nonblocking(cfd) != 0 || evutil_make_socket_nonblocking(ufd) != 0)
		goto fail;
	/* Each side gets whole TLS records as they are ready (a request head, then its body):
	 * Nagle would hold the second one for the peer's delayed ACK, ~40 ms per request. */
	{
		int one = 1;
		(void)setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		(void)setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	/* Everything that may fail without the sockets first. */
	m->mi_idle = event_new(o->base, -1, EV_PERSIST, on_idle, m);
	m->mi_closer = evtimer_new(o->base, on_closer, m);
	if (m->mi_idle == NULL || m->mi_closer == NULL) {
		errno = ENOMEM;
		goto fail;
	}
	/* The 200 goes out in clear before TLS starts; a fresh socket takes 39 bytes. */
	do
		w = send(cfd, ok200, n200, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)n200) {
		errno = w < 0 ? errno : EAGAIN;
		if (w > 0) {
			/* part of the 200 is out: no HTTP answer can follow it */
			close(cfd);
			close(ufd);
			*took = true;
		}
		goto fail;
	}
	/* With BEV_OPT_CLOSE_ON_FREE the SSL is libevent's from the call on: it frees it
	 * itself when the call fails (2.1.12), and leaves the socket open (its BIO does not
	 * close it). */
	m->mi_cb = bufferevent_openssl_socket_new(o->base, cfd, cs, BUFFEREVENT_SSL_ACCEPTING,
	    BEV_OPT_CLOSE_ON_FREE);
	cs = NULL;
	if (m->mi_cb == NULL) {
		/* the 200 is out: from here the sockets are ours and closed on failure */
		SSL_free(us);
		close(cfd);
		close(ufd);
		event_free(m->mi_idle);
		event_free(m->mi_closer);
		rectpl_free(m->mi_tpl);
		free(m);
		*took = true;
		errno = ENOMEM;
		return NULL;
	}
	m->mi_ub = bufferevent_openssl_socket_new(o->base, ufd, us, BUFFEREVENT_SSL_CONNECTING,
	    BEV_OPT_CLOSE_ON_FREE);
	us = NULL;                          /* libevent's, as above */
	if (m->mi_ub == NULL) {
		close(ufd);
		bufferevent_free(m->mi_cb);     /* closes cfd */
		event_free(m->mi_idle);
		event_free(m->mi_closer);
		rectpl_free(m->mi_tpl);
		free(m);
		*took = true;
		errno = ENOMEM;
		return NULL;
	}
	SSL_CTX_up_ref(o->server_ctx);
	m->mi_o.server_ctx = o->server_ctx;
	SSL_CTX_up_ref(o->client_ctx);
	m->mi_o.client_ctx = o->client_ctx;
	m->mi_o.conns = connections_ref(o->conns);
	m->mi_st = M_HANDSHAKE;
	m->mi_last_us = mono_usec();
	/* Origins often end TLS without close_notify; the framing says where bodies end. */
	bufferevent_openssl_set_allow_dirty_shutdown(m->mi_cb, 1);
	bufferevent_openssl_set_allow_dirty_shutdown(m->mi_ub, 1);
	bufferevent_setcb(m->mi_cb, on_read, on_write, on_client_event, m);
	bufferevent_setcb(m->mi_ub, on_read, on_write, on_up_event, m);
	/* write callbacks when the queue falls to half the high-water mark (backpressure) */
	bufferevent_setwatermark(m->mi_cb, EV_WRITE, MITM_HIGH_WATER / 2, 0);
	bufferevent_setwatermark(m->mi_ub, EV_WRITE, MITM_HIGH_WATER / 2, 0);
	bufferevent_enable(m->mi_cb, EV_READ | EV_WRITE);
	bufferevent_enable(m->mi_ub, EV_READ | EV_WRITE);
	m->mi_start_us = m->mi_last_us;
	if (o->idle_ms > 0 || o->lifetime_ms > 0) {
		uint64_t lim = o->idle_ms > 0 && (o->lifetime_ms == 0 || o->idle_ms < o->lifetime_ms) ?
		    o->idle_ms : o->lifetime_ms;
		uint64_t step = lim / 4 > 0 ? lim / 4 : 1;
		struct timeval tv = { (time_t)(step / 1000), (suseconds_t)(step % 1000) * 1000 };
		event_add(m->mi_idle, &tv);
	}
	return m;
fail:
	SSL_free(cs);
	SSL_free(us);
	if (m->mi_idle != NULL)
		event_free(m->mi_idle);
	if (m->mi_closer != NULL)
		event_free(m->mi_closer);
	rectpl_free(m->mi_tpl);
	free(m);
	return NULL;
}
