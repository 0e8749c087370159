/* logsummary.c - egressctl log summary: per principal and destination aggregates of a
 * decision log, as text, JSON or a self-contained HTML report. Contract: logsummary.h.
 * Docs: docs/audit.md. */
#include "egressd/ctl/logsummary.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "common/limits.h"
#include "common/util.h"
#include "egressd/ctl/logquery.h"
#include "egressd/ctl/report_html.h"

#define EXIT_USAGE 2

struct logsummary {
	json_t *sum;
	json_t *minutes;           /* "minute index" -> {"a": n, "d": n} */
	int64_t min_minute, max_minute;
	bool any_minute;
	bool finished;
	bool have_seq;             /* chain position of the last record read (any filter) */
	uint64_t last_seq;
};

static void
jinc(json_t *o, const char *k, json_int_t d)
{
	json_t *v = json_object_get(o, k);

	json_object_set_new(o, k, json_integer((json_is_integer(v) ? json_integer_value(v) : 0)
	    + d));
}

/* map[key], created by mk when absent; past the key limit new keys share "(other)"
 * so a hostile or huge log cannot grow the summary without bound. */
static json_t *
slot(json_t *map, const char *key, json_t *(*mk)(void))
{
	json_t *v;

	if (key == NULL || key[0] == '\0')
		key = LOGSUMMARY_NONE;
	if ((v = json_object_get(map, key)) != NULL)
		return v;
	if (json_object_size(map) >= EGRESS_AUDIT_KEYS_MAX) {
		key = LOGSUMMARY_OTHER;
		if ((v = json_object_get(map, key)) != NULL)
			return v;
	}
	v = mk();
	if (v == NULL || json_object_set_new(map, key, v) != 0)
		return NULL;
	return v;
}

static json_t *
stats_new(void)
{
	return json_pack("{s:I,s:I,s:I,s:I,s:o,s:I,s:I,s:n,s:n,s:o,s:I}", "decisions",
	    (json_int_t)0, "allow", (json_int_t)0, "deny", (json_int_t)0, "closes",
	    (json_int_t)0, "denials_by_reason", json_object(), "bytes_up", (json_int_t)0,
	    "bytes_down", (json_int_t)0, "first", "last", "routes", json_object(),
	    "unattested", (json_int_t)0);
}

static json_t *
principal_new(void)
{
	json_t *p = stats_new();

	if (p != NULL)
		json_object_set_new(p, "destinations", json_object());
	return p;
}

/* Count key in a {key: n} map, honouring the key limit. */
static void
count_key(json_t *map, const char *key)
{
	json_t *v;

	if (key == NULL || key[0] == '\0')
		key = LOGSUMMARY_NONE;
	if (json_object_get(map, key) == NULL && json_object_size(map) >= EGRESS_AUDIT_KEYS_MAX)
		key = LOGSUMMARY_OTHER;
	v = json_object_get(map, key);
	json_object_set_new(map, key, json_integer(json_is_integer(v) ?
	    json_integer_value(v) + 1 : 1));
}

/* first/last as strings: dlog_line_check guarantees the one fixed-width time format, so
 * string order is time order. */
static void
seen(json_t *st, const char *time)
{
	const char *f = json_string_value(json_object_get(st, "first"));
	const char *l = json_string_value(json_object_get(st, "last"));

	if (time == NULL)
		return;
	if (f == NULL || strcmp(time, f) < 0)
		json_object_set_new(st, "first", json_string(time));
	if (l == NULL || strcmp(time, l) > 0)
		json_object_set_new(st, "last", json_string(time));
}

static void
stats_add(json_t *st, const struct logrec *r, bool decision)
{
	if (st == NULL)
		return;
	seen(st, r->time);
	if (decision) {
		bool deny = r->verdict != NULL && strcmp(r->verdict, "deny") == 0;

		jinc(st, "decisions", 1);
		jinc(st, deny ? "deny" : "allow", 1);
		if (deny)
			count_key(json_object_get(st, "denials_by_reason"), r->reason);
		if (r->route != NULL)
			count_key(json_object_get(st, "routes"), r->route);
		/* only an allowed hop reached anything: a denial's attested is false
		 * because nothing was connected, which says nothing about observation */
		if (!deny && r->attested == 0)
			jinc(st, "unattested", 1);
	} else {
		jinc(st, "closes", 1);
		if (r->bytes_up > 0)
			jinc(st, "bytes_up", r->bytes_up);
		if (r->bytes_down > 0)
			jinc(st, "bytes_down", r->bytes_down);
	}
}

struct logsummary *
logsummary_new(void)
{
	struct logsummary *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->sum = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:n,s:n,s:o,s:o,s:o,s:I}", "records",
	    (json_int_t)0, "decisions", (json_int_t)0, "allow", (json_int_t)0, "deny",
	    (json_int_t)0, "closes", (json_int_t)0, "bad_hash", (json_int_t)0, "malformed",
	    (json_int_t)0, "first", "last", "denials_by_reason", json_object(), "destinations",
	    json_object(), "principals", json_object(), "timeline_dropped", (json_int_t)0);
	if (s->sum != NULL) {
		json_object_set_new(s->sum, "deleted", json_integer(0));
		json_object_set_new(s->sum, "reordered", json_integer(0));
	}
	s->minutes = json_object();
	if (s->sum == NULL || s->minutes == NULL) {
		logsummary_free(s);
		return NULL;
	}
	return s;
}

static void
timeline_add(struct logsummary *s, const struct logrec *r, bool deny)
{
	char key[24];
	json_t *m;
	int64_t minute;

	if (r->time_us <= 0)
		return;
	minute = r->time_us / 60000000;
	snprintf(key, sizeof(key), "%" PRId64, minute);
	m = json_object_get(s->minutes, key);
	if (m == NULL) {
		if (json_object_size(s->minutes) >= EGRESS_AUDIT_MINUTES_MAX) {
			jinc(s->sum, "timeline_dropped", 1);
			return;
		}
		m = json_pack("{s:I,s:I}", "a", (json_int_t)0, "d", (json_int_t)0);
		if (m == NULL || json_object_set_new(s->minutes, key, m) != 0)
			return;
	}
	jinc(m, deny ? "d" : "a", 1);
	if (!s->any_minute || minute < s->min_minute)
		s->min_minute = minute;
	if (!s->any_minute || minute > s->max_minute)
		s->max_minute = minute;
	s->any_minute = true;
}

int
logsummary_add(struct logsummary *s, const struct logrec *r)
{
	json_t *p, *sum = s->sum;
	bool decision, deny;

	/* A record whose bytes do not match its hash says nothing reliable: it is counted
	 * (bad_hash, and the report warns) but kept out of every total, records included. */
	if (r->line != NULL && !r->hash_ok)
		return 0;
	jinc(sum, "records", 1);
	if (r->event == NULL)
		return 0;
	/* The stub resolver's count of denials past its budget (docs/transparent.md,
	 * "Floods"): no decision records of their own, but denials all the same. */
	if (strcmp(r->event, "dns_suppressed") == 0) {
		json_t *v = json_object_get(r->obj, "suppressed");

		if (json_is_integer(v) && json_integer_value(v) > 0)
			jinc(sum, "denials_suppressed", json_integer_value(v));
		return 0;
	}
	decision = strcmp(r->event, "decision") == 0;
	if (!decision && strcmp(r->event, "close") != 0)
		return 0;   /* other events: counted as records only */
	deny = decision && r->verdict != NULL && strcmp(r->verdict, "deny") == 0;
	seen(sum, r->time);
	if (decision) {
		jinc(sum, "decisions", 1);
		jinc(sum, deny ? "deny" : "allow", 1);
		if (deny)
			count_key(json_object_get(sum, "denials_by_reason"), r->reason);
		timeline_add(s, r, deny);
	} else {
		jinc(sum, "closes", 1);
	}
	p = slot(json_object_get(sum, "principals"), r->principal, principal_new);
	if (p == NULL)
		return -1;
	stats_add(p, r, decision);
	stats_add(slot(json_object_get(p, "destinations"), r->dest, stats_new), r, decision);
	stats_add(slot(json_object_get(sum, "destinations"), r->dest, stats_new), r, decision);
	return 0;
}

void
logsummary_track(struct logsummary *s, const struct logrec *r)
{
	/* Seq gaps among the records read (before any filter): records deleted, or files
	 * that do not follow each other. The report warns; log verify says where. An edited
	 * record still holds its place (it is reported as edited, not as a gap). */
	if (s->have_seq && r->seq > s->last_seq + 1) {
		uint64_t gap = r->seq - s->last_seq - 1;

		jinc(s->sum, "deleted", gap > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)gap);
	} else if (s->have_seq && r->seq <= s->last_seq) {
		jinc(s->sum, "reordered", 1);
	}
	s->have_seq = true;
	s->last_seq = r->seq;
}

void
logsummary_add_counters(struct logsummary *s, const struct logread *r)
{
	jinc(s->sum, "bad_hash", (json_int_t)r->bad_hash);
	jinc(s->sum, "malformed", (json_int_t)(r->malformed + r->truncated));
}

static void
shares(json_t *map)
{
	const char *k;
	json_t *st;

	json_object_foreach(map, k, st) {
		json_int_t d = json_integer_value(json_object_get(st, "allow"));
		json_int_t u = json_integer_value(json_object_get(st, "unattested"));

		json_object_set_new(st, "unattested_share", json_real(d > 0 ? (double)u /
		    (double)d : 0.0));
		if (json_object_get(st, "destinations") != NULL)
			shares(json_object_get(st, "destinations"));
	}
}

static void
fmt_minute(int64_t minute, char *buf, size_t len)
{
	time_t t = (time_t)(minute * 60);
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "?");
}

/* Rebin the per-minute counts into at most 60 buckets of a round size. */
static json_t *
timeline(struct logsummary *s)
{
	static const int64_t sizes[] = { 1, 5, 15, 30, 60, 180, 360, 720, 1440, 10080, 43200,
	    525600 };
	json_t *tl = json_object(), *arr = json_array();
	int64_t span, b = sizes[EGRESS_NELEM(sizes) - 1], first, n;
	const char *k;
	json_t *m;

	if (!s->any_minute) {
		json_object_set_new(tl, "bucket_s", json_integer(60));
		json_object_set_new(tl, "buckets", arr);
		return tl;
	}
	span = s->max_minute - s->min_minute + 1;
	for (size_t i = 0; i < EGRESS_NELEM(sizes); i++) {
		if ((span + sizes[i] - 1) / sizes[i] <= 60) {
			b = sizes[i];
			break;
		}
	}
	first = s->min_minute / b * b;
	n = (s->max_minute - first) / b + 1;
	if (n > 1000)
		n = 1000;   /* cannot happen with the sizes above for a 9999-year range; bound */
	for (int64_t i = 0; i < n; i++) {
		char ts[32];

		fmt_minute(first + i * b, ts, sizeof(ts));
		json_array_append_new(arr, json_pack("{s:s,s:I,s:I}", "start", ts, "allow",
		    (json_int_t)0, "deny", (json_int_t)0));
	}
	json_object_foreach(s->minutes, k, m) {
		long long minute;
		const char *errstr;
		int64_t idx;
		json_t *bk;

		if (num_parse(k, 0, INT64_MAX / 2, &minute, &errstr) != 0)
			continue;
		idx = ((int64_t)minute - first) / b;
		if (idx < 0 || idx >= n)
			continue;
		bk = json_array_get(arr, (size_t)idx);
		jinc(bk, "allow", json_integer_value(json_object_get(m, "a")));
		jinc(bk, "deny", json_integer_value(json_object_get(m, "d")));
	}
	json_object_set_new(tl, "bucket_s", json_integer((json_int_t)(b * 60)));
	json_object_set_new(tl, "buckets", arr);
	return tl;
}

json_t *
logsummary_finish(struct logsummary *s)
{
	if (!s->finished) {
		shares(json_object_get(s->sum, "principals"));
		shares(json_object_get(s->sum, "destinations"));
		json_object_set_new(s->sum, "timeline", timeline(s));
		s->finished = true;
	}
	return s->sum;
}

void
logsummary_free(struct logsummary *s)
{
	if (s == NULL)
		return;
	json_decref(s->sum);
	json_decref(s->minutes);
	free(s);
}

/* ---- text ---- */

static void
tputs(FILE *out, const char *s)
{
	if (s == NULL)
		s = "-";
	for (; *s != '\0'; s++)
		fputc(((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f) ? '?' : *s, out);
}

static long long
jint(json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

static void
print_map(FILE *out, json_t *map)
{
	const char *k;
	json_t *v;
	bool first = true;

	json_object_foreach(map, k, v) {
		fputs(first ? "" : ", ", out);
		tputs(out, k);
		fprintf(out, " %lld", (long long)json_integer_value(v));
		first = false;
	}
	if (first)
		fputs("-", out);
}

static void
print_stats(FILE *out, json_t *st, const char *indent)
{
	fprintf(out, "%sdecisions %lld (allow %lld, deny %lld), closes %lld, bytes up %lld "
	    "down %lld, unattested %.0f%%\n", indent, jint(st, "decisions"), jint(st, "allow"),
	    jint(st, "deny"), jint(st, "closes"), jint(st, "bytes_up"), jint(st, "bytes_down"),
	    100.0 * json_real_value(json_object_get(st, "unattested_share")));
	fprintf(out, "%sfirst ", indent);
	tputs(out, json_string_value(json_object_get(st, "first")));
	fputs("  last ", out);
	tputs(out, json_string_value(json_object_get(st, "last")));
	fprintf(out, "\n%sroutes: ", indent);
	print_map(out, json_object_get(st, "routes"));
	fprintf(out, "\n%sdenials: ", indent);
	print_map(out, json_object_get(st, "denials_by_reason"));
	fputc('\n', out);
}

void
logsummary_print_text(FILE *out, json_t *sum)
{
	const char *pk, *dk;
	json_t *p, *d;

	fprintf(out, "records %lld: decisions %lld (allow %lld, deny %lld), closes %lld\n",
	    jint(sum, "records"), jint(sum, "decisions"), jint(sum, "allow"), jint(sum, "deny"),
	    jint(sum, "closes"));
	fputs("from ", out);
	tputs(out, json_string_value(json_object_get(sum, "first")));
	fputs(" to ", out);
	tputs(out, json_string_value(json_object_get(sum, "last")));
	fputs("\ndenials by reason: ", out);
	print_map(out, json_object_get(sum, "denials_by_reason"));
	fputc('\n', out);
	if (jint(sum, "denials_suppressed") > 0)
		fprintf(out, "denials counted without a record of their own (stub resolver floods, "
		    "dns_suppressed): %lld\n", jint(sum, "denials_suppressed"));
	if (jint(sum, "bad_hash") > 0 || jint(sum, "malformed") > 0)
		fprintf(out, "WARNING: %lld record(s) fail their own hash (left out of the "
		    "totals), %lld line(s) are not records: run egressctl log verify\n",
		    jint(sum, "bad_hash"), jint(sum, "malformed"));
	if (jint(sum, "deleted") > 0 || jint(sum, "reordered") > 0)
		fprintf(out, "WARNING: %lld record(s) missing (seq gaps) and %lld out of order: "
		    "records were deleted, or the files are not consecutive: run egressctl log "
		    "verify\n", jint(sum, "deleted"), jint(sum, "reordered"));
	json_object_foreach(json_object_get(sum, "principals"), pk, p) {
		fputs("\nprincipal ", out);
		tputs(out, pk);
		fputc('\n', out);
		print_stats(out, p, "  ");
		json_object_foreach(json_object_get(p, "destinations"), dk, d) {
			fputs("  destination ", out);
			tputs(out, dk);
			fputc('\n', out);
			print_stats(out, d, "    ");
		}
	}
}

/* ---- command ---- */

struct summary_walk {
	struct logsummary *s;
	const struct logquery_filter *q;
};

static int
summary_one(const struct logrec *rec, void *arg)
{
	struct summary_walk *w = arg;

	logsummary_track(w->s, rec);
	return logquery_match(w->q, rec) ? logsummary_add(w->s, rec) : 0;
}

static void
summary_counters(const struct logread *r, void *arg)
{
	logsummary_add_counters(((struct summary_walk *)arg)->s, r);
}

int
logsummary_cli(int argc, char **argv)
{
	const char *format = "text", *output = NULL, *title = "egress decision log audit";
	struct logsummary *s = NULL;
	struct logquery_opts o;
	struct summary_walk sa;
	char **rest = NULL, err[256];
	int nrest = 0, rc = 1, i = 0;
	FILE *out = stdout;
	json_t *sum;

	rest = calloc((size_t)argc + 1, sizeof(*rest));
	if (rest == NULL)
		return 1;
	while (i < argc) {
		const char *val;
		int r;

		if ((r = logread_opt(argc, argv, &i, "format", &val)) != 0) {
			if (r < 0)
				goto usage;
			format = val;
		} else if ((r = logread_opt(argc, argv, &i, "output", &val)) != 0) {
			if (r < 0)
				goto usage;
			output = val;
		} else if ((r = logread_opt(argc, argv, &i, "title", &val)) != 0) {
			if (r < 0)
				goto usage;
			title = val;
		} else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
			output = argv[i + 1];
			i += 2;
		} else {
			rest[nrest++] = argv[i++];
		}
	}
	if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0 &&
	    strcmp(format, "html") != 0) {
		snprintf(err, sizeof(err), "--format takes text, json or html");
		goto usage_msg;
	}
	if (logquery_parse_args(&o, nrest, rest, err, sizeof(err)) != 0)
		goto usage_msg;
	if (o.follow || o.table) {
		snprintf(err, sizeof(err), "--follow and --table belong to log query");
		goto usage_msg;
	}
	if ((s = logsummary_new()) == NULL)
		goto out;
	sa.s = s;
	sa.q = &o.q;
	if (logread_each(o.files, o.nfiles, summary_one, summary_counters, &sa) != 0)
		goto out;
	sum = logsummary_finish(s);
	if (output != NULL && strcmp(output, "-") != 0) {
		out = fopen(output, "we");
		if (out == NULL) {
			fprintf(stderr, "egressctl: %s: %s\n", output, strerror(errno));
			goto out;
		}
	}
	if (strcmp(format, "json") == 0) {
		if (json_dumpf(sum, out, JSON_INDENT(2) | JSON_ENSURE_ASCII) == 0)
			fputc('\n', out);
	} else if (strcmp(format, "html") == 0) {
		(void)report_html_write(out, sum, title);
	} else {
		logsummary_print_text(out, sum);
	}
	if (jint(sum, "bad_hash") > 0)
		fprintf(stderr, "egressctl: WARNING: %lld record(s) do not match their own hash "
		    "(edited): run egressctl log verify\n", jint(sum, "bad_hash"));
	rc = 0;
	if (out != stdout ? fclose(out) != 0 : fflush(out) != 0) {
		fprintf(stderr, "egressctl: writing %s: %s\n", output ? output : "<stdout>",
		    strerror(errno));
		rc = 1;
	}
	goto out;
usage:
	snprintf(err, sizeof(err), "an option is missing its value");
usage_msg:
	fprintf(stderr, "egressctl log summary: %s\n"
	    "usage: egressctl log summary [--format text|json|html] [-o FILE] [--title T]\n"
	    "         [query filters: --principal --grant --verdict --reason --event --dest\n"
	    "          --route --attested --since --until] [FILE...]\n", err);
	rc = EXIT_USAGE;
out:
	logsummary_free(s);
	free(rest);
	return rc;
}
