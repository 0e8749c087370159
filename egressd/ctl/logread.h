/*
 * logread - a bounded reader of decision-log files (docs/decision-log.md) for the audit
 * commands: egressctl log query, log summary and log export.
 *
 * Owns: the open file, one line buffer of EGRESS_LOG_RECORD_MAX + 1 bytes and the parsed
 * record of the current line. Lines are read with line_read (common/util.h) and checked with
 * dlog_line_check (common/dlogchain.h), so there is one parser of the record layout;
 * this module only adds the JSON object and typed accessors for the fields auditors ask
 * about. Every byte is hostile: nothing is sized from the file, malformed lines are
 * counted and skipped, not fatal.
 *
 * The reader does NOT verify the chain (that is `egressctl log verify`): it checks each
 * record's own hash and flags records whose bytes do not match (hash_ok false) so callers
 * can warn that the file was edited.
 * Callers: egressd/ctl/logquery.c, logsummary.c, logexport.c, fuzz/fuzz_logread.c.
 */
#ifndef EGRESS_LOGREAD_H
#define EGRESS_LOGREAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/limits.h"

/* One record. Pointers point into obj or the reader's buffer: valid until the next
 * logread_next, logrec_clear or logread_close. String accessors are NULL when the member
 * is absent, null or not a string; numbers are -1 when absent. */
struct logrec {
	json_t *obj;              /* owned by whoever filled the logrec (logrec_clear frees) */
	const char *line;         /* the raw line, without newline */
	size_t len;
	uint64_t lineno;          /* 1-based, in its file */
	bool hash_ok;             /* the bytes match the record's own hash */
	uint64_t seq;
	int64_t time_us;          /* microseconds since the epoch, UTC */
	const char *time, *event;
	const char *conn, *principal, *grant_id, *client, *method, *target, *dest, *verdict,
	    *reason, *route, *route_source, *pinned;
	int attested;             /* 1 true, 0 false, -1 absent */
	int64_t bytes_up, bytes_down, duration_us, resolve_us, connect_us;
};

/*
 * Parse one line (len bytes, no newline; any bytes) into rec (which must be cleared or
 * zeroed). The line must have the record layout dlog_line_check accepts; a record whose
 * bytes do not match its hash is still returned, with hash_ok false. Returns 0, or -1
 * with a reason in why (may be NULL) for a line that is not a record. rec->line points at
 * line (not copied).
 */
int logrec_parse(const char *line, size_t len, struct logrec *rec, char *why,
    size_t whylen);

/*
 * A keyed chain (egressd.ini log_hmac_key): check every record's own hash with the key
 * from path (`--key FILE` of the log commands) for the rest of the process. Without it
 * the records of a keyed log all fail their own hash (and are left out of summaries).
 * Returns 0, or -1 with err.
 */
int logread_load_key(const char *path, char *err, size_t errlen);

/* Free the parsed object and zero rec. Accepts a zeroed rec. */
void logrec_clear(struct logrec *rec);

struct logread {
	FILE *f;
	bool own;                 /* f was opened here (closed by logread_close) */
	bool follow;              /* a torn last line is waited for, not counted */
	char path[EGRESS_PATH_MAX];  /* "" for a stream given by the caller */
	char name[256];           /* for messages */
	char *buf;                /* EGRESS_LOG_RECORD_MAX + 1 */
	uint64_t lineno;
	off_t pos;                /* offset of the next unread line (follow mode) */
	dev_t dev;
	ino_t ino;
	off_t old_size;           /* follow: the replaced file's size at the last check */
	unsigned stale;           /* follow: checks the replaced file did not grow */
	struct logrec cur;
	/* counters for warnings at the end */
	uint64_t records, malformed, bad_hash, truncated;
	char last_error[512];     /* the most recent malformed line, "FILE:LINE: why" */
};

/* Open path ("-" = standard input). Returns 0, or -1 with errno. */
int logread_open(struct logread *r, const char *path);

/* Read from a stream the caller owns (not closed by logread_close). Returns 0 or -1. */
int logread_open_stream(struct logread *r, FILE *f, const char *name);

/*
 * The next record. Returns 1 with *rec (valid until the next call), 0 at end of file
 * (in follow mode also when the last line is still incomplete: call again later), -1 on
 * a read error (errno). Malformed and over-long lines are skipped and counted; a torn
 * last line (no newline) is counted in truncated when not following.
 */
int logread_next(struct logread *r, struct logrec **rec);

/*
 * Follow mode: after EOF, check whether the path now names a different file (rotated:
 * renamed and recreated) or the file shrank (truncated in place). If so, and the old
 * file has been read to its end, reopen the path from its start. Returns 1 when it
 * reopened, 0 when nothing changed (or the path does not exist yet), -1 on error.
 */
int logread_check_rotation(struct logread *r);

/* Close (if owned) and free. Accepts a zeroed or closed reader. */
void logread_close(struct logread *r);

/*
 * Read every record of files[0..n) in order ("-" is stdin): fn(rec, arg) for each (0 to
 * go on, -1 to stop with an error), then after(r, arg) (may be NULL) at the end of each
 * file before it is closed. An unopenable file or a read error is reported on stderr as
 * "egressctl: <file>: ..." and ends the walk. Returns 0, or -1. The one file loop of the
 * readers that take whole files (log summary, log export).
 */
int logread_each(const char *const *files, size_t n,
    int (*fn)(const struct logrec *rec, void *arg),
    void (*after)(const struct logread *r, void *arg), void *arg);

/*
 * RFC 3339 date-time ("2026-11-30T09:14:07Z", "...07.5+01:00", lowercase t/z, or a space
 * for T) or a date alone ("2026-11-30" = midnight UTC) to microseconds since the epoch.
 * Returns 0 or -1.
 */
int logread_time_parse(const char *s, int64_t *us);

/*
 * Option helper for the audit subcommands: when argv[*i] is "--name VALUE" or
 * "--name=VALUE", set *val, advance *i past it and return 1; return -1 when the value is
 * missing; 0 when argv[*i] is another word.
 */
int logread_opt(int argc, char **argv, int *i, const char *name, const char **val);

#endif
