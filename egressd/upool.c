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
	struct grant_conn ue_gc;        /* first: the kill callback gets &e->gc */
	struct upool *ue_p;
	struct lgrant *ue_lg;           /* referenced while parked */
	struct addr ue_a;
	uint16_t ue_port;
	int ue_fd;
	struct event *ue_ev;
	struct upool_entry *ue_next, *ue_prev;
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
	struct upool *p = e->ue_p;

	if (e->ue_prev != NULL)
		e->ue_prev->ue_next = e->ue_next;
	else
		p->head = e->ue_next;
	if (e->ue_next != NULL)
		e->ue_next->ue_prev = e->ue_prev;
	else
		p->tail = e->ue_prev;
	p->n--;
	if (e->ue_ev != NULL)
		event_free(e->ue_ev);
	if (e->ue_fd >= 0)
		close(e->ue_fd);
	lgrant_detach(e->ue_lg, &e->ue_gc);
	lgrant_unref(e->ue_lg);
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
	for (struct upool_entry *x = p->head; x != NULL; x = x->ue_next)
		if (x->ue_lg == lg)
			mine++;
	if (mine >= EGRESS_UPOOL_PER_GRANT) {
		for (struct upool_entry *x = p->head; x != NULL; x = x->ue_next) {
			if (x->ue_lg == lg) {
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
	e->ue_p = p;
	e->ue_lg = lg;
	e->ue_a = *a;
	e->ue_port = port;
	e->ue_fd = fd;
	e->ue_ev = event_new(p->base, fd, EV_READ, entry_event, e);
	tv.tv_sec = (time_t)(p->idle_ms / 1000);
	tv.tv_usec = (suseconds_t)((p->idle_ms % 1000) * 1000);
	if (e->ue_ev == NULL || event_add(e->ue_ev, &tv) != 0) {
		if (e->ue_ev != NULL)
			event_free(e->ue_ev);
		close(fd);
		free(e);
		return;
	}
	lgrant_ref(lg);
	e->ue_gc.kill = entry_kill;
	lgrant_attach(lg, &e->ue_gc);
	e->ue_prev = p->tail;
	if (p->tail != NULL)
		p->tail->ue_next = e;
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
		prev = e->ue_prev;
		if (e->ue_lg != lg || e->ue_port != port || strcmp(e->ue_lg->id, lg->id) != 0 ||
		    !addr_equal(&e->ue_a, a))
			continue;
		if (!still_idle(e->ue_fd)) {
			entry_drop(e);
			continue;
		}
		int fd = e->ue_fd;
		e->ue_fd = -1;
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
