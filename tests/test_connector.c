/*
 * test_connector - egressd/connector: the first address that answers wins, in order;
 * a refused address moves on at once; none answering is a failure with the last error;
 * the deadline ends it; the callback never runs inside connector_start; a cancel closes
 * every socket, a winner not yet reported included; a handshake
 * still in flight when connect(2) returns is waited for (a peer on this host usually
 * answers inside connect(2), which the connector takes without an event).
 * Loopback only: a listening socket, and ports nothing listens on.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>

#include "common/util.h"
#include "egressd/connector.h"

struct outcome {
	bool called;
	struct connector_result r;
	size_t nfailed;
	struct event_base *base;
};

static void
done(const struct connector_result *r, void *arg)
{
	struct outcome *o = arg;

	assert_false(o->called);        /* exactly once */
	o->called = true;
	o->r = *r;
	event_base_loopbreak(o->base);
}

static void
failed(size_t idx, int err, void *arg)
{
	(void)idx;
	(void)err;
	((struct outcome *)arg)->nfailed++;
}

static struct addr
loopback(void)
{
	struct addr a;

	assert_int_equal(addr_parse_literal("127.0.0.1", 9, &a), ADDR_LIT_V4);
	return a;
}

/* A listening socket on 127.0.0.1; its port in *port. */
static int
listener(uint16_t *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

/* A port nothing listens on: bound, then closed. */
static uint16_t
dead_port(void)
{
	uint16_t p;
	int fd = listener(&p);

	close(fd);
	return p;
}

static void
run(struct outcome *o)
{
	struct timeval tv = { 5, 0 };

	event_base_loopexit(o->base, &tv);  /* bounded: the test fails rather than hangs */
	event_base_dispatch(o->base);
	assert_true(o->called);
}

static void
test_first_answer_wins(void **st)
{
	struct outcome o = { .base = event_base_new() };
	uint16_t port;
	int lfd = listener(&port);
	struct addr a[3] = { loopback(), loopback(), loopback() };
	struct connector_opts co = { .max_inflight = 4, .stagger_us = 250000,
		.deadline_us = mono_usec() + 5000000 };
	struct connector *c;

	(void)st;
	c = connector_start(o.base, a, 3, port, &co, done, failed, &o);
	assert_non_null(c);
	assert_false(o.called);         /* never from inside connector_start */
	run(&o);
	assert_true(o.r.fd >= 0);
	assert_int_equal(o.r.idx, 0);   /* in order: the first address answered */
	close(o.r.fd);
	close(lfd);
	event_base_free(o.base);
}

/* The connector's attempt cannot complete inside connect(2): the listener's accept queue
 * is full, so its SYN is dropped and the socket stays in SYN-SENT (the probe answers
 * EALREADY) until the queue drains and the SYN is sent again (~1 s). The attempt must wait
 * on its event and then win. */
static void
test_handshake_in_flight_waits(void **st)
{
	struct outcome o = { .base = event_base_new() };
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	socklen_t sl = sizeof(sin);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), fill[8];
	int nfill = 0;
	struct addr a[1] = { loopback() };
	struct connector_opts co = { .max_inflight = 1, .deadline_us = mono_usec() + 5000000 };
	struct connector *c;

	(void)st;
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	/* backlog 1, not 0: with 0 the SYN queue counts as full and every SYN is dropped
	 * unless SYN cookies are on */
	assert_int_equal(listen(lfd, 1), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &sl), 0);
	/* Fill the queue: connect until one stays in flight (bounded). */
	for (;;) {
		assert_true(nfill < 8);
		fill[nfill] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		assert_true(fill[nfill] >= 0);
		int rc = connect(fill[nfill], (struct sockaddr *)&sin, sizeof(sin));
		assert_true(rc == 0 || errno == EINPROGRESS);
		rc = connect(fill[nfill], (struct sockaddr *)&sin, sizeof(sin));
		int e = rc == 0 ? 0 : errno;
		if (e == EALREADY) {
			/* in flight: dropped, or only not yet processed (softirq deferred under
			 * load)? A SYN-ACK would be there well within 100 ms on loopback. */
			usleep(100 * 1000);
			rc = connect(fill[nfill], (struct sockaddr *)&sin, sizeof(sin));
			e = rc == 0 ? 0 : errno;
		}
		nfill++;
		if (e == EALREADY)
			break;
		assert_int_equal(e, 0);
	}
	c = connector_start(o.base, a, 1, ntohs(sin.sin_port), &co, done, failed, &o);
	assert_non_null(c);
	assert_false(o.called);
	/* One pass of the loop: the attempt is still in flight, nothing is decided. */
	event_base_loop(o.base, EVLOOP_NONBLOCK);
	assert_false(o.called);
	/* Drain the queue (and keep draining while the loop runs): the retried SYNs get in. */
	for (int k = 0; k < nfill; k++)
		close(fill[k]);
	for (int k = 0; k < 3; k++) {
		int afd = accept(lfd, NULL, NULL);     /* lfd is non-blocking */
		if (afd >= 0)
			close(afd);
	}
	run(&o);
	assert_true(o.r.fd >= 0);
	assert_int_equal(o.r.idx, 0);
	assert_int_equal(o.nfailed, 0);
	close(o.r.fd);
	close(lfd);
	event_base_free(o.base);
}

static void
test_refused_moves_on(void **st)
{
	struct outcome o = { .base = event_base_new() };
	uint16_t port;
	int lfd = listener(&port);
	struct addr a[2] = { loopback(), loopback() };
	struct connector_opts co = { .max_inflight = 1 };   /* one at a time, no deadline */
	struct connector *c;

	(void)st;
	/* the same address twice, but the listener closes before the first attempt runs:
	 * both are refused, and each refusal is reported */
	close(lfd);
	c = connector_start(o.base, a, 2, port, &co, done, failed, &o);
	assert_non_null(c);
	run(&o);
	assert_int_equal(o.r.fd, -1);
	assert_int_equal(o.r.err, ECONNREFUSED);
	assert_false(o.r.timed_out);
	assert_false(o.r.local_error);
	assert_int_equal(o.nfailed, 2);
	event_base_free(o.base);
}

static void
test_empty_list_fails(void **st)
{
	struct outcome o = { .base = event_base_new() };
	struct connector_opts co = { .max_inflight = 1 };

	(void)st;
	assert_non_null(connector_start(o.base, NULL, 0, dead_port(), &co, done, NULL, &o));
	run(&o);
	assert_int_equal(o.r.fd, -1);
	assert_int_equal(o.nfailed, 0);
	event_base_free(o.base);
}

static void
test_deadline_passed(void **st)
{
	struct outcome o = { .base = event_base_new() };
	struct addr a[1] = { loopback() };
	struct connector_opts co = { .max_inflight = 1, .deadline_us = 1 };  /* long gone */

	(void)st;
	assert_non_null(connector_start(o.base, a, 1, dead_port(), &co, done, NULL, &o));
	run(&o);
	assert_int_equal(o.r.fd, -1);
	assert_true(o.r.timed_out);
	event_base_free(o.base);
}

static void
test_free_cancels(void **st)
{
	struct outcome o = { .base = event_base_new() };
	uint16_t port;
	int lfd = listener(&port);
	struct addr a[1] = { loopback() };
	struct connector_opts co = { .max_inflight = 1 };
	int lowest = dup(0);            /* the number the attempt's socket will take */
	struct connector *c;
	struct timeval tv = { 0, 200000 };

	(void)st;
	assert_true(lowest >= 0);
	close(lowest);
	/* to loopback the attempt has usually won inside connector_start already: the
	 * cancel must close the winner it never reported, too */
	c = connector_start(o.base, a, 1, port, &co, done, NULL, &o);
	assert_non_null(c);
	connector_free(c);
	event_base_loopexit(o.base, &tv);
	event_base_dispatch(o.base);
	assert_false(o.called);         /* cancelled: done never runs */
	int again = dup(0);             /* no socket left behind */
	assert_int_equal(again, lowest);
	close(again);
	close(lfd);
	event_base_free(o.base);
	connector_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_answer_wins),
		cmocka_unit_test(test_handshake_in_flight_waits),
		cmocka_unit_test(test_refused_moves_on),
		cmocka_unit_test(test_empty_list_fails),
		cmocka_unit_test(test_deadline_passed),
		cmocka_unit_test(test_free_cancels),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
