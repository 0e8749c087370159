/*
 * log - the one logging API for operators (not the decision log; see egressd/dlog.h).
 *
 * Owns: where diagnostics go (stderr by default, or syslog) and the verbosity.
 * Policy (relayd): start-up failures, failed privilege drops and broken invariants call
 * fatal/fatalx; anything caused by one client or one upstream logs a warning and ends only
 * that connection. log_warn appends strerror(errno); the *x variants do not.
 */
#ifndef EGRESS_LOG_H
#define EGRESS_LOG_H

#include <stdarg.h>

enum log_level { LOG_LEVEL_WARN = 0, LOG_LEVEL_INFO = 1, LOG_LEVEL_DEBUG = 2 };

/* Program name for messages; to_syslog nonzero sends messages to syslog(3). Otherwise
 * messages go to stderr, each line prefixed with its syslog priority ("<4>" for a warning)
 * when stderr is the systemd journal's stream (log_stderr_is_journal). */
void log_init(const char *progname, int to_syslog);

/* Nonzero when $JOURNAL_STREAM names the file open on fd 2 (systemd.exec(5)). */
int log_stderr_is_journal(void);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
