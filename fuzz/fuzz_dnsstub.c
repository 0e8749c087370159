/* libFuzzer: a DNS query datagram from a hostile worker to its stub resolver
 * (egressd/dnsstub: the parser and the answer built from it). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "egressd/dnsstub.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dnsq q;
	uint8_t out[DNS_HEADER_LEN + DNS_NAME_WIRE_MAX + 4 + 16];
	enum dnsq_result r = dnsstub_parse(data, size, &q);
	uint32_t a = 0xc6120001u;
	size_t n;

	if (r == DNSQ_OK) {
		/* Invariants the stub relies on. */
		if (q.qend < DNS_HEADER_LEN + 5 || q.qend > size ||
		    q.qend - DNS_HEADER_LEN > DNS_NAME_WIRE_MAX + 4)
			__builtin_trap();
		if (strlen(q.name) > DNS_NAME_WIRE_MAX)
			__builtin_trap();
		for (const char *p = q.name; *p != '\0'; p++)
			if (*p >= 'A' && *p <= 'Z')
				__builtin_trap();
		n = dnsstub_answer(data, r, &q, DNS_RCODE_NOERROR, &a, 300, out, sizeof(out));
		if (n != q.qend + 16 || memcmp(out + DNS_HEADER_LEN, data + DNS_HEADER_LEN,
		    q.qend - DNS_HEADER_LEN) != 0)
			__builtin_trap();
		n = dnsstub_answer(data, r, &q, DNS_RCODE_NXDOMAIN, NULL, 0, out, sizeof(out));
		if (n != q.qend)
			__builtin_trap();
	} else {
		n = dnsstub_answer(data, r, &q, DNS_RCODE_FORMERR, NULL, 0, out, sizeof(out));
		if ((r == DNSQ_DROP) != (n == 0))
			__builtin_trap();
	}
	return 0;
}
