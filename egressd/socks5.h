/*
 * socks5 - RFC 1928 (SOCKS5 CONNECT) and RFC 1929 (username/password) client codec.
 * Pure: builds requests into caller buffers and parses replies from a hostile proxy.
 *
 * Owns: nothing. Callers: egressd/upstream. Domain-name addressing is the default (the
 * proxy resolves: the hop is not attested); IPv4/IPv6 addressing is used when the grant
 * requires pinning (egressd resolved and checked the address itself).
 */
#ifndef EGRESS_SOCKS5_H
#define EGRESS_SOCKS5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/addr.h"
#include "common/reasons.h"

#define SOCKS5_METHOD_NONE     0x00
#define SOCKS5_METHOD_USERPASS 0x02
#define SOCKS5_METHOD_REFUSED  0xff

/* Greeting offering "no auth" and, when with_auth, username/password. Returns bytes. */
size_t socks5_greeting(bool with_auth, uint8_t *buf, size_t len);

/* Method selection reply (2 bytes). Returns 2 and sets *method, 0 when more bytes are
 * needed, -1 on a protocol violation (wrong version, method we did not offer). */
int socks5_parse_method(const uint8_t *buf, size_t len, bool offered_auth, uint8_t *method);

/* RFC 1929 request; user and password are 1-255 bytes. Returns bytes, 0 when too long. */
size_t socks5_userpass(const char *user, const char *pass, uint8_t *buf, size_t len);
/* RFC 1929 reply (2 bytes): 1 ok, 0 need more, -1 refused or malformed. */
int socks5_parse_userpass(const uint8_t *buf, size_t len);

/* CONNECT request by domain name (1-255 bytes) or by address. Returns bytes (0: too long). */
size_t socks5_connect_name(const char *name, uint16_t port, uint8_t *buf, size_t len);
size_t socks5_connect_addr(const struct addr *a, uint16_t port, uint8_t *buf, size_t len);

/*
 * CONNECT reply. Returns the reply's length when complete (bytes after it are tunnel
 * data), 0 when more bytes are needed, -1 on a failure or protocol violation with *reason
 * set (a SOCKS reply code maps to its own reason; violations to PROXY_BAD_RESPONSE).
 * On success *bound is set when the reply carried an address (may be NULL).
 */
long socks5_parse_connect(const uint8_t *buf, size_t len, enum reason *reason,
    struct addr *bound);

/* The reason for a SOCKS5 reply code (0x01-0x08, others: PROXY_BAD_RESPONSE). */
enum reason socks5_reply_reason(uint8_t code);

#endif
