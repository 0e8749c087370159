/*
 * daemon.c - egressd's life cycle: start-up, static listeners, reload, drain, shutdown.
 */
#include "egressd/daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/rand.h>

#include "common/log.h"
#include "common/util.h"
#include "egressd/control.h"
#include "egressd/auditev.h"
#include "egressd/dlog.h"
#include "egressd/dlog_syslog.h"
#include "common/dlogchain.h"
#include "egressd/grants.h"
#include "egressd/grantstate.h"
#include "egressd/listener.h"
#include "egressd/redirmemo.h"
#include "egressd/resolve.h"
#include "egressd/route.h"
#include "egressd/tlsbridge.h"
#include "egressd/session.h"
#include "egressd/tunnel.h"
#include "egressd/upool.h"


/* One daemon per process: listeners carry their grant as arg, the daemon is implicit. */
static struct daemon *daemon_self;

static void retire_poll(evutil_socket_t fd, short what, void *arg);

void
daemon_accept(int fd, const struct sockaddr *peer, socklen_t peerlen, void *arg)
{
	session_new(daemon_self, arg, fd, peer, peerlen);
}

static struct resolver *
make_resolver(struct daemon *d, const struct egressd_config *cfg, char *err, size_t errlen)
{
	struct resolver_config rc;

	memset(&rc, 0, sizeof(rc));
	rc.servers = (const char *const *)cfg->dns_servers;
	rc.nservers = cfg->ndns_servers;
	rc.timeout_ms = (unsigned)cfg->dns_timeout_ms;
	rc.attempts = cfg->dns_attempts;
	return resolver_new(d->base, &rc, err, errlen);
}

/*
 * Static grants and their listeners for cfg, built aside: st->lgs gets one lgrant per
 * [grant] in service (registered) on success. On a reload, a static grant that is
 * unchanged in the file (same content, so the same id: grants.h) stays the same lgrant
 * ("kept"): its connections, byte budget and counters go on as if there had been no
 * reload. Every listener of the old static grants is parked first; a configured address
 * takes its parked listener (bind would fail with EADDRINUSE while the old one listens),
 * other addresses get new ones. stage_commit closes the parked listeners nobody took;
 * staged_abort puts everything back as it was.
 */
struct staged {
	struct lgrant **lgs;
	bool *kept;                     /* lgs[i] is an old grant kept in service */
	size_t n;
	struct parked {
		struct listener *l;
		struct lgrant *owner;
		bool used;
	} *park;
	size_t npark;
	struct added {
		struct listener *l;
		struct lgrant *to;
		bool fresh;             /* made by staging (else taken from the park) */
	} *added;
	size_t nadded;
};

static void
staged_release(struct staged *st)
{
	free(st->lgs);
	free(st->kept);
	free(st->park);
	free(st->added);
	memset(st, 0, sizeof(*st));
}

static void
staged_abort(struct daemon *d, struct staged *st)
{
	/* Undo the attachments (closing new listeners), give parked listeners back to their
	 * old grants, then drop the new grants. */
	for (size_t i = st->nadded; i-- > 0; ) {
		lgrant_remove_listener(st->added[i].to, st->added[i].l);
		if (st->added[i].fresh)
			listener_free(st->added[i].l);
	}
	for (size_t i = 0; i < st->npark; i++)
		lgrant_add_listener(st->park[i].owner, st->park[i].l);
	for (size_t k = 0; k < st->n; k++)
		if (!st->kept[k])
			grants_retire(d->grants, st->lgs[k], REASON_NO_GRANT, true);
	staged_release(st);
}

/* Success: close the parked listeners no configured address took. */
static void
stage_commit(struct staged *st)
{
	for (size_t i = 0; i < st->npark; i++)
		if (!st->park[i].used)
			listener_free(st->park[i].l);
	staged_release(st);
}

/* Is lg one of the staged grants that stay in service? */
static bool
staged_keeps(const struct staged *st, const struct lgrant *lg)
{
	for (size_t k = 0; k < st->n; k++)
		if (st->kept[k] && st->lgs[k] == lg)
			return true;
	return false;
}

static int
stage_static(struct daemon *d, struct egressd_config *cfg, bool reuse, struct staged *st,
    char *err, size_t errlen)
{
	size_t nold = 0;

	memset(st, 0, sizeof(*st));
	if (reuse)
		for (struct lgrant *lg = grants_first(d->grants); lg != NULL; lg = lg->next)
			if (!lg->dynamic)
				nold += lg->nlisteners;
	st->lgs = calloc(cfg->ngrants + 1, sizeof(*st->lgs));
	st->kept = calloc(cfg->ngrants + 1, sizeof(*st->kept));
	st->park = calloc(nold + 1, sizeof(*st->park));
	st->added = calloc(cfg->nlisteners + 1, sizeof(*st->added));
	if (st->lgs == NULL || st->kept == NULL || st->park == NULL || st->added == NULL) {
		/* A reload that cannot allocate keeps the running configuration. */
		snprintf(err, errlen, "out of memory staging the configuration");
		staged_abort(d, st);
		return -1;
	}
	for (struct lgrant *lg = reuse ? grants_first(d->grants) : NULL; lg != NULL;
	    lg = lg->next) {
		if (lg->dynamic)
			continue;
		while (lg->nlisteners > 0) {
			struct listener *l = lg->listeners[lg->nlisteners - 1];
			lgrant_remove_listener(lg, l);
			st->park[st->npark].l = l;
			st->park[st->npark++].owner = lg;
		}
	}
	for (size_t i = 0; i < cfg->ngrants; i++) {
		/* The config keeps its own copy; the registry gets a private one (immutable,
		 * outlives the config across reloads). */
		char gerr[256];
		json_t *j = grant_to_json(cfg->grants[i].grant);
		struct grant *g = j != NULL ? grant_from_json(j, gerr, sizeof(gerr)) : NULL;
		json_decref(j);
		if (g == NULL) {
			snprintf(err, errlen, "[grant %s]: cannot copy grant", cfg->grants[i].name);
			staged_abort(d, st);
			return -1;
		}
		/* Revoked or expired stays so across reloads and restarts while the grant is
		 * unchanged in the file (grantstate.h): it is not put in service and its
		 * listeners are not bound. */
		char id[GRANT_ID_HEX + 1];
		time_t now = time(NULL), issued = now;
		const struct grantstate_entry *ge;
		struct lgrant *lg;

		if (grant_static_id(g, id) != 0) {
			snprintf(err, errlen, "[grant %s]: out of memory", cfg->grants[i].name);
			grant_free(g);
			staged_abort(d, st);
			return -1;
		}
		ge = d->gstate != NULL ? grantstate_get(d->gstate, id) : NULL;
		if (ge != NULL && ge->revoked != 0) {
			log_info("static grant %s (principal %s) stays revoked (since %lld): change "
			    "it in %s or clear the revocation (egressctl grant unrevoke %s) and reload",
			    id, g->principal, (long long)ge->revoked, cfg->path, id);
			grant_free(g);
			continue;
		}
		/* The first issue is recorded when the staged grants go into service
		 * (record_issues): a reload that fails must not start a lifetime. */
		if (ge != NULL && ge->issued != 0)
			issued = ge->issued;
		if (g->lifetime_s > 0 && issued + (time_t)g->lifetime_s <= now) {
			log_info("static grant %s (principal %s) expired at %lld (lifetime %us from "
			    "its first issue at %lld): change it in %s to issue a new one", id,
			    g->principal, (long long)(issued + (time_t)g->lifetime_s),
			    g->lifetime_s, (long long)issued, cfg->path);
			grant_free(g);
			continue;
		}
		lg = reuse ? grants_find(d->grants, id) : NULL;
		if (lg != NULL && !lg->dynamic && strcmp(lg->name, cfg->grants[i].name) == 0) {
			/* unchanged: the same authority, so the same lgrant stays in service */
			grant_free(g);
			st->kept[st->n] = true;
		} else {
			lg = grants_add_static(d->grants, g, cfg->grants[i].name, issued);
			if (lg == NULL) {
				if (errno == ENOSPC)
					snprintf(err, errlen, "too many grants (%d)", EGRESS_GRANTS_MAX);
				else
					snprintf(err, errlen, "[grant %s]: out of memory",
					    cfg->grants[i].name);
				staged_abort(d, st);
				return -1;
			}
		}
		st->lgs[st->n++] = lg;
	}
	for (size_t i = 0; i < cfg->nlisteners; i++) {
		const struct config_listener *cl = &cfg->listeners[i];
		struct lgrant *lg = NULL;
		struct listener *l = NULL;
		bool fresh = false;

		for (size_t k = 0; k < st->n; k++)
			if (strcmp(st->lgs[k]->name, cl->grant_name) == 0)
				lg = st->lgs[k];
		if (lg == NULL)
			continue;       /* its grant is revoked or expired: nothing listens */
		for (size_t k = 0; l == NULL && k < st->npark; k++) {
			if (!st->park[k].used && listener_same_addr(st->park[k].l,
			    (const struct sockaddr *)&cl->addr, cl->addrlen)) {
				st->park[k].used = true;
				l = st->park[k].l;
			}
		}
		if (l == NULL) {
			char lerr[256];
			l = listener_new(d->base, (const struct sockaddr *)&cl->addr, cl->addrlen,
			    NULL, daemon_accept, NULL, lerr, sizeof(lerr));
			if (l == NULL) {
				snprintf(err, errlen, "%s:%u: [listener %s]: %s", cfg->path, cl->line,
				    cl->name, lerr);
				staged_abort(d, st);
				return -1;
			}
			fresh = true;
		}
		if (lgrant_add_listener(lg, l) != 0) {
			snprintf(err, errlen, "%s:%u: [listener %s]: too many listeners for one grant",
			    cfg->path, cl->line, cl->name);
			if (fresh)
				listener_free(l);
			else
				for (size_t k = 0; k < st->npark; k++)
					if (st->park[k].l == l)
						st->park[k].used = false;
			staged_abort(d, st);
			return -1;
		}
		st->added[st->nadded].l = l;
		st->added[st->nadded].to = lg;
		st->added[st->nadded++].fresh = fresh;
	}
	/* record_issues runs after the commit, where nothing may fail: the room for every
	 * first issue is taken now, while a reload that cannot allocate still keeps the
	 * running configuration. */
	if (d->gstate != NULL && grantstate_reserve(d->gstate, st->n, err, errlen) != 0) {
		staged_abort(d, st);
		return -1;
	}
	return 0;
}

/* Staged static grants are in service: remember when each with a lifetime was first
 * issued (grantstate.h), so neither a reload nor a restart starts it again. */
static void
record_issues(struct daemon *d, const struct staged *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct lgrant *lg = st->lgs[i];
		bool saved;

		if (lg->g->lifetime_s == 0 || d->gstate == NULL)
			continue;
		(void)grantstate_issued(d->gstate, lg->id, lg->g->principal, lg->created, &saved);
		if (!saved)
			log_warnx("static grant %s (principal %s): its lifetime would start again "
			    "after a restart", lg->id, lg->g->principal);
	}
}

static void
log_override(const struct egressd_config *cfg)
{
	char b[64];

	for (size_t i = 0; i < cfg->allow_special.n; i++)
		log_info("allow_special_address override in force: %s (special-purpose addresses "
		    "in it are reachable for every grant)", cidr_to_str(&cfg->allow_special.v[i], b,
		    sizeof(b)));
}

int
daemon_start(struct daemon *d, struct event_base *base, struct egressd_config *cfg,
    char *err, size_t errlen)
{
	struct dlog_config dc;
	struct dlog_syslog_config sysc;
	struct dlog_key dkey = { 0 };
	struct staged st;
	char e2[512];

	memset(d, 0, sizeof(*d));
	daemon_self = d;
	d->base = base;
	d->cfg = cfg;
	d->started = time(NULL);
	if (RAND_bytes((unsigned char *)&d->boot_id, sizeof(d->boot_id)) != 1)
		d->boot_id = (uint32_t)getpid() ^ (uint32_t)d->started;
	d->grants = grants_new(base);
	d->retire_timer = evtimer_new(base, retire_poll, d);
	if (d->retire_timer == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	d->pipes = pipe_pool_new(EGRESS_SPLICE_PIPES_IDLE, EGRESS_SPLICE_BIG_PIPES);  /* splice may be turned on by reload */
	d->memo = redirmemo_new(0);
	d->upool = upool_new(base, 0);
	if (d->grants == NULL || d->pipes == NULL || d->memo == NULL || d->upool == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	d->resolver = make_resolver(d, cfg, e2, sizeof(e2));
	if (d->resolver == NULL) {
		snprintf(err, errlen, "resolver: %s", e2);
		return -1;
	}
	/* After the resolver: the router resolves PAC servers and upstream proxies with it. */
	d->router = router_new(base, d->resolver, &cfg->route, NULL, e2, sizeof(e2));
	if (d->router == NULL) {
		snprintf(err, errlen, "route: %s", e2);
		return -1;
	}
	memset(&dc, 0, sizeof(dc));
	dc.path = cfg->decision_log;
	dc.sync = cfg->log_sync;
	dc.max_bytes = cfg->log_max_bytes;
	dc.syslog_target = cfg->log_syslog;
	if (cfg->log_syslog != NULL) {
		sysc = (struct dlog_syslog_config){ .target = cfg->log_syslog,
			.ca = cfg->log_syslog_ca, .name = cfg->log_syslog_name,
			.cert = cfg->log_syslog_cert, .key = cfg->log_syslog_key,
			.spool_max = cfg->log_syslog_spool };
		dc.syslog = &sysc;
	}
	if (cfg->log_hmac_key != NULL) {
		/* root-only key file: only the key holder can extend the chain */
		if (dlog_key_load(cfg->log_hmac_key, true, &dkey, e2, sizeof(e2)) != 0) {
			snprintf(err, errlen, "log_hmac_key: %s", e2);
			return -1;
		}
		dc.key = &dkey;
	}
	d->gstate = grantstate_open(cfg->state_file, geteuid(), e2, sizeof(e2));
	if (d->gstate == NULL) {
		snprintf(err, errlen, "state_file: %s", e2);
		return -1;
	}
	d->dlog = dlog_open(base, &dc, e2, sizeof(e2));
	secret_wipe(&dkey, sizeof(dkey));   /* dlog keeps its own copy */
	if (d->dlog == NULL) {
		snprintf(err, errlen, "decision log %s: %s", cfg->decision_log, e2);
		return -1;
	}
	d->stats.dlog = d->dlog;
	if (!dlog_writable(d->dlog)) {
		/* Start-up promises exit 1 (docs/egressd.md): a proxy that can only refuse
		 * (audit_unavailable) is a broken start the operator must hear about now, not a
		 * degraded run. A log that fails later recovers on its own (dlog.h). */
		struct dlog_status ds;
		dlog_get_status(d->dlog, &ds);
		snprintf(err, errlen, "decision log %s cannot be opened for writing: %s",
		    cfg->decision_log, ds.error);
		return -1;
	}
	if (stage_static(d, cfg, false, &st, err, errlen) != 0)
		return -1;
	record_issues(d, &st);
	stage_commit(&st);
	/* The log's first records of this run: start, the static grants in force. */
	grants_set_retire_hook(d->grants, auditev_retired, d);
	auditev_start(d);
	if (cfg->control_socket != NULL) {
		d->control = control_new(d, cfg->control_socket, e2, sizeof(e2));
		if (d->control == NULL) {
			snprintf(err, errlen, "control socket %s: %s", cfg->control_socket, e2);
			return -1;
		}
	}
	if (cfg->has_metrics) {
		d->metrics_srv = metrics_server_new(base, (struct sockaddr *)&cfg->metrics_addr,
		    cfg->metrics_addrlen, &d->stats, &d->grants, e2, sizeof(e2));
		if (d->metrics_srv == NULL) {
			snprintf(err, errlen, "metrics_listen: %s", e2);
			return -1;
		}
	}
	log_override(cfg);
	log_info("egressd %s started: %zu static listener(s), route %s, splice %s, log_sync %s",
	    EGRESS_VERSION, cfg->nlisteners, route_kind_str(cfg->route.kind),
	    cfg->splice ? "on" : "off", dlog_sync_str(cfg->log_sync));
	return 0;
}

static int reload_apply(struct daemon *d, char *err, size_t errlen);

/* Every reload, in service or refused, is a config record (with the file's hash). */
static bool
str_same(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* The mirror's settings are start-up only (its TLS files are read as root). */
static bool
syslog_same(const struct egressd_config *a, const struct egressd_config *b)
{
	return str_same(a->log_syslog, b->log_syslog) &&
	    str_same(a->log_syslog_ca, b->log_syslog_ca) &&
	    str_same(a->log_syslog_name, b->log_syslog_name) &&
	    str_same(a->log_syslog_cert, b->log_syslog_cert) &&
	    str_same(a->log_syslog_key, b->log_syslog_key) &&
	    a->log_syslog_spool == b->log_syslog_spool;
}

static char *
dup_or_null(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

/* nc takes the running mirror's settings (what runs is what the configuration says). */
static void
syslog_keep(struct egressd_config *nc, const struct egressd_config *cur)
{
	char **dst[] = { &nc->log_syslog, &nc->log_syslog_ca, &nc->log_syslog_name,
		&nc->log_syslog_cert, &nc->log_syslog_key };
	const char *src[] = { cur->log_syslog, cur->log_syslog_ca, cur->log_syslog_name,
		cur->log_syslog_cert, cur->log_syslog_key };

	for (size_t i = 0; i < EGRESS_NELEM(dst); i++) {
		free(*dst[i]);
		*dst[i] = dup_or_null(src[i]);
	}
	nc->log_syslog_spool = cur->log_syslog_spool;
	nc->log_syslog_line = cur->log_syslog_line;
}

int
daemon_reload(struct daemon *d, char *err, size_t errlen)
{
	int rc = reload_apply(d, err, errlen);

	auditev_config(d, d->cfg->path, rc == 0, rc == 0 ? NULL : err);
	return rc;
}

static int
reload_apply(struct daemon *d, char *err, size_t errlen)
{
	char e2[512];
	struct egressd_config *nc;
	struct staged st;
	struct resolver *nr = NULL;
	struct router *nrt = NULL;
	struct lgrant *old[EGRESS_GRANTS_MAX];
	size_t nold = 0;

	if (d->draining) {
		snprintf(err, errlen, "egressd is shutting down");
		return -1;
	}
	nc = config_reload(d->cfg->path, d->cfg, err, errlen);
	if (nc == NULL)
		return -1;
	/* Remember the current static grants before staging adds the new ones. */
	for (struct lgrant *lg = grants_first(d->grants); lg != NULL; lg = lg->next)
		if (!lg->dynamic && nold < EGRESS_GRANTS_MAX)
			old[nold++] = lg;
	nr = make_resolver(d, nc, e2, sizeof(e2));
	if (nr == NULL) {
		snprintf(err, errlen, "resolver: %s", e2);
		config_free(nc);
		return -1;
	}
	/* A broken route (bad proxy URL, unreadable PAC file, credentials file that is not
	 * root-only) fails the whole reload. */
	nrt = router_new(d->base, nr, &nc->route, d->router, e2, sizeof(e2));
	if (nrt == NULL) {
		snprintf(err, errlen, "route: %s", e2);
		resolver_free(nr);
		config_free(nc);
		return -1;
	}
	if (router_pending(d->router) > 0 && d->nretiring == DAEMON_RETIRING_MAX) {
		snprintf(err, errlen, "too many reloads while route lookups are in flight; retry");
		router_free(nrt);
		resolver_free(nr);
		config_free(nc);
		return -1;
	}
	if (stage_static(d, nc, true, &st, err, errlen) != 0) {
		router_free(nrt);
		resolver_free(nr);
		config_free(nc);
		return -1;
	}
	/* Commit: nothing below can fail. Old static grants that changed or went away stop
	 * accepting (their listeners now serve the new grants, or are closed); their
	 * connections finish with the old, immutable authority. Unchanged ones stay. */
	auditev_reload_grants(d, old, nold, st.lgs, st.n);
	for (size_t i = 0; i < nold; i++)
		if (!staged_keeps(&st, old[i]))
			grants_retire(d->grants, old[i], REASON_NO_GRANT, false);
	record_issues(d, &st);
	stage_commit(&st);
	/* New DNS and route settings serve every lookup that starts from now on (sessions
	 * take d->resolver and d->router at lookup time). Lookups in flight finish on the old
	 * ones: a retired resolver drains itself; a router with route lookups in flight is
	 * kept (with its resolver, which it may still use) until they are done. */
	if (router_pending(d->router) == 0) {
		router_free(d->router);
		resolver_retire(d->resolver);
	} else {
		struct timeval tv = { 0, 50 * 1000 };
		d->retiring[d->nretiring].rt = d->router;
		d->retiring[d->nretiring].rs = d->resolver;
		d->nretiring++;
		evtimer_add(d->retire_timer, &tv);
	}
	d->resolver = nr;
	d->router = nrt;
	if (strcmp(nc->decision_log, d->cfg->decision_log) != 0 ||
	    strcmp(nc->state_file, d->cfg->state_file) != 0 ||
	    (nc->control_socket == NULL) != (d->cfg->control_socket == NULL) ||
	    (nc->control_socket != NULL &&
	     strcmp(nc->control_socket, d->cfg->control_socket) != 0) ||
	    nc->has_metrics != d->cfg->has_metrics || nc->log_sync != d->cfg->log_sync ||
	    (nc->user == NULL) != (d->cfg->user == NULL) ||
	    (nc->user != NULL && strcmp(nc->user, d->cfg->user) != 0))
		log_warnx("reload: decision_log, state_file, log_sync, control_socket, "
		    "metrics_listen and user changes take effect only after a restart");
	if (!syslog_same(nc, d->cfg))
		log_warnx("reload: log_syslog and log_syslog_* changes take effect only after a "
		    "restart (the mirror keeps %s)", d->cfg->log_syslog != NULL ?
		    d->cfg->log_syslog : "off");
	syslog_keep(nc, d->cfg);
	/* Keep the settings that cannot change without a restart consistent with what runs. */
	free(nc->decision_log);
	nc->decision_log = strdup(d->cfg->decision_log);
	free(nc->state_file);
	nc->state_file = strdup(d->cfg->state_file);
	free(nc->control_socket);
	nc->control_socket = d->cfg->control_socket != NULL ?
	    strdup(d->cfg->control_socket) : NULL;
	nc->log_sync = d->cfg->log_sync;
	free(nc->user);
	nc->user = d->cfg->user != NULL ? strdup(d->cfg->user) : NULL;
	nc->user_line = d->cfg->user_line;
	nc->has_metrics = d->cfg->has_metrics;
	nc->metrics_addr = d->cfg->metrics_addr;
	nc->metrics_addrlen = d->cfg->metrics_addrlen;
	config_free(d->cfg);
	d->cfg = nc;
	log_override(nc);
	log_info("reload: %s in service (%zu static grant(s), %zu listener(s))", nc->path,
	    nc->ngrants, nc->nlisteners);
	return 0;
}

static void
retire_poll(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	struct timeval tv = { 0, 50 * 1000 };
	size_t k = 0;

	for (size_t i = 0; i < d->nretiring; i++) {
		if (router_pending(d->retiring[i].rt) == 0) {
			router_free(d->retiring[i].rt);
			resolver_retire(d->retiring[i].rs);
		} else {
			d->retiring[k++] = d->retiring[i];
		}
	}
	d->nretiring = k;
	if (k > 0)
		evtimer_add(d->retire_timer, &tv);
}

static void
drain_check(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	struct timeval tv = { 0, 100 * 1000 };

	if (d->nconns == 0) {
		log_info("drain complete");
		event_base_loopexit(d->base, NULL);
		return;
	}
	evtimer_add(d->drain_poll, &tv);
}

static void
drain_end(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	log_info("drain timeout: closing %u connection(s)", d->nconns);
	grants_kill_all(d->grants, REASON_CLOSE_SHUTDOWN);
}

void
daemon_drain(struct daemon *d)
{
	struct timeval tv;
	struct timeval now = { 0, 0 };

	if (d->draining)
		return;
	d->draining = true;
	log_info("draining: no new connections; %u open, at most %llu ms", d->nconns,
	    (unsigned long long)d->cfg->drain_timeout_ms);
	grants_close_listeners(d->grants);
	control_free(d->control);
	d->control = NULL;
	tv.tv_sec = (time_t)(d->cfg->drain_timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)((d->cfg->drain_timeout_ms % 1000) * 1000);
	d->drain_timer = evtimer_new(d->base, drain_end, d);
	d->drain_poll = evtimer_new(d->base, drain_check, d);
	if (d->drain_timer == NULL || d->drain_poll == NULL) {
		grants_kill_all(d->grants, REASON_CLOSE_SHUTDOWN);
		event_base_loopexit(d->base, NULL);
		return;
	}
	evtimer_add(d->drain_timer, &tv);
	evtimer_add(d->drain_poll, &now);
}

void
daemon_stop(struct daemon *d)
{
	size_t lost;

	control_free(d->control);
	d->control = NULL;
	session_free_refusing(d);        /* they hold grant references */
	metrics_server_free(d->metrics_srv);
	d->metrics_srv = NULL;
	upool_free(d->upool);            /* parked sockets hold grant references */
	d->upool = NULL;
	if (d->grants != NULL)
		grants_set_retire_hook(d->grants, NULL, NULL);   /* shutdown is the stop record */
	if (d->grants != NULL)
		grants_kill_all(d->grants, REASON_CLOSE_SHUTDOWN);
	grants_free(d->grants);
	d->grants = NULL;
	if (d->drain_timer != NULL)
		event_free(d->drain_timer);
	if (d->drain_poll != NULL)
		event_free(d->drain_poll);
	if (d->retire_timer != NULL)
		event_free(d->retire_timer);
	for (size_t i = 0; i < d->nretiring; i++) {
		router_free(d->retiring[i].rt);
		resolver_free(d->retiring[i].rs);
	}
	router_free(d->router);          /* before the resolver it uses */
	resolver_free(d->resolver);
	tlsbridge_shutdown_all();
	if (d->dlog != NULL)            /* after the close records of the last connections */
		auditev_stop(d, d->draining ? "drain" : "exit");
	lost = dlog_close(d->dlog);
	if (lost > 0)
		log_warnx("%zu close record(s) held through the decision log's failure could not be "
		    "written before the stop (each is named above): their hops' allow records "
		    "have no close", lost);
	grantstate_free(d->gstate);
	pipe_pool_free(d->pipes);
	redirmemo_free(d->memo);
	config_free(d->cfg);
	memset(d, 0, sizeof(*d));
}

/* Register a dynamic grant served by l (owned from here on). */
static struct lgrant *
daemon_grant_add(struct daemon *d, struct grant *g, struct listener *l, const char *ifname,
    const char **code, char *err, size_t errlen)
{
	struct lgrant *lg = grants_add(d->grants, g, true, NULL, ifname);

	if (lg == NULL) {
		int e = errno;
		bool full = e == ENOSPC;

		listener_free(l);
		*code = full ? "limit" : "internal";
		if (full)
			snprintf(err, errlen, "too many grants (%d)", EGRESS_GRANTS_MAX);
		else if (e == EIO)
			snprintf(err, errlen, "the random generator failed: this grant was not "
			    "created (no unguessable id)");
		else
			snprintf(err, errlen, "out of memory: this grant was not created");
		return NULL;
	}
	lgrant_add_listener(lg, l);
	auditev_grant_created(d, lg);
	return lg;
}

struct lgrant *
daemon_grant_create(struct daemon *d, struct grant *g, const struct sockaddr *sa,
    socklen_t salen, const char *ifname, const char **code, char *err, size_t errlen)
{
	struct listener *l;
	char lerr[256];

	if (d->draining) {
		grant_free(g);
		*code = "internal";
		snprintf(err, errlen, "egressd is shutting down");
		return NULL;
	}
	l = listener_new(d->base, sa, salen, ifname, daemon_accept, NULL, lerr, sizeof(lerr));
	if (l == NULL) {
		grant_free(g);
		*code = "bind_failed";
		snprintf(err, errlen, "%s", lerr);
		return NULL;
	}
	return daemon_grant_add(d, g, l, ifname, code, err, errlen);
}

struct lgrant *
daemon_grant_adopt(struct daemon *d, struct grant *g, int fd, const char *ifname,
    const char **code, char *err, size_t errlen)
{
	struct listener *l;
	char lerr[256];

	if (d->draining) {
		grant_free(g);
		close(fd);
		*code = "internal";
		snprintf(err, errlen, "egressd is shutting down");
		return NULL;
	}
	l = listener_adopt(d->base, fd, ifname, daemon_accept, NULL, lerr, sizeof(lerr));
	if (l == NULL) {
		grant_free(g);
		*code = "bad_listener";
		snprintf(err, errlen, "%s", lerr);
		return NULL;
	}
	return daemon_grant_add(d, g, l, ifname, code, err, errlen);
}
