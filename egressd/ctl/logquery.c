/* logquery.c - egressctl log query: filter decision-log records, JSON Lines or a table,
 * optionally following the live file. Contract: logquery.h. Docs: docs/audit.md. */
#include "egressd/ctl/logquery.h"
#include "egressd/ctl/gzread.h"
#include "egressd/ctl/timearg.h"

#include <errno.h>
#include <fnmatch.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "egressd/ctl/logfiles.h"

#define EXIT_USAGE 2

static bool
str_eq(const char *want, const char *have)
{
	return want == NULL || (have != NULL && strcmp(want, have) == 0);
}

bool
logquery_match(const struct logquery_filter *q, const struct logrec *rec)
{
	if (!str_eq(q->principal, rec->principal) || !str_eq(q->grant, rec->grant_id) ||
	    !str_eq(q->verdict, rec->verdict) || !str_eq(q->reason, rec->reason) ||
	    !str_eq(q->event, rec->event))
		return false;
	if (q->dest != NULL && (rec->dest == NULL || fnmatch(q->dest, rec->dest, 0) != 0))
		return false;
	if (q->route != NULL && (rec->route == NULL || fnmatch(q->route, rec->route, 0) != 0))
		return false;
	if (q->attested >= 0 && rec->attested != q->attested)
		return false;
	if (q->has_since && rec->time_us < q->since_us)
		return false;
	if (q->has_until && rec->time_us >= q->until_us)
		return false;
	return true;
}

static int
usage_err(char *err, size_t errlen, const char *what, const char *arg)
{
	snprintf(err, errlen, "%s%s%s", what, arg ? ": " : "", arg ? arg : "");
	return -1;
}

int
logquery_parse_args(struct logquery_opts *o, int argc, char **argv, char *err,
    size_t errlen)
{
	static const char *const strs[] = { "principal", "grant", "verdict", "reason", "event",
	    "dest", "route" };
	const char *val;
	int i = 0;

	memset(o, 0, sizeof(*o));
	o->q.attested = -1;
	o->interval_ms = 500;
	while (i < argc) {
		const char **slots[] = { &o->q.principal, &o->q.grant, &o->q.verdict, &o->q.reason,
		    &o->q.event, &o->q.dest, &o->q.route };
		bool done = false;
		int rc;

		for (size_t k = 0; k < EGRESS_NELEM(strs) && !done; k++) {
			rc = logread_opt(argc, argv, &i, strs[k], &val);
			if (rc < 0)
				return usage_err(err, errlen, "missing value for", argv[i]);
			if (rc > 0) {
				*slots[k] = val;
				done = true;
			}
		}
		if (done)
			continue;
		if ((rc = logread_opt(argc, argv, &i, "key", &val)) != 0) {
			char kerr[256];

			if (rc < 0)
				return usage_err(err, errlen, "--key needs a file", NULL);
			if (logread_load_key(val, kerr, sizeof(kerr)) != 0)
				return usage_err(err, errlen, "--key", kerr);
			continue;
		}
		if ((rc = logread_opt(argc, argv, &i, "attested", &val)) != 0) {
			if (rc < 0 || (strcmp(val, "yes") != 0 && strcmp(val, "no") != 0))
				return usage_err(err, errlen, "--attested takes yes or no", NULL);
			o->q.attested = strcmp(val, "yes") == 0;
			continue;
		}
		if ((rc = logread_opt(argc, argv, &i, "since", &val)) != 0) {
			if (rc < 0 || timearg_parse(val, timearg_now_us(), &o->q.since_us) != 0)
				return usage_err(err, errlen, "--since takes 1h, 30m, 2d, "
				    "'2026-12-01 20:07' (UTC) or an RFC 3339 time",
				    rc > 0 ? val : NULL);
			o->q.has_since = true;
			continue;
		}
		if ((rc = logread_opt(argc, argv, &i, "until", &val)) != 0) {
			if (rc < 0 || timearg_parse(val, timearg_now_us(), &o->q.until_us) != 0)
				return usage_err(err, errlen, "--until takes 1h, 30m, 2d, "
				    "'2026-12-01 20:07' (UTC) or an RFC 3339 time",
				    rc > 0 ? val : NULL);
			o->q.has_until = true;
			continue;
		}
		if ((rc = logread_opt(argc, argv, &i, "interval", &val)) != 0) {
			const char *errstr;
			long long ms;

			if (rc < 0 || num_parse(val, LOGQUERY_INTERVAL_MIN_MS,
			    LOGQUERY_INTERVAL_MAX_MS, &ms, &errstr) != 0)
				return usage_err(err, errlen, "--interval takes milliseconds from 50 "
				    "to 10000", NULL);
			o->interval_ms = (unsigned)ms;
			continue;
		}
		if (strcmp(argv[i], "--table") == 0) {
			o->table = true;
		} else if (strcmp(argv[i], "--json") == 0) {
			o->table = false;
		} else if (strcmp(argv[i], "--follow") == 0 || strcmp(argv[i], "-f") == 0) {
			o->follow = true;
		} else if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			return usage_err(err, errlen, "unknown option", argv[i]);
		} else {
			if (o->nfiles >= LOGQUERY_FILES_MAX)
				return usage_err(err, errlen, "too many files", NULL);
			o->files[o->nfiles++] = argv[i];
		}
		i++;
	}
	for (; i < argc; i++) {
		if (o->nfiles >= LOGQUERY_FILES_MAX)
			return usage_err(err, errlen, "too many files", NULL);
		o->files[o->nfiles++] = argv[i];
	}
	if (o->nfiles == 0) {
		/* No FILE: the default decision log with its rotated files (logfiles.h). */
		size_t dropped;
		int n = logfiles_default_set(o->files, LOGQUERY_FILES_MAX, &dropped, err, errlen);

		if (n < 0)
			return -1;
		if (dropped > 0)
			fprintf(stderr, "egressctl: warning: %s\n", err);
		o->nfiles = (size_t)n;
	} else {
		/* Files given (a shell glob lists them by name): read them in chain order. */
		logfiles_order(o->files, o->nfiles);
	}
	if (o->q.verdict != NULL && strcmp(o->q.verdict, "allow") != 0 &&
	    strcmp(o->q.verdict, "deny") != 0)
		return usage_err(err, errlen, "--verdict takes allow or deny", NULL);
	if (o->follow && strcmp(o->files[o->nfiles - 1], "-") == 0)
		return usage_err(err, errlen, "--follow needs a file, not standard input", NULL);
	return 0;
}

/* Copy s into out (cap bytes incl. NUL) for a terminal: control and non-ASCII bytes
 * become '?' (a hostile target must not drive the terminal), and a value longer than
 * width is cut with a trailing '~' so columns stay aligned. */
static const char *
cell(const char *s, size_t width, char *out, size_t cap)
{
	size_t n = 0;

	if (s == NULL)
		s = "-";
	for (; s[n] != '\0' && n + 1 < cap && n < width; n++)
		out[n] = ((unsigned char)s[n] < 0x20 || (unsigned char)s[n] >= 0x7f) ? '?' : s[n];
	if (s[n] != '\0' && n > 0)
		out[n - 1] = '~';
	out[n] = '\0';
	return out;
}

void
logquery_table_row(FILE *out, const struct logrec *rec)
{
	char a[64], b[64], c[64], d[64], e[64], f[64], g[64];
	char bytes[48], seq[24];

	if (rec == NULL) {
		fprintf(out, "%-27s %8s %-8s %-20s %-7s %-24s %-40s %-24s %-3s %s\n", "TIME", "SEQ",
		    "EVENT", "PRINCIPAL", "VERDICT", "REASON", "DEST", "ROUTE", "ATT",
		    "BYTES_UP/DOWN");
		return;
	}
	snprintf(seq, sizeof(seq), "%llu", (unsigned long long)rec->seq);
	if (rec->bytes_up >= 0 || rec->bytes_down >= 0)
		snprintf(bytes, sizeof(bytes), "%lld/%lld", (long long)rec->bytes_up,
		    (long long)rec->bytes_down);
	else
		snprintf(bytes, sizeof(bytes), "-");
	fprintf(out, "%-27s %8s %-8s %-20s %-7s %-24s %-40s %-24s %-3s %s%s\n",
	    cell(rec->time, 27, a, sizeof(a)), seq, cell(rec->event, 8, b, sizeof(b)),
	    cell(rec->principal, 20, c, sizeof(c)), cell(rec->verdict, 7, d, sizeof(d)),
	    cell(rec->reason, 24, e, sizeof(e)), cell(rec->dest, 40, f, sizeof(f)),
	    cell(rec->route, 24, g, sizeof(g)),
	    rec->attested < 0 ? "-" : rec->attested ? "yes" : "no", bytes,
	    rec->hash_ok ? "" : "  [HASH MISMATCH]");
}

static void
emit(const struct logquery_opts *o, FILE *out, const struct logrec *rec)
{
	if (o->table) {
		logquery_table_row(out, rec);
	} else {
		/* the original bytes: hash included, so an extract stays checkable */
		fwrite(rec->line, 1, rec->len, out);
		fputc('\n', out);
	}
}

static void
warn_counts(const struct logread *r, FILE *errf)
{
	if (r->malformed > 0 || r->truncated > 0)
		fprintf(errf, "egressctl: %s: %llu line(s) skipped (not records); last: %s\n",
		    r->name, (unsigned long long)(r->malformed + r->truncated), r->last_error);
	if (r->bad_hash > 0)
		fprintf(errf, "egressctl: %s: WARNING: %llu record(s) do not match their own "
		    "hash (edited): run egressctl log verify\n", r->name,
		    (unsigned long long)r->bad_hash);
}

static void
sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

long long
logquery_run(const struct logquery_opts *o, FILE *out, FILE *errf)
{
	long long printed = 0;
	struct logrec *rec;

	if (o->table)
		logquery_table_row(out, NULL);
	for (size_t i = 0; i < o->nfiles; i++) {
		bool last = i + 1 == o->nfiles;
		uint64_t start = mono_msec();
		struct logread r;
		int rc;

		if (logread_open(&r, o->files[i]) != 0) {
			fprintf(errf, "egressctl: %s: %s\n", o->files[i], strerror(errno));
			return -1;
		}
		r.follow = last && o->follow;
		for (;;) {
			while ((rc = logread_next(&r, &rec)) == 1) {
				if (logquery_match(&o->q, rec)) {
					emit(o, out, rec);
					printed++;
				}
			}
			if (rc < 0) {
				fprintf(errf, "egressctl: %s: read error: %s\n", r.name,
				    gzread_strerror(errno));
				logread_close(&r);
				return -1;
			}
			if (!r.follow)
				break;
			fflush(out);
			if (o->follow_max_ms > 0 && mono_msec() - start >= o->follow_max_ms)
				break;
			sleep_ms(o->interval_ms);
			if (logread_check_rotation(&r) < 0)
				fprintf(errf, "egressctl: %s: cannot reopen: %s\n", r.name,
				    strerror(errno));
			if (o->tick != NULL)
				o->tick(o->tick_arg);
		}
		warn_counts(&r, errf);
		logread_close(&r);
	}
	fflush(out);
	return printed;
}

int
logquery_cli(int argc, char **argv)
{
	struct logquery_opts o;
	char err[256];

	if (logquery_parse_args(&o, argc, argv, err, sizeof(err)) != 0) {
		fprintf(stderr, "egressctl log query: %s\n"
		    "usage: egressctl log query [--principal P] [--grant ID] [--verdict allow|deny]\n"
		    "         [--reason R] [--event decision|close] [--dest GLOB] [--route GLOB]\n"
		    "         [--attested yes|no] [--since T] [--until T] [--table]\n"
		    "         [--follow [--interval MS]] [FILE...]\n", err);
		return EXIT_USAGE;
	}
	return logquery_run(&o, stdout, stderr) < 0 ? 1 : 0;
}
