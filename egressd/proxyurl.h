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

enum route_kind {
	ROUTE_DIRECT = 0,
	ROUTE_HTTP_PROXY,     /* http://proxy:port  — CONNECT / absolute-form through it */
	ROUTE_HTTPS_PROXY,    /* https://proxy:port — TLS to the proxy, then as above */
	ROUTE_SOCKS5,         /* socks5://proxy:port — RFC 1928 */
};

struct route_entry {
	enum route_kind kind;
	struct host proxy;        /* canonical proxy host (name or literal), port set */
	bool had_userinfo;        /* the source URL carried user:pass (ignored, stripped) */
};

/* Parse one entry. Refused: other schemes (socks4, ftp, ...), paths other than "" or "/",
 * query/fragment, bad host or port. Default ports: http 80, https 443, socks5 1080.
 * Returns 0, or -1 with *err set to a static sentence. */
int proxyurl_parse(const char *s, size_t len, struct route_entry *out, const char **err);

/* "direct", "http://proxy.corp:3128", "socks5://10.1.2.3:1080" (never credentials). */
const char *proxyurl_to_str(const struct route_entry *e, char *buf, size_t len);

const char *route_kind_str(enum route_kind k);

#endif
