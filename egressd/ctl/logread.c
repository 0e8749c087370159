/* logread.c - bounded reader of decision-log files for the audit commands.
 * Contract: logread.h. Record layout: docs/decision-log.md (checked by dlog_verify). */
#include "egressd/ctl/logread.h"
#include "egressd/ctl/gzread.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/dlogchain.h"
#include "common/util.h"

static const char *
jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static int64_t
jnum(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

/* Fixed-width decimal digits at s[0..n): value or -1. */
static int
digits(const char *s, size_t n)
{
	int v = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static bool
leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int
logread_time_parse(const char *s, int64_t *us)
{
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	struct tm tm = { 0 };
	size_t n = strlen(s), i;
	int y, mo, d, h = 0, mi = 0, se = 0, off = 0;
	int64_t frac = 0, t;

	if (n < 10 || s[4] != '-' || s[7] != '-')
		return -1;
	y = digits(s, 4);
	mo = digits(s + 5, 2);
	d = digits(s + 8, 2);
	if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 ||
	    d > mdays[mo - 1] + (mo == 2 && leap(y)))
		return -1;
	i = 10;
	if (n > 10) {
		if ((s[10] != 'T' && s[10] != 't' && s[10] != ' ') || n < 20 || s[13] != ':' ||
		    s[16] != ':')
			return -1;
		h = digits(s + 11, 2);
		mi = digits(s + 14, 2);
		se = digits(s + 17, 2);
		/* 60: a leap second is valid RFC 3339; it folds onto the next second */
		if (h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 || se > 60)
			return -1;
		i = 19;
		if (s[i] == '.') {
			size_t nd = 0;

			for (i++; s[i] >= '0' && s[i] <= '9'; i++, nd++) {
				if (nd < 6)
					frac = frac * 10 + (s[i] - '0');
			}
			if (nd == 0)
				return -1;
			for (; nd < 6; nd++)
				frac *= 10;
		}
		if ((s[i] == 'Z' || s[i] == 'z') && s[i + 1] == '\0') {
			off = 0;
		} else if ((s[i] == '+' || s[i] == '-') && strlen(s + i) == 6 && s[i + 3] == ':') {
			int oh = digits(s + i + 1, 2), om = digits(s + i + 4, 2);

			if (oh < 0 || oh > 23 || om < 0 || om > 59)
				return -1;
			off = (oh * 60 + om) * 60 * (s[i] == '+' ? 1 : -1);
		} else {
			return -1;
		}
	}
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	t = (int64_t)timegm(&tm);
	if (t == -1)
		return -1;
	*us = (t - off) * 1000000 + frac;
	return 0;
}

void
logrec_clear(struct logrec *rec)
{
	json_decref(rec->obj);
	memset(rec, 0, sizeof(*rec));
}

static struct dlog_key logread_keybuf;
static const struct dlog_key *logread_key;   /* NULL: plain SHA-256 chain */

int
logread_load_key(const char *path, char *err, size_t errlen)
{
	if (dlog_key_load(path, false, &logread_keybuf, err, errlen) != 0)
		return -1;
	logread_key = &logread_keybuf;
	return 0;
}

int
logrec_parse(const char *line, size_t len, struct logrec *rec, char *why, size_t whylen)
{
	struct dlog_record_info info;
	enum dlog_line_status st;
	json_error_t jerr;
	json_t *o, *a;

	memset(rec, 0, sizeof(*rec));
	st = dlog_line_check_key(line, len, logread_key, &info, why, whylen);
	if (st == DLOG_LINE_MALFORMED)
		return -1;
	/* dlog_line_check has checked the layout (and, when the hash matches, filled info);
	 * parse again to keep the object: the verifier does not hand it out. */
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (o == NULL || !json_is_object(o)) {
		json_decref(o);
		if (why != NULL && whylen > 0)
			snprintf(why, whylen, "not a JSON object");
		return -1;
	}
	rec->obj = o;
	rec->line = line;
	rec->len = len;
	rec->hash_ok = st == DLOG_LINE_OK;
	rec->seq = (uint64_t)json_integer_value(json_object_get(o, "seq"));
	rec->time = jstr(o, "time");
	rec->event = jstr(o, "event");
	if (rec->time == NULL || logread_time_parse(rec->time, &rec->time_us) != 0)
		rec->time_us = 0;
	rec->conn = jstr(o, "conn");
	rec->principal = jstr(o, "principal");
	rec->grant_id = jstr(o, "grant_id");
	rec->client = jstr(o, "client");
	rec->method = jstr(o, "method");
	rec->target = jstr(o, "target");
	rec->dest = jstr(o, "dest");
	rec->verdict = jstr(o, "verdict");
	rec->reason = jstr(o, "reason");
	rec->route = jstr(o, "route");
	rec->route_source = jstr(o, "route_source");
	rec->pinned = jstr(o, "pinned");
	a = json_object_get(o, "attested");
	rec->attested = json_is_boolean(a) ? json_is_true(a) : -1;
	rec->bytes_up = jnum(o, "bytes_up");
	rec->bytes_down = jnum(o, "bytes_down");
	rec->duration_us = jnum(o, "duration_us");
	rec->resolve_us = jnum(o, "resolve_us");
	rec->connect_us = jnum(o, "connect_us");
	return 0;
}

static int
reader_init(struct logread *r, const char *name)
{
	memset(r, 0, sizeof(*r));
	r->buf = malloc(EGRESS_LOG_RECORD_MAX + 1);
	if (r->buf == NULL)
		return -1;
	snprintf(r->name, sizeof(r->name), "%s", name);
	return 0;
}

static void
remember_identity(struct logread *r)
{
	struct stat st;

	if (fstat(fileno(r->f), &st) == 0) {
		r->dev = st.st_dev;
		r->ino = st.st_ino;
	}
}

int
logread_open(struct logread *r, const char *path)
{
	if (strcmp(path, "-") == 0)
		return logread_open_stream(r, stdin, "<stdin>");
	if (strlen(path) >= sizeof(r->path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (reader_init(r, path) != 0)
		return -1;
	r->f = gzread_open(path);     /* rotated files may be gzip-compressed */
	if (r->f == NULL) {
		int e = errno;

		logread_close(r);
		errno = e;
		return -1;
	}
	r->own = true;
	snprintf(r->path, sizeof(r->path), "%s", path);
	remember_identity(r);
	return 0;
}

int
logread_open_stream(struct logread *r, FILE *f, const char *name)
{
	if (reader_init(r, name) != 0)
		return -1;
	r->f = f;
	r->own = false;
	return 0;
}

int
logread_next(struct logread *r, struct logrec **rec)
{
	char why[128];
	size_t len;
	int rc;

	logrec_clear(&r->cur);
	for (;;) {
		off_t start = r->follow ? ftello(r->f) : -1;

		rc = line_read(r->f, r->buf, EGRESS_LOG_RECORD_MAX, &len);
		if (rc == 0) {
			clearerr(r->f);  /* follow: later reads see appended bytes */
			return 0;
		}
		if (rc == -2)
			return -1;
		if (rc == 2 && r->follow && start >= 0) {
			/* the writer is in the middle of a line: read it whole next time */
			if (fseeko(r->f, start, SEEK_SET) != 0)
				return -1;
			clearerr(r->f);
			return 0;
		}
		r->lineno++;
		if (r->follow)
			r->pos = ftello(r->f);
		if (rc == 2) {
			r->truncated++;
			snprintf(r->last_error, sizeof(r->last_error), "%s:%llu: the last line "
			    "is incomplete (no newline)", r->name, (unsigned long long)r->lineno);
			return 0;
		}
		if (rc == -1) {
			r->malformed++;
			snprintf(r->last_error, sizeof(r->last_error), "%s:%llu: line longer than "
			    "the record limit", r->name, (unsigned long long)r->lineno);
			continue;
		}
		if (logrec_parse(r->buf, len, &r->cur, why, sizeof(why)) != 0) {
			r->malformed++;
			snprintf(r->last_error, sizeof(r->last_error), "%s:%llu: %s", r->name,
			    (unsigned long long)r->lineno, why);
			continue;
		}
		r->cur.lineno = r->lineno;
		r->records++;
		if (!r->cur.hash_ok)
			r->bad_hash++;
		*rec = &r->cur;
		return 1;
	}
}

int
logread_check_rotation(struct logread *r)
{
	struct stat st, cur;
	FILE *nf;

	if (r->path[0] == '\0')
		return 0;
	if (stat(r->path, &st) != 0)
		return errno == ENOENT ? 0 : -1;  /* renamed, not yet recreated: wait */
	if (st.st_dev == r->dev && st.st_ino == r->ino) {
		off_t pos = ftello(r->f);

		/* same file: shrunk below our position means truncated in place */
		if (pos < 0 || st.st_size >= pos)
			return 0;
		if (fseeko(r->f, 0, SEEK_SET) != 0)
			return -1;
		clearerr(r->f);
		r->lineno = 0;
		return 1;
	}
	/* A new file at the path. The old one may still grow (the writer appends until it
	 * reopens): only switch when it has no more complete lines - or when what is left is
	 * a torn line that has not grown for three checks (a crash mid-write), so the
	 * follower cannot be stuck on the old file. */
	if (fstat(fileno(r->f), &cur) == 0 && cur.st_size > ftello(r->f)) {
		r->stale = cur.st_size == r->old_size ? r->stale + 1 : 0;
		r->old_size = cur.st_size;
		if (r->stale < 3)
			return 0;
	}
	r->stale = 0;
	r->old_size = 0;
	nf = fopen(r->path, "re");
	if (nf == NULL)
		return errno == ENOENT ? 0 : -1;
	fclose(r->f);
	r->f = nf;
	r->lineno = 0;
	r->pos = 0;
	remember_identity(r);
	return 1;
}

void
logread_close(struct logread *r)
{
	logrec_clear(&r->cur);
	if (r->own && r->f != NULL)
		fclose(r->f);
	r->f = NULL;
	free(r->buf);
	r->buf = NULL;
}

int
logread_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
	const char *a = argv[*i];
	size_t n = strlen(name);

	if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, n) != 0)
		return 0;
	if (a[2 + n] == '=') {
		*val = a + 3 + n;
		(*i)++;
		return 1;
	}
	if (a[2 + n] != '\0')
		return 0;
	if (*i + 1 >= argc)
		return -1;
	*val = argv[*i + 1];
	*i += 2;
	return 1;
}

int
logread_each(const char *const *files, size_t n,
    int (*fn)(const struct logrec *rec, void *arg),
    void (*after)(const struct logread *r, void *arg), void *arg)
{
	for (size_t f = 0; f < n; f++) {
		struct logread r;
		struct logrec *rec;
		int k;

		if (logread_open(&r, files[f]) != 0) {
			fprintf(stderr, "egressctl: %s: %s\n", files[f], strerror(errno));
			return -1;
		}
		while ((k = logread_next(&r, &rec)) == 1) {
			if (fn(rec, arg) != 0) {
				k = -1;
				break;
			}
		}
		if (after != NULL)
			after(&r, arg);
		if (k < 0)
			fprintf(stderr, "egressctl: %s: read error: %s\n", r.name,
			    gzread_strerror(errno));
		logread_close(&r);
		if (k < 0)
			return -1;
	}
	return 0;
}
