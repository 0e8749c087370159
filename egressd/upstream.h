/*
 * upstream - open a tunnel to an authorized destination THROUGH an upstream proxy
 * (http://, https:// or socks5://), the way the host's own route says.
 *
 * Owns: the proxy connection until the callback (on success the fd passes to the caller),
 * the TLS bridge of an https:// proxy (which lives on until its tunnel ends), and every
 * struct upstream_req until its callback ran or it was cancelled.
 * Callers: egressd/session, loop thread only; nothing here blocks (Negotiate tokens come
 * from gssauth's threads).
 *
 * Rules (DESIGN.md): the proxy is route infrastructure — its name is resolved by egressd's
 * resolver and its address is not subject to the special-address block; it is logged.
 * The destination was authorized before this module is called. By default the hostname is
 * sent (the proxy resolves: the hop is not attested); when the grant requires pinning the
 * caller passes the checked address and the literal is sent instead (CONNECT [v6]:port or
 * SOCKS5 IPv4/IPv6 address type). The proxy's reply is consumed exactly: bytes after a
 * 200 (or a SOCKS5 success) stay in the socket as tunnel data. Proxy-Authorization from the
 * worker is never involved: credentials come only from egressd's credentials file.
 * A 407 with no usable credential is upstream_auth_required (naming the offered schemes);
 * a 407 after egressd sent credentials is upstream_auth_failed; there is exactly one
 * attempt per connection — never a loop, never a fallback to direct.
 */
#ifndef EGRESS_UPSTREAM_H
#define EGRESS_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "common/addr.h"
#include "common/reasons.h"
#include "egressd/proxycreds.h"
#include "common/proxyurl.h"

struct event_base;
struct resolver;
struct gssauth;
struct upstream_req;
struct upstream_result;

/*
 * The gate (docs/decision-log.md, "The allow record comes first"): called once the
 * connection to the proxy (and TLS to an https:// proxy) is up and before the first byte
 * of the proxy protocol (the CONNECT line, the SOCKS5 greeting, or — forward mode —
 * before the caller's request) is sent. so_far holds the address connected to
 * (proxy_addr) and the scheme egressd's credential will use (auth), nothing else. The
 * request then waits until the caller calls upstream_proceed (its allow record is on
 * disk) or upstream_cancel (it could not be written: the proxy received nothing). The
 * deadline keeps running while it waits. Never called from inside upstream_connect.
 */
typedef void (*upstream_gate_cb)(struct upstream_req *u,
    const struct upstream_result *so_far, void *arg);

struct upstream_params {
	const struct proxy_route *via;      /* PROXY_HTTP, PROXY_HTTPS or PROXY_SOCKS5 */
	const char *target_name;            /* canonical host name sent by default */
	const struct addr *target_addr;     /* non-NULL: pinned, send this literal instead */
	uint16_t target_port;
	const struct proxycred *cred;       /* NULL: no credentials for this proxy */
	struct resolver *res;               /* resolves the proxy's name */
	struct gssauth *gss;                /* Negotiate tokens (may be NULL: no Negotiate) */
	SSL_CTX *tls;                       /* https:// proxies: verifying client context */
	uint32_t timeout_ms;                /* the whole exchange */
	upstream_gate_cb gate;              /* NULL: no gate (tests) */
	bool forward;                       /* plain-HTTP forwarding through an http(s) proxy:
	                                       connect (and TLS) only, no CONNECT; the caller
	                                       sends the absolute-form request with the
	                                       Proxy-Authorization value from the result */
};

struct upstream_result {
	enum reason status;        /* REASON_ALLOWED: fd is a tunnel to the destination */
	int fd;                    /* owned by the callee on success; -1 otherwise */
	bool have_proxy_addr;
	struct addr proxy_addr;    /* the proxy address connected to (for the log) */
	int proxy_status;          /* HTTP status of the proxy's CONNECT answer, 0 if none */
	char offered[96];          /* schemes offered in Proxy-Authenticate on a 407 */
	const char *auth;          /* "basic", "negotiate" or NULL */
	bool failover_ok;          /* true when the next route entry may be tried (connect or
	                              TLS failure); never after auth or a policy answer */
	char detail[160];          /* one line for the operator log */
	char *proxy_authorization; /* forward mode: the header value to send (heap; the
	                              callee owns it and must wipe and free it), or NULL */
};

typedef void (*upstream_cb)(const struct upstream_result *res, void *arg);

/* Start; the callback never runs from inside this call. NULL on ENOMEM. The params'
 * pointers must stay valid until the callback or cancel. */
struct upstream_req *upstream_connect(struct event_base *base,
    const struct upstream_params *p, upstream_cb cb, void *arg);
void upstream_cancel(struct upstream_req *r);
/* After the gate: go on with the proxy protocol (on the next loop turn). */
void upstream_proceed(struct upstream_req *r);

/* The verifying TLS client context for https:// proxies: ca_file when set, loaded now (a
 * file that does not load stops the start-up or the reload). Without ca_file the system
 * trust store is NOT loaded yet: parsing the whole bundle costs tens of milliseconds of
 * CPU with OpenSSL 3 (measured: most of a private egressd's start-up), and most routes
 * never reach an https:// proxy; upstream_tls_ctx_load_system loads it on first use.
 * NULL with err on failure. */
SSL_CTX *upstream_tls_ctx_new(const char *ca_file, char *err, size_t errlen);
/* The system trust store (OpenSSL's default paths) into ctx. 0, or -1 with err. */
int upstream_tls_ctx_load_system(SSL_CTX *ctx, char *err, size_t errlen);

/* Build the CONNECT request head into buf; auth (may be NULL) is a full header value
 * ("Basic ..."). Returns length, 0 if it does not fit. Exposed for tests. */
size_t upstream_connect_head(const char *target_name, const struct addr *target_addr,
    uint16_t port, const char *auth, char *buf, size_t len);

#endif
