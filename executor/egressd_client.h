/*
 * egressd_client - egress-exec's side of egressd's control socket (docs/control.md), and
 * the embedded egressd started for one run when no running egressd is configured.
 *
 * Owns: the grant operations egress-exec needs (each one request through
 * common/ctlclient.h: one connection, one JSON line out, one bounded JSON line back), and
 * the embedded egressd process (its generated config, control socket
 * and decision log live in the run folder).
 * Callers: executor/sandbox.c (grant.create / grant.revoke around a run),
 * executor/doctor.c (status), executor/attest.c.
 *
 * Every exchange is bounded: replies longer than EGRESS_CONTROL_LINE_MAX are refused and
 * the whole exchange has a deadline (timeout_ms). Nothing from the reply is trusted beyond
 * its documented shape: grant ids must be 32 lowercase hex digits.
 */
#ifndef EGRESS_EGRESSD_CLIENT_H
#define EGRESS_EGRESSD_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/limits.h"

#define EGRESSD_RUN_TOP           "/run/egress-exec"   /* where run folders live */
#define EGRESSD_START_TIMEOUT_MS   10000   /* embedded egressd must answer status by then */
#define EGRESSD_STOP_TIMEOUT_MS    5000    /* then SIGKILL */
#define EGRESSD_EXIT_GRACE_MS      1000    /* an egressd that closed its readiness pipe */
#define EGRESSD_GRANT_ID_LEN       (2 * EGRESS_GRANT_ID_BYTES)

/*
 * grant.create for exactly `allow` (NULL-terminated), principal label `principal`, bound to
 * listen ("a.b.c.d:0" picks a port) and device ifname, with lifetime_s (> 0). On success
 * returns 0, grant_id (EGRESSD_GRANT_ID_LEN + 1 bytes) and listen_out ("addr:port",
 * EGRESS_HOSTPORT_MAX + 1 bytes) are filled. -1 with err (egressd's error code and message
 * when it refused).
 */
int egressd_grant_create(const char *sock_path, const char *principal,
    const char *const *allow, const char *listen, const char *ifname, uint32_t lifetime_s,
    char *grant_id, char *listen_out, char *err, size_t errlen);

/*
 * The same with a listening socket the caller made in the run's own network namespace
 * (bound to the veth's host end there), passed to egressd instead of an address to bind;
 * ifname names that veth end for the records. The caller still owns and closes listen_fd.
 * model (NULL = none) names the preset's model connection (docs/model-connections.md).
 */
/*
 * Transparent capture (docs/transparent.md): hand egressd the run's stub resolver socket
 * (a UDP socket bound to the veth's host end in the run's link namespace) for grant_id;
 * from then on egressd answers the worker's DNS and accepts captured connections on the
 * grant's listener. The caller still owns and closes dns_fd. 0, or -1 with err (an egressd
 * without grant.dns answers unknown_op: the run then fails closed).
 */
int egressd_grant_dns(const char *sock_path, const char *grant_id, int dns_fd, char *err,
    size_t errlen);

struct egressd_grant_model {
	const char *connection;     /* its name only: egressd resolves it, refuses unknowns */
	const char *ca_cert;        /* the run CA, PEM ("intercept_ca"), or NULL */
	const char *ca_key;         /* its key, PEM (with ca_cert) */
	const char *placeholder;    /* the run's credential placeholder, or NULL */
};
int egressd_grant_create_fd(const char *sock_path, const char *principal,
    const struct egressd_grant_model *model, const char *const *allow, int listen_fd, const char *ifname, uint32_t lifetime_s,
    char *grant_id, char *listen_out, char *err, size_t errlen);

/* grant.revoke. Returns 0 (also when egressd says unknown_grant: it expired), -1 otherwise. */
int egressd_grant_revoke(const char *sock_path, const char *grant_id, char *err, size_t errlen);

/* status. Returns 0 with *status (new reference to the reply object), -1 otherwise. */
int egressd_status(const char *sock_path, json_t **status, char *err, size_t errlen);

/* True when s is exactly EGRESSD_GRANT_ID_LEN lowercase hex digits. Pure. */
bool egressd_grant_id_valid(const char *s);

struct egressd_embedded {
	pid_t pid;                          /* 0 when not running */
	char sock[EGRESS_PATH_MAX];         /* its control socket */
	char conf[EGRESS_PATH_MAX];         /* generated config */
	char decisions[EGRESS_PATH_MAX];    /* its decision log */
	char log[EGRESS_PATH_MAX];          /* its stderr */
	char creds[EGRESS_PATH_MAX];        /* generated proxy credentials, "" when none */
	char pacdir[EGRESS_PATH_MAX];       /* directory of its PAC copy, "" when none */
	int ready_rd;                       /* readiness pipe until ready; -1 after */
};

/*
 * Find the egressd binary: $EGRESS_EGRESSD; the build tree next to this egress-exec
 * (../egressd/egressd); the directory of this egress-exec; then PATH. Returns 0 with the
 * path in out, -1 when none is executable.
 */
int egressd_find_binary(char *out, size_t outlen);

/*
 * The two halves of egressd_embedded_start, so the caller can prepare the sandbox while
 * egressd starts: _spawn writes the config and forks egressd with the write end of a
 * readiness pipe (EGRESSD_READY_FD) and returns at once (0, or -1 with err); _ready waits,
 * bounded by EGRESSD_START_TIMEOUT_MS, for egressd's readiness byte (woken by it, or by
 * EOF when egressd dies), then checks that `status` answers. Returns 0, or -1 with err
 * (the process is stopped again). egressd_embedded_stop also undoes a _spawn without
 * _ready.
 */
int egressd_embedded_spawn(const char *dir, const char *const *settings,
    struct egressd_embedded *e, char *err, size_t errlen);
int egressd_embedded_ready(struct egressd_embedded *e, char *err, size_t errlen);

/*
 * Start a private egressd for one run: config in dir/egressd.ini (control socket
 * dir/egressd.sock, decision log dir/decisions.jsonl, plus each "key=value" of settings,
 * NULL-terminated, in [egressd]: e.g. dns_server or allow_special_address for a lab),
 * stderr to dir/egressd.log; wait (bounded) until it is ready and `status` answers. Returns 0, or -1 with
 * err (the process is stopped again).
 */
int egressd_embedded_start(const char *dir, const char *const *settings,
    struct egressd_embedded *e, char *err, size_t errlen);

/* SIGTERM, wait up to EGRESSD_STOP_TIMEOUT_MS, then SIGKILL; reap; remove the generated
 * credentials and the PAC directory. Accepts pid 0. */
void egressd_embedded_stop(struct egressd_embedded *e);

/* A setting for the embedded config: key [a-z_]+, '=', value without control characters. */
bool egressd_setting_valid(const char *kv);

#endif
