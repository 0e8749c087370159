/*
 * report_html - one self-contained HTML audit report from a log summary
 * (egressd/ctl/logsummary.h): inline CSS and inline SVG charts (decisions over time, top
 * destinations, denials by reason) and the per-principal and per-destination tables.
 *
 * Self-contained means the file needs nothing else: no scripts, no fonts, no images, no
 * network; a Content-Security-Policy of default-src 'none' makes the browser refuse any
 * fetch even if a future edit added one. Every string from the log is HTML-escaped (a
 * principal or destination is hostile input). Callers: egressd/ctl/logsummary.c,
 * tests/test_report_html.c.
 */
#ifndef EGRESS_REPORT_HTML_H
#define EGRESS_REPORT_HTML_H

#include <jansson.h>
#include <stdio.h>

/* Top destinations shown in the chart. The tables are bounded too, whatever the log (a
 * principal x destination table of 300k records was 12.5 MB): the principals with the
 * most decisions, and the principal/destination pairs with the most, then a row saying
 * how many more there are (log summary --format json has them all). */
#define REPORT_TOP_DESTINATIONS 15
#define REPORT_TOP_PRINCIPALS   50
#define REPORT_TOP_PAIRS        200

/* Write the report for a finished summary; title is escaped. Returns 0, or -1 when
 * writing out failed (errno). */
int report_html_write(FILE *out, json_t *sum, const char *title);

/* Write s with & < > " ' escaped. */
void report_html_escape(FILE *out, const char *s);

#endif
