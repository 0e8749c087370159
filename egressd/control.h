/*
 * control - egressd's control socket (docs/control.md): unix stream socket, mode 0600,
 * peers checked with SO_PEERCRED (uid 0 only), newline-delimited JSON requests/replies.
 *
 * Owns: the socket, its clients and their buffers (control_free closes all). The request
 * decoder control_decode is a pure function (fuzz/fuzz_control.c, tests/test_control.c).
 * Callers: daemon (start, drain). Requests run on the loop thread, in order per client.
 * A malformed or unauthorized request changes nothing and gets an error reply.
 */
#ifndef EGRESS_CONTROL_H
#define EGRESS_CONTROL_H

#include <jansson.h>
#include <stddef.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "common/grant.h"
#include "common/limits.h"
#include "egressd/grants.h"

struct daemon;
struct control;

enum control_op { CTL_GRANT_CREATE, CTL_GRANT_REVOKE, CTL_GRANT_UNREVOKE, CTL_GRANT_LIST,
    CTL_STATUS, CTL_RELOAD, CTL_ROUTE, CTL_GRANT_DNS };

struct control_req {
	enum control_op op;
	json_t *id;                         /* owned reference, or NULL */
	struct grant *grant;                /* grant.create: owned */
	struct sockaddr_storage listen;     /* grant.create */
	socklen_t listenlen;
	char ifname[EGRESS_IFNAME_MAX + 1]; /* grant.create */
	bool listen_fd;                     /* grant.create: the listener came as an fd */
	char *ca_cert;                      /* grant.create "intercept_ca": the run CA (PEM) */
	char *ca_key;                       /* ... and its key (PEM; wiped on clear) */
	char placeholder[EGRESS_PLACEHOLDER_MAX + 1]; /* "credential_placeholder", or "" */
	char grant_id[GRANT_ID_HEX + 1];    /* grant.revoke, grant.unrevoke, grant.dns */
	enum dest_scheme scheme;            /* route: the destination asked about */
	struct host host;
	uint16_t port;
};

/*
 * Decode one request line (len bytes, no newline). Returns 0 and fills *out (release with
 * control_req_clear), or -1 with *code ("malformed", "unknown_op", "unknown_key",
 * "invalid_grant") and a human message; out->id is still set when it could be read, so
 * the error reply can echo it (call control_req_clear in both cases).
 */
int control_decode(const char *line, size_t len, struct control_req *out, const char **code,
    char *msg, size_t msglen);
void control_req_clear(struct control_req *r);

/* Build an error reply object (new reference). */
json_t *control_error(const json_t *id, const char *code, const char *msg);

/* Listen on path (a stale socket file is replaced). NULL with err on failure. */
struct control *control_new(struct daemon *d, const char *path, char *err, size_t errlen);
/* Close the socket, its clients, and unlink the path. Accepts NULL. */
void control_free(struct control *c);

#endif
