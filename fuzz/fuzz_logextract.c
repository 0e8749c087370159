/*
 * fuzz_logextract - the readers added with decision-log schema 2, over arbitrary bytes:
 * a run's decisions.jsonl as an extract (anchor line, records, truncation marker;
 * egressd/ctl/logextract.c), the grant replay of `log grants --at`
 * (egressd/ctl/loggrants.c) and the time arguments (egressd/ctl/timearg.c). An extract
 * comes out of a run's output directory, and a log handed to an auditor: both hostile.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "egressd/ctl/logextract.h"
#include "egressd/ctl/loggrants.h"
#include "egressd/ctl/logread.h"
#include "egressd/ctl/timearg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct logextract_result res;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct logextract_anchor a;
	struct loggrants *g;
	struct logread r;
	struct logrec *rec;
	char why[128], err[256];
	int64_t us;
	FILE *f;

	if (logextract_anchor_parse((const char *)data, size, &a, why, sizeof(why)) == 0 &&
	    a.seq == UINT64_MAX)
		return 0;
	if (size < 64) {
		char t[64];

		memcpy(t, data, size);
		t[size] = '\0';
		(void)timearg_parse(t, 1796029210000000LL, &us);
	}
	f = fmemopen((void *)(uintptr_t)data, size, "r");
	if (f != NULL) {
		(void)logextract_verify(f, "fuzz", NULL, NULL, 0, &res);
		fclose(f);
	}
	f = fmemopen((void *)(uintptr_t)data, size, "r");
	if (f == NULL)
		return 0;
	g = loggrants_new(1796029210000000LL, size > 0 && (data[0] & 1) ? "run-a" : NULL);
	if (g != NULL && logread_open_stream(&r, f, "fuzz") == 0) {
		while (logread_next(&r, &rec) == 1)
			if (loggrants_add(g, rec, err, sizeof(err)) <= 0)
				break;
		json_decref(loggrants_result(g));
		logread_close(&r);
	}
	loggrants_free(g);
	fclose(f);
	return 0;
}
