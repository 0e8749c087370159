/*
 * dlog_syslog - an optional mirror of decision-log records to syslog (egressd.ini
 * log_syslog), RFC 5424 with structured data, for central pipelines.
 *
 * One datagram per record, sent after the record is in the file (the file is the record
 * of truth and the chain; the mirror is best effort): non-blocking, never retried, a
 * failed or refused send is counted and dropped, so a slow or absent collector never
 * delays a decision. Message:
 *
 *   <PRI>1 TIME HOST egressd PID EVENT [egress@32473 seq="N" hash="..." principal="..."
 *     verdict="..." reason="..." dest="..." route="..." attested="true"] {the JSON line}
 *
 * PRI: facility 13 (log audit); severity notice (5) for a deny, info (6) otherwise. TIME
 * is the record's time. The SD-ID uses enterprise number 32473, the one RFC 5612 reserves
 * for documentation: collectors match on "egress@32473". MSG is the record's original
 * line, so a receiver can still check its hash.
 *
 * Owns: one datagram socket. Called from dlog's writer thread only.
 * Callers: egressd/dlog.c, tests/test_logsyslog.c.
 */
#ifndef EGRESS_DLOG_SYSLOG_H
#define EGRESS_DLOG_SYSLOG_H

#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

#define DLOG_SYSLOG_SDID     "egress@32473"
#define DLOG_SYSLOG_FACILITY 13
#define DLOG_SYSLOG_MSG_MAX  (EGRESS_LOG_RECORD_MAX + 4096)  /* header + SD + the line */

struct dlog_syslog;

/*
 * Open a mirror to target: "unix:/dev/log" (a datagram unix socket) or "udp:IP:PORT"
 * ("udp:[v6]:port" for IPv6; a literal address: no DNS on this path). Returns NULL with
 * a message in err.
 */
struct dlog_syslog *dlog_syslog_open(const char *target, char *err, size_t errlen);

/* Accepts NULL. */
void dlog_syslog_close(struct dlog_syslog *s);

/*
 * Format one record line (len bytes, no newline) as an RFC 5424 message into out (cap
 * bytes). Returns the message length, or -1 when the line is not a JSON record or the
 * message would not fit.
 */
int dlog_syslog_format(const char *line, size_t len, const char *host, long pid, char *out,
    size_t cap);

/* Send every complete line of buf (the bytes just written to the log). */
void dlog_syslog_send_lines(struct dlog_syslog *s, const char *buf, size_t len);

/* Messages sent and dropped (send failed, or a line could not be formatted). */
void dlog_syslog_counts(const struct dlog_syslog *s, uint64_t *sent, uint64_t *dropped);

#endif
