/* test_grants.c - live grant registry (egressd/grants): ids, refcounts, revoke kills every
 * attached connection, expiry, reload-style retire keeps connections, listener ownership. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <event2/event.h>
#include <jansson.h>

#include "egressd/grants.h"
#include "egressd/listener.h"

static struct grant *
mkgrant(const char *principal, unsigned lifetime_s)
{
	char err[256];
	json_t *j = json_pack("{s:s, s:[s], s:{s:i}}", "principal", principal, "allow",
	    "https://api.example.com", "limits", "lifetime_s", (int)lifetime_s);
	struct grant *g = grant_from_json(j, err, sizeof(err));

	json_decref(j);
	if (g == NULL)
		fail_msg("grant_from_json: %s", err);
	return g;
}

struct conn {
	struct grant_conn gc;       /* first */
	struct lgrant *lg;
	int killed;
	enum reason why;
};

static void
conn_kill(struct grant_conn *gc, enum reason why)
{
	struct conn *c = (struct conn *)gc;

	c->killed++;
	c->why = why;
	lgrant_detach(c->lg, gc);
}

static void
conn_open(struct conn *c, struct lgrant *lg)
{
	memset(c, 0, sizeof(*c));
	c->lg = lg;
	c->gc.kill = conn_kill;
	lgrant_ref(lg);
	lgrant_attach(lg, &c->gc);
}

static void
test_ids_and_find(void **st)
{
	struct event_base *base = event_base_new();
	struct grants *r = grants_new(base);
	struct lgrant *a = grants_add(r, mkgrant("run-a", 60), true, NULL, "eth0");
	struct lgrant *b = grants_add(r, mkgrant("run-b", 60), true, NULL, "eth1");

	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(strlen(a->id), GRANT_ID_HEX);
	assert_string_not_equal(a->id, b->id);
	for (size_t i = 0; i < GRANT_ID_HEX; i++)
		assert_non_null(strchr("0123456789abcdef", a->id[i]));
	assert_ptr_equal(grants_find(r, a->id), a);
	assert_ptr_equal(grants_find(r, b->id), b);
	assert_null(grants_find(r, "00000000000000000000000000000000"));
	assert_int_equal(grants_count(r), 2);
	assert_string_equal(a->ifname, "eth0");
	assert_true(a->expires >= a->created + 60);
	grants_free(r);
	event_base_free(base);
}

static void
test_revoke_kills_connections(void **st)
{
	struct event_base *base = event_base_new();
	struct grants *r = grants_new(base);
	struct lgrant *a = grants_add(r, mkgrant("run-a", 60), true, NULL, "eth0");
	struct lgrant *b = grants_add(r, mkgrant("run-b", 60), true, NULL, "eth1");
	struct conn c[3], other;

	for (int i = 0; i < 3; i++)
		conn_open(&c[i], a);
	conn_open(&other, b);
	grants_retire(r, a, REASON_GRANT_REVOKED, true);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(c[i].killed, 1);
		assert_int_equal(c[i].why, REASON_CLOSE_REVOKED);
	}
	/* the other principal is untouched (no bleed) */
	assert_int_equal(other.killed, 0);
	assert_null(grants_find(r, a->id));
	assert_int_equal(grants_count(r), 1);
	/* connections keep the (dead, immutable) grant until they let go */
	assert_int_equal(a->dead, REASON_GRANT_REVOKED);
	assert_string_equal(a->g->principal, "run-a");
	for (int i = 0; i < 3; i++)
		lgrant_unref(a);
	lgrant_detach(b, &other.gc);
	lgrant_unref(b);
	grants_free(r);
	event_base_free(base);
}

static void
test_retire_without_kill(void **st)
{
	struct event_base *base = event_base_new();
	struct grants *r = grants_new(base);
	struct lgrant *a = grants_add(r, mkgrant("static", 0), false, "static", NULL);
	struct conn c;

	assert_int_equal(a->expires, 0);
	conn_open(&c, a);
	grants_retire(r, a, REASON_NO_GRANT, false);   /* a reload replaced the static grant */
	assert_int_equal(c.killed, 0);
	assert_int_equal(a->dead, REASON_NO_GRANT);
	lgrant_detach(a, &c.gc);
	lgrant_unref(a);
	grants_free(r);
	event_base_free(base);
}

/* A static grant a reload replaced keeps its connections, but the drain's end and the
 * shutdown (grants_kill_all) still reach them (issue 19: otherwise they outlive the drain
 * and never write their close records); the connection that lets go last frees it. */
static void
test_kill_all_reaches_retired(void **st)
{
	struct event_base *base = event_base_new();
	struct grants *r = grants_new(base);
	struct lgrant *a = grants_add(r, mkgrant("static-a", 0), false, "a", NULL);
	struct lgrant *b = grants_add(r, mkgrant("static-b", 0), false, "b", NULL);
	struct lgrant *e = grants_add(r, mkgrant("static-e", 0), false, "e", NULL);
	struct lgrant *live = grants_add(r, mkgrant("live", 0), false, "live", NULL);
	struct conn ca[2], cb, cl;

	conn_open(&ca[0], a);
	conn_open(&ca[1], a);
	conn_open(&cb, b);
	conn_open(&cl, live);
	grants_retire(r, a, REASON_NO_GRANT, false);
	grants_retire(r, b, REASON_NO_GRANT, false);
	grants_retire(r, e, REASON_NO_GRANT, false);   /* nobody holds it: freed at once */
	assert_int_equal(grants_count(r), 1);
	assert_int_equal(ca[0].killed + ca[1].killed + cb.killed, 0);
	/* the connection of b ends by itself first: b goes, a stays reachable */
	lgrant_detach(b, &cb.gc);
	lgrant_unref(b);
	grants_kill_all(r, REASON_CLOSE_SHUTDOWN);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(ca[i].killed, 1);
		assert_int_equal(ca[i].why, REASON_CLOSE_SHUTDOWN);
	}
	assert_int_equal(cl.killed, 1);
	assert_int_equal(cb.killed, 0);
	/* a second kill_all finds nothing left to kill */
	grants_kill_all(r, REASON_CLOSE_SHUTDOWN);
	assert_int_equal(ca[0].killed + ca[1].killed + cl.killed, 3);
	lgrant_unref(a);
	/* a retired grant still held when the registry goes outlives it (no use after free) */
	grants_free(r);
	lgrant_unref(a);
	lgrant_unref(live);
	event_base_free(base);
}

static void
test_expiry(void **st)
{
	struct event_base *base = event_base_new();
	struct grants *r = grants_new(base);
	struct lgrant *a = grants_add(r, mkgrant("run-a", 1), true, NULL, "eth0");
	struct conn c;
	struct timeval tv = { 1, 500 * 1000 };

	conn_open(&c, a);
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	assert_int_equal(c.killed, 1);
	assert_int_equal(c.why, REASON_CLOSE_REVOKED);
	assert_int_equal(a->dead, REASON_GRANT_EXPIRED);
	assert_int_equal(grants_count(r), 0);
	lgrant_unref(a);
	grants_free(r);
	event_base_free(base);
}

static void
noop_accept(int fd, const struct sockaddr *peer, socklen_t peerlen, void *arg)
{
}

static void
test_listeners_and_self(void **st)
{
	struct event_base *base = event_base_new();
	struct grants *r = grants_new(base);
	struct lgrant *a = grants_add(r, mkgrant("run-a", 60), true, NULL, NULL);
	struct sockaddr_in sin;
	char err[256];
	struct addr self[4];
	struct listener *l;
	uint16_t port;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(0x7f000001);
	l = listener_new(base, (struct sockaddr *)&sin, sizeof(sin), NULL, noop_accept, NULL, err,
	    sizeof(err));
	assert_non_null(l);
	assert_int_equal(lgrant_add_listener(a, l), 0);
	assert_ptr_equal(listener_get_arg(l), a);          /* principal = the listener's grant */
	assert_int_equal(grants_self_addrs(r, self, 4), 1);
	listener_addr(l, &self[1], &port);
	assert_true(port != 0);
	assert_true(addr_equal(&self[0], &self[1]));
	/* binding to a device that does not exist fails before bind */
	l = listener_new(base, (struct sockaddr *)&sin, sizeof(sin), "nosuchdev0", noop_accept,
	    NULL, err, sizeof(err));
	assert_null(l);
	assert_non_null(strstr(err, "SO_BINDTODEVICE"));
	grants_retire(r, a, REASON_GRANT_REVOKED, true);   /* closes the listener */
	assert_int_equal(grants_self_addrs(r, self, 4), 0);
	grants_free(r);
	event_base_free(base);
}

/* A static grant's id is its content: equal grants, equal ids (across reloads and
 * restarts); any change, another id; a dynamic grant's id is random. */
static void
test_static_ids_stable(void **st)
{
	struct event_base *base = event_base_new();
	struct grants *r = grants_new(base);
	char a[GRANT_ID_HEX + 1], b[GRANT_ID_HEX + 1], c[GRANT_ID_HEX + 1];
	struct grant *g1 = mkgrant("svc", 0), *g2 = mkgrant("svc", 0), *g3 = mkgrant("svc", 60);
	struct grant *g4 = mkgrant("svc2", 0);
	struct lgrant *l1, *l2, *d1, *d2;

	(void)st;
	assert_int_equal(grant_static_id(g1, a), 0);
	assert_int_equal(grant_static_id(g2, b), 0);
	assert_string_equal(a, b);
	assert_int_equal(strlen(a), GRANT_ID_HEX);
	assert_int_equal(grant_static_id(g3, c), 0);
	assert_string_not_equal(a, c);               /* lifetime changed */
	assert_int_equal(grant_static_id(g4, c), 0);
	assert_string_not_equal(a, c);               /* principal changed */
	grant_free(g3);
	grant_free(g4);
	l1 = grants_add(r, g1, false, "svc", NULL);
	assert_string_equal(l1->id, a);
	grants_retire(r, l1, REASON_NO_GRANT, false);        /* a reload replaced it */
	l2 = grants_add_static(r, g2, "svc", 1000);
	assert_string_equal(l2->id, a);
	assert_int_equal(l2->created, 1000);
	d1 = grants_add(r, mkgrant("svc", 60), true, NULL, "eth0");
	d2 = grants_add(r, mkgrant("svc", 60), true, NULL, "eth1");
	assert_string_not_equal(d1->id, d2->id);
	assert_string_not_equal(d1->id, a);
	grants_free(r);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ids_and_find),
		cmocka_unit_test(test_revoke_kills_connections),
		cmocka_unit_test(test_retire_without_kill),
		cmocka_unit_test(test_kill_all_reaches_retired),
		cmocka_unit_test(test_expiry),
		cmocka_unit_test(test_listeners_and_self),
		cmocka_unit_test(test_static_ids_stable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
