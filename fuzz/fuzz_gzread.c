/*
 * fuzz_gzread - a rotated decision log compressed with gzip (egressd/ctl/gzread.c) over
 * arbitrary bytes, read through the log reader and the chain verifier as egressctl does.
 * The output is bounded by the ratio check: at most 100x the input past the first MiB.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/dlogchain.h"
#include "egressd/ctl/gzread.h"
#include "egressd/ctl/logread.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlog_verify v;
	struct logread r;
	struct logrec *rec;
	FILE *f, *g;

	f = fmemopen((void *)(uintptr_t)data, size, "r");
	if (f == NULL)
		return 0;
	(void)gzread_is_gzip(f);
	g = gzread_wrap(f);
	if (g != NULL) {
		if (logread_open_stream(&r, g, "fuzz.gz") == 0) {
			while (logread_next(&r, &rec) == 1)
				;
			logread_close(&r);
		}
		fclose(g);
	}
	f = fmemopen((void *)(uintptr_t)data, size, "r");
	if (f == NULL)
		return 0;
	g = gzread_wrap(f);
	if (g != NULL) {
		dlog_verify_init(&v, true);
		(void)dlog_verify_stream(&v, g, "fuzz.gz");
		fclose(g);
	}
	return 0;
}
