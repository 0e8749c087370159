/* clienthello.c - strict, bounded ClientHello reader (see clienthello.h). */
#include "egressd/clienthello.h"

#include <string.h>

#define TLS_RECORD_HANDSHAKE 22
#define TLS_RECORD_MAX       16384      /* plaintext record limit, 2^14 */
#define HS_CLIENT_HELLO      1
#define EXT_SERVER_NAME      0
#define EXT_ALPN             16
#define EXT_SUPPORTED_VERSIONS 43
#define EXT_ECH              0xfe0d
#define EXTS_SEEN_MAX        64         /* distinct extensions tracked for duplicates */

const char *
ch_result_str(enum ch_result r)
{
	switch (r) {
	case CH_OK:        return "ok";
	case CH_NEED_MORE: return "need_more";
	case CH_NOT_TLS:   return "not_tls";
	case CH_MALFORMED: return "malformed";
	case CH_TOO_LARGE: return "too_large";
	}
	return "unknown";
}

/* A bounded reader over one buffer. Every get fails (returns false) past the end. */
struct rd {
	const unsigned char *p;
	size_t n, off;
};

static bool
get8(struct rd *r, unsigned *v)
{
	if (r->n - r->off < 1)
		return false;
	*v = r->p[r->off++];
	return true;
}

static bool
get16(struct rd *r, unsigned *v)
{
	if (r->n - r->off < 2)
		return false;
	*v = ((unsigned)r->p[r->off] << 8) | r->p[r->off + 1];
	r->off += 2;
	return true;
}

static bool
get24(struct rd *r, size_t *v)
{
	if (r->n - r->off < 3)
		return false;
	*v = ((size_t)r->p[r->off] << 16) | ((size_t)r->p[r->off + 1] << 8) | r->p[r->off + 2];
	r->off += 3;
	return true;
}

/* A sub-reader of exactly len bytes, advancing the parent past them. */
static bool
sub(struct rd *r, size_t len, struct rd *out)
{
	if (r->n - r->off < len)
		return false;
	out->p = r->p + r->off;
	out->n = len;
	out->off = 0;
	r->off += len;
	return true;
}

static bool
skip(struct rd *r, size_t len)
{
	struct rd s;
	return sub(r, len, &s);
}

static bool
done(const struct rd *r)
{
	return r->off == r->n;
}

static enum ch_result
parse_sni(struct rd *e, struct clienthello *out)
{
	unsigned listlen, type, namelen;
	struct rd list;
	struct host h;
	char name[EGRESS_HOSTNAME_MAX + 1];

	if (!get16(e, &listlen) || !sub(e, listlen, &list) || !done(e) || listlen == 0)
		return CH_MALFORMED;
	/* Exactly one entry, of type host_name (RFC 6066 3: at most one per type, and
	 * host_name is the only type defined). */
	if (!get8(&list, &type) || type != 0 || !get16(&list, &namelen))
		return CH_MALFORMED;
	if (namelen == 0 || namelen > EGRESS_HOSTNAME_MAX || list.n - list.off != namelen)
		return CH_MALFORMED;        /* also refuses a second entry after the first */
	for (size_t i = 0; i < namelen; i++) {
		unsigned char ch = list.p[list.off + i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
			return CH_MALFORMED;
		name[i] = (char)ch;
	}
	name[namelen] = '\0';
	/* Canonical like every other host egressd compares; IP literals are not SNI. */
	if (name[namelen - 1] == '.' || host_parse(name, namelen, 0, &h) != HOST_OK ||
	    h.kind != HOST_NAME)
		return CH_MALFORMED;
	memcpy(out->sni, h.name, strlen(h.name) + 1);
	out->has_sni = true;
	return CH_OK;
}

static enum ch_result
parse_alpn(struct rd *e, struct clienthello *out)
{
	unsigned listlen, len;
	struct rd list;

	if (!get16(e, &listlen) || !sub(e, listlen, &list) || !done(e) || listlen < 2)
		return CH_MALFORMED;
	while (!done(&list)) {
		if (!get8(&list, &len) || len == 0 || list.n - list.off < len)
			return CH_MALFORMED;
		if (out->nalpn < EGRESS_ALPN_MAX) {
			size_t k = len < CH_ALPN_NAME_MAX ? len : CH_ALPN_NAME_MAX;
			char *d = out->alpn[out->nalpn];
			for (size_t i = 0; i < k; i++) {
				unsigned char ch = list.p[list.off + i];
				d[i] = ch > 0x20 && ch < 0x7f ? (char)ch : '?';
			}
			d[k] = '\0';
		}
		out->nalpn++;
		list.off += len;
	}
	return CH_OK;
}

/* The ClientHello body (after the 4-byte handshake header). */
static enum ch_result
parse_body(struct rd *b, struct clienthello *out)
{
	unsigned v, len, extslen;
	struct rd exts;
	unsigned seen[EXTS_SEEN_MAX];
	size_t nseen = 0;

	if (!get16(b, &v))
		return CH_MALFORMED;
	out->legacy_version = (uint16_t)v;
	if ((v >> 8) != 3)
		return CH_MALFORMED;
	if (!skip(b, 32))                                       /* random */
		return CH_MALFORMED;
	if (!get8(b, &len) || len > 32 || !skip(b, len))        /* legacy_session_id */
		return CH_MALFORMED;
	if (!get16(b, &len) || len < 2 || (len & 1) || !skip(b, len))   /* cipher_suites */
		return CH_MALFORMED;
	if (!get8(b, &len) || len < 1 || !skip(b, len))         /* compression_methods */
		return CH_MALFORMED;
	if (done(b))
		return CH_OK;                   /* no extensions (SSLv3-style hello): no SNI */
	if (!get16(b, &extslen) || !sub(b, extslen, &exts) || !done(b))
		return CH_MALFORMED;
	while (!done(&exts)) {
		unsigned type, elen;
		struct rd e;
		enum ch_result r = CH_OK;

		if (!get16(&exts, &type) || !get16(&exts, &elen) || !sub(&exts, elen, &e))
			return CH_MALFORMED;
		for (size_t i = 0; i < nseen; i++)
			if (seen[i] == type)
				return CH_MALFORMED;    /* RFC 8446 4.2: at most once each */
		if (nseen == EXTS_SEEN_MAX)
			return CH_MALFORMED;
		seen[nseen++] = type;
		switch (type) {
		case EXT_SERVER_NAME:
			r = parse_sni(&e, out);
			break;
		case EXT_ALPN:
			r = parse_alpn(&e, out);
			break;
		case EXT_ECH:
			out->has_ech = true;
			break;
		case EXT_SUPPORTED_VERSIONS:
			out->has_supported_versions = true;
			break;
		default:
			break;
		}
		if (r != CH_OK)
			return r;
	}
	return CH_OK;
}

enum ch_result
clienthello_parse(const unsigned char *p, size_t n, struct clienthello *out)
{
	unsigned char hs[EGRESS_CLIENTHELLO_MAX];
	size_t nhs = 0, off = 0, msglen = 0;
	bool have_len = false;

	memset(out, 0, sizeof(*out));
	if (n == 0)
		return CH_NEED_MORE;
	if (p[0] != TLS_RECORD_HANDSHAKE)
		return CH_NOT_TLS;
	if (n >= 2 && p[1] != 3)
		return CH_NOT_TLS;
	/* Gather handshake bytes from consecutive handshake records until the whole
	 * ClientHello is here. */
	for (;;) {
		size_t rlen;

		if (n - off < 5)
			return CH_NEED_MORE;
		if (p[off] != TLS_RECORD_HANDSHAKE || p[off + 1] != 3)
			return off == 0 ? CH_NOT_TLS : CH_MALFORMED;
		rlen = ((size_t)p[off + 3] << 8) | p[off + 4];
		if (rlen == 0 || rlen > TLS_RECORD_MAX)
			return CH_MALFORMED;
		if (n - off - 5 < rlen) {
			/* Decide "too large" early when the length alone says so. */
			if (nhs + rlen > sizeof(hs))
				return CH_TOO_LARGE;
			return CH_NEED_MORE;
		}
		if (nhs + rlen > sizeof(hs))
			return CH_TOO_LARGE;
		memcpy(hs + nhs, p + off + 5, rlen);
		nhs += rlen;
		off += 5 + rlen;
		if (!have_len && nhs >= 4) {
			if (hs[0] != HS_CLIENT_HELLO)
				return CH_MALFORMED;
			msglen = ((size_t)hs[1] << 16) | ((size_t)hs[2] << 8) | hs[3];
			if (msglen + 4 > sizeof(hs))
				return CH_TOO_LARGE;
			if (msglen < 2 + 32 + 1 + 2 + 2 + 1 + 1)
				return CH_MALFORMED;
			have_len = true;
		}
		if (have_len && nhs >= msglen + 4) {
			/* The ClientHello must end with its record: a client sends nothing else
			 * before the server's answer, and trailing bytes would be ambiguous. */
			if (nhs != msglen + 4)
				return CH_MALFORMED;
			break;
		}
	}
	{
		struct rd all = { hs, nhs, 0 }, body;
		unsigned type;
		size_t len;
		enum ch_result r;

		if (!get8(&all, &type) || !get24(&all, &len) || !sub(&all, len, &body) ||
		    !done(&all))
			return CH_MALFORMED;
		r = parse_body(&body, out);
		if (r != CH_OK)
			return r;
	}
	out->consumed = off;
	return CH_OK;
}

enum reason
clienthello_sni_check(const struct clienthello *ch, const struct host *connect_host,
    bool *absent)
{
	*absent = !ch->has_sni;
	if (!ch->has_sni)
		return REASON_ALLOWED;
	if (connect_host->kind != HOST_NAME)
		return REASON_SNI_MISMATCH;
	return strcmp(ch->sni, connect_host->name) == 0 ? REASON_ALLOWED : REASON_SNI_MISMATCH;
}
