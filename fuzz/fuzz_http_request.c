/* libFuzzer: egressd's strict request-head parser, the forwarded-head builder and the
 * chunked framer (egressd/http). Invariants are checked, not just crashes. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char out[EGRESS_REQUEST_HEAD_MAX + 1024];

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_request req;
	enum reason why;
	const char *s = (const char *)data;
	enum http_parse r = http_parse_request(s, size, &req, &why);

	/* The intercepted-tunnel form (origin-form target, Host required). */
	if (http_parse_origin_request(s, size, &req, &why) == HTTP_PARSE_OK &&
	    (req.head_len > size || req.port == 0 || req.method == HTTP_CONNECT ||
	    req.path_len == 0 || req.path[0] != '/' || req.host.name[0] == '\0'))
		__builtin_trap();
	r = http_parse_request(s, size, &req, &why);

	if (r == HTTP_PARSE_OK) {
		if (req.head_len > size || req.head_len > EGRESS_REQUEST_HEAD_MAX ||
		    req.nheaders > EGRESS_HEADER_COUNT_MAX || req.port == 0)
			__builtin_trap();
		if (req.method == HTTP_CONNECT && req.scheme != SCHEME_HTTPS)
			__builtin_trap();
		size_t n = http_build_forward_head(&req, out, sizeof(out));
		/* the forwarded head never carries credentials meant for egressd */
		for (size_t i = 0; i + 20 <= n; i++)
			if ((i == 0 || out[i - 1] == '\n') &&
			    strncasecmp(out + i, "proxy-authorization:", 20) == 0)
				__builtin_trap();
		/* the rest may be a chunked body */
		struct http_chunked c;
		bool done = false;
		http_chunked_init(&c);
		long k = http_chunked_feed(&c, s + req.head_len, size - req.head_len, &done);
		if (k > (long)(size - req.head_len))
			__builtin_trap();
	} else if (r == HTTP_PARSE_ERROR) {
		if (why == REASON_ALLOWED || reason_http_status(why) < 400)
			__builtin_trap();
	}
	/* The response side is fuzz_httpresp and fuzz_respframe (one parser, egressd/httpresp). */
	return 0;
}
