/*
 * fuzz_logread - the audit reader (egressd/ctl/logread.c) and everything that consumes its
 * records over arbitrary bytes: the query filter and table printer, the summary
 * aggregation with its HTML report, and the Squid export. A log file handed to an
 * auditor is hostile input: a record with a wrong hash is still read (flagged), so the
 * fuzzer reaches the consumers with any member values.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "egressd/ctl/logexport.h"
#include "egressd/ctl/logquery.h"
#include "egressd/ctl/logread.h"
#include "egressd/ctl/logsummary.h"
#include "egressd/ctl/report_html.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct logquery_filter q = { .dest = "*.example.*", .route = "direct", .attested = -1,
	    .has_since = true, .since_us = 1 };
	struct logsummary *s;
	struct logexport *x;
	struct logrec one, *rec;
	struct logread r;
	FILE *f, *null;
	char why[128];
	int64_t us;

	/* the whole input as one line, and as a time string */
	if (logrec_parse((const char *)data, size, &one, why, sizeof(why)) == 0)
		logrec_clear(&one);
	if (size < 64) {
		char t[64];

		memcpy(t, data, size);
		t[size] = '\0';
		(void)logread_time_parse(t, &us);
	}
	if (size == 0)
		return 0;
	f = fmemopen((void *)(uintptr_t)data, size, "r");
	null = fopen("/dev/null", "w");
	if (f == NULL || null == NULL || logread_open_stream(&r, f, "fuzz") != 0) {
		if (f != NULL)
			fclose(f);
		if (null != NULL)
			fclose(null);
		return 0;
	}
	s = logsummary_new();
	x = logexport_new(null);
	while (logread_next(&r, &rec) == 1) {
		(void)logquery_match(&q, rec);
		logquery_table_row(null, rec);
		if (s != NULL)
			(void)logsummary_add(s, rec);
		if (x != NULL)
			(void)logexport_add(x, rec);
	}
	if (s != NULL) {
		logsummary_add_counters(s, &r);
		(void)report_html_write(null, logsummary_finish(s), "fuzz");
		logsummary_print_text(null, logsummary_finish(s));
	}
	logsummary_free(s);
	logexport_finish(x);
	logread_close(&r);
	fclose(f);
	fclose(null);
	return 0;
}
