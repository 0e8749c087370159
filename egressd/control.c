/*
 * control.c - the control socket: request decoding (pure), peer check, dispatch.
 */
#define _GNU_SOURCE
#include "egressd/control.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "common/log.h"
#include "common/util.h"
#include "egressd/config.h"
#include "egressd/daemon.h"
#include "egressd/dlog.h"
#include "egressd/dlog_syslog.h"
#include "egressd/grantstate.h"
#include "egressd/listener.h"
#include "egressd/dnsstub.h"
#include "egressd/mitmca.h"
#include "egressd/tpool.h"
#include "egressd/notify.h"
#include "common/proxyurl.h"
#include "egressd/route.h"

/* ---- decoding (pure) ---- */

static const struct {
	const char *name;
	enum control_op op;
	const char *keys[7];        /* allowed keys besides op and id */
} control_ops[] = {
	{ "grant.create", CTL_GRANT_CREATE, { "grant", "listen", "interface", "listen_fd",
	    "intercept_ca", "credential_placeholder", NULL } },
	{ "grant.revoke", CTL_GRANT_REVOKE, { "grant_id", NULL } },
	{ "grant.unrevoke", CTL_GRANT_UNREVOKE, { "grant_id", NULL } },
	{ "grant.list", CTL_GRANT_LIST, { NULL } },
	{ "status", CTL_STATUS, { NULL } },
	{ "reload", CTL_RELOAD, { NULL } },
	{ "route", CTL_ROUTE, { "url", NULL } },
	/* Transparent capture (docs/transparent.md): the run's stub resolver socket. */
	{ "grant.dns", CTL_GRANT_DNS, { "grant_id", "dns_fd", NULL } },
};

/* "https://host[:port][/...]", "http://...", "tcp://host:port": the destination whose
 * route is asked for. Canonicalized like a hop, so the answer is the hop's answer. */
static int
decode_route_url(const char *u, struct control_req *out, char *msg, size_t msglen)
{
	size_t pl, al;
	const char *auth;

	if (strncmp(u, "https://", 8) == 0) {
		out->scheme = SCHEME_HTTPS;
		pl = 8;
	} else if (strncmp(u, "http://", 7) == 0) {
		out->scheme = SCHEME_HTTP;
		pl = 7;
	} else if (strncmp(u, "tcp://", 6) == 0) {
		out->scheme = SCHEME_TCP;
		pl = 6;
	} else {
		snprintf(msg, msglen, "url: must start with https://, http:// or tcp://");
		return -1;
	}
	auth = u + pl;
	al = strcspn(auth, "/?#");
	if (host_parse(auth, al, out->scheme == SCHEME_TCP ? HOST_REQUIRE_PORT : 0,
	    &out->host) != HOST_OK) {
		snprintf(msg, msglen, "url: %s", host_err_str(host_parse(auth, al,
		    out->scheme == SCHEME_TCP ? HOST_REQUIRE_PORT : 0, &out->host)));
		return -1;
	}
	out->port = out->host.port ? out->host.port : out->scheme == SCHEME_HTTP ? 80 : 443;
	return 0;
}

void
control_req_clear(struct control_req *r)
{
	json_decref(r->id);
	grant_free(r->grant);
	free(r->ca_cert);
	if (r->ca_key != NULL) {
		secret_wipe(r->ca_key, strlen(r->ca_key));
		free(r->ca_key);
	}
	memset(r, 0, sizeof(*r));
}

static bool
is_hex_id(const char *s)
{
	return strlen(s) == GRANT_ID_HEX && hex_lower_is(s, GRANT_ID_HEX);
}

int
control_decode(const char *line, size_t len, struct control_req *out, const char **code,
    char *msg, size_t msglen)
{
	json_error_t je;
	json_t *root, *v;
	const char *key, *opname;
	size_t k;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	*code = "malformed";
	if (len > EGRESS_CONTROL_LINE_MAX) {
		snprintf(msg, msglen, "request longer than %d bytes", EGRESS_CONTROL_LINE_MAX);
		return -1;
	}
	/* Duplicate keys are ambiguous authority: refuse them. */
	root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL) {
		snprintf(msg, msglen, "not JSON: %s", je.text);
		return -1;
	}
	if (!json_is_object(root)) {
		snprintf(msg, msglen, "a request is a JSON object");
		goto out;
	}
	v = json_object_get(root, "id");
	if (v != NULL) {
		if (json_is_object(v) || json_is_array(v)) {
			snprintf(msg, msglen, "id must be a scalar");
			goto out;
		}
		out->id = json_incref(v);
	}
	v = json_object_get(root, "op");
	if (v == NULL || !json_is_string(v)) {
		snprintf(msg, msglen, "op must be a string");
		goto out;
	}
	opname = json_string_value(v);
	for (k = 0; k < EGRESS_NELEM(control_ops); k++)
		if (strcmp(control_ops[k].name, opname) == 0)
			break;
	if (k == EGRESS_NELEM(control_ops)) {
		*code = "unknown_op";
		snprintf(msg, msglen, "unknown op");
		goto out;
	}
	out->op = control_ops[k].op;
	json_object_foreach(root, key, v) {
		bool ok = strcmp(key, "op") == 0 || strcmp(key, "id") == 0;
		for (size_t j = 0; !ok && control_ops[k].keys[j] != NULL; j++)
			ok = strcmp(key, control_ops[k].keys[j]) == 0;
		if (!ok) {
			*code = "unknown_key";
			snprintf(msg, msglen, "unknown key '%.64s' for %s", key, opname);
			goto out;
		}
	}
	switch (out->op) {
	case CTL_GRANT_CREATE: {
		const char *perr, *ifn;
		char gerr[256];

		/* "listen_fd": true — egress-exec passes the listening socket it made in the
		 * run's own network namespace (SCM_RIGHTS); then there is no address to bind and
		 * the device is named for the records only. */
		v = json_object_get(root, "listen_fd");
		if (v != NULL && !json_is_true(v)) {
			snprintf(msg, msglen, "listen_fd: only true is meaningful");
			goto out;
		}
		out->listen_fd = v != NULL;
		v = json_object_get(root, "listen");
		if (out->listen_fd && v != NULL) {
			snprintf(msg, msglen, "listen and listen_fd exclude each other");
			goto out;
		}
		if (!out->listen_fd && (v == NULL || !json_is_string(v) ||
		    config_parse_sockaddr(json_string_value(v), true, &out->listen,
		    &out->listenlen, &perr) != 0)) {
			*code = "malformed";
			snprintf(msg, msglen, "listen: %s", v == NULL || !json_is_string(v) ?
			    "a string \"addr:port\" is required" : perr);
			goto out;
		}
		v = json_object_get(root, "interface");
		ifn = v != NULL && json_is_string(v) ? json_string_value(v) : NULL;
		/* The principal binding is address AND device: both are required. */
		if (ifn == NULL || ifn[0] == '\0' || strlen(ifn) > EGRESS_IFNAME_MAX - 1 ||
		    strchr(ifn, '/') != NULL || strcmp(ifn, ".") == 0 || strcmp(ifn, "..") == 0) {
			*code = "malformed";
			snprintf(msg, msglen, "interface: a network interface name (1-15 characters) "
			    "is required");
			goto out;
		}
		for (const char *p = ifn; *p != '\0'; p++) {
			if (*p <= ' ' || *p == ':' || (unsigned char)*p >= 0x7f) {
				*code = "malformed";
				snprintf(msg, msglen, "interface: invalid character");
				goto out;
			}
		}
		snprintf(out->ifname, sizeof(out->ifname), "%s", ifn);
		v = json_object_get(root, "grant");
		if (v == NULL || !json_is_object(v)) {
			*code = "invalid_grant";
			snprintf(msg, msglen, "grant: an object is required");
			goto out;
		}
		out->grant = grant_from_json(v, gerr, sizeof(gerr));
		if (out->grant == NULL) {
			*code = "invalid_grant";
			snprintf(msg, msglen, "grant: %s", gerr);
			goto out;
		}
		/* "intercept_ca": {"cert": PEM, "key": PEM} — the run CA egress-exec made for
		 * this grant's model connection (docs/model-connections.md). */
		v = json_object_get(root, "intercept_ca");
		if (v != NULL) {
			json_t *c = json_object_get(v, "cert"), *kv = json_object_get(v, "key");
			if (!json_is_object(v) || json_object_size(v) != 2 || !json_is_string(c) ||
			    !json_is_string(kv) || out->grant->connection[0] == '\0') {
				*code = "malformed";
				snprintf(msg, msglen, "intercept_ca: {\"cert\": PEM, \"key\": PEM}, "
				    "only with a grant that names a connection");
				goto out;
			}
			out->ca_cert = strdup(json_string_value(c));
			out->ca_key = strdup(json_string_value(kv));
			if (out->ca_cert == NULL || out->ca_key == NULL) {
				*code = "internal";
				snprintf(msg, msglen, "out of memory");
				goto out;
			}
		}
		/* "credential_placeholder": what the worker holds instead of the credential;
		 * egressd refuses it anywhere but in an intercepted credential header. */
		v = json_object_get(root, "credential_placeholder");
		if (v != NULL) {
			const char *ph = json_is_string(v) ? json_string_value(v) : NULL;
			size_t pl = ph != NULL ? strlen(ph) : 0;
			bool ok = ph != NULL && pl >= EGRESS_PLACEHOLDER_MIN &&
			    pl <= EGRESS_PLACEHOLDER_MAX && out->grant->connection[0] != '\0';
			for (size_t i = 0; ok && i < pl; i++)
				ok = (ph[i] >= 'a' && ph[i] <= 'z') || (ph[i] >= 'A' && ph[i] <= 'Z') ||
				    (ph[i] >= '0' && ph[i] <= '9') || ph[i] == '-' || ph[i] == '_';
			if (!ok) {
				*code = "malformed";
				snprintf(msg, msglen, "credential_placeholder: %d-%d of [A-Za-z0-9_-], "
				    "only with a grant that names a connection", EGRESS_PLACEHOLDER_MIN,
				    EGRESS_PLACEHOLDER_MAX);
				goto out;
			}
			memcpy(out->placeholder, ph, pl + 1);
		}
		if (out->grant->lifetime_s == 0) {
			/* A crashed supervisor must not leave authority behind. */
			*code = "invalid_grant";
			snprintf(msg, msglen, "grant: limits.lifetime_s must be > 0 for dynamic grants");
			goto out;
		}
		break;
	}
	case CTL_GRANT_DNS:
		v = json_object_get(root, "dns_fd");
		if (v == NULL || !json_is_true(v)) {
			snprintf(msg, msglen, "dns_fd: true is required (the socket comes with the "
			    "request)");
			goto out;
		}
		/* FALLTHROUGH */
	case CTL_GRANT_REVOKE:
	case CTL_GRANT_UNREVOKE:
		v = json_object_get(root, "grant_id");
		if (v == NULL || !json_is_string(v) || !is_hex_id(json_string_value(v))) {
			*code = "malformed";
			snprintf(msg, msglen, "grant_id: %d lowercase hex characters", GRANT_ID_HEX);
			goto out;
		}
		snprintf(out->grant_id, sizeof(out->grant_id), "%s", json_string_value(v));
		break;
	case CTL_ROUTE:
		v = json_object_get(root, "url");
		if (v == NULL || !json_is_string(v) || json_string_length(v) > EGRESS_HOST_INPUT_MAX) {
			*code = "malformed";
			snprintf(msg, msglen, "url: a string is required");
			goto out;
		}
		if (decode_route_url(json_string_value(v), out, msg, msglen) != 0) {
			*code = "malformed";
			goto out;
		}
		break;
	case CTL_GRANT_LIST:
	case CTL_STATUS:
	case CTL_RELOAD:
		break;
	}
	rc = 0;
out:
	if (rc != 0) {
		grant_free(out->grant);
		out->grant = NULL;
		free(out->ca_cert);
		out->ca_cert = NULL;
		if (out->ca_key != NULL) {
			secret_wipe(out->ca_key, strlen(out->ca_key));
			free(out->ca_key);
			out->ca_key = NULL;
		}
	}
	json_decref(root);
	return rc;
}

json_t *
control_error(const json_t *id, const char *code, const char *msg)
{
	json_t *o = json_object();

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "ok", json_false());
	if (id != NULL)
		json_object_set_new(o, "id", json_deep_copy(id));
	json_object_set_new(o, "error", json_string(code));
	json_object_set_new(o, "message", json_string(msg));
	return o;
}

/* ---- server ---- */

struct control_client {
	struct control *cc_c;
	struct bufferevent *cc_bev;
	bool cc_authorized;
	uid_t cc_uid;
	bool cc_closing;
	struct route_req *cc_rq;        /* a route query in flight (its reply comes later) */
	struct event *cc_rev;           /* reads: recvmsg, so passed fds are seen */
	struct evbuffer *cc_in;         /* bytes read, not yet a whole line */
	int cc_fd_in;                   /* an fd passed with the next request line, or -1 */
	json_t *cc_rq_id;
	struct control_client *cc_next, *cc_prev;
};

struct control {
	struct daemon *d;
	struct evconnlistener *evl;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct control_client *clients;
	size_t nclients;
};

static void
client_free(struct control_client *cl)
{
	struct control *c = cl->cc_c;

	if (cl->cc_prev != NULL)
		cl->cc_prev->cc_next = cl->cc_next;
	else
		c->clients = cl->cc_next;
	if (cl->cc_next != NULL)
		cl->cc_next->cc_prev = cl->cc_prev;
	c->nclients--;
	route_cancel(cl->cc_rq);           /* its callback must never see a freed client */
	json_decref(cl->cc_rq_id);
	if (cl->cc_rev != NULL)
		event_free(cl->cc_rev);
	if (cl->cc_in != NULL)
		evbuffer_free(cl->cc_in);
	if (cl->cc_fd_in >= 0)
		close(cl->cc_fd_in);
	bufferevent_free(cl->cc_bev);
	free(cl);
}

static void
send_reply(struct control_client *cl, json_t *o)
{
	char *s;

	if (o == NULL)
		return;
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s == NULL)
		return;
	bufferevent_write(cl->cc_bev, s, strlen(s));
	bufferevent_write(cl->cc_bev, "\n", 1);
	free(s);
}

static json_t *
ok_reply(const json_t *id)
{
	json_t *o = json_object();

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "ok", json_true());
	if (id != NULL)
		json_object_set_new(o, "id", json_deep_copy(id));
	return o;
}

static json_t *
grant_entry(const struct lgrant *lg)
{
	json_t *o = json_object();
	char b[EGRESS_HOSTPORT_MAX + 1];

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "grant_id", json_string(lg->id));
	json_object_set_new(o, "principal", json_string(lg->g->principal));
	json_object_set_new(o, "dynamic", json_boolean(lg->dynamic));
	json_object_set_new(o, "listen", lg->nlisteners > 0 ?
	    json_string(listener_addr_str(lg->listeners[0], b, sizeof(b))) : json_null());
	json_object_set_new(o, "interface", lg->ifname[0] != '\0' ? json_string(lg->ifname) :
	    json_null());
	json_object_set_new(o, "created", json_integer((json_int_t)lg->created));
	json_object_set_new(o, "expires", lg->expires != 0 ?
	    json_integer((json_int_t)lg->expires) : json_null());
	json_object_set_new(o, "connections", json_integer(lg->nconns));
	json_object_set_new(o, "bytes", json_integer((json_int_t)lg->bytes));
	/* transparent capture (grant.dns): the stub's address and how many names it mapped */
	if (lg->stub != NULL) {
		json_object_set_new(o, "dns", json_string(dnsstub_addr_str(lg->stub, b, sizeof(b))));
		json_object_set_new(o, "dns_names", json_integer((json_int_t)tpool_count(lg->tpool)));
	}
	json_object_set_new(o, "grant", grant_to_json(lg->g));
	return o;
}

static json_t *
handle(struct control *c, const struct control_req *r, struct grant **stolen, int *fdp)
{
	struct daemon *d = c->d;
	char err[512];
	const char *code = "internal";
	json_t *o;

	switch (r->op) {
	case CTL_GRANT_CREATE: {
		char b[EGRESS_HOSTPORT_MAX + 1];
		struct mitm_ca *ca = NULL;
		struct grant *g = *stolen;
		*stolen = NULL;
		struct lgrant *lg;

		if (r->listen_fd && *fdp < 0) {
			grant_free(g);
			return control_error(r->id, "malformed", "listen_fd: no file descriptor "
			    "came with the request");
		}
		/* Only a connection's name travels in the grant: resolve it against the
		 * credentials egressd holds now, refusing before anything is bound. */
		{
			enum conn_check k = config_check_connection(d->cfg, g, err, sizeof(err));
			if (k != CONN_CHECK_OK) {
				grant_free(g);
				return control_error(r->id, conn_check_code(k), err);
			}
		}
		/* A connection is applied only inside TLS egressd terminates: a CA must be at
		 * hand (the run's, or the operator's), else the grant is refused here rather
		 * than any tunnel falling back to opaque later. */
		if (g->connection[0] != '\0') {
			char e2[256];
			if (r->ca_cert != NULL) {
				ca = mitm_ca_from_pem(r->ca_cert, strlen(r->ca_cert), r->ca_key,
				    strlen(r->ca_key), e2, sizeof(e2));
				if (ca == NULL) {
					grant_free(g);
					snprintf(err, sizeof(err), "intercept_ca: %s", e2);
					return control_error(r->id, "ca_invalid", err);
				}
			} else if (d->cfg->mitm_ca == NULL) {
				grant_free(g);
				return control_error(r->id, "ca_unavailable", "the grant names a model "
				    "connection but no interception CA is available: send intercept_ca "
				    "with the grant, or configure intercept_ca_cert and intercept_ca_key");
			}
			if (d->cfg->origin_ctx == NULL) {
				mitm_ca_free(ca);
				grant_free(g);
				return control_error(r->id, "ca_unavailable", "egressd has no origin trust "
				    "store for intercepted connections (see the start-up log)");
			}
		}
		if (r->listen_fd) {
			lg = daemon_grant_adopt(d, g, *fdp, r->ifname, &code, err, sizeof(err));
			*fdp = -1;
		} else
			lg = daemon_grant_create(d, g, (const struct sockaddr *)&r->listen,
			    r->listenlen, r->ifname, &code, err, sizeof(err));
		if (lg == NULL) {
			mitm_ca_free(ca);
			return control_error(r->id, code, err);
		}
		lg->ca = ca;
		memcpy(lg->placeholder, r->placeholder, sizeof(lg->placeholder));
		log_info("grant.create: %s principal %s on %s dev %s, lifetime %us", lg->id,
		    lg->g->principal, listener_addr_str(lg->listeners[0], b, sizeof(b)),
		    r->ifname, lg->g->lifetime_s);
		o = ok_reply(r->id);
		json_object_set_new(o, "grant_id", json_string(lg->id));
		json_object_set_new(o, "listen", json_string(listener_addr_str(lg->listeners[0], b,
		    sizeof(b))));
		return o;
	}
	case CTL_GRANT_DNS: {
		struct lgrant *lg = grants_find(d->grants, r->grant_id);
		char b[EGRESS_HOSTPORT_MAX + 1];

		if (*fdp < 0)
			return control_error(r->id, "malformed", "dns_fd: no file descriptor came "
			    "with the request");
		if (lg == NULL)
			return control_error(r->id, "unknown_grant", "no live grant with that id");
		/* Only a run's own grant (egress-exec made its listener in the run's link
		 * namespace), and only once: the stub and the pool are the grant's for life. */
		if (!lg->dynamic || lg->stub != NULL)
			return control_error(r->id, "malformed", lg->stub != NULL ? "the grant has "
			    "a stub resolver already" : "grant.dns is for dynamic grants only");
		lg->tpool = lg->tpool != NULL ? lg->tpool : tpool_new(EGRESS_TPOOL_NAMES_MAX);
		if (lg->tpool == NULL)
			return control_error(r->id, "internal", "out of memory");
		lg->stub = dnsstub_new(d, lg, *fdp, err, sizeof(err));
		*fdp = -1;
		if (lg->stub == NULL)
			return control_error(r->id, "malformed", err);
		log_info("grant.dns: %s principal %s: stub resolver on %s, transparent capture on",
		    lg->id, lg->g->principal, dnsstub_addr_str(lg->stub, b, sizeof(b)));
		o = ok_reply(r->id);
		json_object_set_new(o, "dns", json_string(dnsstub_addr_str(lg->stub, b, sizeof(b))));
		json_object_set_new(o, "pool", json_string(TPOOL_CIDR));
		return o;
	}
	case CTL_GRANT_REVOKE: {
		struct lgrant *lg = grants_find(d->grants, r->grant_id);
		if (lg == NULL)
			return control_error(r->id, "unknown_grant", "no live grant with that id");
		bool dynamic = lg->dynamic;
		char principal[EGRESS_PRINCIPAL_MAX + 1];
		snprintf(principal, sizeof(principal), "%s", lg->g->principal);
		log_info("grant.revoke: %s (principal %s, %s), %u live connection(s)", lg->id,
		    principal, dynamic ? "dynamic" : "static", lg->nconns);
		grants_retire(d->grants, lg, REASON_GRANT_REVOKED, true);
		/* A static grant comes back from egressd.ini at every reload and start: the
		 * revocation is remembered until that grant changes in the file or
		 * grant.unrevoke clears it (grantstate.h). In memory it holds in any case. */
		if (!dynamic && grantstate_revoke(d->gstate, r->grant_id, principal, time(NULL),
		    err, sizeof(err)) != 0) {
			char msg[768];
			log_warnx("grant.revoke: %s is revoked, but the revocation was not saved: %s",
			    r->grant_id, err);
			snprintf(msg, sizeof(msg), "revoked now, but not saved: %s", err);
			return control_error(r->id, "not_persisted", msg);
		}
		return ok_reply(r->id);
	}
	case CTL_GRANT_UNREVOKE: {
		int rc = grantstate_unrevoke(d->gstate, r->grant_id, time(NULL), err, sizeof(err));
		if (rc == 0)
			return control_error(r->id, "unknown_grant", "no revoked static grant with "
			    "that id");
		log_info("grant.unrevoke: %s: revocation cleared; the grant returns at the next "
		    "reload if it is still in %s", r->grant_id, d->cfg->path);
		if (rc < 0) {
			char msg[768];
			snprintf(msg, sizeof(msg), "cleared now, but not saved (%s): after a restart "
			    "the grant would be revoked again", err);
			return control_error(r->id, "not_persisted", msg);
		}
		o = ok_reply(r->id);
		json_object_set_new(o, "message", json_string("revocation cleared: the grant "
		    "returns at the next reload (SIGHUP or egressctl reload) if it is unchanged "
		    "in the configuration"));
		return o;
	}
	case CTL_GRANT_LIST: {
		json_t *arr = json_array();
		json_t *rev = json_array();
		for (struct lgrant *lg = grants_first(d->grants); lg != NULL; lg = lg->next)
			json_array_append_new(arr, grant_entry(lg));
		/* Static grants held back by a remembered revocation (grantstate.h). */
		for (size_t i = 0; i < grantstate_count(d->gstate); i++) {
			const struct grantstate_entry *e = grantstate_at(d->gstate, i);
			if (e->revoked != 0)
				json_array_append_new(rev, json_pack("{s:s,s:s,s:I}", "grant_id", e->id,
				    "principal", e->principal, "revoked", (json_int_t)e->revoked));
		}
		o = ok_reply(r->id);
		json_object_set_new(o, "grants", arr);
		json_object_set_new(o, "revoked_static", rev);
		return o;
	}
	case CTL_STATUS: {
		struct dlog_status ds;
		struct dlog_syslog_stats ss;
		json_t *lo = json_object();
		dlog_get_status(d->dlog, &ds);
		json_object_set_new(lo, "path", dlog_text(ds.path));
		json_object_set_new(lo, "seq", json_integer((json_int_t)ds.seq));
		json_object_set_new(lo, "writable", json_boolean(ds.writable));
		if (!ds.writable)
			json_object_set_new(lo, "error", dlog_text(ds.error));
		if (dlog_syslog_status(d->dlog, &ss)) {
			/* the mirror (docs/audit.md): what it holds and what it lost */
			json_t *so = json_pack("{s:s,s:s,s:b,s:I,s:I,s:I,s:I}", "target", ss.target,
			    "transport", ss.transport, "connected", ss.connected, "sent",
			    (json_int_t)ss.sent, "dropped", (json_int_t)ss.dropped, "spool_records",
			    (json_int_t)ss.spool_records, "spool_bytes", (json_int_t)ss.spool_bytes);

			if (so != NULL && ss.error[0] != '\0')
				json_object_set_new(so, "error", dlog_text(ss.error));
			if (so != NULL)
				json_object_set_new(lo, "syslog", so);
		}
		o = ok_reply(r->id);
		json_object_set_new(o, "version", json_string(EGRESS_VERSION));
		json_object_set_new(o, "pid", json_integer(getpid()));
		json_object_set_new(o, "uptime_s", json_integer((json_int_t)(time(NULL) -
		    d->started)));
		json_object_set_new(o, "grants", json_integer((json_int_t)grants_count(d->grants)));
		json_object_set_new(o, "connections", json_integer(d->nconns));
		json_object_set_new(o, "log", lo);
		return o;
	}
	case CTL_RELOAD:
		notify_reloading();     /* systemd: reloading until the READY=1 below */
		if (daemon_reload(d, err, sizeof(err)) != 0) {
			log_warnx("reload failed, running configuration kept: %s", err);
			notify_ready("reload failed, running configuration kept (see the log)");
			return control_error(r->id, "reload_failed", err);
		}
		notify_ready("running (configuration reloaded)");
		return ok_reply(r->id);
	case CTL_ROUTE:
		return NULL;            /* asynchronous: see route_query */
	}
	return control_error(r->id, "internal", "unhandled op");
}

static void send_reply(struct control_client *cl, json_t *o);

/* The answer of a route query: the same lookup a hop makes (cached answers included). */
static void
route_answered(const struct route_result *res, void *arg)
{
	struct control_client *cl = arg;
	json_t *o = ok_reply(cl->cc_rq_id), *arr = json_array();
	char b[EGRESS_HOSTPORT_MAX + 32];

	cl->cc_rq = NULL;
	for (size_t i = 0; arr != NULL && i < res->n; i++)
		json_array_append_new(arr, json_string(proxyurl_to_str(&res->entries[i], b,
		    sizeof(b))));
	json_object_set_new(o, "source", json_string(res->source ? res->source : ""));
	json_object_set_new(o, "status", json_string(reason_str(res->status)));
	json_object_set_new(o, "message", json_string(res->status == REASON_ALLOWED ?
	    "entries are tried in order; the next only after a connect or TLS failure" :
	    reason_text(res->status)));
	json_object_set_new(o, "entries", arr);
	json_object_set_new(o, "pac", dlog_text(router_pac_status(cl->cc_c->d->router)));
	json_decref(cl->cc_rq_id);
	cl->cc_rq_id = NULL;
	send_reply(cl, o);
}

static void
route_query(struct control_client *cl, const struct control_req *r)
{
	if (cl->cc_rq != NULL) {
		send_reply(cl, control_error(r->id, "busy", "one route query at a time per client"));
		return;
	}
	cl->cc_rq_id = r->id ? json_deep_copy(r->id) : NULL;
	cl->cc_rq = route_lookup(cl->cc_c->d->router, r->scheme, &r->host, r->port, route_answered, cl);
	if (cl->cc_rq == NULL) {
		json_decref(cl->cc_rq_id);
		cl->cc_rq_id = NULL;
		send_reply(cl, control_error(r->id, "internal", "out of memory"));
	}
}

static void
client_read(struct bufferevent *bev, void *arg)
{
	struct control_client *cl = arg;
	struct evbuffer *in = cl->cc_in;

	while (!cl->cc_closing) {
		struct evbuffer_ptr eol = evbuffer_search_eol(in, NULL, NULL, EVBUFFER_EOL_LF);
		if (eol.pos < 0) {
			if (evbuffer_get_length(in) > EGRESS_CONTROL_LINE_MAX) {
				send_reply(cl, control_error(NULL, "malformed", "line too long"));
				cl->cc_closing = true;
				bufferevent_disable(bev, EV_READ);
			}
			return;
		}
		size_t n = (size_t)eol.pos;
		char *line = malloc(n + 1);
		if (line == NULL)
			return;
		evbuffer_remove(in, line, n);
		evbuffer_drain(in, 1);
		line[n] = '\0';
		if (!cl->cc_authorized) {
			/* Changes nothing; say why, then hang up. */
			send_reply(cl, control_error(NULL, "unauthorized",
			    "control requests are accepted from uid 0 only"));
			log_warnx("control: refused a request from uid %u", (unsigned)cl->cc_uid);
			free(line);
			cl->cc_closing = true;
			bufferevent_disable(bev, EV_READ);
			return;
		}
		struct control_req r;
		const char *code;
		char msg[512];
		if (n > EGRESS_CONTROL_LINE_MAX ||
		    control_decode(line, n, &r, &code, msg, sizeof(msg)) != 0) {
			if (n > EGRESS_CONTROL_LINE_MAX) {
				code = "malformed";
				snprintf(msg, sizeof(msg), "line too long");
				memset(&r, 0, sizeof(r));
			}
			send_reply(cl, control_error(r.id, code, msg));
		} else {
			struct grant *g = r.grant;
			r.grant = NULL;
			if (r.op == CTL_ROUTE)
				route_query(cl, &r);
			else
				send_reply(cl, handle(cl->cc_c, &r, &g, &cl->cc_fd_in));
			grant_free(g);
		}
		/* A passed fd belongs to the line it came with: one that line did not take is
		 * closed, never kept for a later request. */
		if (cl->cc_fd_in >= 0) {
			close(cl->cc_fd_in);
			cl->cc_fd_in = -1;
		}
		control_req_clear(&r);
		free(line);
	}
}

/*
 * Reads with recvmsg instead of the bufferevent, so that a listening socket egress-exec
 * passes with grant.create (SCM_RIGHTS) is seen; the bytes go to cl->in (a bufferevent's
 * own input buffer takes no bytes from outside) and client_read parses them as before. At most one fd per request is kept; fds
 * from a client that is not authorized, extra fds and truncated control data are closed
 * (MSG_CMSG_CLOEXEC: never inherited by the route helper).
 */
static void
client_recv(evutil_socket_t fd, short what, void *arg)
{
	struct control_client *cl = arg;
	char buf[4096];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 4)];
	} cbuf;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh;
	struct cmsghdr *cm;
	ssize_t n;

	if (what & EV_TIMEOUT) {
		client_free(cl);
		return;
	}
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	/* A client that is not uid 0 gets no control buffer: the kernel discards its fds
	 * without installing them here (closing a foreign fd can block, e.g. on FUSE). */
	if (cl->cc_authorized) {
		mh.msg_control = cbuf.b;
		mh.msg_controllen = sizeof(cbuf.b);
	}
	n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	/* An fd belongs to the line that starts with the bytes it came with. The kernel may
	 * merge earlier fd-less bytes into this read, so the fd is taken only when nothing of
	 * another line is in the buffer or in this chunk before its end; otherwise it is
	 * ambiguous and closed (the request that wanted it then fails: no fd came with it). */
	bool clean = n > 0 && evbuffer_get_length(cl->cc_in) == 0 &&
	    (memchr(buf, '\n', (size_t)n) == NULL ||
	    memchr(buf, '\n', (size_t)n) == buf + n - 1);
	for (cm = CMSG_FIRSTHDR(&mh); n >= 0 && cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t nfd;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
		    cm->cmsg_len < CMSG_LEN(0))
			continue;
		nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int pfd;

			memcpy(&pfd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (clean && cl->cc_fd_in < 0 && !(mh.msg_flags & MSG_CTRUNC))
				cl->cc_fd_in = pfd;
			else
				close(pfd);
		}
	}
	if (n > 0 && !clean && mh.msg_controllen > 0 && cl->cc_authorized &&
	    CMSG_FIRSTHDR(&mh) != NULL)
		log_warnx("control: a passed file descriptor did not start a request line; "
		    "closed");
	if (n <= 0) {
		/* EOF or an error: finish writing what is queued, then go. */
		event_del(cl->cc_rev);
		if (n == 0 && evbuffer_get_length(bufferevent_get_output(cl->cc_bev)) > 0)
			cl->cc_closing = true;
		else
			client_free(cl);
		return;
	}
	if (mh.msg_flags & MSG_CTRUNC)
		log_warnx("control: a client passed more file descriptors than a request takes");
	if (evbuffer_add(cl->cc_in, buf, (size_t)n) != 0) {
		client_free(cl);
		return;
	}
	client_read(cl->cc_bev, cl);
	if (cl->cc_closing)
		event_del(cl->cc_rev);
}

static void
client_write(struct bufferevent *bev, void *arg)
{
	struct control_client *cl = arg;

	if (cl->cc_closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		client_free(cl);
}

static void
client_event(struct bufferevent *bev, short what, void *arg)
{
	struct control_client *cl = arg;

	if (what & BEV_EVENT_EOF && evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
		cl->cc_closing = true;
		return;
	}
	client_free(cl);
}

static void
control_accept(struct evconnlistener *evl, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct control *c = arg;
	struct control_client *cl;
	struct ucred uc;
	socklen_t ul = sizeof(uc);
	struct timeval tv = { 60, 0 };

	if (c->nclients >= EGRESS_CONTROL_CLIENTS_MAX) {
		log_warnx("control: too many clients (%d); refusing one",
		    EGRESS_CONTROL_CLIENTS_MAX);
		close(fd);
		return;
	}
	cl = calloc(1, sizeof(*cl));
	if (cl == NULL) {
		close(fd);
		return;
	}
	evutil_make_socket_nonblocking(fd);
	evutil_make_socket_closeonexec(fd);
	cl->cc_c = c;
	/* Who is asking is decided by the kernel, never by the request. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0) {
		cl->cc_uid = uc.uid;
		cl->cc_authorized = uc.uid == 0;
	}
	cl->cc_fd_in = -1;
	cl->cc_bev = bufferevent_socket_new(c->d->base, fd, BEV_OPT_CLOSE_ON_FREE);
	cl->cc_rev = event_new(c->d->base, fd, EV_READ | EV_PERSIST, client_recv, cl);
	cl->cc_in = evbuffer_new();
	if (cl->cc_bev == NULL || cl->cc_rev == NULL || cl->cc_in == NULL) {
		if (cl->cc_in != NULL)
			evbuffer_free(cl->cc_in);
		if (cl->cc_rev != NULL)
			event_free(cl->cc_rev);
		if (cl->cc_bev != NULL)
			bufferevent_free(cl->cc_bev);
		else
			close(fd);
		free(cl);
		return;
	}
	cl->cc_next = c->clients;
	if (c->clients != NULL)
		c->clients->cc_prev = cl;
	c->clients = cl;
	c->nclients++;
	bufferevent_setcb(cl->cc_bev, client_read, client_write, client_event, cl);
	bufferevent_set_timeouts(cl->cc_bev, &tv, &tv);
	/* reads come through client_recv (recvmsg); the bufferevent only writes */
	bufferevent_disable(cl->cc_bev, EV_READ);
	bufferevent_enable(cl->cc_bev, EV_WRITE);
	event_add(cl->cc_rev, &tv);
}

struct control *
control_new(struct daemon *d, const char *path, char *err, size_t errlen)
{
	struct control *c;
	struct sockaddr_un sun;
	struct stat sb;
	mode_t old;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "path too long");
		return NULL;
	}
	memcpy(sun.sun_path, path, strlen(path));
	/* Replace a stale socket from a previous run, never any other kind of file. */
	if (lstat(path, &sb) == 0) {
		if (!S_ISSOCK(sb.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket", path);
			return NULL;
		}
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return NULL;
	}
	/* Created 0600 from the start: no window in which another user could connect. */
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		umask(old);
		snprintf(err, errlen, "bind: %s%s", strerror(errno), errno == ENOENT ?
		    " (create the directory first, e.g. RuntimeDirectory=egressd)" : "");
		close(fd);
		return NULL;
	}
	umask(old);
	if (chmod(path, 0600) != 0 || listen(fd, 16) != 0) {
		snprintf(err, errlen, "chmod/listen: %s", strerror(errno));
		close(fd);
		unlink(path);
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		unlink(path);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->d = d;
	snprintf(c->path, sizeof(c->path), "%s", path);
	c->evl = evconnlistener_new(d->base, control_accept, c, LEV_OPT_CLOSE_ON_FREE, -1, fd);
	if (c->evl == NULL) {
		close(fd);
		unlink(path);
		free(c);
		snprintf(err, errlen, "evconnlistener failed");
		return NULL;
	}
	return c;
}

void
control_free(struct control *c)
{
	if (c == NULL)
		return;
	while (c->clients != NULL)
		client_free(c->clients);
	evconnlistener_free(c->evl);
	unlink(c->path);
	free(c);
}
