/*
 * mitm - one intercepted tunnel of a model connection: egressd terminates the worker's TLS
 * with a leaf for exactly the CONNECT host, re-authorizes every inner request, puts the
 * connection's credential on it, and relays it over its own verified TLS connection to the
 * origin (docs/model-connections.md).
 *
 * Owns: struct mitm, both sockets from mitm_start on (closed when it ends), both TLS
 * sessions, one reference to each SSL_CTX and to the connections set, the inner requests'
 * records. Callers: egressd/session (the hookup below). Event-loop thread only.
 *
 * Hookup contract (the session side, one call where an authorized CONNECT would become an
 * opaque tunnel):
 *   - the CONNECT's allow record is written (as for any tunnel); the upstream socket is
 *     connected through the same route an opaque tunnel would use (direct to the pinned
 *     address, or through the upstream proxy's tunnel): egressd's TLS to the origin runs
 *     inside it, so routing, pinning and proxy authentication are unchanged;
 *   - the grant names a connection (grant->connection) whose destinations cover the
 *     CONNECT host and port (connection_covers), and a CA is available: else no
 *     interception happens and the tunnel stays opaque — except that a grant naming a
 *     connection that cannot be applied (no CA) is refused at grant.create, never here;
 *   - mitm_start(cfd, ufd, ok200, n200, &opts): sends the 200 itself, then speaks TLS on
 *     cfd; the session no longer touches either socket and must not have buffered client
 *     bytes after the CONNECT head (then it refuses instead: bytes egressd already read
 *     cannot be given to the TLS server). Bytes the client sent before the 200 that are
 *     still in the socket (a head decided from the first read leaves them there) are read
 *     by the TLS server: a ClientHello is intercepted, anything else fails the handshake;
 *     nothing is ever relayed opaque;
 *   - opts.done runs exactly once, from the event loop, when the tunnel ended (never from
 *     inside mitm_start), with the close reason and the bytes both ways (TLS payload);
 *     after it the mitm is freed already: do not call mitm_free then. mitm_free before
 *     done ends it without the callback (grant revoked, shutdown).
 *
 * Per inner request: http_parse_origin_request (strict); its Host must equal the CONNECT
 * host and port (inner_host_mismatch); the connection's method/path rules; a decision
 * record (hop "<connect hop>.<n>", hop_kind "inner", method, path without query,
 * credential NAME, intercepted true) written before any byte goes upstream; the worker's
 * Authorization, Proxy-Authorization, x-api-key, Cookie and the connection's own header
 * removed, the credential added; a 3xx Location re-authorized like plain HTTP redirects
 * (redirect_denied answered instead); responses streamed as they arrive (SSE) with
 * backpressure both ways; keep-alive on both sides while both allow it; a close record per
 * inner request (status, bytes). Origin certificate not verified: 502 origin_tls_failed
 * with the verification error in the record. Nothing falls back to an opaque tunnel or to
 * a request without the credential.
 */
#ifndef EGRESS_MITM_H
#define EGRESS_MITM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "common/cidr.h"
#include "common/grant.h"
#include "common/host.h"
#include "common/reasons.h"
#include "egressd/connections.h"

struct event_base;
struct dlog;
struct metrics_stats;
struct mitm;

typedef void (*mitm_done_cb)(enum reason why, uint64_t up, uint64_t down, void *arg);

struct mitm_opts {
	struct event_base *base;
	struct dlog *dlog;
	json_t *record_base;            /* read at the start (rectpl.h): fields every record
	                                   starts from (conn, principal, grant_id, client,
	                                   dest, route, pinned, attested) */
	const char *hop;                /* the CONNECT's hop id */
	struct host host;               /* the CONNECT host */
	uint16_t port;
	struct connections *conns;      /* a reference is taken */
	const struct connection *conn;  /* in conns */
	SSL_CTX *server_ctx;            /* leaf for host (mitmca); a reference is taken */
	SSL_CTX *client_ctx;            /* origin verification (mitm_client_ctx); ref taken */
	const struct grant *grant;      /* redirects; borrowed, outlives the mitm */
	const struct cidr_set *override;/* the operator's allow_special_address, or NULL */
	const char *placeholder;        /* the run's credential placeholder, or NULL */
	uint64_t idle_ms;               /* no byte either way for this long: close */
	uint64_t lifetime_ms;           /* the tunnel's maximum lifetime (0 = none) */
	uint64_t *bytes_total;          /* the grant's byte counter (may be NULL) */
	uint64_t bytes_limit;           /* 0 = none */
	struct metrics_stats *stats;    /* every inner request is a hop: counted like the
	                                   others (metrics.h); borrowed, may be NULL */
	mitm_done_cb done;
	void *arg;
};

/* Start. NULL with errno on failure: with *took false nothing was sent and both fds are
 * still the caller's; with *took true (the 200, or part of it, went out, and then a send
 * or an allocation failed) both fds are no longer the caller's (closed, the client's
 * possibly by the loop a moment later) and the hop can have no HTTP answer. */
struct mitm *mitm_start(int cfd, int ufd, const char *ok200, size_t n200,
    const struct mitm_opts *o, bool *took);
/* End without the callback; closes both sockets. Accepts NULL. */
void mitm_free(struct mitm *m);
/* End now with reason why (grant revoked, shutdown): the inner request in flight gets its
 * close record, then done runs (synchronously, from inside this call). */
void mitm_close(struct mitm *m, enum reason why);

/*
 * The client context for origins: TLS 1.2+, verification against the host trust store
 * (OpenSSL's default paths, or ca_file when not NULL: tests and labs), ALPN http/1.1.
 * NULL with err. The caller owns the reference.
 */
SSL_CTX *mitm_client_ctx(const char *ca_file, char *err, size_t errlen);

#endif
