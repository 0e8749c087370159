/*
 * http - strict HTTP/1.x request-head parsing and request-head rebuilding for egressd.
 *
 * Owns: what egressd accepts from a client as a request head (CONNECT authority-form and
 * absolute-form http:// for GET HEAD POST PUT PATCH DELETE OPTIONS, HTTP/1.0 and 1.1), the
 * forwarded request head (hop-by-hop headers removed, origin-form request line), a minimal
 * response-head check, and a streaming chunked-body framer. Pure functions over byte
 * buffers: no I/O, no allocation. Callers: egressd/session, fuzz/fuzz_http_request.
 *
 * Every byte parsed here comes from an untrusted worker or origin: limits come from
 * common/limits.h and every refusal maps to one reason of common/reasons.def.
 */
#ifndef EGRESS_HTTP_H
#define EGRESS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/host.h"
#include "common/limits.h"
#include "common/pattern.h"
#include "common/reasons.h"

enum http_method {
	HTTP_CONNECT, HTTP_GET, HTTP_HEAD, HTTP_POST, HTTP_PUT, HTTP_PATCH, HTTP_DELETE,
	HTTP_OPTIONS,
};

enum http_body { HTTP_BODY_NONE, HTTP_BODY_LENGTH, HTTP_BODY_CHUNKED };

/* One header line; pointers borrow the parsed buffer. */
struct http_header {
	const char *name;
	size_t name_len;
	const char *value;      /* leading and trailing whitespace trimmed */
	size_t value_len;
};

/*
 * A parsed request head. Every pointer borrows the buffer given to http_parse_request,
 * which the caller keeps alive and unchanged while the struct is used.
 */
struct http_request {
	enum http_method method;
	int minor;                      /* HTTP/1.<minor>: 0 or 1 */
	const char *target;             /* raw request-target, as sent */
	size_t target_len;
	enum dest_scheme scheme;        /* SCHEME_HTTPS for CONNECT, SCHEME_HTTP otherwise */
	struct host host;               /* canonical destination (common/host) */
	uint16_t port;                  /* destination port (defaults applied) */
	const char *path;               /* absolute-form: path and query ("" means "/") */
	size_t path_len;
	struct http_header headers[EGRESS_HEADER_COUNT_MAX];
	size_t nheaders;
	enum http_body body;
	uint64_t content_length;        /* when body == HTTP_BODY_LENGTH */
	bool conn_close;                /* Connection: close, or HTTP/1.0 without keep-alive */
	bool upgrade;                   /* an Upgrade header, or Connection: upgrade */
	size_t head_len;                /* bytes of the head, final CRLF CRLF included */
};

enum http_parse { HTTP_PARSE_OK, HTTP_PARSE_INCOMPLETE, HTTP_PARSE_ERROR };

/*
 * Parse the request head at the start of buf (len bytes). INCOMPLETE means no verdict yet:
 * call again with more bytes (already-seen lines are checked, so garbage fails early, and
 * a head that cannot fit the limits fails with REASON_HEAD_TOO_LARGE). ERROR sets *why to
 * one of MALFORMED_REQUEST, HEAD_TOO_LARGE, BAD_METHOD, ORIGIN_FORM, HTTPS_ABSOLUTE_FORM,
 * BAD_FRAMING, INVALID_HOST, INVALID_PORT. OK fills *req (which borrows buf).
 */
enum http_parse http_parse_request(const char *buf, size_t len, struct http_request *req,
    enum reason *why);

/*
 * A parsed request whose head bytes moved from old_base to new_base (a copy of the same
 * bytes): every pointer into the head follows, so the head is parsed once and then kept
 * in a buffer of its own.
 */
void http_request_rebase(struct http_request *req, const char *old_base, const char *new_base);

/*
 * The same strict parser for a request inside an intercepted TLS tunnel (egressd/mitm):
 * origin-form target only ("/path?query"; no CONNECT, '*' or absolute-form: ERROR with
 * BAD_METHOD / MALFORMED_REQUEST), and exactly one Host header, parsed with common/host
 * into req->host (req->port: its port, else 443; INVALID_HOST / INVALID_PORT otherwise).
 * req->scheme is SCHEME_HTTPS, req->path the whole target. The caller compares the host
 * with the CONNECT host.
 */
enum http_parse http_parse_origin_request(const char *buf, size_t len,
    struct http_request *req, enum reason *why);

const char *http_method_str(enum http_method m);

/* True when name (len bytes) is a hop-by-hop header egressd never forwards. */
bool http_is_hop_header(const char *name, size_t len);

/*
 * Write the head egressd sends upstream for an absolute-form request: origin-form request
 * line "METHOD /path HTTP/1.1", "Host: <canonical host[:port]>", every client header except
 * Host, the hop-by-hop ones and those named by Connection, then "Connection: close".
 * Returns the length written, or 0 when out (outlen bytes) is too small.
 */
size_t http_build_forward_head(const struct http_request *req, char *out, size_t outlen);

/*
 * The same for an upstream HTTP proxy: absolute-form request line
 * "METHOD http://host[:port]/path HTTP/1.1" — with pinned set, the URL names that checked
 * address instead ("http://198.51.100.7/path", "http://[2001:db8::1]:8080/path"), so the
 * proxy connects to what egressd checked, while Host still names the destination — and,
 * when proxy_auth is not NULL,
 * "Proxy-Authorization: <proxy_auth>" (egressd's own credential; the client's
 * Proxy-Authorization is a hop-by-hop header and is never forwarded).
 */
size_t http_build_proxy_head(const struct http_request *req, const struct addr *pinned,
    const char *proxy_auth, char *out, size_t outlen);

/*
 * The forwarded request head (docs/redirects.md, "HTTP/1.1 forwarding"; what
 * egressd/session uses): as
 * http_build_forward_head, or with HTTP_FWD_PROXY_FORM as http_build_proxy_head (pinned
 * and proxy_auth are used only then), and also "Via: 1.x egressd" after the client's own
 * Via lines. HTTP_FWD_STRIP_CREDENTIALS drops Authorization and Cookie (the request goes
 * to an origin a cross-origin redirect led to, and the grant does not bind credentials to
 * it). "Connection: close" ends the head unless HTTP_FWD_KEEPALIVE (the upstream
 * connection may then be reused: egressd/upool). *stripped (may be NULL) is set when a
 * credential header was dropped. Returns the length, 0 when out is too small.
 */
#define HTTP_FWD_PROXY_FORM         0x1
#define HTTP_FWD_STRIP_CREDENTIALS  0x2
#define HTTP_FWD_KEEPALIVE          0x4   /* no "Connection: close": the upstream connection
                                             may be reused (egressd/upool) */
size_t http_build_request_head(const struct http_request *req, int flags,
    const struct addr *pinned, const char *proxy_auth, bool *stripped, char *out,
    size_t outlen);

struct httpresp;
/*
 * The response head egressd sends to its client, from a head parsed by httpresp_parse
 * (r; buf holds its bytes): "HTTP/1.1 <status> <phrase>", every header except hop-by-hop
 * ones and those named by Connection (Content-Length and Transfer-Encoding are always
 * kept: the body bytes pass unchanged and need their framing), then
 * "Via: 1.<minor> egressd". A final response (status >= 200) ends with
 * "Connection: close" unless keep_alive; an interim 1xx head gets no Connection header.
 * Returns the length, 0 when out is too small.
 */
size_t http_build_client_response(const struct httpresp *r, bool keep_alive, char *out,
    size_t outlen);

/*
 * How a final response's body is delimited (RFC 9112 6.3), from its parsed head: none for
 * HEAD (head_request), 1xx, 204 and 304 (and Content-Length: 0); Content-Length (*len
 * set); chunked when "chunked" is the one and only coding; otherwise until the origin
 * closes. Returns -1 for the shapes a proxy must not pass on: Transfer-Encoding together
 * with Content-Length (the classic smuggling shape), Content-Length values that differ or
 * are not plain decimal (at most 18 digits), chunked anywhere but as the only coding.
 */
enum http_resp_body { HTTP_RESP_NONE, HTTP_RESP_LENGTH, HTTP_RESP_CHUNKED, HTTP_RESP_CLOSE };
int http_response_framing(const struct httpresp *r, bool head_request,
    enum http_resp_body *kind, uint64_t *len);

/*
 * The client-visible refusal for reason r: "HTTP/1.1 <status> <phrase>", X-Egress-Reason,
 * Content-Type text/plain, Content-Length, Connection: close, and the one-line body
 * "<code>: <explanation>\n" from common/reasons.def. Returns the length, 0 when out is too
 * small (512 bytes always suffice) or r has no HTTP status.
 */
size_t http_format_refusal(enum reason r, char *out, size_t outlen);
/* The same with ": <detail>" after the explanation in the body (detail printable, caller-
 * escaped; NULL = none): the one formatter of client refusals (redirect refusals name
 * their target this way). */
size_t http_format_refusal_detail(enum reason r, const char *detail, char *out,
    size_t outlen);

/*
 * Streaming chunked-body framer: finds where a chunked body ends without changing it (the
 * bytes are passed through as they are). Chunk-size lines are bounded by
 * EGRESS_CHUNK_LINE_MAX, sizes are hex without overflow, trailers are bounded by
 * EGRESS_REQUEST_HEAD_MAX.
 */
struct http_chunked {
	int state;
	uint64_t remaining;     /* data bytes left in the current chunk */
	size_t line;            /* bytes of the current size/trailer line so far */
	size_t trailer;         /* trailer bytes so far */
	bool ext;               /* inside a chunk extension */
	bool digits;            /* at least one hex digit seen */
	bool tr_value;          /* trailer line: past the "name:" part */
};
void http_chunked_init(struct http_chunked *c);
/*
 * Feed len bytes. Returns the number of bytes that belong to the body (<= len); *done is set
 * when the body ended within them (bytes after that are not part of it). Returns -1 on
 * malformed framing.
 */
long http_chunked_feed(struct http_chunked *c, const char *buf, size_t len, bool *done);

/*
 * A message body as its bytes arrive, framed as http_response_framing (or a request's
 * Content-Length / chunked) said: how many of them belong to the body and when it ends.
 * NONE ends at once; LENGTH after len bytes; CHUNKED where http_chunked finds the end;
 * CLOSE never (the sender's close ends it). The one body framer of every forwarding path
 * (the model-connection interceptor, egressd/mitm, and the tunnel's HTTP mode).
 */
struct http_body_framer {
	enum http_resp_body kind;
	uint64_t left;              /* LENGTH: bytes still to come */
	struct http_chunked ch;     /* CHUNKED */
	bool done;
};
void http_body_framer_init(struct http_body_framer *f, enum http_resp_body kind,
    uint64_t len);
/*
 * Of n bytes at p, how many belong to the body (<= n); *done when the body ended within
 * them or before (bytes after that are not part of it). p is read only for a chunked
 * body (NULL is fine otherwise). -1: malformed chunked framing.
 */
long http_body_framer_feed(struct http_body_framer *f, const char *p, size_t n, bool *done);

#endif
