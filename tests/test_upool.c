/*
 * test_upool - idle upstream connections (egressd/upool): reused only by the same grant
 * for the same address and port, never one the peer closed, bounded per grant, dropped
 * when the grant is killed (revoke, expiry, shutdown).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>

#include "egressd/grants.h"
#include "egressd/upool.h"

static struct addr
A(const char *s)
{
	struct addr a;

	if (addr_parse_literal(s, strlen(s), &a) != ADDR_LIT_V4)
		fail_msg("addr_parse_literal(%s)", s);
	return a;
}

/* A connected pair: [0] is parked, [1] plays the origin. */
static void
pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static void
lg_init(struct lgrant *lg, const char *id)
{
	memset(lg, 0, sizeof(*lg));
	lg->refs = 1;                   /* the test's own: never freed by the pool */
	snprintf(lg->id, sizeof(lg->id), "%s", id);
	lg->dead = REASON_ALLOWED;
}

static void
test_same_key_only(void **state)
{
	struct event_base *b = event_base_new();
	struct upool *p = upool_new(b, 0);
	struct lgrant g1, g2;
	struct addr a = A("203.0.113.5"), a2 = A("203.0.113.6");
	int sv[2], peer;

	(void)state;
	lg_init(&g1, "aaaa");
	lg_init(&g2, "bbbb");
	pair(sv);
	peer = sv[1];
	upool_put(p, &g1, &a, 80, sv[0]);
	assert_int_equal(upool_count(p), 1);
	assert_int_equal(g1.refs, 2);
	/* negative twins: another grant, another address, another port */
	assert_int_equal(upool_take(p, &g2, &a, 80), -1);
	assert_int_equal(upool_take(p, &g1, &a2, 80), -1);
	assert_int_equal(upool_take(p, &g1, &a, 443), -1);
	assert_int_equal(upool_count(p), 1);
	/* the same grant, address and port */
	assert_int_equal(upool_take(p, &g1, &a, 80), sv[0]);
	assert_int_equal(upool_count(p), 0);
	assert_int_equal(g1.refs, 1);
	assert_null(g1.conns);
	close(sv[0]);
	close(peer);
	upool_free(p);
	event_base_free(b);
}

static void
test_peer_closed_not_reused(void **state)
{
	struct event_base *b = event_base_new();
	struct upool *p = upool_new(b, 0);
	struct lgrant g;
	struct addr a = A("203.0.113.5");
	int sv[2], sv2[2];

	(void)state;
	lg_init(&g, "aaaa");
	pair(sv);
	pair(sv2);
	upool_put(p, &g, &a, 80, sv[0]);
	close(sv[1]);                           /* EOF while parked */
	upool_put(p, &g, &a, 80, sv2[0]);
	assert_int_equal(write(sv2[1], "x", 1), 1); /* stray bytes while parked */
	assert_int_equal(upool_take(p, &g, &a, 80), -1);
	assert_int_equal(upool_count(p), 0);
	assert_int_equal(g.refs, 1);
	close(sv2[1]);
	upool_free(p);
	event_base_free(b);
}

static void
test_bounded_and_killed(void **state)
{
	struct event_base *b = event_base_new();
	struct upool *p = upool_new(b, 0);
	struct lgrant g, g2;
	struct addr a = A("203.0.113.5");
	int peers[EGRESS_UPOOL_PER_GRANT + 2], sv[2];

	(void)state;
	lg_init(&g, "aaaa");
	lg_init(&g2, "bbbb");
	for (size_t i = 0; i < EGRESS_UPOOL_PER_GRANT + 2; i++) {
		pair(sv);
		peers[i] = sv[1];
		upool_put(p, &g, &a, 80, sv[0]);
	}
	assert_int_equal(upool_count(p), EGRESS_UPOOL_PER_GRANT);
	pair(sv);
	upool_put(p, &g2, &a, 80, sv[0]);
	close(sv[1]);
	assert_int_equal(upool_count(p), EGRESS_UPOOL_PER_GRANT + 1);
	/* revoke: the grant's connections are killed; the other grant's stays */
	while (g.conns != NULL)
		g.conns->kill(g.conns, REASON_CLOSE_REVOKED);
	assert_int_equal(upool_count(p), 1);
	assert_int_equal(g.refs, 1);
	/* a dead grant parks nothing */
	pair(sv);
	g.dead = REASON_GRANT_REVOKED;
	upool_put(p, &g, &a, 80, sv[0]);
	close(sv[1]);
	assert_int_equal(upool_count(p), 1);
	for (size_t i = 0; i < EGRESS_UPOOL_PER_GRANT + 2; i++)
		close(peers[i]);
	upool_free(p);
	assert_int_equal(g2.refs, 1);
	event_base_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_key_only),
		cmocka_unit_test(test_peer_closed_not_reused),
		cmocka_unit_test(test_bounded_and_killed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
