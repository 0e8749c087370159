/* proxyurl.c - route entries from proxy URLs (see proxyurl.h). */
#define _GNU_SOURCE
#include "common/proxyurl.h"

#include "common/util.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct {
	const char *prefix;
	enum proxy_kind kind;
	uint16_t defport;
} schemes[] = {
	{ "http://",   PROXY_HTTP,  80 },
	{ "https://",  PROXY_HTTPS, 443 },
	{ "socks5://", PROXY_SOCKS5,      1080 },
	{ "socks5h://", PROXY_SOCKS5,     1080 },
	{ "socks://",  PROXY_SOCKS5,      1080 },  /* libproxy's name for SOCKS5 */
};

int
proxyurl_parse(const char *s, size_t len, struct proxy_route *out, const char **err)
{
	size_t i, plen, hs, he;
	const char *at;
	enum host_err herr;

	memset(out, 0, sizeof(*out));
	if (len > EGRESS_HOST_INPUT_MAX) {
		*err = "proxy URL too long";
		return -1;
	}
	if (len == 9 && strncasecmp(s, "direct://", 9) == 0) {
		out->kind = PROXY_DIRECT;
		return 0;
	}
	for (i = 0; i < EGRESS_NELEM(schemes); i++) {
		plen = strlen(schemes[i].prefix);
		if (len > plen && strncasecmp(s, schemes[i].prefix, plen) == 0)
			break;
	}
	if (i == EGRESS_NELEM(schemes)) {
		*err = "unsupported proxy scheme (use http://, https:// or socks5://)";
		return -1;
	}
	out->kind = schemes[i].kind;
	hs = plen;
	/* authority ends at '/', '?' or '#' */
	for (he = hs; he < len && s[he] != '/' && s[he] != '?' && s[he] != '#'; he++)
		;
	if (he < len && !(s[he] == '/' && he + 1 == len)) {
		*err = "a proxy URL has no path, query or fragment";
		return -1;
	}
	at = memrchr(s + hs, '@', he - hs);
	if (at != NULL) {
		out->had_userinfo = true;
		hs = (size_t)(at - s) + 1;
	}
	herr = host_parse(s + hs, he - hs, 0, &out->proxy);
	if (herr != HOST_OK) {
		*err = host_err_str(herr);
		return -1;
	}
	if (out->proxy.port == 0)
		out->proxy.port = schemes[i].defport;
	return 0;
}

const char *
proxy_kind_str(enum proxy_kind k)
{
	switch (k) {
	case PROXY_DIRECT:      return "direct";
	case PROXY_HTTP:  return "http";
	case PROXY_HTTPS: return "https";
	case PROXY_SOCKS5:      return "socks5";
	}
	return "unknown";
}

const char *
proxyurl_to_str(const struct proxy_route *e, char *buf, size_t len)
{
	char hp[EGRESS_HOSTPORT_MAX + 1];

	if (e->kind == PROXY_DIRECT) {
		snprintf(buf, len, "direct");
		return buf;
	}
	snprintf(buf, len, "%s://%s", proxy_kind_str(e->kind),
	    host_to_str(&e->proxy, hp, sizeof(hp)));
	return buf;
}

int
proxyenv_check(const char *value, enum proxyenv_kind *kind, char *norm, size_t normlen,
    const char **err)
{
	struct proxy_route pr;
	size_t len = strlen(value);

	*kind = PROXYENV_PROXY;
	if (len == 0) {
		*err = "empty";
		return -1;
	}
	if (len + 8 > normlen || len > EGRESS_HOST_INPUT_MAX) {
		*err = "too long";
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)value[i];

		if (c <= 0x20 || c == 0x7f) {
			*err = (i == 0 || i + 1 == len) && (c == ' ' || c == '\t') ?
			    "leading or trailing whitespace (not trimmed: remove it)" :
			    "a space or control character inside the value";
			return -1;
		}
	}
	if (strncasecmp(value, "wpad:", 5) == 0) {
		*kind = PROXYENV_WPAD;
	} else if (strncasecmp(value, "pac+", 4) == 0) {
		const char *u = value + 4;

		if (strncasecmp(u, "file://", 7) == 0) {
			if (u[7] != '/') {
				*err = "pac+file:// needs an absolute path (pac+file:///etc/proxy.pac)";
				return -1;
			}
			*kind = PROXYENV_PAC_FILE;
		} else if ((strncasecmp(u, "http://", 7) == 0 && u[7] != '\0' && u[7] != '/') ||
		    (strncasecmp(u, "https://", 8) == 0 && u[8] != '\0' && u[8] != '/')) {
			*kind = PROXYENV_PAC_URL;
		} else {
			*err = "pac+ takes file:///PATH, http://HOST/PATH or https://HOST/PATH";
			return -1;
		}
	} else if (strstr(value, "://") != NULL) {
		if (proxyurl_parse(value, len, &pr, err) != 0)
			return -1;
	} else {
		struct host h;

		if (host_parse(value, len, HOST_REQUIRE_PORT, &h) != HOST_OK) {
			*err = "no scheme, and not HOST:PORT (write http://HOST:PORT)";
			return -1;
		}
		snprintf(norm, normlen, "http://%s", value);
		return 0;
	}
	snprintf(norm, normlen, "%s", value);
	return 0;
}
