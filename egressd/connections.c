/* connections.c - model connections and their credentials (see connections.h). */
#define _GNU_SOURCE
#include "egressd/connections.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/conf.h"
#include "common/util.h"
#include "egressd/secretfile.h"

static const struct conf_key schema[] = {
	{ "connection *", "destination", CONF_LIST },
	{ "connection *", "credential_file", 0 },
	{ "connection *", "credential_header", 0 },
	{ "connection *", "allow_method", CONF_LIST },
	{ "connection *", "allow_path", CONF_LIST },
};

const char *
conn_apply_str(enum conn_apply a)
{
	switch (a) {
	case CONN_APPLY_BEARER:    return "authorization-bearer";
	case CONN_APPLY_X_API_KEY: return "x-api-key";
	case CONN_APPLY_HEADER:    return "header";
	case CONN_APPLY_NONE:      break;
	}
	return "none";
}

bool
connection_name_valid(const char *s)
{
	return label_valid(s, EGRESS_CONNECTION_NAME_MAX);
}

/* RFC 9110 token characters. */
static bool
tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	    strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

/* Header fields that frame or route a message, or that the worker's side owns: a
 * credential placed there would break framing or leak to a proxy. */
static const char *const reserved_headers[] = {
	"host", "content-length", "transfer-encoding", "connection", "keep-alive", "te",
	"trailer", "upgrade", "proxy-authorization", "proxy-authenticate", "proxy-connection",
	"cookie", "expect", "content-type", "content-encoding",
};

static bool
header_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > EGRESS_HEADER_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!tchar((unsigned char)s[i]) || s[i] == '\0')
			return false;
	for (size_t i = 0; i < EGRESS_NELEM(reserved_headers); i++)
		if (strcasecmp(s, reserved_headers[i]) == 0)
			return false;
	return true;
}

static bool
method_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 16)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 'A' || s[i] > 'Z')
			return false;
	return true;
}

/* A path rule: '/' then visible ASCII without '?', '#', '%' or '\\'; '*' only as the last
 * character (prefix rule); no dot segments or "//". */
static bool
path_rule_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 1024 || s[0] != '/')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch <= 0x20 || ch >= 0x7f || ch == '?' || ch == '#' || ch == '%' || ch == '\\')
			return false;
		if (ch == '*' && i != n - 1)
			return false;
	}
	return strstr(s, "//") == NULL && strstr(s, "/./") == NULL &&
	    strstr(s, "/../") == NULL && !(n >= 2 && strcmp(s + n - 2, "/.") == 0) &&
	    !(n >= 3 && strcmp(s + n - 3, "/..") == 0);
}

static void
strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void
conn_clear(struct connection *c)
{
	if (c->secret != NULL) {
		secret_wipe(c->secret, c->secret_len);
		free(c->secret);
	}
	free(c->dest);
	free(c->credfile);
	strv_free(c->methods, c->nmethods);
	strv_free(c->paths, c->npaths);
	memset(c, 0, sizeof(*c));
}

struct connections *
connections_ref(struct connections *c)
{
	if (c != NULL)
		c->refs++;
	return c;
}

void
connections_free(struct connections *c)
{
	if (c == NULL || --c->refs > 0)
		return;
	for (size_t i = 0; i < c->n; i++)
		conn_clear(&c->v[i]);
	free(c->v);
	free(c->path);
	free(c);
}

/*
 * Every problem of one load, one "file:line: ..." line each (like egressd.ini's: the
 * operator fixes them all in one go). The first one decides nothing: loading goes on
 * through every section and key, and fails at the end if there was any.
 */
struct lerrs {
	char *buf;
	size_t len, off;
	unsigned n, dropped;
};

static void lerr_add(struct lerrs *le, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
lerr_add(struct lerrs *le, const char *fmt, ...)
{
	char line[640];
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	le->n++;
	if (le->len == 0)
		return;
	if (le->off + strlen(line) + 2 > le->len) {
		le->dropped++;
		return;
	}
	le->off += (size_t)snprintf(le->buf + le->off, le->len - le->off, "%s%s",
	    le->off > 0 ? "\n" : "", line);
}

/* Copy a list key into a new array after checking every value with ok(); every bad value
 * is reported. Returns -1 only when out of memory. */
static int
copy_list(const struct conf *conf, size_t sec, const char *key, bool (*ok)(const char *),
    char ***out, size_t *nout, const char *what, struct lerrs *le)
{
	size_t n = 0;
	const char *const *vals = conf_get_list(conf, sec, key, &n);

	*out = NULL;
	*nout = 0;
	if (n == 0)
		return 0;
	if (n > EGRESS_CONNECTION_RULES_MAX) {
		lerr_add(le, "%s:%u: more than %d %s entries", conf_file(conf),
		    conf_line(conf, sec, key), EGRESS_CONNECTION_RULES_MAX, key);
		return 0;
	}
	if ((*out = calloc(n, sizeof(char *))) == NULL)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!ok(vals[i])) {
			lerr_add(le, "%s:%u: %s '%.100s': %s", conf_file(conf),
			    conf_line(conf, sec, key), key, vals[i], what);
			continue;
		}
		if (((*out)[*nout] = strdup(vals[i])) == NULL)
			return -1;
		(*nout)++;
	}
	return 0;
}

/* The credential start-up read from credfile, if keep (the running set) has it. */
static const struct connection *
kept_credential(const struct connections *keep, const char *credfile)
{
	for (size_t i = 0; keep != NULL && i < keep->n; i++)
		if (keep->v[i].secret != NULL && keep->v[i].credfile != NULL &&
		    strcmp(keep->v[i].credfile, credfile) == 0)
			return &keep->v[i];
	return NULL;
}

/* The secret: the file without trailing CR/LF, visible ASCII only. With keep (a reload,
 * after the privilege drop) it is the copy start-up read from the same file, never the
 * file again. Returns -1 only when out of memory. */
static int
load_secret(struct connection *c, const char *file, unsigned line, const char *credfile,
    int check_owner, const struct connections *keep, struct lerrs *le)
{
	char e2[512];
	size_t len = 0;
	char *s;

	if ((c->credfile = strdup(credfile)) == NULL)
		return -1;
	if (keep != NULL) {
		const struct connection *k = kept_credential(keep, credfile);

		if (k == NULL) {
			lerr_add(le, "%s:%u: [connection %s] credential_file %s: a credential file "
			    "egressd did not read at start-up takes a restart (it is root-only and "
			    "read once, before the privilege drop)", file, line, c->name, credfile);
			return 0;
		}
		if ((c->secret = malloc(k->secret_len + 1)) == NULL)
			return -1;
		memcpy(c->secret, k->secret, k->secret_len + 1);
		c->secret_len = k->secret_len;
		return 0;
	}
	s = secretfile_read(credfile, check_owner, "a model connection's credential", &len, e2,
	    sizeof(e2));
	if (s == NULL) {
		lerr_add(le, "%s:%u: [connection %s] credential_file: %s", file, line, c->name,
		    e2);
		return 0;
	}
	while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		s[--len] = '\0';
	if (len == 0 || len > EGRESS_CREDENTIAL_MAX) {
		lerr_add(le, "%s:%u: [connection %s] credential_file %s: the credential must be "
		    "1-%d bytes on one line", file, line, c->name, credfile, EGRESS_CREDENTIAL_MAX);
		goto fail;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch <= 0x20 || ch >= 0x7f) {
			/* Never print the byte or its position: both leak the secret. */
			lerr_add(le, "%s:%u: [connection %s] credential_file %s: the credential "
			    "must be visible ASCII without spaces (it goes into a header)", file, line,
			    c->name, credfile);
			goto fail;
		}
	}
	c->secret = s;
	c->secret_len = len;
	return 0;
fail:
	secret_wipe(s, len);
	free(s);
	return 0;
}

/* One [connection NAME] section; every problem is reported. Returns -1 only when out of
 * memory. */
static int
load_one(const struct conf *conf, size_t sec, struct connection *c, int check_owner,
    const struct connections *keep, struct lerrs *le)
{
	const char *file = conf_file(conf);
	const char *label = conf_section_label(conf, sec);
	unsigned line = conf_line(conf, sec, "destination");
	size_t n = 0;
	const char *const *dests = conf_get_list(conf, sec, "destination", &n);
	const char *credfile = conf_get(conf, sec, "credential_file", NULL);
	const char *hdr = conf_get(conf, sec, "credential_header", NULL);
	unsigned before = le->n;
	bool dest_ok = true;

	if (line == 0)
		line = conf_line(conf, sec, "credential_file");
	if (line == 0)
		line = conf_section_line(conf, sec);
	if (!connection_name_valid(label)) {
		lerr_add(le, "%s:%u: [connection %.80s]: a connection name is 1-%d characters of "
		    "A-Z a-z 0-9 . _ -", file, conf_section_line(conf, sec), label,
		    EGRESS_CONNECTION_NAME_MAX);
		return 0;
	}
	memcpy(c->name, label, strlen(label) + 1);
	c->line = line;
	if (n > EGRESS_CONNECTION_RULES_MAX) {
		lerr_add(le, "%s:%u: [connection %s]: more than %d destinations", file, line,
		    label, EGRESS_CONNECTION_RULES_MAX);
		n = 0;
		dest_ok = false;
	}
	if (n > 0 && (c->dest = calloc(n, sizeof(*c->dest))) == NULL)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const char *perr = NULL;
		if (pattern_parse(dests[i], &c->dest[c->ndest], &perr) != 0) {
			lerr_add(le, "%s:%u: [connection %s] destination '%.100s': %s", file, line,
			    label, dests[i], perr ? perr : "invalid");
			dest_ok = false;
			continue;
		}
		if (credfile != NULL && (c->dest[c->ndest].scheme != SCHEME_HTTPS ||
		    c->dest[c->ndest].wildcard)) {
			/* A credential is applied inside TLS egressd terminates with a leaf minted
			 * for exactly the CONNECT host: one named https origin per entry. */
			lerr_add(le, "%s:%u: [connection %s] destination '%.100s': a connection with "
			    "a credential takes https://host[:port] entries without wildcards", file,
			    line, label, dests[i]);
			dest_ok = false;
			continue;
		}
		c->ndest++;
	}
	if (credfile == NULL) {
		/* Destinations only (egress-exec's admission); nothing for egressd to apply. */
		if (hdr != NULL || conf_get(conf, sec, "allow_method", NULL) != NULL ||
		    conf_get(conf, sec, "allow_path", NULL) != NULL)
			lerr_add(le, "%s:%u: [connection %s]: credential_header, allow_method and "
			    "allow_path need credential_file", file, line, label);
		c->apply = CONN_APPLY_NONE;
		return 0;
	}
	if (c->ndest == 0 && dest_ok)
		lerr_add(le, "%s:%u: [connection %s]: a connection with a credential needs at "
		    "least one destination = https://host", file,
		    conf_line(conf, sec, "credential_file"), label);
	if (hdr == NULL || strcasecmp(hdr, "authorization-bearer") == 0) {
		c->apply = CONN_APPLY_BEARER;
		memcpy(c->header, "authorization", sizeof("authorization"));
	} else if (strcasecmp(hdr, "x-api-key") == 0) {
		c->apply = CONN_APPLY_X_API_KEY;
		memcpy(c->header, "x-api-key", sizeof("x-api-key"));
	} else if (strcasecmp(hdr, "authorization") != 0 && header_name_ok(hdr)) {
		c->apply = CONN_APPLY_HEADER;
		for (size_t i = 0; hdr[i] != '\0'; i++)
			c->header[i] = (char)(hdr[i] >= 'A' && hdr[i] <= 'Z' ? hdr[i] + 32 : hdr[i]);
		c->header[strlen(hdr)] = '\0';
	} else {
		lerr_add(le, "%s:%u: [connection %s] credential_header '%.80s': "
		    "authorization-bearer, x-api-key, or a header field name that does not frame or "
		    "route the message (not Host, Content-Length, Cookie, Proxy-*, ...)", file,
		    conf_line(conf, sec, "credential_header"), label, hdr);
	}
	if (copy_list(conf, sec, "allow_method", method_ok, &c->methods, &c->nmethods,
	    "a method is 1-16 uppercase letters", le) != 0 ||
	    copy_list(conf, sec, "allow_path", path_rule_ok, &c->paths, &c->npaths,
	    "a path rule is /exact or /prefix* without '?', '#', '%', '\\', dot segments or "
	    "'//'", le) != 0)
		return -1;
	/* The credential is read only for a section that is otherwise sound: a refused
	 * configuration reads no secret it will not use. */
	if (le->n != before)
		return 0;
	return load_secret(c, file, conf_line(conf, sec, "credential_file"), credfile,
	    check_owner, keep, le);
}

static struct connections *
from_conf(const struct conf *conf, const char *name, int check_owner,
    const struct connections *keep, char *err, size_t errlen)
{
	struct connections *out = calloc(1, sizeof(*out));
	size_t nsec = conf_nsections(conf);
	struct lerrs le = { err, errlen, 0, 0, 0 };

	if (errlen > 0)
		err[0] = '\0';
	if (out == NULL)
		goto nomem;
	out->refs = 1;
	if ((out->path = strdup(name)) == NULL)
		goto nomem;
	if (nsec > EGRESS_CONNECTIONS_MAX) {
		snprintf(err, errlen, "%s: more than %d connections", name, EGRESS_CONNECTIONS_MAX);
		goto fail;
	}
	if (nsec > 0 && (out->v = calloc(nsec, sizeof(*out->v))) == NULL)
		goto nomem;
	for (size_t i = 0; i < nsec; i++) {
		const char *label = conf_section_label(conf, i);

		if (label == NULL || label[0] == '\0')
			continue;     /* keys outside [connection ...] are refused by the schema */
		out->n++;
		if (load_one(conf, i, &out->v[out->n - 1], check_owner, keep, &le) != 0)
			goto nomem;
	}
	if (le.n > 0) {
		if (le.dropped > 0 && le.off + 48 < errlen)
			snprintf(err + le.off, errlen - le.off, "\n(and %u more)", le.dropped);
		goto fail;
	}
	return out;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	connections_free(out);
	return NULL;
}

struct connections *
connections_load_string(const char *name, const char *text, size_t len, int check_owner,
    const struct connections *keep, char *err, size_t errlen)
{
	struct conf *conf = conf_load_string(name, text, len, schema, EGRESS_NELEM(schema), err,
	    errlen);
	struct connections *c;

	if (conf == NULL)
		return NULL;
	c = from_conf(conf, name, check_owner, keep, err, errlen);
	conf_free(conf);
	return c;
}

struct connections *
connections_load(const char *path, int check_owner, const struct connections *keep,
    char *err, size_t errlen)
{
	struct conf *conf = conf_load(path, schema, EGRESS_NELEM(schema), err, errlen);
	struct connections *c;

	if (conf == NULL)
		return NULL;
	c = from_conf(conf, path, check_owner, keep, err, errlen);
	conf_free(conf);
	return c;
}

const struct connection *
connections_find(const struct connections *c, const char *name)
{
	if (c == NULL || name == NULL)
		return NULL;
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->v[i].name, name) == 0)
			return &c->v[i];
	return NULL;
}

bool
connection_covers(const struct connection *c, const struct host *h, uint16_t port)
{
	if (c == NULL || h == NULL)
		return false;
	for (size_t i = 0; i < c->ndest; i++)
		if (pattern_match(&c->dest[i], SCHEME_HTTPS, h, port))
			return true;
	return false;
}

/* Plainly canonical: no dot segment, no "//", no backslash, no %2F %2E %5C. */
static bool
path_plain(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\\')
			return false;
		if (p[i] == '%') {
			char a, b;
			if (i + 2 >= n)
				return false;    /* a truncated escape */
			a = p[i + 1];
			b = (char)(p[i + 2] | 0x20);
			if ((a == '2' && (b == 'f' || b == 'e')) || (a == '5' && b == 'c'))
				return false;
		}
		if (p[i] == '/' && i + 1 < n) {
			if (p[i + 1] == '/')
				return false;
			if (p[i + 1] == '.' && (i + 2 == n || p[i + 2] == '/'))
				return false;
			if (p[i + 1] == '.' && i + 2 < n && p[i + 2] == '.' &&
			    (i + 3 == n || p[i + 3] == '/'))
				return false;
		}
	}
	return true;
}

enum reason
connection_request_allowed(const struct connection *c, const char *method,
    const char *path, size_t pathlen)
{
	const char *q;
	bool ok;

	if (c->nmethods > 0) {
		ok = false;
		for (size_t i = 0; i < c->nmethods && !ok; i++)
			ok = strcmp(c->methods[i], method) == 0;
		if (!ok)
			return REASON_CONNECTION_METHOD_DENIED;
	}
	if (c->npaths == 0)
		return REASON_ALLOWED;
	q = memchr(path, '?', pathlen);
	if (q != NULL)
		pathlen = (size_t)(q - path);
	if (pathlen == 0 || path[0] != '/' || !path_plain(path, pathlen))
		return REASON_CONNECTION_PATH_DENIED;
	for (size_t i = 0; i < c->npaths; i++) {
		const char *r = c->paths[i];
		size_t rl = strlen(r);
		if (r[rl - 1] == '*') {
			if (pathlen >= rl - 1 && memcmp(path, r, rl - 1) == 0)
				return REASON_ALLOWED;
		} else if (pathlen == rl && memcmp(path, r, rl) == 0) {
			return REASON_ALLOWED;
		}
	}
	return REASON_CONNECTION_PATH_DENIED;
}

bool
connection_strips_header(const struct connection *c, const char *name, size_t namelen)
{
	static const char *const always[] = {
		"authorization", "proxy-authorization", "x-api-key", "cookie",
	};

	for (size_t i = 0; i < EGRESS_NELEM(always); i++)
		if (namelen == strlen(always[i]) && strncasecmp(name, always[i], namelen) == 0)
			return true;
	return c != NULL && c->header[0] != '\0' && namelen == strlen(c->header) &&
	    strncasecmp(name, c->header, namelen) == 0;
}

size_t
connection_header_line(const struct connection *c, char *out, size_t outlen)
{
	const char *name, *prefix = "";
	size_t nl, pl, need;

	switch (c->apply) {
	case CONN_APPLY_BEARER:
		name = "Authorization";
		prefix = "Bearer ";
		break;
	case CONN_APPLY_X_API_KEY:
		name = "x-api-key";
		break;
	case CONN_APPLY_HEADER:
		name = c->header;
		break;
	case CONN_APPLY_NONE:
	default:
		return 0;
	}
	nl = strlen(name);
	pl = strlen(prefix);
	need = nl + 2 + pl + c->secret_len + 2;
	if (c->secret == NULL || outlen < need + 1)
		return 0;
	memcpy(out, name, nl);
	memcpy(out + nl, ": ", 2);
	memcpy(out + nl + 2, prefix, pl);
	memcpy(out + nl + 2 + pl, c->secret, c->secret_len);
	memcpy(out + need - 2, "\r\n", 2);
	out[need] = '\0';
	return need;
}
