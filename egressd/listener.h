/*
 * listener - one listening TCP socket of egressd (a persistent read event that accepts
 * a bounded burst of connections per readiness, accept4 with SOCK_NONBLOCK |
 * SOCK_CLOEXEC; accepted sockets inherit TCP_NODELAY from it). Should the accept
 * callback free or pause the listener, the burst stops there.
 *
 * Owns: the listening socket and its event (listener_free closes both).
 * Callers: egressd/daemon (static listeners from egressd.ini), egressd/control (dynamic
 * grants). The principal of every accepted connection is the listener it arrived on:
 * the accept callback receives the listener's current arg (its grant), nothing the client
 * says.
 *
 * Why SO_BINDTODEVICE first: an unprivileged process may set it once on a fresh socket
 * (changing it later needs CAP_NET_RAW), and binding to the device before the address
 * means no packet from another interface is ever accepted on this socket.
 */
#ifndef EGRESS_LISTENER_H
#define EGRESS_LISTENER_H

#include <stdint.h>
#include <sys/socket.h>

#include "common/addr.h"

struct event_base;
struct listener;

/* fd is a connected, non-blocking, close-on-exec socket now owned by the callee. */
typedef void (*listener_accept_cb)(int fd, const struct sockaddr *peer, socklen_t peerlen,
    void *arg);

/*
 * Create, bind (to ifname first when non-NULL and non-empty) and listen. Port 0 picks a
 * free port (listener_addr tells which). NULL with err ("bind 169.254.1.1:3128: Address
 * already in use") on failure.
 */
struct listener *listener_new(struct event_base *base, const struct sockaddr *sa,
    socklen_t salen, const char *ifname, listener_accept_cb cb, void *arg, char *err,
    size_t errlen);
/*
 * Take over a listening socket created elsewhere (egress-exec creates a run's listener in
 * the run's own network namespace and passes it over the control socket). The fd must be
 * a listening TCP socket (IPv4 or IPv6) bound to a specific address (not 0.0.0.0, ::, or
 * ::ffff:0.0.0.0) and, when ifname is not empty, bound to that device; it is owned by the
 * callee from here on and closed on failure. NULL with err on failure.
 */
struct listener *listener_adopt(struct event_base *base, int fd, const char *ifname,
    listener_accept_cb cb, void *arg, char *err, size_t errlen);
/* Stop accepting and close. Accepts NULL. */
void listener_free(struct listener *l);
/* Change the arg handed to the accept callback (static grant replaced on reload). */
void listener_set_arg(struct listener *l, void *arg);
void *listener_get_arg(const struct listener *l);
/* Bound address and port. */
void listener_addr(const struct listener *l, struct addr *a, uint16_t *port);
/* "addr:port" / "[v6]:port" of the bound address into buf. */
const char *listener_addr_str(const struct listener *l, char *buf, size_t len);
/* Is this listener bound to exactly sa? (reload reuses it instead of binding twice) */
int listener_same_addr(const struct listener *l, const struct sockaddr *sa, socklen_t salen);
void listener_pause(struct listener *l);

#endif
