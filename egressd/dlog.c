/*
 * dlog.c - decision log writer: the loop thread formats records; with log_sync = none or
 * batch it also writes them (at once when idle, else every record of a loop turn in one
 * group at the end of the turn: one write(2) under the mutex, no thread hand-off before
 * the 200), assigning seq/prev/hash in on-disk order. A writer thread keeps the batch
 * fdatasync, reopening, rotation, log_sync = always, and every group that finds it busy;
 * it signals completion back through an eventfd. With batch, a close record (kept,
 * nobody waits) appended while the writer is in its timed wait waits for the next write
 * or the writer instead (hold_ok_locked). Contract: dlog.h. Format: docs/decision-log.md.
 */
#define _GNU_SOURCE 1   /* renameat2 */
#include "egressd/dlog.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "egressd/dlog_syslog.h"
#include "common/dlogchain.h"

#define DLOG_DEFAULT_BATCH_MS   5
#define DLOG_DEFAULT_QUEUE_MAX  4096
#define DLOG_DEFAULT_RETRY_MS   1000
#define DLOG_GROUP_MAX          512     /* records per write(2) */
#define DLOG_TIME_LEN           27      /* 2026-11-30T08:53:53.123456Z */
#define DLOG_EVENT_MAX          32
/* An inline write(2) (loop thread) slower than this means a disk that blocks writers
 * (dirty-page throttling, NFS): the loop stops writing for DLOG_INLINE_BACKOFF_MS and
 * hands records to the writer thread again. Only the system call is timed: formatting
 * and hashing a large group at the end of a turn is CPU the loop would spend handing it
 * over anyway. A slow write that began during the writer's batch fdatasync is taken to
 * have waited for that sync (ext4 on this VM: the write blocks while the sync's
 * writeback holds the log's last page or the journal, 1-3 ms, a few times a minute at one
 * transaction at a time): then only the records appended while a sync runs go to the
 * writer for the interval, the others stay on the loop, so a healthy disk does not send
 * every record through two thread hand-offs for a second. Each kind of slow write stalls
 * the loop at most once per interval, so a slow disk at most twice. */
#define DLOG_INLINE_SLOW_US     1000
#define DLOG_INLINE_BACKOFF_MS  1000
/* An inline write takes along at most this many records queued before it (the writer has
 * not taken them yet); more are left to the writer thread. */
#define DLOG_INLINE_TAKE_MAX    16
/* batch: after a sync the writer looks for unsynced records by itself every batch_ms for
 * this long, so under a steady stream nobody has to wake it (writer_polls) */
#define DLOG_LINGER_MS          100
/* flush_cb steps behind the turn's other ready callbacks at most this many times (each
 * time it goes to the end of libevent's active queue, still before the loop waits) */
#define DLOG_FLUSH_YIELD_MAX    8
/* group_format keeps its buffer between groups up to this size (a larger group's buffer
 * is freed after the write) */
#define DLOG_GBUF_KEEP          (64 * 1024)

/* Bytes of a line around the caller's fields (seq at its widest, 20 digits). */
#define DLOG_FIXED_LEN (sizeof("{\"v\":1,\"time\":\"\",\"seq\":,\"event\":\"\"") - 1 + \
    DLOG_TIME_LEN + 20 + sizeof(",\"prev\":\"\"") - 1 + DLOG_HASH_HEX + \
    sizeof(",\"hash\":\"\"}") - 1 + DLOG_HASH_HEX)

/* A queued record; the ticket handed to callers is the record itself. */
struct dlog_ticket {
	TAILQ_ENTRY(dlog_ticket) link;
	char time[DLOG_TIME_LEN + 1];
	char event[DLOG_EVENT_MAX + 1];
	size_t event_len;      /* strlen(event): rec_estimate runs per queued record */
	char *fields;          /* compact members without braces, "" when none */
	size_t fields_len;
	bool fields_inline;    /* fields live in this allocation (rec_new_raw) */
	/* cb only for a failed record: a written one completes like no_cb (set before the
	 * queueing, never changed after) */
	bool err_only;
	dlog_done_cb cb;       /* loop thread only; NULL after cancel */
	void *arg;
	/* appended without a callback: nobody waits, the writer frees it (no hand-off back
	 * to the loop); set before the queueing, never changed after */
	bool no_cb;
	int err;               /* set by the writer */
	/* dlog_append_sync: the waiter, not the loop, collects the result */
	bool is_sync;
	bool done;
	bool abandoned;
	bool keep;             /* dlog_append_kept: held while the log is failed */
};
TAILQ_HEAD(dlog_q, dlog_ticket);

struct dlog {
	struct event_base *base;
	struct event *ev_done;
	/* activated (never added) when a record was queued without waking the writer: at
	 * the end of the loop's turn the loop writes every queued record in one group, or
	 * wakes the writer when it cannot (loop thread) */
	struct event *ev_flush;
	bool flush_queued;
	unsigned flush_yields;      /* times flush_cb stepped behind other callbacks this turn */
	int efd;
	char *path;
	enum dlog_sync sync;
	unsigned batch_ms, queue_max, retry_ms;

	pthread_t thread;
	bool thread_started;
	pthread_mutex_t mu;
	pthread_cond_t cv_work;     /* writer waits for records / stop / reopen */
	pthread_cond_t cv_sync;     /* dlog_append_sync waiters */
	struct dlog_q pending;      /* loop -> writer */
	struct dlog_q done;         /* writer -> loop */
	struct dlog_q kept;         /* dlog_append_kept records waiting for a recovery */
	size_t nkept;
	size_t inflight;            /* appended, not yet freed */
	bool stop, reopen_req;
	bool writer_idle;           /* the writer waits on cv_work (mu) */
	/* batch: the writer's wait ends within batch_ms by itself and it then looks at
	 * unsynced: the first unsynced record needs no wake-up (mu) */
	bool writer_polls;
	/* The writer is in a timed wait (batch: for the first unsynced record's sync, or
	 * polling): it looks at the queue within batch_ms without being woken (mu) */
	bool writer_looks;
	uint64_t linger_until_ms;   /* the writer polls until then (mono ms, writer) */
	/* The writer thread has released mu to write a group, reopen or rotate: it owns the
	 * file and the chain state meanwhile. While it does not (and nothing is queued), the
	 * loop thread may write a record itself under mu (write_inline_locked). */
	bool writer_busy;
	bool syncing;               /* the writer is in a batch fdatasync (without mu) */
	bool fd_dead;               /* an inline write failed: the writer closes fd */
	uint64_t inline_off_until_ms;  /* no inline write before this (mono ms), loop thread */
	uint64_t inline_sync_off_until_ms; /* ... none during a sync (syncing) before this */
	uint64_t retry_after_ms;    /* failed state: no probe before this (mono ms) */

	/* writer-thread state (read under mu for status) */
	int fd;
	bool regular;
	bool refused;               /* the last file_open refused the file (link, owner) */
	bool opening;               /* file_open called by dlog_open */
	/* batch: written and acknowledged, fdatasync due within batch_ms (writer thread) */
	bool unsynced;
	uint64_t unsynced_since_ms;
	/* A file was created and its directory entry is not synced yet: done right before
	 * the next fdatasync of the log, by whichever thread makes it (__atomic). */
	bool dir_unsynced;
	int flush_err;
	uint64_t last_seq;
	char last_hash[DLOG_HASH_HEX + 1];
	bool failed;                /* also read without mu via __atomic */
	char error[256];
	uint64_t written, nfailed, syncs;
	uint64_t groups;            /* groups written, one write(2) each (__atomic: the writer
	                               writes without mu) */
	uint64_t wakeups;           /* cv_work signals (__atomic: some outside mu) */

	/* rotation and keyed chain (writer thread after dlog_open) */
	struct dlog_key key;        /* len 0: plain SHA-256 chain */
	uint64_t max_bytes;         /* 0: no size rotation */
	off_t size;                 /* bytes in the current file */
	bool rotate_pending;        /* the next group starts with a "rotate" record */
	const char *rotate_cause;
	char rotate_prev[EGRESS_PATH_MAX];  /* where the previous file is now ("" unknown) */
	struct dlog_syslog *syslog;  /* optional mirror (whoever writes the group) */
	char syslog_target[160];    /* for its loss records */
	/* group_format's state, used by whoever writes (the writer thread, or the loop
	 * thread inline while the writer is not busy: never both at once) */
	struct dlog_hasher *hasher;  /* the chain hash's OpenSSL state, kept across records */
	char *gbuf;                 /* the last group's buffer, kept up to DLOG_GBUF_KEEP */
	uint64_t last_write_us;     /* how long the last group's write(2) calls took */
	size_t gcap;
};

static void *writer_main(void *arg);
static void flush_cb(evutil_socket_t fd, short what, void *arg);
static struct dlog_ticket *rec_new(const char *event, json_t *fields);
static int group_write(struct dlog *d, struct dlog_q *q, uint64_t *seq, char *hash,
    bool *synced);
static json_t *syslog_loss_fields(const struct dlog *d, uint64_t n, uint64_t first,
    uint64_t last);

/* dlog_set_root_checks (process-wide: set once by main before the first dlog_open). */
static bool root_checks;
static uid_t root_checks_uid;

void
dlog_set_root_checks(bool on, uid_t drop_uid)
{
	root_checks = on;
	root_checks_uid = drop_uid;
}

int
dlog_sync_parse(const char *s, enum dlog_sync *out)
{
	if (strcmp(s, "always") == 0)
		*out = DLOG_SYNC_ALWAYS;
	else if (strcmp(s, "batch") == 0)
		*out = DLOG_SYNC_BATCH;
	else if (strcmp(s, "none") == 0)
		*out = DLOG_SYNC_NONE;
	else
		return -1;
	return 0;
}

const char *
dlog_sync_str(enum dlog_sync s)
{
	switch (s) {
	case DLOG_SYNC_ALWAYS: return "always";
	case DLOG_SYNC_BATCH: return "batch";
	case DLOG_SYNC_NONE: return "none";
	}
	return "unknown";
}

/* fsync the directory holding path (best effort: a warning, the file itself is fine). */
static void
dir_sync(const char *path)
{
	char dir[EGRESS_PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n;
	int fd;

	if (slash == NULL) {
		dir[0] = '.';
		n = 1;
	} else {
		n = slash == path ? 1 : (size_t)(slash - path);
		if (n >= sizeof(dir))
			return;
		memcpy(dir, path, n);
	}
	dir[n] = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) != 0)
		log_warn("decision log: cannot sync directory %s", dir);
	if (fd >= 0)
		close(fd);
}

/* Wake the writer thread (it waits on cv_work), counted for dlog_get_status. */
static void
wake_writer(struct dlog *d)
{
	__atomic_fetch_add(&d->wakeups, 1, __ATOMIC_RELAXED);
	pthread_cond_signal(&d->cv_work);
}

static void
set_failed(struct dlog *d, int err, const char *what)
{
	/* called with mu held */
	snprintf(d->error, sizeof(d->error), "%s %s: %s", what, d->path, strerror(err));
	if (!d->failed)
		log_warnx("decision log unavailable, refusing hops: %s", d->error);
	__atomic_store_n(&d->failed, true, __ATOMIC_RELEASE);
	__atomic_store_n(&d->retry_after_ms, mono_msec() + d->retry_ms, __ATOMIC_RELEASE);
}

/*
 * Read the last record of fd (a regular file of size sz) and continue the chain from it.
 * A torn last line (never acknowledged: the writer completes a record only after the
 * whole line, newline included, is written) is truncated away. Returns 0 or an errno
 * (EBADMSG: the last complete record does not verify; an operator must look).
 */
static int
load_tail(struct dlog *d, int fd, off_t sz, uint64_t *seq, char *hash, char *why,
    size_t whylen)
{
	size_t win = EGRESS_LOG_RECORD_MAX + 2;
	off_t start = sz > (off_t)win ? sz - (off_t)win : 0;
	size_t n = (size_t)(sz - start), got = 0, end, lstart;
	char *buf;
	struct dlog_record_info info;
	int rc = 0;

	buf = calloc(1, n + 1);   /* zeroed: keeps -Wmaybe-uninitialized quiet */
	if (buf == NULL)
		return ENOMEM;
	while (got < n) {
		ssize_t r = pread(fd, buf + got, n - got, start + (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? errno : EIO;
			snprintf(why, whylen, "reading the tail");
			goto out;
		}
		got += (size_t)r;
	}
	end = n;
	if (buf[end - 1] != '\n') {
		/* torn tail: cut back to the last newline (or to the window start) */
		size_t keep = end;

		while (keep > 0 && buf[keep - 1] != '\n')
			keep--;
		if (keep == 0 && start > 0) {
			rc = EBADMSG;
			snprintf(why, whylen, "the last line is longer than the record limit");
			goto out;
		}
		log_warnx("decision log %s: truncating a torn last line of %zu bytes (never "
		    "acknowledged)", d->path, end - keep);
		if (ftruncate(fd, start + (off_t)keep) != 0) {
			rc = errno;
			snprintf(why, whylen, "truncating the torn tail");
			goto out;
		}
		if (keep == 0)
			goto out;   /* the file held only a torn line: continue the in-memory chain */
		/* read again: the window may not hold all of the last complete line */
		free(buf);
		return load_tail(d, fd, start + (off_t)keep, seq, hash, why, whylen);
	}
	/* buf[end-1] == '\n': the last complete line is (lstart, end-1) */
	lstart = end - 1;
	while (lstart > 0 && buf[lstart - 1] != '\n')
		lstart--;
	if (lstart == 0 && start > 0) {
		rc = EBADMSG;
		snprintf(why, whylen, "the last line is longer than the record limit");
		goto out;
	}
	{
		char lwhy[128];

		if (dlog_line_check_key(buf + lstart, end - 1 - lstart, &d->key, &info, lwhy,
		    sizeof(lwhy)) != DLOG_LINE_OK) {
			rc = EBADMSG;
			snprintf(why, whylen, "the last record is corrupt (%s)", lwhy);
			goto out;
		}
	}
	*seq = info.seq;
	memcpy(hash, info.hash, DLOG_HASH_HEX + 1);
out:
	free(buf);
	return rc;
}

/* The directory sync a new file owes, right before its first fdatasync (see
 * open_log_file): a record is never reported durable before the file's name is. */
static void
dir_sync_due(struct dlog *d)
{
	if (__atomic_exchange_n(&d->dir_unsynced, false, __ATOMIC_ACQ_REL))
		dir_sync(d->path);
}

/*
 * Open the log, creating it when missing. A new file's directory entry is synced too
 * (unless log_sync = none): with "always", a crash right after the first record must not
 * lose the whole file. That sync is owed, not made here (dir_sync_due, before the first
 * fdatasync of the file): it is a disk flush (30 ms measured on this VM's disk), and on
 * egressd's start-up path it delayed every private egressd of egress-exec; the guarantee
 * is about records, and no record is acknowledged as synced before it. Returns the fd or
 * -1 with errno.
 */
static int
open_log_file(struct dlog *d)
{
	/* O_NOFOLLOW: the directory may belong to the account egressd drops to; a symlink
	 * planted as the log's name must never make root write, truncate or chown another
	 * file (ELOOP). O_NONBLOCK under root's checks: opening a FIFO or device must not
	 * block or act before the file type is checked (cleared again for the regular file
	 * those checks insist on). */
	const int fl = O_RDWR | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW |
	    (root_checks ? O_NONBLOCK : 0);
	int fd;

	for (int tries = 0; tries < 3; tries++) {
		fd = open(d->path, fl);
		if (fd >= 0 || errno != ENOENT)
			return fd;
		fd = open(d->path, fl | O_CREAT | O_EXCL, 0640);
		if (fd >= 0) {
			if (d->sync != DLOG_SYNC_NONE)
				__atomic_store_n(&d->dir_unsynced, true, __ATOMIC_RELEASE);
			return fd;
		}
		if (errno != EEXIST)
			return -1;
		/* created by someone else in between: open it */
	}
	return -1;
}

/* The current name of the open file (after a rename by logrotate), into rotate_prev. */
static void
old_file_name(struct dlog *d)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", d->fd);
	n = readlink(link, d->rotate_prev, sizeof(d->rotate_prev) - 1);
	if (n <= 0 || (size_t)n >= sizeof(d->rotate_prev) - 1 ||
	    (n > 10 && memcmp(d->rotate_prev + n - 10, " (deleted)", 10) == 0)) {
		d->rotate_prev[0] = '\0';   /* unknown, or deleted: name no file */
		return;
	}
	d->rotate_prev[n] = '\0';
}

/*
 * Open (or reopen) the file. Called WITHOUT mu, from dlog_open before the writer starts or
 * from the writer thread (the only thread that changes fd, regular, last_seq, last_hash;
 * it changes them under mu so status readers see consistent values). The I/O runs
 * unlocked so a slow disk never blocks the loop thread's enqueue. Returns 0 or an errno.
 */
static int
file_open(struct dlog *d)
{
	struct stat st;
	char why[160] = "opening";
	char hash[DLOG_HASH_HEX + 1];
	uint64_t seq;
	bool regular = false;
	int fd, rc = 0;

	if (d->fd >= 0) {
		/* Where did the old file go? logrotate renamed it; /proc/self/fd follows the
		 * rename. A size rotation has set the name already. */
		if (d->rotate_prev[0] == '\0')
			old_file_name(d);
		pthread_mutex_lock(&d->mu);
		close(d->fd);
		d->fd = -1;
		pthread_mutex_unlock(&d->mu);
	}
	seq = d->last_seq;
	memcpy(hash, d->last_hash, sizeof(hash));
	d->refused = false;
	fd = open_log_file(d);
	if (fd < 0) {
		rc = errno;
		if (rc == ELOOP) {
			d->refused = true;
			snprintf(why, sizeof(why), "refusing a symbolic link as the log");
		}
		goto fail;
	}
	if (fstat(fd, &st) != 0) {
		rc = errno;
		snprintf(why, sizeof(why), "fstat");
		goto fail;
	}
	regular = S_ISREG(st.st_mode);
	if (root_checks) {
		/* Checked on the open fd, before the lock, the tail read and the torn-tail
		 * truncation: a hard link planted in the directory names another file. */
		if (!regular || st.st_nlink != 1 ||
		    (st.st_uid != 0 && st.st_uid != root_checks_uid)) {
			rc = EPERM;
			d->refused = true;
			snprintf(why, sizeof(why), "refusing %s as the log (it must be a regular "
			    "file with one link, owned by root or uid %u)", !regular ? "a file that "
			    "is not regular" : st.st_nlink != 1 ? "a file with more than one link" :
			    "a file of another user", (unsigned)root_checks_uid);
			goto fail;
		}
		int fl = fcntl(fd, F_GETFL);

		if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
			rc = errno;
			snprintf(why, sizeof(why), "fcntl");
			goto fail;
		}
	}
	if (regular) {
		/* Two writers on one chain would fork it: refuse a file another egressd holds. */
		if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
			rc = errno == EWOULDBLOCK ? EBUSY : errno;
			snprintf(why, sizeof(why), "locking (another egressd writes this log?)");
			goto fail;
		}
		/* Empty file: continue the in-memory chain (zero at start-up, the previous
		 * file's last record after a rotation). */
		if (st.st_size > 0 &&
		    (rc = load_tail(d, fd, st.st_size, &seq, hash, why, sizeof(why))) != 0)
			goto fail;
		d->size = lseek(fd, 0, SEEK_END);
		if (d->size < 0)
			d->size = 0;
		/* An empty file continuing a chain begins with a rotate record naming the
		 * file before it. */
		if (st.st_size == 0 && seq > 0) {
			d->rotate_pending = true;
			if (d->rotate_cause == NULL)
				d->rotate_cause = "reopen";
		} else {
			d->rotate_pending = false;
			d->rotate_cause = NULL;
			d->rotate_prev[0] = '\0';
		}
	}
	pthread_mutex_lock(&d->mu);
	d->fd = fd;
	d->regular = regular;
	d->last_seq = seq;
	memcpy(d->last_hash, hash, sizeof(d->last_hash));
	/* A failed log stays failed until a record is on disk again (writer_main, after the
	 * probe's write): an open that succeeds on a full disk proves nothing, and a hop
	 * that saw the log writable in between would connect upstream and only then find
	 * its allow record refused. */
	pthread_mutex_unlock(&d->mu);
	return 0;
fail:
	if (rc == 0)
		rc = EIO;
	if (fd >= 0)
		close(fd);
	{
		char what[200];

		snprintf(what, sizeof(what), "decision log: %s", why);
		pthread_mutex_lock(&d->mu);
		if (d->refused && d->opening)   /* dlog_open fails: its caller says why */
			snprintf(d->error, sizeof(d->error), "%s %s: %s", what, d->path,
			    strerror(rc));
		else
			set_failed(d, rc, what);
		pthread_mutex_unlock(&d->mu);
	}
	return rc;
}

static void
rec_free(struct dlog_ticket *t)
{
	if (t != NULL) {
		if (!t->fields_inline)
			free(t->fields);
		free(t);
	}
}

/* Loop thread: run the callbacks of completed records. */
static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dlog *d = arg;
	struct dlog_q q = TAILQ_HEAD_INITIALIZER(q);
	struct dlog_ticket *t;
	uint64_t v;

	/* EV_READ: the writer's eventfd; otherwise activated by an inline write on this
	 * thread (nothing to read) */
	if (what & EV_READ)
		while (read(fd, &v, sizeof(v)) < 0 && errno == EINTR)
			;
	pthread_mutex_lock(&d->mu);
	TAILQ_CONCAT(&q, &d->done, link);
	pthread_mutex_unlock(&d->mu);
	while ((t = TAILQ_FIRST(&q)) != NULL) {
		TAILQ_REMOVE(&q, t, link);
		/* read cb now: an earlier callback may have cancelled this ticket */
		if (t->cb != NULL)
			t->cb(t->err, t->arg);
		rec_free(t);
		pthread_mutex_lock(&d->mu);
		d->inflight--;
		pthread_mutex_unlock(&d->mu);
	}
}

struct dlog *
dlog_open(struct event_base *base, const struct dlog_config *cfg, char *err, size_t errlen)
{
	struct dlog *d;
	pthread_condattr_t ca;
	int rc;

	if (cfg == NULL || cfg->path == NULL || cfg->path[0] == '\0' ||
	    strlen(cfg->path) >= EGRESS_PATH_MAX || base == NULL) {
		snprintf(err, errlen, "decision log: no path configured");
		return NULL;
	}
	if (cfg->sync != DLOG_SYNC_ALWAYS && cfg->sync != DLOG_SYNC_BATCH &&
	    cfg->sync != DLOG_SYNC_NONE) {
		snprintf(err, errlen, "decision log: invalid sync mode");
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (d == NULL || (d->path = strdup(cfg->path)) == NULL) {
		free(d);
		snprintf(err, errlen, "decision log: out of memory");
		return NULL;
	}
	d->base = base;
	d->fd = -1;
	d->efd = -1;
	d->sync = cfg->sync;
	d->batch_ms = cfg->batch_ms ? cfg->batch_ms : DLOG_DEFAULT_BATCH_MS;
	d->queue_max = cfg->queue_max ? cfg->queue_max : DLOG_DEFAULT_QUEUE_MAX;
	d->retry_ms = cfg->retry_ms ? cfg->retry_ms : DLOG_DEFAULT_RETRY_MS;
	d->max_bytes = cfg->max_bytes;
	if (cfg->key != NULL && cfg->key->len > 0) {
		if (cfg->key->len < DLOG_KEY_MIN || cfg->key->len > DLOG_KEY_MAX) {
			snprintf(err, errlen, "decision log: HMAC key length out of range");
			free(d->path);
			free(d);
			return NULL;
		}
		d->key = *cfg->key;
	}
	if (cfg->syslog != NULL ||
	    (cfg->syslog_target != NULL && cfg->syslog_target[0] != '\0')) {
		struct dlog_syslog_config sc = { .target = cfg->syslog_target };

		if (cfg->syslog != NULL)
			sc = *cfg->syslog;
		snprintf(d->syslog_target, sizeof(d->syslog_target), "%s", sc.target);
		d->syslog = dlog_syslog_open(&sc, err, errlen);
		if (d->syslog == NULL) {
			secret_wipe(&d->key, sizeof(d->key));
			free(d->path);
			free(d);
			return NULL;
		}
	}
	d->hasher = dlog_hasher_new(&d->key);
	if (d->hasher == NULL) {
		snprintf(err, errlen, "decision log: cannot set up the chain hash (OpenSSL)");
		dlog_syslog_close(d->syslog);
		secret_wipe(&d->key, sizeof(d->key));
		free(d->path);
		free(d);
		return NULL;
	}
	memcpy(d->last_hash, dlog_zero_hash, sizeof(d->last_hash));
	TAILQ_INIT(&d->pending);
	TAILQ_INIT(&d->done);
	TAILQ_INIT(&d->kept);
	pthread_mutex_init(&d->mu, NULL);
	/* both timed on the monotonic clock: a wall-clock step never stretches the batch
	 * window or a synchronous append's deadline */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cv_work, &ca);
	pthread_cond_init(&d->cv_sync, &ca);
	pthread_condattr_destroy(&ca);

	d->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->efd < 0) {
		snprintf(err, errlen, "decision log: eventfd: %s", strerror(errno));
		goto fail;
	}
	d->ev_done = event_new(base, d->efd, EV_READ | EV_PERSIST, done_cb, d);
	d->ev_flush = event_new(base, -1, 0, flush_cb, d);
	if (d->ev_done == NULL || d->ev_flush == NULL || event_add(d->ev_done, NULL) != 0) {
		snprintf(err, errlen, "decision log: cannot add event");
		goto fail;
	}
	d->opening = true;   /* before the writer thread exists: no race */
	rc = file_open(d);
	d->opening = false;
	if (rc != 0) {
		if (d->refused) {
			/* A planted link or a file of someone else: an operator must look; never
			 * start writing (and never retry into) such a file. */
			snprintf(err, errlen, "%s", d->error);
			goto fail;
		}
		/* the first append probes at once */
		__atomic_store_n(&d->retry_after_ms, 0, __ATOMIC_RELEASE);
	}
	if (pthread_create(&d->thread, NULL, writer_main, d) != 0) {
		snprintf(err, errlen, "decision log: cannot start the writer thread");
		goto fail;
	}
	d->thread_started = true;
	return d;
fail:
	dlog_close(d);
	return NULL;
}

static void flush_unsynced(struct dlog *d);

/* dlog_close, the writer stopped: write the mirror's last loss record (best effort: the
 * log must be healthy). */
static void
loss_at_close(struct dlog *d, uint64_t n, uint64_t first, uint64_t last)
{
	struct dlog_q q = TAILQ_HEAD_INITIALIZER(q);
	struct dlog_ticket *t;
	char hash[DLOG_HASH_HEX + 1];
	uint64_t seq = 0;
	bool synced = false;
	json_t *f;

	log_warnx("decision log: the syslog mirror %s lost %llu record(s) (seq %llu..%llu); "
	    "recorded as syslog_loss", d->syslog_target, (unsigned long long)n,
	    (unsigned long long)first, (unsigned long long)last);
	if (d->fd < 0 || __atomic_load_n(&d->failed, __ATOMIC_ACQUIRE) ||
	    (f = syslog_loss_fields(d, n, first, last)) == NULL ||
	    (t = rec_new("syslog_loss", f)) == NULL)
		return;
	TAILQ_INSERT_TAIL(&q, t, link);
	if (group_write(d, &q, &seq, hash, &synced) == 0) {
		d->last_seq = seq;
		memcpy(d->last_hash, hash, sizeof(d->last_hash));
		flush_unsynced(d);
	} else {
		log_warnx("decision log %s: cannot write the syslog_loss record", d->path);
	}
	rec_free(t);
}

/* A record that had to be kept (dlog_append_kept) and is not in the log when it closes:
 * said in the operator log, naming its hop (its "hop" member, which may lie past the first
 * 200 bytes: an inner close carries the client's address and a principal of up to 64
 * before it), then the first bytes of its fields. */
static void
report_lost(const struct dlog_ticket *t, const char *why)
{
	static const char key[] = "\"hop\":\"";
	const char *h = t->fields_len > 0 ? strstr(t->fields, key) : NULL;
	size_t hn = 0;

	if (h != NULL) {
		h += sizeof(key) - 1;
		hn = strcspn(h, "\"");       /* hop ids are [A-Za-z0-9./-]: no escapes */
	}
	log_warnx("decision log refused a %s record (%s; the log was closed before it "
	    "recovered): hop %.*s: %.*s", t->event, why, (int)hn, h != NULL ? h : "",
	    (int)(t->fields_len < 200 ? t->fields_len : 200), t->fields);
}

size_t
dlog_close(struct dlog *d)
{
	struct dlog_ticket *t;
	size_t lost = 0;

	if (d == NULL)
		return 0;
	if (d->thread_started) {
		pthread_mutex_lock(&d->mu);
		d->stop = true;
		wake_writer(d);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->thread, NULL);
	}
	if (d->syslog != NULL) {
		/* The mirror gets its bounded moment to deliver; what it lost is recorded
		 * here, in the file only (the mirror has stopped). */
		struct dlog_syslog *sy = d->syslog;
		uint64_t n, first, last;

		dlog_syslog_stop(sy);
		d->syslog = NULL;
		if (d->thread_started && dlog_syslog_loss_take(sy, &n, &first, &last))
			loss_at_close(d, n, first, last);
		dlog_syslog_close(sy);
	}
	/* The writer is gone: no lock needed from here on. */
	while ((t = TAILQ_FIRST(&d->done)) != NULL) {
		TAILQ_REMOVE(&d->done, t, link);
		if (t->keep && t->err != 0) {
			report_lost(t, strerror(t->err));
			lost++;
		}
		if (!t->is_sync)
			rec_free(t);
	}
	while ((t = TAILQ_FIRST(&d->pending)) != NULL) {
		TAILQ_REMOVE(&d->pending, t, link);
		if (t->keep) {
			report_lost(t, "not written");
			lost++;
		}
		if (!t->is_sync)
			rec_free(t);
	}
	while ((t = TAILQ_FIRST(&d->kept)) != NULL) {
		TAILQ_REMOVE(&d->kept, t, link);
		report_lost(t, d->error[0] != '\0' ? d->error : "log failed");
		lost++;
		rec_free(t);
	}
	if (d->ev_done != NULL)
		event_free(d->ev_done);
	if (d->ev_flush != NULL)
		event_free(d->ev_flush);
	if (d->efd >= 0)
		close(d->efd);
	if (d->fd >= 0)
		close(d->fd);
	pthread_cond_destroy(&d->cv_work);
	pthread_cond_destroy(&d->cv_sync);
	pthread_mutex_destroy(&d->mu);
	secret_wipe(&d->key, sizeof(d->key));
	dlog_syslog_close(d->syslog);
	dlog_hasher_free(d->hasher);
	free(d->gbuf);
	free(d->path);
	free(d);
	return lost;
}

static bool
event_name_valid(const char *s)
{
	size_t n;

	if (s == NULL)
		return false;
	n = strlen(s);
	if (n == 0 || n > DLOG_EVENT_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_'))
			return false;
	return true;
}

static void
now_rfc3339(char out[DLOG_TIME_LEN + 1])
{
	/* The date and time to the second, formatted once per second per thread (the loop
	 * stamps records, the writer re-stamps kept ones): gmtime_r takes glibc's time-zone
	 * lock and strftime is the slow part of a record's stamp. */
	static __thread time_t cached_sec = (time_t)-1;
	static __thread char cached[20];
	struct timespec ts;
	unsigned us;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_sec != cached_sec) {
		struct tm tm;

		gmtime_r(&ts.tv_sec, &tm);
		if (strftime(cached, sizeof(cached), "%Y-%m-%dT%H:%M:%S", &tm) != 19)
			memcpy(cached, "0000-00-00T00:00:00", 20);   /* year > 9999: unreachable */
		cached_sec = ts.tv_sec;
	}
	memcpy(out, cached, 19);
	/* tv_nsec < 1e9, so the fraction is exactly six digits */
	us = (unsigned)(ts.tv_nsec / 1000) % 1000000u;
	out[19] = '.';
	for (int i = 25; i >= 20; i--) {
		out[i] = (char)('0' + us % 10);
		us /= 10;
	}
	out[26] = 'Z';
	out[27] = '\0';
}

/* Build a record from the caller's fields (stolen). NULL with errno. */
static struct dlog_ticket *
rec_new(const char *event, json_t *fields)
{
	static const char *const reserved[] = { "v", "time", "seq", "event", "prev", "hash" };
	struct dlog_ticket *t = NULL;
	char *s = NULL;
	size_t n;
	int e = EINVAL;

	if (!event_name_valid(event) || fields == NULL || !json_is_object(fields))
		goto fail;
	for (size_t i = 0; i < EGRESS_NELEM(reserved); i++)
		if (json_object_get(fields, reserved[i]) != NULL)
			goto fail;
	/* ENSURE_ASCII: the log stays 7-bit clean whatever a worker sent. */
	s = json_dumps(fields, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (s == NULL)
		goto fail;
	n = strlen(s);
	if (n < 2 || s[0] != '{' || s[n - 1] != '}')
		goto fail;
	/* strip the braces in place */
	memmove(s, s + 1, n - 2);
	s[n - 2] = '\0';
	n -= 2;
	if (DLOG_FIXED_LEN + strlen(event) + (n ? n + 1 : 0) > EGRESS_LOG_RECORD_MAX) {
		e = EMSGSIZE;
		goto fail;
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL) {
		e = ENOMEM;
		goto fail;
	}
	t->event_len = strlen(event);
	memcpy(t->event, event, t->event_len + 1);
	t->fields = s;
	t->fields_len = n;
	now_rfc3339(t->time);
	json_decref(fields);
	return t;
fail:
	free(s);
	json_decref(fields);
	errno = e;
	return NULL;
}

/* The held records (dlog_append_kept) go to the writer next, stamped now (mu held). */
static void
held_to_pending_locked(struct dlog *d)
{
	struct dlog_ticket *t;

	TAILQ_FOREACH(t, &d->kept, link)
		now_rfc3339(t->time);
	TAILQ_CONCAT(&d->pending, &d->kept, link);
	d->nkept = 0;
}

/* A record from members already written as compact JSON (dlog_append_raw): one
 * allocation holds the ticket and a copy of the members. NULL with errno. */
static struct dlog_ticket *
rec_new_raw(const char *event, const char *members, size_t n)
{
	struct dlog_ticket *t;
	size_t elen;

	if (!event_name_valid(event) || (members == NULL && n > 0)) {
		errno = EINVAL;
		return NULL;
	}
	elen = strlen(event);
	if (DLOG_FIXED_LEN + elen + (n ? n + 1 : 0) > EGRESS_LOG_RECORD_MAX) {
		errno = EMSGSIZE;
		return NULL;
	}
	t = malloc(sizeof(*t) + n + 1);
	if (t == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	memset(t, 0, sizeof(*t));
	t->fields = (char *)(t + 1);
	if (n > 0)
		memcpy(t->fields, members, n);
	t->fields[n] = '\0';
	t->fields_len = n;
	t->fields_inline = true;
	memcpy(t->event, event, elen + 1);
	t->event_len = elen;
	now_rfc3339(t->time);
	return t;
}

/* Queue t (mu held); applies the failed-state and queue limits. Returns 0 or errno;
 * *wake says whether the caller must signal cv_work after unlocking (the writer is
 * waiting). The signal comes after the unlock so the woken writer does not block on the
 * mutex the signaller still holds. */
static int
enqueue_locked(struct dlog *d, struct dlog_ticket *t, bool *wake)
{
	*wake = false;
	if (d->stop)
		return ESHUTDOWN;
	if (__atomic_load_n(&d->failed, __ATOMIC_ACQUIRE)) {
		uint64_t now = mono_msec();

		/* One probe per retry interval; everything else is refused at once, but a
		 * record to keep waits for the recovery (bounded). A blocking append (the stop
		 * record: the loop no longer runs, no later hop will probe) probes at once,
		 * with the held records ahead of it, so they are not lost to a disk that
		 * recovered less than a retry interval before the stop. */
		if (t->is_sync) {
			held_to_pending_locked(d);
			now_rfc3339(t->time);       /* after the held records' new times */
		} else if (now < __atomic_load_n(&d->retry_after_ms, __ATOMIC_ACQUIRE)) {
			if (!t->keep || d->nkept >= EGRESS_LOG_KEPT_MAX ||
			    d->inflight >= d->queue_max)
				return EIO;
			TAILQ_INSERT_TAIL(&d->kept, t, link);
			d->nkept++;
			d->inflight++;
			return 0;
		}
		__atomic_store_n(&d->retry_after_ms, now + d->retry_ms, __ATOMIC_RELEASE);
	}
	if (d->inflight >= d->queue_max)
		return EAGAIN;
	TAILQ_INSERT_TAIL(&d->pending, t, link);
	d->inflight++;
	*wake = d->writer_idle;
	return 0;
}

static int group_write(struct dlog *d, struct dlog_q *q, uint64_t *seq, char *hash,
    bool *synced);

/* The fields of a "syslog_loss" record (dlog.h). NULL on ENOMEM. */
static json_t *
syslog_loss_fields(const struct dlog *d, uint64_t n, uint64_t first, uint64_t last)
{
	return json_pack("{s:I,s:I,s:I,s:s}", "dropped", (json_int_t)n, "first_seq",
	    (json_int_t)first, "last_seq", (json_int_t)last, "collector", d->syslog_target);
}

/*
 * mu held, after a group was written: when the mirror reports an ended loss episode,
 * queue its "syslog_loss" record (nobody waits for it). Returns true when one was queued
 * (the caller wakes the writer). A loss that cannot be queued now stays due.
 */
static bool
syslog_loss_queue_locked(struct dlog *d)
{
	struct dlog_ticket *t;
	uint64_t n, first, last;
	json_t *f;

	if (d->syslog == NULL || d->stop || d->inflight >= d->queue_max ||
	    __atomic_load_n(&d->failed, __ATOMIC_ACQUIRE) ||
	    !dlog_syslog_loss_take(d->syslog, &n, &first, &last))
		return false;
	f = syslog_loss_fields(d, n, first, last);
	t = f != NULL ? rec_new("syslog_loss", f) : NULL;
	if (t == NULL) {
		dlog_syslog_loss_restore(d->syslog, n, first, last);
		return false;
	}
	t->no_cb = true;
	TAILQ_INSERT_TAIL(&d->pending, t, link);
	d->inflight++;
	return true;
}
static void complete_locked(struct dlog *d, struct dlog_q *q, int err, bool on_loop);
static uint64_t rec_estimate(const struct dlog_ticket *t);

/* The loop thread may write records itself now (mu held). Regular files only: a FIFO or
 * device may block for good. Also during the writer's fdatasync (the syncing window is a
 * large share of the time under batch): where the device wants stable pages, a write to
 * the page being written back waits for the disk, and the 1 ms back-off in
 * write_inline_locked bounds that to once a second. */
static bool
inline_ok_locked(const struct dlog *d)
{
	return !(d->sync == DLOG_SYNC_ALWAYS || !d->regular || d->writer_busy ||
	    d->stop || d->reopen_req || d->fd_dead || d->fd < 0 || d->rotate_pending ||
	    __atomic_load_n(&d->failed, __ATOMIC_ACQUIRE) || d->inflight >= d->queue_max ||
	    (d->inline_off_until_ms != 0 && mono_msec() < d->inline_off_until_ms) ||
	    (d->syncing && d->inline_sync_off_until_ms != 0 &&
	    mono_msec() < d->inline_sync_off_until_ms));
}

/* Loop thread: other callbacks are ready in this turn, besides the end-of-turn flush
 * (which takes every queued record along anyway). */
static bool
others_ready(struct dlog *d)
{
	int n = event_base_get_num_events(d->base, EVENT_BASE_COUNT_ACTIVE);

	return n > (d->flush_queued ? 1 : 0);
}

/* The queue as the loop's next write would take it, t (NULL: none) last (mu held): false
 * when more than max records are queued, or when a size rotation would be due first (the
 * writer rotates); *npending: the records queued. */
static bool
queue_fits_locked(const struct dlog *d, const struct dlog_ticket *t, size_t max,
    size_t *npending)
{
	const struct dlog_ticket *p;
	uint64_t need = t != NULL ? rec_estimate(t) : 0;

	*npending = 0;
	TAILQ_FOREACH(p, &d->pending, link) {
		if (++*npending > max)
			return false;
		need += rec_estimate(p);
	}
	return !(d->max_bytes > 0 && d->size > 0 && (uint64_t)d->size + need > d->max_bytes);
}

/*
 * The loop thread writes t itself (mu held) when that keeps every guarantee: not
 * log_sync = always (its fdatasync must not stall the loop); the writer owns nothing
 * (no group, reopen or rotation in flight); the log is healthy, its file open, no rotate
 * record due and no size rotation due. Records already queued that the writer has not
 * taken yet (at most DLOG_INLINE_TAKE_MAX, or DLOG_GROUP_MAX at the end of a turn:
 * at_end, t NULL) go first, in the same write: on-disk order stays seq order, and a
 * close record queued a moment earlier does not send the next allow through two thread
 * hand-offs. Without at_end, only when no other event is ready (else the record waits
 * for the end of the turn). Returns false to queue t as usual. The records
 * complete exactly as one group of the writer would (callbacks run later from the loop,
 * through ev_done; records to keep are held for the recovery when the write fails);
 * *wake: the writer must be woken (a batch sync is now due, or the file must be closed).
 */
static bool
write_inline_locked(struct dlog *d, struct dlog_ticket *t, bool *wake, bool at_end)
{
	struct dlog_q q = TAILQ_HEAD_INITIALIZER(q);
	struct dlog_ticket *p;
	char hash[DLOG_HASH_HEX + 1];
	uint64_t seq = 0;
	bool synced = false, was_unsynced, loss_queued = false, during_sync;
	size_t npending = 0;
	int e;

	*wake = false;
	if (!inline_ok_locked(d))
		return false;
	/* only now: while the writer writes a group (writer_busy) it sets unsynced without mu */
	was_unsynced = d->unsynced;
	if (!queue_fits_locked(d, t, at_end ? DLOG_GROUP_MAX : DLOG_INLINE_TAKE_MAX, &npending))
		return false;
	/* A record is written at once only when the loop has nothing else to do (one
	 * transaction at a time: no wait at all). While other events are ready, records
	 * collect in the queue and the end of the turn (flush_cb, at_end) writes them all
	 * in one write(2): under load one system call per turn, and no thread hand-off and
	 * wake-up per record (measured: the writer thread's futex and eventfd round trips
	 * were ~10% of egressd's CPU per transaction at 64 connections). */
	if ((t == NULL && npending == 0) || (!at_end && others_ready(d)))
		return false;
	d->inline_off_until_ms = 0;     /* inline_ok_locked: no back-off, or it is over */
	if (d->syncing)
		d->inline_sync_off_until_ms = 0;        /* likewise */
	TAILQ_CONCAT(&q, &d->pending, link);   /* counted in inflight already */
	if (t != NULL) {
		TAILQ_INSERT_TAIL(&q, t, link);
		d->inflight++;
	}
	/* mu is held: a sync cannot begin during this write, only be running already */
	during_sync = d->syncing;
	e = group_write(d, &q, &seq, hash, &synced);
	if (d->last_write_us > DLOG_INLINE_SLOW_US && during_sync) {
		d->inline_sync_off_until_ms = mono_msec() + DLOG_INLINE_BACKOFF_MS;
		log_debug("decision log %s: a write during the log's fdatasync took over %u us; "
		    "the writer thread takes the records written during a sync for %u ms",
		    d->path, DLOG_INLINE_SLOW_US, DLOG_INLINE_BACKOFF_MS);
	} else if (d->last_write_us > DLOG_INLINE_SLOW_US) {
		d->inline_off_until_ms = mono_msec() + DLOG_INLINE_BACKOFF_MS;
		log_debug("decision log %s: a write took over %u us; the writer thread takes "
		    "the records for %u ms", d->path, DLOG_INLINE_SLOW_US,
		    DLOG_INLINE_BACKOFF_MS);
	}
	if (e == 0) {
		d->last_seq = seq;
		memcpy(d->last_hash, hash, sizeof(d->last_hash));
		if (syslog_loss_queue_locked(d))
			loss_queued = true;
	} else {
		/* group_write undid what reached the file; the writer closes it (it may be in
		 * an fdatasync of this fd right now) and the next group probes */
		struct dlog_ticket *nx;

		set_failed(d, e, "cannot write decision log");
		d->fd_dead = true;
		/* as the writer does: records to keep wait for the recovery (bounded) */
		for (p = TAILQ_FIRST(&q); p != NULL; p = nx) {
			nx = TAILQ_NEXT(p, link);
			if (p->keep && !p->is_sync && d->nkept < EGRESS_LOG_KEPT_MAX) {
				TAILQ_REMOVE(&q, p, link);
				TAILQ_INSERT_TAIL(&d->kept, p, link);
				d->nkept++;
			}
		}
	}
	complete_locked(d, &q, e, true);
	*wake = d->writer_idle && (e != 0 || loss_queued ||
	    (!was_unsynced && d->unsynced && !d->writer_polls));
	return true;
}

/* Loop thread, at the end of the turn in which records were queued without waking the
 * writer: write them all here in one group, else (the writer owns the file, the log is
 * failed, a rotation is due, ...) wake the writer. */
static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dlog *d = arg;
	bool wake = false;

	(void)fd;
	(void)what;
	/* Callbacks made ready during this turn after the flush was queued (a connect that
	 * completed, a route delivered) are still to run, and may append the allow record a
	 * 200 waits for: step behind them (event_active puts the flush at the end of the
	 * active queue; the loop still runs it before it waits again), so that their records
	 * and the ones queued so far go in one write(2) (measured: 1.5 write(2) per
	 * transaction at 64 connections, a close record's and an allow's, -> 0.8). Only
	 * when the loop will write them itself: else the writer is woken now, as before. */
	pthread_mutex_lock(&d->mu);
	/* (not others_ready: this flush is running, so it is not among the active) */
	if (d->flush_yields < DLOG_FLUSH_YIELD_MAX && !TAILQ_EMPTY(&d->pending) &&
	    inline_ok_locked(d) && event_base_get_num_events(d->base, EVENT_BASE_COUNT_ACTIVE) > 0) {
		d->flush_yields++;
		pthread_mutex_unlock(&d->mu);
		event_active(d->ev_flush, EV_TIMEOUT, 0);
		return;
	}
	d->flush_yields = 0;
	d->flush_queued = false;
	if (!TAILQ_EMPTY(&d->pending) && !write_inline_locked(d, NULL, &wake, true))
		wake = d->writer_idle;
	pthread_mutex_unlock(&d->mu);
	if (wake)
		wake_writer(d);
}

/* After queueing a record, instead of waking the writer now: the loop writes it itself at
 * the end of this turn (flush_cb), or wakes the writer then. If the loop never turns again
 * (shutdown), dlog_close writes what is queued. */
static void
defer_wake(struct dlog *d)
{
	if (!d->flush_queued) {
		d->flush_queued = true;
		event_active(d->ev_flush, EV_TIMEOUT, 0);
	}
}

/* dlog_append of a built record t (owned from here on, also on error). */
static int
append_ticket(struct dlog *d, struct dlog_ticket *t, dlog_done_cb cb, void *arg,
    struct dlog_ticket **ticket)
{
	bool wake;
	int e;

	bool nowait;

	t->cb = cb;
	t->arg = arg;
	t->no_cb = cb == NULL;
	nowait = t->no_cb || t->err_only;
	pthread_mutex_lock(&d->mu);
	if (write_inline_locked(d, t, &wake, false)) {
		/* completed (its callback is due on the loop, also for a failed write) */
		pthread_mutex_unlock(&d->mu);
		if (wake)
			wake_writer(d);
		if (ticket != NULL && cb != NULL)
			*ticket = t;
		return 0;
	}
	e = enqueue_locked(d, t, &wake);
	pthread_mutex_unlock(&d->mu);
	if (e == 0 && (nowait || d->sync != DLOG_SYNC_ALWAYS)) {
		/* a busy writer takes it in its next group anyway; an idle one is woken at the
		 * end of the turn unless the loop writes it itself then (log_sync = always:
		 * a record someone waits for goes to the writer, whose fdatasync must not stall
		 * the loop) */
		wake = false;
		defer_wake(d);
	}
	if (wake)
		wake_writer(d);
	if (e != 0) {
		rec_free(t);
		errno = e;
		return -1;
	}
	if (ticket != NULL && cb != NULL)
		*ticket = t;
	return 0;
}

json_t *
dlog_text(const char *s)
{
	json_t *j;
	char *c;

	if (s == NULL)
		return json_null();
	if ((j = json_string(s)) != NULL)
		return j;
	if ((c = utf8_lossy_dup(s)) == NULL)
		return NULL;
	j = json_string(c);
	free(c);
	return j;
}

int
dlog_append(struct dlog *d, const char *event, json_t *fields, dlog_done_cb cb, void *arg,
    struct dlog_ticket **ticket)
{
	struct dlog_ticket *t;

	if (ticket != NULL)
		*ticket = NULL;
	t = rec_new(event, fields);
	if (t == NULL)
		return -1;
	return append_ticket(d, t, cb, arg, ticket);
}

void
dlog_ticket_cancel(struct dlog_ticket *t)
{
	/* cb is only read on the loop thread, which is the caller's thread. */
	if (t != NULL)
		t->cb = NULL;
}

void
dlog_ticket_retarget(struct dlog_ticket *t, dlog_done_cb cb, void *arg)
{
	/* cb and arg are only read on the loop thread, which is the caller's thread. */
	if (t != NULL) {
		t->cb = cb;
		t->arg = arg;
	}
}

int
dlog_append_sync(struct dlog *d, const char *event, json_t *fields, unsigned timeout_ms)
{
	struct dlog_ticket *t;
	struct timespec dl;
	bool wake;
	int e = 0;

	t = rec_new(event, fields);
	if (t == NULL)
		return -1;
	t->is_sync = true;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&d->mu);
	e = enqueue_locked(d, t, &wake);
	if (e != 0) {
		pthread_mutex_unlock(&d->mu);
		rec_free(t);
		errno = e;
		return -1;
	}
	if (wake)
		wake_writer(d);   /* the writer needs mu anyway: we wait below */
	while (!t->done) {
		if (pthread_cond_timedwait(&d->cv_sync, &d->mu, &dl) == ETIMEDOUT && !t->done) {
			t->abandoned = true;   /* the writer frees it */
			pthread_mutex_unlock(&d->mu);
			errno = ETIMEDOUT;
			return -1;
		}
	}
	e = t->err;
	d->inflight--;
	pthread_mutex_unlock(&d->mu);
	rec_free(t);
	if (e != 0) {
		errno = e;
		return -1;
	}
	return 0;
}

int
dlog_with_fd(struct dlog *d, int (*fn)(int fd, void *arg), void *arg)
{
	int rc;

	/* file_open closes and installs fd under mu: the fd stays this file meanwhile. */
	pthread_mutex_lock(&d->mu);
	if (d->fd < 0) {
		errno = EBADF;
		rc = -1;
	} else {
		rc = fn(d->fd, arg);
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

bool
dlog_writable(const struct dlog *d)
{
	return d != NULL && !__atomic_load_n(&d->failed, __ATOMIC_ACQUIRE);
}

bool
dlog_accepting(const struct dlog *d)
{
	if (d == NULL)
		return false;
	if (!__atomic_load_n(&d->failed, __ATOMIC_ACQUIRE))
		return true;
	return mono_msec() >= __atomic_load_n(&d->retry_after_ms, __ATOMIC_ACQUIRE);
}

/*
 * A record nobody waits for (a close) may wait in the queue for the next record's write
 * instead of costing a write(2) of its own (mu held): with log_sync = batch, while the
 * writer is in a timed wait (it takes the queue within batch_ms by itself, without a
 * wake-up) and the log is healthy, with few enough records queued that the loop's next
 * write takes them all along (DLOG_INLINE_TAKE_MAX). One transaction at a time, the close
 * record of one hop then goes out with the allow record of the next in one write(2)
 * (docs/performance.md, "The seventeenth round"); with no next hop the writer writes it
 * within batch_ms (and syncs it within the next batch_ms). Only a close of a hop's normal
 * end qualifies: dlog_append_raw with keep and err_only_cb, or dlog_append_kept with cb
 * NULL (a callback someone waits for is written at once, as before).
 */
static bool
hold_ok_locked(const struct dlog *d, const struct dlog_ticket *t)
{
	size_t n;

	/* once t is queued the next inline write must still take the whole queue along;
	 * a size rotation due with it: written now (the writer rotates at the end of the
	 * turn), so the next allow does not find the rotation in its way */
	return d->sync == DLOG_SYNC_BATCH && d->writer_looks && inline_ok_locked(d) &&
	    queue_fits_locked(d, t, DLOG_INLINE_TAKE_MAX - 1, &n);
}

/* dlog_append_kept of a built record t (owned from here on, also on error). */
static int
append_kept_ticket(struct dlog *d, struct dlog_ticket *t, dlog_done_cb cb, void *arg)
{
	bool wake;
	int e;

	bool nowait;

	t->cb = cb;
	t->arg = arg;
	t->no_cb = cb == NULL;
	t->keep = true;
	nowait = t->no_cb || t->err_only;
	pthread_mutex_lock(&d->mu);
	if (nowait && hold_ok_locked(d, t)) {
		/* the next write takes it along, or the writer within batch_ms (no wake-up) */
		e = enqueue_locked(d, t, &wake);
		pthread_mutex_unlock(&d->mu);
		if (e != 0) {
			rec_free(t);
			errno = e;
			return -1;
		}
		return 0;
	}
	if (write_inline_locked(d, t, &wake, false)) {
		/* written, or held for the recovery when the write failed */
		pthread_mutex_unlock(&d->mu);
		if (wake)
			wake_writer(d);
		return 0;
	}
	e = enqueue_locked(d, t, &wake);
	pthread_mutex_unlock(&d->mu);
	if (e == 0 && (nowait || d->sync != DLOG_SYNC_ALWAYS)) {
		/* a busy writer takes it in its next group anyway; an idle one is woken at the
		 * end of the turn unless the loop writes it itself then (log_sync = always:
		 * a record someone waits for goes to the writer, whose fdatasync must not stall
		 * the loop) */
		wake = false;
		defer_wake(d);
	}
	if (e != 0) {
		rec_free(t);
		errno = e;
		return -1;
	}
	if (wake)
		wake_writer(d);   /* after unlocking: no convoy on mu */
	return 0;
}

int
dlog_append_kept(struct dlog *d, const char *event, json_t *fields, dlog_done_cb cb,
    void *arg)
{
	struct dlog_ticket *t = rec_new(event, fields);

	if (t == NULL)
		return -1;
	return append_kept_ticket(d, t, cb, arg);
}

int
dlog_append_raw(struct dlog *d, const char *event, const char *members, size_t len,
    bool keep, bool err_only_cb, dlog_done_cb cb, void *arg, struct dlog_ticket **ticket)
{
	struct dlog_ticket *t;

	if (ticket != NULL)
		*ticket = NULL;
	if (keep && ticket != NULL) {
		errno = EINVAL;
		return -1;
	}
	t = rec_new_raw(event, members, len);
	if (t == NULL)
		return -1;
	/* err_only: a ticket would be a handle to a callback that usually never runs */
	t->err_only = err_only_cb && cb != NULL;
	if (keep)
		return append_kept_ticket(d, t, cb, arg);
	return append_ticket(d, t, cb, arg, t->err_only ? NULL : ticket);
}

int
dlog_probe(struct dlog *d, dlog_done_cb cb, void *arg, struct dlog_ticket **ticket)
{
	char err[sizeof(d->error)];
	json_t *f;

	pthread_mutex_lock(&d->mu);
	snprintf(err, sizeof(err), "%s", d->error);
	pthread_mutex_unlock(&d->mu);
	f = json_object();
	if (f == NULL || json_object_set_new(f, "after", dlog_text(err)) != 0) {
		json_decref(f);
		if (ticket != NULL)
			*ticket = NULL;
		errno = ENOMEM;
		return -1;
	}
	return dlog_append(d, "log_recovered", f, cb, arg, ticket);
}

void
dlog_reopen(struct dlog *d)
{
	pthread_mutex_lock(&d->mu);
	d->reopen_req = true;
	wake_writer(d);
	pthread_mutex_unlock(&d->mu);
}

void
dlog_get_status(const struct dlog *d, struct dlog_status *st)
{
	struct dlog *dd = (struct dlog *)(uintptr_t)d;   /* the mutex is not const */

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&dd->mu);
	snprintf(st->path, sizeof(st->path), "%s", d->path);
	st->seq = d->last_seq;
	st->writable = !d->failed;
	st->written = d->written;
	st->failed = d->nfailed;
	st->syncs = d->syncs;
	st->groups = __atomic_load_n(&d->groups, __ATOMIC_RELAXED);
	st->wakeups = __atomic_load_n(&d->wakeups, __ATOMIC_RELAXED);
	st->queued = d->inflight;
	snprintf(st->error, sizeof(st->error), "%s", d->error);
	pthread_mutex_unlock(&dd->mu);
}

bool
dlog_syslog_status(const struct dlog *d, struct dlog_syslog_stats *st)
{
	if (d == NULL || d->syslog == NULL)
		return false;
	dlog_syslog_stats(d->syslog, st);
	return true;
}

/* ---- writer thread ---- */

/* Complete every record of q with err (mu held). */
static void
complete_locked(struct dlog *d, struct dlog_q *q, int err, bool on_loop)
{
	struct dlog_ticket *t;
	bool notify = false, was_empty = TAILQ_EMPTY(&d->done);

	while ((t = TAILQ_FIRST(q)) != NULL) {
		TAILQ_REMOVE(q, t, link);
		t->err = err;
		if (err)
			d->nfailed++;
		else
			d->written++;
		if (t->is_sync) {
			t->done = true;
			if (t->abandoned) {
				d->inflight--;
				rec_free(t);
			}
			continue;
		}
		if (t->no_cb || (err == 0 && t->err_only)) {
			/* nobody waits for it (a deny or close record): done here, no eventfd
			 * round trip to the loop thread */
			d->inflight--;
			rec_free(t);
			continue;
		}
		TAILQ_INSERT_TAIL(&d->done, t, link);
		notify = true;
	}
	pthread_cond_broadcast(&d->cv_sync);
	/* The loop drains the whole done queue per wake-up: a non-empty queue means a
	 * wake-up is already on its way. */
	if (notify && on_loop) {
		/* written by the loop thread itself: run the callbacks from the loop, later
		 * (never from inside dlog_append), without a system call */
		event_active(d->ev_done, EV_TIMEOUT, 0);
	} else if (notify && was_empty) {
		uint64_t one = 1;

		while (write(d->efd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
	}
}

static char *
put_mem(char *p, const char *m, size_t n)
{
	memcpy(p, m, n);
	return p + n;
}

#define PUT_LIT(p, lit) put_mem((p), (lit), sizeof(lit) - 1)

static char *
put_u64(char *p, uint64_t v)
{
	return p + u64_to_dec(p, v);
}

/*
 * Format the group with consecutive seqs and chained hashes into one buffer (d->gbuf, or
 * one of its own for a group larger than DLOG_GBUF_KEEP: group_write frees that).
 * Returns the buffer or NULL on ENOMEM (or a hash failure); seq_out and hash_out get the
 * chain state after the group. The line is put together by hand (no printf): the bytes
 * are the format of dlog.h / docs/decision-log.md.
 */
static char *
group_format(struct dlog *d, struct dlog_q *q, size_t *lenp, uint64_t *seq_out,
    char *hash_out)
{
	struct dlog_ticket *t;
	size_t cap = 0;
	uint64_t seq = d->last_seq;
	char prev[DLOG_HASH_HEX + 1], hash[DLOG_HASH_HEX + 1];
	char *buf, *p;

	TAILQ_FOREACH(t, q, link)
		cap += rec_estimate(t);
	if (cap <= d->gcap) {
		buf = d->gbuf;
	} else if (cap <= DLOG_GBUF_KEEP) {
		buf = malloc(DLOG_GBUF_KEEP);
		if (buf == NULL)
			return NULL;
		free(d->gbuf);
		d->gbuf = buf;
		d->gcap = DLOG_GBUF_KEEP;
	} else {
		buf = malloc(cap);
		if (buf == NULL)
			return NULL;
	}
	memcpy(prev, d->last_hash, sizeof(prev));
	p = buf;
	TAILQ_FOREACH(t, q, link) {
		char *body = p;

		/* at most rec_estimate(t) bytes: DLOG_FIXED_LEN counts every fixed byte, the
		 * time and a 20-digit seq; + event, ',' + fields, '\n' */
		seq++;
		p = PUT_LIT(p, "{\"v\":");
		p = put_u64(p, DLOG_SCHEMA_VERSION);
		p = PUT_LIT(p, ",\"time\":\"");
		p = put_mem(p, t->time, DLOG_TIME_LEN);
		p = PUT_LIT(p, "\",\"seq\":");
		p = put_u64(p, seq);
		p = PUT_LIT(p, ",\"event\":\"");
		p = put_mem(p, t->event, t->event_len);
		*p++ = '"';
		if (t->fields_len > 0) {
			*p++ = ',';
			p = put_mem(p, t->fields, t->fields_len);
		}
		p = PUT_LIT(p, ",\"prev\":\"");
		p = put_mem(p, prev, DLOG_HASH_HEX);
		*p++ = '"';
		*p++ = '}';
		if (dlog_hasher_body(d->hasher, prev, body, (size_t)(p - body), hash) != 0) {
			if (buf != d->gbuf)
				free(buf);
			return NULL;
		}
		/* replace the final '}' with ,"hash":"<hex>"}\n */
		p--;
		p = PUT_LIT(p, ",\"hash\":\"");
		p = put_mem(p, hash, DLOG_HASH_HEX);
		p = PUT_LIT(p, "\"}\n");
		memcpy(prev, hash, sizeof(prev));
	}
	*lenp = (size_t)(p - buf);
	*seq_out = seq;
	memcpy(hash_out, prev, DLOG_HASH_HEX + 1);
	return buf;
}

/*
 * Write the group (writer thread, without mu); returns 0 or errno and, on success, the
 * chain state after the group in *seq/hash. Never leaves a partial record behind.
 */
static int
group_write(struct dlog *d, struct dlog_q *q, uint64_t *seq, char *hash, bool *synced)
{
	size_t len = 0, off = 0;
	off_t good = 0;
	uint64_t t0;
	char *buf;
	int e = 0;

	*synced = false;
	buf = group_format(d, q, &len, seq, hash);
	t0 = mono_usec();
	if (buf == NULL)
		return ENOMEM;
	/* Not write_all: a failure must know how much reached the file, to cut it off. */
	while (off < len) {
		ssize_t w = write(d->fd, buf + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			e = w < 0 ? errno : EIO;
			break;
		}
		off += (size_t)w;
	}
	d->last_write_us = mono_usec() - t0;
	if (e == 0 && d->sync == DLOG_SYNC_ALWAYS && d->regular) {
		dir_sync_due(d);
		if (fdatasync(d->fd) != 0)
			e = errno;
		else
			*synced = true;
	} else if (e == 0 && d->sync == DLOG_SYNC_BATCH && d->regular && !d->unsynced) {
		/* batch: acknowledged after write(2); the writer syncs within batch_ms */
		d->unsynced = true;
		d->unsynced_since_ms = mono_msec();
	}
	if (e == 0) {
		__atomic_add_fetch(&d->groups, 1, __ATOMIC_RELAXED);  /* either thread, mu or not */
		d->size += (off_t)len;
		/* the mirror follows the file (best effort, never blocks) */
		if (d->syslog != NULL)
			dlog_syslog_send_lines(d->syslog, buf, len);
	}
	if (e != 0) {
		/* Undo whatever reached the file so the chain stays continuous. After a failed
		 * fdatasync the bytes' fate is unknown: truncate them too. If truncation
		 * fails, the file is reopened and its tail re-read before the next write. */
		if (d->regular && off > 0) {
			/* Back to the end of the last complete record: the file is O_APPEND and
			 * locked against other writers, so that is its end less what this group
			 * wrote (found only on this path: no lseek per group). */
			off_t end = lseek(d->fd, 0, SEEK_END);

			good = end >= (off_t)off ? end - (off_t)off : d->size;
		}
		if (d->regular && off > 0 && ftruncate(d->fd, good) != 0)
			log_warn("decision log %s: cannot truncate a failed write", d->path);
		goto out;
	}
out:
	if (buf != d->gbuf)
		free(buf);
	return e;
}

/* Upper bound of a record's line length (as group_format allocates it). */
static uint64_t
rec_estimate(const struct dlog_ticket *t)
{
	return DLOG_FIXED_LEN + t->event_len + t->fields_len + 4;
}

/* Would writing q take the current file past max_bytes? (an upper bound of the group's
 * size, as group_format allocates it). A file holding nothing never rotates, so one
 * record larger than the limit is still written. */
static bool
rotation_due(const struct dlog *d, const struct dlog_q *q)
{
	const struct dlog_ticket *t;
	uint64_t add = 0;

	if (d->max_bytes == 0 || !d->regular || d->size <= 0)
		return false;
	TAILQ_FOREACH(t, q, link)
		add += rec_estimate(t);
	return (uint64_t)d->size + add > d->max_bytes;
}

/* Bytes the next group may take so that it lands in one file: what is left below
 * max_bytes, or all of max_bytes when even one more record does not fit (the group then
 * starts a new file), less room for the rotate record that begins it. Unlimited without
 * max_bytes. Writer thread. */
static uint64_t
group_room(const struct dlog *d)
{
	const uint64_t rotate_rec = DLOG_FIXED_LEN + 6 + EGRESS_PATH_MAX + 96;
	const struct dlog_ticket *first = TAILQ_FIRST(&d->pending);
	uint64_t size = d->size > 0 ? (uint64_t)d->size : 0;

	if (d->max_bytes == 0 || !d->regular)
		return UINT64_MAX;
	if (first != NULL && size > 0 && size + rec_estimate(first) > d->max_bytes)
		size = 0;   /* this group will rotate first */
	if (size == 0)
		return d->max_bytes > rotate_rec ? d->max_bytes - rotate_rec : 0;
	return d->max_bytes > size ? d->max_bytes - size : 0;
}

/*
 * Size rotation (writer thread, without mu): rename the file to "<path>.<last seq>" with
 * RENAME_NOREPLACE (a rotated file is evidence: never replace one; renameat2 is also what
 * egressd's seccomp list allows), falling back to link + unlink where the filesystem
 * lacks it; then reopen: the new file is empty, so the chain continues there. On failure
 * the current file is kept and grows past the limit (with a warning): records are never
 * dropped for the sake of rotation.
 */
static void
rotate_by_size(struct dlog *d)
{
	char to[EGRESS_PATH_MAX];
	int n = snprintf(to, sizeof(to), "%s.%012llu", d->path,
	    (unsigned long long)d->last_seq);

	if (n < 0 || (size_t)n >= sizeof(to)) {
		log_warnx("decision log %s: rotated name too long; not rotating", d->path);
		return;
	}
	if (renameat2(AT_FDCWD, d->path, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		goto renamed;
	if ((errno != EINVAL && errno != ENOSYS) || link(d->path, to) != 0) {
		log_warn("decision log %s: cannot rotate to %s; continuing in the same file",
		    d->path, to);
		return;
	}
	if (unlink(d->path) != 0) {
		log_warn("decision log %s: rotated to %s but cannot remove the old name",
		    d->path, to);
		(void)unlink(to);
		return;
	}
renamed:
	if (d->sync != DLOG_SYNC_NONE)
		dir_sync(d->path);
	snprintf(d->rotate_prev, sizeof(d->rotate_prev), "%s", to);
	d->rotate_cause = "max_bytes";
	log_info("decision log %s: rotated to %s at seq %llu", d->path, to,
	    (unsigned long long)d->last_seq);
	(void)file_open(d);   /* failure: the failed state, probed as usual */
}

/* Put a "rotate" record at the head of q (writer thread, without mu). Its time is the
 * first queued record's, so the file stays in time order. Owned like an abandoned sync
 * record: complete_locked frees it. */
static void
rotate_record(struct dlog *d, struct dlog_q *q)
{
	struct dlog_ticket *t, *first = TAILQ_FIRST(q);
	json_t *f = json_object(), *name;

	if (f == NULL || first == NULL) {
		json_decref(f);
		return;
	}
	name = d->rotate_prev[0] != '\0' ? dlog_text(d->rotate_prev) : NULL;
	json_object_set_new(f, "previous_file", name != NULL ? name : json_null());
	json_object_set_new(f, "previous_seq", json_integer((json_int_t)d->last_seq));
	json_object_set_new(f, "cause", json_string(d->rotate_cause != NULL ?
	    d->rotate_cause : "reopen"));
	t = rec_new("rotate", f);
	if (t == NULL) {
		log_warnx("decision log %s: cannot build the rotate record", d->path);
		return;
	}
	memcpy(t->time, first->time, sizeof(t->time));
	t->is_sync = true;
	t->abandoned = true;
	pthread_mutex_lock(&d->mu);
	d->inflight++;
	pthread_mutex_unlock(&d->mu);
	TAILQ_INSERT_HEAD(q, t, link);
}

/* batch: fdatasync what was acknowledged since the last sync (writer thread, without
 * mu). A failure is reported through flush_err: the caller puts the log in the failed
 * state, so no further hop is allowed while its record's durability is in doubt. */
static void
flush_unsynced(struct dlog *d)
{
	if (!d->unsynced)
		return;
	d->unsynced = false;
	if (d->fd >= 0 && d->regular)
		dir_sync_due(d);
	if (d->fd >= 0 && d->regular && fdatasync(d->fd) != 0)
		d->flush_err = errno;
}

/* batch: the same with mu held on entry and exit, released for the fdatasync. The file
 * stays the writer's (only the writer closes it), but the loop thread may write inline
 * meanwhile: its records set unsynced again and get the next sync. */
static void
sync_locked(struct dlog *d)
{
	int fd = d->fd, r = 0, e = 0;

	if (!d->unsynced)
		return;
	d->unsynced = false;
	if (fd < 0 || !d->regular)
		return;
	d->syncing = true;
	pthread_mutex_unlock(&d->mu);
	dir_sync_due(d);
	if ((r = fdatasync(fd)) != 0)
		e = errno;
	pthread_mutex_lock(&d->mu);
	d->syncing = false;
	if (r != 0)
		set_failed(d, e, "cannot sync decision log");
	else
		d->syncs++;
}

static void *
writer_main(void *arg)
{
	struct dlog *d = arg;
	bool last_try = false;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		struct dlog_q q = TAILQ_HEAD_INITIALIZER(q);
		struct dlog_ticket *t;
		uint64_t room;
		size_t n = 0;
		int e;

		while (TAILQ_EMPTY(&d->pending) && !d->stop && !d->reopen_req && !d->fd_dead) {
			uint64_t now, due;
			struct timespec abs;

			now = mono_msec();
			if (!d->unsynced && now >= d->linger_until_ms) {
				d->writer_idle = true;
				pthread_cond_wait(&d->cv_work, &d->mu);
				d->writer_idle = false;
				continue;
			}
			if (!d->unsynced) {
				/* Records flowed lately (batch): look again within batch_ms
				 * instead of being woken for the next first unsynced record.
				 * Under a steady stream that takes a futex wake-up (and the
				 * preemption that follows it) off the loop once per window;
				 * the sync still comes at most batch_ms after that record,
				 * as the wait below sees it within batch_ms and waits for
				 * its due time. */
				due = now + d->batch_ms;
				d->writer_polls = true;
			} else {
				/* batch: wait for more records, but sync no later than
				 * batch_ms after the first unsynced one */
				due = d->unsynced_since_ms + d->batch_ms;
				if (now >= due) {
					sync_locked(d);
					d->linger_until_ms = mono_msec() + DLOG_LINGER_MS;
					continue;
				}
			}
			clock_gettime(CLOCK_MONOTONIC, &abs);
			abs.tv_nsec += (long)((due - now) * 1000000ULL);
			abs.tv_sec += abs.tv_nsec / 1000000000L;
			abs.tv_nsec %= 1000000000L;
			d->writer_idle = true;
			d->writer_looks = true;
			(void)pthread_cond_timedwait(&d->cv_work, &d->mu, &abs);
			d->writer_idle = false;
			d->writer_looks = false;
			d->writer_polls = false;
		}
		if (d->fd_dead) {
			/* an inline write failed (the failed state is set): close the file here,
			 * the next group (the probe) reopens it */
			d->fd_dead = false;
			if (d->fd >= 0) {
				close(d->fd);
				d->fd = -1;
			}
		}
		if (d->reopen_req) {
			d->reopen_req = false;
			d->writer_busy = true;
			pthread_mutex_unlock(&d->mu);
			flush_unsynced(d);    /* the old file's records are synced before it is left */
			(void)file_open(d);
			pthread_mutex_lock(&d->mu);
			d->writer_busy = false;
		}
		if (TAILQ_EMPTY(&d->pending)) {
			if (d->stop && !TAILQ_EMPTY(&d->kept) && !last_try) {
				/* Stopping with records still held (close records of hops allowed
				 * before the failure): one last attempt, whatever the retry interval
				 * says; what fails again is reported by dlog_close. */
				last_try = true;
				held_to_pending_locked(d);
				continue;
			}
			if (d->stop)
				break;
			continue;
		}
		room = group_room(d);
		while ((t = TAILQ_FIRST(&d->pending)) != NULL && n < DLOG_GROUP_MAX) {
			uint64_t need = rec_estimate(t);

			/* with log_max_bytes a group must fit in one file (the first record
			 * always goes: one record larger than the limit is still written) */
			if (n > 0 && need > room)
				break;
			room = room > need ? room - need : 0;
			TAILQ_REMOVE(&d->pending, t, link);
			TAILQ_INSERT_TAIL(&q, t, link);
			n++;
		}
		/* Recover first when failed (this group is the probe). File I/O runs without
		 * the mutex, so a slow disk never stalls the loop thread's enqueue. */
		d->writer_busy = true;
		pthread_mutex_unlock(&d->mu);
		if (d->fd >= 0 && rotation_due(d, &q)) {
			flush_unsynced(d);
			rotate_by_size(d);
		}
		if (d->fd < 0 && (e = file_open(d)) != 0) {
			pthread_mutex_lock(&d->mu);
		} else {
			if (d->rotate_pending)
				rotate_record(d, &q);
			uint64_t seq = 0;
			char hash[DLOG_HASH_HEX + 1];
			bool synced = false;

			e = group_write(d, &q, &seq, hash, &synced);
			pthread_mutex_lock(&d->mu);
			if (synced)
				d->syncs++;
			if (e == 0) {
				d->last_seq = seq;
				memcpy(d->last_hash, hash, sizeof(d->last_hash));
				if (__atomic_load_n(&d->failed, __ATOMIC_ACQUIRE)) {
					/* the probe is on disk: only now is the log writable again */
					log_info("decision log %s writable again (seq %llu)", d->path,
					    (unsigned long long)seq);
					__atomic_store_n(&d->failed, false, __ATOMIC_RELEASE);
					d->error[0] = '\0';
				}
				/* the rotate record (if any) is on disk now */
				d->rotate_pending = false;
				d->rotate_cause = NULL;
				d->rotate_prev[0] = '\0';
				(void)syslog_loss_queue_locked(d);
			} else {
				set_failed(d, e, "cannot write decision log");
				close(d->fd);
				d->fd = -1;
			}
		}
		if (e != 0) {
			/* Fail everything queued behind the failure too: fail closed now. The
			 * failed write left nothing on disk: records to keep wait for the
			 * recovery instead (bounded). */
			struct dlog_ticket *nx;

			TAILQ_CONCAT(&q, &d->pending, link);
			for (t = TAILQ_FIRST(&q); t != NULL; t = nx) {
				nx = TAILQ_NEXT(t, link);
				if (t->keep && !t->is_sync && d->nkept < EGRESS_LOG_KEPT_MAX) {
					TAILQ_REMOVE(&q, t, link);
					TAILQ_INSERT_TAIL(&d->kept, t, link);
					d->nkept++;
				}
			}
		} else if (!TAILQ_EMPTY(&d->kept)) {
			/* the log works again: the kept records go next, stamped now */
			held_to_pending_locked(d);
		}
		if (d->flush_err != 0) {
			set_failed(d, d->flush_err, "cannot sync decision log");
			d->flush_err = 0;
		}
		d->writer_busy = false;
		complete_locked(d, &q, e, false);
		/* batch: a steady stream never postpones the sync. It runs after the group is
		 * acknowledged (batch completes a record after write(2)), so the records of this
		 * group and their 200s do not wait behind the fdatasync. */
		if (d->unsynced && mono_msec() - d->unsynced_since_ms >= d->batch_ms) {
			sync_locked(d);
			d->linger_until_ms = mono_msec() + DLOG_LINGER_MS;
		}
	}
	pthread_mutex_unlock(&d->mu);
	flush_unsynced(d);            /* stopping: nothing acknowledged stays unsynced */
	return NULL;
}
