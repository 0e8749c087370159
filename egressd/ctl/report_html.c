/* report_html.c - the self-contained HTML audit report (inline CSS, inline SVG, no
 * scripts, no external resources). Contract: report_html.h. */
#include "egressd/ctl/report_html.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define ALLOW_COLOR "#2e7d32"
#define DENY_COLOR  "#c62828"

void
report_html_escape(FILE *out, const char *s)
{
	if (s == NULL)
		s = "-";
	for (; *s != '\0'; s++) {
		switch (*s) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&#39;", out); break;
		default:
			/* the log is 7-bit (JSON_ENSURE_ASCII) but decoded strings may hold
			 * control characters: show them as U+FFFD, never raw */
			if ((unsigned char)*s < 0x20 || *s == 0x7f)
				fputs("&#xfffd;", out);
			else
				fputc(*s, out);
		}
	}
}

static long long
jint(json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

static const char *
js(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s != NULL ? s : "-";
}

static void
human_bytes(FILE *out, long long b)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	size_t u = 0;

	while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		fprintf(out, "%lld B", b);
	else
		fprintf(out, "%.1f %s", v, units[u]);
}

static const char css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em;color:#222;"
    "background:#fff}\n"
    "h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:2em;"
    "border-bottom:1px solid #ddd}\n"
    ".meta{color:#555}.warn{background:#fff3e0;border:1px solid #e65100;padding:.6em}\n"
    /* readable at 1280 px: tables take the page width and wrap long cells instead of
     * pushing the page sideways; charts shrink with it */
    "table{border-collapse:collapse;font-size:.85em;width:100%;table-layout:fixed}"
    "th,td{border:1px solid #ccc;padding:3px 5px;text-align:left;vertical-align:top;"
    "overflow-wrap:anywhere;word-break:break-word}"
    "th{background:#f3f3f3}tr.more td{font-style:italic;color:#555}\n"
    "th:first-child{width:16%}#destinations th:nth-child(2){width:22%}\n"
    "svg{max-width:100%;height:auto}\n"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    "svg text{font-family:inherit;font-size:11px;fill:#333}\n"
    ".legend span{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 1em;"
    "vertical-align:middle}\n";

/* ---- charts ---- */

static void
timeline_chart(FILE *out, json_t *sum)
{
	json_t *tl = json_object_get(sum, "timeline");
	json_t *bk = json_object_get(tl, "buckets"), *b;
	size_t n = json_array_size(bk), i;
	long long max = 0;
	const double x0 = 60, x1 = 790, y0 = 15, y1 = 185;
	double w;

	json_array_foreach(bk, i, b) {
		long long t = jint(b, "allow") + jint(b, "deny");

		if (t > max)
			max = t;
	}
	fprintf(out, "<p class=\"legend\">bucket: %lld s<span style=\"background:"
	    ALLOW_COLOR "\"></span>allow<span style=\"background:" DENY_COLOR
	    "\"></span>deny</p>\n", jint(tl, "bucket_s"));
	fputs("<svg id=\"chart-timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" "
	    "height=\"220\" viewBox=\"0 0 800 220\" role=\"img\" aria-label=\"decisions over "
	    "time\">\n<title>Decisions over time</title>\n", out);
	fprintf(out, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#888\"/>\n",
	    x0, y1, x1, y1);
	fprintf(out, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#888\"/>\n",
	    x0, y0, x0, y1);
	fprintf(out, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%lld</text>\n", x0 - 4,
	    y0 + 4, max);
	fprintf(out, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">0</text>\n", x0 - 4, y1);
	if (n == 0 || max == 0) {
		fputs("<text x=\"400\" y=\"100\" text-anchor=\"middle\">no decisions</text>\n"
		    "</svg>\n", out);
		return;
	}
	w = (x1 - x0) / (double)n;
	json_array_foreach(bk, i, b) {
		long long a = jint(b, "allow"), d = jint(b, "deny");
		double ha = (y1 - y0) * (double)a / (double)max;
		double hd = (y1 - y0) * (double)d / (double)max;
		double x = x0 + w * (double)i + (w > 4 ? 1 : 0);
		double bw = w > 4 ? w - 2 : w;

		fputs("<g><title>", out);
		report_html_escape(out, js(b, "start"));
		fprintf(out, ": allow %lld, deny %lld</title>", a, d);
		if (a > 0)
			fprintf(out, "<rect class=\"allow\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
			    "height=\"%.2f\" fill=\"" ALLOW_COLOR "\"/>", x, y1 - ha, bw, ha);
		if (d > 0)
			fprintf(out, "<rect class=\"deny\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
			    "height=\"%.2f\" fill=\"" DENY_COLOR "\"/>", x, y1 - ha - hd, bw, hd);
		fputs("</g>\n", out);
	}
	b = json_array_get(bk, 0);
	fprintf(out, "<text x=\"%.0f\" y=\"%.0f\">", x0, y1 + 16);
	report_html_escape(out, js(b, "start"));
	fputs("</text>\n", out);
	b = json_array_get(bk, n - 1);
	fprintf(out, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">", x1, y1 + 16);
	report_html_escape(out, js(b, "start"));
	fputs("</text>\n</svg>\n", out);
}

struct bar {
	const char *label;
	long long allow, deny;
};

static int
bar_cmp(const void *a, const void *b)
{
	const struct bar *x = a, *y = b;
	long long tx = x->allow + x->deny, ty = y->allow + y->deny;

	if (tx != ty)
		return tx > ty ? -1 : 1;
	return strcmp(x->label, y->label);
}

/* Horizontal bars (allow and deny stacked), largest first, at most top rows. */
static void
bar_chart(FILE *out, const char *id, const char *title, struct bar *bars, size_t n,
    size_t top)
{
	const double lx = 330, rx = 730, row = 22;
	long long max = 0;
	size_t shown;

	qsort(bars, n, sizeof(*bars), bar_cmp);
	shown = n < top ? n : top;
	for (size_t i = 0; i < shown; i++) {
		if (bars[i].allow + bars[i].deny > max)
			max = bars[i].allow + bars[i].deny;
	}
	fprintf(out, "<svg id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" "
	    "height=\"%.0f\" viewBox=\"0 0 800 %.0f\" role=\"img\" aria-label=\"%s\">\n"
	    "<title>%s</title>\n", id, row * (double)(shown > 0 ? shown : 1) + 10,
	    row * (double)(shown > 0 ? shown : 1) + 10, title, title);
	if (shown == 0 || max == 0) {
		fputs("<text x=\"10\" y=\"18\">none</text>\n</svg>\n", out);
		return;
	}
	for (size_t i = 0; i < shown; i++) {
		double y = 5 + row * (double)i;
		double wa = (rx - lx) * (double)bars[i].allow / (double)max;
		double wd = (rx - lx) * (double)bars[i].deny / (double)max;
		char lab[64];
		size_t ln = strlen(bars[i].label);

		/* long labels are cut for the chart (the tables show them whole) */
		if (ln > 48)
			snprintf(lab, sizeof(lab), "%.45s...", bars[i].label);
		else
			snprintf(lab, sizeof(lab), "%s", bars[i].label);
		fputs("<g><title>", out);
		report_html_escape(out, bars[i].label);
		fprintf(out, ": allow %lld, deny %lld</title>", bars[i].allow, bars[i].deny);
		fprintf(out, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", lx - 6, y + 14);
		report_html_escape(out, lab);
		fputs("</text>", out);
		if (bars[i].allow > 0)
			fprintf(out, "<rect class=\"allow\" x=\"%.0f\" y=\"%.1f\" width=\"%.2f\" "
			    "height=\"%.0f\" fill=\"" ALLOW_COLOR "\"/>", lx, y, wa, row - 6);
		if (bars[i].deny > 0)
			fprintf(out, "<rect class=\"deny\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
			    "height=\"%.0f\" fill=\"" DENY_COLOR "\"/>", lx + wa, y, wd, row - 6);
		fprintf(out, "<text x=\"%.2f\" y=\"%.1f\">%lld</text></g>\n", lx + wa + wd + 4,
		    y + 14, bars[i].allow + bars[i].deny);
	}
	fputs("</svg>\n", out);
	if (n > shown)
		fprintf(out, "<p class=\"more\">%zu more not shown</p>\n", n - shown);
}

/* A bar per member of the summary's object key (none when it is missing), each valued by
 * value(); the chart shows at most top of them (0: all). */
static void
map_chart(FILE *out, json_t *sum, const char *key, const char *id, const char *title,
    void (*value)(json_t *v, struct bar *b), size_t top)
{
	json_t *map = json_object_get(sum, key), *v;
	size_t n = json_object_size(map), i = 0;
	struct bar *bars = calloc(n > 0 ? n : 1, sizeof(*bars));
	const char *k;

	if (bars == NULL)
		return;
	json_object_foreach(map, k, v) {
		if (i >= n)
			break;
		bars[i] = (struct bar){ k, 0, 0 };
		value(v, &bars[i++]);
	}
	bar_chart(out, id, title, bars, i, top != 0 ? top : n);
	free(bars);
}

static void
destination_value(json_t *v, struct bar *b)
{
	b->allow = jint(v, "allow");
	b->deny = jint(v, "deny");
}

static void
denial_value(json_t *v, struct bar *b)
{
	b->deny = (long long)json_integer_value(v);
}

static void
destinations_chart(FILE *out, json_t *sum)
{
	map_chart(out, sum, "destinations", "chart-destinations", "top destinations",
	    destination_value, REPORT_TOP_DESTINATIONS);
}

static void
denials_chart(FILE *out, json_t *sum)
{
	map_chart(out, sum, "denials_by_reason", "chart-denials", "denials by reason",
	    denial_value, 0);
}

/* ---- tables ---- */

static void
map_cell(FILE *out, json_t *map)
{
	const char *k;
	json_t *v;
	bool first = true;

	fputs("<td>", out);
	json_object_foreach(map, k, v) {
		fputs(first ? "" : "<br>", out);
		report_html_escape(out, k);
		fprintf(out, " (%lld)", (long long)json_integer_value(v));
		first = false;
	}
	if (first)
		fputs("-", out);
	fputs("</td>", out);
}

static void
stats_cells(FILE *out, json_t *st)
{
	fprintf(out, "<td class=\"n\">%lld</td><td class=\"n\">%lld</td><td class=\"n\">%lld"
	    "</td>", jint(st, "decisions"), jint(st, "allow"), jint(st, "deny"));
	map_cell(out, json_object_get(st, "denials_by_reason"));
	fputs("<td class=\"n\">", out);
	human_bytes(out, jint(st, "bytes_up"));
	fputs("</td><td class=\"n\">", out);
	human_bytes(out, jint(st, "bytes_down"));
	fputs("</td><td>", out);
	report_html_escape(out, js(st, "first"));
	fputs("</td><td>", out);
	report_html_escape(out, js(st, "last"));
	fputs("</td>", out);
	map_cell(out, json_object_get(st, "routes"));
	fprintf(out, "<td class=\"n\">%.0f%%</td>",
	    100.0 * json_real_value(json_object_get(st, "unattested_share")));
}

static const char stats_head[] =
    "<th>decisions</th><th>allow</th><th>deny</th><th>denials by reason</th>"
    "<th>bytes up</th><th>bytes down</th><th>first seen</th><th>last seen</th>"
    "<th>routes</th><th>unattested (of allowed)</th>";

struct row {
	const char *p, *d;      /* d NULL: a principal row */
	json_t *st;
};

static int
row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	long long nx = jint(x->st, "decisions") + jint(x->st, "closes");
	long long ny = jint(y->st, "decisions") + jint(y->st, "closes");
	int c;

	if (nx != ny)
		return nx > ny ? -1 : 1;
	if ((c = strcmp(x->p, y->p)) != 0)
		return c;
	return x->d != NULL && y->d != NULL ? strcmp(x->d, y->d) : 0;
}

/* The rows with the most decisions first, at most top, then one row counting the rest. */
static void
table_rows(FILE *out, struct row *rows, size_t n, size_t top, int cols, const char *what)
{
	size_t shown = n < top ? n : top;

	qsort(rows, n, sizeof(*rows), row_cmp);
	for (size_t i = 0; i < shown; i++) {
		fputs("<tr><td>", out);
		report_html_escape(out, rows[i].p);
		fputs("</td>", out);
		if (rows[i].d != NULL) {
			fputs("<td>", out);
			report_html_escape(out, rows[i].d);
			fputs("</td>", out);
		}
		stats_cells(out, rows[i].st);
		fputs("</tr>\n", out);
	}
	if (n > shown)
		fprintf(out, "<tr class=\"more\"><td colspan=\"%d\">%zu more %s not shown (the "
		    "%zu with the most decisions are above; <code>egressctl log summary --format "
		    "json</code> lists every one)</td></tr>\n", cols, n - shown, what, shown);
}

static void
tables(FILE *out, json_t *sum)
{
	json_t *ps = json_object_get(sum, "principals"), *p, *d;
	const char *pk, *dk;
	size_t n = 0, cap = json_object_size(ps);
	struct row *rows;

	json_object_foreach(ps, pk, p)
		cap += json_object_size(json_object_get(p, "destinations"));
	rows = calloc(cap > 0 ? cap : 1, sizeof(*rows));
	if (rows == NULL)
		return;
	fprintf(out, "<h2>Principals</h2>\n<table id=\"principals\">\n<thead><tr>"
	    "<th>principal</th>%s</tr></thead>\n<tbody>\n", stats_head);
	json_object_foreach(ps, pk, p) {
		if (n < cap)
			rows[n++] = (struct row){ pk, NULL, p };
	}
	table_rows(out, rows, n, REPORT_TOP_PRINCIPALS, 11, "principals");
	fputs("</tbody></table>\n", out);
	fprintf(out, "<h2>Principal and destination</h2>\n<table id=\"destinations\">\n"
	    "<thead><tr><th>principal</th><th>destination</th>%s</tr></thead>\n<tbody>\n",
	    stats_head);
	n = 0;
	json_object_foreach(ps, pk, p) {
		json_object_foreach(json_object_get(p, "destinations"), dk, d) {
			if (n < cap)
				rows[n++] = (struct row){ pk, dk, d };
		}
	}
	table_rows(out, rows, n, REPORT_TOP_PAIRS, 12, "principal/destination pairs");
	fputs("</tbody></table>\n", out);
	free(rows);
}

int
report_html_write(FILE *out, json_t *sum, const char *title)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	    /* no fetch of any kind, whatever the content: the report is evidence, opened
	     * on an auditor's machine, and must not call out */
	    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	    "style-src 'unsafe-inline'\">\n<title>", out);
	report_html_escape(out, title);
	fprintf(out, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>", css);
	report_html_escape(out, title);
	fprintf(out, "</h1>\n<p class=\"meta\">%lld records: %lld decisions (%lld allow, "
	    "%lld deny), %lld closes; from ", jint(sum, "records"), jint(sum, "decisions"),
	    jint(sum, "allow"), jint(sum, "deny"), jint(sum, "closes"));
	report_html_escape(out, js(sum, "first"));
	fputs(" to ", out);
	report_html_escape(out, js(sum, "last"));
	fputs(" (UTC). Written by <code>egressctl log summary --format html</code>. "
	    "This report does not verify the hash chain: run <code>egressctl log verify"
	    "</code> on the same files.</p>\n", out);
	if (jint(sum, "bad_hash") > 0 || jint(sum, "malformed") > 0)
		fprintf(out, "<p class=\"warn\" id=\"warning\">WARNING: %lld record(s) do not "
		    "match their own hash and %lld line(s) are not records: the log was "
		    "edited or damaged. The edited records are left out of every number in this "
		    "report.</p>\n", jint(sum, "bad_hash"), jint(sum, "malformed"));
	if (jint(sum, "deleted") > 0 || jint(sum, "reordered") > 0)
		fprintf(out, "<p class=\"warn\" id=\"warning-deleted\">WARNING: %lld record(s) "
		    "are missing (gaps in seq) and %lld are out of order: records were deleted "
		    "or moved, or the files given do not follow each other. Run "
		    "<code>egressctl log verify</code> on the same files to see where.</p>\n",
		    jint(sum, "deleted"), jint(sum, "reordered"));
	fputs("<h2>Decisions over time</h2>\n", out);
	timeline_chart(out, sum);
	fputs("<h2>Top destinations</h2>\n", out);
	destinations_chart(out, sum);
	fputs("<h2>Denials by reason</h2>\n", out);
	denials_chart(out, sum);
	tables(out, sum);
	fputs("</body>\n</html>\n", out);
	if (ferror(out)) {
		errno = EIO;
		return -1;
	}
	return 0;
}
