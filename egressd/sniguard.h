/*
 * sniguard - wait for a worker's TLS ClientHello on an authorized tunnel and read it
 * without consuming it: the SNI check before an opaque tunnel on port 443, or on any port
 * an https:// grant entry admits (grant_expects_tls: the grant's mark for TLS).
 *
 * Owns: struct sniguard (one read event and one deadline timer on the client socket, and a
 * copy of the bytes the caller had already read). It never reads from the socket (only
 * recv(MSG_PEEK)), never writes to it and never closes it: the caller keeps the socket and,
 * after an allowed verdict, hands the same bytes on (they are still queued in the kernel,
 * plus the prefix the caller holds itself).
 * Callers: egressd/session (the hookup below). Event-loop thread only.
 *
 * Hookup contract (the session side; docs/model-connections.md):
 *   0. first, sniguard_try (below) may decide at once from what is queued already: then
 *      there is no guard, the caller acts on its verdict as on cb's (steps 3 and 4)
 *      before anything else reads the socket;
 *   1. after the allow record of such a CONNECT is written, the session sends
 *      "200 Connection Established" itself and stops reading the client socket;
 *   2. sniguard_start(base, cfd, prefix, nprefix, timeout, cb, arg): prefix = bytes the
 *      session already read after the CONNECT head (usually none);
 *   3. cb runs exactly once, outside sniguard_start, unless sniguard_free comes first:
 *      REASON_ALLOWED with the parsed hello (its SNI may be absent: record that), or
 *      REASON_ALLOWED with ch NULL when the first bytes are not TLS at all (no name to
 *      compare: record that), or a refusal: SNI_MISMATCH, TLS_EXPECTED (a TLS record that
 *      is not a readable ClientHello, or one larger than EGRESS_CLIENTHELLO_MAX),
 *      HEADER_TIMEOUT (nothing complete in time),
 *      CLOSE_CLIENT (the worker closed first), INTERNAL_ERROR. ch is NULL unless a hello
 *      was parsed. The guard may be freed inside cb;
 *   4. on ALLOWED the session starts the opaque tunnel without sending the 200 again; on a
 *      refusal it writes the deny record and closes the tunnel's sockets (a 200 was sent:
 *      no HTTP refusal is possible any more).
 */
#ifndef EGRESS_SNIGUARD_H
#define EGRESS_SNIGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/host.h"
#include "common/reasons.h"
#include "egressd/clienthello.h"

struct event_base;
struct sniguard;

typedef void (*sniguard_cb)(enum reason r, const struct clienthello *ch, void *arg);

/* Start waiting. NULL on ENOMEM (nothing started; the caller refuses). host is copied. */
struct sniguard *sniguard_start(struct event_base *base, int cfd, const struct host *host,
    const unsigned char *prefix, size_t nprefix, uint64_t timeout_ms, sniguard_cb cb,
    void *arg);
/*
 * The same check once, now, without any event: the hello is usually queued already when
 * the 200 has gone out (the client sends it right behind). true: decided, *r as the
 * callback would be told (ch filled when *have_ch); false: not complete yet, start the
 * guard. Never consumes a byte.
 */
bool sniguard_try(int cfd, const struct host *host, const unsigned char *prefix,
    size_t nprefix, struct clienthello *ch, bool *have_ch, enum reason *r);
/* Stop and free (no callback). Accepts NULL. */
void sniguard_free(struct sniguard *g);

#endif
