/*
 * metrics.c - Prometheus text exposition (format 0.0.4) of egressd's counters, served by
 * evhttp on a loopback address only.
 */
#include "egressd/metrics.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/log.h"
#include "egressd/dlog.h"
#include "egressd/dlog_syslog.h"
#include "egressd/grants.h"

const double metrics_bucket_s[METRICS_BUCKETS] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
};

void
metrics_observe(struct metrics_histo *h, uint64_t us)
{
	for (size_t i = 0; i < METRICS_BUCKETS; i++) {
		if ((double)us <= metrics_bucket_s[i] * 1e6) {
			h->bucket[i]++;
			break;
		}
	}
	h->count++;
	h->sum_us += us;
}

void
metrics_decision(struct metrics_stats *m, int allow, enum reason r)
{
	if (m != NULL && (unsigned)r < REASON__COUNT)
		m->decisions[allow ? 1 : 0][r]++;
}

void
metrics_allow_written(int err, void *arg)
{
	if (err == 0)
		metrics_decision(arg, 1, REASON_ALLOWED);
}

void
metrics_hop_failed(struct metrics_stats *m, enum reason r)
{
	if (m != NULL && (unsigned)r < REASON__COUNT)
		m->failed[r]++;
}

void
metrics_close(struct metrics_stats *m, enum reason r)
{
	if (m == NULL || (unsigned)r >= REASON__COUNT)
		return;
	m->closes[r]++;
	if (r != REASON_ALLOWED && reason_http_status(r) != 0)
		m->failed[r]++;
}

struct sbuf {
	char *p;
	size_t len, cap;
	bool fail;
};

static void __attribute__((format(printf, 2, 3)))
sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->fail)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->fail = true;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t nc = b->cap * 2 + (size_t)n;
		char *np = realloc(b->p, nc);
		if (np == NULL) {
			b->fail = true;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
}

static void
histo(struct sbuf *b, const char *name, const char *help, const struct metrics_histo *h)
{
	uint64_t cum = 0;

	sb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (size_t i = 0; i < METRICS_BUCKETS; i++) {
		cum += h->bucket[i];
		sb_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, metrics_bucket_s[i],
		    (unsigned long long)cum);
	}
	sb_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->count);
	sb_printf(b, "%s_sum %.6f\n%s_count %llu\n", name, (double)h->sum_us / 1e6, name,
	    (unsigned long long)h->count);
}

/* The decision log's syslog mirror (docs/audit.md): what it lost is never silent. */
static void
mirror(struct sbuf *b, const struct dlog *d)
{
	struct dlog_syslog_stats st;

	if (!dlog_syslog_status(d, &st))
		return;
	sb_printf(b, "# HELP egressd_syslog_sent_total Messages written to the syslog "
	    "collector (resent ones again).\n# TYPE egressd_syslog_sent_total counter\n"
	    "egressd_syslog_sent_total{transport=\"%s\"} %llu\n", st.transport,
	    (unsigned long long)st.sent);
	sb_printf(b, "# HELP egressd_syslog_dropped_total Decision records the syslog mirror "
	    "lost (spool full, send failed, undelivered at stop); each run of them is also a "
	    "syslog_loss record in the decision log.\n"
	    "# TYPE egressd_syslog_dropped_total counter\n"
	    "egressd_syslog_dropped_total{transport=\"%s\"} %llu\n", st.transport,
	    (unsigned long long)st.dropped);
	sb_printf(b, "# HELP egressd_syslog_loss_episodes_total Runs of consecutive records "
	    "the syslog mirror lost.\n# TYPE egressd_syslog_loss_episodes_total counter\n"
	    "egressd_syslog_loss_episodes_total %llu\n", (unsigned long long)st.loss_episodes);
	if (strcmp(st.transport, "tcp") != 0 && strcmp(st.transport, "tls") != 0)
		return;
	sb_printf(b, "# HELP egressd_syslog_connected 1 while the syslog collector's "
	    "connection is up.\n# TYPE egressd_syslog_connected gauge\n"
	    "egressd_syslog_connected %d\n", st.connected ? 1 : 0);
	sb_printf(b, "# HELP egressd_syslog_resent_total Records written again after a "
	    "reconnect (not acknowledged on the old connection).\n"
	    "# TYPE egressd_syslog_resent_total counter\negressd_syslog_resent_total %llu\n",
	    (unsigned long long)st.resent);
	sb_printf(b, "# HELP egressd_syslog_connect_failures_total Collector connections "
	    "refused, failed or lost.\n# TYPE egressd_syslog_connect_failures_total counter\n"
	    "egressd_syslog_connect_failures_total %llu\n", (unsigned long long)st.failures);
	sb_printf(b, "# HELP egressd_syslog_spool_records Records held for the collector.\n"
	    "# TYPE egressd_syslog_spool_records gauge\negressd_syslog_spool_records %llu\n",
	    (unsigned long long)st.spool_records);
	sb_printf(b, "# HELP egressd_syslog_spool_bytes Bytes held for the collector (bound: "
	    "egressd_syslog_spool_max_bytes).\n# TYPE egressd_syslog_spool_bytes gauge\n"
	    "egressd_syslog_spool_bytes %llu\n# TYPE egressd_syslog_spool_max_bytes gauge\n"
	    "egressd_syslog_spool_max_bytes %llu\n", (unsigned long long)st.spool_bytes,
	    (unsigned long long)st.spool_max);
}

char *
metrics_render(const struct metrics_stats *m, struct grants *g, size_t *len)
{
	struct sbuf b = { malloc(8192), 0, 8192, false };

	if (b.p == NULL)
		return NULL;
	sb_printf(&b, "# HELP egressd_decisions_total Hop decisions by verdict and reason.\n"
	    "# TYPE egressd_decisions_total counter\n");
	for (int v = 0; v < 2; v++)
		for (int r = 0; r < REASON__COUNT; r++)
			if (m->decisions[v][r] > 0)
				sb_printf(&b, "egressd_decisions_total{verdict=\"%s\",reason=\"%s\"} "
				    "%llu\n", v ? "allow" : "deny", reason_str((enum reason)r),
				    (unsigned long long)m->decisions[v][r]);
	sb_printf(&b, "# HELP egressd_closes_total Hop close records by reason (every allowed hop "
	    "ends with one).\n# TYPE egressd_closes_total counter\n");
	for (int r = 0; r < REASON__COUNT; r++)
		if (m->closes[r] > 0)
			sb_printf(&b, "egressd_closes_total{reason=\"%s\"} %llu\n",
			    reason_str((enum reason)r), (unsigned long long)m->closes[r]);
	sb_printf(&b, "# HELP egressd_hops_failed_total Allowed hops that then failed (upstream "
	    "or proxy failure, revocation, audit) by reason.\n"
	    "# TYPE egressd_hops_failed_total counter\n");
	for (int r = 0; r < REASON__COUNT; r++)
		if (m->failed[r] > 0)
			sb_printf(&b, "egressd_hops_failed_total{reason=\"%s\"} %llu\n",
			    reason_str((enum reason)r), (unsigned long long)m->failed[r]);
	sb_printf(&b, "# HELP egressd_bytes_total Bytes relayed.\n"
	    "# TYPE egressd_bytes_total counter\n"
	    "egressd_bytes_total{direction=\"up\"} %llu\n"
	    "egressd_bytes_total{direction=\"down\"} %llu\n",
	    (unsigned long long)m->bytes_up, (unsigned long long)m->bytes_down);
	sb_printf(&b, "# HELP egressd_connections_total Client connections accepted.\n"
	    "# TYPE egressd_connections_total counter\negressd_connections_total %llu\n",
	    (unsigned long long)m->connections_total);
	histo(&b, "egressd_dns_seconds", "DNS lookup latency.", &m->dns);
	histo(&b, "egressd_connect_seconds", "Upstream connect latency.", &m->connect);
	sb_printf(&b, "# HELP egressd_grants_active Live grants.\n"
	    "# TYPE egressd_grants_active gauge\negressd_grants_active %zu\n",
	    g != NULL ? grants_count(g) : 0);
	sb_printf(&b, "# HELP egressd_connections_active Open client connections per principal.\n"
	    "# TYPE egressd_connections_active gauge\n");
	for (struct lgrant *lg = g != NULL ? grants_first(g) : NULL; lg != NULL; lg = lg->next)
		sb_printf(&b, "egressd_connections_active{principal=\"%s\",grant_id=\"%s\"} %u\n",
		    lg->g->principal, lg->id, lg->nconns);
	sb_printf(&b, "# HELP egressd_tunnels_active Open tunnels per principal.\n"
	    "# TYPE egressd_tunnels_active gauge\n");
	for (struct lgrant *lg = g != NULL ? grants_first(g) : NULL; lg != NULL; lg = lg->next)
		sb_printf(&b, "egressd_tunnels_active{principal=\"%s\",grant_id=\"%s\"} %u\n",
		    lg->g->principal, lg->id, lg->ntunnels);
	mirror(&b, m->dlog);
	if (b.fail) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}

struct metrics_server {
	struct evhttp *http;
	const struct metrics_stats *m;
	struct grants **g;
};

static void
serve(struct evhttp_request *req, void *arg)
{
	struct metrics_server *s = arg;
	struct evbuffer *out;
	size_t len;
	char *txt;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET ||
	    strcmp(evhttp_request_get_uri(req), "/metrics") != 0) {
		evhttp_send_error(req, 404, "not found");
		return;
	}
	txt = metrics_render(s->m, *s->g, &len);
	out = evbuffer_new();
	if (txt == NULL || out == NULL) {
		free(txt);
		if (out != NULL)
			evbuffer_free(out);
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	evbuffer_add(out, txt, len);
	free(txt);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "text/plain; version=0.0.4");
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

struct metrics_server *
metrics_server_new(struct event_base *base, const struct sockaddr *sa, socklen_t salen,
    const struct metrics_stats *m, struct grants **g, char *err, size_t errlen)
{
	struct metrics_server *s = calloc(1, sizeof(*s));
	evutil_socket_t fd;
	int one = 1;

	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->m = m;
	s->g = g;
	s->http = evhttp_new(base);
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->http == NULL || fd < 0) {
		snprintf(err, errlen, "socket failed");
		goto fail;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, sa, salen) != 0 || listen(fd, 16) != 0) {
		snprintf(err, errlen, "bind: %s", strerror(errno));
		close(fd);
		goto fail;
	}
	if (evhttp_accept_socket(s->http, fd) != 0) {
		snprintf(err, errlen, "evhttp_accept_socket failed");
		close(fd);
		goto fail;
	}
	evhttp_set_timeout(s->http, 10);
	evhttp_set_max_headers_size(s->http, 8192);
	evhttp_set_max_body_size(s->http, 0);
	evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET);
	evhttp_set_gencb(s->http, serve, s);
	return s;
fail:
	metrics_server_free(s);
	return NULL;
}

void
metrics_server_free(struct metrics_server *s)
{
	if (s == NULL)
		return;
	if (s->http != NULL)
		evhttp_free(s->http);
	free(s);
}
