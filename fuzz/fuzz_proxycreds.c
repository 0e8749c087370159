/* libFuzzer: the proxy credentials file format (through conf_load_string via a temp file). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "egressd/proxycreds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	char err[512];
	struct proxycreds *c;
	FILE *f;

	if (path[0] == '\0')
		snprintf(path, sizeof(path), "/tmp/egress-fuzz-creds-%d", (int)getpid());
	f = fopen(path, "w");
	if (f == NULL)
		return 0;
	fwrite(data, 1, size, f);
	fclose(f);
	c = proxycreds_load(path, 0, err, sizeof(err));
	(void)unlink(path); /* leave nothing in /tmp once the run ends */
	if (c != NULL) {
		char hdr[1024];
		for (size_t i = 0; i < c->n; i++)
			(void)proxycreds_basic_header(&c->v[i], hdr, sizeof(hdr));
		proxycreds_free(c);
	}
	return 0;
}
