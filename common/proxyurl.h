/*
 * proxyurl - route entries: DIRECT or an upstream proxy, parsed from libproxy's answers
 * ("direct://", "http://host:port", "https://host:port", "socks://", "socks5://host:port")
 * and from egressd.ini's `route = proxy URL`.
 *
 * Owns: nothing (fixed-size struct). Callers: route (helper replies, static proxy config),
 * upstream (connecting through the proxy), the decision log (route text without
 * credentials). Userinfo in a proxy URL is never used as a credential: it is stripped and
 * flagged (credentials live in egressd's root-only credentials file), so that a credential
 * never appears in a route string, a log record or a cache key.
 */
#ifndef EGRESS_PROXYURL_H
#define EGRESS_PROXYURL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/host.h"

enum proxy_kind {
	PROXY_DIRECT = 0,
	PROXY_HTTP,     /* http://proxy:port  — CONNECT / absolute-form through it */
	PROXY_HTTPS,    /* https://proxy:port — TLS to the proxy, then as above */
	PROXY_SOCKS5,         /* socks5://proxy:port — RFC 1928 */
};

struct proxy_route {
	enum proxy_kind kind;
	struct host proxy;        /* canonical proxy host (name or literal), port set */
	bool had_userinfo;        /* the source URL carried user:pass (ignored, stripped) */
};

/* Parse one entry. Refused: other schemes (socks4, ftp, ...), paths other than "" or "/",
 * query/fragment, bad host or port. Default ports: http 80, https 443, socks5 1080.
 * Returns 0, or -1 with *err set to a static sentence. */
int proxyurl_parse(const char *s, size_t len, struct proxy_route *out, const char **err);

/* "direct", "http://proxy.corp:3128", "socks5://10.1.2.3:1080" (never credentials). */
const char *proxyurl_to_str(const struct proxy_route *e, char *buf, size_t len);

const char *proxy_kind_str(enum proxy_kind k);

#endif
