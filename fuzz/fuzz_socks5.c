/* libFuzzer: SOCKS5 replies from a hostile proxy. */
#include <stddef.h>
#include <stdint.h>

#include "egressd/socks5.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum reason r;
	struct addr a;
	uint8_t m;
	long n;

	(void)socks5_parse_method(data, size, size & 1, &m);
	(void)socks5_parse_userpass(data, size);
	n = socks5_parse_connect(data, size, &r, &a);
	if (n > 0 && (size_t)n > size)
		__builtin_trap();
	return 0;
}
