/*
 * fuzz_host - common/host: host_parse under every flag combination.
 *
 * Invariants checked on every accepted input: the canonical text is bounded and made of
 * the characters a canonical host may contain, the port obeys the flags, and the
 * canonical text re-parses (same flags) to exactly the same host.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(const uint8_t *data, size_t size, int flags)
{
	struct host h, h2;
	char buf[EGRESS_HOSTPORT_MAX + 1];
	enum host_err e = host_parse((const char *)data, size, flags, &h);
	size_t n, i;

	if (host_err_str(e) == NULL)
		abort();
	if (e != HOST_OK) {
		/* a refusal leaves nothing behind */
		if (h.name[0] != '\0' || h.port != 0)
			abort();
		return;
	}
	n = strnlen(h.name, sizeof(h.name));
	if (n == 0 || n > EGRESS_HOSTNAME_MAX)
		abort();
	for (i = 0; i < n; i++) {
		char c = h.name[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
		    (c == '-' && h.kind == HOST_NAME) || (c == ':' && h.kind == HOST_IPV6);
		if (!ok)
			abort();
	}
	if (h.kind == HOST_NAME && (h.name[0] == '.' || h.name[n - 1] == '.' ||
	    strstr(h.name, "..") != NULL))
		abort();
	if ((flags & HOST_REQUIRE_PORT) && h.port == 0)
		abort();
	if ((flags & HOST_NO_PORT) && h.port != 0)
		abort();
	if (host_to_str(&h, buf, sizeof(buf)) == NULL)
		abort();
	if (host_parse(buf, strlen(buf), flags, &h2) != HOST_OK)
		abort();
	if (h2.kind != h.kind || h2.port != h.port || strcmp(h2.name, h.name) != 0)
		abort();
	if (h.kind != HOST_NAME && !addr_equal(&h.addr, &h2.addr))
		abort();
	/* the bare canonical name is itself canonical */
	if (host_parse(h.name, n, HOST_NO_PORT, &h2) != HOST_OK || strcmp(h2.name, h.name) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Exact length, no terminator: host_parse must not read past size. */
	uint8_t *copy = malloc(size ? size : 1);

	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	for (int flags = 0; flags <= (HOST_REQUIRE_PORT | HOST_NO_PORT); flags++)
		check(copy, size, flags);
	free(copy);
	return 0;
}
