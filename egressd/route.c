/*
 * route.c - route source `direct`: every hop goes straight to its pinned address.
 * The answer is delivered from the event loop (a zero timer) so callers see the same
 * asynchronous contract the PAC/system-proxy source will have.
 */
#include "egressd/route.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

struct route_req {
	struct router *r;
	struct event *ev;
	route_cb cb;
	void *arg;
	struct route_req *next, *prev;
};

struct router {
	struct event_base *base;
	enum route_kind kind;
	struct route_req *reqs;
};

int
route_kind_parse(const char *s, enum route_kind *out)
{
	if (strcmp(s, "direct") == 0) {
		*out = ROUTE_KIND_DIRECT;
		return 0;
	}
	return -1;
}

const char *
route_kind_str(enum route_kind k)
{
	switch (k) {
	case ROUTE_KIND_DIRECT:
		return "direct";
	}
	return "?";
}

struct router *
router_new(struct event_base *base, enum route_kind kind, char *err, size_t errlen)
{
	struct router *r = calloc(1, sizeof(*r));

	if (r == NULL) {
		snprintf(err, errlen, "router: out of memory");
		return NULL;
	}
	r->base = base;
	r->kind = kind;
	return r;
}

static void
req_unlink_free(struct route_req *q)
{
	if (q->prev != NULL)
		q->prev->next = q->next;
	else
		q->r->reqs = q->next;
	if (q->next != NULL)
		q->next->prev = q->prev;
	event_free(q->ev);
	free(q);
}

void
router_free(struct router *r)
{
	if (r == NULL)
		return;
	while (r->reqs != NULL)
		req_unlink_free(r->reqs);
	free(r);
}

static void
route_fire(evutil_socket_t fd, short what, void *arg)
{
	struct route_req *q = arg;
	struct route_result res;
	route_cb cb = q->cb;
	void *cbarg = q->arg;

	memset(&res, 0, sizeof(res));
	res.status = REASON_ALLOWED;
	res.entries[0].kind = ROUTE_DIRECT;
	res.n = 1;
	req_unlink_free(q);            /* the handle is invalid once the callback starts */
	cb(&res, cbarg);
}

struct route_req *
route_lookup(struct router *r, enum dest_scheme scheme, const char *host, uint16_t port,
    route_cb cb, void *arg)
{
	struct route_req *q = calloc(1, sizeof(*q));
	struct timeval now = { 0, 0 };

	if (q == NULL)
		return NULL;
	q->r = r;
	q->cb = cb;
	q->arg = arg;
	q->ev = evtimer_new(r->base, route_fire, q);
	if (q->ev == NULL) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->next = r->reqs;
	if (r->reqs != NULL)
		r->reqs->prev = q;
	r->reqs = q;
	evtimer_add(q->ev, &now);
	return q;
}

void
route_cancel(struct route_req *q)
{
	if (q != NULL)
		req_unlink_free(q);
}
