/* libFuzzer: a TLS ClientHello peeked from a hostile worker's tunnel (egressd/clienthello). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "egressd/clienthello.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct clienthello ch;
	struct host h;
	bool absent;
	enum ch_result r = clienthello_parse(data, size, &ch);

	if (r == CH_OK) {
		/* Invariants a caller relies on. */
		if (ch.consumed == 0 || ch.consumed > size)
			__builtin_trap();
		if (ch.has_sni && (ch.sni[0] == '\0' || strlen(ch.sni) > EGRESS_HOSTNAME_MAX))
			__builtin_trap();
		for (size_t i = 0; i < ch.nalpn && i < EGRESS_ALPN_MAX; i++)
			if (strlen(ch.alpn[i]) > CH_ALPN_NAME_MAX)
				__builtin_trap();
		memset(&h, 0, sizeof(h));
		h.kind = HOST_NAME;
		memcpy(h.name, "api.example.com", sizeof("api.example.com"));
		if (clienthello_sni_check(&ch, &h, &absent) == REASON_ALLOWED && !absent &&
		    strcmp(ch.sni, h.name) != 0)
			__builtin_trap();
	}
	/* Every prefix of a complete hello must ask for more, never decide otherwise. */
	if (r == CH_OK && size > 0) {
		struct clienthello c2;
		enum ch_result r2 = clienthello_parse(data, ch.consumed - 1, &c2);
		if (r2 != CH_NEED_MORE)
			__builtin_trap();
	}
	return 0;
}
