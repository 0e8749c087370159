/* libFuzzer: proxy URLs as libproxy (fed by a PAC file) returns them, and proxy variables
 * as route = system checks them (proxyenv_check). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/proxyurl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proxy_route e, e2;
	const char *err;
	char buf[512], norm[EGRESS_HOST_INPUT_MAX + 16], *z;
	enum proxyenv_kind k;

	/* a variable's value is a C string: up to the first NUL */
	if ((z = malloc(size + 1)) != NULL) {
		memcpy(z, data, size);
		z[size] = '\0';
		if (proxyenv_check(z, &k, norm, sizeof(norm), &err) == 0) {
			/* what is handed to libproxy is itself accepted, as the same kind, and
			 * a proxy is a proxy URL egressd reads the same way */
			enum proxyenv_kind k2;
			char norm2[sizeof(norm)];

			if (proxyenv_check(norm, &k2, norm2, sizeof(norm2), &err) != 0 || k2 != k ||
			    strcmp(norm, norm2) != 0)
				__builtin_trap();
			if (k == PROXYENV_PROXY && proxyurl_parse(norm, strlen(norm), &e, &err) != 0)
				__builtin_trap();
		}
		free(z);
	}
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
