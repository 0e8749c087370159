/*
 * proxycreds - upstream proxy credentials, held by egressd only.
 *
 * The file (referenced by `proxy_credentials` in egressd.ini) must be a regular file owned
 * by root with no group or other permission bits; anything else is refused at load, so a
 * credential never sits where a worker or another user could read it. Format (INI):
 *
 *   [proxy proxy.corp.example:3128]
 *   scheme = basic            ; basic | negotiate | ntlm
 *   username = alice          ; basic, ntlm
 *   password = s3cret         ; basic, ntlm (or password_file = /path, root-only)
 *   keytab = /etc/egressd/egressd.keytab   ; negotiate: client keytab (optional)
 *   ccache = FILE:/run/egressd/krb5cc     ; negotiate: credential cache (optional)
 *   ccache_import = FILE:/tmp/krb5cc_1000 ; negotiate: copied into memory at load (before
 *                                         ; the privilege drop); excludes ccache
 *   principal = egressd@CORP.EXAMPLE      ; negotiate: client principal (optional)
 *
 * Passwords are wiped from memory on free and are never logged; nothing in this module
 * formats a secret into a message.
 * Owns: struct proxycreds and its entries. Callers: egressd/upstream, config (load).
 */
#ifndef EGRESS_PROXYCREDS_H
#define EGRESS_PROXYCREDS_H

#include <stddef.h>
#include <stdint.h>

#include "common/host.h"

enum proxy_auth_scheme { PROXY_AUTH_BASIC = 1, PROXY_AUTH_NEGOTIATE, PROXY_AUTH_NTLM };

struct proxycred {
	struct host proxy;          /* canonical host with port */
	enum proxy_auth_scheme scheme;
	char *username;
	char *password;             /* wiped on free */
	char *keytab;
	char *ccache;
	char *principal;
};

struct proxycreds {
	struct proxycred *v;
	size_t n;
	unsigned refs;              /* a reload keeps the credentials read at start-up */
};

/* Load and check ownership/mode. NULL with err ("file:line: ..." or a mode complaint).
 * check_owner = 0 only for tests run as non-root. */
struct proxycreds *proxycreds_load(const char *path, int check_owner, char *err, size_t errlen);
/* Drop a reference (the last one wipes and frees). Accepts NULL. */
void proxycreds_free(struct proxycreds *c);
/* Another reference to c (the file is root-only and read once, before the privilege
 * drop: a reload keeps using what start-up read). Returns c. */
struct proxycreds *proxycreds_ref(struct proxycreds *c);

/* The credential for proxy host:port, or NULL. */
const struct proxycred *proxycreds_find(const struct proxycreds *c, const struct host *proxy);

const char *proxy_auth_scheme_str(enum proxy_auth_scheme s);

/* "Basic base64(user:pass)" into out (NUL-terminated); returns length or 0 if too small.
 * The caller wipes out after use. */
size_t proxycreds_basic_header(const struct proxycred *c, char *out, size_t outlen);

#endif
