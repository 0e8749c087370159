/*
 * fuzz_cidr - common/cidr: cidr_parse, cidr_to_str, sets and matching.
 *
 * Input: lines; each is parsed as a CIDR and added to a set. Invariants: an accepted
 * entry prints and re-parses to itself, contains its own network address, and the set
 * matches it; a refused entry leaves the set unchanged and says why.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/cidr.h"
#include "common/limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cidr_set set = { 0 };
	char line[256];
	size_t i = 0;

	if (size > 8192)
		return 0;
	while (i < size) {
		size_t n = 0;

		while (i < size && data[i] != '\n' && n < sizeof(line) - 1)
			line[n++] = (char)data[i++];
		if (i < size && data[i] == '\n')
			i++;
		line[n] = '\0';

		struct cidr c, c2;
		const char *err = NULL;
		size_t before = set.n;
		char buf[EGRESS_ADDRSTR_MAX + 8];

		if (cidr_parse(line, &c, &err) != 0) {
			if (err == NULL)
				abort();
			if (cidr_set_add_str(&set, line, &err) == 0 || set.n != before)
				abort();
			continue;
		}
		cidr_to_str(&c, buf, sizeof(buf));
		if (cidr_parse(buf, &c2, &err) != 0 || c2.prefix != c.prefix ||
		    !addr_equal(&c.net, &c2.net))
			abort();
		if (!cidr_match(&c, &c.net))
			abort();
		if (cidr_set_add(&set, &c) == 0 && !cidr_set_match(&set, &c.net))
			abort();
	}
	/* A few fixed probes over whatever set was built. */
	static const char *const probes[] = { "10.0.0.1", "::ffff:10.0.0.1", "2001:db8::1",
	    "0.0.0.0", "::" };
	for (size_t k = 0; k < sizeof(probes) / sizeof(probes[0]); k++) {
		struct addr a;

		if (addr_parse_literal(probes[k], strlen(probes[k]), &a) == ADDR_LIT_NONE)
			abort();
		(void)cidr_set_match(&set, &a);
	}
	cidr_set_free(&set);
	return 0;
}
