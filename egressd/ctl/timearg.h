/*
 * timearg - the time arguments of the audit commands (--since, --until, --at), in the
 * forms people type: a duration back from now ("90s", "30m", "1h", "2d", "1w"), "now",
 * a UTC date and time without seconds or zone ("2026-12-01 20:07", "2026-12-01T20:07"),
 * or what logread_time_parse takes (RFC 3339, "2026-12-01 20:07:05", a date alone).
 * Callers: logquery.c (and so summary and export), loggrants.c. No state.
 */
#ifndef EGRESS_TIMEARG_H
#define EGRESS_TIMEARG_H

#include <stdint.h>

/* Durations longer than this are refused (a typo, not a question about 1970). */
#define TIMEARG_AGO_MAX_S (100LL * 366 * 86400)

/* s to microseconds since the epoch (UTC); now_us is "now". Returns 0 or -1. */
int timearg_parse(const char *s, int64_t now_us, int64_t *us);

/* The current time in microseconds since the epoch. */
int64_t timearg_now_us(void);

#endif
