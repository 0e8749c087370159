/*
 * syslog_spool - the bounded queue of decision-log records waiting for (or in flight to) a
 * stream syslog collector, and the accounting of what the mirror lost.
 *
 * A record enters when the decision log wrote it and leaves when the collector's TCP
 * acknowledged every byte of its frame (egressd/syslog_stream.c reads the kernel's
 * count of acknowledged bytes): a record written into a connection that then broke is
 * sent again on the next one, from the first unacknowledged record, in seq order.
 *
 * Full spool: the NEWEST record is dropped (the one being pushed), never one already
 * queued: what the collector gets stays one gap-free run up to the overflow, the loss is
 * one contiguous seq range per episode, and records already half-written on the wire
 * are never pulled from under the sender. An episode (consecutive drops) ends when a
 * record is accepted again, which during an episode takes an eighth of the spool free
 * (not just room for that record: records differ in length, and an episode must not end
 * and begin again on every shorter one); its count and seq range are then due for a
 * "syslog_loss" record in the decision log (syslog_loss_take). Datagram transports have no spool but
 * account their failed sends through the same struct syslog_loss.
 *
 * Not thread-safe: the owner locks (syslog_stream.c: its mutex). Callers:
 * egressd/syslog_stream.c, egressd/dlog_syslog.c, tests/test_syslog_spool.c.
 */
#ifndef EGRESS_SYSLOG_SPOOL_H
#define EGRESS_SYSLOG_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

/* Loss bookkeeping: an open episode, and ended episodes due for a record. */
struct syslog_loss {
	bool open;                  /* dropping now */
	uint64_t open_count, open_first, open_last;
	uint64_t due_count, due_first, due_last;   /* due_count 0: nothing due */
	uint64_t total;             /* records dropped since start (metrics) */
	uint64_t episodes;          /* episodes begun since start */
};

/* A record dropped (seq 0: unknown). Returns true when this drop begins an episode (the
 * caller warns the operator once per episode). */
bool syslog_loss_drop(struct syslog_loss *l, uint64_t seq);
/* A record went through: an open episode ends and becomes due. */
void syslog_loss_ok(struct syslog_loss *l);
/* End an open episode now (shutdown): it becomes due. */
void syslog_loss_flush(struct syslog_loss *l);
/* Take what is due (merged when several episodes ended): true and *count/first/last set,
 * or false when nothing is due. */
bool syslog_loss_take(struct syslog_loss *l, uint64_t *count, uint64_t *first,
    uint64_t *last);
/* Give back what syslog_loss_take returned (the record could not be queued). */
void syslog_loss_restore(struct syslog_loss *l, uint64_t count, uint64_t first,
    uint64_t last);

struct sspool_rec {
	TAILQ_ENTRY(sspool_rec) link;
	uint64_t seq;
	uint64_t end;               /* stream offset just past its frame; 0 = not written on
	                               this connection */
	size_t len;
	char line[];                /* the record line, no newline */
};
TAILQ_HEAD(sspool_q, sspool_rec);

struct syslog_spool {
	struct sspool_q q;
	struct sspool_rec *next;    /* first record not yet written on this connection */
	uint64_t max, used;         /* bytes: lines plus per-record overhead */
	size_t n;
	struct syslog_loss loss;
};

/* Bytes a record of len counts against the limit. */
#define SSPOOL_COST(len) ((uint64_t)sizeof(struct sspool_rec) + (uint64_t)(len))

void sspool_init(struct syslog_spool *sp, uint64_t max);
/* Free every record (the loss counters stay). */
void sspool_clear(struct syslog_spool *sp);

enum sspool_push {
	SSPOOL_QUEUED = 0,
	SSPOOL_DROPPED,             /* full (or no memory): dropped and counted */
	SSPOOL_DROPPED_FIRST,       /* ... and this drop begins an episode */
};
/* Copy one record in at the tail, or drop it (the newest) when it does not fit. */
enum sspool_push sspool_push(struct syslog_spool *sp, uint64_t seq, const char *line,
    size_t len);

/* The next record to write (NULL: everything is written). */
struct sspool_rec *sspool_next(struct syslog_spool *sp);
/* r (sspool_next's) is written completely; the stream offset after it is end (> 0). */
void sspool_sent(struct syslog_spool *sp, struct sspool_rec *r, uint64_t end);
/* The collector acknowledged the stream up to offset acked: free the records wholly
 * below it. Returns how many were freed. */
size_t sspool_acked(struct syslog_spool *sp, uint64_t acked);
/* The connection is gone: every record still held is to be written again on the next
 * connection (offsets restart at 0). Returns how many had been written. */
size_t sspool_rewind(struct syslog_spool *sp);

/* The seq of a record line ("seq":N near its start), 0 when not found. */
uint64_t sspool_line_seq(const char *line, size_t len);

#endif
