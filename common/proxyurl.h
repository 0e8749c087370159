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

/*
 * A proxy variable of the caller's environment (http_proxy, https_proxy, all_proxy, any
 * case) as `route = system` reads it, checked before libproxy sees it: libproxy ignores a
 * value it cannot parse and answers direct://, so a set-but-unreadable variable must stop
 * the route instead (docs/routing.md, "Proxy variables"). Accepted:
 *   wpad:...                       -> PROXYENV_WPAD (egressd's WPAD by DNS)
 *   pac+file:///ABS, pac+http(s)://HOST...  -> PROXYENV_PAC_FILE / PROXYENV_PAC_URL
 *   direct://, http://, https://, socks5://, socks5h://, socks:// proxy URLs (proxyurl_parse)
 *   HOST:PORT without a scheme     -> read as http://HOST:PORT (curl's reading; the port is
 *                                     required, since curl defaults to 1080 and libproxy
 *                                     would not read it at all)
 * Refused: any byte <= 0x20 or 0x7f (no trimming: curl documents none, libproxy does none,
 * so " wpad://" is a mistake to name, not to guess), other schemes, bad hosts or ports.
 * On success *norm (normlen bytes) holds the value to hand to libproxy (the http:// form
 * for HOST:PORT; otherwise the value itself). Returns 0, or -1 with *err a static sentence.
 */
enum proxyenv_kind {
	PROXYENV_PROXY = 0,
	PROXYENV_PAC_FILE,
	PROXYENV_PAC_URL,
	PROXYENV_WPAD,
};
int proxyenv_check(const char *value, enum proxyenv_kind *kind, char *norm, size_t normlen,
    const char **err);

#endif
