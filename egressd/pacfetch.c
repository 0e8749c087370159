/* pacfetch.c - bounded, timed PAC fetch with a last good copy (see pacfetch.h). */
#define _GNU_SOURCE
#include "egressd/pacfetch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/host.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "egressd/httpresp.h"
#include "egressd/resolve.h"

#define PAC_PATH_MAX 2048

struct pacfetch {
	struct event_base *base;
	struct resolver *res;
	char *url0;                   /* configured URL */
	char *copy_path;
	SSL_CTX *ssl_ctx;
	uint32_t timeout_ms, refresh_s, retry_s;
	size_t max_bytes;
	unsigned max_redirects;
	pacfetch_cb cb;
	void *cb_arg;
	bool have_copy;
	bool have_digest;
	unsigned char digest[32];     /* SHA-256 of the body of the installed copy */
	char last_error[256];

	/* the fetch in progress */
	bool running;
	unsigned redirects;
	int https;
	struct host host;
	char path[PAC_PATH_MAX];
	struct addr addrs[EGRESS_DNS_ADDRS_MAX];
	size_t naddrs, next_addr;
	struct resolve_req *rreq;
	struct bufferevent *bev;
	struct event *deadline;
	struct event *again;          /* refresh / retry timer */
};

static void fetch_begin_url(struct pacfetch *p, const char *url);
static void try_next_addr(struct pacfetch *p);

bool
pacfetch_body_plausible(const char *body, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (body[i] == '\0')
			return false;        /* binary: not a script */
	return memmem(body, len, "FindProxyForURL", 15) != NULL;
}

static void
conn_close(struct pacfetch *p)
{
	if (p->bev != NULL) {
		bufferevent_free(p->bev);
		p->bev = NULL;
	}
	if (p->rreq != NULL) {
		resolve_cancel(p->rreq);
		p->rreq = NULL;
	}
}

static void
schedule(struct pacfetch *p, uint32_t secs)
{
	struct timeval tv = { (time_t)secs, 0 };

	if (secs > 0)
		evtimer_add(p->again, &tv);
}

static void
finish(struct pacfetch *p, enum reason status, const char *detail)
{
	conn_close(p);
	evtimer_del(p->deadline);
	p->running = false;
	if (status == REASON_ALLOWED) {
		p->last_error[0] = '\0';
		schedule(p, p->refresh_s);
	} else {
		snprintf(p->last_error, sizeof(p->last_error), "%s", detail);
		log_warnx("PAC %s: %s%s", p->url0, detail,
		    p->have_copy ? " (keeping the last good copy)" : " (no good copy: routes denied)");
		schedule(p, p->retry_s);
	}
	if (p->cb != NULL)
		p->cb(status, detail, p->cb_arg);
}

static const char pac_wrapper[] =
    "\n" PAC_WRAPPER_MARKER "\n"
    "var __egress_pac_original = FindProxyForURL;\n"
    "FindProxyForURL = function (url, host) {\n"
    "  var r;\n"
    "  try { r = __egress_pac_original(url, host); }\n"
    "  catch (e) { return \"PROXY " PAC_ERROR_HOST ":1\"; }\n"
    "  if (typeof r !== \"string\" || r.length === 0) return \"PROXY " PAC_ERROR_HOST ":1\";\n"
    /* libproxy turns keywords it does not know (HTTPS, QUIC, ...) into direct:// */
    "  var e = r.split(\";\");\n"
    "  for (var i = 0; i < e.length; i++)\n"
    "    if (!/^\\s*(DIRECT\\s*|(PROXY|SOCKS|SOCKS5)\\s+\\S+\\s*)?$/i.test(e[i]))\n"
    "      return \"PROXY " PAC_ERROR_HOST ":1\";\n"
    "  return r;\n"
    "};\n";

int
pac_install_copy(const char *path, const char *body, size_t len)
{
	char tmp[EGRESS_PATH_MAX];
	int fd, e;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	/* A new file only (O_EXCL never follows a link nor opens an existing file): egressd
	 * copies a local PAC file as root at start-up into a directory the account it drops
	 * to may own, where a planted hard link as the .tmp name would otherwise have root
	 * truncate, fill and chmod another file. A stale .tmp (a crash) is removed first. */
	if (unlink(tmp) != 0 && errno != ENOENT)
		return -1;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -1;
	/* No fsync: this runs on the event loop, and the copy is a cache. A copy torn by a
	 * power loss lacks egressd's trailing wrapper marker, which the helper checks before
	 * every lookup: it fails closed (pac_unavailable) until the next fetch. */
	if (write_all(fd, body, len) != 0 ||
	    write_all(fd, pac_wrapper, sizeof(pac_wrapper) - 1) != 0 ||
	    fchmod(fd, 0644) != 0) {
		e = errno;
		close(fd);
		unlink(tmp);
		errno = e;
		return -1;
	}
	if (close(fd) != 0 || rename(tmp, path) != 0) {
		e = errno;
		unlink(tmp);
		errno = e;
		return -1;
	}
	return 0;
}

/* Handle a complete response (connection closed by the server). */
static void
on_response(struct pacfetch *p)
{
	struct evbuffer *in = bufferevent_get_input(p->bev);
	size_t len = evbuffer_get_length(in);
	const char *buf = (const char *)evbuffer_pullup(in, -1);
	struct httpresp r;
	char detail[160];
	long i;

	if (len == 0 || buf == NULL) {
		finish(p, REASON_PAC_UNAVAILABLE, "empty response from the PAC server");
		return;
	}
	switch (httpresp_parse(buf, len, 0, &r)) {
	case HTTPRESP_OK:
		break;
	case HTTPRESP_INCOMPLETE:
		finish(p, REASON_PAC_UNAVAILABLE, "truncated response head");
		return;
	case HTTPRESP_TOO_LARGE:
		finish(p, REASON_PAC_UNAVAILABLE, "response head too large");
		return;
	case HTTPRESP_INVALID:
		finish(p, REASON_PAC_UNAVAILABLE, "invalid response head");
		return;
	}
	if (r.status == 301 || r.status == 302 || r.status == 303 || r.status == 307 ||
	    r.status == 308) {
		char loc[PAC_PATH_MAX + EGRESS_HOSTPORT_MAX + 16];

		i = httpresp_find(&r, "location", 0);
		if (i < 0 || r.headers[i].value_len >= sizeof(loc)) {
			finish(p, REASON_PAC_UNAVAILABLE, "redirect without a usable Location");
			return;
		}
		if (++p->redirects > p->max_redirects) {
			finish(p, REASON_PAC_UNAVAILABLE, "too many redirects");
			return;
		}
		memcpy(loc, r.headers[i].value, r.headers[i].value_len);
		loc[r.headers[i].value_len] = '\0';
		if (loc[0] == '/') {
			/* path-absolute: same origin */
			char hp[EGRESS_HOSTPORT_MAX + 1], abs[sizeof(loc) + EGRESS_HOSTPORT_MAX + 16];
			snprintf(abs, sizeof(abs), "%s://%s%s", p->https ? "https" : "http",
			    host_to_str(&p->host, hp, sizeof(hp)), loc);
			conn_close(p);
			fetch_begin_url(p, abs);
		} else {
			conn_close(p);
			fetch_begin_url(p, loc);
		}
		return;
	}
	if (r.status != 200) {
		snprintf(detail, sizeof(detail), "the PAC server answered HTTP %d", r.status);
		finish(p, REASON_PAC_UNAVAILABLE, detail);
		return;
	}
	{
		const char *body = buf + r.head_len;
		size_t blen = len - r.head_len;

		i = httpresp_find(&r, "content-length", 0);
		if (i >= 0) {
			char cl[24];
			long long v;
			const char *es;
			if (r.headers[i].value_len >= sizeof(cl) ||
			    (memcpy(cl, r.headers[i].value, r.headers[i].value_len),
			     cl[r.headers[i].value_len] = '\0',
			     num_parse(cl, 0, (long long)p->max_bytes, &v, &es) != 0) ||
			    (uint64_t)v != blen) {
				finish(p, REASON_PAC_UNAVAILABLE, "body length does not match Content-Length");
				return;
			}
		}
		if (blen > p->max_bytes) {
			finish(p, REASON_PAC_UNAVAILABLE, "PAC file larger than the limit");
			return;
		}
		if (!pacfetch_body_plausible(body, blen)) {
			finish(p, REASON_PAC_UNAVAILABLE, "not a PAC file (no FindProxyForURL)");
			return;
		}
		unsigned char dg[32];
		SHA256((const unsigned char *)body, blen, dg);
		if (p->have_digest && p->have_copy && memcmp(dg, p->digest, sizeof(dg)) == 0) {
			/* unchanged: keep the copy, and do not restart the helpers for nothing */
			conn_close(p);
			evtimer_del(p->deadline);
			p->running = false;
			p->last_error[0] = '\0';
			schedule(p, p->refresh_s);
			return;
		}
		if (pac_install_copy(p->copy_path, body, blen) != 0) {
			snprintf(detail, sizeof(detail), "cannot write %s: %s", p->copy_path,
			    strerror(errno));
			finish(p, REASON_PAC_UNAVAILABLE, detail);
			return;
		}
		p->have_copy = true;
		memcpy(p->digest, dg, sizeof(dg));
		p->have_digest = true;
		finish(p, REASON_ALLOWED, "installed");
	}
}

static void
on_read(struct bufferevent *bev, void *arg)
{
	struct pacfetch *p = arg;

	/* Bound what a server may send: head + max_bytes. */
	if (evbuffer_get_length(bufferevent_get_input(bev)) >
	    p->max_bytes + EGRESS_RESPONSE_HEAD_MAX)
		finish(p, REASON_PAC_UNAVAILABLE, "PAC file larger than the limit");
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	struct pacfetch *p = arg;

	if (what & BEV_EVENT_CONNECTED) {
		char req[PAC_PATH_MAX + EGRESS_HOSTPORT_MAX + 128];
		char hp[EGRESS_HOSTPORT_MAX + 1];
		int n = snprintf(req, sizeof(req),
		    "GET %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: egressd/" EGRESS_VERSION
		    "\r\nAccept: application/x-ns-proxy-autoconfig, */*\r\nConnection: close\r\n\r\n",
		    p->path, host_to_str(&p->host, hp, sizeof(hp)));
		if (n < 0 || (size_t)n >= sizeof(req)) {
			finish(p, REASON_PAC_UNAVAILABLE, "request too long");
			return;
		}
		bufferevent_write(bev, req, (size_t)n);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		on_response(p);
		return;
	}
	if (what & BEV_EVENT_ERROR) {
		unsigned long e = bufferevent_get_openssl_error(bev);
		if (e != 0) {
			char detail[200];
			snprintf(detail, sizeof(detail), "TLS to the PAC server failed: %s",
			    ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "error");
			finish(p, REASON_PAC_UNAVAILABLE, detail);
			return;
		}
		if (evbuffer_get_length(bufferevent_get_input(bev)) > 0 && !p->https) {
			on_response(p);   /* reset after the body: judge what arrived */
			return;
		}
		conn_close(p);
		try_next_addr(p);
	}
}

static void
try_next_addr(struct pacfetch *p)
{
	struct sockaddr_storage ss;
	socklen_t sl;

	if (p->next_addr >= p->naddrs) {
		finish(p, REASON_PAC_UNAVAILABLE, "cannot connect to the PAC server");
		return;
	}
	sl = addr_to_sockaddr(&p->addrs[p->next_addr++], p->host.port, &ss);
	if (p->https) {
		SSL *ssl = SSL_new(p->ssl_ctx);
		if (ssl == NULL) {
			finish(p, REASON_PAC_UNAVAILABLE, "TLS setup failed");
			return;
		}
		if (p->host.kind == HOST_NAME) {
			SSL_set_tlsext_host_name(ssl, p->host.name);
			SSL_set1_host(ssl, p->host.name);
		} else {
			X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), p->host.name);
		}
		SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
		/* the SSL is libevent's from here, also when this fails (it frees it) */
		p->bev = bufferevent_openssl_socket_new(p->base, -1, ssl,
		    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	} else {
		p->bev = bufferevent_socket_new(p->base, -1, BEV_OPT_CLOSE_ON_FREE);
	}
	if (p->bev == NULL) {
		finish(p, REASON_PAC_UNAVAILABLE, "out of memory");
		return;
	}
	bufferevent_setcb(p->bev, on_read, NULL, on_event, p);
	bufferevent_enable(p->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(p->bev, (struct sockaddr *)&ss, (int)sl) != 0) {
		conn_close(p);
		try_next_addr(p);
	}
}

static void
on_resolved(const struct resolve_answer *ans, void *arg)
{
	struct pacfetch *p = arg;
	char detail[160];

	p->rreq = NULL;
	if (ans->status != REASON_ALLOWED) {
		snprintf(detail, sizeof(detail), "cannot resolve the PAC server %s: %s",
		    ans->name, reason_str(ans->status));
		finish(p, REASON_PAC_UNAVAILABLE, detail);
		return;
	}
	p->naddrs = ans->naddrs;
	memcpy(p->addrs, ans->addrs, ans->naddrs * sizeof(ans->addrs[0]));
	p->next_addr = 0;
	try_next_addr(p);
}

/* Parse url into p->https, p->host, p->path. Returns 0 or -1 with *why. */
static int
parse_url(struct pacfetch *p, const char *url, const char **why)
{
	const char *rest, *slash;
	size_t plen;

	if (strncmp(url, "http://", 7) == 0) {
		p->https = 0;
		rest = url + 7;
	} else if (strncmp(url, "https://", 8) == 0) {
		p->https = 1;
		rest = url + 8;
	} else {
		*why = "the PAC URL must be http:// or https://";
		return -1;
	}
	slash = strchr(rest, '/');
	if (host_parse(rest, slash ? (size_t)(slash - rest) : strlen(rest), 0, &p->host) !=
	    HOST_OK) {
		*why = "the PAC URL has an invalid host";
		return -1;
	}
	if (p->host.port == 0)
		p->host.port = p->https ? 443 : 80;
	if (slash == NULL)
		slash = "/";
	plen = strlen(slash);
	if (plen >= sizeof(p->path)) {
		*why = "the PAC URL path is too long";
		return -1;
	}
	for (size_t i = 0; i < plen; i++)
		if ((unsigned char)slash[i] <= 0x20 || (unsigned char)slash[i] >= 0x7f ||
		    slash[i] == '#') {
			*why = "the PAC URL path has characters that must be percent-encoded";
			return -1;
		}
	memcpy(p->path, slash, plen + 1);
	return 0;
}

static void
fetch_begin_url(struct pacfetch *p, const char *url)
{
	const char *why;

	if (parse_url(p, url, &why) != 0) {
		finish(p, REASON_PAC_UNAVAILABLE, why);
		return;
	}
	if (p->host.kind != HOST_NAME) {
		p->addrs[0] = p->host.addr;
		p->naddrs = 1;
		p->next_addr = 0;
		try_next_addr(p);
		return;
	}
	p->rreq = resolver_lookup(p->res, p->host.name, on_resolved, p);
	if (p->rreq == NULL)
		finish(p, REASON_PAC_UNAVAILABLE, "out of memory");
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct pacfetch *p = arg;
	char detail[96];

	(void)fd;
	(void)what;
	snprintf(detail, sizeof(detail), "the fetch took longer than %u ms", p->timeout_ms);
	finish(p, REASON_PAC_UNAVAILABLE, detail);
}

void
pacfetch_refresh(struct pacfetch *p)
{
	struct timeval tv = { (time_t)(p->timeout_ms / 1000),
	    (suseconds_t)(p->timeout_ms % 1000) * 1000 };

	if (p->running)
		return;
	p->running = true;
	p->redirects = 0;
	evtimer_del(p->again);
	evtimer_add(p->deadline, &tv);
	fetch_begin_url(p, p->url0);
}

static void
on_again(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pacfetch_refresh(arg);
}

struct pacfetch *
pacfetch_new(struct event_base *base, struct resolver *res, const struct pacfetch_config *cfg,
    pacfetch_cb cb, void *arg, char *err, size_t errlen)
{
	struct pacfetch *p;
	const char *why;
	struct stat st;

	if (cfg->copy_path == NULL || cfg->copy_path[0] != '/') {
		snprintf(err, errlen, "the PAC copy path must be absolute");
		return NULL;
	}
	if (cfg->max_bytes == 0 || cfg->max_bytes > EGRESS_PAC_MAX || cfg->timeout_ms == 0 ||
	    cfg->max_redirects > 5) {
		snprintf(err, errlen, "PAC limits out of range (size 1..%d, timeout > 0, redirects <= 5)",
		    EGRESS_PAC_MAX);
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->base = base;
	p->res = res;
	p->timeout_ms = cfg->timeout_ms;
	p->refresh_s = cfg->refresh_s;
	p->retry_s = cfg->retry_s ? cfg->retry_s : 30;
	p->max_bytes = cfg->max_bytes;
	p->max_redirects = cfg->max_redirects;
	p->cb = cb;
	p->cb_arg = arg;
	p->url0 = strdup(cfg->url ? cfg->url : "");
	p->copy_path = strdup(cfg->copy_path);
	if (p->url0 == NULL || p->copy_path == NULL)
		goto fail_nomem;
	if (parse_url(p, p->url0, &why) != 0) {
		snprintf(err, errlen, "%s", why);
		goto fail;
	}
	p->ssl_ctx = SSL_CTX_new(TLS_client_method());
	if (p->ssl_ctx == NULL)
		goto fail_nomem;
	SSL_CTX_set_min_proto_version(p->ssl_ctx, TLS1_2_VERSION);
	if (cfg->ca_file != NULL ?
	    SSL_CTX_load_verify_locations(p->ssl_ctx, cfg->ca_file, NULL) != 1 :
	    SSL_CTX_set_default_verify_paths(p->ssl_ctx) != 1) {
		snprintf(err, errlen, "cannot load the trust store%s%s",
		    cfg->ca_file ? " " : "", cfg->ca_file ? cfg->ca_file : "");
		goto fail;
	}
	p->deadline = evtimer_new(base, on_deadline, p);
	p->again = evtimer_new(base, on_again, p);
	if (p->deadline == NULL || p->again == NULL)
		goto fail_nomem;
	/* A copy kept from an earlier run is the last good copy until a fetch replaces it. */
	p->have_copy = stat(p->copy_path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
	pacfetch_refresh(p);
	return p;
fail_nomem:
	snprintf(err, errlen, "out of memory");
fail:
	pacfetch_free(p);
	return NULL;
}

void
pacfetch_free(struct pacfetch *p)
{
	if (p == NULL)
		return;
	conn_close(p);
	if (p->deadline)
		event_free(p->deadline);
	if (p->again)
		event_free(p->again);
	if (p->ssl_ctx)
		SSL_CTX_free(p->ssl_ctx);
	free(p->url0);
	free(p->copy_path);
	free(p);
}

bool
pacfetch_have_copy(const struct pacfetch *p)
{
	return p->have_copy;
}

const char *
pacfetch_last_error(const struct pacfetch *p)
{
	return p->last_error;
}
