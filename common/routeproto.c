/* routeproto.c - egressd <-> route helper line protocol (see routeproto.h). */
#include "common/routeproto.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"

/* What snprintf returned for a buffer of len: the length, or 0 when it did not fit. */
static size_t
fit(int n, size_t len)
{
	return n < 0 || (size_t)n >= len ? 0 : (size_t)n;
}

size_t
routeproto_query_url(enum dest_scheme scheme, const struct host *h, uint16_t port, char *buf,
    size_t len)
{
	const char *sch = scheme == SCHEME_HTTP ? "http" : "https";
	int n;

	if (h->kind == HOST_IPV6)
		n = snprintf(buf, len, "%s://[%s]:%u/", sch, h->name, (unsigned)port);
	else
		n = snprintf(buf, len, "%s://%s:%u/", sch, h->name, (unsigned)port);
	return fit(n, len);
}

size_t
routeproto_format_request(uint64_t id, const char *url, char *buf, size_t len)
{
	return fit(snprintf(buf, len, "%llu %s\n", (unsigned long long)id, url), len);
}

/* Parse the decimal id at the start of line; returns bytes consumed or 0. */
static size_t
parse_id(const char *line, size_t len, uint64_t *id)
{
	char tmp[21];
	size_t i = 0;
	long long v;
	const char *es;

	while (i < len && i < sizeof(tmp) - 1 && line[i] >= '0' && line[i] <= '9') {
		tmp[i] = line[i];
		i++;
	}
	if (i == 0 || i >= len || line[i] != ' ')
		return 0;
	tmp[i] = '\0';
	if (num_parse(tmp, 1, 9007199254740991LL, &v, &es) != 0)
		return 0;
	*id = (uint64_t)v;
	return i + 1;
}

int
routeproto_parse_request(const char *line, size_t len, uint64_t *id, char *urlbuf,
    size_t urllen)
{
	size_t p = parse_id(line, len, id);

	if (p == 0 || p == len || len - p >= urllen)
		return -1;
	for (size_t i = p; i < len; i++)
		if (line[i] <= 0x20 || line[i] >= 0x7f)
			return -1;
	memcpy(urlbuf, line + p, len - p);
	urlbuf[len - p] = '\0';
	return 0;
}

size_t
routeproto_format_error(uint64_t id, const char *code, char *buf, size_t len)
{
	return fit(snprintf(buf, len, "%llu ERR %s\n", (unsigned long long)id, code), len);
}

size_t
routeproto_format_reply(uint64_t id, char **proxies, char *buf, size_t len)
{
	size_t off, n;

	if (proxies == NULL || proxies[0] == NULL)
		return routeproto_format_error(id, "pac_error", buf, len);
	off = fit(snprintf(buf, len, "%llu OK", (unsigned long long)id), len);
	if (off == 0)
		return 0;
	for (size_t i = 0; proxies[i] != NULL; i++) {
		struct proxy_route e;
		const char *err;
		char norm[EGRESS_HOSTPORT_MAX + 32];

		if (i >= EGRESS_ROUTE_PROXIES_MAX)
			break;    /* a longer list is cut at the bound: later entries are fallbacks */
		if (proxyurl_parse(proxies[i], strlen(proxies[i]), &e, &err) != 0)
			return routeproto_format_error(id, "bad_answer", buf, len);
		/* send the normalized form, without any userinfo */
		if (e.kind == PROXY_DIRECT)
			snprintf(norm, sizeof(norm), "direct://");
		else
			proxyurl_to_str(&e, norm, sizeof(norm));
		n = fit(snprintf(buf + off, len - off, " %s", norm), len - off);
		if (n == 0)
			return routeproto_format_error(id, "bad_answer", buf, len);
		off += n;
	}
	if (off + 1 >= len)
		return 0;
	buf[off++] = '\n';
	buf[off] = '\0';
	return off;
}

int
routeproto_parse_reply(const char *line, size_t len, struct routeproto_reply *out)
{
	size_t p;

	memset(out, 0, sizeof(*out));
	if (len > EGRESS_ROUTE_LINE_MAX)
		return -1;
	p = parse_id(line, len, &out->id);
	if (p == 0)
		return -1;
	if (len - p >= 4 && memcmp(line + p, "ERR ", 4) == 0) {
		size_t cl = len - p - 4;
		if (cl == 0 || cl >= sizeof(out->err))
			return -1;
		for (size_t i = 0; i < cl; i++) {
			char c = line[p + 4 + i];
			if (!((c >= 'a' && c <= 'z') || c == '_'))
				return -1;
		}
		memcpy(out->err, line + p + 4, cl);
		out->err[cl] = '\0';
		out->ok = 0;
		return 0;
	}
	if (len - p < 2 || memcmp(line + p, "OK", 2) != 0)
		return -1;
	p += 2;
	while (p < len) {
		size_t s, e;
		const char *err;

		if (line[p] != ' ')
			return -1;
		s = ++p;
		while (p < len && line[p] != ' ')
			p++;
		e = p;
		if (e == s || out->n >= EGRESS_ROUTE_PROXIES_MAX)
			return -1;
		if (proxyurl_parse(line + s, e - s, &out->entries[out->n], &err) != 0)
			return -1;
		if (out->entries[out->n].had_userinfo)
			return -1;    /* the helper must never pass credentials */
		out->n++;
	}
	if (out->n == 0)
		return -1;
	out->ok = 1;
	return 0;
}

/* One line of out starting at *pos (without its '\n'); false at the end. */
static bool
next_line(const char *out, size_t n, size_t *pos, const char **line, size_t *len)
{
	const char *nl;

	if (*pos >= n)
		return false;
	*line = out + *pos;
	nl = memchr(*line, '\n', n - *pos);
	*len = nl != NULL ? (size_t)(nl - *line) : n - *pos;
	*pos += *len + (nl != NULL ? 1 : 0);
	return true;
}

int
routeproto_libproxy_discovers(const char *out, size_t n, const char *own_pac)
{
	static const char marker[] = "Config is: ";
	size_t pos = 0, len = 0, ol = own_pac != NULL ? strlen(own_pac) : 0;
	const char *line = NULL;
	bool found = false;

	if (out == NULL)
		return 0;
	/* The first "Config is: " line: libproxy prints it before it acts on anything. */
	while (!found && next_line(out, n, &pos, &line, &len))
		found = len == sizeof(marker) - 1 && memcmp(line, marker, len) == 0;
	if (!found)
		return 0;
	/* Its "\t<url>" lines, and nothing after the first other line. */
	while (next_line(out, n, &pos, &line, &len) && len > 0 && line[0] == '\t') {
		const char *u = line + 1;
		size_t ul = len - 1;

		while (ul > 0 && (u[ul - 1] == '\r' || u[ul - 1] == ' '))
			ul--;
		if (ul >= 5 && strncasecmp(u, "wpad:", 5) == 0)
			return 1;
		if (ul >= 4 && strncasecmp(u, "pac+", 4) == 0 &&
		    !(own_pac != NULL && ul == ol && memcmp(u, own_pac, ol) == 0))
			return 1;
	}
	return 0;
}
