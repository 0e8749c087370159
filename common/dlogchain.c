/* dlogchain.c - the one parser of decision-log lines and the chain verifier.
 * Format: docs/decision-log.md. Contract: dlogchain.h. */
#include "common/dlogchain.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

const char dlog_zero_hash[DLOG_HASH_HEX + 1] =
    "0000000000000000000000000000000000000000000000000000000000000000";

/* ',"hash":"' + 64 hex + '"}' */
#define HASH_PREFIX     ",\"hash\":\""
#define HASH_PREFIX_LEN (sizeof(HASH_PREFIX) - 1)
#define HASH_SUFFIX_LEN (HASH_PREFIX_LEN + DLOG_HASH_HEX + 2)
/* '"prev":"' + 64 hex + '"' at the end of the body (before its closing brace) */
#define PREV_PREFIX     "\"prev\":\""
#define PREV_PREFIX_LEN (sizeof(PREV_PREFIX) - 1)
#define PREV_MEMBER_LEN (PREV_PREFIX_LEN + DLOG_HASH_HEX + 1)

static void
set_why(char *why, size_t whylen, const char *msg)
{
	if (why != NULL && whylen > 0) {
		size_t n = strlen(msg);

		if (n >= whylen)
			n = whylen - 1;
		memcpy(why, msg, n);
		why[n] = '\0';
	}
}

/* "2026-11-30T08:53:53.123456Z" exactly (RFC 3339, UTC, microseconds). */
static bool
time_valid(const char *s)
{
	static const char pat[] = "dddd-dd-ddTdd:dd:dd.ddddddZ";

	if (strlen(s) != sizeof(pat) - 1)
		return false;
	for (size_t i = 0; i < sizeof(pat) - 1; i++) {
		if (pat[i] == 'd') {
			if (s[i] < '0' || s[i] > '9')
				return false;
		} else if (s[i] != pat[i]) {
			return false;
		}
	}
	return true;
}

static bool
event_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 32)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_'))
			return false;
	}
	return true;
}

/* HMAC-SHA-256(key, prev "\n" body) as hex (OpenSSL 3 EVP_MAC: no deprecated API). */
static int
hmac_body(const struct dlog_key *key, const char *prev, const char *body, size_t bodylen,
    char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	size_t mdlen = 0;
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
	char digest[] = "SHA256";
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
		OSSL_PARAM_construct_end(),
	};
	int rc = -1;

	if (ctx == NULL ||
	    EVP_MAC_init(ctx, key->bytes, key->len, params) != 1 ||
	    EVP_MAC_update(ctx, (const unsigned char *)prev, DLOG_HASH_HEX) != 1 ||
	    EVP_MAC_update(ctx, (const unsigned char *)"\n", 1) != 1 ||
	    EVP_MAC_update(ctx, (const unsigned char *)body, bodylen) != 1 ||
	    EVP_MAC_final(ctx, md, &mdlen, sizeof(md)) != 1 || mdlen != DLOG_HASH_HEX / 2)
		goto out;
	hex_encode(md, mdlen, out);
	rc = 0;
out:
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	return rc;
}

int
dlog_hash_body_key(const struct dlog_key *key, const char *prev, const char *body,
    size_t bodylen, char *out)
{
	if (key != NULL && key->len > 0)
		return hmac_body(key, prev, body, bodylen, out);
	return dlog_hash_body(prev, body, bodylen, out);
}

int
dlog_key_load(const char *path, bool require_private, struct dlog_key *key, char *err,
    size_t errlen)
{
	struct stat st;
	ssize_t r;
	size_t n = 0;
	int fd, rc = -1;

	memset(key, 0, sizeof(*key));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	/* Why: the key is what makes the chain unforgeable; a key others can read is no
	 * better than a plain hash. */
	if (require_private && ((st.st_mode & 077) != 0 ||
	    (st.st_uid != 0 && st.st_uid != geteuid()))) {
		snprintf(err, errlen, "%s: must be owned by root and not readable by group or "
		    "others (chmod 600)", path);
		goto out;
	}
	/* read up to one byte past the maximum to notice a file that is too long */
	{
		unsigned char tmp[DLOG_KEY_MAX + 1];

		while (n < sizeof(tmp)) {
			r = read(fd, tmp + n, sizeof(tmp) - n);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				snprintf(err, errlen, "%s: %s", path, strerror(errno));
				secret_wipe(tmp, sizeof(tmp));
				goto out;
			}
			if (r == 0)
				break;
			n += (size_t)r;
		}
		memcpy(key->bytes, tmp, n < DLOG_KEY_MAX ? n : DLOG_KEY_MAX);
		secret_wipe(tmp, sizeof(tmp));
	}
	if (n > 0 && n <= DLOG_KEY_MAX && key->bytes[n - 1] == '\n')
		n--;
	if (n < DLOG_KEY_MIN || n > DLOG_KEY_MAX) {
		snprintf(err, errlen, "%s: a key is %d to %d bytes", path, DLOG_KEY_MIN,
		    DLOG_KEY_MAX);
		secret_wipe(key, sizeof(*key));
		goto out;
	}
	key->len = n;
	rc = 0;
out:
	close(fd);
	return rc;
}

int
dlog_hash_body(const char *prev, const char *body, size_t bodylen, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int rc = -1;

	if (ctx == NULL)
		return -1;
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
	    EVP_DigestUpdate(ctx, prev, DLOG_HASH_HEX) != 1 ||
	    EVP_DigestUpdate(ctx, "\n", 1) != 1 ||
	    EVP_DigestUpdate(ctx, body, bodylen) != 1 ||
	    EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != DLOG_HASH_HEX / 2)
		goto out;
	hex_encode(md, mdlen, out);
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	return rc;
}

struct dlog_hasher {
	EVP_MD *md;             /* plain chain: SHA-256, fetched once */
	EVP_MD_CTX *mdctx;
	EVP_MAC *mac;           /* keyed chain: HMAC-SHA-256 with the key set once */
	EVP_MAC_CTX *macctx;
};

struct dlog_hasher *
dlog_hasher_new(const struct dlog_key *key)
{
	struct dlog_hasher *h = calloc(1, sizeof(*h));

	if (h == NULL)
		return NULL;
	if (key != NULL && key->len > 0) {
		char digest[] = "SHA256";
		OSSL_PARAM params[] = {
			OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
			OSSL_PARAM_construct_end(),
		};

		h->mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
		h->macctx = h->mac != NULL ? EVP_MAC_CTX_new(h->mac) : NULL;
		if (h->macctx == NULL || EVP_MAC_init(h->macctx, key->bytes, key->len, params) != 1)
			goto fail;
	} else {
		h->md = EVP_MD_fetch(NULL, "SHA256", NULL);
		h->mdctx = EVP_MD_CTX_new();
		if (h->md == NULL || h->mdctx == NULL)
			goto fail;
	}
	return h;
fail:
	dlog_hasher_free(h);
	return NULL;
}

int
dlog_hasher_body(struct dlog_hasher *h, const char *prev, const char *body, size_t bodylen,
    char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];

	if (h->macctx != NULL) {
		size_t mdlen = 0;

		/* NULL key: HMAC starts again with the key already set (OpenSSL 3) */
		if (EVP_MAC_init(h->macctx, NULL, 0, NULL) != 1 ||
		    EVP_MAC_update(h->macctx, (const unsigned char *)prev, DLOG_HASH_HEX) != 1 ||
		    EVP_MAC_update(h->macctx, (const unsigned char *)"\n", 1) != 1 ||
		    EVP_MAC_update(h->macctx, (const unsigned char *)body, bodylen) != 1 ||
		    EVP_MAC_final(h->macctx, md, &mdlen, sizeof(md)) != 1 ||
		    mdlen != DLOG_HASH_HEX / 2)
			return -1;
		hex_encode(md, mdlen, out);
		return 0;
	} else {
		unsigned int mdlen = 0;

		if (EVP_DigestInit_ex2(h->mdctx, h->md, NULL) != 1 ||
		    EVP_DigestUpdate(h->mdctx, prev, DLOG_HASH_HEX) != 1 ||
		    EVP_DigestUpdate(h->mdctx, "\n", 1) != 1 ||
		    EVP_DigestUpdate(h->mdctx, body, bodylen) != 1 ||
		    EVP_DigestFinal_ex(h->mdctx, md, &mdlen) != 1 || mdlen != DLOG_HASH_HEX / 2)
			return -1;
		hex_encode(md, mdlen, out);
		return 0;
	}
}

void
dlog_hasher_free(struct dlog_hasher *h)
{
	if (h == NULL)
		return;
	EVP_MD_CTX_free(h->mdctx);
	EVP_MD_free(h->md);
	EVP_MAC_CTX_free(h->macctx);   /* cleanses the key */
	EVP_MAC_free(h->mac);
	free(h);
}

/* The key order the writer produces: v, time, seq, event first; prev, hash last. */
static bool
keys_in_place(json_t *obj)
{
	static const char *const head[] = { "v", "time", "seq", "event" };
	size_t n = json_object_size(obj), i = 0;
	void *it;

	if (n < 6)
		return false;
	for (it = json_object_iter(obj); it != NULL; it = json_object_iter_next(obj, it), i++) {
		const char *k = json_object_iter_key(it);

		if (i < 4 && strcmp(k, head[i]) != 0)
			return false;
		if (i == n - 2 && strcmp(k, "prev") != 0)
			return false;
		if (i == n - 1 && strcmp(k, "hash") != 0)
			return false;
	}
	return i == n;
}

enum dlog_line_status
dlog_line_check(const char *line, size_t len, struct dlog_record_info *info, char *why,
    size_t whylen)
{
	return dlog_line_check_key(line, len, NULL, info, why, whylen);
}

enum dlog_line_status
dlog_line_check_key(const char *line, size_t len, const struct dlog_key *key,
    struct dlog_record_info *info, char *why, size_t whylen)
{
	const char *hash, *prevm;
	size_t prefix_len;
	char want[DLOG_HASH_HEX + 1];
	json_t *root = NULL, *jv, *jt, *js, *je, *jp, *jh;
	json_error_t jerr;
	enum dlog_line_status st = DLOG_LINE_MALFORMED;
	json_int_t seq;
	unsigned char *body = NULL;

	if (len > EGRESS_LOG_RECORD_MAX) {
		set_why(why, whylen, "line longer than the record limit");
		return DLOG_LINE_MALFORMED;
	}
	if (memchr(line, '\0', len) != NULL || memchr(line, '\n', len) != NULL ||
	    memchr(line, '\r', len) != NULL) {
		set_why(why, whylen, "line contains NUL, CR or LF");
		return DLOG_LINE_MALFORMED;
	}
	/* Byte layout first: the hash covers bytes, so the verifier must find the exact
	 * bytes the writer hashed, without re-serializing anything. */
	if (len < 2 + PREV_MEMBER_LEN + HASH_SUFFIX_LEN || line[0] != '{' ||
	    line[len - 1] != '}' || line[len - 2] != '"') {
		set_why(why, whylen, "not a decision-log record");
		return DLOG_LINE_MALFORMED;
	}
	prefix_len = len - HASH_SUFFIX_LEN;
	if (memcmp(line + prefix_len, HASH_PREFIX, HASH_PREFIX_LEN) != 0) {
		set_why(why, whylen, "the hash member is not last");
		return DLOG_LINE_MALFORMED;
	}
	hash = line + prefix_len + HASH_PREFIX_LEN;
	if (!hex_lower_is(hash, DLOG_HASH_HEX)) {
		set_why(why, whylen, "hash is not 64 lowercase hex digits");
		return DLOG_LINE_MALFORMED;
	}
	prevm = line + prefix_len - PREV_MEMBER_LEN;
	if (memcmp(prevm, PREV_PREFIX, PREV_PREFIX_LEN) != 0 ||
	    prevm[PREV_MEMBER_LEN - 1] != '"' || !hex_lower_is(prevm + PREV_PREFIX_LEN, DLOG_HASH_HEX) ||
	    (prevm[-1] != ',')) {
		set_why(why, whylen, "the prev member does not precede the hash");
		return DLOG_LINE_MALFORMED;
	}

	root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL || !json_is_object(root)) {
		set_why(why, whylen, "not a JSON object");
		goto out;
	}
	if (!keys_in_place(root)) {
		set_why(why, whylen, "members are not v, time, seq, event ... prev, hash");
		goto out;
	}
	jv = json_object_get(root, "v");
	jt = json_object_get(root, "time");
	js = json_object_get(root, "seq");
	je = json_object_get(root, "event");
	jp = json_object_get(root, "prev");
	jh = json_object_get(root, "hash");
	/* Every version up to ours: a chain continues across an upgrade (docs/decision-log.md,
	 * "Schema versions"); the byte rules of the chain are the same in all of them. */
	if (!json_is_integer(jv) || json_integer_value(jv) < DLOG_SCHEMA_VERSION_MIN ||
	    json_integer_value(jv) > DLOG_SCHEMA_VERSION) {
		set_why(why, whylen, "unknown schema version");
		goto out;
	}
	if (!json_is_string(jt) || !time_valid(json_string_value(jt))) {
		set_why(why, whylen, "time is not RFC 3339 UTC with microseconds");
		goto out;
	}
	if (!json_is_integer(js) || (seq = json_integer_value(js)) < 1) {
		set_why(why, whylen, "seq is not a positive integer");
		goto out;
	}
	if (!json_is_string(je) || !event_valid(json_string_value(je))) {
		set_why(why, whylen, "event is not a valid name");
		goto out;
	}
	if (!json_is_string(jp) || json_string_length(jp) != DLOG_HASH_HEX ||
	    memcmp(json_string_value(jp), prevm + PREV_PREFIX_LEN, DLOG_HASH_HEX) != 0 ||
	    !json_is_string(jh) || json_string_length(jh) != DLOG_HASH_HEX ||
	    memcmp(json_string_value(jh), hash, DLOG_HASH_HEX) != 0) {
		set_why(why, whylen, "prev or hash member is malformed");
		goto out;
	}

	/* body = line[0, prefix_len) + "}" */
	body = malloc(prefix_len + 1);
	if (body == NULL) {
		set_why(why, whylen, "out of memory");
		goto out;
	}
	memcpy(body, line, prefix_len);
	body[prefix_len] = '}';
	if (dlog_hash_body_key(key, prevm + PREV_PREFIX_LEN, (const char *)body,
	    prefix_len + 1, want) != 0) {
		set_why(why, whylen, "hash computation failed");
		goto out;
	}
	if (memcmp(want, hash, DLOG_HASH_HEX) != 0) {
		set_why(why, whylen, key != NULL && key->len > 0 ? "the record's bytes do not "
		    "match its HMAC (edited, or not written with this key)" :
		    "the record's bytes do not match its hash");
		st = DLOG_LINE_BAD_HASH;
		goto out;
	}
	if (info != NULL) {
		info->seq = (uint64_t)seq;
		memcpy(info->prev, prevm + PREV_PREFIX_LEN, DLOG_HASH_HEX);
		info->prev[DLOG_HASH_HEX] = '\0';
		memcpy(info->hash, hash, DLOG_HASH_HEX);
		info->hash[DLOG_HASH_HEX] = '\0';
		snprintf(info->event, sizeof(info->event), "%s", json_string_value(je));
	}
	st = DLOG_LINE_OK;
out:
	free(body);
	json_decref(root);
	return st;
}

const char *
dlog_break_str(enum dlog_break b)
{
	switch (b) {
	case DLOG_INTACT: return "intact";
	case DLOG_BREAK_EDITED: return "edited";
	case DLOG_BREAK_DELETED: return "deleted";
	case DLOG_BREAK_REORDERED: return "reordered";
	case DLOG_BREAK_TRUNCATED: return "truncated";
	case DLOG_BREAK_MALFORMED: return "malformed";
	case DLOG_BREAK_IO: return "io_error";
	}
	return "unknown";
}

void
dlog_verify_init(struct dlog_verify *v, bool continued)
{
	memset(v, 0, sizeof(*v));
	v->continued = continued;
	v->next_seq = 1;
	memcpy(v->prev, dlog_zero_hash, sizeof(v->prev));
}

static enum dlog_break
verify_break(struct dlog_verify *v, enum dlog_break kind, uint64_t line, uint64_t seq,
    const char *name, const char *msg)
{
	v->kind = kind;
	v->line = line;
	v->seq = seq;
	snprintf(v->message, sizeof(v->message), "%s:%llu: %s: %s", name,
	    (unsigned long long)line, dlog_break_str(kind), msg);
	return kind;
}

/* Does a record with seq want appear in the rest of f? (reorder vs deletion) */
static bool
seq_appears_later(FILE *f, char *buf, const struct dlog_key *key, uint64_t want)
{
	struct dlog_record_info info;
	size_t len;
	int rc;

	while ((rc = line_read(f, buf, EGRESS_LOG_RECORD_MAX, &len)) != 0) {
		if (rc < -1)
			return false;
		if (rc < 0)
			continue;
		if (dlog_line_check_key(buf, len, key, &info, NULL, 0) == DLOG_LINE_OK &&
		    info.seq == want)
			return true;
	}
	return false;
}

/* The seq the next record must carry (0 when unknown: a continued file's first line). */
static uint64_t
expected_seq(const struct dlog_verify *v)
{
	return v->started || !v->continued ? v->next_seq : 0;
}

enum dlog_break
dlog_verify_stream(struct dlog_verify *v, FILE *f, const char *name)
{
	char *buf = malloc(EGRESS_LOG_RECORD_MAX + 1);
	char why[128], detail[224];
	struct dlog_record_info info;
	uint64_t line = 0;
	enum dlog_break res = DLOG_INTACT;
	size_t len;
	int rc;

	v->kind = DLOG_INTACT;
	v->message[0] = '\0';
	if (buf == NULL)
		return verify_break(v, DLOG_BREAK_IO, 0, 0, name, "out of memory");
	while ((rc = line_read(f, buf, EGRESS_LOG_RECORD_MAX, &len)) != 0) {
		enum dlog_line_status ls;

		line++;
		if (rc == -2) {
			res = verify_break(v, DLOG_BREAK_IO, line, 0, name, strerror(errno));
			goto out;
		}
		if (rc == -1) {
			res = verify_break(v, DLOG_BREAK_MALFORMED, line, 0, name,
			    "line longer than EGRESS_LOG_RECORD_MAX");
			goto out;
		}
		if (rc == 2) {
			/* The writer always ends a record with a newline: this line is torn. */
			if (expected_seq(v) != 0)
				snprintf(detail, sizeof(detail), "seq %llu (expected here): the last "
				    "line is incomplete (no newline): the tail was cut",
				    (unsigned long long)expected_seq(v));
			else
				snprintf(detail, sizeof(detail), "the last line is incomplete (no "
				    "newline): the tail was cut");
			res = verify_break(v, DLOG_BREAK_TRUNCATED, line, expected_seq(v), name,
			    detail);
			goto out;
		}
		ls = dlog_line_check_key(buf, len, v->key, &info, why, sizeof(why));
		if (ls == DLOG_LINE_MALFORMED) {
			res = verify_break(v, DLOG_BREAK_MALFORMED, line, expected_seq(v), name,
			    why);
			goto out;
		}
		if (ls == DLOG_LINE_BAD_HASH) {
			/* The bytes are not trustworthy, so their seq is not reported: the
			 * break is at the seq expected here. */
			if (expected_seq(v) != 0)
				snprintf(detail, sizeof(detail), "seq %llu (expected here): %s%s",
				    (unsigned long long)expected_seq(v), why, !v->started &&
				    (v->key == NULL || v->key->len == 0) ? " (an HMAC-keyed log needs "
				    "--key)" : "");
			else
				snprintf(detail, sizeof(detail), "%s", why);
			res = verify_break(v, DLOG_BREAK_EDITED, line, expected_seq(v), name,
			    detail);
			goto out;
		}
		if (!v->started && v->continued) {
			/* A rotated file verified alone: accept its first link as given. */
		} else if (info.seq == v->next_seq) {
			if (strcmp(info.prev, v->prev) != 0) {
				snprintf(detail, sizeof(detail), "seq %llu: prev does not match the "
				    "hash of the record before it (that record was replaced or "
				    "re-hashed)", (unsigned long long)info.seq);
				res = verify_break(v, DLOG_BREAK_EDITED, line, info.seq, name, detail);
				goto out;
			}
		} else if (info.seq > v->next_seq) {
			off_t pos = ftello(f);
			bool later = pos >= 0 && seq_appears_later(f, buf, v->key, v->next_seq);

			if (pos >= 0)
				(void)fseeko(f, pos, SEEK_SET);
			if (later) {
				snprintf(detail, sizeof(detail), "seq %llu where %llu was expected; "
				    "%llu appears later", (unsigned long long)info.seq,
				    (unsigned long long)v->next_seq, (unsigned long long)v->next_seq);
				res = verify_break(v, DLOG_BREAK_REORDERED, line, info.seq, name, detail);
			} else {
				snprintf(detail, sizeof(detail), "seq %llu where %llu was expected: "
				    "records %llu..%llu are missing%s", (unsigned long long)info.seq,
				    (unsigned long long)v->next_seq, (unsigned long long)v->next_seq,
				    (unsigned long long)(info.seq - 1), v->started ? "" :
				    " (the head; a rotated file alone needs --continued)");
				res = verify_break(v, DLOG_BREAK_DELETED, line, info.seq, name, detail);
			}
			goto out;
		} else {
			snprintf(detail, sizeof(detail), "seq %llu after %llu: seq repeats or goes "
			    "backwards", (unsigned long long)info.seq,
			    (unsigned long long)(v->next_seq - 1));
			res = verify_break(v, DLOG_BREAK_REORDERED, line, info.seq, name, detail);
			goto out;
		}
		memcpy(v->prev, info.hash, sizeof(v->prev));
		v->next_seq = info.seq + 1;
		v->started = true;
		v->records++;
	}
out:
	free(buf);
	return res;
}

enum dlog_break
dlog_verify_unopened(struct dlog_verify *v, const char *path, int e)
{
	v->kind = DLOG_BREAK_IO;
	v->line = 0;
	v->seq = 0;
	snprintf(v->message, sizeof(v->message), "%s: %s", path, strerror(e));
	return DLOG_BREAK_IO;
}

enum dlog_break
dlog_verify_file(struct dlog_verify *v, const char *path)
{
	FILE *f = fopen(path, "re");
	enum dlog_break b;

	if (f == NULL)
		return dlog_verify_unopened(v, path, errno);
	b = dlog_verify_stream(v, f, path);
	fclose(f);
	return b;
}
