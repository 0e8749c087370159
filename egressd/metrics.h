/*
 * metrics - egressd's counters and their Prometheus text exposition.
 *
 * Owns: struct metrics_stats (embedded in the daemon; plain counters updated on the loop
 * thread) and the optional loopback HTTP listener serving GET /metrics (evhttp).
 * Callers: session (decisions, latencies, bytes), daemon (listener), tests.
 */
#ifndef EGRESS_METRICS_H
#define EGRESS_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/reasons.h"

struct event_base;
struct grants;
struct dlog;
struct metrics_server;

#define METRICS_BUCKETS 12

struct metrics_histo {
	uint64_t bucket[METRICS_BUCKETS];   /* cumulative at render time, not here */
	uint64_t count;
	uint64_t sum_us;
};

struct metrics_stats {
	uint64_t decisions[2][REASON__COUNT];   /* [0] deny, [1] allow: one per decision record */
	uint64_t closes[REASON__COUNT];         /* one per close record, by its reason */
	uint64_t failed[REASON__COUNT];         /* allowed hops that then failed (see below) */
	uint64_t bytes_up;
	uint64_t bytes_down;
	uint64_t connections_total;
	struct metrics_histo dns;
	struct metrics_histo connect;
	const struct dlog *dlog;    /* the decision log, for its syslog mirror's counters
	                               (read at render time; NULL: none) */
};

/* Upper bounds of the histogram buckets, in seconds. */
extern const double metrics_bucket_s[METRICS_BUCKETS];

/* Count one latency sample (microseconds) into its bucket. */
void metrics_observe(struct metrics_histo *h, uint64_t us);
/* Count one hop decision (allow nonzero: verdict allow) with its reason: once per decision
 * record written (outer hops, redirects, SNI checks, inner requests of an interception).
 * m may be NULL. */
void metrics_decision(struct metrics_stats *m, int allow, enum reason r);
/* A dlog callback (arg: the struct metrics_stats) counting one allow once its record is
 * written: for an allow whose hop ended while its record was on its way (the hop's own
 * callback, which counts it, is gone with the hop; dlog_ticket_retarget). */
void metrics_allow_written(int err, void *arg);
/* Count one close record with its reason. A reason that is a refusal (it has an HTTP
 * status: upstream failure, the proxy's 407, revocation, audit) also counts the hop as
 * failed: it was allowed, then did not get through. m may be NULL. */
void metrics_close(struct metrics_stats *m, enum reason r);
/* An allowed hop that failed and whose record says so otherwise (an intercepted request's
 * deny record after its allow). m may be NULL. */
void metrics_hop_failed(struct metrics_stats *m, enum reason r);

/*
 * Render the exposition into a new malloc'd string (*len set); NULL on ENOMEM. Reads the
 * per-principal gauges from the grant registry (may be NULL).
 */
char *metrics_render(const struct metrics_stats *m, struct grants *g, size_t *len);

/* Serve GET /metrics on sa (loopback; config checked it). NULL with err on failure. */
struct metrics_server *metrics_server_new(struct event_base *base, const struct sockaddr *sa,
    socklen_t salen, const struct metrics_stats *m, struct grants **g, char *err,
    size_t errlen);
/* Stop serving; accepts NULL. */
void metrics_server_free(struct metrics_server *s);

#endif
