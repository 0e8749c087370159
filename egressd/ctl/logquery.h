/*
 * logquery - `egressctl log query`: select decision-log records by principal, grant,
 * verdict, reason, destination pattern, route, attestation and time; print them as JSON
 * Lines (the original bytes, hash included, for jq) or an aligned table; optionally
 * follow the file like `tail -F` (rotation is followed by reopening the path).
 *
 * Owns nothing beyond one call. Reads with egressd/ctl/logread. Documented in docs/audit.md.
 * Callers: egressctl (logquery_cli), tests/test_logquery.c.
 */
#ifndef EGRESS_LOGQUERY_H
#define EGRESS_LOGQUERY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "egressd/ctl/logread.h"

#define LOGQUERY_FILES_MAX        64
#define LOGQUERY_INTERVAL_MIN_MS  50
#define LOGQUERY_INTERVAL_MAX_MS  10000

/* Every set member must match; NULL / -1 / false = no constraint. Strings point into
 * argv (not copied). A record without the member does not match a constraint on it
 * (close records have no verdict, route or attested). */
struct logquery_filter {
	const char *principal;    /* exact */
	const char *grant;        /* exact grant_id */
	const char *verdict;      /* allow | deny */
	const char *reason;       /* exact reason code (decision or close) */
	const char *event;        /* decision | close | ... */
	const char *dest;         /* fnmatch(3) glob over the canonical dest host:port */
	const char *route;        /* fnmatch(3) glob over route ("direct", "http://p:3128") */
	int attested;             /* 1 yes, 0 no, -1 any */
	bool has_since, has_until;
	int64_t since_us, until_us;  /* since <= time < until */
};

struct logquery_opts {
	struct logquery_filter q;
	bool table;
	bool follow;
	unsigned interval_ms;     /* follow poll interval */
	uint64_t follow_max_ms;   /* 0 = follow forever (tests bound it) */
	const char *files[LOGQUERY_FILES_MAX];
	size_t nfiles;
	/* follow mode: called after each poll (tests append and rotate here); may be NULL */
	void (*tick)(void *arg);
	void *tick_arg;
};

/* Does rec pass every constraint of q? */
bool logquery_match(const struct logquery_filter *q, const struct logrec *rec);

/* Parse the arguments after "log query". Returns 0, or -1 with a message in err. */
int logquery_parse_args(struct logquery_opts *o, int argc, char **argv, char *err,
    size_t errlen);

/*
 * Print the matching records of o->files (in order) to out; warnings (malformed lines,
 * records that fail their own hash) go to errf. Returns the number of records printed,
 * or -1 when a file cannot be opened or read (message on errf).
 */
long long logquery_run(const struct logquery_opts *o, FILE *out, FILE *errf);

/* One table row (or the header when rec is NULL), values sanitized for a terminal. */
void logquery_table_row(FILE *out, const struct logrec *rec);

/* egressctl log query ARGS: exit 0 (records printed or none), 1 (read error), 2 usage. */
int logquery_cli(int argc, char **argv);

#endif
