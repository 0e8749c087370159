/*
 * tunnel - relay bytes both ways between a client socket and an upstream socket.
 *
 * Owns: both sockets once tunnel_new succeeded (closed when the tunnel ends), the per-
 * direction buffers, and the splice pipes it borrows from a struct pipe_pool.
 * Callers: egressd/session (CONNECT after 200; absolute-form HTTP after the response head).
 *
 * Behaviour (why):
 * - Backpressure: a direction reads from its source only when everything read before
 *   was written to its destination, so at most one buffer (or one pipe) per direction is
 *   in flight whatever the peers do; memory per tunnel is bounded.
 * - Half-close: EOF from one side is passed on as shutdown(SHUT_WR) to the other after
 *   the pending bytes are written; the tunnel ends when both directions ended.
 * - idle_ms without a byte moving either way ends it (CLOSE_IDLE); lifetime_ms ends it
 *   regardless (CLOSE_LIFETIME).
 * - Splice mode moves bytes socket -> pipe -> socket with splice(2) (no copy through user
 *   space). Pipes are taken lazily when a direction first has data and returned to a
 *   bounded pool when they are empty (two pipe fds per direction would otherwise double
 *   the fd budget of every tunnel: the hard limit here is 20,000 fds). When no pipe can
 *   be had (EMFILE), that direction copies through a buffer instead. Copy mode always
 *   uses the buffer (read/send).
 */
#ifndef EGRESS_TUNNEL_H
#define EGRESS_TUNNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/addr.h"
#include "common/reasons.h"

struct event_base;
struct httpresp;
struct tunnel;
struct pipe_pool;

/*
 * max_idle pipes of the default size kept for reuse; pipes in use are limited to
 * EGRESS_SPLICE_PIPES_MAX. A direction that has moved EGRESS_SPLICE_BIG_AFTER bytes (a
 * bulk transfer) gets a pipe of EGRESS_SPLICE_BIG_SIZE instead, while fewer than max_big
 * such pipes exist (in use or kept idle for the next bulk direction; at most
 * EGRESS_SPLICE_BIG_PIPES): one splice(2) then moves up to 1 MiB instead of the 16 pages
 * of a default pipe (docs/performance.md: half the CPU per GB). When the kernel refuses
 * the size (pipe-max-size, the per-user pipe limits), the default pipe serves and growing
 * is tried again a second later.
 */
struct pipe_pool *pipe_pool_new(size_t max_idle, size_t max_big);
void pipe_pool_free(struct pipe_pool *p);
size_t pipe_pool_idle(const struct pipe_pool *p);
size_t pipe_pool_in_use(const struct pipe_pool *p);
size_t pipe_pool_big(const struct pipe_pool *p);    /* big pipes that exist */

struct tunnel_opts {
	bool splice;
	uint64_t idle_ms;
	uint64_t lifetime_ms;
	uint64_t *bytes_total;      /* optional: add every byte moved (grant budget, metrics) */
	uint64_t bytes_limit;       /* with bytes_total: when *bytes_total reaches it the tunnel
	                               ends with REASON_LIMIT_BYTES (the grant's byte budget,
	                               shared by its tunnels; overshoot at most one buffer) */
	uint64_t *bytes_up_total;   /* optional: client -> upstream bytes (metrics) */
	uint64_t *bytes_down_total; /* optional: upstream -> client bytes (metrics) */
	/*
	 * Absolute-form HTTP exchange (copy mode always): client -> upstream carries only the
	 * request body (req_body: 0 none, 1 req_body_len bytes, 2 chunked, framed by
	 * http_chunked_feed); anything the client sends after it is never forwarded (the next
	 * request would be a new hop needing its own authorization). Upstream -> client: the
	 * response head is checked and rebuilt (hop-by-hop headers out, Connection: close),
	 * then the body passes until the origin closes. The tunnel ends when the response is
	 * delivered. A bad or missing response head before any byte reached the client is
	 * answered with its refusal (502 bad_response / response_too_large, 504
	 * upstream_timeout).
	 */
	bool http;
	int req_body;
	uint64_t req_body_len;
	/* HTTP mode through an upstream HTTP proxy: a 407 from the proxy is never relayed
	 * (the worker has no business with the host's proxy credentials); it becomes 502
	 * upstream_auth_required (no credentials sent) or upstream_auth_failed (sent). */
	bool via_proxy;
	bool proxy_auth_sent;
	int *proxy_status;      /* via_proxy: set to 407 when the proxy's 407 ended it */
	/*
	 * docs/redirects.md ("HTTP/1.1 forwarding"), egressd/relay_http.c. The response is
	 * framed (RFC 9112 6.3): no body for HEAD, 1xx, 204 and 304; Content-Length;
	 * chunked (framed by http_chunked_feed, passed unchanged); otherwise until the
	 * origin closes. A response with both Transfer-Encoding and Content-Length,
	 * differing Content-Lengths or chunked not last is 502 bad_response; 101 too (no
	 * upgrade is ever forwarded). 1xx interim heads (100 Continue for Expect) are rebuilt
	 * and passed on, then the final head is awaited. Every head is rebuilt by
	 * http_build_client_response (Via added, hop-by-hop out).
	 * head_request: the request was HEAD. keep_client: the client may keep its
	 * connection: when the response is framed (not close-delimited) and the whole request
	 * body was forwarded, the tunnel ends after the response without closing the client
	 * socket and sets *client_kept (the caller then reads the next request, a new hop).
	 * Otherwise the client gets "Connection: close" and both sockets are closed.
	 * on_response (may be NULL) sees every final response head before any byte of it
	 * reaches the client (redirect re-authorization): REASON_ALLOWED passes it; any other
	 * reason refuses it: the tunnel sends the refusal bytes it wrote to refusal (at most
	 * TUNNEL_REFUSAL_MAX, *nrefusal set; 0 = the standard refusal for that reason) instead
	 * of the response, and ends with that reason.
	 */
	bool head_request;
	bool keep_client;
	bool *client_kept;
	/* keep_upstream: the request went without "Connection: close"; when the response is
	 * framed (never close-delimited), HTTP/1.1 without "Connection: close", nothing
	 * followed it and the whole request body was forwarded, the upstream socket is not
	 * closed either and *upstream_kept_fd is set to it (the caller owns it then and parks
	 * it in egressd/upool; after a retry it is the fresh socket, not the one given). */
	bool keep_upstream;
	int *upstream_kept_fd;
	/*
	 * retry: the upstream socket came from the pool and the request has no body (its
	 * forwarded head is all there is to send). When that socket fails (EOF, reset) before
	 * any response byte arrived, the origin closed the idle connection as it was reused:
	 * the tunnel opens ONE fresh connection to retry_addr:retry_port (the same pinned
	 * address: never re-resolved, never another destination) through egressd/connector
	 * (the one connector, as for the first connection), sends the head again and sets
	 * *retried. Any failure after that ends the tunnel as before.
	 */
	bool retry;
	struct addr retry_addr;
	uint16_t retry_port;
	bool *retried;
	enum reason (*on_response)(const struct httpresp *r, char *refusal, size_t *nrefusal,
	    void *arg);
};

#define TUNNEL_REFUSAL_MAX 1024

/*
 * Called once when the tunnel ends (never from inside tunnel_new). up = bytes written to
 * upstream, down = bytes written to the client. The tunnel is freed right after the
 * callback returns; the callback must not call tunnel_close.
 */
typedef void (*tunnel_done_cb)(enum reason why, uint64_t up, uint64_t down, void *arg);

/*
 * Start relaying. to_client (the "200 Connection Established" line), to_upstream (the
 * rebuilt request head) and pending (client bytes that arrived after the request head;
 * in HTTP mode framed as request body, the excess dropped) are delivered first; each may
 * be NULL/0 and is copied. Returns NULL on ENOMEM or a malformed pending body (the caller
 * still owns the fds then).
 */
struct tunnel *tunnel_new(struct event_base *base, struct pipe_pool *pool, int cfd, int ufd,
    const void *to_client, size_t nclient, const void *to_upstream, size_t nupstream,
    const void *pending, size_t npending, const struct tunnel_opts *opts,
    tunnel_done_cb cb, void *arg);

/* End now with why (CLOSE_REVOKED, CLOSE_SHUTDOWN): runs the callback, frees. */
void tunnel_close(struct tunnel *t, enum reason why);

uint64_t tunnel_bytes_up(const struct tunnel *t);
uint64_t tunnel_bytes_down(const struct tunnel *t);

#endif
