/* httpresp.c - strict HTTP/1.x response head parser (see httpresp.h). */
#include "egressd/httpresp.h"

#include <string.h>
#include <strings.h>

/* RFC 9110 tchar. */
static int
is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	return strchr("!#$%&'*+-.^_`|~", c) != NULL && c != '\0';
}

/* Field value characters: VCHAR, obs-text, SP, HTAB. */
static int
is_vchar_ws(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* Find the end of a line: returns the index of '\n' (which must follow '\r'), -1 when more
 * bytes are needed, -2 on a bare CR or bare LF. */
static long
line_end(const char *buf, size_t start, size_t len)
{
	for (size_t i = start; i < len; i++) {
		if (buf[i] == '\r') {
			if (i + 1 >= len)
				return -1;
			if (buf[i + 1] != '\n')
				return -2;
			return (long)(i + 1);
		}
		if (buf[i] == '\n')
			return -2;
	}
	return -1;
}

enum httpresp_result
httpresp_parse(const char *buf, size_t len, size_t limit, struct httpresp *out)
{
	size_t pos = 0;
	long e;

	if (limit == 0 || limit > EGRESS_RESPONSE_HEAD_MAX)
		limit = EGRESS_RESPONSE_HEAD_MAX;
	if (len > limit)
		len = limit;               /* never look past the limit */
	memset(out, 0, sizeof(*out));

	/* Status line: HTTP/1.x SP 3DIGIT SP reason-phrase CRLF */
	e = line_end(buf, 0, len);
	if (e == -2)
		return HTTPRESP_INVALID;
	if (e == -1) {
		/* Early rejection of garbage: the prefix must look like "HTTP/1." */
		size_t n = len < 7 ? len : 7;
		if (memcmp(buf, "HTTP/1.", n) != 0)
			return HTTPRESP_INVALID;
		return len >= limit ? HTTPRESP_TOO_LARGE : HTTPRESP_INCOMPLETE;
	}
	{
		size_t ll = (size_t)e - 1;  /* line length without CRLF */
		const char *l = buf;

		/* Status 100-599 (RFC 9110 15): a first digit past 5 is not HTTP. */
		if (ll < 12 || memcmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') ||
		    l[8] != ' ' || l[9] < '1' || l[9] > '5' || l[10] < '0' || l[10] > '9' ||
		    l[11] < '0' || l[11] > '9')
			return HTTPRESP_INVALID;
		if (ll > 12 && l[12] != ' ')
			return HTTPRESP_INVALID;
		out->minor = l[7] - '0';
		out->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
		out->phrase = ll > 13 ? l + 13 : l + ll;
		out->phrase_len = ll > 13 ? ll - 13 : 0;
		for (size_t i = 0; i < out->phrase_len; i++)
			if (!is_vchar_ws((unsigned char)out->phrase[i]))
				return HTTPRESP_INVALID;
		pos = (size_t)e + 1;
	}

	/* Header fields until an empty line. */
	for (;;) {
		size_t ll, colon;
		const char *l;

		e = line_end(buf, pos, len);
		if (e == -2)
			return HTTPRESP_INVALID;
		if (e == -1)
			return len >= limit ? HTTPRESP_TOO_LARGE : HTTPRESP_INCOMPLETE;
		l = buf + pos;
		ll = (size_t)e - 1 - pos;
		if (ll == 0) {
			out->head_len = (size_t)e + 1;
			return HTTPRESP_OK;
		}
		if (l[0] == ' ' || l[0] == '\t')
			return HTTPRESP_INVALID;          /* obs-fold */
		if (out->nheaders >= EGRESS_HEADER_COUNT_MAX)
			return HTTPRESP_TOO_LARGE;
		for (colon = 0; colon < ll && l[colon] != ':'; colon++)
			if (!is_tchar((unsigned char)l[colon]))
				return HTTPRESP_INVALID;  /* includes space before colon */
		if (colon == 0 || colon == ll)
			return HTTPRESP_INVALID;
		{
			size_t vs = colon + 1, ve = ll;
			struct httpresp_header *h = &out->headers[out->nheaders];

			while (vs < ve && (l[vs] == ' ' || l[vs] == '\t'))
				vs++;
			while (ve > vs && (l[ve - 1] == ' ' || l[ve - 1] == '\t'))
				ve--;
			for (size_t i = vs; i < ve; i++)
				if (!is_vchar_ws((unsigned char)l[i]))
					return HTTPRESP_INVALID;
			h->name = l;
			h->name_len = colon;
			h->value = l + vs;
			h->value_len = ve - vs;
			out->nheaders++;
		}
		pos = (size_t)e + 1;
	}
}

long
httpresp_find(const struct httpresp *r, const char *name, size_t nth)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < r->nheaders; i++) {
		if (r->headers[i].name_len == n &&
		    strncasecmp(r->headers[i].name, name, n) == 0) {
			if (nth == 0)
				return (long)i;
			nth--;
		}
	}
	return -1;
}

int
httpresp_value_has_token(const char *value, size_t len, const char *token)
{
	size_t tl = strlen(token), i = 0;

	while (i < len) {
		size_t s, e;

		while (i < len && (value[i] == ' ' || value[i] == '\t' || value[i] == ','))
			i++;
		s = i;
		while (i < len && value[i] != ',')
			i++;
		e = i;
		while (e > s && (value[e - 1] == ' ' || value[e - 1] == '\t'))
			e--;
		if (e - s == tl && strncasecmp(value + s, token, tl) == 0)
			return 1;
	}
	return 0;
}
