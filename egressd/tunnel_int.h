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

#include <event2/util.h>

#include "common/reasons.h"
#include "egressd/http.h"
#include "egressd/tunnel.h"

#define TUNNEL_BUF      16384

struct connector;
struct tunnel;

struct dir {
	struct tunnel *t;
	bool up;                    /* client -> upstream */
	int src, dst;
	struct event *rev, *wev;
	bool use_pipe;
	int pipe[2];
	size_t inpipe;
	char *buf;                  /* copy buffer / pending bytes */
	size_t nocount;             /* leading bytes that are egressd's own (the 200 line):
	                               not bytes the destination sent, so not counted */
	size_t boff, blen, bcap;
	bool eof, done;
	bool fresh;                 /* CONNECT start: after flushing what tunnel_new queued,
	                               wait for bytes instead of a read bound to find none */
	uint64_t bytes;
	/* http request body framing (client -> upstream) */
	int body;
	uint64_t body_left;
	struct http_chunked ch;
	/* http response head (upstream -> client) */
	bool want_head;
	char *head;
	size_t headlen;
	/* http response body framing (upstream -> client, docs/redirects.md) */
	int rbody;                  /* RB_* */
	uint64_t rleft;
	struct http_chunked rch;
	bool resp_done;             /* the whole response is in buf (or was written) */
	bool final_started;         /* a final response head was queued for the client */
};

enum { RB_NONE = HTTP_RESP_NONE, RB_LENGTH = HTTP_RESP_LENGTH, RB_CHUNKED = HTTP_RESP_CHUNKED,
	RB_CLOSE = HTTP_RESP_CLOSE };

struct tunnel {
	struct event_base *base;
	struct pipe_pool *pool;
	int cfd, ufd;
	struct dir d[2];            /* 0: client->upstream, 1: upstream->client */
	struct event *timer;
	struct tunnel_opts o;
	uint64_t start_ms, last_ms;
	tunnel_done_cb cb;
	void *arg;
	enum reason first_close;
	bool closing;
	bool over_budget;
	bool keep;                  /* the final response may leave the client connection open */
	bool keep_cfd;              /* hand the client socket back instead of closing it */
	bool keep_ufd;              /* ... and the upstream socket (keep_upstream) */
	bool resp_reusable;         /* HTTP/1.1 final response without Connection: close */
	bool up_dirty;              /* the origin sent bytes after the framed response */
	bool up_any;                /* the origin sent at least one byte on this socket */
	bool retried;               /* the one retry on a fresh connection was made */
	struct connector *retry_conn;   /* ... and is connecting (relay_http.c) */
	char *rhead;                /* the forwarded head, kept for that retry */
	size_t nrhead;
	bool client_eof;
	char *refusal;              /* on_response's refusal, sent instead of the response */
	size_t nrefusal;
};

/* tunnel.c */
/* End the tunnel once: a refusal the client can still be told is sent, the callback
 * runs, everything is freed. */
void tunnel_end(struct tunnel *t, enum reason why);
/* Grow d's buffer to at least cap bytes; false on ENOMEM (nothing changed). */
bool tunnel_dir_reserve(struct dir *d, size_t cap);
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
