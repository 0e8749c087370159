/*
 * redirect - resolve an origin's redirect Location against the request URL and decide
 * whether the principal's grant admits the place it points to (docs/redirects.md).
 *
 * Owns: nothing beyond the caller's structs (no allocation that outlives a call).
 * Callers: egressd/session (before a 3xx response to an absolute-form request is passed
 * on), fuzz/fuzz_redirect, tests/test_redirect.
 *
 * Why here and not in the client: a redirect is a new hop. For plain HTTP egressd sees the
 * 3xx before the client acts on it, so a Location outside the grant (a private literal, an
 * ungranted name, another port) is refused at the redirect and never delivered; the
 * follow-up request, if the client makes one anyway, is authorized on its own.
 *
 * Location forms (RFC 9110 10.2.2, RFC 3986 5): absolute, protocol-relative ("//h/p"),
 * absolute-path and relative-path references with dot segments, all resolved with
 * uriparser against "http://<canonical host[:port]><request path>". The host is then
 * canonicalized with common/host (the same function that canonicalized the request), so
 * "EXAMPLE.com.", IDNs and IPv6 literals compare exactly as grant entries do.
 * Refused as unusable (REASON_REDIRECT_INVALID): empty or over EGRESS_LOCATION_MAX, not
 * an RFC 3986 reference (spaces, backslashes, control or non-ASCII bytes: browsers repair
 * these in ways egressd could not predict), a reference starting with three or more
 * slashes (WHATWG parsers treat "///h" as "//h"), http(s) without a host or with an empty
 * one, a host common/host refuses (percent-encoded, numeric tricks like 0x7f.1, zone ids,
 * IPvFuture), a bad port (leading zeros, 0, > 65535).
 * Refused by policy (REASON_REDIRECT_DENIED): userinfo ("http://granted@evil/": a client
 * would send it as credentials to the new host), a scheme other than http and https, and
 * every target the grant does not admit. https:// targets are checked against the grant as
 * the CONNECT the client will make next (https:// and tcp:// entries on that port):
 * egressd does not follow them itself, but the grant can already tell that hop would be
 * refused, and refusing at the redirect names the cause where it happened.
 */
#ifndef EGRESS_REDIRECT_H
#define EGRESS_REDIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cidr.h"
#include "common/grant.h"
#include "common/host.h"
#include "common/limits.h"
#include "common/pattern.h"
#include "common/reasons.h"

/* Where a Location points, canonical. */
struct redirect_target {
	enum dest_scheme scheme;            /* SCHEME_HTTP or SCHEME_HTTPS */
	struct host host;                   /* canonical (common/host); host.port is 0 */
	uint16_t port;                      /* default applied: 80 / 443 */
	char path[EGRESS_LOCATION_MAX + 1]; /* path and query, "/" at least; no fragment */
	char url[EGRESS_LOCATION_MAX + 1];  /* "scheme://host[:port]path" (default port
	                                       omitted), for the decision log and the body */
};

/* Why a Location was refused, for the one-line refusal and the operator log. */
enum redirect_err {
	REDIRECT_OK = 0,
	REDIRECT_ERR_EMPTY,
	REDIRECT_ERR_TOO_LONG,
	REDIRECT_ERR_SYNTAX,        /* not an RFC 3986 URI reference */
	REDIRECT_ERR_SLASHES,       /* three or more leading slashes */
	REDIRECT_ERR_SCHEME,        /* not http or https */
	REDIRECT_ERR_USERINFO,
	REDIRECT_ERR_NO_HOST,
	REDIRECT_ERR_HOST,          /* common/host refused the host */
	REDIRECT_ERR_PORT,
	REDIRECT_ERR_INTERNAL,      /* uriparser out of memory, base unusable */
};

/* Human sentence for e. */
const char *redirect_err_str(enum redirect_err e);

/*
 * Resolve loc (len bytes, as the origin sent it, whitespace already trimmed; may contain
 * anything) against the request http://base_host:base_port base_path (base_path is the
 * request's path and query, base_len bytes; "" means "/"; base_host->port is ignored).
 * Returns REDIRECT_OK and fills *out, or the reason it is unusable (*out zeroed).
 * No state; thread-safe.
 */
enum redirect_err redirect_resolve(const char *loc, size_t len, const struct host *base_host,
    uint16_t base_port, const char *base_path, size_t base_len, struct redirect_target *out);

/* The reason code for a resolve error: userinfo and foreign schemes are policy
 * (REASON_REDIRECT_DENIED), everything else REASON_REDIRECT_INVALID. */
enum reason redirect_err_reason(enum redirect_err e);

/*
 * Does the grant admit following t? http:// is checked as an absolute-form hop
 * (SCHEME_HTTP), https:// as the CONNECT the client would make (SCHEME_HTTPS). An IP
 * literal must be named by the grant (as for any hop) and, when it is in a special class,
 * be covered by grant_allow or the operator's override (addrcheck_literal); a name is
 * only checked against the grant here: its addresses are checked when the client follows
 * (its own hop, with DNS, classes and pinning). grant_allow and override may be NULL.
 * Returns REASON_ALLOWED or REASON_REDIRECT_DENIED; *detail (may be NULL) gets a static
 * phrase naming why ("not in the grant", "private address").
 */
enum reason redirect_authorize(const struct grant *g, const struct redirect_target *t,
    const struct cidr_set *grant_allow, const struct cidr_set *override,
    const char **detail);

/* Same origin (scheme, canonical host, port) as the request http://host:port? */
bool redirect_same_origin(const struct redirect_target *t, const struct host *host,
    uint16_t port);

/*
 * Is status a redirect egressd must check? Every 3xx except 304 (Not Modified carries no
 * new target) when a Location is present; the caller looks for the header.
 */
bool redirect_status_checked(int status);

/*
 * The refusal sent instead of a denied redirect: "HTTP/1.1 <status> ..." with
 * X-Egress-Reason: <code>, Content-Type text/plain, Content-Length, Connection: close and
 * the one-line body "<code>: <explanation>: <target>\n", where target is the canonical URL
 * (or the raw Location, escaped and cut to 400 bytes of text, when it could not be resolved) and
 * detail (may be NULL, a short static phrase) is appended in parentheses. Returns the length, 0 when out is too
 * small (1024 bytes always suffice) or r has no HTTP status.
 */
size_t redirect_format_refusal(enum reason r, const char *target, size_t target_len,
    const char *detail, char *out, size_t outlen);

#endif
