/* libFuzzer: route helper replies (the helper evaluates PAC scripts: less trusted),
 * requests (as the helper parses them), and libproxy's debug output as the helper reads it
 * (it holds what a PAC script returned). */
#include <stddef.h>
#include <stdint.h>

#include "common/routeproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct routeproto_reply r;
	char url[EGRESS_ROUTE_LINE_MAX];
	uint64_t id;

	if (routeproto_parse_reply((const char *)data, size, &r) == 0) {
		if (r.ok && (r.n == 0 || r.n > EGRESS_ROUTE_PROXIES_MAX))
			__builtin_trap();
		for (size_t i = 0; i < r.n; i++)
			if (r.entries[i].had_userinfo)
				__builtin_trap();
	}
	(void)routeproto_parse_request((const char *)data, size, &id, url, sizeof(url));
	if (routeproto_libproxy_discovers((const char *)data, size, "pac+file:///p") < 0)
		__builtin_trap();
	return 0;
}
