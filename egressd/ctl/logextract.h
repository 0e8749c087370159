/*
 * logextract - verify a run's decisions.jsonl: the records of one principal (or grant)
 * that egress-exec copied out of a shared egressd's decision log (executor/artifacts.c),
 * headed by an anchor line naming the chain position just before the run's first record:
 *
 *   {"egress_anchor":{"log":"/var/log/egressd/decisions.jsonl","seq":S,"hash":"<64 hex>",
 *    "through_seq":E,"principal":"run-7f3a","grant_id":"<hex>"|null}}
 *
 * (S, hash): the record before the run's first one (0 and 64 zeros: none); E: the last
 * record in the log when egress-exec copied it.
 *
 * Alone, an extract is checked as far as it can be: every record's own hash, seq strictly
 * increasing after S, every record selected by the anchor's principal/grant, and the
 * chain link wherever two records are consecutive (the first one's prev = the anchor's
 * hash when it is S+1). With the system log's files as well, the system log is verified
 * as a chain and the extract is held against it: the record at seq S has the anchor's
 * hash, every extract record is the system record at its seq byte for byte, and every
 * system record of that principal/grant between S and E is in the extract (nothing of
 * the run was left out, also at its end).
 *
 * Owns: the extract's records in memory (bounded by EGRESS_DECISIONS_ARTIFACT_MAX bytes).
 * Every byte is hostile: fuzzed by fuzz/fuzz_logextract.c. Callers: egressctl log verify.
 */
#ifndef EGRESS_LOGEXTRACT_H
#define EGRESS_LOGEXTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/dlogchain.h"
#include "common/limits.h"

struct logextract_anchor {
	char log[EGRESS_PATH_MAX];
	uint64_t seq;
	char hash[DLOG_HASH_HEX + 1];
	uint64_t through_seq;      /* the log was searched up to this seq when copied */
	char principal[EGRESS_PRINCIPAL_MAX + 1];   /* "" = not selected on */
	char grant_id[EGRESS_PRINCIPAL_MAX + 1];    /* "" = not selected on */
};

/* Parse an anchor line (len bytes, no newline). Returns 0, or -1 with why. */
int logextract_anchor_parse(const char *line, size_t len, struct logextract_anchor *a,
    char *why, size_t whylen);

/* True when the file at path begins with an anchor line ("-" is never an extract). */
bool logextract_is_extract(const char *path);

struct logextract_result {
	struct logextract_anchor anchor;
	uint64_t records, first_seq, last_seq, gaps;
	bool truncated;            /* egress-exec cut the extract at its bound (marker line) */
	bool against_system;       /* held against the system log */
	enum dlog_break kind;
	char message[640];         /* the break, "FILE:LINE: kind: detail" */
};

/*
 * Verify the extract read from ext (name for messages), and when nsys > 0 against the
 * system log files sys[0..nsys) (oldest first; the first may start mid-chain). key: an
 * HMAC-keyed chain (NULL: plain). Returns DLOG_INTACT or the first break (res->message).
 */
enum dlog_break logextract_verify(FILE *ext, const char *name, const struct dlog_key *key,
    const char *const *sys, size_t nsys, struct logextract_result *res);

#endif
