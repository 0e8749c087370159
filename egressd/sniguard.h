/*
 * sniguard - the TLS ClientHello check of an authorized opaque tunnel: the SNI check
 * before a tunnel on port 443, or on any port an https:// grant entry admits
 * (grant_expects_tls: the grant's mark for TLS).
 *
 * Owns nothing: two functions over bytes the caller holds or that are queued on its
 * socket. Callers: egressd/session (the hookup below). Event-loop thread only.
 *
 * Hookup contract (the session side; docs/model-connections.md):
 *   1. after the allow record of such a CONNECT is written, the session sends
 *      "200 Connection Established" itself;
 *   2. sniguard_try looks (recv MSG_PEEK, nothing consumed) at what is queued already,
 *      behind what the session had read after the head (the prefix, usually none): the
 *      hello usually follows the 200 at once;
 *   3. undecided, the session keeps reading the client socket into its own buffer (no
 *      byte goes anywhere yet) and calls sniguard_judge on everything read so far after
 *      each read, within EGRESS_CLIENTHELLO_WAIT_MS (else REASON_HEADER_TIMEOUT; the end
 *      of the stream first is REASON_CLOSE_CLIENT);
 *   4. a verdict: REASON_ALLOWED with the parsed hello (its SNI may be absent: record
 *      that), or REASON_ALLOWED with *have_ch false when the first bytes are not TLS at all
 *      (no name to compare: record that), or a refusal: SNI_MISMATCH, TLS_EXPECTED (a TLS
 *      record that is not a readable ClientHello, or none whole within
 *      SNIGUARD_HELLO_MAX bytes); sniguard_try also CLOSE_CLIENT / CLOSE_ERROR;
 *   5. on ALLOWED the session starts the opaque tunnel with every byte it read (and those
 *      still queued) without sending the 200 again; on a refusal it writes the deny
 *      record and closes the sockets (a 200 was sent: no HTTP refusal is possible any
 *      more).
 */
#ifndef EGRESS_SNIGUARD_H
#define EGRESS_SNIGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/host.h"
#include "common/limits.h"
#include "common/reasons.h"
#include "egressd/clienthello.h"

/* Room for the hello's records: the handshake bytes plus a header per record. */
#define SNIGUARD_HELLO_MAX (EGRESS_CLIENTHELLO_MAX + 64 * 5)

/*
 * Judge the first n bytes the worker sent (those past SNIGUARD_HELLO_MAX are not looked
 * at): true with *r (ch filled when *have_ch) when they decide, false when more must
 * arrive.
 */
bool sniguard_judge(const unsigned char *buf, size_t n, const struct host *host,
    struct clienthello *ch, bool *have_ch, enum reason *r);

/*
 * The same over prefix (bytes the caller read already) followed by what is queued on cfd
 * now (recv MSG_PEEK: nothing is consumed); also true with CLOSE_CLIENT when the stream
 * ended before a whole hello, CLOSE_ERROR on a socket error.
 */
bool sniguard_try(int cfd, const struct host *host, const unsigned char *prefix,
    size_t nprefix, struct clienthello *ch, bool *have_ch, enum reason *r);

#endif
