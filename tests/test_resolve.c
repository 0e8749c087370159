/*
 * test_resolve.c - egressd/resolve against a fake DNS server on 127.0.0.1 (UDP, driven
 * by the same event_base). Loopback only; every wait is bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <ares.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "egressd/resolve.h"

/* ---- fake DNS server ---- */

struct rr {
	int type;            /* 1 A, 28 AAAA, 5 CNAME */
	const char *owner;   /* NULL = the question name */
	const char *data;    /* address text or CNAME target */
	uint32_t ttl;
};

struct zone {
	const char *name;
	int rcode;           /* 0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN, 5 REFUSED */
	bool silent;         /* never answer */
	bool garbage;        /* claim one answer, send none (malformed) */
	struct rr a[4];      /* answers to an A query */
	struct rr aaaa[4];   /* answers to an AAAA query */
	int queries;
};

static struct zone zones[] = {
	{ .name = "a.test",
	  .a = { { 1, NULL, "198.51.100.1", 60 }, { 1, NULL, "198.51.100.2", 60 } },
	  .aaaa = { { 28, NULL, "2001:db8::1", 30 } } },
	{ .name = "v4only.test", .a = { { 1, NULL, "203.0.113.5", 60 } } },
	{ .name = "cname.test",
	  .a = { { 5, NULL, "target.test", 20 }, { 1, "target.test", "198.51.100.9", 50 } },
	  .aaaa = { { 5, NULL, "target.test", 20 } } },
	{ .name = "cname-private.test",
	  .a = { { 5, NULL, "internal.test", 60 }, { 1, "internal.test", "10.0.0.5", 60 } },
	  .aaaa = { { 5, NULL, "internal.test", 60 } } },
	{ .name = "nx.test", .rcode = 3 },
	{ .name = "fail.test", .rcode = 2 },
	{ .name = "refused.test", .rcode = 5 },
	{ .name = "silent.test", .silent = true },
	{ .name = "empty.test" },
	{ .name = "ttl0.test", .a = { { 1, NULL, "198.51.100.7", 0 } } },
	{ .name = "garbage.test", .garbage = true },
	{ .name = "offpath.test", .a = { { 1, "evil.test", "10.0.0.1", 60 } } },
	{ .name = "many.test",
	  .a = { { 1, NULL, "198.51.100.1", 60 }, { 1, NULL, "198.51.100.1", 60 },
	         { 1, NULL, "198.51.100.3", 60 } } },
};

static struct zone *
zone_find(const char *name)
{
	for (size_t i = 0; i < EGRESS_NELEM(zones); i++)
		if (strcasecmp(zones[i].name, name) == 0)
			return &zones[i];
	return NULL;
}

static size_t
put_name(unsigned char *p, const char *name)
{
	size_t off = 0;

	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);

		p[off++] = (unsigned char)l;
		memcpy(p + off, name, l);
		off += l;
		name += l;
		if (*name == '.')
			name++;
	}
	p[off++] = 0;
	return off;
}

static void
put16(unsigned char *p, unsigned v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static void
put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static void
on_dns(evutil_socket_t fd, short what, void *arg)
{
	unsigned char q[512], r[1024];
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&ss, &sl);
	char name[256];
	size_t off = 12, nl = 0, qend, roff;
	unsigned qtype, an = 0;
	struct zone *z;
	struct rr *rrs;

	(void)what;
	(void)arg;
	if (n < 17)
		return;
	while (off < (size_t)n && q[off] != 0) {
		size_t l = q[off];

		if (off + 1 + l > (size_t)n || nl + l + 1 >= sizeof(name))
			return;
		if (nl)
			name[nl++] = '.';
		memcpy(name + nl, q + off + 1, l);
		nl += l;
		off += 1 + l;
	}
	name[nl] = '\0';
	qend = off + 5;
	if (qend > (size_t)n)
		return;
	qtype = (unsigned)q[off + 1] << 8 | q[off + 2];
	z = zone_find(name);
	if (z != NULL)
		z->queries++;
	if (z != NULL && z->silent)
		return;
	memcpy(r, q, qend);
	r[2] = 0x81;                       /* QR, RD */
	r[3] = 0x80 | (z == NULL ? 3 : z->rcode);
	put16(r + 6, 0);
	put16(r + 8, 0);
	put16(r + 10, 0);
	roff = qend;
	rrs = z == NULL ? NULL : qtype == 1 ? z->a : qtype == 28 ? z->aaaa : NULL;
	for (int i = 0; rrs != NULL && z->rcode == 0 && i < 4 && rrs[i].type; i++) {
		struct rr *x = &rrs[i];

		if (x->owner == NULL) {
			put16(r + roff, 0xc00c);
			roff += 2;
		} else {
			roff += put_name(r + roff, x->owner);
		}
		put16(r + roff, (unsigned)x->type);
		put16(r + roff + 2, 1);
		put32(r + roff + 4, x->ttl);
		roff += 8;
		if (x->type == 1) {
			put16(r + roff, 4);
			inet_pton(AF_INET, x->data, r + roff + 2);
			roff += 6;
		} else if (x->type == 28) {
			put16(r + roff, 16);
			inet_pton(AF_INET6, x->data, r + roff + 2);
			roff += 18;
		} else {
			size_t l = put_name(r + roff + 2, x->data);

			put16(r + roff, (unsigned)l);
			roff += 2 + l;
		}
		an++;
	}
	put16(r + 6, an);
	if (z != NULL && z->garbage) {
		put16(r + 6, 1);
		roff = qend + 3;   /* an answer that stops inside its name */
		r[qend] = 0xc0;
		r[qend + 1] = 0x0c;
		r[qend + 2] = 0x00;
	}
	(void)sendto(fd, r, roff, 0, (struct sockaddr *)&ss, sl);
}

struct fix {
	struct event_base *base;
	int dns_fd;
	struct event *dns_ev;
	char server[64];
	struct resolver *r;
};

static struct resolver *
new_resolver(struct fix *f, bool prefer_ipv4, unsigned ttl_cap)
{
	const char *servers[] = { f->server };
	struct resolver_config cfg = { .servers = servers, .nservers = 1, .timeout_ms = 300,
	    .attempts = 1, .prefer_ipv4 = prefer_ipv4, .ttl_cap_s = ttl_cap };
	char err[256];
	struct resolver *r = resolver_new(f->base, &cfg, err, sizeof(err));

	if (r == NULL)
		fail_msg("resolver_new: %s", err);
	return r;
}

static int
setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);

	for (size_t i = 0; i < EGRESS_NELEM(zones); i++)
		zones[i].queries = 0;
	f->base = event_base_new();
	f->dns_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(f->dns_fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(f->dns_fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(f->dns_fd, (struct sockaddr *)&sin, &sl), 0);
	snprintf(f->server, sizeof(f->server), "127.0.0.1:%u", ntohs(sin.sin_port));
	f->dns_ev = event_new(f->base, f->dns_fd, EV_READ | EV_PERSIST, on_dns, NULL);
	event_add(f->dns_ev, NULL);
	f->r = new_resolver(f, false, 0);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fix *f = *state;

	resolver_free(f->r);
	event_free(f->dns_ev);
	close(f->dns_fd);
	event_base_free(f->base);
	free(f);
	return 0;
}

struct got {
	int calls;
	struct resolve_answer ans;
	char name[256];
};

static void
on_answer(const struct resolve_answer *ans, void *arg)
{
	struct got *g = arg;

	g->calls++;
	g->ans = *ans;
	snprintf(g->name, sizeof(g->name), "%s", ans->name);
	g->ans.name = g->name;
}

static void
run_until(struct event_base *base, const int *counter, int want, unsigned max_ms)
{
	uint64_t deadline = mono_msec() + max_ms;

	while (*counter < want && mono_msec() < deadline) {
		struct timeval tv = { 0, 5000 };

		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
}

static void
lookup(struct fix *f, struct resolver *r, const char *name, struct got *g)
{
	struct resolve_req *q;

	memset(g, 0, sizeof(*g));
	q = resolver_lookup(r, name, on_answer, g);
	assert_non_null(q);
	assert_int_equal(g->calls, 0);   /* never synchronous */
	run_until(f->base, &g->calls, 1, 3000);
	assert_int_equal(g->calls, 1);
}

static void
assert_addr(const struct addr *a, const char *text)
{
	char buf[EGRESS_ADDRSTR_MAX];

	assert_string_equal(addr_to_str(a, buf, sizeof(buf)), text);
}

static void
test_a_aaaa_order_and_cache(void **state)
{
	struct fix *f = *state;
	struct got g;

	lookup(f, f->r, "a.test", &g);
	assert_int_equal(g.ans.status, REASON_ALLOWED);
	assert_int_equal(g.ans.naddrs, 3);
	assert_addr(&g.ans.addrs[0], "2001:db8::1");
	assert_addr(&g.ans.addrs[1], "198.51.100.1");
	assert_addr(&g.ans.addrs[2], "198.51.100.2");
	assert_int_equal(g.ans.ttl_s, 30);
	assert_false(g.ans.from_cache);
	assert_string_equal(g.ans.name, "a.test");
	assert_int_equal(zones[0].queries, 2);   /* A and AAAA */
	assert_int_equal(resolver_pending(f->r), 0);
	assert_int_equal(resolver_cache_size(f->r), 1);

	lookup(f, f->r, "a.test", &g);
	assert_int_equal(g.ans.status, REASON_ALLOWED);
	assert_true(g.ans.from_cache);
	assert_int_equal(g.ans.naddrs, 3);
	assert_addr(&g.ans.addrs[0], "2001:db8::1");
	assert_true(g.ans.ttl_s >= 29 && g.ans.ttl_s <= 30);
	assert_int_equal(zones[0].queries, 2);   /* served from the cache */

	resolver_flush(f->r);
	assert_int_equal(resolver_cache_size(f->r), 0);
	lookup(f, f->r, "a.test", &g);
	assert_false(g.ans.from_cache);
	assert_int_equal(zones[0].queries, 4);
}

static void
test_prefer_ipv4(void **state)
{
	struct fix *f = *state;
	struct resolver *r = new_resolver(f, true, 0);
	struct got g;

	lookup(f, r, "a.test", &g);
	assert_int_equal(g.ans.naddrs, 3);
	assert_addr(&g.ans.addrs[0], "198.51.100.1");
	assert_addr(&g.ans.addrs[1], "2001:db8::1");
	assert_addr(&g.ans.addrs[2], "198.51.100.2");
	resolver_free(r);
}

static void
test_v4only_and_dedup(void **state)
{
	struct fix *f = *state;
	struct got g;

	lookup(f, f->r, "v4only.test", &g);
	assert_int_equal(g.ans.status, REASON_ALLOWED);
	assert_int_equal(g.ans.naddrs, 1);
	assert_addr(&g.ans.addrs[0], "203.0.113.5");

	lookup(f, f->r, "many.test", &g);
	assert_int_equal(g.ans.naddrs, 2);
	assert_addr(&g.ans.addrs[0], "198.51.100.1");
	assert_addr(&g.ans.addrs[1], "198.51.100.3");
}

static void
test_cname_chain(void **state)
{
	struct fix *f = *state;
	struct got g;

	lookup(f, f->r, "cname.test", &g);
	assert_int_equal(g.ans.status, REASON_ALLOWED);
	assert_int_equal(g.ans.naddrs, 1);
	assert_addr(&g.ans.addrs[0], "198.51.100.9");
	assert_int_equal(g.ans.ttl_s, 20);   /* the CNAME's TTL bounds the answer */

	/* only the final answer is returned; classifying it is addrcheck's job */
	lookup(f, f->r, "cname-private.test", &g);
	assert_int_equal(g.ans.status, REASON_ALLOWED);
	assert_int_equal(g.ans.naddrs, 1);
	assert_addr(&g.ans.addrs[0], "10.0.0.5");
}

static void
test_failures(void **state)
{
	struct fix *f = *state;
	struct got g;

	lookup(f, f->r, "nx.test", &g);
	assert_int_equal(g.ans.status, REASON_DNS_NXDOMAIN);
	assert_int_equal(g.ans.naddrs, 0);
	lookup(f, f->r, "fail.test", &g);
	assert_int_equal(g.ans.status, REASON_DNS_SERVFAIL);
	lookup(f, f->r, "refused.test", &g);
	assert_int_equal(g.ans.status, REASON_DNS_SERVFAIL);
	lookup(f, f->r, "empty.test", &g);
	assert_int_equal(g.ans.status, REASON_DNS_NO_ADDRESS);
	assert_int_equal(g.ans.naddrs, 0);
	lookup(f, f->r, "silent.test", &g);
	assert_int_equal(g.ans.status, REASON_DNS_TIMEOUT);
	assert_true(g.ans.duration_us >= 250000);
	/* failures are not cached */
	assert_int_equal(resolver_cache_size(f->r), 0);
	lookup(f, f->r, "nx.test", &g);
	assert_int_equal(g.ans.status, REASON_DNS_NXDOMAIN);
	assert_false(g.ans.from_cache);
	/* no /etc/hosts, no built-in names: "localhost" is asked of the DNS server too */
	lookup(f, f->r, "localhost", &g);
	assert_int_equal(g.ans.status, REASON_DNS_NXDOMAIN);
}

static void
test_hostile_answers(void **state)
{
	struct fix *f = *state;
	struct got g;

	lookup(f, f->r, "garbage.test", &g);
	assert_int_equal(g.ans.status, REASON_DNS_ERROR);
	assert_int_equal(g.ans.naddrs, 0);
	/* an address for a name outside the chain is not an answer */
	lookup(f, f->r, "offpath.test", &g);
	assert_int_not_equal(g.ans.status, REASON_ALLOWED);
	assert_int_equal(g.ans.naddrs, 0);
}

static void
test_system_resolv_conf(void **state)
{
	struct fix *f = *state;
	struct resolver_config cfg = { 0 };
	char err[256];
	struct resolver *r = resolver_new(f->base, &cfg, err, sizeof(err));

	/* no query is sent: only set-up from /etc/resolv.conf is checked */
	assert_non_null(r);
	assert_int_equal(resolver_pending(r), 0);
	resolver_free(r);
}

static void
test_ttl0_not_cached(void **state)
{
	struct fix *f = *state;
	struct zone *z = zone_find("ttl0.test");
	struct got g;

	if (z == NULL) {
		fail();
		return;
	}

	lookup(f, f->r, "ttl0.test", &g);
	assert_int_equal(g.ans.status, REASON_ALLOWED);
	assert_int_equal(g.ans.ttl_s, 0);
	int q1 = z->queries;
	lookup(f, f->r, "ttl0.test", &g);
	assert_false(g.ans.from_cache);
	assert_true(z->queries > q1);   /* asked again: rebinding gets no stale pin */
	assert_int_equal(resolver_cache_size(f->r), 0);
}

static void
test_ttl_cap_expires(void **state)
{
	struct fix *f = *state;
	struct resolver *r = new_resolver(f, false, 1);   /* cap every TTL at 1 s */
	struct got g;
	int dummy = 0;

	lookup(f, r, "a.test", &g);
	lookup(f, r, "a.test", &g);
	assert_true(g.ans.from_cache);
	run_until(f->base, &dummy, 1, 1100);   /* wait 1.1 s, loop running */
	lookup(f, r, "a.test", &g);
	assert_false(g.ans.from_cache);
	resolver_free(r);
}

static void
test_cancel(void **state)
{
	struct fix *f = *state;
	struct got g1 = { 0 }, g2 = { 0 }, g3 = { 0 };
	struct resolve_req *q1, *q2, *q3;
	int dummy = 0;

	/* in flight in c-ares */
	q1 = resolver_lookup(f->r, "silent.test", on_answer, &g1);
	assert_non_null(q1);
	assert_int_equal(resolver_pending(f->r), 1);
	resolve_cancel(q1);
	assert_int_equal(resolver_pending(f->r), 0);
	/* a cache hit awaiting delivery */
	lookup(f, f->r, "v4only.test", &g3);
	q2 = resolver_lookup(f->r, "v4only.test", on_answer, &g2);
	resolve_cancel(q2);
	/* a refused literal awaiting delivery */
	q3 = resolver_lookup(f->r, "10.0.0.1", on_answer, &g2);
	resolve_cancel(q3);
	run_until(f->base, &dummy, 1, 600);   /* past the timeout */
	assert_int_equal(g1.calls, 0);
	assert_int_equal(g2.calls, 0);
	assert_int_equal(resolver_pending(f->r), 0);
}

/* Single flight: 200 simultaneous requests for one uncached name cost one A and one
 * AAAA query; every waiter gets its own answer; a cancelled waiter leaves the others. */
static void
test_single_flight(void **state)
{
	struct fix *f = *state;
	enum { N = 200 };
	static struct got g[N];
	struct resolve_req *q[N];
	int answered = 0;
	struct zone *z = zone_find("a.test");

	memset(g, 0, sizeof(g));
	assert_true(resolver_would_query(f->r, "a.test"));
	assert_false(resolver_would_query(f->r, "10.0.0.1"));   /* refused, never sent */
	for (int i = 0; i < N; i++) {
		q[i] = resolver_lookup(f->r, "a.test", on_answer, &g[i]);
		assert_non_null(q[i]);
		assert_false(resolver_would_query(f->r, "a.test"));  /* it would join */
	}
	assert_int_equal(resolver_pending(f->r), N);
	resolve_cancel(q[7]);
	resolve_cancel(q[0]);                   /* the one that started the flight */
	for (uint64_t deadline = mono_msec() + 3000; mono_msec() < deadline; ) {
		struct timeval tv = { 0, 5000 };
		answered = 0;
		for (int i = 0; i < N; i++)
			answered += g[i].calls;
		if (answered == N - 2)
			break;
		event_base_loopexit(f->base, &tv);
		event_base_dispatch(f->base);
	}
	assert_int_equal(answered, N - 2);
	assert_int_equal(z->queries, 2);        /* A and AAAA, once */
	for (int i = 0; i < N; i++) {
		if (i == 0 || i == 7) {
			assert_int_equal(g[i].calls, 0);
			continue;
		}
		assert_int_equal(g[i].calls, 1);
		assert_int_equal(g[i].ans.status, REASON_ALLOWED);
		assert_int_equal(g[i].ans.naddrs, 3);
		assert_string_equal(g[i].name, "a.test");
	}
	assert_false(resolver_would_query(f->r, "a.test"));      /* cached now */
	assert_int_equal(resolver_pending(f->r), 0);
	/* failures are shared the same way, and not cached: a later lookup asks again */
	z = zone_find("fail.test");
	for (int i = 0; i < 50; i++)
		assert_non_null(resolver_lookup(f->r, "fail.test", on_answer, &g[i]));
	memset(g, 0, sizeof(g));
	answered = 0;
	for (uint64_t deadline = mono_msec() + 3000; mono_msec() < deadline && answered < 50; ) {
		struct timeval tv = { 0, 5000 };
		event_base_loopexit(f->base, &tv);
		event_base_dispatch(f->base);
		answered = 0;
		for (int i = 0; i < 50; i++)
			answered += g[i].calls;
	}
	assert_int_equal(answered, 50);
	assert_int_equal(g[49].ans.status, REASON_DNS_SERVFAIL);
	assert_int_equal(z->queries, 2);
	lookup(f, f->r, "fail.test", &g[0]);
	assert_int_equal(z->queries, 4);
}

/* dns_timeout x dns_attempts is the whole bound of a lookup, although c-ares doubles the
 * timeout of each later attempt (300 + 600 + 1200 ms for three). */
static void
test_total_deadline(void **state)
{
	struct fix *f = *state;
	const char *servers[] = { f->server };
	struct resolver_config cfg = { .servers = servers, .nservers = 1, .timeout_ms = 300,
	    .attempts = 3 };
	char err[256];
	struct resolver *r = resolver_new(f->base, &cfg, err, sizeof(err));
	struct got g1 = { 0 }, g2 = { 0 };
	uint64_t t0 = mono_msec(), took;

	assert_non_null(r);
	assert_non_null(resolver_lookup(r, "silent.test", on_answer, &g1));
	assert_non_null(resolver_lookup(r, "silent.test", on_answer, &g2));
	run_until(f->base, &g2.calls, 1, 5000);
	took = mono_msec() - t0;
	assert_int_equal(g1.calls, 1);
	assert_int_equal(g2.calls, 1);
	assert_int_equal(g1.ans.status, REASON_DNS_TIMEOUT);
	assert_int_equal(g2.ans.status, REASON_DNS_TIMEOUT);
	assert_true(took >= 850);
	assert_true(took < 1600);                /* c-ares alone: 2100 ms */
	/* the abandoned query is still c-ares': a new lookup starts afresh */
	assert_true(resolver_would_query(r, "silent.test"));
	resolver_free(r);
}

static void
test_literals_never_sent(void **state)
{
	struct fix *f = *state;
	const char *bad[] = { "10.0.0.1", "127.1", "2130706433", "::1", "010.0.0.1",
	    "a.test.", "" };
	struct got g;

	for (size_t i = 0; i < EGRESS_NELEM(bad); i++) {
		lookup(f, f->r, bad[i], &g);
		assert_int_equal(g.ans.status, REASON_DNS_ERROR);
		assert_int_equal(g.ans.naddrs, 0);
	}
	assert_int_equal(zones[0].queries, 0);   /* a.test */
}

static void
test_free_with_outstanding(void **state)
{
	struct fix *f = *state;
	struct resolver *r = new_resolver(f, false, 0);
	struct got g = { 0 };

	assert_non_null(resolver_lookup(r, "silent.test", on_answer, &g));
	assert_non_null(resolver_lookup(r, "10.0.0.1", on_answer, &g));
	resolver_free(r);
	assert_int_equal(g.calls, 0);
	event_base_loop(f->base, EVLOOP_NONBLOCK);
	assert_int_equal(g.calls, 0);
}

static void
test_retire_drains(void **state)
{
	struct fix *f = *state;
	struct resolver *r = new_resolver(f, false, 0);
	struct got g1 = { 0 }, g2 = { 0 };
	struct resolve_req *q2;

	assert_non_null(resolver_lookup(r, "v4only.test", on_answer, &g1));
	q2 = resolver_lookup(r, "silent.test", on_answer, &g2);
	assert_non_null(q2);
	resolver_retire(r);
	/* the in-flight lookup still completes on the retired resolver */
	run_until(f->base, &g1.calls, 1, 3000);
	assert_int_equal(g1.calls, 1);
	assert_int_equal(g1.ans.status, REASON_ALLOWED);
	/* cancelling the last one lets it free itself (ASan checks the rest) */
	resolve_cancel(q2);
	event_base_loop(f->base, EVLOOP_NONBLOCK);
	assert_int_equal(g2.calls, 0);

	/* retiring an idle resolver frees it from the loop */
	r = new_resolver(f, false, 0);
	resolver_retire(r);
	event_base_loop(f->base, EVLOOP_NONBLOCK);
}

static void
test_bad_config(void **state)
{
	struct fix *f = *state;
	const char *bad[] = { "dns.example", "1.2.3.4:0", "1.2.3.4:99999", "[::1", "01.2.3.4",
	    "[::1]x", "" };
	char err[256];

	for (size_t i = 0; i < EGRESS_NELEM(bad); i++) {
		const char *servers[] = { bad[i] };
		struct resolver_config cfg = { .servers = servers, .nservers = 1 };

		assert_null(resolver_new(f->base, &cfg, err, sizeof(err)));
		assert_non_null(strstr(err, "servers[0]"));
	}
	{
		const char *servers[] = { "[::1]:5353", "127.0.0.1", "::1" };
		struct resolver_config cfg = { .servers = servers, .nservers = 3 };
		struct resolver *r = resolver_new(f->base, &cfg, err, sizeof(err));

		assert_non_null(r);
		resolver_free(r);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_aaaa_order_and_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prefer_ipv4, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v4only_and_dedup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cname_chain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failures, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_answers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_system_resolv_conf, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ttl0_not_cached, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ttl_cap_expires, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_literals_never_sent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_single_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_total_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_with_outstanding, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retire_drains, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_config, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
