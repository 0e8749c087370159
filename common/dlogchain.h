/*
 * dlogchain - the decision-log record format and its hash chain: parse and self-check one
 * line, compute a record's (optionally HMAC-keyed) hash, verify files (the chain written by
 * egressd/dlog.c). Knows nothing of the daemon.
 *
 * Owns: the one parser of a decision-log line, used by the verifier, by dlog_open (to
 * continue the chain from the last record of an existing file) and by egressctl. Every
 * byte of a log file is treated as hostile: lines are bounded by EGRESS_LOG_RECORD_MAX,
 * nothing is allocated from a length found in the file.
 * Callers: egressctl (log verify, egressd/ctl/), egressd/dlog.c, fuzz/fuzz_dlog_reader.c.
 */
#ifndef EGRESS_DLOGCHAIN_H
#define EGRESS_DLOGCHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/limits.h"

/* Written by egressd: 2 (start/stop/config/grant events, the HTTP status in close
 * records). Readers accept every version from DLOG_SCHEMA_VERSION_MIN on. */
#define DLOG_SCHEMA_VERSION     2
#define DLOG_SCHEMA_VERSION_MIN 1
#define DLOG_HASH_HEX       64   /* hex characters of a SHA-256 */

/* The genesis prev: 64 zero hex digits. */
extern const char dlog_zero_hash[DLOG_HASH_HEX + 1];

/* What one line says about itself (after its own hash was checked). */
struct dlog_record_info {
	uint64_t seq;
	char prev[DLOG_HASH_HEX + 1];
	char hash[DLOG_HASH_HEX + 1];
	char event[33];
};

enum dlog_line_status {
	DLOG_LINE_OK = 0,
	DLOG_LINE_MALFORMED,     /* not a record: bad JSON, missing/invalid v/time/seq/event/
	                            prev/hash, fields out of place, duplicate keys, too long */
	DLOG_LINE_BAD_HASH,      /* well-formed, but hash does not match its bytes: edited */
};

/*
 * Parse and self-check one line (len bytes, without the trailing newline; may contain
 * anything). On DLOG_LINE_OK fills *info. On failure writes a short reason to why
 * (may be NULL).
 */
enum dlog_line_status dlog_line_check(const char *line, size_t len,
    struct dlog_record_info *info, char *why, size_t whylen);

/* Compute the hash a line with body bytes (the record without its hash member) must
 * carry: hex(SHA-256(prev "\n" body)). out has DLOG_HASH_HEX + 1 bytes. Returns 0 or -1. */
int dlog_hash_body(const char *prev, const char *body, size_t bodylen, char *out);

/*
 * HMAC-keyed chain (egressd.ini log_hmac_key). With a key, every record's hash is
 * hex(HMAC-SHA-256(key, prev "\n" body)) instead of the plain SHA-256: someone who can
 * edit the log but does not hold the key cannot recompute the chain after an edit.
 * The key is the bytes of a key file with one trailing newline removed, DLOG_KEY_MIN to
 * DLOG_KEY_MAX bytes (e.g. `openssl rand -hex 32 > key`).
 */
#define DLOG_KEY_MIN 16
#define DLOG_KEY_MAX 1024

struct dlog_key {
	size_t len;                       /* 0 = no key (plain SHA-256 chain) */
	unsigned char bytes[DLOG_KEY_MAX];
};

/*
 * Load a key file into key. require_private (egressd): refuse a file that is not a
 * regular file owned by root or the effective uid with no group or other permission
 * bits, so only the key holder can read it. Returns 0, or -1 with a message in err.
 * The caller wipes the key (secret_wipe) when done.
 */
int dlog_key_load(const char *path, bool require_private, struct dlog_key *key, char *err,
    size_t errlen);

/* dlog_hash_body with an optional key (NULL or len 0: plain SHA-256). */
int dlog_hash_body_key(const struct dlog_key *key, const char *prev, const char *body,
    size_t bodylen, char *out);

/*
 * The same hash with its OpenSSL state kept between records (the writer's hot path: no
 * algorithm fetch, no context allocation per record). One hasher per thread at a time.
 * dlog_hasher_new copies nothing it keeps but the key inside OpenSSL's context (the
 * caller wipes its own copy); NULL on ENOMEM or an OpenSSL failure. dlog_hasher_body
 * returns 0 or -1 like dlog_hash_body_key; dlog_hasher_free accepts NULL.
 */
struct dlog_hasher;
struct dlog_hasher *dlog_hasher_new(const struct dlog_key *key);
int dlog_hasher_body(struct dlog_hasher *h, const char *prev, const char *body,
    size_t bodylen, char *out);
void dlog_hasher_free(struct dlog_hasher *h);

/* dlog_line_check with an optional key: the line's hash must be the keyed hash. */
enum dlog_line_status dlog_line_check_key(const char *line, size_t len,
    const struct dlog_key *key, struct dlog_record_info *info, char *why, size_t whylen);

enum dlog_break {
	DLOG_INTACT = 0,
	DLOG_BREAK_EDITED,      /* a record's bytes do not match its hash, or its prev does
	                           not match the previous record's hash at the expected seq */
	DLOG_BREAK_DELETED,     /* seq jumps forward (records missing), or the first record
	                           does not start the chain */
	DLOG_BREAK_REORDERED,   /* seq goes backwards or repeats, or a skipped seq appears
	                           later in the file */
	DLOG_BREAK_TRUNCATED,   /* the last line is torn (no newline at end of file) */
	DLOG_BREAK_MALFORMED,   /* a line that is not a record (or longer than the limit) */
	DLOG_BREAK_IO,          /* the file could not be read */
};

const char *dlog_break_str(enum dlog_break b);

/*
 * Verification state carried across files (rotated logs verified in order).
 * Initialize with dlog_verify_init. continued = true accepts a first record that starts
 * mid-chain (a rotated file verified alone); the head of the chain is then not checked.
 */
struct dlog_verify {
	bool continued;
	const struct dlog_key *key; /* set after dlog_verify_init for a keyed chain (not
	                              owned); NULL = plain SHA-256 chain */
	bool started;              /* a record has been accepted */
	uint64_t next_seq;
	char prev[DLOG_HASH_HEX + 1];
	uint64_t records;          /* records accepted so far */
	/* result of the first break */
	enum dlog_break kind;
	uint64_t line;             /* 1-based line number in the current file */
	uint64_t seq;              /* seq of the offending record; for an edited or
	                              malformed line, the seq expected at that place (0 when
	                              unknown) */
	char message[256];
};

void dlog_verify_init(struct dlog_verify *v, bool continued);

/*
 * Verify the records read from f (name is used in messages) against and into v.
 * Stops at the first break. Returns v->kind (DLOG_INTACT when every line checks).
 * A break of kind DELETED is reclassified REORDERED when the missing seq appears later in
 * the same file (f is read to its end for that; f must then be seekable or the
 * classification stays DELETED).
 */
enum dlog_break dlog_verify_stream(struct dlog_verify *v, FILE *f, const char *name);

/* Open path and dlog_verify_stream it. DLOG_BREAK_IO when it cannot be opened. */
enum dlog_break dlog_verify_file(struct dlog_verify *v, const char *path);
/* The verdict on a file that could not be opened (errno e): DLOG_BREAK_IO with
 * "path: <strerror>". For readers that open files their own way (egressctl's .gz). */
enum dlog_break dlog_verify_unopened(struct dlog_verify *v, const char *path, int e);

/* Lines are read with line_read (common/util.h), bounded by EGRESS_LOG_RECORD_MAX. */

#endif
