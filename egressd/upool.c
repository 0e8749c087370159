/*
 * upool.c - a small list of parked upstream sockets, each watched by one event and
 * attached to its grant (revoke kills it like any other connection of the grant).
 */
#include "egressd/upool.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/limits.h"
#include "common/util.h"
#include "egressd/grants.h"

struct upool_entry {
	struct grant_conn gc;           /* first: the kill callback gets &e->gc */
	struct upool *p;
	struct lgrant *lg;              /* referenced while parked */
	struct addr a;
	uint16_t port;
	int fd;
	struct event *ev;
	struct upool_entry *next, *prev;
};

struct upool {
	struct event_base *base;
	uint64_t idle_ms;
	struct upool_entry *head, *tail;    /* oldest first */
	size_t n;
};

struct upool *
upool_new(struct event_base *base, uint64_t idle_ms)
{
	struct upool *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	p->base = base;
	p->idle_ms = idle_ms != 0 ? idle_ms : (uint64_t)EGRESS_UPOOL_IDLE_S * 1000;
	return p;
}

static void
entry_drop(struct upool_entry *e)
{
	struct upool *p = e->p;

	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		p->head = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	else
		p->tail = e->prev;
	p->n--;
	if (e->ev != NULL)
		event_free(e->ev);
	if (e->fd >= 0)
		close(e->fd);
	lgrant_detach(e->lg, &e->gc);
	lgrant_unref(e->lg);
	free(e);
}

void
upool_free(struct upool *p)
{
	if (p == NULL)
		return;
	while (p->head != NULL)
		entry_drop(p->head);
	free(p);
}

/* Anything from the origin while parked (EOF, stray bytes) or the idle timeout: close. */
static void
entry_event(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	entry_drop(arg);
}

/* The grant was revoked or expired (or egressd shuts down): its idle sockets go too. */
static void
entry_kill(struct grant_conn *gc, enum reason why)
{
	(void)why;
	entry_drop((struct upool_entry *)(void *)gc);
}

void
upool_put(struct upool *p, struct lgrant *lg, const struct addr *a, uint16_t port, int fd)
{
	struct upool_entry *e;
	size_t mine = 0;
	struct timeval tv;

	if (p == NULL || lg == NULL || a == NULL || lg->dead != REASON_ALLOWED) {
		close(fd);
		return;
	}
	for (struct upool_entry *x = p->head; x != NULL; x = x->next)
		if (x->lg == lg)
			mine++;
	if (mine >= EGRESS_UPOOL_PER_GRANT) {
		for (struct upool_entry *x = p->head; x != NULL; x = x->next) {
			if (x->lg == lg) {
				entry_drop(x);          /* this grant's oldest */
				break;
			}
		}
	}
	if (p->n >= EGRESS_UPOOL_MAX && p->head != NULL)
		entry_drop(p->head);
	e = calloc(1, sizeof(*e));
	if (e == NULL) {
		close(fd);
		return;
	}
	e->p = p;
	e->lg = lg;
	e->a = *a;
	e->port = port;
	e->fd = fd;
	e->ev = event_new(p->base, fd, EV_READ, entry_event, e);
	tv.tv_sec = (time_t)(p->idle_ms / 1000);
	tv.tv_usec = (suseconds_t)((p->idle_ms % 1000) * 1000);
	if (e->ev == NULL || event_add(e->ev, &tv) != 0) {
		if (e->ev != NULL)
			event_free(e->ev);
		close(fd);
		free(e);
		return;
	}
	lgrant_ref(lg);
	e->gc.kill = entry_kill;
	lgrant_attach(lg, &e->gc);
	e->prev = p->tail;
	if (p->tail != NULL)
		p->tail->next = e;
	else
		p->head = e;
	p->tail = e;
	p->n++;
}

/* Still quiet? EOF or bytes from the origin since it was parked make it unusable (the
 * watch event may not have run yet). */
static bool
still_idle(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

int
upool_take(struct upool *p, struct lgrant *lg, const struct addr *a, uint16_t port)
{
	struct upool_entry *e, *prev;

	if (p == NULL || lg == NULL || a == NULL)
		return -1;
	/* newest first: the least likely to be closed by the origin's own idle timer */
	for (e = p->tail; e != NULL; e = prev) {
		prev = e->prev;
		if (e->lg != lg || e->port != port || strcmp(e->lg->id, lg->id) != 0 ||
		    !addr_equal(&e->a, a))
			continue;
		if (!still_idle(e->fd)) {
			entry_drop(e);
			continue;
		}
		int fd = e->fd;
		e->fd = -1;
		entry_drop(e);
		return fd;
	}
	return -1;
}

size_t
upool_count(const struct upool *p)
{
	return p != NULL ? p->n : 0;
}
