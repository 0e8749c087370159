/*
 * ctlclient - the client side of egressd's control socket (docs/control.md): one
 * connection per request, one JSON line out (optionally carrying an fd with SCM_RIGHTS),
 * one bounded JSON line back, the whole exchange under one deadline. It knows the
 * framing, not the operations: callers build the request and read the reply's fields.
 *
 * Owns nothing beyond one call. Callers: egressctl (egressd/ctl/egressctl.c) and
 * egress-exec (executor/egressd_client.c). Knows nothing of either program or the daemon.
 * Every reply is hostile until parsed: longer than EGRESS_CONTROL_LINE_MAX is refused,
 * duplicate keys are refused, anything but a JSON object is refused.
 */
#ifndef EGRESS_CTLCLIENT_H
#define EGRESS_CTLCLIENT_H

#include <jansson.h>
#include <stddef.h>

#define CTLCLIENT_TIMEOUT_MS 5000   /* the deadline when the caller passes 0 */

/*
 * Send req (one JSON object, not consumed) to the control socket at sock_path, with
 * pass_fd (when >= 0; the caller keeps and closes its copy) attached to the first bytes,
 * and read one reply line within timeout_ms (0 = CTLCLIENT_TIMEOUT_MS). Returns 0 with
 * *reply (a new reference) when a well-formed object came back, whatever its "ok"; -1
 * with a message in err on a connect, I/O, timeout, size or parse failure.
 */
int ctlclient_request(const char *sock_path, json_t *req, int pass_fd, json_t **reply,
    unsigned timeout_ms, char *err, size_t errlen);

#endif
