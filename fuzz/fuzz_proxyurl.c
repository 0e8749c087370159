/* libFuzzer: proxy URLs as libproxy (fed by a PAC file) returns them. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/proxyurl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proxy_route e, e2;
	const char *err;
	char buf[512];

	if (proxyurl_parse((const char *)data, size, &e, &err) == 0) {
		if (e.kind == PROXY_DIRECT)
			return 0;    /* printed as "direct" for people; the URL form is direct:// */
		proxyurl_to_str(&e, buf, sizeof(buf));
		/* the printed form re-parses to the same entry, without credentials */
		if (proxyurl_parse(buf, strlen(buf), &e2, &err) != 0 || e2.kind != e.kind ||
		    e2.had_userinfo)
			__builtin_trap();
	}
	return 0;
}
