/* log.c - operator diagnostics to stderr or syslog. */
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>

static const char *log_prog = "egress";
static int log_syslog;
static int log_journal;
static enum log_level log_level = LOG_LEVEL_INFO;

/*
 * Is stderr the journal's stream? systemd sets JOURNAL_STREAM=DEV:INODE for the stream it
 * connects to stdout/stderr (systemd.exec(5)); only when stderr is still that very file
 * (not redirected by a shell in between) are "<N>" priority prefixes understood rather
 * than printed.
 */
int
log_stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	char *end;
	struct stat st;

	if (js == NULL || fstat(2, &st) != 0)
		return 0;
	errno = 0;
	dev = strtoull(js, &end, 10);
	if (errno != 0 || end == js || *end != ':')
		return 0;
	js = end + 1;
	ino = strtoull(js, &end, 10);
	if (errno != 0 || end == js || *end != '\0')
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void
log_init(const char *progname, int to_syslog)
{
	if (progname != NULL)
		log_prog = progname;
	log_syslog = to_syslog;
	log_journal = !to_syslog && log_stderr_is_journal();
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
	if (log_journal)
		for (char *p = msg; (p = strchr(p, '\n')) != NULL; p++)
			*p = ' ';
	if (log_syslog) {
		if (with_errno)
			syslog(prio, "%s: %s", msg, strerror(saved_errno));
		else
			syslog(prio, "%s", msg);
		return;
	}
	/* Under journald: "<N>" sets the record's priority (sd-daemon(3)), so that
	 * `journalctl -p warning` finds the warnings. One line per message: the prefix
	 * covers only what follows it up to the newline. */
	if (log_journal)
		fprintf(stderr, "<%d>", prio);
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
