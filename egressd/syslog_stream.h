/*
 * syslog_stream - the decision-log mirror's stream transport: TCP, optionally TLS
 * (RFC 5425), octet-counting framing (RFC 6587 3.4.1: "LEN SP MSG"), run by one thread
 * of its own so that neither the event loop nor the log's writer ever waits for a
 * collector.
 *
 * The producer (the dlog writer, or the loop thread in its inline write) only copies the
 * record lines into the spool (egressd/syslog_spool.h) under a mutex and wakes the
 * thread through an eventfd. The thread connects (non-blocking, bounded by
 * EGRESS_SYSLOG_CONNECT_MS, then the TLS handshake by EGRESS_SYSLOG_HANDSHAKE_MS),
 * formats each record (dlog_syslog_format), frames it and writes it, handling partial
 * writes; reads whatever the collector sends and discards it (bounded per wake-up: the
 * collector has nothing to say); reads the kernel's count of acknowledged bytes
 * (TCP_INFO tcpi_bytes_acked) to free the records the collector's TCP has; and after a
 * failure (refused, reset, closed by the collector, a handshake refused, no progress for
 * EGRESS_SYSLOG_STALL_MS) closes, keeps every unacknowledged record and reconnects with
 * exponential backoff (EGRESS_SYSLOG_BACKOFF_MIN_MS doubling to _MAX_MS), resending them
 * first, in seq order.
 *
 * What TCP cannot tell: bytes the collector's kernel acknowledged but the collector
 * process never wrote (it was killed with them in its buffers) are gone without a trace
 * on this side; docs/audit.md says so and how to find such gaps (seq numbers).
 *
 * Owns: the thread, the socket, the SSL object, the spool. Callers: egressd/dlog_syslog.c.
 */
#ifndef EGRESS_SYSLOG_STREAM_H
#define EGRESS_SYSLOG_STREAM_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct syslog_stream;
struct dlog_syslog_stats;

struct syslog_stream_config {
	const struct sockaddr *sa;  /* the collector (copied) */
	socklen_t salen;
	const char *url;            /* for messages: "tcp://198.51.100.20:514" */
	SSL_CTX *ctx;               /* stolen (freed with the stream); NULL = plain TCP */
	const char *name;           /* TLS: the name its certificate must carry; NULL =
	                               the address (an IP SAN) */
	uint64_t spool_max;
	const char *host;           /* HOSTNAME of the messages */
	long pid;
};

/* Start the thread (it connects at once). NULL with err on failure (cfg->ctx is freed). */
struct syslog_stream *syslog_stream_new(const struct syslog_stream_config *cfg, char *err,
    size_t errlen);

/*
 * Stop: the thread goes on writing what is spooled for at most EGRESS_SYSLOG_CLOSE_MS
 * when connected, then closes; records still unacknowledged are counted as lost
 * (syslog_stream_loss_take reports them). Accepts NULL.
 */
void syslog_stream_stop(struct syslog_stream *st);
/* Free (stops first when needed). Accepts NULL. */
void syslog_stream_free(struct syslog_stream *st);

/* Hand over the complete lines of buf (never blocks beyond the spool's mutex). */
void syslog_stream_push(struct syslog_stream *st, const char *buf, size_t len);

bool syslog_stream_loss_take(struct syslog_stream *st, uint64_t *count, uint64_t *first,
    uint64_t *last);
void syslog_stream_loss_restore(struct syslog_stream *st, uint64_t count, uint64_t first,
    uint64_t last);
void syslog_stream_stats(struct syslog_stream *st, struct dlog_syslog_stats *out);

#endif
