/* libFuzzer: the HTTP forwarding path's response framing (docs/redirects.md): a response head as
 * httpresp parses it, its framing (http_response_framing), the head egressd rebuilds for
 * the client (http_build_client_response), and the body framer (http_body_framer) over
 * what follows. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "egressd/http.h"
#include "egressd/httpresp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[EGRESS_RESPONSE_HEAD_MAX + 1024];
	struct httpresp r, r2;
	enum http_resp_body kind;
	uint64_t len;

	if (size < 1)
		return 0;
	bool head_req = data[0] & 1;
	const char *p = (const char *)data + 1;
	size--;
	if (httpresp_parse(p, size, 0, &r) != HTTPRESP_OK)
		return 0;
	if (http_response_framing(&r, head_req, &kind, &len) == 0) {
		if (kind == HTTP_RESP_LENGTH && len == 0)
			__builtin_trap();
		struct http_body_framer f;
		bool done = false;
		http_body_framer_init(&f, kind, len);
		long k = http_body_framer_feed(&f, p + r.head_len, size - r.head_len, &done);
		if (k > (long)(size - r.head_len) || (k >= 0 && kind == HTTP_RESP_LENGTH &&
		    (uint64_t)k > len))
			__builtin_trap();
	}
	size_t n = http_build_client_response(&r, data[0] & 2, out, sizeof(out));
	/* what egressd sends must itself be a valid head with the same status and framing
	 * (Via adds a header: at the header limit the result is past what egressd's own
	 * parser takes, which is no client's limit) */
	if (n > 0 && r.nheaders + 1 < EGRESS_HEADER_COUNT_MAX) {
		if (httpresp_parse(out, n, sizeof(out), &r2) != HTTPRESP_OK ||
		    r2.status != r.status || r2.head_len != n)
			__builtin_trap();
		enum http_resp_body k2;
		uint64_t l2;
		int a = http_response_framing(&r, head_req, &kind, &len);
		int b = http_response_framing(&r2, head_req, &k2, &l2);
		if (a != b || (a == 0 && (kind != k2 || len != l2)))
			__builtin_trap();
	}
	return 0;
}
