/*
 * grant - the immutable authority set of one principal, and its JSON form.
 *
 * Owns: struct grant and everything it points to (grant_free accepts NULL). A grant is
 * built once (from JSON on the control socket, or from a [grant NAME] section of
 * egressd.ini) and never modified afterwards: egressd shares it read-only between
 * connections (reference counted by egressd, not here).
 * Callers: egressd (authorization), egress-exec (builds the grant.create request).
 *
 * JSON form (control protocol "grant" object and the decision log's grant summary):
 *   { "principal": "run-1a2b", "allow": ["https://api.example.com", "tcp://git.example:22"],
 *     "allow_address": ["198.51.100.0/24"], "pinning": "preferred"|"required",
 *     "credential_origin": ["https://api.example.com"],
 *     "limits": { "connections": 64, "bytes": 1073741824, "lifetime_s": 3600 },
 *     "connection": "anthropic" }
 * Unknown keys are errors. Missing limits take the defaults below (0 = unlimited only for
 * bytes; lifetime 0 = no expiry, allowed only for static grants from egressd.ini: the
 * control socket must refuse lifetime_s 0 itself, this parser cannot tell the two apart).
 * "principal" and "allow" are required ("allow" may be empty: such a grant admits nothing);
 * the rest is optional. "connection" names a model connection of egressd's connections
 * file (1-64 of [A-Za-z0-9._-]); only the name travels, never a credential: egressd resolves
 * it at grant.create and refuses an unknown one (docs/model-connections.md). grant_to_json
 * writes "connection" only when the grant names one. Ranges: connections 1..EGRESS_GRANT_CONNECTIONS_MAX, bytes
 * 0..INT64_MAX, lifetime_s 0..EGRESS_GRANT_LIFETIME_MAX_S, all JSON integers. "allow" and
 * "credential_origin" hold at most EGRESS_GRANT_ENTRIES_MAX entries (common/pattern syntax;
 * credential_origin only https:// and http://), allow_address at most
 * EGRESS_GRANT_CIDRS_MAX (common/cidr). Strings with embedded NUL are refused. Parse the
 * text with JSON_REJECT_DUPLICATES: a repeated key must not silently replace another.
 */
#ifndef EGRESS_GRANT_H
#define EGRESS_GRANT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cidr.h"
#include "common/limits.h"
#include "common/pattern.h"

enum pinning { PINNING_PREFERRED = 0, PINNING_REQUIRED };

#define GRANT_DEFAULT_CONNECTIONS 64

struct grant {
	char principal[EGRESS_PRINCIPAL_MAX + 1];  /* [A-Za-z0-9._-], 1-64 chars */
	struct dest_pattern *allow;
	size_t nallow;
	struct cidr_set allow_address;
	enum pinning pinning;
	struct dest_pattern *credential_origin;
	size_t ncredential_origin;
	uint32_t max_connections;
	uint64_t max_bytes;        /* 0 = unlimited */
	uint32_t lifetime_s;       /* 0 = no expiry */
	char connection[EGRESS_CONNECTION_NAME_MAX + 1]; /* model connection; "" = none */
};

/* Parse and validate; a new grant (free with grant_free), or NULL with err ("allow[2]:
 * ...", err may be NULL) on any problem, including ENOMEM. obj is not modified. */
struct grant *grant_from_json(const json_t *obj, char *err, size_t errlen);
/* New reference in the JSON form above (entries in canonical text, every key present);
 * grant_from_json of it gives an equal grant. NULL on ENOMEM or g NULL. */
json_t *grant_to_json(const struct grant *g);
void grant_free(struct grant *g);

/* True when the principal label is acceptable: 1-64 of [A-Za-z0-9._-], but not "." or
 * ".." (the label may become a path component). */
bool grant_principal_valid(const char *s);

/*
 * Destination check: does any allow entry admit this hop? On a match *entry (may be NULL)
 * is the matching index. hop_scheme is SCHEME_HTTPS for CONNECT, SCHEME_HTTP for
 * absolute-form HTTP. IP-literal hosts match only entries naming that literal.
 */
bool grant_allows(const struct grant *g, enum dest_scheme hop_scheme, const struct host *h,
    uint16_t port, size_t *entry);

/*
 * Is a CONNECT to h:port expected to carry TLS? True when an https:// entry admits it (an
 * https:// entry is the grant's mark for TLS, on any port; a tcp:// entry says nothing
 * about the protocol). egressd then checks the tunnel's ClientHello (the SNI check, also
 * done for every tunnel to port 443). NULL arguments: false.
 */
bool grant_expects_tls(const struct grant *g, const struct host *h, uint16_t port);

/* Does credential_origin bind credentials to this origin (scheme, host, port)? The scheme
 * must equal the entry's (https credentials never follow a redirect to http); host and port
 * as in pattern_match. NULL arguments: false. */
bool grant_credentials_bound(const struct grant *g, enum dest_scheme scheme,
    const struct host *h, uint16_t port);

#endif
