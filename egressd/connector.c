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
	struct connector *c;
	int fd;
	size_t idx;
	struct event *ev;               /* NULL: slot free */
};

struct connector {
	struct event_base *base;
	struct addr addrs[EGRESS_DNS_ADDRS_MAX];
	size_t n, next;
	uint16_t port;
	struct connector_opts o;
	struct attempt a[CONNECTOR_INFLIGHT_MAX];
	size_t inflight;
	struct event *stagger;          /* the next attempt's timer, also the deferred end */
	bool ending;
	struct connector_result res;
	connector_done_cb done;
	connector_fail_cb failed;
	void *arg;
};

static void start_more(struct connector *c);

static void
close_attempts(struct connector *c)
{
	for (size_t k = 0; k < CONNECTOR_INFLIGHT_MAX; k++) {
		if (c->a[k].ev == NULL)
			continue;
		event_free(c->a[k].ev);
		c->a[k].ev = NULL;
		close(c->a[k].fd);
		c->a[k].fd = -1;
	}
	c->inflight = 0;
}

void
connector_free(struct connector *c)
{
	if (c == NULL)
		return;
	close_attempts(c);
	if (c->stagger != NULL)
		event_free(c->stagger);
	free(c);
}

/* Report the end from the loop (the stagger timer's callback, activated: later in this
 * same turn, without the extra epoll_wait(..., 0) a zero timeout costs), then free. */
static void
finish_later(struct connector *c)
{
	c->ending = true;
	close_attempts(c);
	evtimer_del(c->stagger);
	event_active(c->stagger, EV_TIMEOUT, 0);
}

static void
on_stagger(evutil_socket_t fd, short what, void *arg)
{
	struct connector *c = arg;

	(void)fd;
	(void)what;
	if (c->ending) {
		struct connector_result r = c->res;
		connector_done_cb done = c->done;
		void *darg = c->arg;

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
	struct connector *c = a->c;
	int err = 0;
	socklen_t el = sizeof(err);

	(void)fd;
	event_free(a->ev);
	a->ev = NULL;
	c->inflight--;
	if (what & EV_TIMEOUT) {
		err = ETIMEDOUT;
		c->res.timed_out = true;
	} else if (getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) {
		err = errno;
	}
	if (err == 0) {
		/* The winner: exactly this address. */
		c->res.fd = a->fd;
		c->res.idx = a->idx;
		a->fd = -1;
		finish_later(c);
		return;
	}
	c->res.err = err;
	close(a->fd);
	a->fd = -1;
	if (c->failed != NULL)
		c->failed(a->idx, err, c->arg);
	if (c->next < c->n && (c->o.deadline_us == 0 || mono_usec() < c->o.deadline_us)) {
		start_more(c);                  /* a failure moves on at once */
		return;
	}
	if (c->inflight == 0)
		finish_later(c);
}

/* Start the next attempt (one), then arm the stagger timer for the one after. */
static void
start_more(struct connector *c)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	uint64_t now, left = 0;
	int fd, one = 1;

	while (c->next < c->n && c->inflight < c->o.max_inflight) {
		now = mono_usec();
		if (c->o.deadline_us != 0 && now >= c->o.deadline_us) {
			c->res.timed_out = true;
			break;
		}
		size_t idx = c->next++;
		sl = addr_to_sockaddr(&c->addrs[idx], c->port, &ss);
		if (sl == 0)
			continue;
		fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			c->res.err = errno;
			c->res.local_error = true;
			break;
		}
		/* A relay forwards what it reads at once: without TCP_NODELAY the first small
		 * writes of a tunnel (the TLS ClientHello, the ServerHello's answer) wait for a
		 * delayed ACK (~40 ms per CONNECT, docs/performance.md). Best effort: a socket
		 * that refuses it still works. */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (struct sockaddr *)&ss, sl) != 0 && errno != EINPROGRESS) {
			c->res.err = errno;
			close(fd);
			if (c->failed != NULL)
				c->failed(idx, c->res.err, c->arg);
			continue;
		}
		size_t k = 0;
		while (c->a[k].ev != NULL)
			k++;                    /* inflight < max: a slot is free */
		c->a[k].c = c;
		c->a[k].fd = fd;
		c->a[k].idx = idx;
		c->a[k].ev = event_new(c->base, fd, EV_WRITE, on_attempt, &c->a[k]);
		if (c->a[k].ev == NULL) {
			close(fd);
			c->a[k].fd = -1;
			c->res.err = ENOMEM;
			c->res.local_error = true;
			break;
		}
		if (c->o.deadline_us != 0) {
			left = c->o.deadline_us - now;
			struct timeval tv = { (time_t)(left / 1000000),
			    (suseconds_t)(left % 1000000) };
			event_add(c->a[k].ev, &tv);
		} else {
			event_add(c->a[k].ev, NULL);
		}
		c->inflight++;
		if (c->o.stagger_us != 0 && c->next < c->n && c->inflight < c->o.max_inflight) {
			uint64_t d = c->o.stagger_us;
			if (c->o.deadline_us != 0 && left < d)
				d = left;
			struct timeval st = { (time_t)(d / 1000000), (suseconds_t)(d % 1000000) };
			evtimer_add(c->stagger, &st);
		}
		return;
	}
	if (c->inflight == 0)
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
	c->base = base;
	c->n = n < EGRESS_DNS_ADDRS_MAX ? n : EGRESS_DNS_ADDRS_MAX;
	if (c->n > 0)
		memcpy(c->addrs, addrs, c->n * sizeof(addrs[0]));
	c->port = port;
	c->o = *o;
	if (c->o.max_inflight == 0)
		c->o.max_inflight = 1;
	if (c->o.max_inflight > CONNECTOR_INFLIGHT_MAX)
		c->o.max_inflight = CONNECTOR_INFLIGHT_MAX;
	for (size_t k = 0; k < CONNECTOR_INFLIGHT_MAX; k++)
		c->a[k].fd = -1;
	c->res.fd = -1;
	c->done = done;
	c->failed = failed;
	c->arg = arg;
	c->stagger = evtimer_new(base, on_stagger, c);
	if (c->stagger == NULL) {
		free(c);
		return NULL;
	}
	start_more(c);
	return c;
}
