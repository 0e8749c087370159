/*
 * logfiles - which decision-log files the egressctl log commands read, and in which order.
 *
 * A rotated log is a set of files: <decision_log>.<last seq> for each rotation and the
 * current <decision_log> (docs/decision-log.md "Rotation"). A shell glob lists them in
 * name order (the current file first, ".1000" before ".999"), which is not the chain's
 * order; the chain's order is the seq of each file's first record. This module
 *   - orders a list of files by that first seq (logfiles_order), and
 *   - finds the set of the default log when the user gives no FILE (logfiles_default_set).
 *
 * Owns: the path strings of the default set (static storage, valid until the next
 * logfiles_default_set call; reachable, freed by logfiles_free). Every byte read is
 * hostile: only the first line of each file is read, bounded by EGRESS_LOG_RECORD_MAX.
 * Callers: egressctl (log verify), egressd/logquery.c (query, summary, export).
 */
#ifndef EGRESS_LOGFILES_H
#define EGRESS_LOGFILES_H

#include <stddef.h>

/* The log read when no FILE is given: egressctl --log, else the built-in default
 * (/var/log/egressd/decisions.jsonl, egressd's decision_log default). path is not copied. */
void logfiles_set_default(const char *path);
const char *logfiles_default(void);

/*
 * Sort files[0..n) into chain order: ascending seq of each file's first record, stable.
 * When any file's first record cannot be read ("-", a missing, unreadable or not regular
 * file, a first line that is not a record), the given order is kept unchanged: the reader then reports
 * that file as it is. Returns 1 when the order changed, 0 when not.
 */
int logfiles_order(const char **files, size_t n);

/*
 * The default log's set: every regular file named <default>.<digits> in its directory and
 * <default> itself, in chain order (logfiles_order). At most max files (the newest are
 * kept when there are more, with a message in err and *dropped set). Returns the number
 * of files (>= 1), or -1 with a message in err when the default log does not exist.
 */
int logfiles_default_set(const char **files, size_t max, size_t *dropped, char *err,
    size_t errlen);

/* Free the strings of the default set. */
void logfiles_free(void);

#endif
