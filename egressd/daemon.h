/*
 * daemon - egressd's run-time state and its life cycle: start, accept, reload, drain.
 *
 * Owns: struct daemon and everything hanging off it (config, resolver, router, decision
 * log, grant registry, control socket, metrics server, pipe pool). Callers: main.c (start,
 * signals), control (grant.create, reload), session (shared services). Event-loop thread
 * only.
 */
#ifndef EGRESS_DAEMON_H
#define EGRESS_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "egressd/config.h"
#include "egressd/metrics.h"

struct event_base;
struct event;
struct resolver;
struct router;
struct dlog;
struct grant_conn;
struct grants;
struct lgrant;
struct control;
struct pipe_pool;
struct grantstate;

#define DAEMON_RETIRING_MAX 8

struct daemon {
	struct event_base *base;
	struct egressd_config *cfg;         /* replaced whole on reload */
	struct resolver *resolver;
	struct router *router;
	struct dlog *dlog;
	struct grants *grants;
	struct grantstate *gstate;          /* static-grant revocations and first issues */
	struct control *control;
	struct metrics_server *metrics_srv;
	struct pipe_pool *pipes;
	/* Shared by every session, as long as the daemon runs (bounded, grant-keyed):
	 * redirects egressd let through (egressd/redirmemo; it never grants anything, so an
	 * entry outliving its grant only keeps stripping credentials a little longer), and
	 * idle upstream connections for plain-HTTP forwarding (egressd/upool; reused only by
	 * the same grant for the same pinned address and port, after the hop was authorized
	 * and checked from scratch). */
	struct redirmemo *memo;
	struct upool *upool;
	struct metrics_stats stats;
	uint32_t nconns;                    /* live client connections */
	/* Sessions answering a refusal: off their grant's list (a revoke must not reach
	 * them), so kept here, linked through their grant_conn, for daemon_stop to free
	 * when a second SIGTERM ends the loop before their refusal timers fire. */
	struct grant_conn *refusing;
	uint64_t next_conn_id;
	uint32_t boot_id;                   /* random per start: connection ids stay unique */
	bool draining;
	time_t started;
	struct event *drain_timer;
	struct event *drain_poll;
	/* Routers (with the resolvers they use) replaced by a reload while route lookups were
	 * in flight: freed once those finished (polled), their resolvers then retired. */
	struct {
		struct router *rt;
		struct resolver *rs;
	} retiring[DAEMON_RETIRING_MAX];
	size_t nretiring;
	struct event *retire_timer;
};

/* Bring everything up from cfg (stolen). Returns 0, or -1 with err (start-up failures). */
int daemon_start(struct daemon *d, struct event_base *base, struct egressd_config *cfg,
    char *err, size_t errlen);

/*
 * Reload cfg->path all-or-nothing: on any error (file, grants, listener bind) the running
 * configuration stays and err says why; returns -1. Returns 0 when the new configuration
 * and static grants are in service.
 */
int daemon_reload(struct daemon *d, char *err, size_t errlen);

/* SIGTERM: stop accepting, let connections run up to drain_timeout, then close them and
 * leave the event loop. */
void daemon_drain(struct daemon *d);

/* Free everything (after the loop ended). */
void daemon_stop(struct daemon *d);

/* Accept callback of every proxy listener; arg is the listener's lgrant. */
void daemon_accept(int fd, const struct sockaddr *peer, socklen_t peerlen, void *arg);

/*
 * grant.create: register g (stolen) as a dynamic grant and bind its listener to exactly
 * sa on ifname. Returns the lgrant, or NULL with *code ("bind_failed", "limit",
 * "internal") and err.
 */
struct lgrant *daemon_grant_create(struct daemon *d, struct grant *g,
    const struct sockaddr *sa, socklen_t salen, const char *ifname, const char **code,
    char *err, size_t errlen);
/*
 * The same with a listening socket egress-exec created in the run's own network namespace
 * and passed over the control socket (fd owned by the callee, closed on failure). ifname
 * is the veth's host end there, for the records (may be empty). *code "bad_listener" when
 * the fd is not a listening TCP socket bound to a specific address.
 */
struct lgrant *daemon_grant_adopt(struct daemon *d, struct grant *g, int fd,
    const char *ifname, const char **code, char *err, size_t errlen);

#endif
