/*
 * http.c - strict request-head parser, forwarded-head builder, response-head check and
 * chunked framer. See http.h. Pure functions; every input byte is hostile.
 */
#define _GNU_SOURCE
#include "egressd/http.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "egressd/httpresp.h"

static const struct {
	const char *name;
	enum http_method m;
} http_methods[] = {
	{ "CONNECT", HTTP_CONNECT }, { "GET", HTTP_GET }, { "HEAD", HTTP_HEAD },
	{ "POST", HTTP_POST }, { "PUT", HTTP_PUT }, { "PATCH", HTTP_PATCH },
	{ "DELETE", HTTP_DELETE }, { "OPTIONS", HTTP_OPTIONS },
};

const char *
http_method_str(enum http_method m)
{
	for (size_t i = 0; i < EGRESS_NELEM(http_methods); i++)
		if (http_methods[i].m == m)
			return http_methods[i].name;
	return "?";
}

/* RFC 9110 tchar. */
static bool
is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-vchar, SP, HTAB, obs-text. */
static bool
is_field_char(unsigned char c)
{
	return c == ' ' || c == '\t' || (c >= 0x21 && c <= 0x7e) || c >= 0x80;
}

static bool
ieq(const char *a, size_t alen, const char *lit)
{
	size_t n = strlen(lit);

	return alen == n && strncasecmp(a, lit, n) == 0;
}

/*
 * Find the end of the line starting at buf[off]: returns the index of its CR (followed by
 * LF) or -1 when incomplete; -2 on a bare CR or bare LF (strict: CRLF only).
 */
static long
line_end(const char *buf, size_t len, size_t off)
{
	for (size_t i = off; i < len; i++) {
		if (buf[i] == '\n')
			return -2;                      /* LF without CR */
		if (buf[i] == '\r') {
			if (i + 1 >= len)
				return -1;
			if (buf[i + 1] != '\n')
				return -2;              /* bare CR */
			return (long)i;
		}
	}
	return -1;
}

/* Iterate comma-separated list elements of a header value (RFC 9110 #rule, OWS around). */
static bool
list_next(const char **p, const char *end, const char **tok, size_t *toklen)
{
	const char *s = *p;

	while (s < end && (*s == ' ' || *s == '\t' || *s == ','))
		s++;
	if (s >= end)
		return false;
	const char *t = s;
	while (s < end && *s != ',')
		s++;
	const char *e = s;
	while (e > t && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*tok = t;
	*toklen = (size_t)(e - t);
	*p = s;
	return true;
}

static enum reason
host_reason(enum host_err e)
{
	switch (e) {
	case HOST_ERR_PORT:
	case HOST_ERR_PORT_MISSING:
	case HOST_ERR_PORT_FORBIDDEN:
		return REASON_INVALID_PORT;
	case HOST_OK:
	case HOST_ERR_EMPTY:
	case HOST_ERR_TOO_LONG:
	case HOST_ERR_LABEL_TOO_LONG:
	case HOST_ERR_EMPTY_LABEL:
	case HOST_ERR_USERINFO:
	case HOST_ERR_PERCENT:
	case HOST_ERR_BACKSLASH:
	case HOST_ERR_CONTROL:
	case HOST_ERR_SPACE:
	case HOST_ERR_WILDCARD:
	case HOST_ERR_BAD_CHAR:
	case HOST_ERR_IDNA:
	case HOST_ERR_NUMERIC:
	case HOST_ERR_IPV6:
	case HOST_ERR_HYPHEN:
		break;
	}
	return REASON_INVALID_HOST;
}

/* Parse the request line [buf, buf+n). */
static enum reason
parse_request_line(const char *buf, size_t n, struct http_request *req, bool origin)
{
	const char *sp1 = memchr(buf, ' ', n);
	if (sp1 == NULL)
		return REASON_MALFORMED_REQUEST;
	size_t mlen = (size_t)(sp1 - buf);
	if (mlen == 0)
		return REASON_MALFORMED_REQUEST;
	for (size_t i = 0; i < mlen; i++)
		if (!is_tchar((unsigned char)buf[i]))
			return REASON_MALFORMED_REQUEST;
	bool known = false;
	for (size_t i = 0; i < EGRESS_NELEM(http_methods); i++) {
		/* case-sensitive: methods are uppercase tokens (RFC 9110 9.1) */
		if (strlen(http_methods[i].name) == mlen &&
		    memcmp(http_methods[i].name, buf, mlen) == 0) {
			req->method = http_methods[i].m;
			known = true;
		}
	}
	if (!known)
		return REASON_BAD_METHOD;

	const char *t = sp1 + 1;
	const char *end = buf + n;
	const char *sp2 = memchr(t, ' ', (size_t)(end - t));
	if (sp2 == NULL || sp2 == t)
		return REASON_MALFORMED_REQUEST;
	req->target = t;
	req->target_len = (size_t)(sp2 - t);
	for (size_t i = 0; i < req->target_len; i++) {
		unsigned char c = (unsigned char)t[i];
		if (c <= 0x20 || c >= 0x7f)
			return REASON_MALFORMED_REQUEST;
	}
	const char *v = sp2 + 1;
	size_t vlen = (size_t)(end - v);
	if (vlen != 8 || memcmp(v, "HTTP/1.", 7) != 0 || (v[7] != '0' && v[7] != '1'))
		return REASON_MALFORMED_REQUEST;
	req->minor = v[7] - '0';

	enum host_err he;
	if (origin) {
		/* Inside an intercepted tunnel: origin-form only; the Host header names the
		 * destination (checked after the headers). No CONNECT, no '*', no absolute-form. */
		if (req->method == HTTP_CONNECT)
			return REASON_BAD_METHOD;
		if (req->target[0] != '/' || memchr(req->target, '#', req->target_len) != NULL)
			return REASON_MALFORMED_REQUEST;
		req->scheme = SCHEME_HTTPS;
		req->path = req->target;
		req->path_len = req->target_len;
		return REASON_ALLOWED;
	}
	if (req->method == HTTP_CONNECT) {
		/* authority-form only: "host:port" */
		if (req->target[0] == '/' || req->target[0] == '*' ||
		    memmem(req->target, req->target_len, "://", 3) != NULL)
			return REASON_MALFORMED_REQUEST;
		he = host_parse(req->target, req->target_len, HOST_REQUIRE_PORT, &req->host);
		if (he != HOST_OK)
			return host_reason(he);
		req->scheme = SCHEME_HTTPS;
		req->port = req->host.port;
		req->path = "";
		req->path_len = 0;
		return REASON_ALLOWED;
	}
	if (req->target[0] == '/' || (req->target_len == 1 && req->target[0] == '*'))
		return REASON_ORIGIN_FORM;
	if (req->target_len >= 8 && strncasecmp(req->target, "https://", 8) == 0)
		return REASON_HTTPS_ABSOLUTE_FORM;
	if (req->target_len < 7 || strncasecmp(req->target, "http://", 7) != 0)
		return REASON_MALFORMED_REQUEST;
	const char *a = req->target + 7;
	const char *tend = req->target + req->target_len;
	const char *ae = a;
	while (ae < tend && *ae != '/' && *ae != '?' && *ae != '#')
		ae++;
	if (memchr(a, '#', (size_t)(tend - a)) != NULL)
		return REASON_MALFORMED_REQUEST;    /* fragments never appear in a request */
	he = host_parse(a, (size_t)(ae - a), 0, &req->host);
	if (he != HOST_OK)
		return host_reason(he);
	req->scheme = SCHEME_HTTP;
	req->port = req->host.port != 0 ? req->host.port : 80;
	req->path = ae;
	req->path_len = (size_t)(tend - ae);
	return REASON_ALLOWED;
}

/* Apply what one header means for framing and connection handling. */
static enum reason
note_header(struct http_request *req, const struct http_header *h, int *ncl, int *nte,
    int *nhost, bool *keepalive)
{
	const char *p, *tok;
	size_t toklen;

	if (ieq(h->name, h->name_len, "content-length")) {
		char num[24];
		long long v;
		const char *es;

		if (++*ncl > 1)
			return REASON_BAD_FRAMING;   /* duplicate, even if equal */
		if (h->value_len == 0 || h->value_len >= sizeof(num))
			return REASON_BAD_FRAMING;
		for (size_t i = 0; i < h->value_len; i++)
			if (h->value[i] < '0' || h->value[i] > '9')
				return REASON_BAD_FRAMING;
		memcpy(num, h->value, h->value_len);
		num[h->value_len] = '\0';
		if (num_parse(num, 0, INT64_MAX, &v, &es) != 0)
			return REASON_BAD_FRAMING;
		req->content_length = (uint64_t)v;
		return REASON_ALLOWED;
	}
	if (ieq(h->name, h->name_len, "transfer-encoding")) {
		bool last_chunked = false, any = false;

		(*nte)++;
		p = h->value;
		while (list_next(&p, h->value + h->value_len, &tok, &toklen)) {
			if (last_chunked)
				return REASON_BAD_FRAMING;   /* chunked must be last, once */
			any = true;
			last_chunked = ieq(tok, toklen, "chunked");
		}
		if (!any)
			return REASON_BAD_FRAMING;
		/* Several TE lines form one list: only the final line may end the list. */
		if (req->body == HTTP_BODY_CHUNKED)
			return REASON_BAD_FRAMING;
		req->body = last_chunked ? HTTP_BODY_CHUNKED : HTTP_BODY_NONE;
		if (!last_chunked)
			return REASON_BAD_FRAMING;
		return REASON_ALLOWED;
	}
	if (ieq(h->name, h->name_len, "host")) {
		if (++*nhost > 1)
			return REASON_MALFORMED_REQUEST;
		return REASON_ALLOWED;
	}
	if (ieq(h->name, h->name_len, "upgrade")) {
		req->upgrade = true;
		return REASON_ALLOWED;
	}
	if (ieq(h->name, h->name_len, "connection") ||
	    ieq(h->name, h->name_len, "proxy-connection")) {
		p = h->value;
		while (list_next(&p, h->value + h->value_len, &tok, &toklen)) {
			for (size_t i = 0; i < toklen; i++)
				if (!is_tchar((unsigned char)tok[i]))
					return REASON_MALFORMED_REQUEST;
			if (ieq(tok, toklen, "close"))
				req->conn_close = true;
			else if (ieq(tok, toklen, "keep-alive"))
				*keepalive = true;
			else if (ieq(tok, toklen, "upgrade"))
				req->upgrade = true;
			/* Connection naming a framing header would make egressd strip it while
			 * still forwarding the body: the origin would frame differently. */
			else if (ieq(tok, toklen, "content-length") ||
			    ieq(tok, toklen, "transfer-encoding") || ieq(tok, toklen, "host"))
				return REASON_BAD_FRAMING;
		}
	}
	return REASON_ALLOWED;
}

/* Only pointers into the head move (path may point at a constant "" instead). */
static const char *
rebase_ptr(const char *p, const char *old_base, size_t len, const char *new_base)
{
	uintptr_t u = (uintptr_t)p, b = (uintptr_t)old_base;

	if (p == NULL || u < b || u - b > len)
		return p;
	return new_base + (u - b);
}

void
http_request_rebase(struct http_request *req, const char *old_base, const char *new_base)
{
	size_t n = req->head_len;

	req->target = rebase_ptr(req->target, old_base, n, new_base);
	req->path = rebase_ptr(req->path, old_base, n, new_base);
	for (size_t i = 0; i < req->nheaders; i++) {
		req->headers[i].name = rebase_ptr(req->headers[i].name, old_base, n, new_base);
		req->headers[i].value = rebase_ptr(req->headers[i].value, old_base, n, new_base);
	}
}

static enum http_parse
parse_request(const char *buf, size_t len, struct http_request *req, enum reason *why,
    bool origin)
{
	size_t off = 0;
	long e;
	int ncl = 0, nte = 0, nhost = 0;
	bool keepalive = false;
	enum reason r;

	/* Everything but the header slots: only the first nheaders of them are ever read
	 * (3.2 KiB fewer zeroed per request). */
	memset(req, 0, offsetof(struct http_request, headers));
	memset(&req->nheaders, 0, sizeof(*req) - offsetof(struct http_request, nheaders));
	*why = REASON_MALFORMED_REQUEST;

	/* Request line. */
	e = line_end(buf, len, 0);
	if (e == -2)
		return HTTP_PARSE_ERROR;
	if (e == -1) {
		if (len > EGRESS_REQUEST_LINE_MAX) {
			*why = REASON_HEAD_TOO_LARGE;
			return HTTP_PARSE_ERROR;
		}
		/* Fail early on an obviously wrong method once a space has arrived. */
		const char *sp = memchr(buf, ' ', len);
		if (sp != NULL) {
			bool tokok = sp != buf;
			for (const char *q = buf; q < sp; q++)
				tokok = tokok && is_tchar((unsigned char)*q);
			if (!tokok)
				return HTTP_PARSE_ERROR;
		}
		return HTTP_PARSE_INCOMPLETE;
	}
	if ((size_t)e > EGRESS_REQUEST_LINE_MAX) {
		*why = REASON_HEAD_TOO_LARGE;
		return HTTP_PARSE_ERROR;
	}
	r = parse_request_line(buf, (size_t)e, req, origin);
	if (r != REASON_ALLOWED) {
		*why = r;
		return HTTP_PARSE_ERROR;
	}
	off = (size_t)e + 2;

	/* Header lines until the empty line. */
	for (;;) {
		e = line_end(buf, len, off);
		if (e == -2)
			return HTTP_PARSE_ERROR;
		if (e == -1) {
			if (len - off > EGRESS_HEADER_LINE_MAX || len > EGRESS_REQUEST_HEAD_MAX) {
				*why = REASON_HEAD_TOO_LARGE;
				return HTTP_PARSE_ERROR;
			}
			if (off < len && (buf[off] == ' ' || buf[off] == '\t'))
				return HTTP_PARSE_ERROR;        /* obs-fold */
			return HTTP_PARSE_INCOMPLETE;
		}
		size_t ln = (size_t)e - off;
		if ((size_t)e + 2 > EGRESS_REQUEST_HEAD_MAX || ln > EGRESS_HEADER_LINE_MAX) {
			*why = REASON_HEAD_TOO_LARGE;
			return HTTP_PARSE_ERROR;
		}
		if (ln == 0) {
			off = (size_t)e + 2;
			break;
		}
		const char *l = buf + off;
		if (l[0] == ' ' || l[0] == '\t')
			return HTTP_PARSE_ERROR;                /* obs-fold */
		const char *colon = memchr(l, ':', ln);
		if (colon == NULL || colon == l)
			return HTTP_PARSE_ERROR;
		for (const char *q = l; q < colon; q++)
			if (!is_tchar((unsigned char)*q))
				return HTTP_PARSE_ERROR;        /* includes space before ':' */
		const char *v = colon + 1, *ve = l + ln;
		for (const char *q = v; q < ve; q++)
			if (!is_field_char((unsigned char)*q))
				return HTTP_PARSE_ERROR;        /* NUL, CTLs */
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		if (req->nheaders >= EGRESS_HEADER_COUNT_MAX) {
			*why = REASON_HEAD_TOO_LARGE;
			return HTTP_PARSE_ERROR;
		}
		struct http_header *h = &req->headers[req->nheaders++];
		h->name = l;
		h->name_len = (size_t)(colon - l);
		h->value = v;
		h->value_len = (size_t)(ve - v);
		r = note_header(req, h, &ncl, &nte, &nhost, &keepalive);
		if (r != REASON_ALLOWED) {
			*why = r;
			return HTTP_PARSE_ERROR;
		}
		off = (size_t)e + 2;
	}

	if (ncl > 0 && nte > 0) {
		*why = REASON_BAD_FRAMING;
		return HTTP_PARSE_ERROR;
	}
	if (nte > 0 && req->minor == 0) {
		*why = REASON_BAD_FRAMING;        /* RFC 9112 6.1: TE in 1.0 is faulty framing */
		return HTTP_PARSE_ERROR;
	}
	if (ncl > 0 && req->body == HTTP_BODY_NONE)
		req->body = HTTP_BODY_LENGTH;
	if (req->method == HTTP_CONNECT &&
	    (req->body == HTTP_BODY_CHUNKED ||
	     (req->body == HTTP_BODY_LENGTH && req->content_length > 0))) {
		*why = REASON_BAD_FRAMING;        /* a CONNECT has no body */
		return HTTP_PARSE_ERROR;
	}
	/* RFC 9112 3.2: an HTTP/1.1 request without Host is answered 400 (after
	 * the framing checks: a smuggling attempt keeps its own reason). CONNECT names its
	 * authority in the target (and common clients omit Host there): exempt. */
	if (req->minor == 1 && nhost == 0 && req->method != HTTP_CONNECT) {
		*why = REASON_MISSING_HOST;
		return HTTP_PARSE_ERROR;
	}
	if (req->minor == 0 && !keepalive)
		req->conn_close = true;
	if (origin) {
		/* Exactly one Host (RFC 9112 3.2), a canonical host[:port]. */
		const struct http_header *hh = NULL;
		enum host_err he;

		for (size_t i = 0; i < req->nheaders; i++)
			if (ieq(req->headers[i].name, req->headers[i].name_len, "host"))
				hh = &req->headers[i];
		if (hh == NULL || hh->value_len == 0) {
			*why = REASON_INVALID_HOST;
			return HTTP_PARSE_ERROR;
		}
		he = host_parse(hh->value, hh->value_len, 0, &req->host);
		if (he != HOST_OK) {
			*why = host_reason(he);
			return HTTP_PARSE_ERROR;
		}
		req->port = req->host.port != 0 ? req->host.port : 443;
	}
	req->head_len = off;
	*why = REASON_ALLOWED;
	return HTTP_PARSE_OK;
}

enum http_parse
http_parse_request(const char *buf, size_t len, struct http_request *req, enum reason *why)
{
	return parse_request(buf, len, req, why, false);
}

enum http_parse
http_parse_origin_request(const char *buf, size_t len, struct http_request *req,
    enum reason *why)
{
	return parse_request(buf, len, req, why, true);
}

static const char *const hop_headers[] = {
	"connection", "keep-alive", "te", "trailer", "upgrade", "proxy-authorization",
	"proxy-connection", "proxy-authenticate",
};

bool
http_is_hop_header(const char *name, size_t len)
{
	for (size_t i = 0; i < EGRESS_NELEM(hop_headers); i++)
		if (ieq(name, len, hop_headers[i]))
			return true;
	return false;
}

/* Is header name listed in any Connection (or Proxy-Connection) header of hs? */
static bool
named_by_connection(const struct http_header *hs, size_t n, const char *name, size_t len)
{
	const char *p, *tok;
	size_t toklen;

	for (size_t i = 0; i < n; i++) {
		if (!ieq(hs[i].name, hs[i].name_len, "connection") &&
		    !ieq(hs[i].name, hs[i].name_len, "proxy-connection"))
			continue;
		p = hs[i].value;
		while (list_next(&p, hs[i].value + hs[i].value_len, &tok, &toklen))
			if (toklen == len && strncasecmp(tok, name, len) == 0)
				return true;
	}
	return false;
}

/* Bounded appender. */
struct out {
	char *p;
	size_t len, cap;
	bool overflow;
};

static void
out_add(struct out *o, const char *s, size_t n)
{
	if (o->overflow || n > o->cap - o->len) {
		o->overflow = true;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

static void
out_str(struct out *o, const char *s)
{
	out_add(o, s, strlen(s));
}

/* Shared by the origin-form and the proxy (absolute-form) builders. */
#define FWD_VIA 0x100          /* internal: add "Via: 1.x egressd" (forwarding builder) */

static size_t
build_head(const struct http_request *req, bool absolute, const struct addr *pinned,
    const char *proxy_auth, int flags, bool *stripped, char *out, size_t outlen)
{
	struct out o = { out, 0, outlen, false };
	char hp[EGRESS_HOSTPORT_MAX + 1];
	struct host h = req->host;
	bool dropped = false;

	/* Host names the canonical destination; the default port is left out. */
	if (h.port == 80)
		h.port = 0;
	host_to_str(&h, hp, sizeof(hp));
	out_str(&o, http_method_str(req->method));
	out_str(&o, " ");
	if (absolute && pinned != NULL) {
		struct host lit = { .kind = pinned->family == AF_INET6 ? HOST_IPV6 : HOST_IPV4,
		    .addr = *pinned, .port = h.port };
		char hl[EGRESS_HOSTPORT_MAX + 1];
		addr_to_str(pinned, lit.name, sizeof(lit.name));
		out_str(&o, "http://");
		out_str(&o, host_to_str(&lit, hl, sizeof(hl)));
	} else if (absolute) {
		out_str(&o, "http://");
		out_str(&o, hp);
	}
	if (req->path_len == 0 || req->path[0] != '/')
		out_str(&o, "/");           /* "http://h" and "http://h?q" */
	out_add(&o, req->path, req->path_len);
	out_str(&o, " HTTP/1.1\r\nHost: ");
	out_str(&o, hp);
	out_str(&o, "\r\n");
	if (proxy_auth != NULL) {
		out_str(&o, "Proxy-Authorization: ");
		out_str(&o, proxy_auth);
		out_str(&o, "\r\n");
	}
	for (size_t i = 0; i < req->nheaders; i++) {
		const struct http_header *x = &req->headers[i];
		if (ieq(x->name, x->name_len, "host") || http_is_hop_header(x->name, x->name_len) ||
		    named_by_connection(req->headers, req->nheaders, x->name, x->name_len))
			continue;
		/* Credentials stay with their owner (DESIGN rule 6). */
		if ((flags & HTTP_FWD_STRIP_CREDENTIALS) &&
		    (ieq(x->name, x->name_len, "authorization") ||
		    ieq(x->name, x->name_len, "cookie"))) {
			dropped = true;
			continue;
		}
		out_add(&o, x->name, x->name_len);
		out_str(&o, ": ");
		out_add(&o, x->value, x->value_len);
		out_str(&o, "\r\n");
	}
	/* RFC 9110 7.6.3: a proxy appends itself to Via. */
	if (flags & FWD_VIA)
		out_str(&o, req->minor == 0 ? "Via: 1.0 egressd\r\n" : "Via: 1.1 egressd\r\n");
	out_str(&o, (flags & HTTP_FWD_KEEPALIVE) ? "\r\n" : "Connection: close\r\n\r\n");
	if (stripped != NULL)
		*stripped = !o.overflow && dropped;
	return o.overflow ? 0 : o.len;
}

size_t
http_build_request_head(const struct http_request *req, int flags, const struct addr *pinned,
    const char *proxy_auth, bool *stripped, char *out, size_t outlen)
{
	bool proxy_form = (flags & HTTP_FWD_PROXY_FORM) != 0;

	return build_head(req, proxy_form, proxy_form ? pinned : NULL,
	    proxy_form ? proxy_auth : NULL,
	    (flags & (HTTP_FWD_STRIP_CREDENTIALS | HTTP_FWD_KEEPALIVE)) | FWD_VIA,
	    stripped, out, outlen);
}

size_t
http_build_forward_head(const struct http_request *req, char *out, size_t outlen)
{
	return build_head(req, false, NULL, NULL, 0, NULL, out, outlen);
}

size_t
http_build_proxy_head(const struct http_request *req, const struct addr *pinned,
    const char *proxy_auth, char *out, size_t outlen)
{
	return build_head(req, true, pinned, proxy_auth, 0, NULL, out, outlen);
}

/* Is name listed in a Connection header of a parsed response? */
static bool
resp_named_by_connection(const struct httpresp *r, const char *name, size_t len)
{
	const char *p, *tok;
	size_t toklen;

	for (size_t i = 0; i < r->nheaders; i++) {
		const struct httpresp_header *h = &r->headers[i];
		if (!ieq(h->name, h->name_len, "connection") &&
		    !ieq(h->name, h->name_len, "proxy-connection"))
			continue;
		p = h->value;
		while (list_next(&p, h->value + h->value_len, &tok, &toklen))
			if (toklen == len && strncasecmp(tok, name, len) == 0)
				return true;
	}
	return false;
}

size_t
http_build_client_response(const struct httpresp *r, bool keep_alive, char *out,
    size_t outlen)
{
	struct out o = { out, 0, outlen, false };
	char sl[32];

	snprintf(sl, sizeof(sl), "HTTP/1.1 %03d ", r->status);
	out_str(&o, sl);
	out_add(&o, r->phrase, r->phrase_len);
	out_str(&o, "\r\n");
	for (size_t i = 0; i < r->nheaders; i++) {
		const struct httpresp_header *h = &r->headers[i];
		bool framing = ieq(h->name, h->name_len, "content-length") ||
		    ieq(h->name, h->name_len, "transfer-encoding");
		if (!framing && (http_is_hop_header(h->name, h->name_len) ||
		    resp_named_by_connection(r, h->name, h->name_len)))
			continue;
		out_add(&o, h->name, h->name_len);
		out_str(&o, ": ");
		out_add(&o, h->value, h->value_len);
		out_str(&o, "\r\n");
	}
	out_str(&o, r->minor == 0 ? "Via: 1.0 egressd\r\n" : "Via: 1.1 egressd\r\n");
	if (r->status >= 200 && !keep_alive)
		out_str(&o, "Connection: close\r\n");
	out_str(&o, "\r\n");
	return o.overflow ? 0 : o.len;
}

int
http_response_framing(const struct httpresp *r, bool head_request,
    enum http_resp_body *kind, uint64_t *len)
{
	long te = httpresp_find(r, "transfer-encoding", 0);
	long cl = httpresp_find(r, "content-length", 0);

	*kind = HTTP_RESP_CLOSE;
	*len = 0;
	if (te >= 0 && cl >= 0)
		return -1;
	if (head_request || r->status < 200 || r->status == 204 || r->status == 304) {
		*kind = HTTP_RESP_NONE;
		return 0;
	}
	if (te >= 0) {
		const struct httpresp_header *h = &r->headers[te];
		bool chunked = ieq(h->value, h->value_len, "chunked") &&
		    httpresp_find(r, "transfer-encoding", 1) < 0;
		if (chunked) {
			*kind = HTTP_RESP_CHUNKED;
			return 0;
		}
		for (size_t i = 0; (te = httpresp_find(r, "transfer-encoding", i)) >= 0; i++)
			if (httpresp_value_has_token(r->headers[te].value, r->headers[te].value_len,
			    "chunked"))
				return -1;
		return 0;       /* other codings only: until the origin closes */
	}
	if (cl >= 0) {
		uint64_t v = 0;
		for (size_t i = 0; (cl = httpresp_find(r, "content-length", i)) >= 0; i++) {
			const struct httpresp_header *h = &r->headers[cl];
			uint64_t x = 0;
			if (h->value_len == 0 || h->value_len > 18)
				return -1;
			for (size_t k = 0; k < h->value_len; k++) {
				if (h->value[k] < '0' || h->value[k] > '9')
					return -1;
				x = x * 10 + (uint64_t)(h->value[k] - '0');
			}
			if (i > 0 && x != v)
				return -1;
			v = x;
		}
		*kind = v == 0 ? HTTP_RESP_NONE : HTTP_RESP_LENGTH;
		*len = v;
	}
	return 0;
}

/* Chunked framer states. */
enum { CH_SIZE, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_TRAILER_LF,
	CH_DONE };

void
http_chunked_init(struct http_chunked *c)
{
	memset(c, 0, sizeof(*c));
	c->state = CH_SIZE;
}

long
http_chunked_feed(struct http_chunked *c, const char *buf, size_t len, bool *done)
{
	size_t i = 0;

	*done = false;
	if (len > (size_t)INT32_MAX)
		len = INT32_MAX;
	while (i < len) {
		char ch = buf[i];
		switch (c->state) {
		case CH_SIZE:
			if (++c->line > EGRESS_CHUNK_LINE_MAX)
				return -1;
			if (ch == '\r') {
				if (!c->digits)
					return -1;
				c->state = CH_SIZE_LF;
			} else if (c->ext) {
				if (ch == '\n' || (unsigned char)ch < 0x20 || ch == 0x7f) {
					if (ch != '\t')
						return -1;
				}
			} else if (ch == ';' || ch == ' ' || ch == '\t') {
				if (!c->digits)
					return -1;
				c->ext = true;
			} else {
				int v = hex_digit(ch);
				if (v < 0 || c->remaining > (UINT64_MAX >> 4))
					return -1;
				c->remaining = (c->remaining << 4) | (uint64_t)v;
				c->digits = true;
			}
			i++;
			break;
		case CH_SIZE_LF:
			if (ch != '\n')
				return -1;
			i++;
			c->line = 0;
			c->ext = false;
			c->digits = false;
			c->state = c->remaining == 0 ? CH_TRAILER : CH_DATA;
			break;
		case CH_DATA: {
			uint64_t take = len - i;
			if (take > c->remaining)
				take = c->remaining;
			i += (size_t)take;
			c->remaining -= take;
			if (c->remaining == 0)
				c->state = CH_DATA_CR;
			break;
		}
		case CH_DATA_CR:
			if (ch != '\r')
				return -1;
			i++;
			c->state = CH_DATA_LF;
			break;
		case CH_DATA_LF:
			if (ch != '\n')
				return -1;
			i++;
			c->state = CH_SIZE;
			break;
		case CH_TRAILER:
			if (++c->trailer > EGRESS_REQUEST_HEAD_MAX)
				return -1;
			if (ch == '\r') {
				/* a trailer line is "name: value": anything else (a request line
				 * smuggled after the last chunk) is malformed framing */
				if (c->line > 0 && !c->tr_value)
					return -1;
				c->state = CH_TRAILER_LF;
			} else if (!c->tr_value) {
				if (ch == ':' && c->line > 0)
					c->tr_value = true;
				else if (!is_tchar((unsigned char)ch))
					return -1;
				c->line++;
			} else {
				if (ch == '\n' || !is_field_char((unsigned char)ch))
					return -1;
				c->line++;
			}
			i++;
			break;
		case CH_TRAILER_LF:
			if (ch != '\n')
				return -1;
			i++;
			if (c->line == 0) {
				c->state = CH_DONE;
				*done = true;
				return (long)i;
			}
			c->line = 0;
			c->tr_value = false;
			c->state = CH_TRAILER;
			break;
		case CH_DONE:
		default:
			*done = true;
			return (long)i;
		}
	}
	return (long)i;
}

size_t
http_format_refusal(enum reason r, char *out, size_t outlen)
{
	return http_format_refusal_detail(r, NULL, out, outlen);
}

size_t
http_format_refusal_detail(enum reason r, const char *detail, char *out, size_t outlen)
{
	int status = reason_http_status(r);
	char body[1024];
	int bl, n;

	if (status <= 0 || status == 200 || out == NULL)
		return 0;
	bl = snprintf(body, sizeof(body), "%s: %s%s%s\n", reason_str(r), reason_text(r),
	    detail != NULL ? ": " : "", detail != NULL ? detail : "");
	if (bl < 0 || (size_t)bl >= sizeof(body))
		return 0;
	n = snprintf(out, outlen, "HTTP/1.1 %d %s\r\nX-Egress-Reason: %s\r\n"
	    "Content-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
	    status, reason_http_phrase(status), reason_str(r), bl, body);
	if (n < 0 || (size_t)n >= outlen)
		return 0;
	return (size_t)n;
}

void
http_body_framer_init(struct http_body_framer *f, enum http_resp_body kind, uint64_t len)
{
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->left = kind == HTTP_RESP_LENGTH ? len : 0;
	http_chunked_init(&f->ch);
	f->done = kind == HTTP_RESP_NONE || (kind == HTTP_RESP_LENGTH && len == 0);
}

long
http_body_framer_feed(struct http_body_framer *f, const char *p, size_t n, bool *done)
{
	long k;

	if (f->done) {
		*done = true;
		return 0;
	}
	switch (f->kind) {
	case HTTP_RESP_LENGTH:
		if (n > f->left)
			n = (size_t)f->left;
		f->left -= n;
		f->done = f->left == 0;
		k = (long)n;
		break;
	case HTTP_RESP_CHUNKED:
		if (n == 0) {
			k = 0;
			break;
		}
		k = http_chunked_feed(&f->ch, p, n, &f->done);
		if (k < 0)
			return -1;
		break;
	case HTTP_RESP_CLOSE:
		k = n > (size_t)LONG_MAX ? LONG_MAX : (long)n;
		break;
	case HTTP_RESP_NONE:
	default:
		f->done = true;
		k = 0;
		break;
	}
	*done = f->done;
	return k;
}
