/*
 * redirmemo - a short memory of the redirects egressd let through, per principal
 * (docs/redirects.md).
 *
 * Owns: struct redirmemo and its entries (redirmemo_free accepts NULL). Callers:
 * egressd/session (records an allowed redirect; looks a new hop up), tests/test_redirmemo.
 * Single-threaded (the event loop); no I/O.
 *
 * Why it exists:
 * - Credentials stay with their owner (DESIGN rule 6). After an allowed cross-origin
 *   redirect, the principal's next requests to that origin within the window are
 *   forwarded without Authorization and Cookie, unless the grant binds credentials to that
 *   origin (grant_credentials_bound, checked by the caller). The client is the one that
 *   would copy a credential across; egressd removes it on the way.
 * - Hop chains: a follow-up request that matches a remembered redirect names it as its
 *   parent_hop, so an auditor can walk request -> redirect -> follow-up.
 * - Loop bound: each remembered redirect carries its chain depth (the redirected request's
 *   depth + 1); a redirect that would make a chain longer than EGRESS_REDIRECT_CHAIN_MAX
 *   is refused (REASON_REDIRECT_LOOP) by the caller.
 * The memo never grants anything: a follow-up is authorized as its own hop; a hit only
 * removes credentials and links the record.
 *
 * Bounds: at most EGRESS_REDIRECT_MEMO_MAX entries per principal (the oldest is dropped
 * when full), at most EGRESS_GRANTS_MAX principals (the principal whose newest entry is
 * oldest is dropped), entries expire after ttl_ms (EGRESS_REDIRECT_MEMO_TTL_S by
 * default). Forgetting early is safe for the grant (nothing is granted by a hit) and only
 * loses the stripping of an old redirect's credentials and the chain link.
 * Keys: the grant id (lgrant id), not the principal label: a new grant for the same label
 * starts with an empty memo.
 */
#ifndef EGRESS_REDIRMEMO_H
#define EGRESS_REDIRMEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/host.h"
#include "common/limits.h"
#include "common/pattern.h"

struct redirmemo;

/* ttl_ms 0 means EGRESS_REDIRECT_MEMO_TTL_S. NULL on ENOMEM. */
struct redirmemo *redirmemo_new(uint64_t ttl_ms);
void redirmemo_free(struct redirmemo *m);

/* Forget everything of one principal (its grant ended). */
void redirmemo_forget(struct redirmemo *m, const char *key);

/*
 * Remember an allowed redirect of principal key to scheme://h:port path (the canonical
 * target; path and query, at most EGRESS_LOCATION_MAX bytes, cut beyond). hop is the
 * redirect decision's hop id (copied, at most 63 bytes), depth its chain depth (1 for a
 * redirect of a fresh request), cross_origin whether it left the request's origin (only
 * those make later requests lose their credentials). Returns 0, -1 on ENOMEM (nothing
 * remembered: the caller should refuse the redirect, since stripping would be lost).
 */
int redirmemo_record(struct redirmemo *m, const char *key, enum dest_scheme scheme,
    const struct host *h, uint16_t port, const char *path, size_t path_len,
    const char *hop, unsigned depth, bool cross_origin, uint64_t now_ms);

struct redirmemo_hit {
	bool strip;             /* a live cross-origin redirect to this origin exists */
	bool linked;            /* this request follows a remembered redirect: */
	char parent_hop[64];    /*   that redirect's hop id */
	unsigned depth;         /*   and its chain depth (0 when not linked) */
};

/*
 * A new hop of principal key to scheme://h:port path (path NULL or "" when unknown, e.g.
 * CONNECT). Fills *hit (zeroed when nothing matches). The chain link prefers an entry with
 * the same path, then any unlinked entry to the same origin (clients normalize paths a
 * little differently); a linked entry is consumed (one follow-up per redirect), while
 * strip stays in force for the whole window.
 */
void redirmemo_lookup(struct redirmemo *m, const char *key, enum dest_scheme scheme,
    const struct host *h, uint16_t port, const char *path, size_t path_len, uint64_t now_ms,
    struct redirmemo_hit *hit);

/* Live entries of principal key (tests, status). */
size_t redirmemo_count(struct redirmemo *m, const char *key, uint64_t now_ms);

#endif
