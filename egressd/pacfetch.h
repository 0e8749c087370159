/*
 * pacfetch - egressd fetches the PAC file itself and keeps the last good copy.
 *
 * Why: libproxy fails open (an unreachable or 404 PAC yields direct://) and can block
 * forever on a stalled PAC server. So egressd fetches the PAC with its own bounds — size,
 * time, redirects, TLS verified against the system trust store (or a configured CA file)
 * with host name checks and SNI — and hands libproxy only a local copy (pac+file://).
 * A fetch that fails keeps the previous good copy; with no good copy at all the route is
 * unavailable (REASON_PAC_UNAVAILABLE), never direct.
 *
 * The PAC server is route infrastructure, like an upstream proxy: its name is resolved by
 * egressd's resolver and it may live on a private address.
 *
 * Owns: the fetch state, the good copy on disk (written atomically, mode 0644 so the
 * unprivileged route helper can read it). Callers: egressd/route, loop thread only.
 */
#ifndef EGRESS_PACFETCH_H
#define EGRESS_PACFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/reasons.h"
#include "common/routeproto.h"  /* PAC_WRAPPER_MARKER, PAC_ERROR_HOST */

struct event_base;
struct resolver;
struct pacfetch;

struct pacfetch_config {
	const char *url;            /* http://... or https://... (file paths are not fetched) */
	const char *copy_path;      /* where the good copy lives (absolute) */
	const char *ca_file;        /* NULL: the system trust store */
	uint32_t timeout_ms;        /* whole fetch, redirects included */
	size_t max_bytes;           /* <= EGRESS_PAC_MAX */
	unsigned max_redirects;     /* <= 5 */
	uint32_t refresh_s;         /* re-fetch period after a success; 0 = never */
	uint32_t retry_s;           /* re-fetch period after a failure */
};

/* Called on the loop thread after every fetch attempt: status REASON_ALLOWED when a new
 * copy was installed, otherwise why the fetch failed (the previous copy, if any, stays). */
typedef void (*pacfetch_cb)(enum reason status, const char *detail, void *arg);

/* Starts the first fetch at once. NULL with err on a bad configuration. */
struct pacfetch *pacfetch_new(struct event_base *base, struct resolver *res,
    const struct pacfetch_config *cfg, pacfetch_cb cb, void *arg, char *err, size_t errlen);
void pacfetch_free(struct pacfetch *p);

/* True when a good copy exists (fetched now or kept from before). */
bool pacfetch_have_copy(const struct pacfetch *p);
/* Start a fetch now unless one is running (SIGHUP, egressctl). */
void pacfetch_refresh(struct pacfetch *p);
/* Last error text, "" when the last fetch succeeded. */
const char *pacfetch_last_error(const struct pacfetch *p);

/* Checks the body is plausibly a PAC file (non-empty, text, defines FindProxyForURL). */
bool pacfetch_body_plausible(const char *body, size_t len);

/* The PAC wrapper's marker and sentinel (PAC_WRAPPER_MARKER, PAC_ERROR_HOST) are part of
 * the contract with the route helper: common/routeproto.h. */

/* Write body + the wrapper to path atomically (temp file, rename; no fsync: a torn copy
 * lacks the wrapper marker and is refused by the helper), mode 0644 so the unprivileged
 * helper can read it. Returns 0, or -1 with errno. */
int pac_install_copy(const char *path, const char *body, size_t len);

#endif
