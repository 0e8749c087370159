/*
 * jsonw.c - bounded writer of compact JSON members, byte-identical to jansson's
 * JSON_COMPACT | JSON_ENSURE_ASCII output (jansson 2.14 dump.c: dump_string, do_dump).
 * Contract: jsonw.h.
 */
#include "egressd/jsonw.h"

#include <string.h>

#include "common/util.h"

void
jsonw_init(struct jsonw *w, char *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap;
	w->len = 0;
	w->failed = buf == NULL;
	w->in_array = false;
	w->array_first = false;
}

/* Room for n more bytes? Marks the writer failed when not. */
static bool
room(struct jsonw *w, size_t n)
{
	if (w->failed || n > w->cap - w->len) {
		w->failed = true;
		return false;
	}
	return true;
}

static void
put(struct jsonw *w, const char *p, size_t n)
{
	if (room(w, n)) {
		memcpy(w->buf + w->len, p, n);
		w->len += n;
	}
}

static void
put_c(struct jsonw *w, char c)
{
	if (room(w, 1))
		w->buf[w->len++] = c;
}

static const char hexu[] = "0123456789ABCDEF";

/* \uXXXX, upper-case hex (jansson: "\\u%04X") */
static void
put_u(struct jsonw *w, unsigned cp)
{
	char e[6] = { '\\', 'u', hexu[(cp >> 12) & 0xf], hexu[(cp >> 8) & 0xf],
		hexu[(cp >> 4) & 0xf], hexu[cp & 0xf] };

	put(w, e, sizeof(e));
}

/*
 * One UTF-8 sequence at p (n > 0 bytes left): its length, with the code point in *cp, or 0
 * when it is not valid UTF-8 (utf8_seq_len, common/util: jansson's rules too, utf.c
 * utf8_check_first, _full: no continuation or 0xC0/0xC1/0xF5+ lead, no overlong form, no
 * surrogate, nothing above U+10FFFF).
 */
static size_t
utf8_next(const unsigned char *p, size_t n, unsigned *cp)
{
	size_t len = utf8_seq_len((const char *)p, n);
	unsigned v;

	if (len <= 1) {
		*cp = p[0];
		return len;
	}
	v = p[0] & (0x7fu >> len);    /* the lead byte's bits: 0x1f, 0x0f, 0x07 */
	for (size_t i = 1; i < len; i++)
		v = (v << 6) | (p[i] & 0x3f);
	*cp = v;
	return len;
}

static void
put_string(struct jsonw *w, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	put_c(w, '"');
	while (i < n && !w->failed) {
		size_t run = i, k;
		unsigned cp;

		/* the common case: printable ASCII needing no escape, copied as one run */
		while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' &&
		    p[run] != '\\')
			run++;
		if (run > i) {
			put(w, s + i, run - i);
			i = run;
			continue;
		}
		k = utf8_next(p + i, n - i, &cp);
		if (k == 0) {
			put_u(w, p[i]);   /* not UTF-8: this byte as U+00XX (jsonw.h) */
			i++;
			continue;
		}
		i += k;
		switch (cp) {
		case '\\': put(w, "\\\\", 2); break;
		case '"': put(w, "\\\"", 2); break;
		case '\b': put(w, "\\b", 2); break;
		case '\f': put(w, "\\f", 2); break;
		case '\n': put(w, "\\n", 2); break;
		case '\r': put(w, "\\r", 2); break;
		case '\t': put(w, "\\t", 2); break;
		default:
			if (cp < 0x10000) {
				put_u(w, cp);
			} else {
				cp -= 0x10000;
				put_u(w, 0xD800 | ((cp & 0xffc00) >> 10));
				put_u(w, 0xDC00 | (cp & 0x003ff));
			}
			break;
		}
	}
	put_c(w, '"');
}

/* ,"key": (the comma unless first). Keys are literals of [a-z_0-9]. */
static void
put_key(struct jsonw *w, const char *key)
{
	size_t n = strlen(key);

	if (w->in_array || n == 0) {
		w->failed = true;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		char c = key[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
			w->failed = true;
			return;
		}
	}
	if (!room(w, n + 4))
		return;
	if (w->len > 0)
		w->buf[w->len++] = ',';
	w->buf[w->len++] = '"';
	memcpy(w->buf + w->len, key, n);
	w->len += n;
	w->buf[w->len++] = '"';
	w->buf[w->len++] = ':';
}

void
jsonw_strn(struct jsonw *w, const char *key, const char *val, size_t n)
{
	put_key(w, key);
	if (val == NULL)
		put(w, "null", 4);
	else
		put_string(w, val, n);
}

void
jsonw_str(struct jsonw *w, const char *key, const char *val)
{
	jsonw_strn(w, key, val, val != NULL ? strlen(val) : 0);
}

void
jsonw_null(struct jsonw *w, const char *key)
{
	put_key(w, key);
	put(w, "null", 4);
}

void
jsonw_bool(struct jsonw *w, const char *key, bool v)
{
	put_key(w, key);
	if (v)
		put(w, "true", 4);
	else
		put(w, "false", 5);
}

void
jsonw_int(struct jsonw *w, const char *key, long long v)
{
	char d[1 + EGRESS_U64_DEC_MAX];
	size_t n = 0;
	/* magnitude as unsigned: also right for LLONG_MIN */
	unsigned long long m = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	if (v < 0)
		d[n++] = '-';
	n += u64_to_dec(d + n, m);
	put_key(w, key);
	put(w, d, n);
}

void
jsonw_array_begin(struct jsonw *w, const char *key)
{
	put_key(w, key);
	put_c(w, '[');
	w->in_array = true;
	w->array_first = true;
}

void
jsonw_array_str(struct jsonw *w, const char *val)
{
	if (!w->in_array || val == NULL) {
		w->failed = true;
		return;
	}
	if (!w->array_first)
		put_c(w, ',');
	w->array_first = false;
	put_string(w, val, strlen(val));
}

void
jsonw_array_end(struct jsonw *w)
{
	if (!w->in_array) {
		w->failed = true;
		return;
	}
	w->in_array = false;
	put_c(w, ']');
}

size_t
jsonw_len(const struct jsonw *w, bool *ok)
{
	*ok = !w->failed && !w->in_array;
	return *ok ? w->len : 0;
}
