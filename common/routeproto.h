/*
 * routeproto - the line protocol between egressd and egressd-route-helper, the separate
 * single-threaded process that runs libproxy (which blocks, is not thread-safe, and
 * evaluates PAC JavaScript from the network).
 *
 *   egressd -> helper:  "<id> <url>\n"           url built by egressd from the canonical
 *                                                 scheme, host and port — never client bytes
 *   helper -> egressd:  "<id> OK <e1> [<e2> ...]\n"  entries as proxyurl accepts them
 *                       "<id> ERR <code>\n"          code: pac_error | bad_request | bad_answer
 *
 * The helper is less trusted than egressd (it runs a PAC script), so egressd parses its
 * replies as hostile input: bounded line, bounded entry count, every entry re-validated; a
 * reply with any invalid entry is unusable as a whole (route_unavailable), never trimmed
 * to what happens to parse.
 * Owns: nothing. Callers: egressd/routehelper.c (egressd side), egressd/helper/main.c
 * (the helper). Knows nothing of either program.
 */
#ifndef EGRESS_ROUTEPROTO_H
#define EGRESS_ROUTEPROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "common/pattern.h"
#include "common/proxyurl.h"

/*
 * The marker and the sentinel of egressd's PAC wrapper. Every copy egressd
 * (egressd/pacfetch.c) hands to libproxy is the operator's PAC followed by a wrapper that
 * re-binds FindProxyForURL to a function calling the original inside try/catch: an
 * exception, or a result that is not a non-empty string, returns
 * "PROXY <PAC_ERROR_HOST>:1" — libproxy alone would answer direct:// (fail open). The
 * helper (egressd/helper/main.c) turns that sentinel into an error, and refuses a copy
 * without the marker (not written by egressd).
 */
#define PAC_WRAPPER_MARKER "/* egressd-pac-wrapper v1 */"
#define PAC_ERROR_HOST     "egress-pac-error.invalid"

struct routeproto_reply {
	uint64_t id;
	int ok;                    /* 1: entries valid; 0: error */
	char err[32];              /* error code when !ok */
	size_t n;
	struct proxy_route entries[EGRESS_ROUTE_PROXIES_MAX];
};

/* The query URL for a hop: "https://host:port/" (tcp:// hops ask as https://, since they
 * travel by CONNECT too). host must be canonical (common/host). Returns the length, 0 if
 * it does not fit. */
size_t routeproto_query_url(enum dest_scheme scheme, const struct host *h, uint16_t port,
    char *buf, size_t len);

/* egressd side: "<id> <url>\n" into buf; returns length or 0. */
size_t routeproto_format_request(uint64_t id, const char *url, char *buf, size_t len);
/* helper side: parse a request line (without the newline). Returns 0, or -1. url is
 * copied into urlbuf (NUL-terminated). Only printable ASCII without spaces is accepted. */
int routeproto_parse_request(const char *line, size_t len, uint64_t *id, char *urlbuf,
    size_t urllen);

/* helper side: format a reply from libproxy's NULL-terminated answer (may be NULL: PAC
 * error). Entries that proxyurl refuses make the whole reply "ERR bad_answer". */
size_t routeproto_format_reply(uint64_t id, char **proxies, char *buf, size_t len);
size_t routeproto_format_error(uint64_t id, const char *code, char *buf, size_t len);

/* egressd side: parse one reply line (without the newline). Returns 0 (reply filled; it
 * may be an error reply) or -1 when the line itself is malformed. */
int routeproto_parse_reply(const char *line, size_t len, struct routeproto_reply *out);

/*
 * The helper's error code for libproxy's own discovery (below): egressd runs its own WPAD
 * discovery instead (egressd/wpad.h), and refuses the hop (pac_unavailable) meanwhile.
 */
#define ROUTEPROTO_ERR_WPAD "wpad"

/*
 * Helper side: did libproxy, for the lookup whose debug output (_PX_DEBUG, captured by
 * the helper) is out[0..n), set out to discover or fetch a PAC itself? libproxy 0.4
 * prints "Config is: " and then one "\t<url>" line per configuration URL before it acts
 * on them. A "wpad:" URL (any case) is libproxy's own WPAD; a "pac+" URL (any case) other
 * than own_pac ("pac+file://<egressd's copy>", may be NULL) is a PAC libproxy would fetch
 * itself. Both block without a bound and, failing (the helper has no TCP), answer
 * direct:// — libproxy failing open. Returns 1 for either, else 0. Only the lines right
 * after the first "Config is: " line count: what a PAC script returns is printed later and
 * cannot forge them (at worst a refusal). out is hostile-ish (it holds PAC output): bounded
 * by n, no allocation.
 */
int routeproto_libproxy_discovers(const char *out, size_t n, const char *own_pac);

#endif
