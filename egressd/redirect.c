/*
 * redirect.c - Location resolution (uriparser) and re-authorization of redirects.
 */
#include "egressd/redirect.h"

#include <stdio.h>
#include <string.h>

#include <uriparser/Uri.h>

#include "common/addr.h"
#include "common/util.h"
#include "egressd/addrcheck.h"
#include "egressd/http.h"

const char *
redirect_err_str(enum redirect_err e)
{
	switch (e) {
	case REDIRECT_OK: return "ok";
	case REDIRECT_ERR_EMPTY: return "the Location is empty";
	case REDIRECT_ERR_TOO_LONG: return "the Location is too long";
	case REDIRECT_ERR_SYNTAX: return "the Location is not a valid URI reference";
	case REDIRECT_ERR_SLASHES: return "the Location starts with three or more slashes";
	case REDIRECT_ERR_SCHEME: return "the Location's scheme is neither http nor https";
	case REDIRECT_ERR_USERINFO: return "the Location carries userinfo (user:password@)";
	case REDIRECT_ERR_NO_HOST: return "the Location has no host";
	case REDIRECT_ERR_HOST: return "the Location's host is not a valid canonical host";
	case REDIRECT_ERR_PORT: return "the Location's port is invalid";
	case REDIRECT_ERR_INTERNAL: return "the Location could not be resolved";
	}
	return "the Location could not be resolved";
}

enum reason
redirect_err_reason(enum redirect_err e)
{
	switch (e) {
	case REDIRECT_OK:
		return REASON_ALLOWED;
	case REDIRECT_ERR_USERINFO:
	case REDIRECT_ERR_SCHEME:
		return REASON_REDIRECT_DENIED;
	case REDIRECT_ERR_EMPTY:
	case REDIRECT_ERR_TOO_LONG:
	case REDIRECT_ERR_SYNTAX:
	case REDIRECT_ERR_SLASHES:
	case REDIRECT_ERR_NO_HOST:
	case REDIRECT_ERR_HOST:
	case REDIRECT_ERR_PORT:
	case REDIRECT_ERR_INTERNAL:
		break;
	}
	return REASON_REDIRECT_INVALID;
}

static size_t
range_len(const UriTextRangeA *r)
{
	return r->first != NULL && r->afterLast > r->first ?
	    (size_t)(r->afterLast - r->first) : 0;
}

/* Append n bytes to buf (cap bytes, *len used, always NUL-terminated); false when full. */
static bool
append(char *buf, size_t cap, size_t *len, const char *p, size_t n)
{
	if (n >= cap - *len)
		return false;
	memcpy(buf + *len, p, n);
	*len += n;
	buf[*len] = '\0';
	return true;
}

static bool
ascii_ieq(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);

	if (alen != blen)
		return false;
	for (size_t i = 0; i < alen; i++) {
		char c = a[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != b[i])
			return false;
	}
	return true;
}

/* The request URL egressd resolves against. The request path passed egressd's request
 * parser but uriparser is stricter (it refuses e.g. '|' or '"' that clients send raw);
 * such a base falls back to "/": the origin (what is authorized) stays exact, only the
 * path of a relative-path Location may then differ from what the client computes. */
static int
parse_base(UriUriA *base, const struct host *h, uint16_t port, const char *path,
    size_t plen, char *buf, size_t cap)
{
	char hp[EGRESS_HOSTPORT_MAX + 1];
	struct host hh = *h;
	const char *err;
	size_t len = 0;

	hh.port = port == 80 ? 0 : port;
	if (host_to_str(&hh, hp, sizeof(hp)) == NULL)
		return -1;
	buf[0] = '\0';
	if (!append(buf, cap, &len, "http://", 7) || !append(buf, cap, &len, hp, strlen(hp)))
		return -1;
	size_t hostlen = len;
	if (plen == 0 || path[0] != '/')
		path = "/", plen = 1;
	if (!append(buf, cap, &len, path, plen))
		len = hostlen;
	if (len > hostlen && uriParseSingleUriExA(base, buf, buf + len, &err) == URI_SUCCESS)
		return 0;
	buf[hostlen] = '\0';
	len = hostlen;
	if (!append(buf, cap, &len, "/", 1))
		return -1;
	return uriParseSingleUriExA(base, buf, buf + len, &err) == URI_SUCCESS ? 0 : -1;
}

static enum redirect_err
fill_target(const UriUriA *u, struct redirect_target *out)
{
	char hbuf[EGRESS_HOST_INPUT_MAX + 1];
	size_t slen = range_len(&u->scheme);
	size_t hlen = range_len(&u->hostText);
	size_t plen = 0, ulen = 0;
	long long port;
	const char *errstr;

	if (ascii_ieq(u->scheme.first, slen, "http")) {
		out->scheme = SCHEME_HTTP;
		out->port = 80;
	} else if (ascii_ieq(u->scheme.first, slen, "https")) {
		out->scheme = SCHEME_HTTPS;
		out->port = 443;
	} else {
		return REDIRECT_ERR_SCHEME;
	}
	/* A client would turn userinfo into credentials for the new host; and
	 * "http://granted.example@evil.example/" exists to confuse readers. */
	if (u->userInfo.first != NULL)
		return REDIRECT_ERR_USERINFO;
	if (u->hostText.first == NULL || hlen == 0)
		return REDIRECT_ERR_NO_HOST;
	if (u->hostData.ipFuture.first != NULL)
		return REDIRECT_ERR_HOST;
	if (hlen > EGRESS_HOST_INPUT_MAX)
		return REDIRECT_ERR_HOST;
	memcpy(hbuf, u->hostText.first, hlen);
	hbuf[hlen] = '\0';
	/* uriparser gives an IPv6 literal without its brackets: common/host takes that form
	 * under HOST_NO_PORT, and a reg-name can never contain ':'. */
	if (host_parse(hbuf, hlen, HOST_NO_PORT, &out->host) != HOST_OK)
		return REDIRECT_ERR_HOST;
	if (u->portText.first != NULL && range_len(&u->portText) > 0) {
		char pbuf[8];
		size_t n = range_len(&u->portText);
		if (n > 5 || u->portText.first[0] == '0')
			return REDIRECT_ERR_PORT;
		memcpy(pbuf, u->portText.first, n);
		pbuf[n] = '\0';
		if (num_parse(pbuf, 1, 65535, &port, &errstr) != 0)
			return REDIRECT_ERR_PORT;
		out->port = (uint16_t)port;
	}
	/* path: "/" + segments joined by "/", then "?query"; the fragment never leaves the
	 * client */
	out->path[0] = '\0';
	if (u->pathHead == NULL) {
		if (!append(out->path, sizeof(out->path), &plen, "/", 1))
			return REDIRECT_ERR_TOO_LONG;
	}
	for (const UriPathSegmentA *s = u->pathHead; s != NULL; s = s->next) {
		if (!append(out->path, sizeof(out->path), &plen, "/", 1) ||
		    !append(out->path, sizeof(out->path), &plen, s->text.first,
		    range_len(&s->text)))
			return REDIRECT_ERR_TOO_LONG;
	}
	if (u->query.first != NULL) {
		if (!append(out->path, sizeof(out->path), &plen, "?", 1) ||
		    !append(out->path, sizeof(out->path), &plen, u->query.first,
		    range_len(&u->query)))
			return REDIRECT_ERR_TOO_LONG;
	}
	{
		char hp[EGRESS_HOSTPORT_MAX + 1];
		struct host hh = out->host;
		const char *sch = out->scheme == SCHEME_HTTP ? "http://" : "https://";
		hh.port = out->port == (out->scheme == SCHEME_HTTP ? 80 : 443) ? 0 : out->port;
		if (host_to_str(&hh, hp, sizeof(hp)) == NULL)
			return REDIRECT_ERR_HOST;
		out->url[0] = '\0';
		if (!append(out->url, sizeof(out->url), &ulen, sch, strlen(sch)) ||
		    !append(out->url, sizeof(out->url), &ulen, hp, strlen(hp)) ||
		    !append(out->url, sizeof(out->url), &ulen, out->path, plen))
			return REDIRECT_ERR_TOO_LONG;
	}
	return REDIRECT_OK;
}

enum redirect_err
redirect_resolve(const char *loc, size_t len, const struct host *base_host,
    uint16_t base_port, const char *base_path, size_t base_len, struct redirect_target *out)
{
	char bbuf[EGRESS_LOCATION_MAX + EGRESS_HOSTPORT_MAX + 16];
	UriUriA base, rel, abs;
	const char *err;
	enum redirect_err r;
	size_t slashes = 0;

	memset(out, 0, sizeof(*out));
	if (loc == NULL || len == 0)
		return REDIRECT_ERR_EMPTY;
	if (len > EGRESS_LOCATION_MAX)
		return REDIRECT_ERR_TOO_LONG;
	/* uriparser reads [first, afterLast): an embedded NUL or any byte outside the RFC 3986
	 * character set fails the parse, which is what we want for them. */
	while (slashes < len && loc[slashes] == '/')
		slashes++;
	if (slashes >= 3)
		return REDIRECT_ERR_SLASHES;
	memset(&rel, 0, sizeof(rel));
	if (uriParseSingleUriExA(&rel, loc, loc + len, &err) != URI_SUCCESS) {
		uriFreeUriMembersA(&rel);
		return REDIRECT_ERR_SYNTAX;
	}
	/* "http:///x" and "https:x": a scheme must come with an authority here. Resolving
	 * "http:x" relative to an http base is legal RFC 3986 "non-strict" behaviour that
	 * uriparser's strict mode does not do; browsers differ, so refuse it outright. */
	if (rel.scheme.first != NULL && rel.hostText.first == NULL &&
	    (ascii_ieq(rel.scheme.first, range_len(&rel.scheme), "http") ||
	    ascii_ieq(rel.scheme.first, range_len(&rel.scheme), "https"))) {
		uriFreeUriMembersA(&rel);
		return REDIRECT_ERR_NO_HOST;
	}
	memset(&base, 0, sizeof(base));
	if (parse_base(&base, base_host, base_port, base_path, base_len, bbuf,
	    sizeof(bbuf)) != 0) {
		uriFreeUriMembersA(&base);
		uriFreeUriMembersA(&rel);
		memset(out, 0, sizeof(*out));
		return REDIRECT_ERR_INTERNAL;
	}
	memset(&abs, 0, sizeof(abs));
	/* Dot segments go from the base as well as from the result (RFC 3986 5.2.4 removes
	 * them only from merged paths), so the canonical URL resolves to itself again. */
	if (uriNormalizeSyntaxExA(&base, URI_NORMALIZE_PATH) != URI_SUCCESS ||
	    uriAddBaseUriExA(&abs, &rel, &base, URI_RESOLVE_STRICTLY) != URI_SUCCESS ||
	    uriNormalizeSyntaxExA(&abs, URI_NORMALIZE_PATH) != URI_SUCCESS) {
		r = REDIRECT_ERR_SYNTAX;
	} else {
		r = fill_target(&abs, out);
	}
	uriFreeUriMembersA(&abs);
	uriFreeUriMembersA(&base);
	uriFreeUriMembersA(&rel);
	if (r != REDIRECT_OK)
		memset(out, 0, sizeof(*out));
	return r;
}

enum reason
redirect_authorize(const struct grant *g, const struct redirect_target *t,
    const struct cidr_set *grant_allow, const struct cidr_set *override,
    const char **detail)
{
	const char *dummy;

	if (detail == NULL)
		detail = &dummy;
	*detail = NULL;
	if (g == NULL || t == NULL) {
		*detail = "no grant";
		return REASON_REDIRECT_DENIED;
	}
	if (!grant_allows(g, t->scheme == SCHEME_HTTP ? SCHEME_HTTP : SCHEME_HTTPS, &t->host,
	    t->port, NULL)) {
		*detail = t->host.kind == HOST_NAME ? "not in the grant" :
		    "IP literal not named by the grant";
		return REASON_REDIRECT_DENIED;
	}
	if (t->host.kind != HOST_NAME) {
		/* The literal is known now: its class is checked now (a name's addresses are
		 * checked when the client follows, on its own hop). */
		struct addrcheck_result ac;
		if (addrcheck_literal(&t->host.addr, grant_allow, override, &ac) !=
		    REASON_ALLOWED) {
			*detail = "private or special-purpose address";
			return REASON_REDIRECT_DENIED;
		}
	}
	return REASON_ALLOWED;
}

bool
redirect_same_origin(const struct redirect_target *t, const struct host *host, uint16_t port)
{
	return t->scheme == SCHEME_HTTP && t->port == port && t->host.kind == host->kind &&
	    strcmp(t->host.name, host->name) == 0;
}

bool
redirect_status_checked(int status)
{
	return status >= 300 && status <= 399 && status != 304;
}

size_t
redirect_format_refusal(enum reason r, const char *target, size_t target_len,
    const char *detail, char *out, size_t outlen)
{
	char tgt[400 + 1];      /* keeps the whole refusal well under 1024 bytes */
	char line[600];
	size_t o = 0;

	/* The target is the origin's bytes: printable ASCII only, escaped, bounded. */
	for (size_t i = 0; target != NULL && i < target_len && o + 4 < sizeof(tgt); i++) {
		unsigned char c = (unsigned char)target[i];
		if (c >= 0x21 && c < 0x7f && c != '\\') {
			tgt[o++] = (char)c;
		} else {
			snprintf(tgt + o, 5, "\\x%02x", c);
			o += 4;
		}
	}
	tgt[o] = '\0';
	snprintf(line, sizeof(line), "%s%s%s%s", o > 0 ? tgt : "(none)",
	    detail != NULL ? " (" : "", detail != NULL ? detail : "", detail != NULL ? ")" : "");
	return http_format_refusal_detail(r, line, out, outlen);
}
