/* reasons.c - lookups over the one reason table. */
#include "common/reasons.h"

#include <string.h>

struct reason_row {
	const char *str;
	int status;
	const char *text;
};

static const struct reason_row rows[REASON__COUNT] = {
#define X(id, s, st, t) [REASON_##id] = { s, st, t },
#include "common/reasons.def"
#undef X
};

const char *
reason_str(enum reason r)
{
	if ((unsigned)r >= REASON__COUNT)
		return "internal_error";
	return rows[r].str;
}

int
reason_http_status(enum reason r)
{
	if ((unsigned)r >= REASON__COUNT)
		return 500;
	return rows[r].status;
}

const char *
reason_text(enum reason r)
{
	if ((unsigned)r >= REASON__COUNT)
		return "an internal error occurred";
	return rows[r].text;
}

int
reason_from_str(const char *s, enum reason *out)
{
	if (s == NULL)
		return -1;
	for (int i = 0; i < REASON__COUNT; i++) {
		if (strcmp(rows[i].str, s) == 0) {
			*out = (enum reason)i;
			return 0;
		}
	}
	return -1;
}

const char *
reason_http_phrase(int status)
{
	switch (status) {
	case 200: return "Connection Established";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 405: return "Method Not Allowed";
	case 407: return "Proxy Authentication Required";
	case 408: return "Request Timeout";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default:  return "Error";
	}
}
