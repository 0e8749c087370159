/*
 * fuzz_grant - common/grant: json_loadb then grant_from_json, and the JSON round trip.
 *
 * Invariants: an accepted grant respects every bound of grant.h, prints to JSON that parses
 * back to a grant printing identically, and frees cleanly (LeakSanitizer watches).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/grant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t jerr;
	char err[256];
	json_t *o, *j, *j2;
	struct grant *g, *g2;

	if (size > EGRESS_CONTROL_LINE_MAX)
		return 0;
	o = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (o == NULL)
		return 0;
	g = grant_from_json(o, err, sizeof(err));
	json_decref(o);
	if (g == NULL) {
		if (err[0] == '\0')
			abort();
		return 0;
	}
	if (!grant_principal_valid(g->principal) || g->nallow > EGRESS_GRANT_ENTRIES_MAX ||
	    g->ncredential_origin > EGRESS_GRANT_ENTRIES_MAX ||
	    g->allow_address.n > EGRESS_GRANT_CIDRS_MAX || g->max_connections == 0 ||
	    g->max_connections > EGRESS_GRANT_CONNECTIONS_MAX ||
	    g->lifetime_s > EGRESS_GRANT_LIFETIME_MAX_S)
		abort();
	j = grant_to_json(g);
	if (j == NULL)
		abort();
	g2 = grant_from_json(j, err, sizeof(err));
	if (g2 == NULL)
		abort();
	j2 = grant_to_json(g2);
	if (j2 == NULL || !json_equal(j, j2))
		abort();
	/* every allow entry admits its own host */
	for (size_t i = 0; i < g->nallow; i++) {
		const struct dest_pattern *p = &g->allow[i];
		if (!p->wildcard && !grant_allows(g, p->scheme == SCHEME_HTTP ? SCHEME_HTTP :
		    SCHEME_HTTPS, &p->host, p->port, NULL))
			abort();
	}
	json_decref(j);
	json_decref(j2);
	grant_free(g);
	grant_free(g2);
	return 0;
}
