/*
 * host - canonicalize a destination host[:port] for authorization.
 *
 * Owns: the one definition of a canonical destination. Everything that authorizes (grant
 * matching, redirect re-authorization, route lookup, the decision log's "dest") uses the
 * canonical form produced here, never client bytes.
 * Callers: common/pattern, egressd (CONNECT targets, absolute URLs, Location), executor
 * (WorkUnit destinations). No allocation; nothing to free.
 */
#ifndef EGRESS_HOST_H
#define EGRESS_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/addr.h"
#include "common/limits.h"

enum host_kind { HOST_NAME, HOST_IPV4, HOST_IPV6 };

struct host {
	enum host_kind kind;
	char name[EGRESS_HOSTNAME_MAX + 1]; /* lowercase A-label name, or canonical address text
	                                       (IPv6 without brackets) */
	struct addr addr;                   /* valid when kind != HOST_NAME */
	uint16_t port;                      /* 0 when no port was given */
};

/* Why an input was refused. host_err_str gives a human sentence. */
enum host_err {
	HOST_OK = 0,
	HOST_ERR_EMPTY,
	HOST_ERR_TOO_LONG,          /* name over 253, or input over EGRESS_HOST_INPUT_MAX */
	HOST_ERR_LABEL_TOO_LONG,
	HOST_ERR_EMPTY_LABEL,       /* "a..b", leading dot, or two trailing dots */
	HOST_ERR_USERINFO,          /* contains '@' */
	HOST_ERR_PERCENT,           /* percent-encoding */
	HOST_ERR_BACKSLASH,
	HOST_ERR_CONTROL,           /* NUL, control characters, DEL */
	HOST_ERR_SPACE,
	HOST_ERR_WILDCARD,          /* '*' */
	HOST_ERR_BAD_CHAR,          /* anything else outside LDH / IDN */
	HOST_ERR_IDNA,              /* libidn2 refused the internationalized name */
	HOST_ERR_NUMERIC,           /* non-canonical numeric form (octal, hex, short, integer) */
	HOST_ERR_IPV6,              /* bad IPv6 literal, missing bracket, zone id */
	HOST_ERR_PORT,              /* port not strict decimal 1-65535 */
	HOST_ERR_PORT_MISSING,      /* a port was required (host_parse with HOST_REQUIRE_PORT) */
	HOST_ERR_PORT_FORBIDDEN,    /* a port was given where none is allowed */
	HOST_ERR_HYPHEN,            /* label starting or ending with '-' */
};

/* Flags for host_parse. */
#define HOST_REQUIRE_PORT  0x1   /* "host:port" mandatory (CONNECT) */
#define HOST_NO_PORT       0x2   /* a bare host only (no ":port") */

/*
 * Canonicalize s (len bytes; may contain anything, NUL included): lowercase; at most one
 * trailing dot removed; internationalized names to A-labels (libidn2, IDNA2008 +
 * TR46 non-transitional), invalid ones refused; existing "xn--" labels must survive a
 * decode/encode round trip unchanged; label <= 63 and name <= 253; refuse '@', '%', '\\',
 * control characters and NUL, spaces, empty labels, '*', any ASCII outside letters, digits,
 * '-' and '.' (so '_' too), labels starting or ending with '-'; the result of TR46 mapping
 * is judged again (a fullwidth '@' is still '@'). IPv6 literals only in brackets when a
 * port may follow ("[2001:db8::1]:443"); with HOST_NO_PORT both "2001:db8::1" and
 * "[2001:db8::1]" are accepted; zone ids never. IPv4 literals only in canonical dotted-quad
 * form (a trailing dot is removed first); every other numeric form, and any name whose last
 * label is all digits or 0x-hex, is HOST_ERR_NUMERIC. Port strict decimal 1-65535, no sign,
 * no leading zeros. HOST_REQUIRE_PORT together with HOST_NO_PORT is HOST_ERR_PORT.
 * Returns HOST_OK and fills *out (out may be NULL to validate only), or the reason for
 * refusal; on refusal *out is zeroed. Thread-safe.
 */
enum host_err host_parse(const char *s, size_t len, int flags, struct host *out);

/* Human sentence for an error ("the host contains '@' (userinfo is not allowed)"). */
const char *host_err_str(enum host_err e);

/* "name:port" or "[v6]:port" into buf (EGRESS_HOSTPORT_MAX + 1 bytes); port 0 omits it
 * ("name", "[v6]": IPv6 is always bracketed so the text re-parses under every flag).
 * Returns buf, or NULL (buf set to "") when len is too small. */
const char *host_to_str(const struct host *h, char *buf, size_t len);

#endif
