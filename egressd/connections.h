/*
 * connections - model connections: a credential egressd holds and applies on the wire,
 * and the destinations it is bound to (docs/model-connections.md).
 *
 * Owns: struct connections, every connection in it and its secret (wiped on free).
 * Callers: egressd/config (loads the file named by [egressd] connections, at start-up as
 * root and at reload: all-or-nothing with the rest of the configuration), egressd/control
 * (grant.create resolves a grant's "connection" name), egressd/mitm (strips the worker's
 * credentials, adds the real one, applies the method/path rules).
 *
 * The file is the connection layer's trusted-models file that egress-exec reads for a
 * model_only preset's destinations (executor/preset.h); egressd reads the same sections:
 *
 *   [connection anthropic]
 *   destination = https://api.anthropic.com          ; repeated; https:// only
 *   credential_file = /etc/egress/keys/anthropic     ; root-only 0600 (secretfile.h)
 *   credential_header = x-api-key                     ; authorization-bearer | x-api-key |
 *                                                     ; any other header field name
 *   allow_method = POST                               ; optional, repeated
 *   allow_path = /v1/messages                         ; optional, repeated; a trailing * means prefix
 *
 * A section without credential_file is a destinations-only connection (egress-exec's
 * admission uses it; egressd does not intercept for it). A connection with a credential
 * must name at least one destination. The secret is the file's content without trailing
 * CR/LF: 1..EGRESS_CREDENTIAL_MAX visible ASCII bytes (no space, no control character:
 * it goes into a header line). Nothing in this module formats a secret into a message.
 */
#ifndef EGRESS_CONNECTIONS_H
#define EGRESS_CONNECTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/host.h"
#include "common/limits.h"
#include "common/pattern.h"
#include "common/reasons.h"

enum conn_apply {
	CONN_APPLY_NONE = 0,        /* destinations only: no credential */
	CONN_APPLY_BEARER,          /* Authorization: Bearer SECRET */
	CONN_APPLY_X_API_KEY,       /* x-api-key: SECRET */
	CONN_APPLY_HEADER,          /* <header>: SECRET */
};

struct connection {
	char name[EGRESS_CONNECTION_NAME_MAX + 1];
	struct dest_pattern *dest;
	size_t ndest;
	enum conn_apply apply;
	char header[EGRESS_HEADER_NAME_MAX + 1];   /* lowercase field name the secret goes in */
	char *secret;                               /* NULL for CONN_APPLY_NONE; wiped on free */
	char *credfile;                             /* credential_file, or NULL */
	size_t secret_len;
	char **methods;                             /* allow_method; none = every method */
	size_t nmethods;
	char **paths;                               /* allow_path; none = every path */
	size_t npaths;
	unsigned line;                              /* of the section, for messages */
};

struct connections {
	unsigned refs;                  /* connections_ref / connections_free */
	char *path;
	struct connection *v;
	size_t n;
};

/*
 * Load the file at path (text: the same for a string named name, tests). Credential files
 * are read with secretfile_read(check_owner). NULL with err on any problem: unknown key,
 * bad destination, unreadable or world-readable credential file, a credential without
 * destinations, a bad header name or rule. err then holds every problem found, one
 * "file:line: ..." per line ('\n'-separated; a syntax error of the file itself stops at
 * that one, as for egressd.ini); a section with any other problem has its credential file
 * left unread.
 *
 * keep: NULL at start-up. At a reload (after the privilege drop, when the root-only
 * credential files cannot be read again) the running set: a credential_file it read is
 * not read again, its secret is copied from there; a credential file it did not read is an
 * error that says a restart is needed (the same rule as proxy_credentials).
 */
struct connections *connections_load(const char *path, int check_owner,
    const struct connections *keep, char *err, size_t errlen);
struct connections *connections_load_string(const char *name, const char *text, size_t len,
    int check_owner, const struct connections *keep, char *err, size_t errlen);
/* A live interception keeps the set it started with (and its secrets) until it ends, even
 * across a reload: connections_ref adds a reference, connections_free drops one and frees
 * on the last. Both accept NULL. */
struct connections *connections_ref(struct connections *c);
void connections_free(struct connections *c);

/* The connection called name, or NULL. c may be NULL. */
const struct connection *connections_find(const struct connections *c, const char *name);

/* True when name is a valid connection name (1-64 of [A-Za-z0-9._-]). */
bool connection_name_valid(const char *name);

/* Does a CONNECT to h:port reach one of the connection's destinations? */
bool connection_covers(const struct connection *c, const struct host *h, uint16_t port);

/*
 * The method and path rules for one inner request. path is the request target's path
 * (origin-form, query included or not: the query is ignored). REASON_ALLOWED, or
 * REASON_CONNECTION_METHOD_DENIED / REASON_CONNECTION_PATH_DENIED. With path rules, a path
 * that is not plainly canonical (dot segments, "//", backslash, percent-encoded '/', '.'
 * or '\\') is refused: a rule must mean what it says to the origin too.
 */
enum reason connection_request_allowed(const struct connection *c, const char *method,
    const char *path, size_t pathlen);

/*
 * Is the header field `name` (namelen bytes, any case) one egressd strips from the
 * worker's inner requests? Authorization, Proxy-Authorization, x-api-key, Cookie and the
 * connection's own credential_header.
 */
bool connection_strips_header(const struct connection *c, const char *name, size_t namelen);

/*
 * The credential header line "Name: value\r\n" into out. Returns its length, or 0 when it
 * does not fit or the connection carries no credential. The caller wipes out after use.
 */
size_t connection_header_line(const struct connection *c, char *out, size_t outlen);

const char *conn_apply_str(enum conn_apply a);

#endif
