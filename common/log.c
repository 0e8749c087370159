/* log.c - operator diagnostics to stderr or syslog. */
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

static const char *log_prog = "egress";
static int log_syslog;
static enum log_level log_level = LOG_LEVEL_INFO;

void
log_init(const char *progname, int to_syslog)
{
	if (progname != NULL)
		log_prog = progname;
	log_syslog = to_syslog;
	if (to_syslog)
		openlog(log_prog, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void
log_set_level(enum log_level level)
{
	log_level = level;
}

enum log_level
log_get_level(void)
{
	return log_level;
}

static void log_emit(int prio, const char *tag, int with_errno, int saved_errno,
    const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

static void
log_emit(int prio, const char *tag, int with_errno, int saved_errno, const char *fmt,
    va_list ap)
{
	char msg[2048];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (log_syslog) {
		if (with_errno)
			syslog(prio, "%s: %s", msg, strerror(saved_errno));
		else
			syslog(prio, "%s", msg);
		return;
	}
	if (with_errno)
		fprintf(stderr, "%s: %s%s: %s\n", log_prog, tag, msg, strerror(saved_errno));
	else
		fprintf(stderr, "%s: %s%s\n", log_prog, tag, msg);
}

void
log_warn(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	va_start(ap, fmt);
	log_emit(LOG_WARNING, "", 1, e, fmt, ap);
	va_end(ap);
	errno = e;
}

void
log_warnx(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	va_start(ap, fmt);
	log_emit(LOG_WARNING, "", 0, 0, fmt, ap);
	va_end(ap);
	errno = e;
}

void
log_info(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	if (log_level < LOG_LEVEL_INFO)
		return;
	va_start(ap, fmt);
	log_emit(LOG_INFO, "", 0, 0, fmt, ap);
	va_end(ap);
	errno = e;
}

void
log_debug(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	if (log_level < LOG_LEVEL_DEBUG)
		return;
	va_start(ap, fmt);
	log_emit(LOG_DEBUG, "debug: ", 0, 0, fmt, ap);
	va_end(ap);
	errno = e;
}

void
fatal(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	va_start(ap, fmt);
	log_emit(LOG_CRIT, "fatal: ", 1, e, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit(LOG_CRIT, "fatal: ", 0, 0, fmt, ap);
	va_end(ap);
	exit(1);
}
