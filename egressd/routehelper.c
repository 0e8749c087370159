/* routehelper.c - spawn, feed, time out and restart the libproxy helper (routehelper.h). */
#define _GNU_SOURCE
#include "egressd/routehelper.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/log.h"
#include "common/util.h"

struct rh_req {
	struct routehelper *rh;
	uint64_t id;
	char *url;
	rh_cb cb;
	void *arg;
	struct event *timer;          /* deadline, or zero timer for a cache hit */
	struct routeproto_reply *hit; /* cached answer to deliver */
	int unavailable;              /* no helper could be started: deny on next turn */
	int doomed;                   /* being failed by fail_all */
	struct rh_req *next, *prev;
};

struct rh_cache_entry {
	char *url;
	struct routeproto_reply reply;
	uint64_t expires_ms;
	struct rh_cache_entry *next;  /* insertion order (oldest first) */
};

struct routehelper {
	struct event_base *base;
	char *path;
	char **envp;
	uint32_t deadline_ms;
	uint32_t cache_ttl_s;
	size_t cache_max;
	pid_t pid;
	struct bufferevent *bev;
	uint64_t next_id;
	struct rh_req *reqs;          /* in flight (sent or queued) */
	struct rh_cache_entry *cache_head, *cache_tail;
	size_t cache_n;
	uint64_t restart_after_ms;    /* crash-loop backoff */
	unsigned quick_deaths;
	struct routehelper_stats st;
};

static void rh_kill(struct routehelper *rh);

static void
req_unlink(struct rh_req *q)
{
	struct routehelper *rh = q->rh;

	if (q->prev)
		q->prev->next = q->next;
	else if (rh->reqs == q)
		rh->reqs = q->next;
	if (q->next)
		q->next->prev = q->prev;
	q->next = q->prev = NULL;
}

static void
req_free(struct rh_req *q)
{
	if (q == NULL)
		return;
	if (q->timer)
		event_free(q->timer);
	free(q->hit);
	free(q->url);
	free(q);
}

static void
req_finish(struct rh_req *q, enum reason status, const struct routeproto_reply *r)
{
	rh_cb cb = q->cb;
	void *arg = q->arg;

	req_unlink(q);
	req_free(q);
	cb(status, r, arg);
}

/*
 * Fail every lookup that was sent to the helper (it is gone or was killed). Callbacks may
 * cancel or start lookups, so the doomed set is marked first and then finished one at a
 * time from the live list; lookups started by a callback are not in it.
 */
static void
fail_all(struct routehelper *rh, enum reason status)
{
	struct rh_req *q;

	for (q = rh->reqs; q != NULL; q = q->next)
		q->doomed = q->hit == NULL && !q->unavailable;
	for (;;) {
		for (q = rh->reqs; q != NULL && !q->doomed; q = q->next)
			;
		if (q == NULL)
			break;
		rh->st.failures++;
		req_finish(q, status, NULL);
	}
}

static void
cache_put(struct routehelper *rh, const char *url, const struct routeproto_reply *r)
{
	struct rh_cache_entry *e;

	if (rh->cache_ttl_s == 0 || rh->cache_max == 0)
		return;
	for (e = rh->cache_head; e != NULL; e = e->next)
		if (strcmp(e->url, url) == 0) {
			e->reply = *r;
			e->expires_ms = mono_msec() + (uint64_t)rh->cache_ttl_s * 1000u;
			return;
		}
	if (rh->cache_n >= rh->cache_max) {
		struct rh_cache_entry *old = rh->cache_head;   /* evict the oldest */
		rh->cache_head = old->next;
		if (rh->cache_tail == old)
			rh->cache_tail = NULL;
		free(old->url);
		free(old);
		rh->cache_n--;
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL || (e->url = strdup(url)) == NULL) {
		free(e);
		return;
	}
	e->reply = *r;
	e->expires_ms = mono_msec() + (uint64_t)rh->cache_ttl_s * 1000u;
	if (rh->cache_tail)
		rh->cache_tail->next = e;
	else
		rh->cache_head = e;
	rh->cache_tail = e;
	rh->cache_n++;
}

static const struct routeproto_reply *
cache_get(struct routehelper *rh, const char *url)
{
	uint64_t now = mono_msec();

	for (struct rh_cache_entry *e = rh->cache_head; e != NULL; e = e->next)
		if (strcmp(e->url, url) == 0)
			return e->expires_ms > now ? &e->reply : NULL;
	return NULL;
}

static void
cache_clear(struct routehelper *rh)
{
	while (rh->cache_head != NULL) {
		struct rh_cache_entry *e = rh->cache_head;
		rh->cache_head = e->next;
		free(e->url);
		free(e);
	}
	rh->cache_tail = NULL;
	rh->cache_n = 0;
}

static void
on_read(struct bufferevent *bev, void *arg)
{
	struct routehelper *rh = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char *line;
	size_t len;

	while ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF)) != NULL) {
		struct routeproto_reply r;
		struct rh_req *q;

		if (routeproto_parse_reply(line, len, &r) != 0) {
			/* A malformed reply means the helper is not what we think it is. */
			log_warnx("route helper: malformed reply; restarting it");
			free(line);
			rh_kill(rh);
			fail_all(rh, REASON_ROUTE_UNAVAILABLE);
			return;
		}
		free(line);
		for (q = rh->reqs; q != NULL; q = q->next)
			if (q->hit == NULL && q->id == r.id)
				break;
		if (q == NULL)
			continue;      /* answer to a cancelled or timed-out lookup */
		rh->quick_deaths = 0;      /* it answers: not a crash loop */
		if (r.ok) {
			cache_put(rh, q->url, &r);
			req_finish(q, REASON_ALLOWED, &r);
		} else {
			log_warnx("route helper: no route for %s (%s)", q->url, r.err);
			rh->st.failures++;
			req_finish(q, REASON_ROUTE_UNAVAILABLE, &r);
		}
	}
	if (evbuffer_get_length(in) > EGRESS_ROUTE_LINE_MAX) {
		log_warnx("route helper: over-long reply; restarting it");
		rh_kill(rh);
		fail_all(rh, REASON_ROUTE_UNAVAILABLE);
	}
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	struct routehelper *rh = arg;

	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		log_warnx("route helper exited; lookups in flight are denied");
		rh_kill(rh);
		fail_all(rh, REASON_ROUTE_UNAVAILABLE);
	}
}

/* Kill and reap the helper. SIGKILL cannot be ignored; reaping is bounded. */
static void
rh_kill(struct routehelper *rh)
{
	if (rh->bev != NULL) {
		bufferevent_free(rh->bev);
		rh->bev = NULL;
	}
	if (rh->pid > 0) {
		kill(rh->pid, SIGKILL);
		for (int i = 0; i < 200; i++) {       /* at most ~200 ms */
			pid_t w = waitpid(rh->pid, NULL, WNOHANG);
			if (w == rh->pid || (w < 0 && errno == ECHILD))
				break;
			usleep(1000);
		}
		rh->pid = 0;
	}
	rh->st.pid = 0;
}

static int
rh_spawn(struct routehelper *rh)
{
	int sv[2];
	pid_t pid;
	uint64_t now = mono_msec();

	if (now < rh->restart_after_ms)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		log_warn("route helper: socketpair");
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		log_warn("route helper: fork");
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		char *argv[] = { rh->path, NULL };
		/* stdin and stdout are the socket; stderr stays egressd's */
		if (dup2(sv[1], 0) < 0 || dup2(sv[1], 1) < 0)
			_exit(127);
		closefrom(3);
		execve(rh->path, argv, rh->envp);
		_exit(127);
	}
	close(sv[1]);
	evutil_make_socket_nonblocking(sv[0]);
	rh->bev = bufferevent_socket_new(rh->base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	if (rh->bev == NULL) {
		close(sv[0]);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	bufferevent_setcb(rh->bev, on_read, NULL, on_event, rh);
	bufferevent_enable(rh->bev, EV_READ | EV_WRITE);
	rh->pid = pid;
	rh->st.pid = pid;
	rh->st.restarts++;
	/* A helper that keeps dying is not restarted in a tight loop. */
	rh->quick_deaths++;
	if (rh->quick_deaths > 3)
		rh->restart_after_ms = now + 1000;
	return 0;
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct rh_req *q = arg;
	struct routehelper *rh = q->rh;

	(void)fd;
	(void)what;
	if (q->hit != NULL) {             /* cache hit delivery */
		struct routeproto_reply r = *q->hit;
		req_finish(q, REASON_ALLOWED, &r);
		return;
	}
	if (q->unavailable) {
		rh->st.failures++;
		req_finish(q, REASON_ROUTE_UNAVAILABLE, NULL);
		return;
	}
	log_warnx("route lookup for %s exceeded %u ms; killing the route helper", q->url,
	    rh->deadline_ms);
	rh->st.timeouts++;
	req_finish(q, REASON_ROUTE_TIMEOUT, NULL);
	/* The helper is stuck on this lookup: everything queued behind it would wait too. */
	rh_kill(rh);
	fail_all(rh, REASON_ROUTE_UNAVAILABLE);
}

struct rh_req *
routehelper_lookup(struct routehelper *rh, const char *url, rh_cb cb, void *arg)
{
	struct rh_req *q = calloc(1, sizeof(*q));
	const struct routeproto_reply *hit;
	struct timeval tv = { 0, 0 };   /* cache hits and failures: next loop turn */

	if (q == NULL || (q->url = strdup(url)) == NULL) {
		free(q);
		return NULL;
	}
	q->rh = rh;
	q->cb = cb;
	q->arg = arg;
	rh->st.lookups++;
	if ((hit = cache_get(rh, url)) != NULL) {
		if ((q->hit = malloc(sizeof(*q->hit))) == NULL)
			goto fail;
		*q->hit = *hit;
		rh->st.cache_hits++;
	} else if (rh->bev == NULL && rh_spawn(rh) != 0) {
		q->unavailable = 1;
	} else {
		char line[EGRESS_ROUTE_LINE_MAX + 32];
		size_t n;

		q->id = ++rh->next_id;
		n = routeproto_format_request(q->id, url, line, sizeof(line));
		if (n == 0 || bufferevent_write(rh->bev, line, n) != 0)
			goto fail;
		tv.tv_sec = rh->deadline_ms / 1000;
		tv.tv_usec = (suseconds_t)(rh->deadline_ms % 1000) * 1000;
	}
	if ((q->timer = evtimer_new(rh->base, on_deadline, q)) == NULL)
		goto fail;
	evtimer_add(q->timer, &tv);
	q->next = rh->reqs;
	if (rh->reqs)
		rh->reqs->prev = q;
	rh->reqs = q;
	return q;
fail:
	req_free(q);
	return NULL;
}

void
routehelper_cancel(struct rh_req *q)
{
	if (q == NULL)
		return;
	req_unlink(q);
	req_free(q);
}

struct routehelper *
routehelper_new(struct event_base *base, const struct routehelper_config *cfg, char *err,
    size_t errlen)
{
	struct routehelper *rh;
	size_t n = 0;

	if (cfg->helper_path == NULL || cfg->helper_path[0] != '/' ||
	    access(cfg->helper_path, X_OK) != 0) {
		snprintf(err, errlen, "route helper %s is not an executable absolute path",
		    cfg->helper_path ? cfg->helper_path : "(none)");
		return NULL;
	}
	if (cfg->deadline_ms == 0) {
		snprintf(err, errlen, "route helper deadline must be positive");
		return NULL;
	}
	rh = calloc(1, sizeof(*rh));
	if (rh == NULL)
		goto nomem;
	rh->base = base;
	rh->deadline_ms = cfg->deadline_ms;
	rh->cache_ttl_s = cfg->cache_ttl_s;
	rh->cache_max = cfg->cache_max > EGRESS_ROUTE_CACHE_MAX ? EGRESS_ROUTE_CACHE_MAX :
	    cfg->cache_max;
	if ((rh->path = strdup(cfg->helper_path)) == NULL)
		goto nomem;
	while (cfg->envp != NULL && cfg->envp[n] != NULL)
		n++;
	rh->envp = calloc(n + 1, sizeof(char *));
	if (rh->envp == NULL)
		goto nomem;
	for (size_t i = 0; i < n; i++)
		if ((rh->envp[i] = strdup(cfg->envp[i])) == NULL)
			goto nomem;
	return rh;
nomem:
	snprintf(err, errlen, "out of memory");
	routehelper_free(rh);
	return NULL;
}

void
routehelper_reset(struct routehelper *rh)
{
	cache_clear(rh);
	rh_kill(rh);
	fail_all(rh, REASON_ROUTE_UNAVAILABLE);
	rh->quick_deaths = 0;
	rh->restart_after_ms = 0;
}

void
routehelper_free(struct routehelper *rh)
{
	if (rh == NULL)
		return;
	rh_kill(rh);
	while (rh->reqs != NULL) {
		struct rh_req *q = rh->reqs;
		req_unlink(q);
		req_free(q);
	}
	cache_clear(rh);
	if (rh->envp != NULL) {
		for (size_t i = 0; rh->envp[i] != NULL; i++)
			free(rh->envp[i]);
		free(rh->envp);
	}
	free(rh->path);
	free(rh);
}

void
routehelper_stats(const struct routehelper *rh, struct routehelper_stats *out)
{
	*out = rh->st;
}
