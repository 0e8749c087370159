/*
 * clienthello - read a TLS ClientHello from a worker's first bytes on a tunnel (peeked, or
 * read into egressd's buffer before any is forwarded), and decide whether its server name
 * (SNI) matches the CONNECT host.
 *
 * Owns: nothing (pure functions over caller buffers). Callers: egressd/sniguard (the
 * opaque-tunnel SNI check), egressd/mitm later (the ALPN offer), fuzz/fuzz_clienthello.
 *
 * Strict and bounded: at most EGRESS_CLIENTHELLO_MAX bytes of handshake, gathered from one
 * or more TLS handshake records (content type 22, version 3.x, each at most 2^14 bytes);
 * the first handshake message must be a ClientHello (type 1) whose every length field is
 * consistent with its container. Extensions may appear once each (RFC 8446 4.2). The
 * server_name extension must hold exactly one host_name entry, a valid DNS name (the
 * canonical form of common/host: lowercase, no trailing dot, never an IP literal, RFC 6066
 * 3). Up to EGRESS_ALPN_MAX ALPN names are kept (each up to 32 bytes shown). Nothing here
 * allocates; an attacker's length never sizes anything.
 *
 * What this does not see (docs/model-connections.md "What the SNI check stops"): with
 * Encrypted Client Hello the real name is inside the encrypted inner hello (has_ech tells
 * that an ECH extension was offered: the outer SNI is still compared); domain fronting
 * (SNI of an allowed host, HTTP Host of another behind the same CDN) is invisible in an
 * opaque tunnel.
 */
#ifndef EGRESS_CLIENTHELLO_H
#define EGRESS_CLIENTHELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/host.h"
#include "common/limits.h"
#include "common/reasons.h"

enum ch_result {
	CH_OK = 0,          /* a complete ClientHello was parsed */
	CH_NEED_MORE,       /* consistent so far: wait for more bytes */
	CH_NOT_TLS,         /* the first bytes are not a TLS handshake record */
	CH_MALFORMED,       /* a TLS record, but not a well-formed ClientHello */
	CH_TOO_LARGE,       /* the ClientHello would exceed EGRESS_CLIENTHELLO_MAX */
};

#define CH_ALPN_NAME_MAX 32

struct clienthello {
	uint16_t legacy_version;        /* client_version field (0x0303 for TLS 1.2/1.3) */
	bool has_sni;
	char sni[EGRESS_HOSTNAME_MAX + 1];      /* canonical (lowercase) */
	size_t nalpn;                           /* ALPN names offered (all, even past the kept) */
	char alpn[EGRESS_ALPN_MAX][CH_ALPN_NAME_MAX + 1];   /* printable, truncated */
	bool has_ech;                   /* encrypted_client_hello (0xfe0d) offered */
	bool has_supported_versions;
	size_t consumed;                /* bytes of the records holding the ClientHello */
};

/* Parse p[0..n). CH_OK fills *out; other results leave *out unspecified. */
enum ch_result clienthello_parse(const unsigned char *p, size_t n, struct clienthello *out);

const char *ch_result_str(enum ch_result r);

/*
 * The SNI decision for an opaque tunnel to connect_host: REASON_ALLOWED when the server
 * name equals the CONNECT host or is absent (then *absent = true: the caller records it);
 * REASON_SNI_MISMATCH otherwise. A CONNECT to an IP literal admits only an absent SNI.
 */
enum reason clienthello_sni_check(const struct clienthello *ch, const struct host *connect_host,
    bool *absent);

#endif
