/*
 * pattern.c - grant allow entries: "scheme://host[:port]", with host exact or a "*." suffix
 * (see common/pattern.h).
 *
 * The host part goes through common/host, so an entry names exactly the canonical form
 * that hops are compared with. Wildcards are the dangerous part: "*.com" or "*.github.io"
 * would hand a worker every site under a registry, so a suffix that is a public suffix
 * (libpsl, ICANN and private sections) or a single label is refused, and when no public
 * suffix list can be loaded every wildcard is refused (fail closed).
 */
#include "common/pattern.h"

#include <libpsl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

/* Debian's libpsl has the list built in; the files are fallbacks for other builds. */
static const char *const psl_files[] = {
	"/usr/share/publicsuffix/public_suffix_list.dafsa",
	"/usr/share/publicsuffix/public_suffix_list.dat",
};

static pthread_once_t psl_once = PTHREAD_ONCE_INIT;
static const psl_ctx_t *psl_ctx;       /* NULL: no usable list, wildcards refused */
static psl_ctx_t *psl_loaded;          /* owned when loaded from a file; lives forever */

/* A list that does not know "com" and "co.uk" is empty or broken, not a list. */
static bool
psl_usable(const psl_ctx_t *ctx)
{
	return ctx != NULL &&
	    psl_is_public_suffix2(ctx, "com", PSL_TYPE_ANY | PSL_TYPE_NO_STAR_RULE) == 1 &&
	    psl_is_public_suffix2(ctx, "co.uk", PSL_TYPE_ANY | PSL_TYPE_NO_STAR_RULE) == 1 &&
	    psl_is_public_suffix2(ctx, "example.com", PSL_TYPE_ANY) == 0;
}

static void
psl_init(void)
{
	const psl_ctx_t *b = psl_builtin();
	size_t i;

	if (psl_usable(b)) {
		psl_ctx = b;
		return;
	}
	for (i = 0; i < EGRESS_NELEM(psl_files); i++) {
		psl_ctx_t *c = psl_load_file(psl_files[i]);

		if (psl_usable(c)) {
			psl_loaded = c;
			psl_ctx = c;
			return;
		}
		psl_free(c);
	}
}

#ifdef EGRESS_TESTING
/* Test hook: forget the loaded list so the fail-closed path can be exercised. */
void pattern_psl_disable(void);
void
pattern_psl_disable(void)
{
	pthread_once(&psl_once, psl_init);
	psl_ctx = NULL;
}
#endif

static const psl_ctx_t *
psl_get(void)
{
	pthread_once(&psl_once, psl_init);
	return psl_ctx;
}

const char *
scheme_str(enum dest_scheme s)
{
	switch (s) {
	case SCHEME_HTTPS:
		return "https";
	case SCHEME_HTTP:
		return "http";
	case SCHEME_TCP:
		return "tcp";
	}
	return "invalid";
}

static uint16_t
default_port(enum dest_scheme s)
{
	switch (s) {
	case SCHEME_HTTPS:
		return 443;
	case SCHEME_HTTP:
		return 80;
	case SCHEME_TCP:
		return 0;
	}
	return 0;
}

static size_t
count_labels(const char *name)
{
	size_t n = 1;

	for (; *name != '\0'; name++)
		if (*name == '.')
			n++;
	return n;
}

int
pattern_public_suffix(const char *name)
{
	const psl_ctx_t *ctx = psl_get();

	if (ctx == NULL)
		return -1;
	/* Same rule as wildcard entries: a single label is a suffix (the implicit "*" rule of
	 * the list, applied by hand), and so is anything the list names, private section
	 * included. */
	if (count_labels(name) < 2)
		return 1;
	return psl_is_public_suffix2(ctx, name, PSL_TYPE_ANY | PSL_TYPE_NO_STAR_RULE) != 0;
}

int
pattern_parse(const char *s, struct dest_pattern *out, const char **err)
{
	static const struct {
		const char *prefix;
		enum dest_scheme scheme;
	} schemes[] = {
		{ "https://", SCHEME_HTTPS },
		{ "http://", SCHEME_HTTP },
		{ "tcp://", SCHEME_TCP },
	};
	struct dest_pattern p;
	const char *rest = NULL, *dummy;
	size_t len, i;
	enum host_err he;

	if (err == NULL)
		err = &dummy;
	*err = NULL;
	memset(&p, 0, sizeof(p));
	if (out != NULL)
		memset(out, 0, sizeof(*out));
	if (s == NULL || *s == '\0') {
		*err = "the entry is empty";
		return -1;
	}
	len = strnlen(s, EGRESS_DEST_PATTERN_MAX + 1);
	if (len > EGRESS_DEST_PATTERN_MAX) {
		*err = "the entry is too long";
		return -1;
	}
	/* Schemes are lowercase only: an entry has one spelling. */
	for (i = 0; i < EGRESS_NELEM(schemes); i++) {
		size_t pl = strlen(schemes[i].prefix);

		if (strncmp(s, schemes[i].prefix, pl) == 0) {
			p.scheme = schemes[i].scheme;
			rest = s + pl;
			break;
		}
	}
	if (rest == NULL) {
		*err = "the entry must start with https://, http:// or tcp:// (lowercase)";
		return -1;
	}
	len -= (size_t)(rest - s);
	/* Nothing but an authority: a path, query or fragment would suggest a finer grant
	 * than egressd can enforce on a CONNECT tunnel. */
	if (memchr(rest, '/', len) != NULL || memchr(rest, '?', len) != NULL ||
	    memchr(rest, '#', len) != NULL) {
		*err = "the entry may not have a path, query or fragment (scheme://host[:port])";
		return -1;
	}
	if (len >= 2 && rest[0] == '*' && rest[1] == '.') {
		p.wildcard = true;
		rest += 2;
		len -= 2;
	}
	he = host_parse(rest, len, 0, &p.host);
	if (he != HOST_OK) {
		*err = host_err_str(he);
		return -1;
	}
	if (p.wildcard) {
		const psl_ctx_t *ctx;
		int ps;

		if (p.host.kind != HOST_NAME) {
			*err = "a wildcard entry needs a domain name suffix, not an address";
			return -1;
		}
		if (count_labels(p.host.name) < 2) {
			*err = "a wildcard over a single-label suffix (such as *.com or *.internal) "
			       "is refused";
			return -1;
		}
		ctx = psl_get();
		if (ctx == NULL) {
			*err = "no public suffix list could be loaded, so wildcard entries are refused";
			return -1;
		}
		/* PSL_TYPE_ANY: private-section suffixes (github.io) count too. NO_STAR_RULE:
		 * the implicit "*" rule would make every unknown TLD public; single labels are
		 * refused above anyway. */
		ps = psl_is_public_suffix2(ctx, p.host.name, PSL_TYPE_ANY | PSL_TYPE_NO_STAR_RULE);
		if (ps != 0) {
			*err = "a wildcard over a public suffix (such as *.co.uk or *.github.io) is "
			       "refused";
			return -1;
		}
	}
	if (p.host.port != 0) {
		p.port = p.host.port;
	} else {
		p.port = default_port(p.scheme);
		if (p.port == 0) {
			*err = "a tcp:// entry needs a port (tcp://host:port)";
			return -1;
		}
		p.host.port = p.port;
	}
	if (out != NULL)
		*out = p;
	return 0;
}

const char *
pattern_to_str(const struct dest_pattern *p, char *buf, size_t len)
{
	char port[8] = "";
	const char *lb = "", *rb = "";
	int n;

	if (buf == NULL || len == 0)
		return NULL;
	if (p->scheme == SCHEME_TCP || p->port != default_port(p->scheme))
		snprintf(port, sizeof(port), ":%u", (unsigned)p->port);
	if (p->host.kind == HOST_IPV6) {
		lb = "[";
		rb = "]";
	}
	n = snprintf(buf, len, "%s://%s%s%s%s%s", scheme_str(p->scheme), p->wildcard ? "*." : "",
	    lb, p->host.name, rb, port);
	if (n < 0 || (size_t)n >= len) {
		buf[0] = '\0';
		return NULL;
	}
	return buf;
}

/* Is name strictly below suffix, at a label boundary? Never the apex itself. */
static bool
name_below(const char *name, const char *suffix)
{
	size_t nl = strlen(name), sl = strlen(suffix);

	if (nl < sl + 2)         /* at least one character and a dot before the suffix */
		return false;
	return name[nl - sl - 1] == '.' && strcmp(name + nl - sl, suffix) == 0;
}

static bool
host_same(const struct host *a, const struct host *b)
{
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case HOST_NAME:
		return strcmp(a->name, b->name) == 0;
	case HOST_IPV4:
	case HOST_IPV6:
		return addr_equal(&a->addr, &b->addr);
	}
	return false;
}

static bool
scheme_admits(enum dest_scheme entry, enum dest_scheme hop)
{
	switch (hop) {
	case SCHEME_HTTPS:
		/* A CONNECT tunnel carries bytes egressd does not read: https:// and tcp://
		 * entries both admit it. */
		return entry == SCHEME_HTTPS || entry == SCHEME_TCP;
	case SCHEME_HTTP:
		return entry == SCHEME_HTTP;
	case SCHEME_TCP:
		return entry == SCHEME_TCP;
	}
	return false;
}

bool
pattern_match(const struct dest_pattern *p, enum dest_scheme hop_scheme,
    const struct host *h, uint16_t port)
{
	if (p == NULL || h == NULL)
		return false;
	if (!scheme_admits(p->scheme, hop_scheme) || port == 0 || port != p->port)
		return false;
	if (p->wildcard)
		return h->kind == HOST_NAME && name_below(h->name, p->host.name);
	return host_same(&p->host, h);
}

bool
pattern_covers(const struct dest_pattern *a, const struct dest_pattern *b)
{
	if (a == NULL || b == NULL)
		return false;
	/* Same scheme exactly: a tcp:// trust does not silently stand for https:// and the
	 * other way round; admission compares like with like. */
	if (a->scheme != b->scheme || a->port != b->port)
		return false;
	if (!a->wildcard)
		return !b->wildcard && host_same(&a->host, &b->host);
	if (b->host.kind != HOST_NAME)
		return false;
	if (b->wildcard)
		return strcmp(a->host.name, b->host.name) == 0 ||
		    name_below(b->host.name, a->host.name);
	return name_below(b->host.name, a->host.name);
}
