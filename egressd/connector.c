/* connector.c - Happy Eyeballs over an ordered address list (see connector.h). */
#include "egressd/connector.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/limits.h"
#include "common/util.h"

struct attempt {
	struct connector *at_c;
	int at_fd;
	size_t at_idx;
	struct event *at_ev;            /* NULL: slot free */
};

struct connector {
	struct event_base *cn_base;
	struct addr cn_addrs[EGRESS_DNS_ADDRS_MAX];
	size_t cn_n, cn_next;
	uint16_t cn_port;
	struct connector_opts cn_o;
	struct attempt cn_a[CONNECTOR_INFLIGHT_MAX];
	size_t cn_inflight;
	struct event *cn_stagger;       /* the next attempt's timer, also the deferred end */
	bool cn_ending;
	struct connector_result cn_res;
	connector_done_cb cn_done;
	connector_fail_cb cn_failed;
	void *cn_arg;
};

static void start_more(struct connector *c);

static void
close_attempts(struct connector *c)
{
	for (size_t k = 0; k < CONNECTOR_INFLIGHT_MAX; k++) {
		if (c->cn_a[k].at_ev == NULL)
			continue;
		event_free(c->cn_a[k].at_ev);
		c->cn_a[k].at_ev = NULL;
		close(c->cn_a[k].at_fd);
		c->cn_a[k].at_fd = -1;
	}
	c->cn_inflight = 0;
}

void
connector_free(struct connector *c)
{
	if (c == NULL)
		return;
	close_attempts(c);
	/* cancelled between the win and the report (done never ran): the socket is ours */
	if (c->cn_res.fd >= 0)
		close(c->cn_res.fd);
	if (c->cn_stagger != NULL)
		event_free(c->cn_stagger);
	free(c);
}

/* Report the end from the loop (the stagger timer's callback, activated: later in this
 * same turn, without the extra epoll_wait(..., 0) a zero timeout costs), then free. */
static void
finish_later(struct connector *c)
{
	c->cn_ending = true;
	close_attempts(c);
	evtimer_del(c->cn_stagger);
	event_active(c->cn_stagger, EV_TIMEOUT, 0);
}

static void
on_stagger(evutil_socket_t fd, short what, void *arg)
{
	struct connector *c = arg;

	(void)fd;
	(void)what;
	if (c->cn_ending) {
		struct connector_result r = c->cn_res;
		connector_done_cb done = c->cn_done;
		void *darg = c->cn_arg;

		c->cn_res.fd = -1;      /* the caller's now */
		connector_free(c);
		done(&r, darg);
		return;
	}
	start_more(c);
}

static void
on_attempt(evutil_socket_t fd, short what, void *arg)
{
	struct attempt *a = arg;
	struct connector *c = a->at_c;
	int err = 0;
	socklen_t el = sizeof(err);

	(void)fd;
	event_free(a->at_ev);
	a->at_ev = NULL;
	c->cn_inflight--;
	if (what & EV_TIMEOUT) {
		err = ETIMEDOUT;
		c->cn_res.timed_out = true;
	} else if (getsockopt(a->at_fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) {
		err = errno;
	}
	if (err == 0) {
		/* The winner: exactly this address. */
		c->cn_res.fd = a->at_fd;
		c->cn_res.idx = a->at_idx;
		a->at_fd = -1;
		finish_later(c);
		return;
	}
	c->cn_res.err = err;
	close(a->at_fd);
	a->at_fd = -1;
	if (c->cn_failed != NULL)
		c->cn_failed(a->at_idx, err, c->cn_arg);
	if (c->cn_next < c->cn_n && (c->cn_o.deadline_us == 0 || mono_usec() < c->cn_o.deadline_us)) {
		start_more(c);                  /* a failure moves on at once */
		return;
	}
	if (c->cn_inflight == 0)
		finish_later(c);
}

/*
 * Where a connect(2) that answered EINPROGRESS stands: 0 once the handshake has completed,
 * EINPROGRESS while it is in flight, or the error that ended it. To a peer on this host
 * (loopback, a local upstream proxy such as cntlm or px) the SYN-ACK is processed before
 * connect(2) returns, so the socket is often connected already; asking costs one
 * system call, and saves registering the socket for EPOLLOUT, the loop turn that reports
 * it and the delete (two epoll_ctl; docs/performance.md). Linux's second connect(2) on a
 * socket in progress answers 0 when established, EALREADY while in SYN-SENT, and the
 * socket's error (ECONNREFUSED, ...) when the attempt failed.
 */
static int
connect_probe(int fd, const struct sockaddr *sa, socklen_t sl)
{
	if (connect(fd, sa, sl) == 0 || errno == EISCONN)
		return 0;
	if (errno == EALREADY || errno == EINPROGRESS)
		return EINPROGRESS;
	return errno;
}

/* Start the next attempt (one), then arm the stagger timer for the one after. */
static void
start_more(struct connector *c)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	uint64_t now, left = 0;
	int fd, one = 1;

	while (c->cn_next < c->cn_n && c->cn_inflight < c->cn_o.max_inflight) {
		now = mono_usec();
		if (c->cn_o.deadline_us != 0 && now >= c->cn_o.deadline_us) {
			c->cn_res.timed_out = true;
			break;
		}
		size_t idx = c->cn_next++;
		sl = addr_to_sockaddr(&c->cn_addrs[idx], c->cn_port, &ss);
		if (sl == 0)
			continue;
		fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			c->cn_res.err = errno;
			c->cn_res.local_error = true;
			break;
		}
		/* A relay forwards what it reads at once: without TCP_NODELAY the first small
		 * writes of a tunnel (the TLS ClientHello, the ServerHello's answer) wait for a
		 * delayed ACK (~40 ms per CONNECT, docs/performance.md). Best effort: a socket
		 * that refuses it still works. */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		int cerr = connect(fd, (struct sockaddr *)&ss, sl) == 0 ? 0 : errno;
		if (cerr == EINPROGRESS)
			cerr = connect_probe(fd, (struct sockaddr *)&ss, sl);
		if (cerr == 0) {
			/* Connected already: the winner, without an event (see connect_probe). */
			c->cn_res.fd = fd;
			c->cn_res.idx = idx;
			finish_later(c);
			return;
		}
		if (cerr != EINPROGRESS) {
			c->cn_res.err = cerr;
			close(fd);
			if (c->cn_failed != NULL)
				c->cn_failed(idx, c->cn_res.err, c->cn_arg);
			continue;
		}
		size_t k = 0;
		while (c->cn_a[k].at_ev != NULL)
			k++;                    /* inflight < max: a slot is free */
		c->cn_a[k].at_c = c;
		c->cn_a[k].at_fd = fd;
		c->cn_a[k].at_idx = idx;
		c->cn_a[k].at_ev = event_new(c->cn_base, fd, EV_WRITE, on_attempt, &c->cn_a[k]);
		if (c->cn_a[k].at_ev == NULL) {
			close(fd);
			c->cn_a[k].at_fd = -1;
			c->cn_res.err = ENOMEM;
			c->cn_res.local_error = true;
			break;
		}
		if (c->cn_o.deadline_us != 0) {
			left = c->cn_o.deadline_us - now;
			struct timeval tv = { (time_t)(left / 1000000),
			    (suseconds_t)(left % 1000000) };
			event_add(c->cn_a[k].at_ev, &tv);
		} else {
			event_add(c->cn_a[k].at_ev, NULL);
		}
		c->cn_inflight++;
		if (c->cn_o.stagger_us != 0 && c->cn_next < c->cn_n && c->cn_inflight < c->cn_o.max_inflight) {
			uint64_t d = c->cn_o.stagger_us;
			if (c->cn_o.deadline_us != 0 && left < d)
				d = left;
			struct timeval st = { (time_t)(d / 1000000), (suseconds_t)(d % 1000000) };
			evtimer_add(c->cn_stagger, &st);
		}
		return;
	}
	if (c->cn_inflight == 0)
		finish_later(c);
}

struct connector *
connector_start(struct event_base *base, const struct addr *addrs, size_t n, uint16_t port,
    const struct connector_opts *o, connector_done_cb done, connector_fail_cb failed,
    void *arg)
{
	struct connector *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->cn_base = base;
	c->cn_n = n < EGRESS_DNS_ADDRS_MAX ? n : EGRESS_DNS_ADDRS_MAX;
	if (c->cn_n > 0)
		memcpy(c->cn_addrs, addrs, c->cn_n * sizeof(addrs[0]));
	c->cn_port = port;
	c->cn_o = *o;
	if (c->cn_o.max_inflight == 0)
		c->cn_o.max_inflight = 1;
	if (c->cn_o.max_inflight > CONNECTOR_INFLIGHT_MAX)
		c->cn_o.max_inflight = CONNECTOR_INFLIGHT_MAX;
	for (size_t k = 0; k < CONNECTOR_INFLIGHT_MAX; k++)
		c->cn_a[k].at_fd = -1;
	c->cn_res.fd = -1;
	c->cn_done = done;
	c->cn_failed = failed;
	c->cn_arg = arg;
	c->cn_stagger = evtimer_new(base, on_stagger, c);
	if (c->cn_stagger == NULL) {
		free(c);
		return NULL;
	}
	start_more(c);
	return c;
}
