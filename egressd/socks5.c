/* socks5.c - SOCKS5 client codec (see socks5.h). */
#include "egressd/socks5.h"

#include <string.h>

size_t
socks5_greeting(bool with_auth, uint8_t *buf, size_t len)
{
	size_t n = with_auth ? 4 : 3;

	if (len < n)
		return 0;
	buf[0] = 5;
	buf[1] = with_auth ? 2 : 1;
	buf[2] = SOCKS5_METHOD_NONE;
	if (with_auth)
		buf[3] = SOCKS5_METHOD_USERPASS;
	return n;
}

int
socks5_parse_method(const uint8_t *buf, size_t len, bool offered_auth, uint8_t *method)
{
	if (len < 2)
		return 0;
	if (buf[0] != 5)
		return -1;
	if (buf[1] == SOCKS5_METHOD_NONE ||
	    (buf[1] == SOCKS5_METHOD_USERPASS && offered_auth) ||
	    buf[1] == SOCKS5_METHOD_REFUSED) {
		*method = buf[1];
		return 2;
	}
	return -1;      /* a method we did not offer */
}

size_t
socks5_userpass(const char *user, const char *pass, uint8_t *buf, size_t len)
{
	size_t ul = strlen(user), pl = strlen(pass);

	if (ul == 0 || ul > 255 || pl == 0 || pl > 255 || len < 3 + ul + pl)
		return 0;
	buf[0] = 1;
	buf[1] = (uint8_t)ul;
	memcpy(buf + 2, user, ul);
	buf[2 + ul] = (uint8_t)pl;
	memcpy(buf + 3 + ul, pass, pl);
	return 3 + ul + pl;
}

int
socks5_parse_userpass(const uint8_t *buf, size_t len)
{
	if (len < 2)
		return 0;
	if (buf[0] != 1 || buf[1] != 0)
		return -1;
	return 1;
}

size_t
socks5_connect_name(const char *name, uint16_t port, uint8_t *buf, size_t len)
{
	size_t nl = strlen(name);

	if (nl == 0 || nl > 255 || len < 7 + nl)
		return 0;
	buf[0] = 5; buf[1] = 1; buf[2] = 0; buf[3] = 3;
	buf[4] = (uint8_t)nl;
	memcpy(buf + 5, name, nl);
	buf[5 + nl] = (uint8_t)(port >> 8);
	buf[6 + nl] = (uint8_t)(port & 0xff);
	return 7 + nl;
}

size_t
socks5_connect_addr(const struct addr *a, uint16_t port, uint8_t *buf, size_t len)
{
	size_t al = a->family == AF_INET ? 4 : 16;

	if ((a->family != AF_INET && a->family != AF_INET6) || len < 6 + al)
		return 0;
	buf[0] = 5; buf[1] = 1; buf[2] = 0;
	buf[3] = a->family == AF_INET ? 1 : 4;
	memcpy(buf + 4, a->family == AF_INET ? (const void *)&a->u.v4 : (const void *)&a->u.v6, al);
	buf[4 + al] = (uint8_t)(port >> 8);
	buf[5 + al] = (uint8_t)(port & 0xff);
	return 6 + al;
}

enum reason
socks5_reply_reason(uint8_t code)
{
	switch (code) {
	case 1: return REASON_SOCKS_GENERAL_FAILURE;
	case 2: return REASON_SOCKS_NOT_ALLOWED;
	case 3: return REASON_SOCKS_NET_UNREACHABLE;
	case 4: return REASON_SOCKS_HOST_UNREACHABLE;
	case 5: return REASON_SOCKS_CONN_REFUSED;
	case 6: return REASON_SOCKS_TTL_EXPIRED;
	case 7: return REASON_SOCKS_CMD_UNSUPPORTED;
	case 8: return REASON_SOCKS_ATYP_UNSUPPORTED;
	default: return REASON_PROXY_BAD_RESPONSE;
	}
}

long
socks5_parse_connect(const uint8_t *buf, size_t len, enum reason *reason, struct addr *bound)
{
	size_t need;

	if (len < 2)
		return 0;
	if (buf[0] != 5) {
		*reason = REASON_PROXY_BAD_RESPONSE;
		return -1;
	}
	if (buf[1] != 0) {
		/* Failure replies are final whatever follows: report the code now. */
		*reason = socks5_reply_reason(buf[1]);
		return -1;
	}
	if (len < 4)
		return 0;
	if (buf[2] != 0) {
		*reason = REASON_PROXY_BAD_RESPONSE;
		return -1;
	}
	switch (buf[3]) {
	case 1: need = 4 + 4 + 2; break;
	case 4: need = 4 + 16 + 2; break;
	case 3:
		if (len < 5)
			return 0;
		if (buf[4] == 0) {
			*reason = REASON_PROXY_BAD_RESPONSE;
			return -1;
		}
		need = 5 + (size_t)buf[4] + 2;
		break;
	default:
		*reason = REASON_PROXY_BAD_RESPONSE;
		return -1;
	}
	if (len < need)
		return 0;
	if (bound != NULL) {
		memset(bound, 0, sizeof(*bound));
		if (buf[3] == 1) {
			bound->family = AF_INET;
			memcpy(&bound->u.v4, buf + 4, 4);
		} else if (buf[3] == 4) {
			bound->family = AF_INET6;
			memcpy(&bound->u.v6, buf + 4, 16);
		}
	}
	*reason = REASON_ALLOWED;
	return (long)need;
}
