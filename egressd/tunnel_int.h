/*
 * tunnel_int - the internals of one tunnel, shared by tunnel.c (moving bytes) and
 * relay_http.c (the HTTP/1.1 exchange of the forwarding mode). Nobody else includes this
 * header: the tunnel's contract is tunnel.h.
 */
#ifndef EGRESS_TUNNEL_INT_H
#define EGRESS_TUNNEL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/util.h>

#include "common/reasons.h"
#include "egressd/http.h"
#include "egressd/tunnel.h"

#define TUNNEL_BUF      16384

struct connector;
struct tunnel;

struct dir {
	struct tunnel *dr_t;
	bool dr_up;                 /* client -> upstream */
	int dr_src, dr_dst;
	struct event *dr_rev, *dr_wev;
	bool dr_use_pipe;
	int dr_pipe[2];
	bool dr_pipe_big;           /* dr_pipe is one of the pool's big pipes */
	size_t dr_inpipe;
	char *dr_buf;               /* copy buffer / pending bytes */
	size_t dr_nocount;          /* leading bytes that are egressd's own (the 200 line):
	                               not bytes the destination sent, so not counted */
	size_t dr_boff, dr_blen, dr_bcap;
	bool dr_eof, dr_done;
	bool dr_fresh;              /* CONNECT start: after flushing what tunnel_new queued,
	                               wait for bytes instead of a read bound to find none */
	uint64_t dr_bytes;
	/* HTTP mode: the body this direction carries, framed by http.h's one body framer
	 * (client -> upstream: the request's; upstream -> client: the response's, set when
	 * its final head arrives, docs/redirects.md) */
	struct http_body_framer dr_frame;
	/* http response head (upstream -> client) */
	bool dr_want_head;
	char *dr_head;
	size_t dr_headlen;
	bool dr_resp_done;          /* the whole response is in buf (or was written) */
	bool dr_final_started;      /* a final response head was queued for the client */
};

struct tunnel {
	struct event_base *tn_base;
	struct pipe_pool *tn_pool;
	int tn_cfd, tn_ufd;
	struct dir tn_d[2];         /* 0: client->upstream, 1: upstream->client */
	struct event *tn_timer;
	struct tunnel_opts tn_o;
	uint64_t tn_start_ms, tn_last_ms;
	tunnel_done_cb tn_cb;
	void *tn_arg;
	enum reason tn_first_close;
	bool tn_closing;
	bool tn_over_budget;
	bool tn_keep;               /* the final response may leave the client connection open */
	bool tn_keep_cfd;           /* hand the client socket back instead of closing it */
	bool tn_keep_ufd;           /* ... and the upstream socket (keep_upstream) */
	bool tn_resp_reusable;      /* HTTP/1.1 final response without Connection: close */
	bool tn_up_dirty;           /* the origin sent bytes after the framed response */
	bool tn_up_any;             /* the origin sent at least one byte on this socket */
	bool tn_retried;            /* the one retry on a fresh connection was made */
	struct connector *tn_retry_conn; /* ... and is connecting (relay_http.c) */
	char *tn_rhead;             /* the forwarded head, kept for that retry */
	size_t tn_nrhead;
	bool tn_client_eof;
	char *tn_refusal;           /* on_response's refusal, sent instead of the response */
	size_t tn_nrefusal;
};

/* tunnel.c */
/* End the tunnel once: a refusal the client can still be told is sent, the callback
 * runs, everything is freed. */
void tunnel_end(struct tunnel *t, enum reason why);
/* Grow d's buffer to at least cap bytes; false on ENOMEM (nothing changed). */
bool tunnel_dir_reserve(struct dir *d, size_t cap);
/* The tunnel's events live in its own allocation, in these slots; tunnel_ev_assign
 * (re)fills one (not pending) for fd and returns it, or NULL. */
#define TUNNEL_EV_READ(dir)     (dir)
#define TUNNEL_EV_WRITE(dir)    (2 + (dir))
#define TUNNEL_EV_TIMER         4
struct event *tunnel_ev_assign(struct tunnel *t, int slot, int fd, short what,
    event_callback_fn fn, void *arg);
/* The event callbacks of a direction (arg is the struct dir). */
void tunnel_ev_read(evutil_socket_t fd, short what, void *arg);
void tunnel_ev_write(evutil_socket_t fd, short what, void *arg);

/* relay_http.c */
/* How many of n response bytes belong to the body; sets resp_done at its end. -1: bad
 * chunked framing. */
long relay_http_frame_body(struct dir *d, const char *p, size_t n);
/* Accumulate, check, pass on or judge a response head; 0 (more needed or done), -1 with
 * *why. */
int relay_http_take_head(struct dir *d, const char *p, size_t n, enum reason *why);
/* The response was delivered: keep or close the connections, end the tunnel. */
void relay_http_delivered(struct tunnel *t);
/* Retry the request once on a fresh upstream connection; false when not allowed. */
bool relay_http_retry_fresh(struct tunnel *t);

#endif
