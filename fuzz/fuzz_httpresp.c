/* libFuzzer: the one response head parser (egressd/httpresp.h): origins through the HTTP
 * forwarder, upstream proxies answering CONNECT, PAC servers. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "egressd/httpresp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct httpresp r;

	if (httpresp_parse((const char *)data, size, 0, &r) == HTTPRESP_OK) {
		if (r.head_len > size || r.nheaders > EGRESS_HEADER_COUNT_MAX ||
		    r.status < 100 || r.status > 599 || (r.minor != 0 && r.minor != 1))
			__builtin_trap();
		for (size_t i = 0; i < r.nheaders; i++)
			(void)httpresp_value_has_token(r.headers[i].value, r.headers[i].value_len, "close");
		(void)httpresp_find(&r, "proxy-authenticate", 0);
	}
	return 0;
}
