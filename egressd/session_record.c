/*
 * session_record.c - the decision-log records of one hop, one builder per kind: the
 * decision on a requested hop, the decision on a redirect hop, the close of a tunnel
 * (docs/decision-log.md has the schema). The fields they share are written once
 * (record_begin, hop_fields, pinned_json). Contract: session_int.h.
 */
#include "egressd/session_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/host.h"
#include "common/log.h"
#include "common/util.h"
#include "egressd/dlog.h"
#include "egressd/daemon.h"
#include "egressd/httpresp.h"
#include "egressd/jsonw.h"
#include "egressd/metrics.h"
#include "egressd/redirect.h"

/* Printable copy of origin bytes for a record (\xNN for anything else), cut to fit out;
 * returns how many input bytes it holds. */
static size_t
escape_into(char *out, size_t outlen, const char *p, size_t n)
{
	size_t o = 0, i;

	for (i = 0; i < n && o + 5 < outlen; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c >= 0x20 && c < 0x7f && c != '\\') {
			out[o++] = (char)c;
		} else {
			snprintf(out + o, 5, "\\x%02x", c);
			o += 4;
		}
	}
	out[o] = '\0';
	return i;
}

/* "key":[addresses] */
static void
addrs_w(struct jsonw *w, const char *key, const struct addr *a, size_t n)
{
	char buf[EGRESS_ADDRSTR_MAX];

	jsonw_array_begin(w, key);
	for (size_t i = 0; i < n; i++)
		jsonw_array_str(w, addr_to_str(&a[i], buf, sizeof(buf)));
	jsonw_array_end(w);
}

static const char *
hop_dest(const struct session *s, char *buf, size_t len)
{
	struct host h = s->se_su->su_req.host;

	h.port = s->se_su->su_req.port;
	if (host_to_str(&h, buf, len) == NULL)     /* cannot happen: len holds any host:port */
		buf[0] = '\0';
	return buf;
}

char *
record_dest(const struct session *s)
{
	char db[EGRESS_HOSTPORT_MAX + 32];

	return strdup(hop_dest(s, db, sizeof(db)));
}

/*
 * attested (s->se_attested, set by session.c when the hop connects or reaches the proxy's
 * gate): egressd itself resolved (or took the literal) and chose the address that was
 * connected to — directly, or as the literal sent to the proxy under pinning (decided at
 * the proxy gate, before the allow record and before the literal is sent). When an
 * upstream proxy resolved the name, egressd cannot know the address (DESIGN rule 3).
 * Only such an address is "pinned", in the decision and in the close record alike.
 */
static void
pinned_w(struct jsonw *w, const struct session *s)
{
	char ab[EGRESS_ADDRSTR_MAX];

	jsonw_str(w, "pinned", s->se_attested ? addr_to_str(&s->se_pinned, ab, sizeof(ab)) :
	    NULL);
}

/* The upstream proxy's address, status and authentication scheme (docs/decision-log.md). */
static void
proxy_w(struct jsonw *w, const struct session *s)
{
	char pb[EGRESS_ADDRSTR_MAX];

	jsonw_str(w, "proxy_addr", s->se_proxy_have_addr ?
	    addr_to_str(&s->se_proxy_addr, pb, sizeof(pb)) : NULL);
	if (s->se_proxy_status)
		jsonw_int(w, "proxy_status", s->se_proxy_status);
	else
		jsonw_null(w, "proxy_status");
	jsonw_str(w, "proxy_auth", s->se_proxy_auth);
}

/* The fields every record of a hop starts with: the connection and whose authority it
 * ran under; with_client adds the client's address (decisions). */
static void
record_begin(struct jsonw *w, const struct session *s, bool with_client)
{
	jsonw_str(w, "conn", s->se_conn);
	jsonw_str(w, "principal", s->se_lg->g->principal);
	jsonw_str(w, "grant_id", s->se_lg->id);
	if (with_client)
		jsonw_str(w, "client", s->se_client);
}

/* A decision's place in its hop chain (docs/redirects.md, "Hop chains"). */
static void
hop_fields(struct jsonw *w, const char *hop, const char *parent, const char *kind)
{
	jsonw_str(w, "hop", hop);
	jsonw_str(w, "parent_hop", parent);
	jsonw_str(w, "hop_kind", kind);
}

/* A transparently captured hop says so, and which address the worker dialled. */
static void
capture_w(struct jsonw *w, const struct session *s)
{
	if (s->se_cap == NULL)
		return;
	jsonw_str(w, "capture", "transparent");
	jsonw_str(w, "original_dst", s->se_cap->cap_orig_dst);
}

static void
hop_decision_w(struct jsonw *w, struct session *s, bool allow, enum reason r)
{
	const struct session_setup *su = s->se_su;
	const struct http_request *req = &su->su_req;
	/* past SE_HEAD the request was parsed (a refusal in SE_HEAD has none) */
	bool parsed = s->se_state != SE_HEAD;
	char buf[EGRESS_HOSTPORT_MAX + 32];

	record_begin(w, s, true);
	hop_fields(w, session_hop_id(s), su->su_parent_hop[0] != '\0' ? su->su_parent_hop : NULL,
	    parsed && req->method == HTTP_CONNECT ? "connect" : "request");
	jsonw_bool(w, "credentials_stripped", su->su_creds_stripped);
	jsonw_bool(w, "upstream_reused", su->su_up_reused);
	if (parsed) {
		size_t n = req->target_len < EGRESS_LOG_TARGET_MAX ? req->target_len :
		    EGRESS_LOG_TARGET_MAX;

		/* The parser admitted only printable ASCII in the target. */
		jsonw_str(w, "method", http_method_str(req->method));
		jsonw_strn(w, "target", req->target, strnlen(req->target, n));
		jsonw_bool(w, "target_truncated", req->target_len > EGRESS_LOG_TARGET_MAX);
		jsonw_str(w, "dest", hop_dest(s, buf, sizeof(buf)));
	} else {
		jsonw_null(w, "method");
		jsonw_str(w, "target", su->su_reqline[0] != '\0' ? su->su_reqline : NULL);
		if (s->se_cap != NULL) {
			/* a captured connection's destination is known without a head: the name
			 * its address stands for, and the port the worker dialled */
			struct host h;

			memset(&h, 0, sizeof(h));
			h.kind = HOST_NAME;
			snprintf(h.name, sizeof(h.name), "%s", s->se_cap->cap_name);
			h.port = s->se_cap->cap_port;
			jsonw_str(w, "dest", host_to_str(&h, buf, sizeof(buf)));
		} else {
			jsonw_null(w, "dest");
		}
	}
	jsonw_str(w, "verdict", allow ? "allow" : "deny");
	jsonw_str(w, "reason", reason_str(r));
	if (su->su_route.n > 0 && su->su_route_i < su->su_route.n) {
		char rb[EGRESS_HOSTPORT_MAX + 32];

		jsonw_str(w, "route", proxyurl_to_str(&su->su_route.entries[su->su_route_i], rb,
		    sizeof(rb)));
		jsonw_str(w, "route_source", su->su_route.source);
	} else {
		jsonw_null(w, "route");
		jsonw_null(w, "route_source");
	}
	if (s->se_proxy_known && s->se_proxy_have_addr)
		proxy_w(w, s);
	addrs_w(w, "resolved", su->su_resolved, su->su_nresolved);
	pinned_w(w, s);
	if (su->su_checked) {
		addrcheck_classes_w(w, "classes_dropped", su->su_ac.dropped_classes);
	} else {
		jsonw_array_begin(w, "classes_dropped");
		jsonw_array_end(w);
	}
	jsonw_bool(w, "override", su->su_checked && su->su_ac.lifted_override != 0);
	jsonw_bool(w, "attested", s->se_attested);
	/* local: egressd resolved the name (or took the literal) and checked the classes
	 * itself (also through a proxy that resolves again: check-without-pinning); none: it
	 * did not (refused before, or no local answer and the proxy resolved it unchecked) */
	jsonw_str(w, "checked", su->su_checked ? "local" : "none");
	jsonw_int(w, "resolve_us", (long long)su->su_resolve_us);
	jsonw_int(w, "connect_us", (long long)su->su_connect_us);
	capture_w(w, s);
}

static void
redirect_w(struct jsonw *w, struct session *s, const struct httpresp *r,
    const struct redirect_target *t, bool resolved, const char *rhop, const char *loc,
    size_t loclen, bool cross, enum reason rr, const char *detail)
{
	char db[EGRESS_HOSTPORT_MAX + 1], lb[EGRESS_LOG_TARGET_MAX + 1];
	size_t kept = escape_into(lb, sizeof(lb), loc, loclen);

	record_begin(w, s, true);
	hop_fields(w, rhop, session_hop_id(s), "redirect");
	jsonw_str(w, "method", http_method_str(s->se_method));
	jsonw_str(w, "target", lb);
	jsonw_bool(w, "target_truncated", kept < loclen);
	if (resolved) {
		struct host hh = t->host;

		hh.port = t->port;
		jsonw_str(w, "dest", host_to_str(&hh, db, sizeof(db)));
		jsonw_str(w, "location", t->url);
	} else {
		jsonw_null(w, "dest");
		jsonw_null(w, "location");
	}
	jsonw_int(w, "status", r->status);
	jsonw_bool(w, "cross_origin", cross);
	jsonw_int(w, "chain_depth", (long long)s->se_su->su_chain_depth + 1);
	jsonw_str(w, "verdict", rr == REASON_ALLOWED ? "allow" : "deny");
	jsonw_str(w, "reason", reason_str(rr));
	jsonw_str(w, "detail", detail);
}

static void
close_w(struct jsonw *w, struct session *s, enum reason why, uint64_t up, uint64_t down)
{
	record_begin(w, s, false);
	jsonw_str(w, "hop", session_hop_id(s));
	jsonw_str(w, "dest", s->se_dest);
	pinned_w(w, s);
	jsonw_str(w, "reason", reason_str(why));
	/* the proxy's answer came after the allow record (docs/decision-log.md); known only
	 * for a proxy route entry */
	if (s->se_proxy_known)
		proxy_w(w, s);
	jsonw_int(w, "bytes_up", (long long)up);
	jsonw_int(w, "bytes_down", (long long)down);
	jsonw_int(w, "duration_us", (long long)(mono_usec() - s->se_tunnel_start_us));
	/* A forwarded HTTP exchange: the origin's final status (null when none arrived). */
	if (s->se_method != HTTP_CONNECT) {
		if (s->se_resp_status > 0)
			jsonw_int(w, "status", s->se_resp_status);
		else
			jsonw_null(w, "status");
	}
	if (s->se_sni_checked) {
		/* an opaque tunnel whose ClientHello was checked (sniguard.h) */
		jsonw_bool(w, "tls", s->se_tls_seen);
		jsonw_str(w, "sni", s->se_sni_name);
	}
	capture_w(w, s);
	/* Every close record is counted where it is built (the metrics follow the records:
	 * a hop refused after its allow record ends with a close, never a second decision). */
	metrics_close(&s->se_d->stats, why);
}

/*
 * The members a builder wrote, as the JSON object the callers that add fields or keep a
 * base (the SNI refusal, model connections) take: parsed back from the very bytes the hot
 * path appends, so there is one builder per record kind. buf holds the members from
 * buf + 1 (jsonw_init(w, buf + 1, sizeof(buf) - 2)). NULL on overflow or ENOMEM.
 */
static json_t *
members_json(struct jsonw *w, char *buf)
{
	bool ok;
	size_t n = jsonw_len(w, &ok);

	if (!ok)
		return NULL;
	buf[0] = '{';
	buf[n + 1] = '}';
	return json_loadb(buf, n + 2, 0, NULL);
}

json_t *
record_hop_decision(struct session *s, bool allow, enum reason r)
{
	char buf[EGRESS_LOG_RECORD_MAX];
	struct jsonw w;

	jsonw_init(&w, buf + 1, sizeof(buf) - 2);
	hop_decision_w(&w, s, allow, r);
	return members_json(&w, buf);
}

json_t *
record_redirect(struct session *s, const struct httpresp *r,
    const struct redirect_target *t, bool resolved, const char *rhop, const char *loc,
    size_t loclen, bool cross, enum reason rr, const char *detail)
{
	char buf[EGRESS_LOG_RECORD_MAX];
	struct jsonw w;

	jsonw_init(&w, buf + 1, sizeof(buf) - 2);
	redirect_w(&w, s, r, t, resolved, rhop, loc, loclen, cross, rr, detail);
	return members_json(&w, buf);
}

json_t *
record_close(struct session *s, enum reason why, uint64_t up, uint64_t down)
{
	char buf[EGRESS_LOG_RECORD_MAX];
	struct jsonw w;

	jsonw_init(&w, buf + 1, sizeof(buf) - 2);
	close_w(&w, s, why, up, down);
	return members_json(&w, buf);
}

/* A record queued but then not written (the log failed while it waited): said once per
 * record in the operator log, like one refused at once (the chaos test counts them). */
static void
record_done(int err, void *arg)
{
	if (err != 0)
		log_warnx("decision log refused a %s record (%s)", (const char *)(uintptr_t)arg,
		    strerror(err));
}

void
record_write(struct session *s, const char *event, json_t *fields)
{
	if (fields == NULL) {
		log_warnx("conn %llu: out of memory building a %s record",
		    (unsigned long long)s->se_id, event);
		return;
	}
	/* event is a string literal ("decision", "close"): it outlives the callback. A close
	 * is held through a log failure and written after the recovery (every allow has its
	 * close); a deny that cannot be written is lost (the hop was refused anyway). */
	if ((strcmp(event, "close") == 0 ?
	    dlog_append_kept(s->se_d->dlog, event, fields, record_done, (void *)(uintptr_t)event) :
	    dlog_append(s->se_d->dlog, event, fields, record_done, (void *)(uintptr_t)event,
	    NULL)) != 0)
		log_warn("conn %llu: decision log refused a %s record", (unsigned long long)s->se_id,
		    event);
}

int
record_allow_append(struct session *s, dlog_done_cb cb, void *arg, struct dlog_ticket **ticket)
{
	char buf[EGRESS_LOG_RECORD_MAX];
	struct jsonw w;
	size_t n;
	bool ok;

	jsonw_init(&w, buf, sizeof(buf));
	hop_decision_w(&w, s, true, REASON_ALLOWED);
	n = jsonw_len(&w, &ok);
	if (!ok) {
		if (ticket != NULL)
			*ticket = NULL;
		errno = EMSGSIZE;
		return -1;
	}
	return dlog_append_raw(s->se_d->dlog, "decision", buf, n, false, false, cb, arg, ticket);
}

void
record_close_write(struct session *s, enum reason why, uint64_t up, uint64_t down)
{
	char buf[EGRESS_LOG_RECORD_MAX];
	struct jsonw w;
	size_t n;
	bool ok;

	jsonw_init(&w, buf, sizeof(buf));
	close_w(&w, s, why, up, down);
	n = jsonw_len(&w, &ok);
	if (!ok)
		errno = EMSGSIZE;
	/* held through a log failure like record_write's close (every allow has its close);
	 * record_done speaks only when it could not be written */
	if (!ok || dlog_append_raw(s->se_d->dlog, "close", buf, n, true, true, record_done,
	    (void *)(uintptr_t)"close", NULL) != 0)
		log_warn("conn %llu: decision log refused a close record",
		    (unsigned long long)s->se_id);
}
