/*
 * pattern - destination patterns: the allow entries of a grant.
 *
 * Syntax: scheme://host[:port] with scheme https, http or tcp; host exact (canonical, see
 * common/host) or "*.suffix" (matches names strictly below suffix at a label boundary, never
 * the apex; a suffix that is itself a public suffix, such as "*.com" or "*.co.uk", is
 * refused, checked with libpsl). Default ports: https 443, http 80; tcp needs a port.
 * An IP literal host is allowed as an exact entry (it names that address).
 * Callers: grants, admission (WorkUnit destinations), route. No allocation.
 */
#ifndef EGRESS_PATTERN_H
#define EGRESS_PATTERN_H

#include <stdbool.h>
#include <stdint.h>

#include "common/host.h"

enum dest_scheme { SCHEME_HTTPS, SCHEME_HTTP, SCHEME_TCP };

struct dest_pattern {
	enum dest_scheme scheme;
	bool wildcard;                         /* "*.suffix" */
	struct host host;                      /* for wildcard: host.name is the suffix */
	uint16_t port;                         /* always set (defaults applied) */
};

/*
 * Parse one entry (NUL-terminated, at most EGRESS_DEST_PATTERN_MAX bytes). The scheme is
 * lowercase only; no userinfo, path, query or fragment. A wildcard suffix needs at least
 * two labels and must not be a public suffix (ICANN or private section); when no public
 * suffix list can be loaded every wildcard entry is refused. Returns 0 and fills *out
 * (may be NULL), or -1 with *err (may be NULL) set to a static human sentence and *out
 * zeroed. Thread-safe (the list is loaded once).
 */
int pattern_parse(const char *s, struct dest_pattern *out, const char **err);

/* Canonical text of the entry ("https://api.example.com:443" is printed without the
 * default port: "https://api.example.com"; tcp:// always with its port; IPv6 bracketed).
 * buf of EGRESS_DEST_PATTERN_MAX + 1 bytes; NULL (buf "") when len is too small. The text
 * parses back to the same entry. */
const char *pattern_to_str(const struct dest_pattern *p, char *buf, size_t len);

const char *scheme_str(enum dest_scheme s);

/* Is the canonical name a public suffix (libpsl, private section included; a single label
 * counts as one)? 1 yes, 0 no, -1 when no usable list is loaded (callers fail closed). */
int pattern_public_suffix(const char *name);

/*
 * Does pattern p admit a hop with this scheme to canonical host h (from host_parse) on
 * port? CONNECT hops are checked with SCHEME_HTTPS and match both https:// and tcp://
 * entries; absolute-form HTTP hops use SCHEME_HTTP and match only http:// entries; a
 * SCHEME_TCP hop matches only tcp://. Port must equal the entry's port (0 never matches).
 * A wildcard matches names strictly below its suffix at a label boundary, never the apex
 * and never an IP literal; an exact IP entry matches only that address in that family
 * (198.51.100.7 does not match ::ffff:198.51.100.7). NULL arguments never match.
 */
bool pattern_match(const struct dest_pattern *p, enum dest_scheme hop_scheme,
    const struct host *h, uint16_t port);

/* True when pattern a admits everything pattern b admits (used by admission: WorkUnit
 * destinations must lie within the trusted model destinations). Deliberately strict: the
 * schemes and ports must be equal (a tcp:// entry does not cover an https:// one);
 * "*.s" covers "*.s", "*.x.s" and "x.s", never "s". */
bool pattern_covers(const struct dest_pattern *a, const struct dest_pattern *b);

#endif
