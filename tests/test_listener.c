/*
 * test_listener - egressd/listener: one readiness of the listening socket accepts the
 * connections waiting, up to the burst bound, and the rest in the next turn; one waiting
 * connection is one accept; an accept callback that frees or pauses its listener stops
 * the burst there (no use after free: the suite runs under AddressSanitizer); out of fds,
 * the listener warns once, backs off and accepts again once fds are free; an accept4
 * error of one connection is skipped silently, the same error on every attempt of a burst
 * is warned about; accepted sockets are non-blocking and close-on-exec.
 * Loopback only: a listening socket on 127.0.0.1 and client sockets that connect to it.
 * Every wait is bounded (a timer beside the loop's turn).
 */
#define _GNU_SOURCE 1   /* pipe2 */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>

#include "egressd/listener.h"
#include "stderrcap.h"

#define NCLIENTS 40     /* more than two bursts */

/* accept4 as the listener sees it: linked with --wrap=accept4 (tests/CMakeLists.txt), so
 * a test can make the next fail_n calls fail with fail_errno. */
int __real_accept4(int fd, struct sockaddr *sa, socklen_t *sl, int flags);
int __wrap_accept4(int fd, struct sockaddr *sa, socklen_t *sl, int flags);
static int fail_errno;
static int fail_n;

int
__wrap_accept4(int fd, struct sockaddr *sa, socklen_t *sl, int flags)
{
	if (fail_n > 0) {
		fail_n--;
		errno = fail_errno;
		return -1;
	}
	return __real_accept4(fd, sa, sl, flags);
}

/* stderr (the listener's warnings) captured, made before any fd limit is lowered */
struct capture {
	struct stderrcap c;
	char buf[4096];
};

static void
capture_start(struct capture *c)
{
	stderrcap_start(&c->c);
}

/* Restores stderr; returns how many times needle was written meanwhile. */
static size_t
capture_end(struct capture *c, const char *needle)
{
	stderrcap_end(&c->c, c->buf, sizeof(c->buf));
	return stderrcap_count(c->buf, needle);
}

struct acc {
	struct listener *l;
	size_t n;               /* connections handed to the callback */
	size_t free_at;         /* free the listener at this count (0: never) */
	size_t pause_at;        /* pause it at this count (0: never) */
	int fds[NCLIENTS];
	bool flags_ok;
	bool overflow;
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
	if (a->n >= NCLIENTS) {         /* cannot happen; reported by the test */
		close(fd);
		a->overflow = true;
		return;
	}
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

static void
turn_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* One turn of the loop: waits until something is ready, at most ms; returns how many
 * connections that turn delivered. */
static size_t
turn_wait(struct fixture *f, int ms)
{
	struct event *t = evtimer_new(f->base, turn_timeout, NULL);
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	size_t before = f->acc.n;

	assert_non_null(t);
	assert_int_equal(evtimer_add(t, &tv), 0);
	assert_int_not_equal(event_base_loop(f->base, EVLOOP_ONCE), -1);
	event_free(t);
	assert_false(f->acc.overflow);
	return f->acc.n - before;
}

/* Turns until n connections were delivered or about 3 s passed; the largest turn. */
static size_t
turns_until(struct fixture *f, size_t n)
{
	size_t most = 0;

	for (int i = 0; i < 30 && f->acc.n < n; i++) {
		size_t got = turn_wait(f, 100);

		if (got > most)
			most = got;
	}
	return most;
}

static void
test_burst_per_readiness(void **st)
{
	struct fixture *f = *st;
	size_t most;

	clients(f, NCLIENTS);
	most = turns_until(f, NCLIENTS);
	assert_int_equal(f->acc.n, NCLIENTS);
	/* a readiness took several, and never the whole queue of 40 (the bound is 16) */
	assert_true(most >= 2);
	assert_true(most <= 16);
	assert_true(f->acc.flags_ok);
	assert_int_equal(turn_wait(f, 20), 0);  /* the queue is empty: nothing more */
}

static void
test_single_waiting_delivered_once(void **st)
{
	struct fixture *f = *st;

	clients(f, 1);
	turns_until(f, 1);
	assert_int_equal(f->acc.n, 1);
	assert_int_equal(turn_wait(f, 20), 0);
	clients(f, 1);
	turns_until(f, 2);
	assert_int_equal(f->acc.n, 2);
	assert_true(f->acc.flags_ok);
}

static void
test_freed_in_callback_stops(void **st)
{
	struct fixture *f = *st;

	f->acc.free_at = 2;
	clients(f, 8);
	turns_until(f, 2);
	assert_int_equal(f->acc.n, 2);       /* nothing after the free */
	assert_null(f->acc.l);
	assert_int_equal(turn_wait(f, 20), 0);   /* its event went with it */
	assert_true(f->acc.flags_ok);
}

static void
test_paused_in_callback_stops(void **st)
{
	struct fixture *f = *st;

	f->acc.pause_at = 3;
	clients(f, 8);
	turns_until(f, 3);
	assert_int_equal(f->acc.n, 3);
	assert_int_equal(turn_wait(f, 20), 0);   /* paused for good */
	assert_int_equal(turn_wait(f, 20), 0);
	assert_int_equal(f->acc.n, 3);
	assert_true(f->acc.flags_ok);
}

/* Out of fds (RLIMIT_NOFILE at the lowest free descriptor): accept4 fails with EMFILE,
 * the listener warns once and stops for its back-off (200 ms) instead of coming back every
 * turn, and accepts the waiting connections once descriptors are free again. */
static void
test_out_of_fds_backs_off(void **st)
{
	struct fixture *f = *st;
	struct rlimit old, low;
	struct capture cap;
	int probe;

	clients(f, 3);
	capture_start(&cap);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);   /* the lowest free fd */
	assert_true(probe >= 0);
	close(probe);
	low = old;
	low.rlim_cur = (rlim_t)probe;       /* no new descriptor fits */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	turn_wait(f, 100);
	turn_wait(f, 30);                   /* backing off: the waiting queue does not */
	turn_wait(f, 30);                   /* bring the listener back each turn */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(capture_end(&cap, "accept: "), 1);
	assert_non_null(strstr(cap.buf, "pausing this listener for 200 ms"));
	assert_int_equal(f->acc.n, 0);
	turns_until(f, 3);
	assert_int_equal(f->acc.n, 3);
	assert_true(f->acc.flags_ok);
}

/* accept4 failing for one connection (a network error Linux passes on from it, an aborted
 * one): the burst goes on to the next, silently. */
static void
test_one_connections_error_skipped(void **st)
{
	struct fixture *f = *st;
	struct capture cap;

	clients(f, 3);
	capture_start(&cap);
	fail_errno = EPROTO;
	fail_n = 2;
	turns_until(f, 3);
	fail_n = 0;
	assert_int_equal(capture_end(&cap, "accept: "), 0);
	assert_int_equal(f->acc.n, 3);
}

/* The same error on every attempt of a burst is not one connection's: it is said, and
 * accepting resumes when it stops. */
static void
test_persistent_error_warns(void **st)
{
	struct fixture *f = *st;
	struct capture cap;

	clients(f, 2);
	capture_start(&cap);
	fail_errno = EPERM;
	fail_n = 1000;
	turn_wait(f, 100);
	fail_n = 0;
	assert_int_equal(capture_end(&cap, "times in a row"), 1);
	assert_non_null(strstr(cap.buf, "accept: Operation not permitted (16 times in a row)"));
	assert_int_equal(f->acc.n, 0);
	turns_until(f, 2);
	assert_int_equal(f->acc.n, 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_burst_per_readiness, setup, teardown),
		cmocka_unit_test_setup_teardown(test_single_waiting_delivered_once, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_freed_in_callback_stops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_paused_in_callback_stops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_out_of_fds_backs_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_connections_error_skipped, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_persistent_error_warns, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
