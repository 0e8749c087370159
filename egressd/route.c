/*
 * route.c - the host route: direct, a static proxy, or libproxy (system settings / PAC)
 * through the route helper. See route.h for the rules.
 */
#define _GNU_SOURCE
#include "egressd/route.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/ssl.h>

#include "common/log.h"
#include "common/util.h"
#include "egressd/gssauth.h"
#include "egressd/pacfetch.h"
#include "egressd/proxycreds.h"
#include "egressd/routehelper.h"
#include "common/routeproto.h"
#include "egressd/upstream.h"
#include "egressd/wpad.h"

#ifndef EGRESS_LIBEXECDIR
#define EGRESS_LIBEXECDIR "/usr/local/libexec/egress"
#endif

extern char **environ;

struct route_req {
	struct router *rq_r;
	struct event *rq_ev;         /* immediate answers: delivered on the next loop turn */
	struct rh_req *rq_hq;        /* helper lookups */
	struct route_result rq_res;
	route_cb rq_cb;
	void *rq_arg;
	struct route_req *rq_next, *rq_prev;
};

struct router {
	struct event_base *rt_base;
	struct route_config rt_cfg;
	struct proxy_route rt_static_proxy;
	struct routehelper *rt_rh;
	struct pacfetch *rt_pf;
	bool rt_pac_local_ok;        /* a local PAC file was copied */
	struct proxycreds *rt_creds;
	SSL_CTX *rt_tls;
	bool rt_tls_loaded;             /* tls holds its trust store (upstream.h) */
	bool rt_tls_failed;             /* ... could not be loaded: said once */
	struct gssauth *rt_gss;
	char rt_pac_status[300];
	struct route_req *rt_reqs;
	/* WPAD (a system route whose proxy variable is wpad://): candidates tried in order */
	bool rt_wpad;
	char rt_wpad_urls[WPAD_CANDIDATES_MAX][WPAD_URL_MAX];
	size_t rt_wpad_n, rt_wpad_i;
	struct event *rt_wpad_ev;
	struct event *rt_discover_ev; /* the helper reported libproxy's own WPAD: switch */
	char **rt_envp;              /* the helpers' environment (system and pac routes) */
	bool rt_env_bad;             /* a proxy variable is set but unreadable: every hop is
	                                refused (route_unavailable); pac_status says which */
	struct resolver *rt_res;
};

const char *
route_kind_str(enum route_kind k)
{
	switch (k) {
	case ROUTE_KIND_DIRECT: return "direct";
	case ROUTE_KIND_SYSTEM: return "system";
	case ROUTE_KIND_PAC:    return "pac";
	case ROUTE_KIND_PROXY:  return "proxy";
	}
	return "?";
}

void
route_config_clear(struct route_config *c)
{
	free(c->pac);
	free(c->proxy);
	free(c->helper);
	free(c->pac_copy);
	free(c->credentials);
	free(c->proxy_ca_file);
	free(c->wpad_domain);
	c->pac = c->proxy = c->helper = c->pac_copy = c->credentials = c->proxy_ca_file = NULL;
	c->wpad_domain = NULL;
}

int
route_config_parse(const char *s, struct route_config *c, const char **err)
{
	const char *arg = strchr(s, ' ');
	size_t kl = arg ? (size_t)(arg - s) : strlen(s);

	while (arg != NULL && *arg == ' ')
		arg++;
	free(c->pac);
	free(c->proxy);
	c->pac = c->proxy = NULL;
	if (kl == 6 && strncmp(s, "direct", 6) == 0 && arg == NULL) {
		c->kind = ROUTE_KIND_DIRECT;
		return 0;
	}
	if (kl == 6 && strncmp(s, "system", 6) == 0 && arg == NULL) {
		c->kind = ROUTE_KIND_SYSTEM;
		return 0;
	}
	if (kl == 3 && strncmp(s, "pac", 3) == 0 && arg != NULL && *arg != '\0') {
		if (strncmp(arg, "http://", 7) != 0 && strncmp(arg, "https://", 8) != 0 &&
		    arg[0] != '/') {
			*err = "route = pac needs an http(s):// URL or an absolute file path";
			return -1;
		}
		c->kind = ROUTE_KIND_PAC;
		c->pac = strdup(arg);
		return c->pac ? 0 : -1;
	}
	if (kl == 5 && strncmp(s, "proxy", 5) == 0 && arg != NULL && *arg != '\0') {
		struct proxy_route e;
		if (proxyurl_parse(arg, strlen(arg), &e, err) != 0)
			return -1;
		if (e.kind == PROXY_DIRECT) {
			*err = "route = proxy needs a proxy URL (use route = direct for no proxy)";
			return -1;
		}
		if (e.had_userinfo) {
			*err = "credentials do not belong in the proxy URL: put them in the root-only "
			    "proxy_credentials file";
			return -1;
		}
		c->kind = ROUTE_KIND_PROXY;
		c->proxy = strdup(arg);
		return c->proxy ? 0 : -1;
	}
	*err = "route must be direct, system, pac URL|FILE or proxy URL";
	return -1;
}

static char *find_helper(const char *configured);

/* The proxy variables route = system reads (no_proxy apart: a list, not a route). */
static const char *const proxy_env_names[] = { "http_proxy", "https_proxy", "HTTP_PROXY",
	"HTTPS_PROXY", "all_proxy", "ALL_PROXY" };

/* A variable's value for a message: escaped, cut, and hidden when it may hold userinfo. */
static void
env_show(const char *v, char *out, size_t outlen)
{
	size_t o = 0;

	if (strchr(v, '@') != NULL) {
		snprintf(out, outlen, "(value hidden: it may hold a password)");
		return;
	}
	out[o++] = '"';
	for (size_t i = 0; v[i] != '\0' && o + 8 < outlen && i < 80; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c < 0x20 || c >= 0x7f)
			o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
		else
			out[o++] = (char)c;
	}
	out[o++] = '"';
	out[o] = '\0';
}

/*
 * Is one of route = system's proxy variables set but unreadable? libproxy would ignore it
 * and answer direct:// (fail open); egressd refuses every hop instead. Returns -1 with a
 * message naming the variable and the problem, 0 when all are readable or unset.
 */
static int
proxy_env_problem(char *msg, size_t msglen)
{
	for (size_t i = 0; i < EGRESS_NELEM(proxy_env_names); i++) {
		const char *e = getenv(proxy_env_names[i]), *why;
		enum proxyenv_kind k;
		char norm[EGRESS_HOST_INPUT_MAX + 16], shown[400];

		if (e == NULL || *e == '\0')
			continue;
		if (proxyenv_check(e, &k, norm, sizeof(norm), &why) == 0)
			continue;
		env_show(e, shown, sizeof(shown));
		snprintf(msg, msglen, "route = system: %s=%s cannot be read as a proxy (%s); "
		    "every hop is refused with route_unavailable until it is fixed or unset",
		    proxy_env_names[i], shown, why);
		return -1;
	}
	return 0;
}

int
route_config_check(const struct route_config *c, char *err, size_t errlen)
{
	struct proxycreds *pc;
	char *helper, dir[EGRESS_PATH_MAX];
	struct stat st;

	if (c->credentials != NULL) {
		pc = proxycreds_load(c->credentials, geteuid() == 0, err, errlen);
		if (pc == NULL)
			return -1;
		proxycreds_free(pc);
	}
	if (c->kind != ROUTE_KIND_SYSTEM && c->kind != ROUTE_KIND_PAC)
		return 0;
	if (c->kind == ROUTE_KIND_SYSTEM && proxy_env_problem(err, errlen) != 0)
		return -1;
	helper = find_helper(c->helper);
	if (helper == NULL || access(helper, X_OK) != 0) {
		snprintf(err, errlen, "route helper %s is not executable", helper ? helper : "?");
		free(helper);
		return -1;
	}
	free(helper);
	if (c->kind == ROUTE_KIND_PAC && c->pac != NULL && c->pac[0] == '/') {
		if (stat(c->pac, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
		    st.st_size > EGRESS_PAC_MAX || access(c->pac, R_OK) != 0) {
			snprintf(err, errlen, "PAC file %s: missing, unreadable, empty or larger than "
			    "%d bytes", c->pac, EGRESS_PAC_MAX);
			return -1;
		}
	}
	if (c->pac_copy != NULL) {
		snprintf(dir, sizeof(dir), "%s", c->pac_copy);
		if (stat(dirname(dir), &st) != 0 || !S_ISDIR(st.st_mode)) {
			snprintf(err, errlen, "pac_copy %s: its directory does not exist", c->pac_copy);
			return -1;
		}
		if ((st.st_mode & S_IXOTH) == 0)
			log_warnx("pac_copy %s: its directory is not traversable by others; the route "
			    "helper runs as nobody and would refuse every PAC lookup", c->pac_copy);
	}
	return 0;
}

/* ---- requests ---- */

static void
req_unlink_free(struct route_req *q)
{
	if (q->rq_prev != NULL)
		q->rq_prev->rq_next = q->rq_next;
	else
		q->rq_r->rt_reqs = q->rq_next;
	if (q->rq_next != NULL)
		q->rq_next->rq_prev = q->rq_prev;
	if (q->rq_ev != NULL)
		event_free(q->rq_ev);
	if (q->rq_hq != NULL)
		routehelper_cancel(q->rq_hq);
	free(q);
}

static void
deliver(struct route_req *q)
{
	struct route_result res = q->rq_res;
	route_cb cb = q->rq_cb;
	void *arg = q->rq_arg;

	req_unlink_free(q);            /* the handle is invalid once the callback starts */
	cb(&res, arg);
}

static void
route_fire(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	deliver(arg);
}

/* Keep what may be used: drop DIRECT when it is not permitted. */
static void
filter_entries(struct router *r, struct route_result *res)
{
	size_t k = 0;
	bool dropped_direct = false;

	for (size_t i = 0; i < res->n; i++) {
		if (res->entries[i].kind == PROXY_DIRECT && !r->rt_cfg.allow_direct) {
			dropped_direct = true;
			continue;
		}
		res->entries[k++] = res->entries[i];
	}
	res->n = k;
	if (k == 0 && res->status == REASON_ALLOWED)
		res->status = dropped_direct ? REASON_DIRECT_NOT_PERMITTED : REASON_ROUTE_UNAVAILABLE;
}

static void
helper_answered(enum reason status, const struct routeproto_reply *reply, void *arg)
{
	struct route_req *q = arg;
	struct router *r = q->rq_r;

	/* libproxy's own WPAD or PAC fetch (its settings, not egressd's): the hop is refused
	 * (pac_unavailable) and egressd runs WPAD itself, once, outside this callback. */
	if (reply != NULL && !reply->ok && strcmp(reply->err, ROUTEPROTO_ERR_WPAD) == 0 &&
	    r->rt_cfg.kind == ROUTE_KIND_SYSTEM && !r->rt_wpad && r->rt_pf == NULL &&
	    r->rt_discover_ev != NULL && !evtimer_pending(r->rt_discover_ev, NULL)) {
		struct timeval now = { 0, 0 };
		evtimer_add(r->rt_discover_ev, &now);
	}
	q->rq_hq = NULL;
	q->rq_res.status = status;
	q->rq_res.n = 0;
	if (status == REASON_ALLOWED && reply != NULL && reply->ok) {
		for (size_t i = 0; i < reply->n && i < EGRESS_ROUTE_PROXIES_MAX; i++)
			q->rq_res.entries[q->rq_res.n++] = reply->entries[i];
		filter_entries(q->rq_r, &q->rq_res);
	} else if (status == REASON_ALLOWED) {
		q->rq_res.status = REASON_ROUTE_UNAVAILABLE;
	}
	deliver(q);
}

struct route_req *
route_lookup(struct router *r, enum dest_scheme scheme, const struct host *h, uint16_t port,
    route_cb cb, void *arg)
{
	struct route_req *q = calloc(1, sizeof(*q));
	char url[EGRESS_ROUTE_LINE_MAX];

	if (q == NULL)
		return NULL;
	q->rq_r = r;
	q->rq_cb = cb;
	q->rq_arg = arg;
	q->rq_res.source = route_kind_str(r->rt_cfg.kind);
	q->rq_next = r->rt_reqs;
	if (r->rt_reqs != NULL)
		r->rt_reqs->rq_prev = q;
	r->rt_reqs = q;

	switch (r->rt_cfg.kind) {
	case ROUTE_KIND_DIRECT:
	case ROUTE_KIND_PROXY:
		(void)route_static(r, &q->rq_res);
		break;
	case ROUTE_KIND_PAC:
	case ROUTE_KIND_SYSTEM:
		/* A proxy variable libproxy would ignore (and so go direct): refused. */
		if (r->rt_env_bad) {
			q->rq_res.status = REASON_ROUTE_UNAVAILABLE;
			break;
		}
		/* No PAC yet (or WPAD found none): refused, never guessed, never direct. */
		if ((r->rt_pf != NULL && !pacfetch_have_copy(r->rt_pf)) || (r->rt_wpad && r->rt_pf == NULL)) {
			q->rq_res.status = REASON_PAC_UNAVAILABLE;
			break;
		}
		/* The query URL is built from the canonical scheme, host and port only. */
		if (routeproto_query_url(scheme, h, port, url, sizeof(url)) == 0) {
			q->rq_res.status = REASON_ROUTE_UNAVAILABLE;
			break;
		}
		q->rq_hq = routehelper_lookup(r->rt_rh, url, helper_answered, q);
		if (q->rq_hq == NULL) {
			req_unlink_free(q);
			errno = ENOMEM;
			return NULL;
		}
		return q;
	}
	q->rq_ev = evtimer_new(r->rt_base, route_fire, q);
	if (q->rq_ev == NULL) {
		req_unlink_free(q);
		errno = ENOMEM;
		return NULL;
	}
	/* The answer is known: delivered from the loop later in this same turn (never from
	 * inside route_lookup). Activated, not a zero timeout: that would cost the loop a
	 * turn with an extra epoll_wait(…, 0) per connection. */
	event_active(q->rq_ev, EV_TIMEOUT, 0);
	return q;
}

bool
route_static(const struct router *r, struct route_result *res)
{
	switch (r->rt_cfg.kind) {
	case ROUTE_KIND_DIRECT:
		res->entries[0] = (struct proxy_route){ .kind = PROXY_DIRECT };
		break;
	case ROUTE_KIND_PROXY:
		res->entries[0] = r->rt_static_proxy;
		break;
	case ROUTE_KIND_PAC:
	case ROUTE_KIND_SYSTEM:
	default:
		return false;   /* the answer depends on the destination */
	}
	res->status = REASON_ALLOWED;
	res->n = 1;
	res->source = route_kind_str(r->rt_cfg.kind);
	res->from_cache = false;
	return true;
}

void
route_cancel(struct route_req *q)
{
	if (q != NULL)
		req_unlink_free(q);
}

/* ---- construction ---- */

static void
pac_updated(enum reason status, const char *detail, void *arg)
{
	struct router *r = arg;

	if (status == REASON_ALLOWED) {
		snprintf(r->rt_pac_status, sizeof(r->rt_pac_status), "PAC %s: good copy installed",
		    r->rt_cfg.pac ? r->rt_cfg.pac : "");
		log_info("PAC %s fetched; the route helper restarts with the new copy",
		    r->rt_cfg.pac ? r->rt_cfg.pac : "");
		if (r->rt_rh != NULL)
			routehelper_reset(r->rt_rh);
	} else {
		snprintf(r->rt_pac_status, sizeof(r->rt_pac_status), "%sPAC %s: %s (%s)",
		    r->rt_wpad ? "WPAD " : "", r->rt_cfg.pac ? r->rt_cfg.pac : "", detail,
		    pacfetch_have_copy(r->rt_pf) ? "keeping the last good copy" : "no good copy");
		/* WPAD: this candidate gave nothing; try the next, less specific one. The
		 * fetcher cannot be freed from inside its own callback: next loop turn. */
		if (r->rt_wpad && !pacfetch_have_copy(r->rt_pf) && r->rt_wpad_i + 1 < r->rt_wpad_n &&
		    r->rt_wpad_ev != NULL) {
			struct timeval now = { 0, 0 };
			evtimer_add(r->rt_wpad_ev, &now);
		}
	}
}

static struct pacfetch *wpad_fetcher(struct router *r, char *err, size_t errlen);

static void
wpad_next(evutil_socket_t fd, short what, void *arg)
{
	struct router *r = arg;
	char err[256];

	(void)fd;
	(void)what;
	pacfetch_free(r->rt_pf);
	r->rt_pf = NULL;
	r->rt_wpad_i++;
	if (r->rt_wpad_i >= r->rt_wpad_n)
		return;
	r->rt_pf = wpad_fetcher(r, err, sizeof(err));
	if (r->rt_pf == NULL)
		log_warnx("WPAD %s: %s", r->rt_wpad_urls[r->rt_wpad_i], err);
}

/* A fetcher for the current WPAD candidate (the copy path and CA as for any PAC). */
static struct pacfetch *
wpad_fetcher(struct router *r, char *err, size_t errlen)
{
	const char *url = r->rt_wpad_urls[r->rt_wpad_i];
	struct pacfetch_config pc = {
		.url = url, .copy_path = r->rt_cfg.pac_copy, .ca_file = r->rt_cfg.proxy_ca_file,
		.timeout_ms = (uint32_t)(r->rt_cfg.pac_timeout_ms ? r->rt_cfg.pac_timeout_ms : 10000),
		.max_bytes = EGRESS_PAC_MAX, .max_redirects = 3,
		.refresh_s = (uint32_t)(r->rt_cfg.pac_refresh_ms / 1000), .retry_s = 30,
	};

	free(r->rt_cfg.pac);
	r->rt_cfg.pac = strdup(url);
	/* a status line for people: a long URL may cut it short, nothing reads it back */
	if (snprintf(r->rt_pac_status, sizeof(r->rt_pac_status), "WPAD: fetching %s (candidate %zu "
	    "of %zu)", url, r->rt_wpad_i + 1, r->rt_wpad_n) >= (int)sizeof(r->rt_pac_status))
		r->rt_pac_status[sizeof(r->rt_pac_status) - 1] = '\0';
	return pacfetch_new(r->rt_base, r->rt_res, &pc, pac_updated, r, err, errlen);
}

static int env_add(char ***envp, size_t *n, const char *name, const char *value);
static void env_free(char **envp);

/* WPAD candidates for the host's domain (wpad_domain, else resolv.conf's search domain);
 * pac_status says so when there is none. */
static void
wpad_plan(struct router *r)
{
	char dom[EGRESS_HOSTNAME_MAX + 1];

	if (r->rt_cfg.wpad_domain != NULL)
		snprintf(dom, sizeof(dom), "%s", r->rt_cfg.wpad_domain);
	else if (wpad_search_domain("/etc/resolv.conf", dom, sizeof(dom)) != 0)
		dom[0] = '\0';
	r->rt_wpad_n = dom[0] ? wpad_candidates(dom, r->rt_wpad_urls, WPAD_CANDIDATES_MAX) : 0;
	r->rt_wpad_i = 0;
	if (r->rt_wpad_n == 0)
		snprintf(r->rt_pac_status, sizeof(r->rt_pac_status), "WPAD: no candidate "
		    "(search domain %.200s); hops are refused with pac_unavailable",
		    dom[0] ? dom : "unknown");
}

/* Is this environment entry a proxy variable libproxy reads (name any case)? */
static bool
env_is_proxy(const char *kv)
{
	static const char *const names[] = { "http_proxy=", "https_proxy=", "all_proxy=" };

	for (size_t i = 0; i < EGRESS_NELEM(names); i++)
		if (strncasecmp(kv, names[i], strlen(names[i])) == 0)
			return true;
	return false;
}

/*
 * The route helper said libproxy's configuration (a desktop or system setting egressd
 * cannot see) discovers or fetches a PAC itself. libproxy would do that blocking and fail
 * open to direct://; egressd runs WPAD by DNS itself instead (egressd/wpad.h), exactly as
 * for https_proxy=wpad://, and hands the helpers its PAC copy. Until a candidate answers,
 * hops are refused pac_unavailable; none answering keeps them refused. (Should libproxy's
 * settings still prefer their own discovery over egressd's copy, the helper keeps
 * refusing: never direct.)
 */
static void
wpad_discover(evutil_socket_t fd, short what, void *arg)
{
	struct router *r = arg;
	char **envp = NULL, pacenv[EGRESS_PATH_MAX + 16], err[256];
	size_t nenv = 0;

	(void)fd;
	(void)what;
	if (r->rt_wpad || r->rt_pf != NULL)
		return;
	log_warnx("route: libproxy's settings ask for WPAD or a PAC of their own; egressd "
	    "discovers by DNS itself (WPAD), hops are refused with pac_unavailable until a PAC "
	    "is fetched");
	if (r->rt_cfg.pac_copy == NULL || r->rt_cfg.pac_copy[0] != '/') {
		snprintf(r->rt_pac_status, sizeof(r->rt_pac_status), "WPAD (libproxy's settings): no "
		    "pac_copy path; hops are refused with pac_unavailable");
		r->rt_wpad = true;
		return;
	}
	snprintf(pacenv, sizeof(pacenv), "pac+file://%s", r->rt_cfg.pac_copy);
	for (size_t i = 0; r->rt_envp != NULL && r->rt_envp[i] != NULL; i++) {
		const char *eq = strchr(r->rt_envp[i], '=');
		char name[64];

		if (env_is_proxy(r->rt_envp[i]) || eq == NULL ||
		    (size_t)(eq - r->rt_envp[i]) >= sizeof(name))
			continue;
		memcpy(name, r->rt_envp[i], (size_t)(eq - r->rt_envp[i]));
		name[eq - r->rt_envp[i]] = '\0';
		if (env_add(&envp, &nenv, name, eq + 1) != 0)
			goto nomem;
	}
	if (env_add(&envp, &nenv, "http_proxy", pacenv) != 0 ||
	    env_add(&envp, &nenv, "https_proxy", pacenv) != 0 ||
	    routehelper_set_env(r->rt_rh, (const char *const *)envp) != 0)
		goto nomem;
	env_free(r->rt_envp);
	r->rt_envp = envp;
	r->rt_wpad = true;
	wpad_plan(r);
	if (r->rt_wpad_n == 0)
		return;
	if (r->rt_wpad_ev == NULL && (r->rt_wpad_ev = evtimer_new(r->rt_base, wpad_next, r)) == NULL)
		goto nomem_kept;
	r->rt_pf = wpad_fetcher(r, err, sizeof(err));
	if (r->rt_pf == NULL)
		log_warnx("WPAD %s: %s", r->rt_wpad_urls[r->rt_wpad_i], err);
	return;
nomem:
	env_free(envp);
	log_warnx("route: out of memory switching to WPAD; hops stay refused");
	return;
nomem_kept:
	log_warnx("route: out of memory switching to WPAD; hops stay refused");
}

/* Copy a local PAC file into the good-copy path (bounded, at start-up and reload). */
static int
copy_local_pac(struct router *r, const char *path, char *err, size_t errlen)
{
	char *buf = NULL;
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int rc = -1;

	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "PAC file %s: %s", path, fd < 0 ? strerror(errno) :
		    "not a regular file");
		goto done;
	}
	if (st.st_size <= 0 || st.st_size > EGRESS_PAC_MAX) {
		snprintf(err, errlen, "PAC file %s: size must be 1..%d bytes", path, EGRESS_PAC_MAX);
		goto done;
	}
	buf = malloc((size_t)st.st_size);
	if (buf == NULL || (n = read(fd, buf, (size_t)st.st_size)) != st.st_size) {
		snprintf(err, errlen, "PAC file %s: short read", path);
		goto done;
	}
	if (!pacfetch_body_plausible(buf, (size_t)n)) {
		snprintf(err, errlen, "PAC file %s does not define FindProxyForURL", path);
		goto done;
	}
	if (pac_install_copy(r->rt_cfg.pac_copy, buf, (size_t)n) != 0) {
		snprintf(err, errlen, "cannot write the PAC copy %s: %s", r->rt_cfg.pac_copy,
		    strerror(errno));
		goto done;
	}
	rc = 0;
done:
	free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The helper binary: configured, next to our own executable, or the libexec dir. */
static char *
find_helper(const char *configured)
{
	char self[EGRESS_PATH_MAX], cand[EGRESS_PATH_MAX + 32];
	ssize_t n;

	if (configured != NULL)
		return strdup(configured);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		snprintf(cand, sizeof(cand), "%s/egressd-route-helper", dirname(self));
		if (access(cand, X_OK) == 0)
			return strdup(cand);
	}
	return strdup(EGRESS_LIBEXECDIR "/egressd-route-helper");
}

static int
env_add(char ***envp, size_t *n, const char *name, const char *value)
{
	char **v = realloc(*envp, (*n + 2) * sizeof(char *));
	size_t l = strlen(name) + strlen(value) + 2;

	if (v == NULL)
		return -1;
	*envp = v;
	if ((v[*n] = malloc(l)) == NULL)
		return -1;
	snprintf(v[*n], l, "%s=%s", name, value);
	v[++*n] = NULL;
	return 0;
}

static void
env_free(char **envp)
{
	for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
		free(envp[i]);
	free(envp);
}

struct router *
router_new(struct event_base *base, struct resolver *res, const struct route_config *cfg,
    const struct router *prev, char *err, size_t errlen)
{
	struct router *r = calloc(1, sizeof(*r));
	char **envp = NULL;
	size_t nenv = 0;
	const char *pac_url = NULL;     /* to fetch */
	const char *pac_file = NULL;    /* to copy */
	char pacenv[EGRESS_PATH_MAX + 16];
	const char *e;

	if (r == NULL) {
		snprintf(err, errlen, "router: out of memory");
		return NULL;
	}
	r->rt_base = base;
	r->rt_cfg = *cfg;
	r->rt_cfg.pac = cfg->pac ? strdup(cfg->pac) : NULL;
	r->rt_cfg.proxy = cfg->proxy ? strdup(cfg->proxy) : NULL;
	r->rt_cfg.helper = NULL;
	r->rt_cfg.pac_copy = cfg->pac_copy ? strdup(cfg->pac_copy) : NULL;
	r->rt_cfg.credentials = cfg->credentials ? strdup(cfg->credentials) : NULL;
	r->rt_cfg.proxy_ca_file = cfg->proxy_ca_file ? strdup(cfg->proxy_ca_file) : NULL;
	r->rt_cfg.wpad_domain = cfg->wpad_domain ? strdup(cfg->wpad_domain) : NULL;
	if (r->rt_cfg.timeout_ms == 0)
		r->rt_cfg.timeout_ms = 5000;
	if (r->rt_cfg.upstream_timeout_ms == 0)
		r->rt_cfg.upstream_timeout_ms = 10000;

	if (cfg->kind == ROUTE_KIND_PROXY) {
		const char *why;
		if (cfg->proxy == NULL ||
		    proxyurl_parse(cfg->proxy, strlen(cfg->proxy), &r->rt_static_proxy, &why) != 0) {
			snprintf(err, errlen, "route = proxy: %s", cfg->proxy ? why : "no URL");
			goto fail;
		}
	}
	if (cfg->credentials != NULL && prev != NULL) {
		/* A reload runs after the privilege drop: the root-only file cannot be read
		 * again, so the credentials start-up read stay in use (docs/egressd.md). */
		if (prev->rt_creds == NULL || prev->rt_cfg.credentials == NULL ||
		    strcmp(prev->rt_cfg.credentials, cfg->credentials) != 0) {
			snprintf(err, errlen, "proxy_credentials %s: a different credentials file "
			    "than at start-up takes a restart (it is root-only and read once, before "
			    "the privilege drop)", cfg->credentials);
			goto fail;
		}
		r->rt_creds = proxycreds_ref(prev->rt_creds);
	} else if (cfg->credentials != NULL) {
		r->rt_creds = proxycreds_load(cfg->credentials, geteuid() == 0, err, errlen);
		if (r->rt_creds == NULL)
			goto fail;
	}
	if (cfg->kind != ROUTE_KIND_DIRECT) {
		r->rt_tls = upstream_tls_ctx_new(cfg->proxy_ca_file, err, errlen);
		if (r->rt_tls == NULL)
			goto fail;
		r->rt_tls_loaded = cfg->proxy_ca_file != NULL;
		r->rt_gss = gssauth_new(base);
		if (r->rt_gss == NULL) {
			snprintf(err, errlen, "cannot set up Negotiate support");
			goto fail;
		}
	}
	if (cfg->kind != ROUTE_KIND_SYSTEM && cfg->kind != ROUTE_KIND_PAC)
		return r;

	/* The helper's environment is built from nothing. */
	if (env_add(&envp, &nenv, "PATH", "/usr/bin:/bin") != 0 ||
	    env_add(&envp, &nenv, "HOME", "/nonexistent") != 0)
		goto nomem;
	if (cfg->kind == ROUTE_KIND_PAC) {
		if (strncmp(cfg->pac, "http://", 7) == 0 || strncmp(cfg->pac, "https://", 8) == 0)
			pac_url = cfg->pac;
		else
			pac_file = cfg->pac;
	} else {
		/* system: egressd's own proxy variables, each checked first (libproxy ignores
		 * what it cannot parse and goes direct); a pac+ value is fetched by egressd */
		if ((e = getenv("no_proxy")) != NULL && *e != '\0' &&
		    env_add(&envp, &nenv, "no_proxy", e) != 0)
			goto nomem;
		if ((e = getenv("NO_PROXY")) != NULL && *e != '\0' &&
		    env_add(&envp, &nenv, "NO_PROXY", e) != 0)
			goto nomem;
		if (proxy_env_problem(r->rt_pac_status, sizeof(r->rt_pac_status)) != 0) {
			r->rt_env_bad = true;
			log_warnx("%s", r->rt_pac_status);
			env_free(envp);
			return r;
		}
		for (size_t i = 0; i < EGRESS_NELEM(proxy_env_names); i++) {
			enum proxyenv_kind k;
			const char *why;
			char norm[EGRESS_HOST_INPUT_MAX + 16];

			if ((e = getenv(proxy_env_names[i])) == NULL || *e == '\0')
				continue;
			if (proxyenv_check(e, &k, norm, sizeof(norm), &why) != 0)
				continue;       /* not reached: proxy_env_problem said none */
			switch (k) {
			case PROXYENV_WPAD:
				/* libproxy would run its own WPAD (blocking, failing open to
				 * direct): egressd discovers and fetches the PAC itself. */
				r->rt_wpad = true;
				continue;
			case PROXYENV_PAC_FILE:
				/* any case: libproxy compares the scheme without it and would
				 * fetch the PAC itself (blocking, failing open to direct) */
				pac_file = e + 11;
				continue;       /* replaced by our own copy below */
			case PROXYENV_PAC_URL:
				pac_url = e + 4;
				continue;
			case PROXYENV_PROXY:
				/* the normalized form (http:// before a bare HOST:PORT) */
				if (env_add(&envp, &nenv, proxy_env_names[i], norm) != 0)
					goto nomem;
				break;
			}
		}
		if (pac_url != NULL && r->rt_cfg.pac == NULL)
			r->rt_cfg.pac = strdup(pac_url);
		if (r->rt_wpad && pac_url == NULL && pac_file == NULL) {
			wpad_plan(r);
		} else {
			r->rt_wpad = false;
		}
	}
	if (pac_url != NULL || pac_file != NULL || r->rt_wpad) {
		if (r->rt_cfg.pac_copy == NULL || r->rt_cfg.pac_copy[0] != '/') {
			snprintf(err, errlen, "pac_copy must be an absolute path");
			goto fail;
		}
		snprintf(pacenv, sizeof(pacenv), "pac+file://%s", r->rt_cfg.pac_copy);
		if (env_add(&envp, &nenv, "http_proxy", pacenv) != 0 ||
		    env_add(&envp, &nenv, "https_proxy", pacenv) != 0)
			goto nomem;
	}
	if (pac_file != NULL) {
		if (copy_local_pac(r, pac_file, err, errlen) != 0)
			goto fail;
		snprintf(r->rt_pac_status, sizeof(r->rt_pac_status), "PAC file %s: copied", pac_file);
	}
	{
		struct routehelper_config hc = {
			.envp = (const char *const *)envp,
			.deadline_ms = (uint32_t)r->rt_cfg.timeout_ms,
			.cache_ttl_s = (uint32_t)((r->rt_cfg.cache_ttl_ms + 999) / 1000),
			.cache_max = EGRESS_ROUTE_CACHE_MAX,
		};
		char *helper = find_helper(cfg->helper);
		if (helper == NULL)
			goto nomem;
		hc.helper_path = helper;
		r->rt_rh = routehelper_new(base, &hc, err, errlen);
		r->rt_cfg.helper = helper;
		if (r->rt_rh == NULL)
			goto fail;
	}
	r->rt_res = res;
	r->rt_envp = envp;                 /* kept: a switch to WPAD edits it (wpad_discover) */
	envp = NULL;
	if ((r->rt_discover_ev = evtimer_new(base, wpad_discover, r)) == NULL)
		goto nomem;
	if (r->rt_wpad && r->rt_wpad_n > 0) {
		r->rt_res = res;
		r->rt_wpad_ev = evtimer_new(base, wpad_next, r);
		if (r->rt_wpad_ev == NULL)
			goto nomem;
		r->rt_pf = wpad_fetcher(r, err, errlen);
		if (r->rt_pf == NULL)
			goto fail;
	}
	if (pac_url != NULL) {
		struct pacfetch_config pc = {
			.url = pac_url, .copy_path = r->rt_cfg.pac_copy, .ca_file = cfg->proxy_ca_file,
			.timeout_ms = (uint32_t)(cfg->pac_timeout_ms ? cfg->pac_timeout_ms : 10000),
			.max_bytes = EGRESS_PAC_MAX, .max_redirects = 3,
			.refresh_s = (uint32_t)(cfg->pac_refresh_ms / 1000), .retry_s = 30,
		};
		r->rt_pf = pacfetch_new(base, res, &pc, pac_updated, r, err, errlen);
		if (r->rt_pf == NULL)
			goto fail;
		snprintf(r->rt_pac_status, sizeof(r->rt_pac_status), "PAC %s: fetching", pac_url);
	}
	env_free(envp);
	return r;
nomem:
	snprintf(err, errlen, "router: out of memory");
fail:
	env_free(envp);
	router_free(r);
	return NULL;
}

void
router_free(struct router *r)
{
	if (r == NULL)
		return;
	while (r->rt_reqs != NULL)
		req_unlink_free(r->rt_reqs);
	if (r->rt_wpad_ev != NULL)
		event_free(r->rt_wpad_ev);
	if (r->rt_discover_ev != NULL)
		event_free(r->rt_discover_ev);
	env_free(r->rt_envp);
	routehelper_free(r->rt_rh);
	pacfetch_free(r->rt_pf);
	proxycreds_free(r->rt_creds);
	if (r->rt_tls != NULL)
		SSL_CTX_free(r->rt_tls);
	gssauth_free(r->rt_gss);
	route_config_clear(&r->rt_cfg);
	free(r);
}

size_t
router_pending(const struct router *r)
{
	size_t n = 0;

	for (const struct route_req *q = r->rt_reqs; q != NULL; q = q->rq_next)
		n++;
	return n;
}

const struct proxycreds *
router_credentials(const struct router *r)
{
	return r->rt_creds;
}

void *
router_tls_ctx(struct router *r)
{
	char err[128];

	if (r->rt_tls != NULL && !r->rt_tls_loaded) {
		if (upstream_tls_ctx_load_system(r->rt_tls, err, sizeof(err)) != 0) {
			if (!r->rt_tls_failed)
				log_warnx("https:// proxies: %s; their hops fail proxy_tls_failed",
				    err);
			r->rt_tls_failed = true;
			return NULL;
		}
		r->rt_tls_loaded = true;
	}
	return r->rt_tls;
}

struct gssauth *
router_gssauth(const struct router *r)
{
	return r->rt_gss;
}

uint64_t
router_upstream_timeout_ms(const struct router *r)
{
	return r->rt_cfg.upstream_timeout_ms;
}

enum route_kind
router_kind(const struct router *r)
{
	return r->rt_cfg.kind;
}

const char *
router_pac_status(const struct router *r)
{
	return r->rt_pac_status;
}
