/*
 * dlog_syslog - an optional mirror of decision-log records to syslog (egressd.ini
 * log_syslog), RFC 5424 with structured data, for central pipelines.
 *
 * The file is the record of truth and the chain; the mirror is best effort, but its loss
 * is never silent. Records are handed over after they are in the file; nothing here ever
 * delays or refuses a decision. Transports:
 *
 *   unix:/dev/log, udp:IP:PORT    one datagram per record, non-blocking, never retried
 *                                 (a datagram's loss at the collector cannot be seen)
 *   tcp://IP:PORT, tls://IP:PORT  a stream (egressd/syslog_stream.h), octet-counting
 *                                 framing (RFC 6587), TLS per RFC 5425 verified against
 *                                 log_syslog_ca; a bounded spool holds records while the
 *                                 collector is away and sends them in order when it is
 *                                 back; reconnects with bounded exponential backoff
 *
 * A record that cannot be handed over (a datagram send failed; the stream's spool is
 * full: the newest records are dropped) is counted (metrics), warned about once per
 * episode in egressd's own log, and, when the episode ends (a record goes through again)
 * or at stop, written into the decision log itself as a "syslog_loss" record with the
 * count and seq range (dlog_syslog_loss_take; docs/decision-log.md).
 *
 * Message (one per record):
 *
 *   <PRI>1 TIME HOST egressd PID EVENT [egress@32473 seq="N" hash="..." principal="..."
 *     verdict="..." reason="..." dest="..." route="..." attested="true"] {the JSON line}
 *
 * PRI: facility 13 (log audit); severity notice (5) for a deny, info (6) otherwise. TIME
 * is the record's time. The SD-ID uses enterprise number 32473, the one RFC 5612 reserves
 * for documentation: collectors match on "egress@32473". MSG is the record's original
 * line, so a receiver can still check its hash. On a stream each message is framed as
 * "LEN SP MSG" (LEN: decimal octets of MSG).
 *
 * Owns: the datagram socket or the stream. Called from dlog (its writer thread, or the
 * loop thread during an inline write: never both at once) and, for stats, any thread.
 * Callers: egressd/dlog.c, egressd/config.c and main.c (checks), metrics.c,
 * tests/test_logsyslog.c. The transports: egressd/syslog_stream.h (with syslog_tls.h
 * and syslog_spool.h).
 */
#ifndef EGRESS_DLOG_SYSLOG_H
#define EGRESS_DLOG_SYSLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/limits.h"

#define DLOG_SYSLOG_SDID     "egress@32473"
#define DLOG_SYSLOG_FACILITY 13
#define DLOG_SYSLOG_MSG_MAX  (EGRESS_LOG_RECORD_MAX + 4096)  /* header + SD + the line */
#define DLOG_SYSLOG_FRAME_MAX (DLOG_SYSLOG_MSG_MAX + 16)     /* "LEN " + MSG */

struct dlog_syslog;

enum dlog_syslog_kind {
	DLOG_SYSLOG_UNIX = 0,
	DLOG_SYSLOG_UDP,
	DLOG_SYSLOG_TCP,
	DLOG_SYSLOG_TLS,
};

struct dlog_syslog_config {
	const char *target;     /* unix:/path, udp:IP:PORT, tcp://IP:PORT, tls://IP:PORT
	                           (literal addresses, "[v6]:port" for IPv6: no DNS here) */
	const char *ca;         /* tls: CA file the collector's certificate must chain to */
	const char *name;       /* tls: the name its certificate must carry; NULL = the
	                           target's address (an IP SAN) */
	const char *cert;       /* tls: optional client certificate (PEM chain) ... */
	const char *key;        /* ... and its key */
	uint64_t spool_max;     /* tcp/tls: 0 = EGRESS_SYSLOG_SPOOL_DEFAULT */
};

/*
 * Parse a target: its kind and address. Returns 0, or -1 with a message saying which
 * forms are accepted.
 */
int dlog_syslog_target_parse(const char *target, enum dlog_syslog_kind *kind,
    struct sockaddr_storage *ss, socklen_t *sl, char *err, size_t errlen);

/*
 * Check a configuration as dlog_syslog_open will use it, without opening a socket: the
 * target, the TLS settings belonging to it (tls:// needs log_syslog_ca; cert and key go
 * together), the spool size; with files, also that the TLS files load and the key
 * matches the certificate (egressd -t and start-up, as root; a reload parses without:
 * the key is root-only). Returns 0 or -1 with err.
 */
int dlog_syslog_check(const struct dlog_syslog_config *c, bool files, char *err,
    size_t errlen);

/* Open the mirror (a stream starts connecting at once, in its own thread). NULL with
 * err. */
struct dlog_syslog *dlog_syslog_open(const struct dlog_syslog_config *c, char *err,
    size_t errlen);

/*
 * Stop handing over: a stream gets at most EGRESS_SYSLOG_CLOSE_MS to deliver what it
 * holds; what it could not is counted as lost (then dlog_syslog_loss_take reports it).
 * Accepts NULL. dlog_syslog_close follows.
 */
void dlog_syslog_stop(struct dlog_syslog *s);
/* Accepts NULL. */
void dlog_syslog_close(struct dlog_syslog *s);

/*
 * Format one record line (len bytes, no newline) as an RFC 5424 message into out (cap
 * bytes). Returns the message length, or -1 when the line is not a JSON record or the
 * message would not fit.
 */
int dlog_syslog_format(const char *line, size_t len, const char *host, long pid, char *out,
    size_t cap);

/*
 * Octet-counting framing (RFC 6587 3.4.1): "LEN SP MSG" into out (cap bytes). Returns the
 * frame's length, or -1 when it does not fit (or len is 0: a message is never empty).
 */
int dlog_syslog_frame(const char *msg, size_t len, char *out, size_t cap);

/* Hand over every complete line of buf (the bytes just written to the log). */
void dlog_syslog_send_lines(struct dlog_syslog *s, const char *buf, size_t len);

/*
 * A loss due for a "syslog_loss" record: an episode of dropped records that ended (or,
 * after dlog_syslog_stop, everything not delivered). true with the count and the seq
 * range (first..last; a merged report may cover seqs that were delivered) and clears it;
 * give it back with dlog_syslog_loss_restore when the record cannot be queued.
 */
bool dlog_syslog_loss_take(struct dlog_syslog *s, uint64_t *count, uint64_t *first,
    uint64_t *last);
void dlog_syslog_loss_restore(struct dlog_syslog *s, uint64_t count, uint64_t first,
    uint64_t last);

/* The mirror's state for metrics and status (any thread). */
struct dlog_syslog_stats {
	char target[160];
	const char *transport;      /* "unix", "udp", "tcp", "tls" */
	bool connected;             /* stream: a connection is up (datagram: always true) */
	uint64_t sent;              /* messages written (a stream counts resent ones again) */
	uint64_t dropped;           /* records lost to the mirror (spool full, send failed) */
	uint64_t loss_episodes;     /* runs of consecutive drops */
	uint64_t resent;            /* stream: records written again after a reconnect */
	uint64_t connects, failures;  /* stream: connections made, connections lost/refused */
	uint64_t spool_records, spool_bytes, spool_max;  /* stream: held now, and the bound */
	char error[256];            /* stream: why the last connection failed ("" when up) */
};
void dlog_syslog_stats(struct dlog_syslog *s, struct dlog_syslog_stats *out);

#endif
