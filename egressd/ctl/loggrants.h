/*
 * loggrants - `egressctl log grants --at TIME [--principal P] [--json] FILE...`: which
 * grants were in service at TIME, with their entries, replayed from the decision log's
 * start, stop and grant records (docs/decision-log.md). The question it answers: "what
 * could principal P reach at time T".
 *
 * Owns: the replay state (live grants, bounded by EGRESS_AUDIT_KEYS_MAX grants of at
 * most EGRESS_GRANT_ENTRIES_MAX entries each). Records whose bytes do not match their own
 * hash are not believed (skipped, with a warning). Callers: egressctl.c, tests.
 */
#ifndef EGRESS_LOGGRANTS_H
#define EGRESS_LOGGRANTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "egressd/ctl/logread.h"

struct loggrants;

/* Replay up to at_us (inclusive); principal NULL = every principal. NULL on ENOMEM. */
struct loggrants *loggrants_new(int64_t at_us, const char *principal);
/*
 * Feed the next record (in file order). Returns 1 while records may still matter, 0 once
 * a record later than at_us was seen (the caller may stop reading), -1 when a bound was
 * passed (message in err).
 */
int loggrants_add(struct loggrants *g, const struct logrec *r, char *err, size_t errlen);
/* The grants in service at at_us, as a JSON array (new reference) of
 * {grant_id, principal, source, name, since, expires, allow, settings}. */
json_t *loggrants_result(struct loggrants *g);
/* True when a start record (or a grant record) was seen at or before at_us: otherwise
 * the files begin after the grants in question were issued and the answer is partial. */
bool loggrants_anchored(const struct loggrants *g);
void loggrants_free(struct loggrants *g);

/* The command: returns the exit status (0, 1 error, 2 usage). */
int loggrants_cli(int argc, char **argv);

#endif
