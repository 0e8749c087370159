/* libFuzzer: redirect Location resolution (egressd/redirect) and the refusal formatter.
 * Input: first byte picks the base path form, the rest is the Location value. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "egressd/redirect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *bases[] = { "/", "/a/b/c?q=1", "", "/a|b", "/x/../y/" };
	struct host h;
	struct redirect_target t;
	char out[1024];
	enum redirect_err e;

	if (size < 1)
		return 0;
	const char *bp = bases[data[0] % 5];
	if (host_parse(data[0] & 0x80 ? "2001:db8::1" : "a.example", data[0] & 0x80 ? 11 : 9,
	    HOST_NO_PORT, &h) != HOST_OK)
		__builtin_trap();
	e = redirect_resolve((const char *)data + 1, size - 1, &h, data[0] & 0x40 ? 8080 : 80,
	    bp, strlen(bp), &t);
	if (e == REDIRECT_OK) {
		struct redirect_target t2;
		struct host b2;
		/* the canonical URL is itself a valid Location resolving to the same target */
		if (t.url[0] == '\0' || t.path[0] != '/' || t.port == 0)
			__builtin_trap();
		if (host_parse(t.host.name, strlen(t.host.name), HOST_NO_PORT, &b2) != HOST_OK)
			__builtin_trap();
		if (redirect_resolve(t.url, strlen(t.url), &h, 80, "/", 1, &t2) != REDIRECT_OK ||
		    strcmp(t.url, t2.url) != 0 || t.port != t2.port)
			__builtin_trap();
		(void)redirect_same_origin(&t, &h, 80);
		if (redirect_format_refusal(REASON_REDIRECT_DENIED, t.url, strlen(t.url),
		    "not in the grant", out, sizeof(out)) == 0)
			__builtin_trap();
	} else {
		if (redirect_format_refusal(redirect_err_reason(e), (const char *)data + 1,
		    size - 1, redirect_err_str(e), out, sizeof(out)) == 0)
			__builtin_trap();
	}
	return 0;
}
