/*
 * grantstate.c - the static-grant journal (revocations, first issue). Contract:
 * grantstate.h.
 */
#include "egressd/grantstate.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

struct grantstate {
	char *gs_path;
	int gs_fd;
	struct grantstate_entry *gs_v;
	size_t gs_n, gs_cap;
};

static bool
id_valid(const char *s)
{
	return strlen(s) == EGRESS_GRANT_ID_BYTES * 2 &&
	    hex_lower_is(s, EGRESS_GRANT_ID_BYTES * 2);
}

static struct grantstate_entry *
find(const struct grantstate *gs, const char *id)
{
	for (size_t i = 0; i < gs->gs_n; i++)
		if (strcmp(gs->gs_v[i].id, id) == 0)
			return &gs->gs_v[i];
	return NULL;
}

/* Room for want entries in all (at most EGRESS_GRANT_STATE_ENTRIES_MAX): 0, or -1 when
 * it cannot be allocated. */
static int
grow(struct grantstate *gs, size_t want)
{
	size_t nc = gs->gs_cap ? gs->gs_cap : 16;
	struct grantstate_entry *nv;

	if (want > EGRESS_GRANT_STATE_ENTRIES_MAX)
		want = EGRESS_GRANT_STATE_ENTRIES_MAX;
	if (want <= gs->gs_cap)
		return 0;
	while (nc < want)
		nc *= 2;
	if ((nv = realloc(gs->gs_v, nc * sizeof(*nv))) == NULL)
		return -1;
	gs->gs_v = nv;
	gs->gs_cap = nc;
	return 0;
}

/* The entry for id, created when missing; NULL with a sentence in *why when the table is
 * full or cannot grow (out of memory: the caller refuses its operation, egressd lives). */
static struct grantstate_entry *
find_or_add(struct grantstate *gs, const char *id, const char *principal, const char **why)
{
	struct grantstate_entry *e = find(gs, id);

	if (e != NULL)
		return e;
	if (gs->gs_n >= EGRESS_GRANT_STATE_ENTRIES_MAX) {
		*why = "more grants than EGRESS_GRANT_STATE_ENTRIES_MAX";
		return NULL;
	}
	if (grow(gs, gs->gs_n + 1) != 0) {
		*why = "out of memory";
		return NULL;
	}
	e = &gs->gs_v[gs->gs_n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->id, sizeof(e->id), "%s", id);
	snprintf(e->principal, sizeof(e->principal), "%s", principal != NULL ? principal : "");
	return e;
}

int
grantstate_reserve(struct grantstate *gs, size_t more, char *err, size_t errlen)
{
	if (more > EGRESS_GRANT_STATE_ENTRIES_MAX)
		more = EGRESS_GRANT_STATE_ENTRIES_MAX;
	if (grow(gs, gs->gs_n + more) != 0)
		return errbuf_set(err, errlen, 0, "%s: out of memory", gs->gs_path);
	return 0;
}

/* Apply one journal line; -1 with a sentence in *why. */
static int
replay(struct grantstate *gs, const char *line, size_t len, const char **why)
{
	json_error_t je;
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	const char *op = NULL, *id = NULL, *principal = NULL;
	json_int_t v = 0, t = 0;
	struct grantstate_entry *e;
	int rc = -1;

	*why = "not a JSON object";
	if (o == NULL || !json_is_object(o))
		goto out;
	*why = "expected {\"v\":1,\"op\":...,\"grant_id\":...,\"principal\":...,\"time\":...}";
	if (json_unpack(o, "{s:I,s:s,s:s,s:s,s:I!}", "v", &v, "op", &op, "grant_id", &id,
	    "principal", &principal, "time", &t) != 0 || v != 1 || t <= 0)
		goto out;
	*why = "grant_id is not 32 lowercase hex digits";
	if (!id_valid(id))
		goto out;
	if ((e = find_or_add(gs, id, principal, why)) == NULL)
		goto out;
	*why = "unknown op (issue, revoke, unrevoke)";
	if (strcmp(op, "issue") == 0) {
		if (e->issued == 0)
			e->issued = (time_t)t;
	} else if (strcmp(op, "revoke") == 0) {
		e->revoked = (time_t)t;
	} else if (strcmp(op, "unrevoke") == 0) {
		e->revoked = 0;
	} else {
		goto out;
	}
	rc = 0;
out:
	json_decref(o);
	return rc;
}

/* Ownership and type of an open state file. */
static int
check_fd(int fd, const char *path, uid_t owner, struct stat *st, char *err, size_t errlen)
{
	if (fstat(fd, st) != 0) {
		snprintf(err, errlen, "%s: fstat: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		return -1;
	}
	if (st->st_uid != owner || (st->st_mode & 022) != 0) {
		snprintf(err, errlen, "%s: must belong to uid %u and not be writable by group or "
		    "others (it is uid %u, mode %04o): chown %u %s; chmod 600 %s", path,
		    (unsigned)owner, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777),
		    (unsigned)owner, path, path);
		return -1;
	}
	if (st->st_size > EGRESS_GRANT_STATE_MAX) {
		snprintf(err, errlen, "%s: larger than %d bytes", path, EGRESS_GRANT_STATE_MAX);
		return -1;
	}
	return 0;
}

/*
 * Read and replay fd. *torn is set to the offset of an unterminated last line (or -1).
 */
static int
load(struct grantstate *gs, int fd, const char *path, off_t size, off_t *torn, char *err,
    size_t errlen)
{
	_cleanup_free_ char *buf = NULL;
	size_t got = 0, start = 0;
	unsigned lineno = 0;

	*torn = -1;
	if (size == 0)
		return 0;
	buf = malloc((size_t)size);
	if (buf == NULL)
		return errbuf_set(err, errlen, 0, "%s: out of memory reading it", path);
	while (got < (size_t)size) {
		ssize_t k = pread(fd, buf + got, (size_t)size - got, (off_t)got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			snprintf(err, errlen, "%s: read: %s", path, k < 0 ? strerror(errno) :
			    "file shrank while reading");
			return -1;
		}
		got += (size_t)k;
	}
	while (start < got) {
		const char *nl = memchr(buf + start, '\n', got - start);
		const char *why;

		lineno++;
		if (nl == NULL) {
			*torn = (off_t)start;
			break;
		}
		if (replay(gs, buf + start, (size_t)(nl - (buf + start)), &why) != 0) {
			snprintf(err, errlen, "%s:%u: %s (egressd will not start on a state it "
			    "cannot read: it could forget a revocation; repair or move the file)",
			    path, lineno, why);
			return -1;
		}
		start = (size_t)(nl - buf) + 1;
	}
	return 0;
}

struct grantstate *
grantstate_open(const char *path, uid_t owner, char *err, size_t errlen)
{
	struct grantstate *gs;
	struct stat st;
	off_t torn;
	int fd;

	fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s%s", path, strerror(errno), errno == ELOOP ?
		    " (a symbolic link: refused)" : errno == ENOENT ?
		    " (create its directory, root-owned, mode 0700)" : "");
		return NULL;
	}
	if (check_fd(fd, path, owner, &st, err, errlen) != 0) {
		close(fd);
		return NULL;
	}
	gs = calloc(1, sizeof(*gs));
	if (gs == NULL || (gs->gs_path = strdup(path)) == NULL) {
		free(gs);
		close(fd);
		errbuf_set(err, errlen, 0, "%s: out of memory", path);
		return NULL;
	}
	gs->gs_fd = fd;
	if (load(gs, fd, path, st.st_size, &torn, err, errlen) != 0) {
		grantstate_free(gs);
		return NULL;
	}
	if (torn >= 0) {
		/* The append that made it never finished, so egressd never acknowledged it. */
		log_warnx("%s: last record incomplete (a write cut short): removed", path);
		if (ftruncate(fd, torn) != 0) {
			snprintf(err, errlen, "%s: cannot cut off an incomplete last record: %s", path,
			    strerror(errno));
			grantstate_free(gs);
			return NULL;
		}
	}
	return gs;
}

int
grantstate_check(const char *path, uid_t owner, char *err, size_t errlen)
{
	struct grantstate gs = { 0 };
	struct stat st;
	off_t torn;
	int fd, rc;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	rc = check_fd(fd, path, owner, &st, err, errlen);
	if (rc == 0)
		rc = load(&gs, fd, path, st.st_size, &torn, err, errlen);
	close(fd);
	free(gs.gs_v);
	return rc;
}

void
grantstate_free(struct grantstate *gs)
{
	if (gs == NULL)
		return;
	if (gs->gs_fd >= 0)
		close(gs->gs_fd);
	free(gs->gs_path);
	free(gs->gs_v);
	free(gs);
}

const struct grantstate_entry *
grantstate_get(const struct grantstate *gs, const char *id)
{
	return find(gs, id);
}

/* Append one record and make it durable. 0, or -1 with err. */
static int
append(struct grantstate *gs, const char *op, const char *id, const char *principal,
    time_t now, char *err, size_t errlen)
{
	json_t *o = json_pack("{s:i,s:s,s:s,s:s,s:I}", "v", 1, "op", op, "grant_id", id,
	    "principal", principal, "time", (json_int_t)now);
	char *s = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	size_t len;
	struct stat st;
	int rc = -1;

	json_decref(o);
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	len = strlen(s);
	s[len++] = '\n';                /* json_dumps leaves room: it wrote a NUL there */
	if (fstat(gs->gs_fd, &st) == 0 && st.st_size + (off_t)len > EGRESS_GRANT_STATE_MAX) {
		snprintf(err, errlen, "%s: full (%d bytes)", gs->gs_path, EGRESS_GRANT_STATE_MAX);
		goto out;
	}
	if (write_all(gs->gs_fd, s, len) != 0) {
		errbuf_set(err, errlen, errno, "%s: write", gs->gs_path);
		goto out;
	}
	if (fdatasync(gs->gs_fd) != 0) {
		snprintf(err, errlen, "%s: fdatasync: %s", gs->gs_path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(s);
	return rc;
}

time_t
grantstate_issued(struct grantstate *gs, const char *id, const char *principal, time_t now,
    bool *persisted)
{
	const char *why;
	struct grantstate_entry *e = find_or_add(gs, id, principal, &why);
	char err[256];

	*persisted = true;
	if (e == NULL) {
		log_warnx("static grant %s (principal %s): first issue not recorded: %s", id,
		    principal, why);
		*persisted = false;
		return now;
	}
	if (e->issued != 0)
		return e->issued;
	e->issued = now;
	if (append(gs, "issue", id, principal, now, err, sizeof(err)) != 0) {
		log_warnx("static grant %s (principal %s): first issue not saved: %s", id,
		    principal, err);
		*persisted = false;
	}
	return now;
}

int
grantstate_revoke(struct grantstate *gs, const char *id, const char *principal, time_t now,
    char *err, size_t errlen)
{
	const char *why;
	struct grantstate_entry *e = find_or_add(gs, id, principal, &why);

	if (e == NULL)
		return errbuf_set(err, errlen, 0, "%s: %s: the revocation lasts only until the "
		    "next reload", gs->gs_path, why);
	e->revoked = now;
	if (append(gs, "revoke", id, principal, now, err, errlen) != 0) {
		size_t n = strlen(err);
		snprintf(err + n, errlen > n ? errlen - n : 0, ": the revocation holds across "
		    "reloads, not across a restart");
		return -1;
	}
	return 0;
}

int
grantstate_unrevoke(struct grantstate *gs, const char *id, time_t now, char *err,
    size_t errlen)
{
	struct grantstate_entry *e = find(gs, id);

	if (e == NULL || e->revoked == 0)
		return 0;
	e->revoked = 0;
	return append(gs, "unrevoke", id, e->principal, now, err, errlen) == 0 ? 1 : -1;
}

size_t
grantstate_count(const struct grantstate *gs)
{
	return gs->gs_n;
}

const struct grantstate_entry *
grantstate_at(const struct grantstate *gs, size_t i)
{
	return i < gs->gs_n ? &gs->gs_v[i] : NULL;
}

const char *
grantstate_path(const struct grantstate *gs)
{
	return gs->gs_path;
}
