/*
 * artifacts - atomic, hashed, bounded output files (see executor/artifacts.h).
 */
#define _GNU_SOURCE
#include "executor/artifacts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/cryptolib.h"   /* after OpenSSL's headers: calls through the table */

#include "common/limits.h"
#include "common/util.h"
#include "executor/changes.h"

static int
sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
		return -1;
	hex_encode(md, 32, out);
	return 0;
}

int
artifact_sha256_file(const char *path, char out[65], uint64_t *size)
{
	EVP_MD_CTX *ctx = NULL;
	unsigned char md[EVP_MAX_MD_SIZE], buf[65536];
	unsigned int mdlen = 0;
	uint64_t total = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int rc = -1;

	if (fd < 0)
		return -1;
	ctx = EVP_MD_CTX_new();
	if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		goto out;
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto out;
		if (r == 0)
			break;
		if (EVP_DigestUpdate(ctx, buf, (size_t)r) != 1)
			goto out;
		total += (uint64_t)r;
	}
	if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != 32)
		goto out;
	hex_encode(md, 32, out);
	*size = total;
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	close(fd);
	return rc;
}

int
artifact_write(const char *out_dir, const char *name, const void *data, size_t len,
    struct artifact *a, char *err, size_t errlen)
{
	char tmp[EGRESS_PATH_MAX], final[EGRESS_PATH_MAX];
	const char *p = data;
	int fd;

	memset(a, 0, sizeof(*a));
	if (strlen(name) >= sizeof(a->name) || strchr(name, '/') != NULL) {
		snprintf(err, errlen, "artifact name '%s' invalid", name);
		return -1;
	}
	if (snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", out_dir, name) >= (int)sizeof(tmp) ||
	    snprintf(final, sizeof(final), "%s/%s", out_dir, name) >= (int)sizeof(final)) {
		snprintf(err, errlen, "output folder path too long");
		return -1;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "create %s: %s", tmp, strerror(errno));
		return -1;
	}
	if (write_all(fd, p, len) != 0) {
		snprintf(err, errlen, "write %s: %s", tmp, strerror(errno));
		goto fail;
	}
	/* Readable by the person who asked for the run; the folder's mode decides who else. */
	if (fchmod(fd, 0644) != 0 || fsync(fd) != 0) {
		snprintf(err, errlen, "sync %s: %s", tmp, strerror(errno));
		goto fail;
	}
	if (close(fd) != 0) {
		fd = -1;
		snprintf(err, errlen, "close %s: %s", tmp, strerror(errno));
		goto fail;
	}
	fd = -1;
	if (rename(tmp, final) != 0) {
		snprintf(err, errlen, "rename to %s: %s", final, strerror(errno));
		goto fail;
	}
	snprintf(a->name, sizeof(a->name), "%s", name);
	a->size = len;
	if (sha256_hex(data, len, a->sha256) != 0) {
		snprintf(err, errlen, "sha256 failed");
		return -1;
	}
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return -1;
}

/* A growing buffer that refuses to pass its maximum. */
struct bbuf {
	char *p;
	size_t len, cap;
	uint64_t max;
	uint64_t wanted;        /* bytes offered in total (may exceed max) */
	bool over;
	bool oom;
	bool nodata;            /* a binary change libgit2 printed without its data */
};

static int
bbuf_add(struct bbuf *b, const void *d, size_t n)
{
	b->wanted += n;
	if (b->wanted > b->max) {
		b->over = true;
		return -1;
	}
	if (b->len + n > b->cap) {
		size_t ncap = b->cap ? b->cap : 4096;
		while (ncap < b->len + n)
			ncap *= 2;
		char *np = realloc(b->p, ncap);
		if (np == NULL) {
			b->oom = true;
			return -1;
		}
		b->p = np;
		b->cap = ncap;
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
	return 0;
}

/* An empty file created or deleted: git's header has no "---"/"+++" lines (there is no
 * hunk); libgit2 writes them. Both apply; we write what git writes. */
static bool
hdr_without_names(const git_diff_delta *d)
{
	git_oid empty;

	if (git_oid_fromstr(&empty, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391") != 0)
		return false;
	if ((d->status == GIT_DELTA_ADDED || d->status == GIT_DELTA_UNTRACKED) &&
	    (d->new_file.flags & GIT_DIFF_FLAG_VALID_ID) != 0 &&
	    git_oid_equal(&d->new_file.id, &empty))
		return true;
	return d->status == GIT_DELTA_DELETED &&
	    (d->old_file.flags & GIT_DIFF_FLAG_VALID_ID) != 0 &&
	    git_oid_equal(&d->old_file.id, &empty);
}

/* The file header without its "--- " and "+++ " lines. */
static int
bbuf_add_hdr(struct bbuf *b, const char *p, size_t n)
{
	while (n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t l = nl ? (size_t)(nl - p) + 1 : n;

		if (!(l >= 4 && (memcmp(p, "--- ", 4) == 0 || memcmp(p, "+++ ", 4) == 0)) &&
		    bbuf_add(b, p, l) != 0)
			return -1;
		p += l;
		n -= l;
	}
	return 0;
}

static int
diff_line_cb(const git_diff_delta *delta, const git_diff_hunk *hunk,
    const git_diff_line *line, void *payload)
{
	struct bbuf *b = payload;
	static const char nodata[] = "Binary files ";

	(void)hunk;
	if (line->origin == GIT_DIFF_LINE_BINARY && line->content_len >= sizeof(nodata) - 1 &&
	    memcmp(line->content, nodata, sizeof(nodata) - 1) == 0) {
		/* libgit2 says "Binary files a/x and b/x differ" for a binary file whose mode
		 * alone changed; git writes nothing there (the old/new mode lines say it all)
		 * and git apply refuses the line. Any other such line would be a binary change
		 * without its data: a patch that does not apply - refuse it. */
		if ((delta->old_file.flags & delta->new_file.flags & GIT_DIFF_FLAG_VALID_ID) != 0 &&
		    !git_oid_is_zero(&delta->old_file.id) &&
		    git_oid_equal(&delta->old_file.id, &delta->new_file.id))
			return 0;
		b->nodata = true;
		return GIT_EUSER;
	}
	if (line->origin == GIT_DIFF_LINE_FILE_HDR && hdr_without_names(delta))
		return bbuf_add_hdr(b, line->content, line->content_len) != 0 ? GIT_EUSER : 0;
	if (line->origin == GIT_DIFF_LINE_CONTEXT || line->origin == GIT_DIFF_LINE_ADDITION ||
	    line->origin == GIT_DIFF_LINE_DELETION) {
		char o = line->origin;
		if (bbuf_add(b, &o, 1) != 0)
			return GIT_EUSER;
	}
	if (bbuf_add(b, line->content, line->content_len) != 0)
		return GIT_EUSER;
	return 0;
}

/* A changed file the diff cannot carry whole: refused before libgit2 loads it. */
static const git_diff_delta *
diff_oversized(git_diff *diff, uint64_t max_bytes)
{
	size_t n = git_diff_num_deltas(diff);
	uint64_t cap = EGRESS_DIFF_FILE_MAX;

	/* A file more than EGRESS_DIFF_RATIO_MAX times the bound would need its patch
	 * compressed at least as well to fit; not worth reading it whole to find out. */
	if (max_bytes <= cap / EGRESS_DIFF_RATIO_MAX)
		cap = max_bytes * EGRESS_DIFF_RATIO_MAX;
	for (size_t i = 0; i < n; i++) {
		const git_diff_delta *d = git_diff_get_delta(diff, i);
		if ((uint64_t)d->new_file.size > cap || (uint64_t)d->old_file.size > cap)
			return d;
	}
	return NULL;
}

enum diff_outcome
artifacts_write_diff(const char *out_dir, const char *repo_dir, const char *merged_dir,
    uint64_t max_bytes, struct artifact *a, uint64_t *needed, char *err, size_t errlen)
{
	git_repository *repo = NULL;
	git_diff *diff = NULL;
	const git_diff_delta *big;
	struct bbuf b = { .max = max_bytes };
	enum diff_outcome rc = DIFF_ERROR;
	int grc;

	memset(a, 0, sizeof(*a));
	*needed = 0;
	if (changes_diff(repo_dir, merged_dir, CHANGES_DIFF_PATCH, &repo, &diff, err,
	    errlen) != 0)
		return DIFF_ERROR;
	if ((big = diff_oversized(diff, max_bytes)) != NULL) {
		char disp[256];
		uint64_t sz = (uint64_t)(big->new_file.size > big->old_file.size ?
		    big->new_file.size : big->old_file.size);
		changes_path_display(big->new_file.path ? big->new_file.path :
		    big->old_file.path, disp, sizeof(disp));
		*needed = sz > max_bytes ? sz : max_bytes + 1;
		snprintf(err, errlen, "%s is %llu bytes, more than a candidate of %llu bytes "
		    "carries (at most %d times diff_bytes, and %llu)", disp, (unsigned long long)sz,
		    (unsigned long long)max_bytes, EGRESS_DIFF_RATIO_MAX,
		    (unsigned long long)EGRESS_DIFF_FILE_MAX);
		rc = DIFF_TOO_LARGE;
		goto out;
	}
	grc = git_diff_print(diff, GIT_DIFF_FORMAT_PATCH, diff_line_cb, &b);
	if (b.over) {
		*needed = b.wanted;
		snprintf(err, errlen, "candidate diff exceeds %llu bytes",
		    (unsigned long long)max_bytes);
		rc = DIFF_TOO_LARGE;
		goto out;
	}
	if (b.oom || b.nodata || grc != 0) {
		const git_error *e = git_error_last();
		snprintf(err, errlen, "diff: %s", b.oom ? "out of memory" : b.nodata ?
		    "libgit2 gave a binary change without its data (the patch would not apply)" :
		    e && e->message ? e->message : "libgit2 error");
		goto out;
	}
	*needed = b.len;
	if (artifact_write(out_dir, "candidate.diff", b.p ? b.p : "", b.len, a, err,
	    errlen) != 0)
		goto out;
	rc = DIFF_WRITTEN;
out:
	free(b.p);
	git_diff_free(diff);
	git_repository_free(repo);
	return rc;
}

int
artifacts_write_log(const char *out_dir, const char *name, const char *data, size_t len,
    bool truncated, struct artifact *a, char *err, size_t errlen)
{
	char marker[128];
	size_t ml = 0, total;
	char *buf;
	int rc;

	if (truncated)
		ml = (size_t)snprintf(marker, sizeof(marker), ARTIFACT_TRUNC_MARKER,
		    (unsigned long long)len);
	if (ckd_add_sz(&total, len, ml) || (buf = malloc(total ? total : 1)) == NULL) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -1;
	}
	if (len)
		memcpy(buf, data, len);
	if (ml)
		memcpy(buf + len, marker, ml);
	rc = artifact_write(out_dir, name, buf, total, a, err, errlen);
	a->truncated = truncated;
	free(buf);
	return rc;
}

/* Where the chain is just before a line (the anchor of an extract): the seq and hash of
 * the last record read. */
struct chain_pos {
	uint64_t seq;
	char hash[65];
};

/* Does the line belong to this run? Also moves *pos to the line when it is a record
 * (integer seq, 64-character hash): the anchor is the record before the first match. */
static bool
record_matches(const char *line, size_t len, const char *principal, const char *grant_id,
    struct chain_pos *pos)
{
	json_error_t je;
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	const char *s;
	bool ok = false;

	if (o == NULL || !json_is_object(o)) {
		json_decref(o);
		return false;
	}
	{
		json_t *js = json_object_get(o, "seq");
		const char *h = json_string_value(json_object_get(o, "hash"));

		if (json_is_integer(js) && json_integer_value(js) >= 0 && h != NULL &&
		    strlen(h) == 64) {
			pos->seq = (uint64_t)json_integer_value(js);
			memcpy(pos->hash, h, 65);
		}
	}
	if (principal && principal[0] && (s = json_string_value(json_object_get(o,
	    "principal"))) != NULL && strcmp(s, principal) == 0)
		ok = true;
	if (grant_id && grant_id[0] && (s = json_string_value(json_object_get(o,
	    "grant_id"))) != NULL && strcmp(s, grant_id) == 0)
		ok = true;
	json_decref(o);
	return ok;
}

/* The extract's first line (docs/decision-log.md, "A run's extract"). */
static int
add_anchor(struct bbuf *b, const char *log, const struct chain_pos *pos, uint64_t through,
    const char *principal, const char *grant_id)
{
	json_t *a = json_object(), *o = json_object();
	char *s;
	int rc = -1;

	if (a == NULL || o == NULL) {
		json_decref(a);
		json_decref(o);
		b->oom = true;
		return -1;
	}
	json_object_set_new(a, "log", json_string(log));
	json_object_set_new(a, "seq", json_integer((json_int_t)pos->seq));
	json_object_set_new(a, "hash", json_string(pos->hash));
	json_object_set_new(a, "through_seq", json_integer((json_int_t)through));
	json_object_set_new(a, "principal", principal != NULL && principal[0] ?
	    json_string(principal) : json_null());
	json_object_set_new(a, "grant_id", grant_id != NULL && grant_id[0] ?
	    json_string(grant_id) : json_null());
	json_object_set_new(o, "egress_anchor", a);
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(o);
	if (s == NULL) {
		b->oom = true;
		return -1;
	}
	rc = bbuf_add(b, s, strlen(s)) == 0 && bbuf_add(b, "\n", 1) == 0 ? 0 : -1;
	free(s);
	return rc;
}

int
artifacts_write_decisions(const char *out_dir, const char *decisions_path,
    const char *principal, const char *grant_id, struct artifact *a, char *err,
    size_t errlen)
{
	struct bbuf b = { .max = EGRESS_DECISIONS_ARTIFACT_MAX };
	FILE *f;
	char *line = NULL;
	size_t n;
	bool cut = false, anchored = false;
	struct chain_pos pos = { 0, "" }, first = { 0, "" };
	uint64_t last_copied = 0;
	int rc;

	memset(pos.hash, '0', 64);
	pos.hash[64] = '\0';
	if (decisions_path == NULL || decisions_path[0] == '\0')
		return artifact_write(out_dir, "decisions.jsonl", "", 0, a, err, errlen);
	f = fopen(decisions_path, "re");
	if (f == NULL) {
		snprintf(err, errlen, "decision log %s: %s", decisions_path, strerror(errno));
		return -1;
	}
	line = malloc(EGRESS_LOG_RECORD_MAX + 1);
	if (line == NULL) {
		fclose(f);
		snprintf(err, errlen, "decisions: out of memory");
		return -1;
	}
	/* 1: a line, 2: a last line without newline, -1: longer than the log's own maximum
	 * (not one of ours: skipped), 0: end, -2: read error (ends the copy, as at EOF). */
	while ((rc = line_read(f, line, EGRESS_LOG_RECORD_MAX, &n)) != 0 && rc != -2) {
		if (rc < 0 || n == 0)
			continue;
		struct chain_pos before = pos;

		if (!record_matches(line, n, principal, grant_id, &pos))
			continue;
		if (!anchored) {
			anchored = true;
			first = before;
		}
		if (bbuf_add(&b, line, n) != 0 || bbuf_add(&b, "\n", 1) != 0) {
			cut = !b.oom;
			break;
		}
		last_copied = pos.seq;
	}
	free(line);
	fclose(f);
	/* The anchor goes first: the chain position before the run's first record, and how
	 * far the log was searched (every record of the run up to through_seq is here; with
	 * no record of the run, the anchor alone says so). A cut extract is complete only up
	 * to its last record. */
	if (!b.oom) {
		struct bbuf h = { .max = UINT64_MAX };

		if (add_anchor(&h, decisions_path, anchored ? &first : &pos,
		    cut ? last_copied : pos.seq, principal, grant_id) == 0 &&
		    bbuf_add(&h, b.p ? b.p : "", b.len) == 0) {
			free(b.p);
			b.p = h.p;
			b.len = h.len;
		} else {
			free(h.p);
			b.oom = true;
		}
	}
	if (b.oom) {
		free(b.p);
		snprintf(err, errlen, "decisions: out of memory");
		return -1;
	}
	if (cut) {
		static const char m[] = "{\"egress_exec\":\"truncated\",\"reason\":"
		    "\"decisions.jsonl reached its bound\"}\n";
		b.max = UINT64_MAX;
		if (bbuf_add(&b, m, sizeof(m) - 1) != 0) {
			free(b.p);
			snprintf(err, errlen, "decisions: out of memory");
			return -1;
		}
	}
	rc = artifact_write(out_dir, "decisions.jsonl", b.p ? b.p : "", b.len, a, err, errlen);
	a->truncated = cut;
	free(b.p);
	return rc;
}

json_t *
artifact_to_json(const struct artifact *a)
{
	json_t *o = json_pack("{s:s, s:I, s:s}", "name", a->name, "size", (json_int_t)a->size,
	    "sha256", a->sha256);

	if (o != NULL && a->truncated)
		json_object_set_new(o, "truncated", json_true());
	return o;
}

/* What egress-exec writes in an output folder (both modes); manifest.json first, so a
 * folder being prepared never shows a verdict beside the wrong files. */
static const char *const out_names[] = { "manifest.json", "result.json", "candidate.diff",
	"stdout.log", "stderr.log", "decisions.jsonl", "egressd.log" };

/* ".<artifact>.XXXXXX": artifact_write's temporary file, left by a killed run. */
static bool
out_is_temp(const char *name)
{
	size_t n = strlen(name);

	if (name[0] != '.' || n < 8 || name[n - 7] != '.')
		return false;
	for (size_t i = 0; i < EGRESS_NELEM(out_names); i++) {
		size_t l = strlen(out_names[i]);
		if (n == l + 8 && memcmp(name + 1, out_names[i], l) == 0)
			return true;
	}
	return false;
}

static bool
out_is_artifact(const char *name)
{
	for (size_t i = 0; i < EGRESS_NELEM(out_names); i++)
		if (strcmp(name, out_names[i]) == 0)
			return true;
	return out_is_temp(name);
}

int
artifacts_prepare_out(const char *out_dir, char *err, size_t errlen)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	int dfd, rc = 0;

	if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "output folder %s: %s", out_dir, strerror(errno));
		return -1;
	}
	/* lstat: a symlink planted where the caller expected to create the folder (e.g.
	 * under /tmp) would send root's and the collector's writes elsewhere. */
	if (lstat(out_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "output folder %s is not a directory (a symlink is refused)",
		    out_dir);
		return -1;
	}
	dfd = open(out_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || (d = fdopendir(dfd)) == NULL) {
		snprintf(err, errlen, "output folder %s: %s", out_dir, strerror(errno));
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	/* First pass: anything that is not one of our artifacts (a regular file by one of
	 * our names) refuses the folder before anything is removed. */
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (!out_is_artifact(de->d_name) ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode)) {
			char disp[256];
			changes_path_display(de->d_name, disp, sizeof(disp));
			snprintf(err, errlen, "output folder %s holds '%s', which is not an "
			    "egress-exec artifact: give an empty or new folder", out_dir, disp);
			rc = -1;
			break;
		}
	}
	if (rc == 0) {
		/* Second pass: the previous run's artifacts go, the verdict first; a temporary
		 * file of a killed run too. */
		for (size_t i = 0; i < EGRESS_NELEM(out_names) && rc == 0; i++)
			if (unlinkat(dfd, out_names[i], 0) != 0 && errno != ENOENT) {
				snprintf(err, errlen, "remove %s/%s: %s", out_dir, out_names[i],
				    strerror(errno));
				rc = -1;
			}
		rewinddir(d);
		while (rc == 0 && (de = readdir(d)) != NULL)
			if (out_is_temp(de->d_name) && unlinkat(dfd, de->d_name, 0) != 0 &&
			    errno != ENOENT) {
				snprintf(err, errlen, "remove %s/%s: %s", out_dir, de->d_name,
				    strerror(errno));
				rc = -1;
			}
	}
	if (rc == 0 && fsync(dfd) != 0) {
		snprintf(err, errlen, "sync %s: %s", out_dir, strerror(errno));
		rc = -1;
	}
	closedir(d);
	return rc;
}
