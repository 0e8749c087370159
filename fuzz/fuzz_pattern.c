/*
 * fuzz_pattern - common/pattern: pattern_parse, pattern_to_str round trip, and matching.
 *
 * Input: "<entry>\n<host>" (the host part optional). Invariants: an accepted entry prints
 * to text that parses back to an entry covering and covered by the first; an entry matches
 * its own host (exact) or a name directly below its suffix (wildcard) and never the apex;
 * every match of the fuzzed host obeys the label-boundary rule.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/pattern.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum dest_scheme
hop_for(enum dest_scheme s)
{
	return s == SCHEME_HTTP ? SCHEME_HTTP : SCHEME_HTTPS;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char entry[EGRESS_DEST_PATTERN_MAX + 64];
	char buf[EGRESS_DEST_PATTERN_MAX + 1], below[EGRESS_HOSTNAME_MAX + 8];
	const uint8_t *nl = memchr(data, '\n', size);
	size_t elen = nl != NULL ? (size_t)(nl - data) : size;
	struct dest_pattern p, p2;
	const char *err = NULL;

	if (elen >= sizeof(entry))
		elen = sizeof(entry) - 1;
	memcpy(entry, data, elen);
	entry[elen] = '\0';

	if (pattern_parse(entry, &p, &err) != 0) {
		if (err == NULL)
			abort();
		return 0;
	}
	if (p.port == 0 || (p.wildcard && p.host.kind != HOST_NAME))
		abort();
	if (pattern_to_str(&p, buf, sizeof(buf)) == NULL)
		abort();
	if (pattern_parse(buf, &p2, &err) != 0)
		abort();
	if (!pattern_covers(&p, &p2) || !pattern_covers(&p2, &p))
		abort();

	if (!p.wildcard) {
		if (!pattern_match(&p, hop_for(p.scheme), &p.host, p.port))
			abort();
	} else {
		struct host h;
		size_t sl = strlen(p.host.name);

		/* the apex is never matched */
		if (pattern_match(&p, hop_for(p.scheme), &p.host, p.port))
			abort();
		if (sl + 2 <= EGRESS_HOSTNAME_MAX) {
			below[0] = 'x';
			below[1] = '.';
			memcpy(below + 2, p.host.name, sl + 1);
			if (host_parse(below, sl + 2, HOST_NO_PORT, &h) == HOST_OK &&
			    !pattern_match(&p, hop_for(p.scheme), &h, p.port))
				abort();
		}
	}

	if (nl != NULL) {
		struct host h;
		size_t hl = size - (size_t)(nl - data) - 1;

		if (host_parse((const char *)nl + 1, hl, HOST_NO_PORT, &h) == HOST_OK) {
			for (int s = SCHEME_HTTPS; s <= SCHEME_TCP; s++) {
				if (!pattern_match(&p, (enum dest_scheme)s, &h, p.port))
					continue;
				if (p.wildcard) {
					size_t n = strlen(h.name), sl = strlen(p.host.name);
					if (h.kind != HOST_NAME || n < sl + 2 ||
					    h.name[n - sl - 1] != '.' ||
					    strcmp(h.name + n - sl, p.host.name) != 0)
						abort();
				} else if (h.kind != p.host.kind ||
				    strcmp(h.name, p.host.name) != 0) {
					abort();
				}
				if (s == SCHEME_HTTP && p.scheme != SCHEME_HTTP)
					abort();
				if (s == SCHEME_HTTPS && p.scheme == SCHEME_HTTP)
					abort();
			}
		}
	}
	return 0;
}
