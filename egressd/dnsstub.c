/*
 * dnsstub - the run's stub resolver for transparent capture (contract: dnsstub.h;
 * docs/transparent.md).
 */
#define _GNU_SOURCE
#include "egressd/dnsstub.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/addr.h"
#include "common/grant.h"
#include "common/host.h"
#include "common/log.h"
#include "common/reasons.h"
#include "common/util.h"
#include "egressd/daemon.h"
#include "egressd/dlog.h"
#include "egressd/grants.h"
#include "egressd/metrics.h"
#include "egressd/tpool.h"

#define DNS_FLAG_QR     0x8000u
#define DNS_OPCODE_MASK 0x7800u
#define DNS_FLAG_RD     0x0100u
#define DNS_FLAG_RA     0x0080u

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

enum dnsq_result
dnsstub_parse(const uint8_t *p, size_t n, struct dnsq *q)
{
	size_t off = DNS_HEADER_LEN, o = 0, wire = 0;

	memset(q, 0, sizeof(*q));
	/* A datagram we cannot even answer (too short, an answer, oversized): silence. An
	 * answer to a response could be bounced between two stubs; never reply to QR=1. */
	if (n < DNS_HEADER_LEN || n > EGRESS_DNSSTUB_MSG_MAX)
		return DNSQ_DROP;
	q->id = get16(p);
	q->flags = get16(p + 2);
	if (q->flags & DNS_FLAG_QR)
		return DNSQ_DROP;
	if ((q->flags & DNS_OPCODE_MASK) != 0)
		return DNSQ_NOTIMP;
	if (get16(p + 4) != 1 || get16(p + 6) != 0 || get16(p + 8) != 0 || get16(p + 10) > 1)
		return DNSQ_FORMERR;
	q->name_ok = true;
	for (;;) {
		uint8_t len;

		if (off >= n)
			return DNSQ_FORMERR;
		len = p[off++];
		wire++;
		if (len == 0) {
			if (wire > DNS_NAME_WIRE_MAX)
				return DNSQ_FORMERR;
			break;
		}
		/* 0xc0: a compression pointer, 0x40/0x80: extended label types. */
		if (len > 63)
			return DNSQ_FORMERR;
		wire += len;
		if (wire > DNS_NAME_WIRE_MAX || len > n - off)
			return DNSQ_FORMERR;
		if (o > 0)
			q->name[o++] = '.';
		for (size_t i = 0; i < len; i++) {
			uint8_t c = p[off + i];

			if (c >= 'A' && c <= 'Z')
				c = (uint8_t)(c - 'A' + 'a');
			else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
			    c == '_')) {
				q->name_ok = false;
				c = '?';
			}
			q->name[o++] = (char)c;
		}
		off += len;
	}
	/* wire <= 255 bounds o: labels plus dots never exceed the wire length - 1. */
	q->name[o] = '\0';
	if (n - off < 4)
		return DNSQ_FORMERR;
	q->qtype = get16(p + off);
	q->qclass = get16(p + off + 2);
	off += 4;
	q->qend = off;
	/* Only the one additional record (EDNS OPT) may follow; not parsed, not answered. */
	if (get16(p + 10) == 0 && off != n)
		return DNSQ_FORMERR;
	if (get16(p + 10) == 1 && off == n)
		return DNSQ_FORMERR;
	return DNSQ_OK;
}

size_t
dnsstub_answer(const uint8_t *p, enum dnsq_result r, const struct dnsq *q, int rcode,
    const uint32_t *a4, uint32_t ttl, uint8_t *out, size_t outlen)
{
	size_t qlen, need;
	uint16_t flags;

	if (r == DNSQ_DROP || outlen < DNS_HEADER_LEN)
		return 0;
	flags = (uint16_t)(DNS_FLAG_QR | (q->flags & (DNS_OPCODE_MASK | DNS_FLAG_RD)) |
	    DNS_FLAG_RA | (rcode & 0xf));
	memset(out, 0, DNS_HEADER_LEN);
	put16(out, q->id);
	put16(out + 2, flags);
	if (r != DNSQ_OK)
		return DNS_HEADER_LEN;
	qlen = q->qend - DNS_HEADER_LEN;
	need = q->qend + (a4 != NULL ? 16 : 0);
	if (q->qend < DNS_HEADER_LEN + 5 || need > outlen)
		return 0;
	put16(out + 4, 1);
	put16(out + 6, a4 != NULL ? 1 : 0);
	memcpy(out + DNS_HEADER_LEN, p + DNS_HEADER_LEN, qlen);
	if (a4 != NULL) {
		uint8_t *a = out + q->qend;

		put16(a, 0xc000 | DNS_HEADER_LEN);     /* the name: the question's */
		put16(a + 2, DNS_TYPE_A);
		put16(a + 4, DNS_CLASS_IN);
		put16(a + 6, (uint16_t)(ttl >> 16));
		put16(a + 8, (uint16_t)ttl);
		put16(a + 10, 4);
		put16(a + 12, (uint16_t)(*a4 >> 16));
		put16(a + 14, (uint16_t)*a4);
	}
	return need;
}

/* ---- the budget of deny records (dnsstub.h) ---- */

#define BUDGET_FULL ((uint64_t)EGRESS_DNSSTUB_DENY_BURST * 1000u)

void
dnsstub_budget_init(struct dnsstub_budget *b, uint64_t now_ms)
{
	b->credit = BUDGET_FULL;
	b->last_ms = now_ms;
}

bool
dnsstub_budget_take(struct dnsstub_budget *b, uint64_t now_ms)
{
	/* A clock that went back (it does not: monotonic) refills nothing. Elapsed time is
	 * capped before the multiplication: a full refill is all it can give. */
	if (now_ms > b->last_ms) {
		uint64_t dt = now_ms - b->last_ms;

		if (dt > (uint64_t)EGRESS_DNSSTUB_DENY_BURST * 1000u)
			dt = (uint64_t)EGRESS_DNSSTUB_DENY_BURST * 1000u;
		b->credit += dt * EGRESS_DNSSTUB_DENY_RATE;
		if (b->credit > BUDGET_FULL)
			b->credit = BUDGET_FULL;
		b->last_ms = now_ms;
	}
	if (b->credit < 1000u)
		return false;
	b->credit -= 1000u;
	return true;
}

/* ---- the socket ---- */

#define SUPPRESS_REASONS 4          /* dns_not_granted, dns_pool_exhausted, grant gone */

struct dnsstub {
	struct daemon *ds_d;
	struct lgrant *ds_lg;          /* borrowed: it owns us */
	int ds_fd;
	struct event *ds_ev;
	/* Deny records past the budget (dnsstub.h): answered, counted, written as one
	 * dns_suppressed record by flush. */
	struct dnsstub_budget ds_budget;
	struct event *ds_flush;
	uint64_t ds_suppressed;
	struct {
		enum reason r;
		uint64_t n;
	} ds_supp[SUPPRESS_REASONS];
	char ds_supp_last[DNS_NAME_WIRE_MAX + 1];
};

static const char *
qtype_str(uint16_t t, char *buf, size_t len)
{
	switch (t) {
	case DNS_TYPE_A:
		return "A";
	case DNS_TYPE_AAAA:
		return "AAAA";
	default:
		snprintf(buf, len, "TYPE%u", (unsigned)t);
		return buf;
	}
}

/* A record of the stub's: a deny decision (event "decision", hop_kind "dns"), or the first
 * address handed out for a name (event "dns_map"). Fire and forget, like the denials of
 * sessions: nothing waits on it (the answer grants nothing; the connection is decided on
 * its own, with its own record). */
static void
stub_record(struct dnsstub *s, const char *event, const char *client, const struct dnsq *q,
    enum reason r, const uint32_t *a4)
{
	json_t *o = json_object();
	char tb[16], ab[INET_ADDRSTRLEN];

	if (o == NULL)
		return;
	json_object_set_new(o, "principal", json_string(s->ds_lg->g->principal));
	json_object_set_new(o, "grant_id", json_string(s->ds_lg->id));
	json_object_set_new(o, "client", json_string(client));
	json_object_set_new(o, "hop_kind", json_string("dns"));
	json_object_set_new(o, "capture", json_string("transparent"));
	/* The name as printable text: name_ok names are LDH; others carry '?' for bytes. */
	json_object_set_new(o, "dest", json_string(q->name));
	json_object_set_new(o, "qtype", json_string(qtype_str(q->qtype, tb, sizeof(tb))));
	json_object_set_new(o, "verdict", json_string(r == REASON_ALLOWED ? "allow" : "deny"));
	json_object_set_new(o, "reason", json_string(reason_str(r)));
	if (a4 != NULL) {
		struct in_addr in = { htonl(*a4) };
		json_object_set_new(o, "answer", json_string(inet_ntop(AF_INET, &in, ab,
		    sizeof(ab))));
	}
	if (dlog_append(s->ds_d->dlog, event, o, NULL, NULL, NULL) != 0) {
		log_warnx("decision log refused a %s record (%s)", event, strerror(errno));
		return;
	}
	/* the metrics follow the records (docs/egressd.md): one per decision record */
	if (strcmp(event, "decision") == 0)
		metrics_decision(&s->ds_d->stats, r == REASON_ALLOWED, r);
}

/* The count of denials the budget kept out of the log, as one record; then zero. */
static void
stub_suppressed_write(struct dnsstub *s)
{
	json_t *o, *rs;

	if (s->ds_suppressed == 0)
		return;
	o = json_object();
	rs = json_object();
	if (o == NULL || rs == NULL) {
		json_decref(o);
		json_decref(rs);
		log_warnx("stub resolver of grant %s: %llu denials not recorded (out of memory)",
		    s->ds_lg->id, (unsigned long long)s->ds_suppressed);
		return;
	}
	for (size_t i = 0; i < SUPPRESS_REASONS; i++)
		if (s->ds_supp[i].n > 0)
			json_object_set_new(rs, reason_str(s->ds_supp[i].r),
			    json_integer((json_int_t)s->ds_supp[i].n));
	json_object_set_new(o, "principal", json_string(s->ds_lg->g->principal));
	json_object_set_new(o, "grant_id", json_string(s->ds_lg->id));
	json_object_set_new(o, "hop_kind", json_string("dns"));
	json_object_set_new(o, "capture", json_string("transparent"));
	json_object_set_new(o, "suppressed", json_integer((json_int_t)s->ds_suppressed));
	json_object_set_new(o, "reasons", rs);
	json_object_set_new(o, "last_dest", json_string(s->ds_supp_last));
	if (dlog_append(s->ds_d->dlog, "dns_suppressed", o, NULL, NULL, NULL) != 0)
		log_warnx("decision log refused a dns_suppressed record (%s): %llu denials of "
		    "grant %s not recorded", strerror(errno), (unsigned long long)s->ds_suppressed,
		    s->ds_lg->id);
	s->ds_suppressed = 0;
	memset(s->ds_supp, 0, sizeof(s->ds_supp));
	s->ds_supp_last[0] = '\0';
}

static void
stub_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	stub_suppressed_write(arg);
}

/* A denial: its record while the budget lasts, else counted for dns_suppressed. */
static void
stub_deny(struct dnsstub *s, const char *client, const struct dnsq *q, enum reason r)
{
	size_t i;

	if (dnsstub_budget_take(&s->ds_budget, mono_msec())) {
		stub_record(s, "decision", client, q, r, NULL);
		return;
	}
	s->ds_suppressed++;
	for (i = 0; i < SUPPRESS_REASONS; i++) {
		if (s->ds_supp[i].n == 0)
			s->ds_supp[i].r = r;
		if (s->ds_supp[i].r == r) {
			s->ds_supp[i].n++;
			break;
		}
	}
	snprintf(s->ds_supp_last, sizeof(s->ds_supp_last), "%s", q->name);
	if (!evtimer_pending(s->ds_flush, NULL)) {
		struct timeval tv = { EGRESS_DNSSTUB_SUPPRESS_MS / 1000,
		    (EGRESS_DNSSTUB_SUPPRESS_MS % 1000) * 1000 };
		evtimer_add(s->ds_flush, &tv);
	}
}

/* Any allow entry of the grant names this host (whatever its scheme and port)? */
static bool
stub_granted(const struct grant *g, const struct host *h)
{
	for (size_t i = 0; i < g->nallow; i++)
		if (pattern_match(&g->allow[i], g->allow[i].scheme, h, g->allow[i].port))
			return true;
	return false;
}

/* The verdict on one parsed query: the rcode, and the address when there is one. */
static int
stub_decide(struct dnsstub *s, const char *client, const struct dnsq *q, uint32_t *a4,
    bool *have_a4)
{
	struct host h;
	bool fresh;

	*have_a4 = false;
	if (q->qclass != DNS_CLASS_IN)
		return DNS_RCODE_NOTIMP;
	if (!q->name_ok || q->name[0] == '\0' ||
	    host_parse(q->name, strlen(q->name), HOST_NO_PORT, &h) != HOST_OK ||
	    h.kind != HOST_NAME || strcmp(h.name, q->name) != 0 ||
	    s->ds_lg->dead != REASON_ALLOWED || !stub_granted(s->ds_lg->g, &h)) {
		stub_deny(s, client, q, s->ds_lg->dead != REASON_ALLOWED ? s->ds_lg->dead :
		    REASON_DNS_NOT_GRANTED);
		return DNS_RCODE_NXDOMAIN;
	}
	/* A granted name: AAAA and other types exist but are empty (IPv6 is off in the
	 * worker's namespace, docs/transparent.md), A gets the pool's address. */
	if (q->qtype != DNS_TYPE_A)
		return DNS_RCODE_NOERROR;
	if (s->ds_lg->tpool == NULL || tpool_assign(s->ds_lg->tpool, h.name, a4, &fresh) != 0) {
		stub_deny(s, client, q, REASON_DNS_POOL_EXHAUSTED);
		return DNS_RCODE_SERVFAIL;
	}
	if (fresh)
		stub_record(s, "dns_map", client, q, REASON_ALLOWED, a4);
	*have_a4 = true;
	return DNS_RCODE_NOERROR;
}

static void
stub_read(evutil_socket_t fd, short what, void *arg)
{
	struct dnsstub *s = arg;
	uint8_t in[EGRESS_DNSSTUB_MSG_MAX + 1];
	uint8_t out[DNS_HEADER_LEN + DNS_NAME_WIRE_MAX + 4 + 16];

	(void)what;
	for (int k = 0; k < EGRESS_DNSSTUB_BURST; k++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct dnsq q;
		enum dnsq_result r;
		struct addr a;
		char ab[EGRESS_ADDRSTR_MAX], client[EGRESS_HOSTPORT_MAX + 1];
		uint32_t a4 = 0;
		bool have = false;
		int rcode = DNS_RCODE_FORMERR;
		size_t olen;
		ssize_t n = recvfrom(fd, in, sizeof(in), MSG_DONTWAIT | MSG_TRUNC,
		    (struct sockaddr *)&ss, &sl);

		if (n < 0)
			return;         /* EAGAIN: all read; anything else: next wake-up */
		if (ss.ss_family != AF_INET)
			continue;
		/* MSG_TRUNC: n is the real length, so an oversized datagram is dropped. */
		r = dnsstub_parse(in, (size_t)n > sizeof(in) ? sizeof(in) : (size_t)n, &q);
		if ((size_t)n > EGRESS_DNSSTUB_MSG_MAX)
			r = DNSQ_DROP;
		if (r == DNSQ_DROP)
			continue;
		addr_from_sockaddr(&a, (struct sockaddr *)&ss);
		snprintf(client, sizeof(client), "%s:%u", addr_to_str(&a, ab, sizeof(ab)),
		    (unsigned)ntohs(((struct sockaddr_in *)&ss)->sin_port));
		if (r == DNSQ_NOTIMP)
			rcode = DNS_RCODE_NOTIMP;
		else if (r == DNSQ_OK)
			rcode = stub_decide(s, client, &q, &a4, &have);
		olen = dnsstub_answer(in, r, &q, rcode, have ? &a4 : NULL, EGRESS_DNSSTUB_TTL_S,
		    out, sizeof(out));
		if (olen > 0)
			(void)sendto(fd, out, olen, MSG_DONTWAIT | MSG_NOSIGNAL,
			    (struct sockaddr *)&ss, sl);
	}
}

struct dnsstub *
dnsstub_new(struct daemon *d, struct lgrant *lg, int fd, char *err, size_t errlen)
{
	struct dnsstub *s;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int type = 0;
	socklen_t tl = sizeof(type);

	/* A UDP socket bound to one IPv4 address (the run's gateway), never a wildcard. */
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_DGRAM ||
	    getsockname(fd, (struct sockaddr *)&sin, &sl) != 0 || sin.sin_family != AF_INET ||
	    sin.sin_addr.s_addr == htonl(INADDR_ANY) || sin.sin_port == 0) {
		close(fd);
		errbuf_set(err, errlen, 0, "dns_fd: not a UDP socket bound to an IPv4 address "
		    "and port");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		close(fd);
		errbuf_set(err, errlen, ENOMEM, "stub resolver");
		return NULL;
	}
	s->ds_d = d;
	s->ds_lg = lg;
	s->ds_fd = fd;
	evutil_make_socket_nonblocking(fd);
	evutil_make_socket_closeonexec(fd);
	dnsstub_budget_init(&s->ds_budget, mono_msec());
	s->ds_flush = evtimer_new(d->base, stub_flush, s);
	s->ds_ev = event_new(d->base, fd, EV_READ | EV_PERSIST, stub_read, s);
	if (s->ds_flush == NULL || s->ds_ev == NULL || event_add(s->ds_ev, NULL) != 0) {
		errbuf_set(err, errlen, ENOMEM, "stub resolver event");
		dnsstub_free(s);
		return NULL;
	}
	return s;
}

void
dnsstub_free(struct dnsstub *s)
{
	if (s == NULL)
		return;
	stub_suppressed_write(s);
	if (s->ds_flush != NULL)
		event_free(s->ds_flush);
	if (s->ds_ev != NULL)
		event_free(s->ds_ev);
	if (s->ds_fd >= 0)
		close(s->ds_fd);
	free(s);
}

const char *
dnsstub_addr_str(const struct dnsstub *s, char *buf, size_t len)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	char ab[INET_ADDRSTRLEN];

	if (getsockname(s->ds_fd, (struct sockaddr *)&sin, &sl) != 0 ||
	    inet_ntop(AF_INET, &sin.sin_addr, ab, sizeof(ab)) == NULL) {
		snprintf(buf, len, "?");
		return buf;
	}
	snprintf(buf, len, "%s:%u", ab, (unsigned)ntohs(sin.sin_port));
	return buf;
}
