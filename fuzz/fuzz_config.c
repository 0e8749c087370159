/*
 * fuzz_config - egressd/config: the whole egressd.ini loader (config_load_string: every
 * section, key and value semantics above common/conf), plus the value parsers it uses on
 * their own: route_config_parse, config_parse_sockaddr, dlog_sync_parse, and the PAC body
 * plausibility check that runs on bytes fetched from the network (pacfetch_body_plausible).
 *
 * Invariants: a load either returns a config or fills err with a NUL-terminated
 * "name:line: message"; a loaded config is freed without leaks; nothing reads files.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egressd/config.h"
#include "egressd/dlog.h"
#include "egressd/pacfetch.h"
#include "egressd/route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct egressd_config *c;
	char *s;

	if (size > 65536)
		return 0;
	err[0] = '\0';
	c = config_load_string("fuzz.ini", (const char *)data, size, err, sizeof(err));
	if (c == NULL) {
		if (err[0] == '\0' || memchr(err, '\0', sizeof(err)) == NULL)
			abort();
	} else {
		/* Every listener names a grant of the same file. */
		for (size_t i = 0; i < c->nlisteners; i++)
			if (config_find_grant(c, c->listeners[i].grant_name) == NULL)
				abort();
		config_free(c);
	}
	(void)pacfetch_body_plausible((const char *)data, size);

	/* The same bytes as one value. */
	s = malloc(size + 1);
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	{
		struct route_config rc;
		const char *e = NULL;

		memset(&rc, 0, sizeof(rc));
		if (route_config_parse(s, &rc, &e) != 0 && e == NULL)
			abort();
		route_config_clear(&rc);
	}
	{
		struct sockaddr_storage ss;
		socklen_t len = 0;
		const char *e = NULL;

		if (config_parse_sockaddr(s, size & 1, &ss, &len, &e) == 0 &&
		    (len == 0 || len > sizeof(ss)))
			abort();
	}
	{
		enum dlog_sync m;

		(void)dlog_sync_parse(s, &m);
	}
	free(s);
	return 0;
}
