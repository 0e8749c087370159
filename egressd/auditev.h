/*
 * auditev - the decision log's own events, besides the per-hop records of
 * session_record.c: egressd's `start` and `stop`, `config` (every reload, in service or
 * refused, with the SHA-256 of the file it read) and `grant` (create, replace on reload
 * with the old and new entry sets, remove, revoke, expire). Schema: docs/decision-log.md.
 *
 * Why: an auditor must be able to answer "what could this principal reach, and when"
 * from the log alone (egressctl log grants --at). Every change of authority therefore
 * leaves a record, written before (create) or when (retire) it takes effect.
 * Callers: daemon.c (start, stop, reload), the grants registry's retire hook (revoke,
 * expire). Event-loop thread only. Nothing here allocates anything the caller frees.
 * A record the log refuses (failed state, queue full) is reported on the operator log;
 * authority changes are not held back by it (hops are: they need their own record).
 */
#ifndef EGRESS_AUDITEV_H
#define EGRESS_AUDITEV_H

#include <stdbool.h>
#include <stddef.h>

#include "common/reasons.h"

struct daemon;
struct lgrant;

/* Allow entries per grant record: a grant of EGRESS_GRANT_ENTRIES_MAX entries is written
 * as several records (`part`/`parts`) so each stays below EGRESS_LOG_RECORD_MAX. */
#define AUDITEV_ENTRIES_PER_RECORD 16

/* `start` (version, pid, config path and hash) then one `grant` `create` per static
 * grant. Call once, after the static grants are registered. */
void auditev_start(struct daemon *d);

/* `stop` (cause: "signal", "drain", ...), waited for (the loop no longer runs). */
void auditev_stop(struct daemon *d, const char *cause);

/* `config`: a reload of path was put in service (ok) or refused (error: why). */
void auditev_config(struct daemon *d, const char *path, bool ok, const char *error);

/* `grant` `create` for a dynamic grant just registered (grant.create). */
void auditev_grant_created(struct daemon *d, const struct lgrant *lg);

/*
 * The static grants of a reload, before the old ones are retired: a name in both with a
 * different grant -> `replace` (old and new entries); only in the new set -> `create`;
 * only in the old -> `remove`; unchanged -> nothing.
 */
void auditev_reload_grants(struct daemon *d, struct lgrant *const *old, size_t nold,
    struct lgrant *const *nw, size_t nnew);

/* The grants registry's retire hook (arg: the daemon): `revoke` and `expire` records;
 * other causes (a reload's replacement, shutdown) are recorded by their callers. */
void auditev_retired(void *arg, const struct lgrant *lg, enum reason why);

/* hex SHA-256 of the file at path (at most EGRESS_CONF_FILE_MAX bytes) into out (65
 * bytes). Returns 0, or -1 (out = "") when it cannot be read. */
int auditev_file_sha256(const char *path, char *out);

#endif
