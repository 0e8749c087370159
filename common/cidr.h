/*
 * cidr - parse and match lists of CIDR prefixes (IPv4 and IPv6).
 *
 * Owns: struct cidr_set and its storage. Callers: grants (allow_address), egressd's
 * operator overrides (allow_special_address). A set is immutable after parsing;
 * cidr_set_free accepts NULL.
 */
#ifndef EGRESS_CIDR_H
#define EGRESS_CIDR_H

#include <stdbool.h>
#include <stddef.h>

#include "common/addr.h"

struct cidr {
	struct addr net;     /* host bits are zero */
	unsigned prefix;     /* 0-32 or 0-128 */
};

struct cidr_set {
	struct cidr *v;
	size_t n;
};

/*
 * Parse "198.51.100.0/24" or "2001:db8::/32" or a bare address (a /32 or /128).
 * The address part must be a canonical literal (common/addr); the prefix is decimal
 * without sign or leading zeros and at most 32/128; host bits set below the prefix are
 * refused ("10.0.0.1/8" is an error: say what you mean). No surrounding whitespace.
 * Returns 0, or -1 with *err set to a static message.
 */
int cidr_parse(const char *s, struct cidr *out, const char **err);
/* Text form "net/prefix" into buf (EGRESS_ADDRSTR_MAX + 4 bytes is enough); "" if short. */
const char *cidr_to_str(const struct cidr *c, char *buf, size_t len);

/* A new set is zero-initialized ({0}). Append one parsed entry; returns 0 or -1 with
 * errno ENOMEM, or E2BIG when the set already holds EGRESS_GRANT_CIDRS_MAX entries. */
int cidr_set_add(struct cidr_set *set, const struct cidr *c);
/* Parse and append; -1 with *err on a bad entry (the set is unchanged then). */
int cidr_set_add_str(struct cidr_set *set, const char *s, const char **err);
bool cidr_match(const struct cidr *c, const struct addr *a);
/* True when any entry contains a (an IPv4 set never matches IPv6 and vice versa, except
 * that a v4-mapped IPv6 address is matched as its IPv4 address). */
bool cidr_set_match(const struct cidr_set *set, const struct addr *a);
void cidr_set_free(struct cidr_set *set);   /* frees entries; set itself is caller's */

#endif
