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

/* Parse one entry. Returns 0, or -1 with *err set to a static human sentence. */
int pattern_parse(const char *s, struct dest_pattern *out, const char **err);

/* Canonical text of the entry ("https://api.example.com:443" is printed without the
 * default port: "https://api.example.com"). */
const char *pattern_to_str(const struct dest_pattern *p, char *buf, size_t len);

const char *scheme_str(enum dest_scheme s);

/*
 * Does pattern p admit a hop with this scheme to canonical host h on port?
 * CONNECT hops are checked with SCHEME_HTTPS and match both https:// and tcp:// entries;
 * absolute-form HTTP hops use SCHEME_HTTP and match only http:// entries.
 */
bool pattern_match(const struct dest_pattern *p, enum dest_scheme hop_scheme,
    const struct host *h, uint16_t port);

/* True when pattern a admits everything pattern b admits (used by admission: WorkUnit
 * destinations must lie within the trusted model destinations). */
bool pattern_covers(const struct dest_pattern *a, const struct dest_pattern *b);

#endif
