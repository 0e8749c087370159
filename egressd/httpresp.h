/*
 * httpresp - the one parser of an HTTP/1.x response head from an upstream (an origin, an
 * upstream proxy answering CONNECT, a PAC server). Pure: no I/O, no allocation beyond the
 * caller's struct. One rule set for every caller: "HTTP/1.0" or "HTTP/1.1", a status of
 * 100-599, a reason phrase of VCHAR/obs-text/SP/HTAB, CRLF line ends only, token names,
 * no obs-fold.
 *
 * Owns: nothing; the parsed struct points into the caller's buffer, valid while it lives.
 * Callers: egressd/upstream (CONNECT through a proxy), egressd/tunnel (HTTP forwarding,
 * docs/redirects.md), egressd/pacfetch. Fuzzed by fuzz_httpresp and fuzz_respframe.
 * Hostile input: bounded by EGRESS_RESPONSE_HEAD_MAX and EGRESS_HEADER_COUNT_MAX; bare CR,
 * obs-fold, invalid token characters and malformed status lines are refused.
 */
#ifndef EGRESS_HTTPRESP_H
#define EGRESS_HTTPRESP_H

#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

struct httpresp_header {
	const char *name;   /* not NUL-terminated */
	size_t name_len;
	const char *value;  /* leading/trailing whitespace trimmed */
	size_t value_len;
};

struct httpresp {
	int minor;          /* HTTP/1.minor: 0 or 1 */
	int status;         /* 100-599 */
	const char *phrase;
	size_t phrase_len;
	size_t head_len;    /* bytes of the head including the final CRLFCRLF */
	size_t nheaders;
	struct httpresp_header headers[EGRESS_HEADER_COUNT_MAX];
};

enum httpresp_result {
	HTTPRESP_OK = 0,       /* complete head parsed */
	HTTPRESP_INCOMPLETE,   /* need more bytes (and len < limit) */
	HTTPRESP_TOO_LARGE,    /* head exceeds the limit or too many headers */
	HTTPRESP_INVALID,      /* not a valid HTTP/1.x response head */
};

/* Parse buf[0..len). limit caps the head (0 = EGRESS_RESPONSE_HEAD_MAX). */
enum httpresp_result httpresp_parse(const char *buf, size_t len, size_t limit,
    struct httpresp *out);

/* Case-insensitive header lookup: index of the n-th header named name, or -1. */
long httpresp_find(const struct httpresp *r, const char *name, size_t nth);

/* True when a comma-separated header list contains token (case-insensitive). */
int httpresp_value_has_token(const char *value, size_t len, const char *token);

#endif
