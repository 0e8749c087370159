/*
 * upool - idle upstream connections kept for reuse by plain-HTTP forwarding
 * (docs/redirects.md, "HTTP/1.1 forwarding").
 *
 * Owns: every parked socket and its watch event (upool_free closes them; accepts NULL).
 * Callers: egressd/session only (direct route, absolute-form HTTP). Single-threaded.
 *
 * Why the key is what it is: a connection is reused only for the same grant (never across
 * principals; a new grant starts without any), the same pinned address and the same port,
 * on the direct route (proxied routes are never pooled). The hop that reuses it is
 * authorized, resolved and class-checked from scratch first; the pool only saves the TCP
 * connect to an address that hop already admitted.
 * A parked socket is watched: any byte or EOF from the origin while idle closes it (an
 * origin has nothing to say between requests; unsolicited bytes would be misread as the
 * next response), and so does EGRESS_UPOOL_IDLE_S without reuse (below common origin
 * keep-alive timeouts, so the origin rarely closes first). A parked socket is attached to
 * its grant: revoking or expiring the grant closes it at once. Bounded: at most
 * EGRESS_UPOOL_MAX sockets, EGRESS_UPOOL_PER_GRANT per grant (the oldest is closed to make
 * room).
 */
#ifndef EGRESS_UPOOL_H
#define EGRESS_UPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "common/addr.h"

struct event_base;
struct lgrant;
struct upool;

/* A pool on base; idle_ms 0 means EGRESS_UPOOL_IDLE_S. NULL on allocation failure. */
struct upool *upool_new(struct event_base *base, uint64_t idle_ms);
void upool_free(struct upool *p);

/*
 * Park fd, a connection of lg to a:port whose last exchange ended cleanly. Ownership of
 * fd moves to the pool, also on failure (then it is closed, as it is when lg is no longer
 * live). The pool keeps a reference on lg while the socket is parked.
 */
void upool_put(struct upool *p, struct lgrant *lg, const struct addr *a, uint16_t port,
    int fd);

/*
 * An idle connection parked by this very grant (lg, compared by identity and id) to
 * exactly a:port (the caller owns it now), or -1. A socket the origin already closed or
 * wrote to is closed instead of returned.
 */
int upool_take(struct upool *p, struct lgrant *lg, const struct addr *a, uint16_t port);

/* Parked sockets (tests, status). */
size_t upool_count(const struct upool *p);

#endif
