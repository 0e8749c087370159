/*
 * tlsbridge - TLS to an https:// upstream proxy, presented to the rest of egressd as a
 * plain socket.
 *
 * Why: the proxy protocol code (upstream) and the tunnel both work on plain fds (the
 * tunnel splices when it can). A bridge owns the TLS connection (bufferevent_openssl over
 * the proxy socket, peer verified, host name checked, SNI set) and one end of a
 * socketpair; the other end is handed out and behaves like a socket to the proxy.
 * Bytes are relayed both ways with backpressure (high watermarks) and half-close.
 *
 * Owns: itself after tlsbridge_new; it frees itself when both directions have ended, when
 * TLS fails, or at tlsbridge_shutdown_all (daemon exit). Loop thread only.
 */
#ifndef EGRESS_TLSBRIDGE_H
#define EGRESS_TLSBRIDGE_H

#include <openssl/ssl.h>

#include "common/host.h"

struct event_base;
struct tlsbridge;

/* app_fd >= 0: the handshake succeeded and app_fd now belongs to the callee.
 * app_fd < 0: TLS failed; err says why. Called once, never from inside tlsbridge_new. */
typedef void (*tlsbridge_cb)(int app_fd, const char *err, void *arg);

/* fd: a connected socket to the proxy (taken over in all cases). peer: the proxy's
 * canonical host (name -> SNI + host name check; literal -> IP check). */
struct tlsbridge *tlsbridge_new(struct event_base *base, int fd, SSL_CTX *ctx,
    const struct host *peer, tlsbridge_cb cb, void *arg);
/* Before the callback: abandon the handshake (the callback never runs). */
void tlsbridge_abort(struct tlsbridge *b);
/* Free every bridge still alive (daemon exit). */
void tlsbridge_shutdown_all(void);

#endif
