/*
 * tunnel.c - two pumps (client->upstream, upstream->client) over raw non-blocking fds,
 * each through a pooled pipe (splice) or a bounded buffer (copy). Moving bytes only: the
 * HTTP/1.1 exchange of the forwarding mode (response heads, body framing, keep-alive,
 * the retry) is relay_http.c.
 */
#define _GNU_SOURCE
#include "egressd/tunnel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "egressd/connector.h"
#include "egressd/http.h"
#include "egressd/httpresp.h"
#include "egressd/tunnel_int.h"

#define TUNNEL_SPLICE   65536
#define TUNNEL_ROUNDS   16      /* I/O rounds per callback before yielding to the loop */
#define TUNNEL_YIELD_BYTES (1024 * 1024)  /* ... or after this many bytes read: one big
                                             pipe's worth, as 16 rounds of a default one */

/* ---- pipe pool ---- */

struct pipe_pool {
	int (*idle)[2];
	size_t nidle, max_idle;
	size_t in_use;
	int big_idle[EGRESS_SPLICE_BIG_PIPES][2];   /* empty big pipes kept for reuse */
	size_t nbig_idle;
	size_t nbig, max_big;          /* big pipes that exist (in use + idle), the cap */
	uint64_t big_retry_ms;         /* the kernel refused the size: not before then */
};

struct pipe_pool *
pipe_pool_new(size_t max_idle, size_t max_big)
{
	struct pipe_pool *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	p->max_idle = max_idle;
	p->max_big = max_big < EGRESS_SPLICE_BIG_PIPES ? max_big : EGRESS_SPLICE_BIG_PIPES;
	if (max_idle > 0 && (p->idle = calloc(max_idle, sizeof(*p->idle))) == NULL) {
		free(p);
		return NULL;
	}
	return p;
}

void
pipe_pool_free(struct pipe_pool *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->nidle; i++) {
		close(p->idle[i][0]);
		close(p->idle[i][1]);
	}
	for (size_t i = 0; i < p->nbig_idle; i++) {
		close(p->big_idle[i][0]);
		close(p->big_idle[i][1]);
	}
	free(p->idle);
	free(p);
}

size_t
pipe_pool_idle(const struct pipe_pool *p)
{
	return p->nidle;
}

size_t
pipe_pool_in_use(const struct pipe_pool *p)
{
	return p->in_use;
}

size_t
pipe_pool_big(const struct pipe_pool *p)
{
	return p->nbig;
}

/* Make the pipe fds big if the cap and the kernel allow; true when it is. */
static bool
pipe_grow(struct pipe_pool *p, int fds[2])
{
	if (p->nbig >= p->max_big || mono_msec() < p->big_retry_ms)
		return false;
	if (fcntl(fds[1], F_SETPIPE_SZ, EGRESS_SPLICE_BIG_SIZE) < EGRESS_SPLICE_BIG_SIZE) {
		/* EPERM: above pipe-max-size or the user's pipe pages; the default pipe
		 * serves */
		log_debug("tunnel: no %d-byte pipe (%s); default pipes for a second",
		    EGRESS_SPLICE_BIG_SIZE, strerror(errno));
		p->big_retry_ms = mono_msec() + 1000;
		return false;
	}
	p->nbig++;
	return true;
}

/* A pipe for a direction; *big says whether it is a big one (want_big: the direction is
 * a bulk transfer, give it a big pipe if one can be had). */
static int
pipe_get(struct pipe_pool *p, int fds[2], bool want_big, bool *big)
{
	/* Pipes must not eat the fds that new connections need: past the cap, copy. */
	if (p->in_use >= EGRESS_SPLICE_PIPES_MAX) {
		errno = EMFILE;
		return -1;
	}
	*big = false;
	if (want_big && p->nbig_idle > 0) {
		p->nbig_idle--;
		fds[0] = p->big_idle[p->nbig_idle][0];
		fds[1] = p->big_idle[p->nbig_idle][1];
		*big = true;
	} else if (p->nidle > 0) {
		p->nidle--;
		fds[0] = p->idle[p->nidle][0];
		fds[1] = p->idle[p->nidle][1];
	} else if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
		return -1;
	}
	if (want_big && !*big)
		*big = pipe_grow(p, fds);
	p->in_use++;
	return 0;
}

/* A pipe goes back to the pool only when empty: leftover bytes would leak into another
 * tunnel. big: it is one of the big pipes (kept apart, for bulk directions). */
static void
pipe_put(struct pipe_pool *p, int fds[2], bool empty, bool big)
{
	if (fds[0] < 0)
		return;
	p->in_use--;
	if (big && empty && p->nbig_idle < EGRESS_SPLICE_BIG_PIPES) {
		p->big_idle[p->nbig_idle][0] = fds[0];
		p->big_idle[p->nbig_idle][1] = fds[1];
		p->nbig_idle++;
	} else if (!big && empty && p->nidle < p->max_idle) {
		p->idle[p->nidle][0] = fds[0];
		p->idle[p->nidle][1] = fds[1];
		p->nidle++;
	} else {
		if (big)
			p->nbig--;
		close(fds[0]);
		close(fds[1]);
	}
	fds[0] = fds[1] = -1;
}

/* The direction's pipe back to the pool. */
static void
dir_pipe_put(struct dir *d)
{
	if (d->dr_pipe[0] < 0)
		return;
	pipe_put(d->dr_t->tn_pool, d->dr_pipe, d->dr_inpipe == 0, d->dr_pipe_big);
	d->dr_pipe_big = false;
}

/* ---- tunnel ---- */

static void dir_run(struct dir *d);
static void dir_drop_buf(struct dir *d);

static void
tunnel_free(struct tunnel *t)
{
	connector_free(t->tn_retry_conn);      /* a retry still connecting (relay_http.c) */
	for (int i = 0; i < 2; i++) {
		struct dir *d = &t->tn_d[i];
		/* the events live in t's own allocation (tunnel_new): deleted, not freed */
		if (d->dr_rev != NULL)
			event_del(d->dr_rev);
		if (d->dr_wev != NULL)
			event_del(d->dr_wev);
		dir_pipe_put(d);
		/* through an upstream proxy the first bytes upstream carried egressd's
		 * Proxy-Authorization: credentials are wiped before their memory is freed */
		if (t->tn_o.via_proxy && d->dr_buf != NULL)
			secret_wipe(d->dr_buf, d->dr_bcap);
		free(d->dr_buf);
		free(d->dr_head);
	}
	free(t->tn_refusal);
	if (t->tn_rhead != NULL)
		secret_wipe(t->tn_rhead, t->tn_nrhead);   /* may carry the client's credentials */
	free(t->tn_rhead);
	if (t->tn_timer != NULL)
		event_del(t->tn_timer);
	if (t->tn_cfd >= 0 && t->tn_o.http && !t->tn_keep_cfd) {
		/* Client bytes egressd never read (a pipelined request) would make close() send
		 * a reset that can destroy the end of the response still in flight: send FIN
		 * first and discard what is already queued (bounded). A kept client connection
		 * (keep-alive) is handed back instead: its unread bytes are the next request. */
		char sink[4096];
		shutdown(t->tn_cfd, SHUT_WR);
		for (int i = 0; i < 16 && recv(t->tn_cfd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
			;
	}
	if (t->tn_cfd >= 0 && !t->tn_keep_cfd)
		close(t->tn_cfd);
	if (t->tn_ufd >= 0 && !t->tn_keep_ufd)
		close(t->tn_ufd);
	free(t);
}

void
tunnel_end(struct tunnel *t, enum reason why)
{
	if (t->tn_closing)
		return;
	t->tn_closing = true;
	/* A refusal can still be told to the client when no final response head reached it
	 * yet (interim 1xx heads may have: a final 4xx/5xx may follow them). */
	if (t->tn_o.http && !t->tn_d[1].dr_final_started && reason_http_status(why) > 0) {
		char r[512];
		const char *rb = r;
		size_t n;
		if (t->tn_refusal != NULL) {
			rb = t->tn_refusal;
			n = t->tn_nrefusal;
		} else {
			n = http_format_refusal(why, r, sizeof(r));
		}
		if (n > 0 && send(t->tn_cfd, rb, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			log_debug("tunnel: refusal not delivered: %s", strerror(errno));
		t->tn_keep_cfd = false;
	}
	for (int i = 0; i < 2; i++) {
		event_del(t->tn_d[i].dr_rev);
		event_del(t->tn_d[i].dr_wev);
	}
	event_del(t->tn_timer);
	if (t->tn_cb != NULL)
		t->tn_cb(why, t->tn_d[0].dr_bytes, t->tn_d[1].dr_bytes, t->tn_arg);
	tunnel_free(t);
}

void
tunnel_close(struct tunnel *t, enum reason why)
{
	tunnel_end(t, why);
}

uint64_t
tunnel_bytes_up(const struct tunnel *t)
{
	return t->tn_d[0].dr_bytes;
}

uint64_t
tunnel_bytes_down(const struct tunnel *t)
{
	return t->tn_d[1].dr_bytes;
}

static void
count(struct dir *d, size_t n)
{
	struct tunnel *t = d->dr_t;

	d->dr_bytes += n;
	t->tn_last_ms = mono_msec();
	if (t->tn_o.bytes_total != NULL) {
		*t->tn_o.bytes_total += n;
		if (t->tn_o.bytes_limit > 0 && *t->tn_o.bytes_total >= t->tn_o.bytes_limit)
			t->tn_over_budget = true;
	}
	if (d->dr_up && t->tn_o.bytes_up_total != NULL)
		*t->tn_o.bytes_up_total += n;
	if (!d->dr_up && t->tn_o.bytes_down_total != NULL)
		*t->tn_o.bytes_down_total += n;
}

static void
timer_arm(struct tunnel *t)
{
	uint64_t now = mono_msec();
	uint64_t idle_at = t->tn_last_ms + t->tn_o.idle_ms;
	uint64_t life_at = t->tn_start_ms + t->tn_o.lifetime_ms;
	uint64_t at = idle_at < life_at ? idle_at : life_at;
	uint64_t wait = at > now ? at - now : 0;
	struct timeval tv = { (time_t)(wait / 1000), (suseconds_t)((wait % 1000) * 1000) };

	evtimer_add(t->tn_timer, &tv);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;
	uint64_t now = mono_msec();

	if (now >= t->tn_start_ms + t->tn_o.lifetime_ms) {
		tunnel_end(t, REASON_CLOSE_LIFETIME);
		return;
	}
	if (now >= t->tn_last_ms + t->tn_o.idle_ms) {
		/* An origin that never answered an HTTP request timed out, not "idle". */
		tunnel_end(t, t->tn_o.http && t->tn_d[1].dr_want_head ? REASON_UPSTREAM_TIMEOUT :
		    REASON_CLOSE_IDLE);
		return;
	}
	timer_arm(t);
}

/* The direction ended cleanly (EOF passed on). */
static void
dir_finish(struct dir *d)
{
	struct tunnel *t = d->dr_t;

	d->dr_done = true;
	event_del(d->dr_rev);
	event_del(d->dr_wev);
	dir_pipe_put(d);
	if (t->tn_first_close == REASON_ALLOWED)
		t->tn_first_close = d->dr_up ? REASON_CLOSE_CLIENT : REASON_CLOSE_UPSTREAM;
	if (t->tn_o.http) {
		/* The exchange is over when the response is delivered. */
		if (!d->dr_up)
			tunnel_end(t, REASON_CLOSE_UPSTREAM);
		return;
	}
	if (shutdown(d->dr_dst, SHUT_WR) != 0 && errno != ENOTCONN)
		log_debug("tunnel: shutdown: %s", strerror(errno));
	if (t->tn_d[0].dr_done && t->tn_d[1].dr_done)
		tunnel_end(t, t->tn_first_close);
}

/*
 * What a failed recv, send or splice (errno set) means for the direction, the same for
 * every one of them: try again at once, wait for the socket, or fail (io_error_reason).
 */
enum io_fail { IO_RETRY, IO_WAIT, IO_ERROR };

static enum io_fail
io_fail_kind(void)
{
	if (errno == EINTR)
		return IO_RETRY;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return IO_WAIT;
	return IO_ERROR;
}

/* Write pending user-space bytes; returns 1 flushed, 0 would block, -1 error. */
static int
flush_buf(struct dir *d)
{
	while (d->dr_boff < d->dr_blen) {
		ssize_t n = send(d->dr_dst, d->dr_buf + d->dr_boff, d->dr_blen - d->dr_boff,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			enum io_fail k = io_fail_kind();
			if (k == IO_RETRY)
				continue;
			return k == IO_WAIT ? 0 : -1;
		}
		d->dr_boff += (size_t)n;
		size_t own = d->dr_nocount < (size_t)n ? d->dr_nocount : (size_t)n;
		d->dr_nocount -= own;
		count(d, (size_t)n - own);
	}
	d->dr_boff = d->dr_blen = 0;
	if (d->dr_use_pipe && !d->dr_t->tn_o.http && !d->dr_t->tn_o.via_proxy && d->dr_buf != NULL)
		/* splice moves the data from now on: give the buffer back (it is grown again
		 * if this direction ever falls back to copying) */
		dir_drop_buf(d);
	return 1;
}

static int
flush_pipe(struct dir *d)
{
	while (d->dr_inpipe > 0) {
		ssize_t n = splice(d->dr_pipe[0], NULL, d->dr_dst, NULL, d->dr_inpipe,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0) {
			enum io_fail k = io_fail_kind();
			if (k == IO_RETRY)
				continue;
			return k == IO_WAIT ? 0 : -1;
		}
		if (n == 0)
			return -1;
		d->dr_inpipe -= (size_t)n;
		count(d, (size_t)n);
	}
	return 1;
}

/* Give d's copy buffer back while it holds nothing (it is grown again when needed). */
static void
dir_drop_buf(struct dir *d)
{
	free(d->dr_buf);
	d->dr_buf = NULL;
	d->dr_bcap = 0;
	d->dr_boff = d->dr_blen = 0;
}

bool
tunnel_dir_reserve(struct dir *d, size_t cap)
{
	if (d->dr_bcap >= cap)
		return true;
	char *nb = realloc(d->dr_buf, cap);
	if (nb == NULL)
		return false;
	d->dr_buf = nb;
	d->dr_bcap = cap;
	return true;
}

static void
dir_fail(struct dir *d, enum reason why)
{
	struct tunnel *t = d->dr_t;

	if ((why == REASON_UPSTREAM_RESET || why == REASON_CLOSE_UPSTREAM) &&
	    relay_http_retry_fresh(t))
		return;
	/* the fresh connection failed too, before any response: the origin is unreachable
	 * now, as the first failure said */
	if (t->tn_retried && !t->tn_up_any && !t->tn_d[1].dr_final_started &&
	    (why == REASON_CLOSE_UPSTREAM || why == REASON_CLOSE_ERROR))
		why = REASON_UPSTREAM_RESET;
	tunnel_end(t, why);
}

static enum reason
io_error_reason(struct dir *d, bool reading)
{
	int e = errno;
	bool client_side = reading ? d->dr_up : !d->dr_up;

	if (e == ECONNRESET || e == EPIPE)
		return client_side ? REASON_CLOSE_CLIENT : REASON_CLOSE_UPSTREAM;
	return REASON_CLOSE_ERROR;
}

/*
 * Waiting. A CONNECT tunnel's events are persistent (EV_PERSIST): the read event stays
 * registered while the direction waits for bytes, so a relayed segment costs no
 * epoll_ctl DEL + ADD; only a blocked write swaps it for the write event (and back). The
 * forwarding mode keeps one-shot events: relay_http.c decides when to read again.
 */
static void
dir_wait_read(struct dir *d)
{
	event_del(d->dr_wev);      /* no system call when it is not pending */
	event_add(d->dr_rev, NULL);   /* none when it is pending already */
}

static void
dir_wait_write(struct dir *d)
{
	event_del(d->dr_rev);      /* a persistent read event would spin while writes block */
	event_add(d->dr_wev, NULL);
}

static void
dir_run(struct dir *d)
{
	struct tunnel *t = d->dr_t;
	enum reason why;
	size_t moved = 0;
	int r;

	for (int round = 0; round < TUNNEL_ROUNDS && moved < TUNNEL_YIELD_BYTES; round++) {
		if (d->dr_done)
			return;
		if (t->tn_over_budget) {
			dir_fail(d, REASON_LIMIT_BYTES);
			return;
		}
		/* 1. flush what is pending */
		r = d->dr_blen > d->dr_boff ? flush_buf(d) : 1;
		if (r == 1 && d->dr_inpipe > 0)
			r = flush_pipe(d);
		if (r < 0) {
			dir_fail(d, io_error_reason(d, false));
			return;
		}
		if (r == 0) {
			dir_wait_write(d);
			return;
		}
		if (!t->tn_o.http)
			event_del(d->dr_wev);   /* written: a persistent write event would spin */
		/* 2. everything written: pass EOF on, or read more */
		if (t->tn_over_budget) {
			dir_fail(d, REASON_LIMIT_BYTES);
			return;
		}
		if (d->dr_eof) {
			dir_finish(d);
			return;
		}
		if (!d->dr_up && t->tn_o.http && d->dr_resp_done) {
			relay_http_delivered(t);
			return;
		}
		if (d->dr_up && t->tn_o.http && d->dr_frame.done) {
			/* request body complete: never read what follows (a new, unauthorized
			 * request) */
			d->dr_done = true;
			event_del(d->dr_rev);
			return;
		}
		if (d->dr_fresh) {
			/* the 200 line (or the client's early bytes) is out; the level-triggered
			 * read event reports whatever is already waiting */
			d->dr_fresh = false;
			dir_wait_read(d);
			return;
		}
		bool piped = d->dr_use_pipe;
		bool bulk = d->dr_bytes >= EGRESS_SPLICE_BIG_AFTER;
		if (piped && d->dr_pipe[0] >= 0 && bulk && !d->dr_pipe_big) {
			/* became a bulk transfer while holding a default pipe (empty here:
			 * everything read was written): swap it for an idle big one, or grow it
			 * in place */
			if (t->tn_pool->nbig_idle > 0)
				dir_pipe_put(d);    /* pipe_get below takes the big one */
			else
				d->dr_pipe_big = pipe_grow(t->tn_pool, d->dr_pipe);
		}
		if (piped && d->dr_pipe[0] < 0 &&
		    pipe_get(t->tn_pool, d->dr_pipe, bulk, &d->dr_pipe_big) != 0) {
			/* No pipe now (fd limit or the pipe cap): copy this round; try again
			 * next time. */
			log_debug("tunnel: no pipe (%s); copying through user space",
			    strerror(errno));
			piped = false;
		}
		size_t want = d->dr_pipe_big ? EGRESS_SPLICE_BIG_SIZE : TUNNEL_SPLICE;
		if (!piped) {
			if (!tunnel_dir_reserve(d, TUNNEL_BUF)) {
				dir_fail(d, REASON_CLOSE_ERROR);
				return;
			}
			want = TUNNEL_BUF;
			/* a body of known length: never read past it (what follows is not ours) */
			if (t->tn_o.http && (d->dr_up || !d->dr_want_head) &&
			    d->dr_frame.kind == HTTP_RESP_LENGTH && d->dr_frame.left < want)
				want = (size_t)d->dr_frame.left;
		}
		/* a chunked request body: look first and take only the body's own bytes (what
		 * follows its last chunk is the client's next request, kept-alive) */
		bool peek = !piped && t->tn_o.http && d->dr_up && t->tn_o.keep_client &&
		    d->dr_frame.kind == HTTP_RESP_CHUNKED;
		/* 3. read: into the pipe (splice) or the buffer (copy); one error path */
		ssize_t n = piped ? splice(d->dr_src, NULL, d->dr_pipe[1], NULL, want,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK) : recv(d->dr_src, d->dr_buf, want,
		    MSG_DONTWAIT | (peek ? MSG_PEEK : 0));
		if (n < 0) {
			switch (io_fail_kind()) {
			case IO_RETRY:
				continue;
			case IO_WAIT:
				/* Nothing to move: an idle direction holds neither a pipe (empty
				 * here: idle tunnels cost two fds, not six) nor, relaying CONNECT
				 * bytes, a copy buffer (empty too: everything read was written) */
				if (piped)
					dir_pipe_put(d);
				else if (!t->tn_o.http)
					dir_drop_buf(d);
				dir_wait_read(d);
				return;
			case IO_ERROR:
				break;
			}
			dir_fail(d, io_error_reason(d, true));
			return;
		}
		moved += (size_t)n;
		if (piped) {
			if (n == 0)
				d->dr_eof = true;
			d->dr_inpipe = (size_t)n;
			continue;
		}
		if (n == 0) {
			if (!d->dr_up && t->tn_o.http && d->dr_want_head) {
				dir_fail(d, d->dr_headlen == 0 ? REASON_UPSTREAM_RESET :
				    REASON_BAD_RESPONSE);
				return;
			}
			if (d->dr_up && t->tn_o.http) {
				/* The client stopped sending; the response may still come. A body cut
				 * short is the origin's problem to detect (its framing). */
				t->tn_client_eof = true;
				d->dr_done = true;
				event_del(d->dr_rev);
				return;
			}
			d->dr_eof = true;
			continue;
		}
		t->tn_last_ms = mono_msec();
		if (!d->dr_up)
			t->tn_up_any = true;
		d->dr_boff = 0;
		d->dr_blen = (size_t)n;
		if (d->dr_up && t->tn_o.http) {
			bool done;
			long k = http_body_framer_feed(&d->dr_frame, d->dr_buf, (size_t)n, &done);

			if (k < 0) {
				dir_fail(d, REASON_BAD_FRAMING);
				return;
			}
			if (peek && k > 0) {
				/* take what was looked at, up to the body's end (the same bytes) */
				ssize_t got;

				do
					got = recv(d->dr_src, d->dr_buf, (size_t)k, MSG_DONTWAIT);
				while (got < 0 && errno == EINTR);
				if (got != (ssize_t)k) {
					dir_fail(d, got < 0 ? io_error_reason(d, true) :
					    REASON_CLOSE_ERROR);
					return;
				}
			}
			d->dr_blen = (size_t)k;
		} else if (!d->dr_up && t->tn_o.http && d->dr_want_head) {
			char tmp[TUNNEL_BUF];
			memcpy(tmp, d->dr_buf, (size_t)n);
			d->dr_blen = 0;
			r = relay_http_take_head(d, tmp, (size_t)n, &why);
			if (r < 0) {
				dir_fail(d, why);
				return;
			}
		} else if (!d->dr_up && t->tn_o.http) {
			long k = relay_http_frame_body(d, d->dr_buf, (size_t)n);
			if (k < 0) {
				dir_fail(d, REASON_BAD_RESPONSE);
				return;
			}
			d->dr_blen = (size_t)k;
		}
	}
	/* Fairness: yield, come back when the loop runs again. */
	event_active(d->dr_rev, EV_READ, 0);
}

void
tunnel_ev_read(evutil_socket_t fd, short what, void *arg)
{
	dir_run(arg);
}

void
tunnel_ev_write(evutil_socket_t fd, short what, void *arg)
{
	dir_run(arg);
}

/* The tunnel's five events (two per direction, the timer) live in its own allocation,
 * after the struct: one calloc and one free per tunnel instead of six of each. libevent
 * says how large a struct event is (event_get_struct_event_size); event_assign fills
 * one in place. */
#define TUNNEL_NEV 5

static size_t
tunnel_ev_size(void)
{
	size_t a = _Alignof(max_align_t);

	return (event_get_struct_event_size() + a - 1) / a * a;
}

static struct event *
tunnel_ev_slot(struct tunnel *t, int i)
{
	size_t a = _Alignof(max_align_t);
	size_t off = (sizeof(*t) + a - 1) / a * a;

	return (struct event *)(void *)((char *)t + off + (size_t)i * tunnel_ev_size());
}

struct event *
tunnel_ev_assign(struct tunnel *t, int slot, int fd, short what, event_callback_fn fn,
    void *arg)
{
	struct event *ev = tunnel_ev_slot(t, slot);

	return event_assign(ev, t->tn_base, fd, what, fn, arg) == 0 ? ev : NULL;
}

struct tunnel *
tunnel_new(struct event_base *base, struct pipe_pool *pool, int cfd, int ufd,
    const void *to_client, size_t nclient, const void *to_upstream, size_t nupstream,
    const void *pending, size_t npending, const struct tunnel_opts *opts,
    tunnel_done_cb cb, void *arg)
{
	size_t a = _Alignof(max_align_t);
	struct tunnel *t = calloc(1, (sizeof(*t) + a - 1) / a * a + TUNNEL_NEV * tunnel_ev_size());

	if (t == NULL)
		return NULL;
	t->tn_base = base;
	t->tn_pool = pool;
	t->tn_cfd = cfd;
	t->tn_ufd = ufd;
	t->tn_o = *opts;
	if (t->tn_o.http)
		t->tn_o.splice = false;
	if (t->tn_o.idle_ms == 0)
		t->tn_o.idle_ms = 300000;
	if (t->tn_o.lifetime_ms == 0)
		t->tn_o.lifetime_ms = UINT32_MAX;
	t->tn_start_ms = t->tn_last_ms = mono_msec();
	t->tn_cb = cb;
	t->tn_arg = arg;
	t->tn_first_close = REASON_ALLOWED;
	/* Both directions are whole before anything can fail: tunnel_free walks both, and
	 * a direction without its tunnel or with pipe fds 0 would give fd 0 to the pool. */
	for (int i = 0; i < 2; i++) {
		t->tn_d[i].dr_t = t;
		t->tn_d[i].dr_pipe[0] = t->tn_d[i].dr_pipe[1] = -1;
	}
	for (int i = 0; i < 2; i++) {
		struct dir *d = &t->tn_d[i];
		const void *pre = i == 0 ? to_upstream : to_client;
		size_t npre = i == 0 ? nupstream : nclient;

		d->dr_up = i == 0;
		d->dr_src = i == 0 ? cfd : ufd;
		d->dr_dst = i == 0 ? ufd : cfd;
		d->dr_use_pipe = t->tn_o.splice;
		d->dr_rev = tunnel_ev_assign(t, TUNNEL_EV_READ(i), d->dr_src,
		    EV_READ | (t->tn_o.http ? 0 : EV_PERSIST), tunnel_ev_read, d);
		d->dr_wev = tunnel_ev_assign(t, TUNNEL_EV_WRITE(i), d->dr_dst,
		    EV_WRITE | (t->tn_o.http ? 0 : EV_PERSIST), tunnel_ev_write, d);
		if (d->dr_rev == NULL || d->dr_wev == NULL)
			goto fail;
		if (npre > 0) {
			/* exactly what is pre-sent (the 39-byte 200 line): an idle spliced tunnel
			 * should not hold a 16 KiB copy buffer it never uses */
			if (!tunnel_dir_reserve(d, npre))
				goto fail;
			memcpy(d->dr_buf, pre, npre);
			d->dr_blen = npre;
			if (i == 1)
				d->dr_nocount = npre;
		}
	}
	struct dir *c2u = &t->tn_d[0];
	if (t->tn_o.http && t->tn_o.retry && t->tn_o.req_body == 0 && nupstream > 0) {
		if ((t->tn_rhead = malloc(nupstream)) == NULL)
			goto fail;
		memcpy(t->tn_rhead, to_upstream, nupstream);
		t->tn_nrhead = nupstream;
	}
	if (t->tn_o.http) {
		bool done;
		long k;

		http_body_framer_init(&c2u->dr_frame, t->tn_o.req_body == 1 ? HTTP_RESP_LENGTH :
		    t->tn_o.req_body == 2 ? HTTP_RESP_CHUNKED : HTTP_RESP_NONE,
		    t->tn_o.req_body_len);
		t->tn_d[1].dr_want_head = true;
		/* Client bytes after the head are request body: frame them, drop the excess
		 * (it would be a pipelined request, which is a new hop). */
		k = http_body_framer_feed(&c2u->dr_frame, pending, npending, &done);
		if (k < 0) {
			errno = EINVAL;
			goto fail;
		}
		npending = (size_t)k;
	}
	if (npending > 0) {
		if (!tunnel_dir_reserve(c2u, c2u->dr_blen + npending > TUNNEL_BUF ? c2u->dr_blen + npending :
		    TUNNEL_BUF))
			goto fail;
		memcpy(c2u->dr_buf + c2u->dr_blen, pending, npending);
		c2u->dr_blen += npending;
	}
	/* Start from the loop, never from inside tunnel_new (the caller's state must be
	 * consistent before the callback can fire). */
	t->tn_timer = tunnel_ev_assign(t, TUNNEL_EV_TIMER, -1, 0, timer_cb, t);
	if (t->tn_timer == NULL)
		goto fail;
	timer_arm(t);
	for (int i = 0; i < 2; i++) {
		struct dir *d = &t->tn_d[i];

		/* A CONNECT tunnel's read events are added now, also with bytes to send first
		 * (the 200, the client's early bytes or ClientHello): added while the caller's
		 * bufferevent (if it has one) still has the client socket registered, the
		 * socket never leaves the epoll set (no DEL and ADD). dir_run always sends what
		 * is buffered before it reads, so order holds. The event is level-triggered:
		 * bytes that arrived before this are reported at once, no speculative read is
		 * needed. */
		if (!t->tn_o.http)
			event_add(d->dr_rev, NULL);
		if (t->tn_o.http || d->dr_blen > 0) {
			d->dr_fresh = !t->tn_o.http;
			event_active(d->dr_rev, EV_READ, 0);
		}
	}
	return t;
fail:
	t->tn_cfd = t->tn_ufd = -1;        /* the caller keeps the fds */
	tunnel_free(t);
	return NULL;
}
