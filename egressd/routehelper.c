/*
 * routehelper.c - a small pool of libproxy helper processes: spawn on demand, one lookup
 * per helper at a time, per-lookup deadlines, kill-and-replace (routehelper.h).
 */
#define _GNU_SOURCE
#include "egressd/routehelper.h"

#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <spawn.h>
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

enum rq_state {
	RQ_QUEUED,          /* waiting for a free helper */
	RQ_SENT,            /* being evaluated by rq->h */
	RQ_HIT,             /* cached answer, delivered on the next loop turn */
	RQ_FAILED,          /* no helper can be had: denied on the next loop turn */
};

struct helper {
	struct routehelper *hp_rh;
	pid_t hp_pid;
	struct bufferevent *hp_bev;
	struct rh_req *hp_cur;        /* the lookup it is evaluating, or NULL */
	bool hp_busy;                 /* evaluating (cur may be NULL: a cancelled lookup) */
	uint64_t hp_busy_since_ms;
};

struct rh_req {
	struct routehelper *hq_rh;
	enum rq_state hq_st;
	struct helper *hq_h;
	uint64_t hq_id;
	char *hq_url;
	rh_cb hq_cb;
	void *hq_arg;
	struct event *hq_timer;       /* the deadline, or a zero timer (hit / failure) */
	struct routeproto_reply hq_hit;
	struct rh_req *hq_next, *hq_prev; /* all lookups, oldest first */
};

struct rh_cache_entry {
	char *url;
	struct routeproto_reply reply;
	uint64_t expires_ms;
	struct rh_cache_entry *next;  /* insertion order (oldest first) */
};

#define RH_START_BACKOFF_MIN_MS 50
#define RH_START_BACKOFF_MAX_MS 1000

struct routehelper {
	struct event_base *base;
	char *path;
	char **envp;
	uint32_t deadline_ms;
	uint32_t cache_ttl_s;
	size_t cache_max;
	struct helper pool[EGRESS_ROUTE_HELPERS_MAX];
	uint64_t next_id;
	struct rh_req *head, *tail;
	struct rh_cache_entry *cache_head, *cache_tail;
	size_t cache_n;
	uint64_t restart_after_ms;    /* crash-loop back-off */
	unsigned quick_deaths;
	/* A helper that could not be started (EAGAIN, EMFILE, ENOMEM, its file gone): the
	 * next try after this long, doubled per failure in a row from RH_START_BACKOFF_MIN_MS
	 * up to RH_START_BACKOFF_MAX_MS, back to the minimum once one starts. While no helper
	 * runs, lookups meanwhile are refused (route_unavailable), never waited for: a short
	 * back-off keeps a transient failure from refusing a whole second of hops, a capped
	 * one keeps a lasting failure from costing a spawn per lookup. */
	uint32_t start_backoff_ms;
	struct routehelper_stats st;
	/* killed helpers not yet reaped: retried from a timer, never waited for on the loop */
	pid_t zombies[2 * EGRESS_ROUTE_HELPERS_MAX];
	size_t nzombies;
	struct event *reap_ev;
};

static void
reap_some(struct routehelper *rh)
{
	size_t k = 0;

	for (size_t i = 0; i < rh->nzombies; i++) {
		pid_t w = waitpid(rh->zombies[i], NULL, WNOHANG);
		if (w == 0 || (w < 0 && errno == EINTR))
			rh->zombies[k++] = rh->zombies[i];     /* not gone yet */
	}
	rh->nzombies = k;
	if (k > 0 && rh->reap_ev != NULL) {
		struct timeval tv = { 0, 20000 };
		evtimer_add(rh->reap_ev, &tv);
	}
}

static void
on_reap(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	reap_some(arg);
}

/* SIGKILL was sent: reap now if it is already gone, else later from the timer. */
static void
reap_later(struct routehelper *rh, pid_t pid)
{
	if (waitpid(pid, NULL, WNOHANG) != 0)
		return;             /* reaped (or not our child any more) */
	if (rh->nzombies == EGRESS_NELEM(rh->zombies)) {
		(void)waitpid(pid, NULL, 0);   /* cannot happen in practice: the pool is small */
		return;
	}
	rh->zombies[rh->nzombies++] = pid;
	reap_some(rh);
}

static void dispatch(struct routehelper *rh);

/* ---- requests ---- */

static void
req_unlink(struct rh_req *q)
{
	struct routehelper *rh = q->hq_rh;

	if (q->hq_prev)
		q->hq_prev->hq_next = q->hq_next;
	else if (rh->head == q)
		rh->head = q->hq_next;
	if (q->hq_next)
		q->hq_next->hq_prev = q->hq_prev;
	else if (rh->tail == q)
		rh->tail = q->hq_prev;
	q->hq_next = q->hq_prev = NULL;
	if (q->hq_h != NULL && q->hq_h->hp_cur == q)
		q->hq_h->hp_cur = NULL;       /* its helper's answer, if any, is now ignored */
	q->hq_h = NULL;
}

static void
req_free(struct rh_req *q)
{
	if (q == NULL)
		return;
	if (q->hq_timer)
		event_free(q->hq_timer);
	free(q->hq_url);
	free(q);
}

static void
req_finish(struct rh_req *q, enum reason status, const struct routeproto_reply *r)
{
	rh_cb cb = q->hq_cb;
	void *arg = q->hq_arg;
	struct routeproto_reply copy;

	if (r != NULL)
		copy = *r;
	req_unlink(q);
	req_free(q);
	cb(status, r != NULL ? &copy : NULL, arg);
}

/* Deliver on the next loop turn (never from inside routehelper_lookup). */
static void
req_soon(struct rh_req *q, enum rq_state st)
{
	static const struct timeval zero = { 0, 0 };

	q->hq_st = st;
	evtimer_del(q->hq_timer);
	evtimer_add(q->hq_timer, &zero);
}

/* ---- cache ---- */

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

/* ---- helpers ---- */

static void
update_stats(struct routehelper *rh)
{
	rh->st.pid = 0;
	rh->st.helpers = 0;
	for (size_t i = 0; i < EGRESS_ROUTE_HELPERS_MAX; i++) {
		if (rh->pool[i].hp_pid <= 0)
			continue;
		if (rh->st.pid == 0)
			rh->st.pid = rh->pool[i].hp_pid;
		rh->st.helpers++;
	}
}

/* Kill and reap one helper. SIGKILL cannot be ignored; reaping is bounded. Its lookup, if
 * any, is detached (the caller decides what happens to it). */
static void
helper_kill(struct helper *h)
{
	if (h->hp_bev != NULL) {
		bufferevent_free(h->hp_bev);
		h->hp_bev = NULL;
	}
	if (h->hp_pid > 0) {
		kill(h->hp_pid, SIGKILL);    /* cannot be ignored; reaped without blocking */
		reap_later(h->hp_rh, h->hp_pid);
		h->hp_pid = 0;
	}
	h->hp_busy = false;
	if (h->hp_cur != NULL) {
		h->hp_cur->hq_h = NULL;
		h->hp_cur = NULL;
	}
	update_stats(h->hp_rh);
}

/* A helper failed while evaluating a lookup: deny that one, replace the helper, go on. */
static void
helper_failed(struct helper *h, enum reason why, const char *what)
{
	struct rh_req *q = h->hp_cur;
	struct routehelper *rh = h->hp_rh;

	log_warnx("route helper %ld: %s%s", (long)h->hp_pid, what,
	    q ? "; that lookup is denied" : "");
	helper_kill(h);
	if (q != NULL) {
		rh->st.failures++;
		req_finish(q, why, NULL);
	}
	dispatch(rh);
}

static void
on_read(struct bufferevent *bev, void *arg)
{
	struct helper *h = arg;
	struct routehelper *rh = h->hp_rh;
	struct evbuffer *in = bufferevent_get_input(bev);
	char *line;
	size_t len;

	while ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF)) != NULL) {
		struct routeproto_reply r;
		struct rh_req *q = h->hp_cur;

		if (routeproto_parse_reply(line, len, &r) != 0) {
			/* A malformed reply means the helper is not what we think it is. */
			free(line);
			helper_failed(h, REASON_ROUTE_UNAVAILABLE, "malformed reply");
			return;
		}
		free(line);
		h->hp_busy = false;           /* one lookup at a time: this line ends it */
		if (q == NULL || q->hq_id != r.id) {
			dispatch(rh);      /* it answered a cancelled lookup: free again */
			return;
		}
		h->hp_cur = NULL;
		rh->quick_deaths = 0;      /* it answers: not a crash loop */
		if (r.ok) {
			cache_put(rh, q->hq_url, &r);
			req_finish(q, REASON_ALLOWED, &r);
		} else {
			/* libproxy's own WPAD/PAC (ROUTEPROTO_ERR_WPAD): no PAC egressd holds
			 * yet; egressd/route starts its own discovery on seeing the code. */
			enum reason why = strcmp(r.err, "pac_unreadable") == 0 ||
			    strcmp(r.err, ROUTEPROTO_ERR_WPAD) == 0 ?
			    REASON_PAC_UNAVAILABLE : REASON_ROUTE_UNAVAILABLE;
			log_warnx("route helper: no route for %s (%s)", q->hq_url, r.err);
			rh->st.failures++;
			req_finish(q, why, &r);
		}
		dispatch(rh);
		return;    /* the helper and the list may have changed in callbacks */
	}
	if (evbuffer_get_length(in) > EGRESS_ROUTE_LINE_MAX)
		helper_failed(h, REASON_ROUTE_UNAVAILABLE, "over-long reply");
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		helper_failed(arg, REASON_ROUTE_UNAVAILABLE, "exited");
}

/* No helper could be started: the next try after the back-off (start_backoff_ms). */
static void
start_failed(struct routehelper *rh, uint64_t now)
{
	rh->start_backoff_ms = rh->start_backoff_ms == 0 ? RH_START_BACKOFF_MIN_MS :
	    rh->start_backoff_ms * 2 > RH_START_BACKOFF_MAX_MS ? RH_START_BACKOFF_MAX_MS :
	    rh->start_backoff_ms * 2;
	if (now + rh->start_backoff_ms > rh->restart_after_ms)
		rh->restart_after_ms = now + rh->start_backoff_ms;
	rh->st.start_failures++;
}

static int
helper_spawn(struct helper *h)
{
	struct routehelper *rh = h->hp_rh;
	int sv[2];
	pid_t pid;
	uint64_t now = mono_msec();

	if (now < rh->restart_after_ms)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		log_warn("route helper: socketpair");
		start_failed(rh, now);
		return -1;
	}
	/*
	 * posix_spawn, not fork: glibc's is a vfork-style clone (CLONE_VM | CLONE_VFORK),
	 * so spawning copies no page tables (fork of an egressd holding many tunnels stalled
	 * the event loop for the copy, and its copy-on-write faults after) and no other
	 * process ever holds egressd's sockets: the child's descriptor table lives only
	 * until its execve, while this thread waits. stdin and stdout are the socket,
	 * stderr stays egressd's, nothing else crosses. A helper that cannot be started
	 * (its file gone, EAGAIN, ENOMEM) is reported here, not as an early exit.
	 */
	{
		char *argv[] = { rh->path, NULL };
		posix_spawn_file_actions_t fa;
		int e = posix_spawn_file_actions_init(&fa);

		if (e == 0) {
			e = posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
			if (e == 0)
				e = posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
			if (e == 0)
				e = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
			if (e == 0)
				e = posix_spawn(&pid, rh->path, &fa, NULL, argv, rh->envp);
			posix_spawn_file_actions_destroy(&fa);
		}
		if (e != 0) {
			errno = e;
			log_warn("route helper: cannot start %s", rh->path);
			close(sv[0]);
			close(sv[1]);
			start_failed(rh, now);
			return -1;
		}
	}
	close(sv[1]);
	evutil_make_socket_nonblocking(sv[0]);
	h->hp_bev = bufferevent_socket_new(rh->base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	if (h->hp_bev == NULL) {
		log_warnx("route helper: out of memory for its connection");
		close(sv[0]);
		kill(pid, SIGKILL);
		reap_later(rh, pid);
		start_failed(rh, now);
		return -1;
	}
	bufferevent_setcb(h->hp_bev, on_read, NULL, on_event, h);
	bufferevent_enable(h->hp_bev, EV_READ | EV_WRITE);
	h->hp_pid = pid;
	rh->st.restarts++;
	rh->start_backoff_ms = 0;
	/* A helper that keeps dying is not restarted in a tight loop. */
	if (++rh->quick_deaths > 2 * EGRESS_ROUTE_HELPERS_MAX)
		rh->restart_after_ms = now + 1000;
	update_stats(rh);
	return 0;
}

/* Give queued lookups to idle helpers, starting helpers on demand. */
static void
dispatch(struct routehelper *rh)
{
	for (struct rh_req *q = rh->head; q != NULL; q = q->hq_next) {
		struct helper *idle = NULL, *empty = NULL;
		char line[EGRESS_ROUTE_LINE_MAX + 32];
		size_t n;
		bool alive = false;

		if (q->hq_st != RQ_QUEUED)
			continue;
		for (size_t i = 0; i < EGRESS_ROUTE_HELPERS_MAX; i++) {
			struct helper *h = &rh->pool[i];
			/* still evaluating a cancelled lookup past any deadline: replace it */
			if (h->hp_pid > 0 && h->hp_busy && h->hp_cur == NULL &&
			    mono_msec() - h->hp_busy_since_ms > rh->deadline_ms)
				helper_kill(h);
			if (h->hp_pid > 0) {
				alive = true;
				if (!h->hp_busy && idle == NULL)
					idle = h;
			} else if (empty == NULL) {
				empty = h;
			}
		}
		if (idle == NULL && empty != NULL && helper_spawn(empty) == 0)
			idle = empty;
		if (idle == NULL) {
			if (!alive) {
				/* no helper runs and none can be started: deny, do not wait */
				for (struct rh_req *r = q; r != NULL; r = r->hq_next)
					if (r->hq_st == RQ_QUEUED)
						req_soon(r, RQ_FAILED);
			}
			return;     /* the rest wait for a helper to become free */
		}
		q->hq_id = ++rh->next_id;
		n = routeproto_format_request(q->hq_id, q->hq_url, line, sizeof(line));
		if (n == 0 || bufferevent_write(idle->hp_bev, line, n) != 0) {
			req_soon(q, RQ_FAILED);
			continue;
		}
		q->hq_st = RQ_SENT;
		q->hq_h = idle;
		idle->hp_cur = q;
		idle->hp_busy = true;
		idle->hp_busy_since_ms = mono_msec();
	}
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct rh_req *q = arg;
	struct routehelper *rh = q->hq_rh;

	(void)fd;
	(void)what;
	switch (q->hq_st) {
	case RQ_HIT:
		req_finish(q, REASON_ALLOWED, &q->hq_hit);
		return;
	case RQ_FAILED:
		rh->st.failures++;
		req_finish(q, REASON_ROUTE_UNAVAILABLE, NULL);
		return;
	case RQ_QUEUED:
		/* every helper stayed busy for the whole deadline */
		log_warnx("route lookup for %s waited %u ms for a free route helper", q->hq_url,
		    rh->deadline_ms);
		rh->st.timeouts++;
		req_finish(q, REASON_ROUTE_TIMEOUT, NULL);
		return;
	case RQ_SENT: {
		struct helper *h = q->hq_h;
		log_warnx("route lookup for %s exceeded %u ms; killing its route helper", q->hq_url,
		    rh->deadline_ms);
		rh->st.timeouts++;
		if (h != NULL)
			helper_kill(h);   /* stuck on this lookup; the others are not affected */
		req_finish(q, REASON_ROUTE_TIMEOUT, NULL);
		dispatch(rh);
		return;
	}
	}
}

struct rh_req *
routehelper_lookup(struct routehelper *rh, const char *url, rh_cb cb, void *arg)
{
	struct rh_req *q = calloc(1, sizeof(*q));
	const struct routeproto_reply *hit;
	struct timeval tv = { (time_t)(rh->deadline_ms / 1000),
	    (suseconds_t)(rh->deadline_ms % 1000) * 1000 };

	if (q == NULL || (q->hq_url = strdup(url)) == NULL) {
		free(q);
		return NULL;
	}
	q->hq_rh = rh;
	q->hq_cb = cb;
	q->hq_arg = arg;
	q->hq_st = RQ_QUEUED;
	if ((q->hq_timer = evtimer_new(rh->base, on_timer, q)) == NULL) {
		req_free(q);
		return NULL;
	}
	q->hq_prev = rh->tail;
	if (rh->tail)
		rh->tail->hq_next = q;
	else
		rh->head = q;
	rh->tail = q;
	rh->st.lookups++;
	if ((hit = cache_get(rh, url)) != NULL) {
		q->hq_hit = *hit;
		rh->st.cache_hits++;
		req_soon(q, RQ_HIT);
		return q;
	}
	evtimer_add(q->hq_timer, &tv);
	dispatch(rh);          /* never calls back: failures are delivered by zero timers */
	return q;
}

void
routehelper_cancel(struct rh_req *q)
{
	if (q == NULL)
		return;
	req_unlink(q);        /* a helper still evaluating it finishes, and is reused */
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
	for (size_t i = 0; i < EGRESS_ROUTE_HELPERS_MAX; i++)
		rh->pool[i].hp_rh = rh;
	if ((rh->reap_ev = evtimer_new(base, on_reap, rh)) == NULL)
		goto nomem;
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
	for (size_t i = 0; i < EGRESS_ROUTE_HELPERS_MAX; i++) {
		struct rh_req *q = rh->pool[i].hp_cur;
		helper_kill(&rh->pool[i]);
		if (q != NULL)
			q->hq_st = RQ_QUEUED;      /* asked again of a fresh helper */
	}
	rh->quick_deaths = 0;
	rh->restart_after_ms = 0;
	rh->start_backoff_ms = 0;
	dispatch(rh);
}

int
routehelper_set_env(struct routehelper *rh, const char *const *envp)
{
	size_t n = 0;
	char **v;

	while (envp != NULL && envp[n] != NULL)
		n++;
	if ((v = calloc(n + 1, sizeof(char *))) == NULL)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if ((v[i] = strdup(envp[i])) == NULL) {
			for (size_t j = 0; j < i; j++)
				free(v[j]);
			free(v);
			return -1;
		}
	}
	for (size_t i = 0; rh->envp != NULL && rh->envp[i] != NULL; i++)
		free(rh->envp[i]);
	free(rh->envp);
	rh->envp = v;
	routehelper_reset(rh);
	return 0;
}

void
routehelper_free(struct routehelper *rh)
{
	if (rh == NULL)
		return;
	for (size_t i = 0; i < EGRESS_ROUTE_HELPERS_MAX; i++)
		helper_kill(&rh->pool[i]);
	/* shutting down: the killed helpers are reaped here (SIGKILL: promptly) */
	for (size_t i = 0; i < rh->nzombies; i++)
		(void)waitpid(rh->zombies[i], NULL, 0);
	rh->nzombies = 0;
	if (rh->reap_ev != NULL)
		event_free(rh->reap_ev);
	while (rh->head != NULL) {
		struct rh_req *q = rh->head;
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
