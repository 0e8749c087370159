/*
 * session_record.c - the decision-log records of one hop, one builder per kind: the
 * decision on a requested hop, the decision on a redirect hop, the close of a tunnel
 * (docs/decision-log.md has the schema). The fields they share are written once
 * (record_begin, hop_fields, pinned_json). Contract: session_int.h.
 */
#include "egressd/session_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/host.h"
#include "common/log.h"
#include "common/util.h"
#include "egressd/dlog.h"
#include "egressd/daemon.h"
#include "egressd/httpresp.h"
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

static json_t *
addrs_json(const struct addr *a, size_t n)
{
	json_t *arr = json_array();
	char buf[EGRESS_ADDRSTR_MAX];

	for (size_t i = 0; arr != NULL && i < n; i++)
		json_array_append_new(arr, json_string(addr_to_str(&a[i], buf, sizeof(buf))));
	return arr;
}

static const char *
hop_dest(const struct session *s, char *buf, size_t len)
{
	char hp[EGRESS_HOSTPORT_MAX + 1];
	struct host h = s->se_su->su_req.host;

	h.port = s->se_su->su_req.port;
	snprintf(buf, len, "%s", host_to_str(&h, hp, sizeof(hp)));
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
static json_t *
pinned_json(const struct session *s)
{
	char ab[EGRESS_ADDRSTR_MAX];

	return s->se_attested ? json_string(addr_to_str(&s->se_pinned, ab, sizeof(ab))) :
	    json_null();
}

/* The upstream proxy's address, status and authentication scheme (docs/decision-log.md). */
static void
proxy_fields(json_t *o, const struct session *s)
{
	char pb[EGRESS_ADDRSTR_MAX];

	json_object_set_new(o, "proxy_addr", s->se_proxy_have_addr ?
	    json_string(addr_to_str(&s->se_proxy_addr, pb, sizeof(pb))) : json_null());
	json_object_set_new(o, "proxy_status", s->se_proxy_status ?
	    json_integer(s->se_proxy_status) : json_null());
	json_object_set_new(o, "proxy_auth", s->se_proxy_auth ? json_string(s->se_proxy_auth) :
	    json_null());
}

/* The fields every record of a hop starts with: the connection and whose authority it
 * ran under; with_client adds the client's address (decisions). NULL on ENOMEM. */
static json_t *
record_begin(const struct session *s, bool with_client)
{
	json_t *o = json_object();

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "conn", json_string(s->se_conn));
	json_object_set_new(o, "principal", json_string(s->se_lg->g->principal));
	json_object_set_new(o, "grant_id", json_string(s->se_lg->id));
	if (with_client)
		json_object_set_new(o, "client", json_string(s->se_client));
	return o;
}

/* A decision's place in its hop chain (docs/redirects.md, "Hop chains"). */
static void
hop_fields(json_t *o, const char *hop, const char *parent, const char *kind)
{
	json_object_set_new(o, "hop", json_string(hop));
	json_object_set_new(o, "parent_hop", parent != NULL ? json_string(parent) : json_null());
	json_object_set_new(o, "hop_kind", json_string(kind));
}

/* A transparently captured hop says so, and which address the worker dialled. */
static void
capture_fields(const struct session *s, json_t *o)
{
	if (s->se_cap == NULL)
		return;
	json_object_set_new(o, "capture", json_string("transparent"));
	json_object_set_new(o, "original_dst", json_string(s->se_cap->cap_orig_dst));
}

json_t *
record_hop_decision(struct session *s, bool allow, enum reason r)
{
	const struct session_setup *su = s->se_su;
	const struct http_request *req = &su->su_req;
	/* past SE_HEAD the request was parsed (a refusal in SE_HEAD has none) */
	bool parsed = s->se_state != SE_HEAD;
	json_t *o;
	char buf[EGRESS_HOSTPORT_MAX + 32];
	char tgt[EGRESS_LOG_TARGET_MAX + 1];

	o = record_begin(s, true);
	if (o == NULL)
		return NULL;
	hop_fields(o, session_hop_id(s), su->su_parent_hop[0] != '\0' ? su->su_parent_hop : NULL,
	    parsed && req->method == HTTP_CONNECT ? "connect" : "request");
	json_object_set_new(o, "credentials_stripped", json_boolean(su->su_creds_stripped));
	json_object_set_new(o, "upstream_reused", json_boolean(su->su_up_reused));
	if (parsed) {
		size_t n = req->target_len < EGRESS_LOG_TARGET_MAX ? req->target_len :
		    EGRESS_LOG_TARGET_MAX;
		/* The parser admitted only printable ASCII in the target. */
		memcpy(tgt, req->target, n);
		tgt[n] = '\0';
		json_object_set_new(o, "method", json_string(http_method_str(req->method)));
		json_object_set_new(o, "target", json_string(tgt));
		json_object_set_new(o, "target_truncated",
		    json_boolean(req->target_len > EGRESS_LOG_TARGET_MAX));
		json_object_set_new(o, "dest", json_string(hop_dest(s, buf, sizeof(buf))));
	} else {
		json_object_set_new(o, "method", json_null());
		json_object_set_new(o, "target", su->su_reqline[0] != '\0' ?
		    json_string(su->su_reqline) : json_null());
		json_object_set_new(o, "dest", json_null());
	}
	json_object_set_new(o, "verdict", json_string(allow ? "allow" : "deny"));
	json_object_set_new(o, "reason", json_string(reason_str(r)));
	if (su->su_route.n > 0 && su->su_route_i < su->su_route.n) {
		char rb[EGRESS_HOSTPORT_MAX + 32];
		json_object_set_new(o, "route", json_string(proxyurl_to_str(
		    &su->su_route.entries[su->su_route_i], rb, sizeof(rb))));
		json_object_set_new(o, "route_source", json_string(su->su_route.source));
	} else {
		json_object_set_new(o, "route", json_null());
		json_object_set_new(o, "route_source", json_null());
	}
	if (s->se_proxy_known && s->se_proxy_have_addr)
		proxy_fields(o, s);
	json_object_set_new(o, "resolved", addrs_json(su->su_resolved, su->su_nresolved));
	json_object_set_new(o, "pinned", pinned_json(s));
	json_object_set_new(o, "classes_dropped", su->su_checked ?
	    addrcheck_classes_json(su->su_ac.dropped_classes) : json_array());
	json_object_set_new(o, "override", json_boolean(su->su_checked &&
	    su->su_ac.lifted_override != 0));
	json_object_set_new(o, "attested", json_boolean(s->se_attested));
	/* local: egressd resolved the name (or took the literal) and checked the classes
	 * itself (also through a proxy that resolves again: check-without-pinning); none: it
	 * did not (refused before, or no local answer and the proxy resolved it unchecked) */
	json_object_set_new(o, "checked", json_string(su->su_checked ? "local" : "none"));
	json_object_set_new(o, "resolve_us", json_integer((json_int_t)su->su_resolve_us));
	json_object_set_new(o, "connect_us", json_integer((json_int_t)su->su_connect_us));
	capture_fields(s, o);
	return o;
}

json_t *
record_redirect(struct session *s, const struct httpresp *r,
    const struct redirect_target *t, bool resolved, const char *rhop, const char *loc,
    size_t loclen, bool cross, enum reason rr, const char *detail)
{
	char db[EGRESS_HOSTPORT_MAX + 1], lb[EGRESS_LOG_TARGET_MAX + 1];
	size_t kept = escape_into(lb, sizeof(lb), loc, loclen);
	json_t *o = record_begin(s, true);

	if (o == NULL)
		return NULL;
	hop_fields(o, rhop, session_hop_id(s), "redirect");
	json_object_set_new(o, "method", json_string(http_method_str(s->se_method)));
	json_object_set_new(o, "target", json_string(lb));
	json_object_set_new(o, "target_truncated", json_boolean(kept < loclen));
	if (resolved) {
		struct host hh = t->host;
		hh.port = t->port;
		json_object_set_new(o, "dest", json_string(host_to_str(&hh, db, sizeof(db))));
		json_object_set_new(o, "location", json_string(t->url));
	} else {
		json_object_set_new(o, "dest", json_null());
		json_object_set_new(o, "location", json_null());
	}
	json_object_set_new(o, "status", json_integer(r->status));
	json_object_set_new(o, "cross_origin", json_boolean(cross));
	json_object_set_new(o, "chain_depth", json_integer(s->se_su->su_chain_depth + 1));
	json_object_set_new(o, "verdict", json_string(rr == REASON_ALLOWED ? "allow" : "deny"));
	json_object_set_new(o, "reason", json_string(reason_str(rr)));
	json_object_set_new(o, "detail", detail != NULL ? json_string(detail) : json_null());
	return o;
}

json_t *
record_close(struct session *s, enum reason why, uint64_t up, uint64_t down)
{
	json_t *o = record_begin(s, false);

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "hop", json_string(session_hop_id(s)));
	json_object_set_new(o, "dest", s->se_dest != NULL ? json_string(s->se_dest) :
	    json_null());
	json_object_set_new(o, "pinned", pinned_json(s));
	json_object_set_new(o, "reason", json_string(reason_str(why)));
	/* the proxy's answer came after the allow record (docs/decision-log.md); known only
	 * for a proxy route entry */
	if (s->se_proxy_known)
		proxy_fields(o, s);
	json_object_set_new(o, "bytes_up", json_integer((json_int_t)up));
	json_object_set_new(o, "bytes_down", json_integer((json_int_t)down));
	json_object_set_new(o, "duration_us",
	    json_integer((json_int_t)(mono_usec() - s->se_tunnel_start_us)));
	/* A forwarded HTTP exchange: the origin's final status (null when none arrived). */
	if (s->se_method != HTTP_CONNECT)
		json_object_set_new(o, "status", s->se_resp_status > 0 ?
		    json_integer(s->se_resp_status) : json_null());
	if (s->se_sni_checked) {
		/* an opaque tunnel whose ClientHello was checked (sniguard.h) */
		json_object_set_new(o, "tls", json_boolean(s->se_tls_seen));
		json_object_set_new(o, "sni", s->se_sni_name != NULL ?
		    json_string(s->se_sni_name) : json_null());
	}
	capture_fields(s, o);
	/* Every close record is counted where it is built (the metrics follow the records:
	 * a hop refused after its allow record ends with a close, never a second decision). */
	metrics_close(&s->se_d->stats, why);
	return o;
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
