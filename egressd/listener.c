/*
 * listener.c - listening sockets: device binding, accept, EMFILE back-off.
 */
#define _GNU_SOURCE 1   /* accept4 */
#include "egressd/listener.h"

#include <errno.h>
#include <stdbool.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <sys/socket.h>

#include "common/limits.h"
#include "common/log.h"

struct listener {
	int fd;
	struct event *ev;                   /* EV_READ | EV_PERSIST on fd: accept a burst */
	bool *freed;                        /* listener_ready's flag while it runs */
	bool paused;                        /* listener_pause: no accepting for good */
	bool nodelay_inherited;             /* TCP_NODELAY set on fd: accepted sockets have it */
	struct event *backoff;
	struct sockaddr_storage addr;       /* requested */
	socklen_t addrlen;
	struct sockaddr_storage bound;      /* getsockname */
	listener_accept_cb cb;
	void *arg;
};

/*
 * Up to LISTENER_ACCEPT_BURST connections per readiness of the listening socket, until
 * accept4 says EAGAIN (level-triggered: with more waiting the loop comes back at once).
 * Why a burst and not one: under load, the connections accepted in one turn send their
 * SYNs and requests to the next hop together, their 200s leave together at the end of
 * the turn, and the peers (origins, upstream proxies, clients) find several per wake-up
 * instead of being woken once per connection. Measured at 64 connections on two cores
 * (docs/performance.md, the eleventh round): the machine's context switches per
 * transaction about 3.0 -> 1.8 (the bare relay's), egressd's CPU per transaction about
 * x1.45 -> x1.25 of the relay. The price is one accept4 answering EAGAIN per readiness
 * when connections come one at a time (what evconnlistener and the bare relay pay too;
 * latency at one connection did not move). The bound keeps one turn from taking a whole
 * backlog ahead of the sessions' own events.
 */
#define LISTENER_ACCEPT_BURST 16

/* An accept4 error that concerns only the connection it would have returned (already
 * aborted, or one of the network errors Linux passes on from the new socket: accept(2),
 * "Error handling"): that connection is gone, the next one may be fine. */
static bool
accept_skip(int e)
{
	switch (e) {
	case EINTR: case ECONNABORTED: case EPROTO: case ENOPROTOOPT: case ENETDOWN:
	case ENETUNREACH: case EHOSTDOWN: case EHOSTUNREACH: case ENONET: case EOPNOTSUPP:
	case EPERM:
		return true;
	default:
		return false;
	}
}

static void
listener_ready(evutil_socket_t lfd, short what, void *arg)
{
	struct listener *l = arg;
	struct sockaddr_storage ss;
	socklen_t sl;
	bool freed = false;
	int fd, one = 1, skipped = 0;

	(void)what;
	l->freed = &freed;
	for (int k = 0; k < LISTENER_ACCEPT_BURST; k++) {
		sl = sizeof(ss);
		fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			int e = errno;
			struct timeval tv = { 0, 200 * 1000 };

			if (accept_skip(e)) {
				/* that one is gone; the next may be there. An error that
				 * every attempt of a burst meets is not one connection's:
				 * say so (each turn, as for the errors below). */
				if (++skipped == LISTENER_ACCEPT_BURST)
					log_warnx("accept: %s (%d times in a row)", strerror(e),
					    LISTENER_ACCEPT_BURST);
				continue;
			}
			if (e == EAGAIN || e == EWOULDBLOCK)
				break;
			/* Out of fds or memory: stop accepting for a moment instead of
			 * spinning. */
			if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
				log_warnx("accept: %s; pausing this listener for 200 ms (raise the "
				    "fd limit or lower max_connections)", strerror(e));
				event_del(l->ev);
				evtimer_add(l->backoff, &tv);
				break;
			}
			log_warnx("accept: %s", strerror(e));
			break;
		}
		/* The client side of a relay: no Nagle delay on what egressd forwards
		 * (connector.c sets the same on the upstream side). Inherited from the
		 * listening socket where that could be set (no system call per connection);
		 * best effort. */
		if (!l->nodelay_inherited)
			(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* Defensive: no path of egressd frees or pauses a listener from inside its
		 * accept callback today (a grant's listeners close in grants_retire, which
		 * runs from its own events), but the callback owns the decision, so the
		 * burst stops at either rather than rely on that. */
		l->cb(fd, (struct sockaddr *)&ss, sl, l->arg);
		if (freed)
			return;
		if (l->paused)
			break;
	}
	l->freed = NULL;
}

static void
listener_resume(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;

	(void)fd;
	(void)what;
	if (!l->paused)
		event_add(l->ev, NULL);
}

static const char *
sa_str(const struct sockaddr *sa, char *buf, size_t len)
{
	struct addr a;
	char ab[EGRESS_ADDRSTR_MAX];
	uint16_t port;

	addr_from_sockaddr(&a, sa);
	addr_to_str(&a, ab, sizeof(ab));
	port = ntohs(sa->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)sa)->sin6_port :
	    ((const struct sockaddr_in *)sa)->sin_port);
	snprintf(buf, len, sa->sa_family == AF_INET6 ? "[%s]:%u" : "%s:%u", ab, port);
	return buf;
}

/* Wrap a bound, listening fd (now owned by the listener, closed on failure). */
static struct listener *
listener_wrap(struct event_base *base, int fd, const struct sockaddr *sa, socklen_t salen,
    listener_accept_cb cb, void *arg, char *err, size_t errlen)
{
	struct listener *l;
	socklen_t bl;

	l = calloc(1, sizeof(*l));
	if (l == NULL) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	l->fd = fd;
	memcpy(&l->addr, sa, salen);
	l->addrlen = salen;
	bl = sizeof(l->bound);
	getsockname(fd, (struct sockaddr *)&l->bound, &bl);
	l->cb = cb;
	l->arg = arg;
	/* accepted sockets inherit TCP_NODELAY from the listening socket (Linux) */
	{
		int one = 1;

		l->nodelay_inherited = setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one)) == 0;
	}
	l->backoff = evtimer_new(base, listener_resume, l);
	l->ev = event_new(base, fd, EV_READ | EV_PERSIST, listener_ready, l);
	if (l->ev == NULL || l->backoff == NULL || event_add(l->ev, NULL) != 0) {
		listener_free(l);   /* closes fd */
		snprintf(err, errlen, "listener event: out of memory");
		return NULL;
	}
	return l;
}

struct listener *
listener_new(struct event_base *base, const struct sockaddr *sa, socklen_t salen,
    const char *ifname, listener_accept_cb cb, void *arg, char *err, size_t errlen)
{
	char ab[EGRESS_HOSTPORT_MAX + 1];
	int fd, one = 1;

	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return NULL;
	}
	if (ifname != NULL && ifname[0] != '\0') {
		size_t n = strlen(ifname);
		if (n >= IFNAMSIZ || setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname,
		    (socklen_t)n + 1) != 0) {
			snprintf(err, errlen, "SO_BINDTODEVICE %s: %s", ifname,
			    n >= IFNAMSIZ ? "name too long" : strerror(errno));
			close(fd);
			return NULL;
		}
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sa->sa_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, sa, salen) != 0) {
		snprintf(err, errlen, "bind %s: %s", sa_str(sa, ab, sizeof(ab)), strerror(errno));
		close(fd);
		return NULL;
	}
	if (listen(fd, 511) != 0) {
		snprintf(err, errlen, "listen %s: %s", sa_str(sa, ab, sizeof(ab)),
		    strerror(errno));
		close(fd);
		return NULL;
	}
	return listener_wrap(base, fd, sa, salen, cb, arg, err, errlen);
}

struct listener *
listener_adopt(struct event_base *base, int fd, const char *ifname, listener_accept_cb cb,
    void *arg, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss), ol;
	int v;

	/* The fd comes from egress-exec over the root-only control socket; still, accept
	 * only what a listener of ours would be: a listening TCP socket on IPv4 or IPv6,
	 * bound to a specific (never wildcard) address. */
	ol = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &ol) != 0 ||
	    (v != AF_INET && v != AF_INET6)) {
		snprintf(err, errlen, "the passed fd is not an IPv4/IPv6 socket");
		goto fail;
	}
	ol = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &ol) != 0 || v != SOCK_STREAM) {
		snprintf(err, errlen, "the passed fd is not a stream socket");
		goto fail;
	}
	ol = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &ol) != 0 || v != IPPROTO_TCP) {
		snprintf(err, errlen, "the passed fd is not a TCP socket");
		goto fail;
	}
	ol = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &ol) != 0 || v != 1) {
		snprintf(err, errlen, "the passed fd is not listening");
		goto fail;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
		snprintf(err, errlen, "getsockname: %s", strerror(errno));
		goto fail;
	}
	if ((ss.ss_family == AF_INET &&
	    ((struct sockaddr_in *)&ss)->sin_addr.s_addr == htonl(INADDR_ANY)) ||
	    (ss.ss_family == AF_INET6 &&
	    (IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ss)->sin6_addr) ||
	    (IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&ss)->sin6_addr) &&
	    ((struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr32[3] == 0)))) {
		snprintf(err, errlen, "the passed listener is bound to a wildcard address");
		goto fail;
	}
	/* The device the records name must be the one the socket is bound to (the kernel
	 * answers with the name in the socket's own namespace). */
	if (ifname != NULL && ifname[0] != '\0') {
		char dev[IFNAMSIZ + 1] = "";
		socklen_t dl = sizeof(dev) - 1;

		if (getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev, &dl) != 0 ||
		    strcmp(dev, ifname) != 0) {
			snprintf(err, errlen, "the passed listener is not bound to device %s",
			    ifname);
			goto fail;
		}
	}
	evutil_make_socket_nonblocking(fd);
	evutil_make_socket_closeonexec(fd);
	return listener_wrap(base, fd, (const struct sockaddr *)&ss, sl, cb, arg, err, errlen);
fail:
	close(fd);
	return NULL;
}

void
listener_free(struct listener *l)
{
	if (l == NULL)
		return;
	if (l->freed != NULL)
		*l->freed = true;       /* freed from its own accept callback: stop there */
	if (l->ev != NULL)
		event_free(l->ev);
	if (l->backoff != NULL)
		event_free(l->backoff);
	if (l->fd >= 0)
		close(l->fd);
	free(l);
}

void
listener_set_arg(struct listener *l, void *arg)
{
	l->arg = arg;
}

void *
listener_get_arg(const struct listener *l)
{
	return l->arg;
}

void
listener_addr(const struct listener *l, struct addr *a, uint16_t *port)
{
	const struct sockaddr *sa = (const struct sockaddr *)&l->bound;

	addr_from_sockaddr(a, sa);
	if (port != NULL)
		*port = ntohs(sa->sa_family == AF_INET6 ?
		    ((const struct sockaddr_in6 *)sa)->sin6_port :
		    ((const struct sockaddr_in *)sa)->sin_port);
}

const char *
listener_addr_str(const struct listener *l, char *buf, size_t len)
{
	return sa_str((const struct sockaddr *)&l->bound, buf, len);
}

int
listener_same_addr(const struct listener *l, const struct sockaddr *sa, socklen_t salen)
{
	return salen == l->addrlen && memcmp(&l->addr, sa, salen) == 0;
}

void
listener_pause(struct listener *l)
{
	l->paused = true;
	event_del(l->ev);
	evtimer_del(l->backoff);
}
