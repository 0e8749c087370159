/*
 * connector - connect to the first address of an ordered list that answers (Happy
 * Eyeballs, RFC 8305 simplified): a new attempt to the next address starts when the ones
 * in flight have not connected within stagger_us, or at once when one fails; at most
 * max_inflight are in flight; the first to connect wins and the others are closed; the
 * whole is bounded by a deadline.
 *
 * The one connector for address lists: the direct path (session.c: the checked
 * addresses, pinned - never re-resolved), upstream proxies (upstream.c: the proxy's
 * addresses, one at a time) and the one retry of a reused upstream connection
 * (relay_http.c: the same pinned address).
 * Owns: every attempt's socket and event until done runs; the winning socket then
 * belongs to the caller. Callers run on the event loop of base.
 */
#ifndef EGRESS_CONNECTOR_H
#define EGRESS_CONNECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/addr.h"

#define CONNECTOR_INFLIGHT_MAX 4

struct event_base;
struct connector;

struct connector_opts {
	unsigned max_inflight;  /* attempts in flight at once, 1..CONNECTOR_INFLIGHT_MAX */
	uint64_t stagger_us;    /* start another attempt when those in flight have not
	                           connected by then; 0: only when one fails (sequential) */
	uint64_t deadline_us;   /* mono_usec() time the whole must end by; 0: none (the
	                           caller bounds it) */
};

struct connector_result {
	int fd;                 /* the connected socket (now the caller's), or -1 */
	size_t idx;             /* the address that won (valid when fd >= 0) */
	int err;                /* on failure: the last error (0 when none was seen) */
	bool timed_out;         /* an attempt ran into the deadline */
	bool local_error;       /* a socket could not be made here (EMFILE, ENOMEM, ...) */
};

/* The end: called exactly once, from the event loop (never inside connector_start); the
 * connector frees itself after it returns, so forget the pointer there. */
typedef void (*connector_done_cb)(const struct connector_result *r, void *arg);
/* One address failed (err); the connector moves on. May be NULL; may run inside
 * connector_start (a connect refused at once). */
typedef void (*connector_fail_cb)(size_t idx, int err, void *arg);

/*
 * Start connecting to addrs[0..n) at port (addrs is copied). Returns NULL on ENOMEM
 * (nothing started, no callback).
 */
struct connector *connector_start(struct event_base *base, const struct addr *addrs,
    size_t n, uint16_t port, const struct connector_opts *o, connector_done_cb done,
    connector_fail_cb failed, void *arg);

/* Cancel: close every attempt; done is not called. Accepts NULL. Not from inside done. */
void connector_free(struct connector *c);

#endif
