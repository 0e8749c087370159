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

/*
 * How many bytes at p (n of them) need no escape: printable ASCII, neither '"' nor '\\'.
 * Eight bytes at a time, the common case for every field (names, addresses, ids): a byte
 * is flagged by its high bit in one of four masks (the has-less-than and has-zero-byte
 * tests on a 64-bit word), then byte by byte from the first flagged word on.
 */
static size_t
plain_run(const unsigned char *p, size_t n)
{
	const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	size_t i = 0;

	while (n - i >= 8) {
		uint64_t v, q, b;

		memcpy(&v, p + i, 8);
		q = v ^ (ones * '"');
		b = v ^ (ones * '\\');
		/* high bit: >= 0x80; (v - 0x20..) & ~v: < 0x20; q, b: zero at '"', '\\' */
		if (((v | ((v - ones * 0x20) & ~v) | ((q - ones) & ~q) | ((b - ones) & ~b)) &
		    highs) != 0)
			break;
		i += 8;
	}
	while (i < n && p[i] >= 0x20 && p[i] < 0x80 && p[i] != '"' && p[i] != '\\')
		i++;
	return i;
}

static void
put_string(struct jsonw *w, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	/* the common case: nothing to escape, one bound check and one copy */
	size_t i = plain_run(p, n);

	if (i == n) {
		if (room(w, n + 2)) {
			w->buf[w->len] = '"';
			memcpy(w->buf + w->len + 1, s, n);
			w->buf[w->len + 1 + n] = '"';
			w->len += n + 2;
		}
		return;
	}
	put_c(w, '"');
	put(w, s, i);
	while (i < n && !w->failed) {
		size_t run = i, k;
		unsigned cp;

		/* printable ASCII up to the next byte to escape, copied as one run */
		run += plain_run(p + run, n - run);
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

/* Bytes allowed in a key: [a-z_0-9] (NUL is not, so the scan stops at the end). */
static const unsigned char key_ok[256] = {
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
	['8'] = 1, ['9'] = 1, ['_'] = 1,
	['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
	['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
	['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
	['y'] = 1, ['z'] = 1,
};

/* ,"key": (the comma unless first). Keys are literals of [a-z_0-9]: checked as they are
 * copied, one table lookup per byte (this runs for every member of every record). */
static void
put_key(struct jsonw *w, const char *key)
{
	const unsigned char *k = (const unsigned char *)key;
	size_t n = 0, at;
	char *o;

	if (w->in_array || w->failed) {
		w->failed = true;
		return;
	}
	/* ',' (unless first), '"', the key, '"', ':' */
	at = w->len + (w->len > 0) + 1;
	if (w->cap < 3 || at > w->cap - 2) {
		w->failed = true;
		return;
	}
	o = w->buf + at;
	while (key_ok[k[n]]) {
		if (n >= w->cap - 2 - at) {     /* no room for this byte and the '":' */
			w->failed = true;
			return;
		}
		o[n] = (char)k[n];
		n++;
	}
	if (k[n] != '\0' || n == 0) {      /* a byte outside [a-z_0-9], or an empty key */
		w->failed = true;
		return;
	}
	if (w->len > 0)
		w->buf[w->len] = ',';
	w->buf[at - 1] = '"';
	o[n] = '"';
	o[n + 1] = ':';
	w->len = at + n + 2;
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

void
jsonw_members(struct jsonw *w, const char *members, size_t n)
{
	if (w->in_array) {
		w->failed = true;
		return;
	}
	if (n == 0)
		return;
	if (w->len > 0)
		put_c(w, ',');
	put(w, members, n);
}

void
jsonw_fail(struct jsonw *w)
{
	w->failed = true;
}

size_t
jsonw_len(const struct jsonw *w, bool *ok)
{
	*ok = !w->failed && !w->in_array;
	return *ok ? w->len : 0;
}
