/*
 * grants - the registry of live grants (static from egressd.ini, dynamic from the control
 * socket), their listeners, counters, expiry and revocation.
 *
 * Owns: struct grants, every struct lgrant in it, and the listeners attached to them.
 * A struct grant inside an lgrant is immutable (DESIGN rule 4); an lgrant is reference
 * counted: the registry holds one reference while the grant is live, every connection
 * holds one for its whole life, so a connection keeps the exact authority it started with
 * even after a reload replaced its static grant. Callers: daemon, control, session,
 * metrics; event-loop thread only.
 *
 * Revocation and expiry (why "within one second" holds): grants_revoke closes the
 * listeners at once and calls kill() on every attached connection synchronously; a
 * connection's kill closes its sockets before returning or schedules that on the loop.
 */
#ifndef EGRESS_GRANTS_H
#define EGRESS_GRANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/addr.h"
#include "common/grant.h"
#include "common/limits.h"
#include "common/reasons.h"

struct event_base;
struct listener;
struct grants;

/* A connection attached to a grant (embedded in the session). */
struct grant_conn {
	struct grant_conn *next, *prev;
	/* End the connection now with this close reason (REVOKED, SHUTDOWN). */
	void (*kill)(struct grant_conn *gc, enum reason why);
};

#define GRANT_ID_HEX (EGRESS_GRANT_ID_BYTES * 2)
#define GRANT_LISTENERS_MAX 16

struct mitm_ca;

struct lgrant {
	unsigned refs;
	char id[GRANT_ID_HEX + 1];
	struct grant *g;                 /* owned, immutable */
	bool dynamic;
	char name[EGRESS_PRINCIPAL_MAX + 1]; /* static: section label */
	char ifname[EGRESS_IFNAME_MAX + 1];
	struct listener *listeners[GRANT_LISTENERS_MAX];
	size_t nlisteners;
	time_t created;
	time_t expires;                  /* 0 = never */
	struct event *expiry;
	enum reason dead;                /* REASON_ALLOWED while live; GRANT_REVOKED,
	                                    GRANT_EXPIRED, or NO_GRANT (replaced on reload) */
	uint32_t nconns;                 /* live connections */
	uint32_t ntunnels;               /* live tunnels (metrics) */
	uint32_t dns_pending;
	uint64_t bytes;                  /* bytes both ways, over the grant's life */
	uint64_t total_conns;
	struct grant_conn *conns;
	struct grants *reg;
	struct lgrant *next, *prev;      /* the live list; once retired while connections
	                                    still hold it, the registry's retired list */
	bool on_retired;
	struct mitm_ca *ca;              /* the run CA for the grant's model connection
	                                    (grant.create intercept_ca), or NULL; owned */
	char placeholder[EGRESS_PLACEHOLDER_MAX + 1]; /* the run's credential placeholder
	                                    (grant.create credential_placeholder), or "" */
	/* Transparent capture (grant.dns; docs/transparent.md): the stub resolver on the
	 * run's gateway and the synthetic pool it hands out. Both NULL when off; the stub
	 * closes with the listeners, the pool lives as long as the lgrant (owned). */
	struct dnsstub *stub;
	struct tpool *tpool;
};

/* An empty registry whose expiry timers run on base; NULL on ENOMEM. */
struct grants *grants_new(struct event_base *base);
/* Revoke everything (close reason SHUTDOWN) and free. Accepts NULL. */
void grants_free(struct grants *r);

/*
 * Add a grant (g is stolen, also on failure). lifetime_s > 0 arms the expiry timer.
 * Returns the lgrant (the registry's reference; the caller takes its own with
 * lgrant_ref if it keeps the pointer), or NULL with errno ENOSPC when EGRESS_GRANTS_MAX
 * is reached, ENOMEM when memory ran out, EIO when the CSPRNG gave no id (the registry
 * is unchanged either way).
 * A dynamic grant's id is 128 bits from the CSPRNG; a static grant's is
 * grant_static_id (its content), issued now.
 */
struct lgrant *grants_add(struct grants *r, struct grant *g, bool dynamic,
    const char *name, const char *ifname);
/*
 * A static grant first issued at issued (grantstate.h): it expires at issued + lifetime.
 * The caller has checked that this is still in the future.
 */
struct lgrant *grants_add_static(struct grants *r, struct grant *g, const char *name,
    time_t issued);

/*
 * The id of a static grant, from its content: the first EGRESS_GRANT_ID_BYTES of
 * SHA-256 over a domain label and the grant's canonical JSON (grant_to_json, keys sorted),
 * in lowercase hex. The same grant in egressd.ini has the same id across reloads and
 * restarts, so a revocation or a lifetime can be remembered (grantstate.h); any change of
 * the grant (principal, entries, limits) is a new id. Such an id is not secret (anyone who
 * reads the file can compute it): the control socket, root only, is what guards revoke.
 * Returns 0, -1 on ENOMEM.
 */
int grant_static_id(const struct grant *g, char out[GRANT_ID_HEX + 1]);
/* Attach a listener (the lgrant owns it from now on). Returns 0, -1 when full. */
int lgrant_add_listener(struct lgrant *lg, struct listener *l);
/* Detach a listener without closing it (reload moves it to the new static grant). */
void lgrant_remove_listener(struct lgrant *lg, struct listener *l);

/* The live grant with this id (exact, lowercase hex), or NULL. No reference is taken. */
struct lgrant *grants_find(struct grants *r, const char *id);
/* Iterate live grants: grants_first, then lg->next. Do not retire while iterating. */
struct lgrant *grants_first(struct grants *r);
/* Number of live grants (retired ones that connections still hold are not counted). */
size_t grants_count(const struct grants *r);

/*
 * Take the grant out of service: close its listeners, mark it dead with why
 * (GRANT_REVOKED, GRANT_EXPIRED, NO_GRANT), remove it from the registry. With
 * kill_conns, every attached connection is killed (close reason CLOSE_REVOKED);
 * without (a static grant replaced by reload), they finish with their old grant.
 */
void grants_retire(struct grants *r, struct lgrant *lg, enum reason why, bool kill_conns);

/*
 * Called by grants_retire for every grant it takes out of service, after lg->dead is set
 * and before its listeners close and its connections are killed (the daemon writes the
 * decision log's grant event there: egressd/auditev.h). fn must not retire grants.
 * NULL turns it off (daemon_stop, before grants_free).
 */
typedef void (*grants_retire_hook)(void *arg, const struct lgrant *lg, enum reason why);
void grants_set_retire_hook(struct grants *r, grants_retire_hook fn, void *arg);

/* Kill every connection of every grant with why (drain end, shutdown): the live grants'
 * and those of grants retired without killing (a static grant a reload replaced), which
 * the registry keeps on a list of its own while connections hold them. */
void grants_kill_all(struct grants *r, enum reason why);
/* Close every listener of every grant (drain start). */
void grants_close_listeners(struct grants *r);

/* Take / drop a reference; the last unref closes its listeners and frees the grant.
 * lgrant_unref accepts NULL. */
void lgrant_ref(struct lgrant *lg);
void lgrant_unref(struct lgrant *lg);
/* Put a connection on / take it off the grant's list of connections that revoke kills.
 * A connection must detach before it is freed; detaching twice is harmless. */
void lgrant_attach(struct lgrant *lg, struct grant_conn *gc);
void lgrant_detach(struct lgrant *lg, struct grant_conn *gc);

/* Addresses of every listener of every live grant, for the self_address check. */
size_t grants_self_addrs(struct grants *r, struct addr *out, size_t max);

#endif
