/*
 * gssauth - Negotiate (SPNEGO/Kerberos) tokens for upstream proxies, produced off the
 * event loop.
 *
 * Why a thread: gss_init_sec_context may talk to the KDC and block for seconds; egressd's
 * loop thread must never block. Each request runs in its own short-lived thread; the
 * result is handed back to the loop through a pipe and the callback runs on the loop
 * thread. A fresh token is made for every tunnel (Kerberos replay caches reject reuse).
 *
 * The service name is HTTP@<proxy host name> — the proxy's NAME, never its address
 * (Kerberos service principals are names; an address would silently fail).
 * Credentials: a client keytab and/or a credential cache from the proxy's entry in the
 * credentials file (gss_acquire_cred_from with a cred store), else the process default.
 *
 * Owns: every struct gss_req until its callback ran or it was cancelled (a cancelled
 * request's thread finishes on its own and its result is discarded).
 */
#ifndef EGRESS_GSSAUTH_H
#define EGRESS_GSSAUTH_H

#include <stddef.h>

struct event_base;
struct gssauth;
struct gss_req;

/* token: "Negotiate <base64>" (NUL-terminated) or NULL on failure with err set. Both are
 * valid only during the call. */
typedef void (*gss_cb)(const char *token, const char *err, void *arg);

struct gssauth *gssauth_new(struct event_base *base);
void gssauth_free(struct gssauth *g);   /* cancels outstanding requests */

/* proxy_host: the proxy's canonical host name. keytab, ccache, principal may be NULL. */
struct gss_req *gssauth_token(struct gssauth *g, const char *proxy_host, const char *keytab,
    const char *ccache, const char *principal, gss_cb cb, void *arg);
void gssauth_cancel(struct gss_req *r);

/*
 * NTLM through GSSAPI (the gss-ntlmssp mechanism, opt-in by a `scheme = ntlm` entry in the
 * credentials file): three legs on ONE proxy connection — egressd's NEGOTIATE message, the
 * proxy's CHALLENGE in a 407, egressd's AUTHENTICATE message. The security context lives
 * in a struct gss_sec that travels with each step: a step takes ownership of sec (NULL for
 * the first leg) and hands it back in the callback (free it with gssauth_sec_free when the
 * exchange is over); a cancelled step frees it.
 * username may be "DOMAIN\user" or "user@domain"; the password is used only to acquire
 * the credential and is never copied into a message.
 */
struct gss_sec;
typedef void (*gss_step_cb)(const char *token, const char *err, struct gss_sec *sec,
    void *arg);
/* challenge: the base64 text after "NTLM " in Proxy-Authenticate (NULL on the first leg).
 * token in the callback: "NTLM <base64>". */
struct gss_req *gssauth_ntlm_step(struct gssauth *g, struct gss_sec *sec,
    const char *proxy_host, const char *username, const char *password,
    const char *challenge, gss_step_cb cb, void *arg);
void gssauth_sec_free(struct gss_sec *sec);

#endif
