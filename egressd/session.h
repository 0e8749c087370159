/*
 * session - one client connection to egressd: read the head, decide, connect, relay.
 *
 * Owns: struct session, its client socket, the upstream socket until the tunnel takes it,
 * and every pending route/DNS/log request it started (cancelled when it ends).
 * Callers: daemon_accept creates sessions; they end by themselves (refusal written,
 * tunnel closed) or through their grant (revoke, expiry, drain kill).
 *
 * Order of one hop (DESIGN rule 1; docs/egressd.md "Authorization order"):
 *   head (header_timeout) -> http_parse_request -> grant_allows (IP literals only when
 *   named; own listener addresses refused) -> route (direct) -> resolve (c-ares, per-
 *   principal pending limit) -> addrcheck (classes, allow_address, operator override) ->
 *   connect to the kept addresses in order (connect_timeout, never re-resolving) ->
 *   decision record written (dlog; its failure is 503 audit_unavailable) -> 200 + tunnel,
 *   or the forwarded request + response relay. Any refusal is logged and answered with its
 *   reason's status, X-Egress-Reason and a one-line body; a refused hop never opens an
 *   upstream connection (the only upstream socket is created in the connect step, after
 *   every check).
 */
#ifndef EGRESS_SESSION_H
#define EGRESS_SESSION_H

#include <sys/socket.h>

struct daemon;
struct lgrant;

/* Take over the accepted socket fd of listener grant lg. Never fails: on ENOMEM the
 * socket is closed. */
void session_new(struct daemon *d, struct lgrant *lg, int fd, const struct sockaddr *peer,
    socklen_t peerlen);

/* Free every session still answering a refusal (d->refusing): shutdown, after the loop
 * ended. Their records are written already; nothing more is. */
void session_free_refusing(struct daemon *d);

#endif
