/*
 * dlog - the tamper-evident decision log writer (JSON Lines, SHA-256 chained).
 *
 * Owns: the log file descriptor, a writer thread that does all file I/O, the bounded
 * queue between the event loop and that thread, and every struct dlog_ticket until its
 * callback has returned or it was cancelled. The record format is specified in
 * docs/decision-log.md; the record format, chain hash and verifier are common/dlogchain.h.
 * Callers: egressd on its event-loop thread (every function here except as noted must be
 * called from the thread that runs the event_base given to dlog_open).
 *
 * Why a writer thread: write(2) and fdatasync(2) block (a slow disk, NFS, a full
 * journal); the event loop must never block, yet the allow decision must be on disk
 * before the client hears 200 (log_sync = always). The loop formats the caller's fields,
 * hands the record to the writer thread, and continues; the writer assigns seq, prev and
 * hash in on-disk order, writes, syncs as configured, and signals the loop, which then
 * runs the caller's callback.
 *
 * The fast path (log_sync = none | batch, a regular file): while the writer is not
 * writing (it may be in a batch fdatasync) the loop thread writes records itself; it
 * assigns seq/prev/hash and does one write(2) under the mutex, and a callback runs from
 * the loop right after (through an activated event, never from inside dlog_append): no
 * thread hand-off stands between the CONNECT and the 200. A record appended while the
 * loop has no other ready event is written at once, with the few records queued before
 * it (at most 16; on-disk order stays seq order). A record that finds other events ready
 * is queued without waking anybody: at the end of the loop's turn (an activated event
 * behind the ready ones) every record of that turn is written in one group (at most
 * DLOG_GROUP_MAX, 512), so under load a turn costs one write(2) and no wake-up; only
 * when the loop cannot write then (the writer owns the file, a rotation is due, the log
 * is failed) is the writer woken. Such a write lands in the page cache; one whose
 * write(2) takes longer than 1 ms sends records to the writer thread again for a second
 * (a throttled or network disk stalls the loop at most once a second). fdatasync,
 * reopening, rotation and every record that finds the writer busy stay on the writer;
 * records nobody waits for never wake the loop. With batch the writer, after a sync,
 * looks for unsynced records by itself every batch_ms for 100 ms, so a steady stream
 * never wakes it for the next sync either (and a record is still synced within batch_ms
 * of the first unsynced one). log_sync = always never writes on the loop. With batch, a
 * record to keep that nobody waits for (a close: dlog_append_kept with cb NULL, or
 * dlog_append_raw with keep and err_only_cb) appended while the writer is in such a
 * timed wait and the log is healthy is not written at once: it waits in the queue for the
 * next write (one transaction at a time, the next hop's allow takes it along in one
 * write(2)), or for the writer, which takes it within batch_ms by itself (and syncs it
 * within the next batch_ms); a size rotation due with it has it written at once.
 *
 * Record line (see docs/decision-log.md for the exact bytes):
 *   {"v":1,"time":"2026-11-30T08:53:53.123456Z","seq":N,"event":"...",<fields>,
 *    "prev":"<64 hex>","hash":"<64 hex>"}\n
 * where hash = hex(SHA-256(prev_hex "\n" body)) and body is the line without
 * ',"hash":"<64 hex>"' (i.e. the compact object ending in '"prev":"<64 hex>"}').
 *
 * Failure (why): there is never an allow without its record. When the log cannot be
 * written (open fails, EIO, ENOSPC, EACCES, a short write, fdatasync fails) the dlog
 * enters the failed state: the records of the failing group and every queued record
 * complete with an error, dlog_writable() returns false, and appends are refused
 * immediately (errno EIO) until the retry interval has passed; then the next append is
 * queued as a probe: the writer reopens the file, re-reads its last record to continue
 * the chain, and writes. A failed write never leaves half a record: a short write is
 * truncated back to the last good offset (and if that is impossible the file is reopened
 * and its tail re-read before anything else is written).
 */
#ifndef EGRESS_DLOG_H
#define EGRESS_DLOG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/dlogchain.h"   /* DLOG_SCHEMA_VERSION, DLOG_HASH_HEX, struct dlog_key */
#include "common/limits.h"

struct event_base;
struct dlog;
struct dlog_key;
struct dlog_ticket;
struct dlog_syslog_config;
struct dlog_syslog_stats;

enum dlog_sync {
	DLOG_SYNC_ALWAYS = 0,   /* the callback fires after fdatasync of that record */
	DLOG_SYNC_BATCH,        /* group commit: wait up to batch_ms for more records, one
	                           write + one fdatasync, then all their callbacks */
	DLOG_SYNC_NONE,         /* the callback fires after write(2) (page cache only) */
};

/* "always" | "batch" | "none" -> 0, or -1 for anything else. */
int dlog_sync_parse(const char *s, enum dlog_sync *out);
const char *dlog_sync_str(enum dlog_sync s);

struct dlog_config {
	const char *path;       /* copied; created 0640 if missing (O_APPEND) */
	enum dlog_sync sync;
	unsigned batch_ms;      /* batch window; 0 = 5 ms */
	unsigned queue_max;     /* records queued or in flight; 0 = 4096 */
	unsigned retry_ms;      /* failed state: minimum time between probes; 0 = 1000 ms */
	uint64_t max_bytes;     /* rotate when a write would take the file past this size
	                           (egressd.ini log_max_bytes); 0 = never (SIGUSR1 only) */
	const struct dlog_key *key;  /* HMAC key (copied; egressd.ini log_hmac_key); NULL =
	                           plain SHA-256 chain. See common/dlogchain.h. */
	const char *syslog_target;  /* mirror each written record to syslog (RFC 5424,
	                           egressd/dlog_syslog.h): "unix:/dev/log", "udp:IP:PORT",
	                           "tcp://IP:PORT", "tls://IP:PORT"; NULL = none (egressd.ini
	                           log_syslog), unless syslog is set */
	const struct dlog_syslog_config *syslog;  /* the mirror with its TLS and spool
	                           settings (egressd.ini log_syslog_*); overrides
	                           syslog_target; NULL = syslog_target alone */
};

/*
 * egressd started as root (process-wide; call once before dlog_open when on): the log's
 * directory belongs to the account egressd drops to (drop_uid), which could plant links
 * there. Every open of the log (dlog_open, the SIGUSR1 reopen, the reopen after a failed
 * write, the size rotation's new file) then refuses a file that is not regular, has more
 * than one link, or is owned by neither root nor drop_uid; checked on the opened fd,
 * before anything is read, truncated or written. A symbolic link as the log's name is
 * refused always (O_NOFOLLOW), on or off.
 */
void dlog_set_root_checks(bool on, uid_t drop_uid);

/*
 * Open the log (synchronously: start-up may block) and start the writer thread.
 * An existing file is continued: its last record is read and checked (its own hash must
 * verify), seq continues from it and its hash becomes the next prev. A torn last line
 * (no trailing newline: a crash in the middle of a write that was never acknowledged) is
 * truncated away, with a warning. If the file cannot be opened or written, or its last
 * record is corrupt, the dlog is still returned, in the failed state (dlog_writable() is
 * false; dlog_status says why) and retries as described above.
 * Returns NULL for an invalid config, ENOMEM, a failure to create the thread, or a file
 * refused as a symbolic link or by dlog_set_root_checks (egressd must not start on it;
 * at a later reopen the same refusal is the failed state), with a message in err.
 */
struct dlog *dlog_open(struct event_base *base, const struct dlog_config *cfg, char *err,
    size_t errlen);

/*
 * Write every queued record (blocking, on the calling thread's behalf), stop the writer
 * thread and close the file. Records still held through a failure (dlog_append_kept)
 * get one last attempt, whatever the retry interval says; each one that is still not
 * written is said in the operator log ("decision log refused a close record (...): hop
 * H: ...", its hop and the first bytes of its fields) and counted in the return value (0 when
 * nothing held was lost). Callbacks of outstanding tickets are NOT called; their
 * handles become invalid. Accepts NULL. Must be called before the event_base is freed,
 * and never from inside a dlog callback.
 */
size_t dlog_close(struct dlog *d);

/*
 * Completion callback, on the loop thread: err is 0 when the record is written (and
 * synced per the sync mode), otherwise an errno value (EIO, ENOSPC, ...): the record is
 * NOT in the log and the caller must treat the hop as audit_unavailable. The callback may
 * append further records and cancel other tickets.
 */
typedef void (*dlog_done_cb)(int err, void *arg);

/*
 * Append one record of kind event ("decision", "close", "start", ...; [a-z_], <= 32 chars)
 * with the caller's fields (a JSON object; the reference is stolen in every case, also on
 * error). Fields appear in the record in the object's order, between "event" and "prev".
 * The names v, time, seq, event, prev and hash are reserved (EINVAL). The time is taken
 * now (on the loop thread), so records are in time order as well as seq order.
 *
 * Returns 0 when the record was queued: cb (may be NULL) will be called exactly once
 * from the event loop, never from inside dlog_append, unless the ticket is cancelled.
 * When ticket is non-NULL and cb is non-NULL, *ticket receives a handle for
 * dlog_ticket_cancel, valid until the callback starts; otherwise *ticket is set to NULL.
 * Returns -1 with errno when the record was refused at once (the callback never fires):
 * EIO (failed state, retry interval not yet passed), EAGAIN (queue full), EMSGSIZE (the
 * line would exceed EGRESS_LOG_RECORD_MAX: truncate the caller's fields), EINVAL (bad
 * event name, fields not an object, reserved key, invalid UTF-8), ENOMEM.
 */
int dlog_append(struct dlog *d, const char *event, json_t *fields, dlog_done_cb cb,
    void *arg, struct dlog_ticket **ticket);

/*
 * A JSON string for a record field that carries text from outside egressd (a path, an
 * error message that may quote a file): s as it is when it is UTF-8, else with each byte
 * outside a well-formed sequence as U+0080-U+00FF (utf8_lossy_dup), so the member is
 * kept and readable; jansson's json_string would refuse it and the member would vanish.
 * NULL s: JSON null. NULL only when out of memory.
 */
json_t *dlog_text(const char *s);

/*
 * dlog_append (keep false) or dlog_append_kept (keep true; ticket must then be NULL) for a
 * record whose fields are already compact JSON members: members (len bytes, copied) is
 * what egressd/jsonw.h writes ("k":v,... without braces, 7-bit, no reserved names: the
 * caller's builder guarantees that, it is not parsed again). The hot path's records
 * (session_record.c) come this way: no JSON tree, one allocation per record.
 * err_only_cb: cb runs only when the record failed; a written record then completes
 * without waking the loop (close records: nobody waits for them). Returns as dlog_append.
 */
int dlog_append_raw(struct dlog *d, const char *event, const char *members, size_t len,
    bool keep, bool err_only_cb, dlog_done_cb cb, void *arg, struct dlog_ticket **ticket);

/*
 * Forget the callback of a queued record (e.g. its session closed while the record was in
 * flight). The record is still written. After the call the callback never fires and the
 * handle is invalid. Accepts NULL. Must not be called from inside that ticket's callback.
 */
void dlog_ticket_cancel(struct dlog_ticket *t);

/*
 * Give a queued record another callback and argument (e.g. its session ended, but what
 * its completion means is still owed to someone else: metrics_allow_written). The same
 * rules as dlog_ticket_cancel: after the call the caller's handle is invalid; never from
 * inside that ticket's callback. Accepts NULL.
 */
void dlog_ticket_retarget(struct dlog_ticket *t, dlog_done_cb cb, void *arg);

/*
 * Append and wait (blocking the calling thread, at most timeout_ms) until the record is
 * written and synced per the sync mode. For shutdown and other paths where the loop no
 * longer runs. Same field rules as dlog_append, except in the failed state: no later hop
 * will probe the log, so this append is the probe at once (whatever the retry interval
 * says), and the records held by dlog_append_kept are written before it. Returns 0, or
 * -1 with errno (ETIMEDOUT: the record may still be written later).
 */
int dlog_append_sync(struct dlog *d, const char *event, json_t *fields, unsigned timeout_ms);

/*
 * Call fn(fd, arg) with the open log file's fd (the file the writer holds, not a name
 * looked up again; e.g. to fchown it to the account egressd drops to), while the writer
 * cannot close or replace it. fn must not block for long or call into dlog. Returns fn's
 * result, or -1 with errno EBADF when no file is open (the failed state).
 */
int dlog_with_fd(struct dlog *d, int (*fn)(int fd, void *arg), void *arg);

/*
 * False while the log is in the failed state (new hops must be refused with
 * REASON_AUDIT_UNAVAILABLE). Cheap; may be called from any thread.
 */
bool dlog_writable(const struct dlog *d);

/*
 * True when the next append would be accepted: the log is writable, or it is in the failed
 * state and the retry interval has passed (that append is queued as the probe). Cheap;
 * may be called from any thread.
 */
bool dlog_accepting(const struct dlog *d);

/*
 * Like dlog_append, for a record that must not be lost to a passing failure (a close
 * record: every allow has its close): while the log is failed, and when the group it was
 * in fails, it is held (at most EGRESS_LOG_KEPT_MAX such records) and written right after
 * the log recovered, its time stamped then. cb(0) once written; cb(errno) only when it
 * could not be held. Records still held at dlog_close get one last attempt there; what
 * still fails is lost, and dlog_close says so (none of them were acknowledged). Returns 0 or -1 with errno as
 * dlog_append (EIO: failed and the bound reached).
 */
int dlog_append_kept(struct dlog *d, const char *event, json_t *fields, dlog_done_cb cb,
    void *arg);

/*
 * Probe a failed log now (the retry interval has passed: dlog_accepting()): append a
 * "log_recovered" record naming the failure it ends ("after": the error). cb(0) once it
 * is written (the log is writable again), cb(errno) when the probe failed. Sessions call
 * this before anything else of a hop when the log is failed, so the first hop after the
 * disk recovered is allowed, and a hop whose records cannot be written never opens an
 * upstream connection. Returns as dlog_append.
 */
int dlog_probe(struct dlog *d, dlog_done_cb cb, void *arg, struct dlog_ticket **ticket);

/*
 * Reopen the file at the next opportunity (SIGUSR1 after logrotate). If the new file is
 * empty the chain continues across files: its first record has seq last+1 and prev the
 * last hash of the previous file (verify rotated files together, in order, or one alone
 * with egressctl log verify --continued). Callable from the loop thread (not from a
 * signal handler: use an evsignal event).
 *
 * Rotation record: the first record of a continued file is a "rotate" event written by
 * the writer thread itself, naming the previous file ("previous_file": where the old
 * file is now, from /proc/self/fd when it was renamed by someone else; "previous_seq";
 * "cause": "max_bytes" or "reopen"), so a reader of one file alone learns which file
 * precedes it; its prev is that file's last hash. With max_bytes the writer rotates by
 * itself: it renames the file to "<path>.<last seq, 12 digits>" (never replacing an
 * existing file) before the write that would pass the limit, and continues in a new file.
 */
void dlog_reopen(struct dlog *d);

struct dlog_status {
	char path[EGRESS_PATH_MAX];
	uint64_t seq;              /* last seq known to be on disk (0 = none yet) */
	bool writable;
	uint64_t written;          /* records written since open */
	uint64_t failed;           /* records that completed with an error since open */
	uint64_t syncs;            /* fdatasync calls that succeeded since open */
	uint64_t groups;           /* groups of records written, one write(2) each, since open */
	uint64_t wakeups;          /* times another thread woke the writer thread */
	size_t queued;             /* records queued or in flight */
	char error[256];           /* why the log is in the failed state ("" when writable) */
};

/* Snapshot for the control socket's status reply and metrics. */
void dlog_get_status(const struct dlog *d, struct dlog_status *st);

/*
 * The syslog mirror's counters (egressd/dlog_syslog.h) for metrics and status: false
 * when no mirror is configured. Any thread.
 *
 * The mirror's losses are records too: when records could not be handed to the
 * collector (a full spool drops the newest; a datagram send failed), the dlog appends a
 * "syslog_loss" record (dropped, first_seq, last_seq, collector) once the episode ends
 * (the next record goes through), and at dlog_close for what the collector never
 * acknowledged (that one is written to the file only: the mirror has stopped).
 */
bool dlog_syslog_status(const struct dlog *d, struct dlog_syslog_stats *st);

#endif
