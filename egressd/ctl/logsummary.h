/*
 * logsummary - `egressctl log summary`: aggregate decision-log records per principal and
 * per principal and destination: decisions, allows, denials by reason, bytes (from close
 * records), first and last seen, routes used, unattested share; plus a per-minute
 * timeline and totals. Output as text, JSON, or one self-contained HTML report
 * (egressd/ctl/report_html.h).
 *
 * Owns: the summary, a jansson object (schema below) built incrementally; bounded by
 * EGRESS_AUDIT_KEYS_MAX distinct keys per map (later keys count under "(other)") and
 * EGRESS_AUDIT_MINUTES_MAX timeline minutes. Callers: egressctl, tests/test_logsummary.c.
 *
 * Summary object (logsummary_finish):
 *   { "records", "decisions", "allow", "deny", "closes", "bad_hash", "malformed",
 *     "first", "last",                      RFC 3339 strings or null
 *     "denials_by_reason": {reason: n},
 *     "destinations": {dest: STATS},        over all principals
 *     "principals": {principal: STATS + "destinations": {dest: STATS}},
 *     "timeline": {"bucket_s": N, "buckets": [{"start": RFC3339, "allow": n, "deny": n}]},
 *     "timeline_dropped": n }
 *   STATS = { "decisions", "allow", "deny", "closes", "denials_by_reason": {reason: n},
 *     "bytes_up", "bytes_down", "first", "last", "routes": {route: n}, "unattested" (allowed
 *     hops whose address egressd did not observe: attested false),
 *     "unattested_share" (0..1, of the allowed hops) }
 */
#ifndef EGRESS_LOGSUMMARY_H
#define EGRESS_LOGSUMMARY_H

#include <jansson.h>
#include <stdio.h>

#include "egressd/ctl/logread.h"

/* Keys no principal, destination or reason can take (they are not valid ones). */
#define LOGSUMMARY_OTHER   "(other)"
#define LOGSUMMARY_NONE    "(none)"

struct logsummary;

/* A new, empty summary (NULL on ENOMEM). */
struct logsummary *logsummary_new(void);

/* Count one record. Returns 0, or -1 on ENOMEM. */
int logsummary_add(struct logsummary *s, const struct logrec *rec);

/* Add a reader's malformed/bad-hash counters (after reading a file). */
/* Follow the chain position over every record read (also those a filter drops): seq gaps
 * count as "deleted", seq going back as "reordered". */
void logsummary_track(struct logsummary *s, const struct logrec *r);

void logsummary_add_counters(struct logsummary *s, const struct logread *r);

/* Compute derived values (shares, timeline) and return the summary object; the
 * reference belongs to s (valid until logsummary_free). Call once, after the last add. */
json_t *logsummary_finish(struct logsummary *s);

/* Accepts NULL. */
void logsummary_free(struct logsummary *s);

/* Plain-text report of a finished summary (terminal-safe: control bytes become '?'). */
void logsummary_print_text(FILE *out, json_t *sum);

/* egressctl log summary ARGS: exit 0, 1 (read/write error), 2 usage. */
int logsummary_cli(int argc, char **argv);

#endif
