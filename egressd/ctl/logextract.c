/* logextract.c - a run's decisions.jsonl against its anchor and the system log.
 * Contract: logextract.h. */
#include "egressd/ctl/logextract.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "egressd/ctl/gzread.h"

#define TRUNC_MARKER "{\"egress_exec\":\"truncated\""

struct xrec {
	uint64_t seq;
	char *line;
	size_t len;
};

struct xset {
	struct xrec *v;
	size_t n, cap;
	uint64_t bytes;
};

static void
xset_free(struct xset *x)
{
	for (size_t i = 0; i < x->n; i++)
		free(x->v[i].line);
	free(x->v);
	memset(x, 0, sizeof(*x));
}

static int
xset_add(struct xset *x, uint64_t seq, const char *line, size_t len)
{
	if (x->bytes + len + 1 > EGRESS_DECISIONS_ARTIFACT_MAX) {
		errno = EFBIG;
		return -1;
	}
	if (x->n == x->cap) {
		size_t nc = x->cap ? x->cap * 2 : 64;
		struct xrec *nv = realloc(x->v, nc * sizeof(*nv));

		if (nv == NULL)
			return -1;
		x->v = nv;
		x->cap = nc;
	}
	x->v[x->n].line = malloc(len + 1);
	if (x->v[x->n].line == NULL)
		return -1;
	memcpy(x->v[x->n].line, line, len);
	x->v[x->n].line[len] = '\0';
	x->v[x->n].len = len;
	x->v[x->n].seq = seq;
	x->n++;
	x->bytes += len + 1;
	return 0;
}

static enum dlog_break
xbreak(struct logextract_result *r, enum dlog_break k, const char *name, uint64_t line,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static enum dlog_break
xbreak(struct logextract_result *r, enum dlog_break k, const char *name, uint64_t line,
    const char *fmt, ...)
{
	char d[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d, sizeof(d), fmt, ap);
	va_end(ap);
	r->kind = k;
	snprintf(r->message, sizeof(r->message), "%s:%llu: %s: %s", name,
	    (unsigned long long)line, dlog_break_str(k), d);
	return k;
}

static bool
hex64(const char *s)
{
	return s != NULL && strlen(s) == DLOG_HASH_HEX && hex_lower_is(s, DLOG_HASH_HEX);
}

static int
opt_label(json_t *v, char *out, size_t cap)
{
	const char *s;

	if (v == NULL || json_is_null(v)) {
		out[0] = '\0';
		return 0;
	}
	s = json_string_value(v);
	if (s == NULL || s[0] == '\0' || strlen(s) >= cap || !label_valid(s, cap - 1))
		return -1;
	snprintf(out, cap, "%s", s);
	return 0;
}

int
logextract_anchor_parse(const char *line, size_t len, struct logextract_anchor *a,
    char *why, size_t whylen)
{
	json_error_t je;
	json_t *o, *in, *js, *jt;
	const char *log, *h;
	int rc = -1;

	memset(a, 0, sizeof(*a));
	if (len > EGRESS_LOG_RECORD_MAX || memchr(line, '\0', len) != NULL) {
		snprintf(why, whylen, "not an anchor line");
		return -1;
	}
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	in = json_object_get(o, "egress_anchor");
	if (!json_is_object(o) || json_object_size(o) != 1 || !json_is_object(in)) {
		snprintf(why, whylen, "the first line is not an egress_anchor");
		goto out;
	}
	log = json_string_value(json_object_get(in, "log"));
	jt = json_object_get(in, "through_seq");
	js = json_object_get(in, "seq");
	h = json_string_value(json_object_get(in, "hash"));
	if (log == NULL || strlen(log) >= sizeof(a->log) || !json_is_integer(js) ||
	    json_integer_value(js) < 0 || !hex64(h) || json_object_size(in) != 6 ||
	    !json_is_integer(jt) || json_integer_value(jt) < json_integer_value(js) ||
	    opt_label(json_object_get(in, "principal"), a->principal, sizeof(a->principal)) ||
	    opt_label(json_object_get(in, "grant_id"), a->grant_id, sizeof(a->grant_id)) ||
	    !json_object_get(in, "principal") || !json_object_get(in, "grant_id") ||
	    (a->principal[0] == '\0' && a->grant_id[0] == '\0')) {
		snprintf(why, whylen, "egress_anchor needs log, seq, hash (64 hex), through_seq "
		    "(>= seq), principal and grant_id (one of them set), nothing else");
		goto out;
	}
	snprintf(a->log, sizeof(a->log), "%s", log);
	a->seq = (uint64_t)json_integer_value(js);
	a->through_seq = (uint64_t)json_integer_value(jt);
	memcpy(a->hash, h, DLOG_HASH_HEX + 1);
	rc = 0;
out:
	json_decref(o);
	return rc;
}

bool
logextract_is_extract(const char *path)
{
	struct logextract_anchor a;
	char *buf;
	char why[128];
	size_t n;
	FILE *f;
	bool yes = false;

	if (strcmp(path, "-") == 0 || (f = fopen(path, "re")) == NULL)
		return false;
	buf = malloc(EGRESS_LOG_RECORD_MAX + 1);
	if (buf != NULL && line_read(f, buf, EGRESS_LOG_RECORD_MAX, &n) == 1)
		yes = logextract_anchor_parse(buf, n, &a, why, sizeof(why)) == 0;
	free(buf);
	fclose(f);
	return yes;
}

/* Is the record (already checked) one the anchor selects? */
static bool
selected(const struct logextract_anchor *a, const char *line, size_t len)
{
	json_error_t je;
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	const char *p, *g;
	bool yes;

	p = json_string_value(json_object_get(o, "principal"));
	g = json_string_value(json_object_get(o, "grant_id"));
	yes = (a->principal[0] != '\0' && p != NULL && strcmp(p, a->principal) == 0) ||
	    (a->grant_id[0] != '\0' && g != NULL && strcmp(g, a->grant_id) == 0);
	json_decref(o);
	return yes;
}

/* The extract alone. */
static enum dlog_break
check_extract(FILE *ext, const char *name, const struct dlog_key *key, struct xset *xs,
    struct logextract_result *r, char *buf)
{
	struct dlog_record_info info, last;
	uint64_t lineno = 0;
	size_t n;
	int rc;
	char why[256];

	rc = line_read(ext, buf, EGRESS_LOG_RECORD_MAX, &n);
	lineno++;
	if (rc != 1 || logextract_anchor_parse(buf, n, &r->anchor, why, sizeof(why)) != 0)
		return xbreak(r, DLOG_BREAK_MALFORMED, name, 1, "%s", rc == 1 ? why :
		    "no anchor line");
	memset(&last, 0, sizeof(last));
	last.seq = r->anchor.seq;
	memcpy(last.hash, r->anchor.hash, sizeof(last.hash));
	while ((rc = line_read(ext, buf, EGRESS_LOG_RECORD_MAX, &n)) != 0) {
		enum dlog_line_status st;

		lineno++;
		if (rc == -2)
			return xbreak(r, DLOG_BREAK_IO, name, lineno, "read error");
		if (rc == -1)
			return xbreak(r, DLOG_BREAK_MALFORMED, name, lineno, "line over the record limit");
		if (r->truncated)
			return xbreak(r, DLOG_BREAK_MALFORMED, name, lineno,
			    "a line after egress-exec's truncation marker");
		if (n >= sizeof(TRUNC_MARKER) - 1 &&
		    memcmp(buf, TRUNC_MARKER, sizeof(TRUNC_MARKER) - 1) == 0) {
			r->truncated = true;
			continue;
		}
		if (rc == 2)
			return xbreak(r, DLOG_BREAK_TRUNCATED, name, lineno, "the last line has no "
			    "newline");
		st = dlog_line_check_key(buf, n, key, &info, why, sizeof(why));
		if (st != DLOG_LINE_OK)
			return xbreak(r, st == DLOG_LINE_BAD_HASH ? DLOG_BREAK_EDITED :
			    DLOG_BREAK_MALFORMED, name, lineno, "%s", why);
		if (!selected(&r->anchor, buf, n))
			return xbreak(r, DLOG_BREAK_EDITED, name, lineno, "seq %llu is not a record of "
			    "the anchor's principal or grant", (unsigned long long)info.seq);
		if (info.seq > r->anchor.through_seq)
			return xbreak(r, DLOG_BREAK_EDITED, name, lineno, "seq %llu is after the "
			    "anchor's through_seq %llu", (unsigned long long)info.seq,
			    (unsigned long long)r->anchor.through_seq);
		if (info.seq <= last.seq)
			return xbreak(r, DLOG_BREAK_REORDERED, name, lineno, "seq %llu after seq %llu",
			    (unsigned long long)info.seq, (unsigned long long)last.seq);
		if (info.seq == last.seq + 1) {
			if (strcmp(info.prev, last.hash) != 0)
				return xbreak(r, DLOG_BREAK_EDITED, name, lineno, "seq %llu does not link "
				    "to the %s before it", (unsigned long long)info.seq,
				    r->records == 0 ? "anchor" : "record");
		} else {
			r->gaps++;
		}
		if (xset_add(xs, info.seq, buf, n) != 0)
			return xbreak(r, DLOG_BREAK_MALFORMED, name, lineno, "extract over %d bytes",
			    EGRESS_DECISIONS_ARTIFACT_MAX);
		if (r->records == 0)
			r->first_seq = info.seq;
		r->records++;
		r->last_seq = info.seq;
		last = info;
	}
	return DLOG_INTACT;
}

/* The extract held against the system log (already verified as a chain). */
static enum dlog_break
check_against(const struct xset *xs, const char *const *sys, size_t nsys,
    const struct dlog_key *key, struct logextract_result *r, char *buf)
{
	const struct logextract_anchor *a = &r->anchor;
	bool anchor_seen = a->seq == 0 && strcmp(a->hash, dlog_zero_hash) == 0;
	/* a cut extract is complete up to its last record only */
	uint64_t end = r->truncated && xs->n > 0 ? xs->v[xs->n - 1].seq : a->through_seq;
	uint64_t sys_last = 0;
	size_t k = 0;
	char why[256];

	for (size_t fi = 0; fi < nsys; fi++) {
		FILE *f = gzread_open(sys[fi]);
		uint64_t lineno = 0;
		size_t n;
		int rc;

		if (f == NULL)
			return xbreak(r, DLOG_BREAK_IO, sys[fi], 0, "%s", strerror(errno));
		while ((rc = line_read(f, buf, EGRESS_LOG_RECORD_MAX, &n)) > 0) {
			struct dlog_record_info info;

			lineno++;
			if (dlog_line_check_key(buf, n, key, &info, why, sizeof(why)) != DLOG_LINE_OK)
				continue;       /* the chain check already judged every line */
			sys_last = info.seq;
			if (info.seq == a->seq) {
				if (strcmp(info.hash, a->hash) != 0) {
					fclose(f);
					return xbreak(r, DLOG_BREAK_EDITED, sys[fi], lineno, "the anchor says "
					    "seq %llu has hash %.16s..., the system log %.16s...",
					    (unsigned long long)a->seq, a->hash, info.hash);
				}
				anchor_seen = true;
				continue;
			}
			if (info.seq <= a->seq || info.seq > end)
				continue;
			if (!anchor_seen) {
				fclose(f);
				return xbreak(r, DLOG_BREAK_DELETED, sys[fi], lineno, "the anchor's seq %llu "
				    "is before these files: give the rotated file that holds it",
				    (unsigned long long)a->seq);
			}
			if (k < xs->n && xs->v[k].seq == info.seq) {
				if (xs->v[k].len != n || memcmp(xs->v[k].line, buf, n) != 0) {
					fclose(f);
					return xbreak(r, DLOG_BREAK_EDITED, sys[fi], lineno, "the extract's "
					    "seq %llu differs from the system log's",
					    (unsigned long long)info.seq);
				}
				k++;
			} else if (selected(a, buf, n)) {
				fclose(f);
				return xbreak(r, DLOG_BREAK_DELETED, sys[fi], lineno, "seq %llu belongs "
				    "to the run but is missing from the extract",
				    (unsigned long long)info.seq);
			}
		}
		fclose(f);
	}
	if (!anchor_seen)
		return xbreak(r, DLOG_BREAK_DELETED, a->log, 0, "the anchor's seq %llu is not in "
		    "the given system log files", (unsigned long long)a->seq);
	if (k < xs->n || sys_last < end)
		return xbreak(r, DLOG_BREAK_DELETED, a->log, 0, "the system log files given end "
		    "at seq %llu, before seq %llu that the extract covers (give the newer files)",
		    (unsigned long long)sys_last, (unsigned long long)end);
	r->against_system = true;
	return DLOG_INTACT;
}

enum dlog_break
logextract_verify(FILE *ext, const char *name, const struct dlog_key *key,
    const char *const *sys, size_t nsys, struct logextract_result *res)
{
	struct xset xs = { 0 };
	char *buf = malloc(EGRESS_LOG_RECORD_MAX + 1);
	enum dlog_break b;

	memset(res, 0, sizeof(*res));
	if (buf == NULL)
		return xbreak(res, DLOG_BREAK_IO, name, 0, "out of memory");
	b = check_extract(ext, name, key, &xs, res, buf);
	if (b == DLOG_INTACT && nsys > 0) {
		/* the system log first, as one chain (its first file may start mid-chain) */
		struct dlog_verify v;

		dlog_verify_init(&v, true);
		v.key = key;
		for (size_t i = 0; i < nsys && b == DLOG_INTACT; i++)
			b = gzread_verify_file(&v, sys[i]);
		if (b != DLOG_INTACT) {
			res->kind = b;
			snprintf(res->message, sizeof(res->message), "system log: %s", v.message);
		} else {
			b = check_against(&xs, sys, nsys, key, res, buf);
		}
	}
	xset_free(&xs);
	free(buf);
	return b;
}
