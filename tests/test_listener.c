/*
 * test_listener - egressd/listener: one readiness of the listening socket accepts the
 * connections waiting, up to the burst bound, and the rest in the next turn; one waiting
 * connection is one accept; an accept callback that frees or pauses its listener stops
 * the burst there (no use after free: the suite runs under AddressSanitizer); accepted
 * sockets are non-blocking and close-on-exec.
 * Loopback only: a listening socket on 127.0.0.1 and client sockets that connect to it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>

#include "egressd/listener.h"

#define NCLIENTS 40     /* more than two bursts */

struct acc {
	struct listener *l;
	size_t n;               /* connections handed to the callback */
	size_t free_at;         /* free the listener at this count (0: never) */
	size_t pause_at;        /* pause it at this count (0: never) */
	int fds[NCLIENTS];
	bool flags_ok;
};

static void
on_accept(int fd, const struct sockaddr *peer, socklen_t peerlen, void *arg)
{
	struct acc *a = arg;
	int fl = fcntl(fd, F_GETFL), fdfl = fcntl(fd, F_GETFD);

	(void)peer;
	(void)peerlen;
	if (fl < 0 || !(fl & O_NONBLOCK) || fdfl < 0 || !(fdfl & FD_CLOEXEC))
		a->flags_ok = false;
	assert_true(a->n < NCLIENTS);
	a->fds[a->n++] = fd;
	if (a->free_at != 0 && a->n == a->free_at) {
		listener_free(a->l);
		a->l = NULL;
	}
	if (a->pause_at != 0 && a->n == a->pause_at)
		listener_pause(a->l);
}

struct fixture {
	struct event_base *base;
	struct acc acc;
	int cfd[NCLIENTS];
	size_t ncli;
	struct sockaddr_in sin;
};

static int
setup(void **st)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char err[256];
	struct addr a;
	uint16_t port;

	assert_non_null(f);
	f->base = event_base_new();
	assert_non_null(f->base);
	f->acc.flags_ok = true;
	f->sin.sin_family = AF_INET;
	f->sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->acc.l = listener_new(f->base, (struct sockaddr *)&f->sin, sizeof(f->sin), NULL,
	    on_accept, &f->acc, err, sizeof(err));
	assert_non_null(f->acc.l);
	listener_addr(f->acc.l, &a, &port);
	f->sin.sin_port = htons(port);
	*st = f;
	return 0;
}

static int
teardown(void **st)
{
	struct fixture *f = *st;

	for (size_t i = 0; i < f->acc.n; i++)
		close(f->acc.fds[i]);
	for (size_t i = 0; i < f->ncli; i++)
		close(f->cfd[i]);
	listener_free(f->acc.l);
	event_base_free(f->base);
	free(f);
	return 0;
}

/* n clients connect (blocking: on loopback the handshake is done when connect returns,
 * so each waits in the accept queue) */
static void
clients(struct fixture *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		assert_true(fd >= 0);
		assert_int_equal(connect(fd, (struct sockaddr *)&f->sin, sizeof(f->sin)), 0);
		f->cfd[f->ncli++] = fd;
	}
}

/* One turn of the loop, not waiting. */
static void
turn(struct fixture *f)
{
	assert_int_not_equal(event_base_loop(f->base, EVLOOP_ONCE | EVLOOP_NONBLOCK), -1);
}

static void
test_burst_per_readiness(void **st)
{
	struct fixture *f = *st;
	size_t first;

	clients(f, NCLIENTS);
	turn(f);
	first = f->acc.n;
	/* one readiness takes several (the bound is the listener's, at least 2 and less
	 * than the whole queue here) */
	assert_true(first >= 2);
	assert_true(first < NCLIENTS);
	for (int i = 0; i < 10 && f->acc.n < NCLIENTS; i++)
		turn(f);
	assert_int_equal(f->acc.n, NCLIENTS);
	assert_true(f->acc.flags_ok);
	turn(f);                        /* the queue is empty: nothing more */
	assert_int_equal(f->acc.n, NCLIENTS);
}

static void
test_one_waiting_is_one_accept(void **st)
{
	struct fixture *f = *st;

	clients(f, 1);
	turn(f);
	assert_int_equal(f->acc.n, 1);
	turn(f);
	assert_int_equal(f->acc.n, 1);
	clients(f, 1);
	turn(f);
	assert_int_equal(f->acc.n, 2);
	assert_true(f->acc.flags_ok);
}

static void
test_freed_in_callback_stops(void **st)
{
	struct fixture *f = *st;

	f->acc.free_at = 2;
	clients(f, 8);
	turn(f);
	assert_int_equal(f->acc.n, 2);       /* nothing after the free */
	assert_null(f->acc.l);
	turn(f);                             /* its event is gone with it */
	assert_int_equal(f->acc.n, 2);
}

static void
test_paused_in_callback_stops(void **st)
{
	struct fixture *f = *st;

	f->acc.pause_at = 3;
	clients(f, 8);
	turn(f);
	assert_int_equal(f->acc.n, 3);
	turn(f);
	turn(f);
	assert_int_equal(f->acc.n, 3);       /* paused for good */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_burst_per_readiness, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_waiting_is_one_accept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_freed_in_callback_stops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_paused_in_callback_stops, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
