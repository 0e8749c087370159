/*
 * grantstate - what egressd must remember about static grants across reloads and
 * restarts: which were revoked, and when each static grant with a lifetime was first
 * issued.
 *
 * Why: a static grant is re-read from egressd.ini at every reload and start. Without a
 * memory, `egressctl grant revoke` of a static grant would last only until the next
 * SIGHUP, and a static `lifetime` would start again at every reload: during an incident
 * that is a re-opened door. So a static grant's id is derived from its content (grants.h,
 * grant_static_id): the same grant in the file is the same id after any reload or
 * restart, and a changed grant is a new id. This module keys its records by that id:
 * - a revocation holds until the operator changes that grant in the file (new id) or
 *   clears it explicitly (grantstate_unrevoke: control op grant.unrevoke);
 * - a lifetime counts from the first issue of that unchanged grant.
 *
 * The file: a journal of JSON lines, one record each,
 *   {"v":1,"op":"issue"|"revoke"|"unrevoke","grant_id":"<32 hex>","principal":"...",
 *    "time":<unix seconds>}
 * replayed in order at open. It belongs to egressd's starting user (root) with no group or
 * other write bit, is never a symbolic link, and is at most EGRESS_GRANT_STATE_MAX bytes.
 * It is opened (created if missing) at start-up, before the privilege drop; egressd keeps
 * the descriptor and appends to it, with fdatasync, before it answers the operator. A
 * last line without its newline is a record whose write never completed (so never
 * acknowledged): it is cut off at open, with a warning. Any other damage (a line that is
 * not such a record) fails the open: egressd will not start on a state it cannot read,
 * since that could forget a revocation.
 *
 * Owns: struct grantstate (its records and fd). Callers: daemon (start, reload), control
 * (grant.revoke, grant.unrevoke, grant.list), egressd -t (grantstate_check). Event-loop
 * thread only.
 */
#ifndef EGRESS_GRANTSTATE_H
#define EGRESS_GRANTSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "common/limits.h"

struct grantstate;

struct grantstate_entry {
	char id[EGRESS_GRANT_ID_BYTES * 2 + 1];
	char principal[EGRESS_PRINCIPAL_MAX + 1];
	time_t issued;          /* 0 = no issue recorded */
	time_t revoked;         /* 0 = not revoked */
};

/*
 * Open (create: mode 0600) and replay path. The file must be a regular file owned by
 * owner with no group/other write bit. Returns NULL with err ("path:line: ...").
 */
struct grantstate *grantstate_open(const char *path, uid_t owner, char *err, size_t errlen);
/* Check path as grantstate_open would, without creating or repairing it; a missing file
 * is fine (start-up creates it). 0 or -1 with err. For egressd -t. */
int grantstate_check(const char *path, uid_t owner, char *err, size_t errlen);
void grantstate_free(struct grantstate *gs);   /* accepts NULL */

/* The record for id, or NULL. */
const struct grantstate_entry *grantstate_get(const struct grantstate *gs, const char *id);

/*
 * First issue time of the static grant id: the recorded one, else now (recorded and
 * appended). Returns the time; *persisted is false when the record could not be written
 * (the time still holds in memory until egressd stops: log it).
 */
time_t grantstate_issued(struct grantstate *gs, const char *id, const char *principal,
    time_t now, bool *persisted);

/* Make room for more new records, so that grantstate_issued for that many new ids
 * allocates nothing: a reload calls it while it can still fail (before its commit), so
 * one that cannot allocate keeps the running configuration. 0, or -1 with err. */
int grantstate_reserve(struct grantstate *gs, size_t more, char *err, size_t errlen);

/* Record a revocation (in memory when there is room and memory). 0 when it is on disk, -1 with err otherwise. */
int grantstate_revoke(struct grantstate *gs, const char *id, const char *principal,
    time_t now, char *err, size_t errlen);

/* Clear a revocation: 1 cleared (and on disk), 0 no such revocation, -1 cleared in
 * memory but not written (err). */
int grantstate_unrevoke(struct grantstate *gs, const char *id, time_t now, char *err,
    size_t errlen);

/* Entries, for grant.list (revoked static grants) and tests. */
size_t grantstate_count(const struct grantstate *gs);
const struct grantstate_entry *grantstate_at(const struct grantstate *gs, size_t i);

const char *grantstate_path(const struct grantstate *gs);

#endif
