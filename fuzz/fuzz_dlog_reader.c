/*
 * fuzz_dlog_reader - the decision-log line parser and chain verifier
 * (common/dlogchain.c) over arbitrary bytes: a log file is hostile input to egressctl
 * and to dlog_open, which continues the chain from a file's last record.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/dlogchain.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlog_record_info info;
	struct dlog_verify v;
	char why[128];
	FILE *f;

	/* the whole input as one line (what dlog_open's tail reader hands over) */
	(void)dlog_line_check((const char *)data, size, &info, why, sizeof(why));

	/* the input as a file: line splitting, length bound, chain rules, look-ahead */
	if (size == 0)
		return 0;
	f = fmemopen((void *)(uintptr_t)data, size, "r");
	if (f == NULL)
		return 0;
	dlog_verify_init(&v, size % 2 == 0);
	(void)dlog_verify_stream(&v, f, "fuzz");
	fclose(f);
	return 0;
}
