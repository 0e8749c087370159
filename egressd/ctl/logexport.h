/*
 * logexport - `egressctl log export --format squid`: decision-log records as Squid
 * native access.log lines, so SIEM parsers for Squid ingest egress decisions unchanged:
 *
 *   time.ms elapsed client result/status bytes method URL user hierarchy/peer type
 *
 * One line per hop. A denied hop is written at its decision; an allowed hop when its
 * close record arrives (time = close time, elapsed = duration, bytes = bytes_down as
 * Squid counts bytes sent to the client); an allowed hop without a close by the end of
 * the input is written last with bytes 0 and elapsed 0. The mapping of reasons to Squid
 * result codes is documented in docs/audit.md and is logexport_result().
 *
 * Owns: a bounded table (EGRESS_AUDIT_PENDING_MAX) of allowed hops waiting for their
 * close; past it the oldest is written without its close. Callers: egressctl,
 * tests/test_logexport.c.
 */
#ifndef EGRESS_LOGEXPORT_H
#define EGRESS_LOGEXPORT_H

#include <stdio.h>

#include "egressd/ctl/logread.h"

struct logexport;

/* New exporter writing to out (not owned). NULL on ENOMEM. */
struct logexport *logexport_new(FILE *out);

/* Feed one record (decision or close; other events are ignored). Returns 0, -1 ENOMEM. */
int logexport_add(struct logexport *x, const struct logrec *rec);

/* Write the allowed hops still waiting for a close, then free. Accepts NULL. */
void logexport_finish(struct logexport *x);

/*
 * Squid result code and HTTP status for a decision: allow CONNECT -> TCP_TUNNEL/200,
 * allow other methods -> TCP_MISS/200, deny with a 4xx reason -> TCP_DENIED/<status>,
 * deny with a 5xx reason -> NONE/<status> (as Squid logs an upstream failure). code gets
 * a static string.
 */
void logexport_result(const char *verdict, const char *method, const char *reason,
    const char **code, int *status);

/* egressctl log export ARGS: exit 0, 1 (read error), 2 usage. */
int logexport_cli(int argc, char **argv);

#endif
