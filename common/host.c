/*
 * host.c - the one definition of a canonical destination host[:port] (see common/host.h).
 *
 * Order of work, and why:
 *  1. Refuse bytes that are never part of a host (controls, '@', '\\', space, '*', '%')
 *     on the raw input, so a smuggling attempt is named for what it is.
 *  2. Split host and port; IPv6 literals only inside brackets when a port may follow,
 *     because "a:b::1:443" is ambiguous.
 *  3. Internationalized names go through libidn2 (IDNA2008 + TR46 non-transitional) and
 *     the ASCII result is checked again from the start: TR46 maps fullwidth forms to ASCII
 *     ("１２７．０．０．１" becomes "127.0.0.1", U+FF20 becomes '@').
 *  4. LDH label rules, length limits, "xn--" labels validated by a decode/encode round
 *     trip, then numeric tricks: only canonical dotted-quad IPv4 is an address; anything
 *     else that looks numeric is neither an address nor a name (c-ares and glibc disagree
 *     on what "010.0.0.1" or "127.1" mean, so neither may decide).
 */
#include "common/host.h"

#include <idn2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/*
 * TR46 non-transitional (so "faß" stays "faß"), NFC first. Deliberately NOT
 * IDN2_USE_STD3_ASCII_RULES: libidn2 2.3.x then silently drops STD3-disallowed ASCII
 * ("a_b.de" becomes "ab.de"), which would make two different names one. Instead the
 * ASCII bytes of the input are checked before IDNA, and the whole result after it.
 */
#define HOST_IDN2_FLAGS (IDN2_NONTRANSITIONAL | IDN2_NFC_INPUT)

static bool
is_ctl(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

static bool
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static bool
is_hex(unsigned char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/*
 * Refusals decided by single bytes anywhere in the input. Controls are checked over the
 * whole input first: a NUL or CR/LF is the most telling reason whatever else is there.
 * '%' is left to the caller because inside brackets it means an IPv6 zone id.
 */
static enum host_err
scan_forbidden(const unsigned char *s, size_t len, bool *nonascii)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (is_ctl(s[i]))
			return HOST_ERR_CONTROL;
	if (nonascii != NULL)
		*nonascii = false;
	for (i = 0; i < len; i++) {
		switch (s[i]) {
		case '@':
			return HOST_ERR_USERINFO;
		case '\\':
			return HOST_ERR_BACKSLASH;
		case ' ':
			return HOST_ERR_SPACE;
		case '*':
			return HOST_ERR_WILDCARD;
		default:
			break;
		}
		if (s[i] >= 0x80 && nonascii != NULL)
			*nonascii = true;
	}
	return HOST_OK;
}

/* Strict port: 1-5 decimal digits, no sign, no leading zero, 1-65535. */
static enum host_err
parse_port(const char *p, size_t n, uint16_t *out)
{
	unsigned v = 0;
	size_t i;

	if (n == 0 || n > 5 || p[0] == '0')
		return HOST_ERR_PORT;
	for (i = 0; i < n; i++) {
		if (!is_digit((unsigned char)p[i]))
			return HOST_ERR_PORT;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	if (v < 1 || v > 65535)
		return HOST_ERR_PORT;
	*out = (uint16_t)v;
	return HOST_OK;
}

/* An IPv6 literal without brackets: no zone id, inet_pton-valid per common/addr. */
static enum host_err
parse_v6(const char *s, size_t n, struct host *out)
{
	if (n == 0 || n >= EGRESS_ADDRSTR_MAX || memchr(s, '%', n) != NULL)
		return HOST_ERR_IPV6;
	if (addr_parse_literal(s, n, &out->addr) != ADDR_LIT_V6 || out->addr.family != AF_INET6)
		return HOST_ERR_IPV6;
	if (addr_to_str(&out->addr, out->name, sizeof(out->name)) == NULL)
		return HOST_ERR_IPV6;
	out->kind = HOST_IPV6;
	return HOST_OK;
}

/*
 * An "xn--" label must be valid punycode that decodes to a valid U-label whose encoding
 * is exactly this label; otherwise two spellings could name one host, or an invalid one
 * could reach DNS.
 */
static bool
alabel_valid(const char *label, size_t n)
{
	char a[EGRESS_LABEL_MAX + 1];
	char *u = NULL;
	uint8_t *back = NULL;
	bool ok = false;

	if (n > EGRESS_LABEL_MAX)
		return false;
	memcpy(a, label, n);
	a[n] = '\0';
	if (idn2_to_unicode_8z8z(a, &u, 0) != IDN2_OK || u == NULL || u[0] == '\0')
		goto out;
	if (idn2_lookup_u8((const uint8_t *)u, &back, HOST_IDN2_FLAGS) != IDN2_OK ||
	    back == NULL)
		goto out;
	ok = strcmp((const char *)back, a) == 0;
out:
	idn2_free(u);
	idn2_free(back);
	return ok;
}

/* Label syntax over a lowercase ASCII name without trailing dot. */
static enum host_err
check_labels(const char *name, size_t len)
{
	size_t start = 0, i;

	while (start <= len) {
		const char *lab = name + start;
		const char *dot = memchr(lab, '.', len - start);
		size_t n = dot != NULL ? (size_t)(dot - lab) : len - start;

		if (n == 0)
			return HOST_ERR_EMPTY_LABEL;
		if (n > EGRESS_LABEL_MAX)
			return HOST_ERR_LABEL_TOO_LONG;
		for (i = 0; i < n; i++) {
			unsigned char c = (unsigned char)lab[i];
			if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-'))
				return c == '%' ? HOST_ERR_PERCENT : HOST_ERR_BAD_CHAR;
		}
		if (lab[0] == '-' || lab[n - 1] == '-')
			return HOST_ERR_HYPHEN;
		if (n >= 4 && memcmp(lab, "xn--", 4) == 0 && !alabel_valid(lab, n))
			return HOST_ERR_IDNA;
		start += n + 1;
	}
	return HOST_OK;
}

/*
 * A last label that is all digits, or "0x" plus hex digits, makes the whole name a
 * numeric form to URL parsers and resolvers (WHATWG "ends in a number"): never a name.
 */
static bool
last_label_numeric(const char *name, size_t len)
{
	const char *lab = name + len;
	size_t n, i;

	while (lab > name && lab[-1] != '.')
		lab--;
	n = len - (size_t)(lab - name);

	if (n >= 2 && lab[0] == '0' && lab[1] == 'x') {
		for (i = 2; i < n; i++)
			if (!is_hex((unsigned char)lab[i]))
				return false;
		return true;
	}
	for (i = 0; i < n; i++)
		if (!is_digit((unsigned char)lab[i]))
			return false;
	return n > 0;
}

/* Canonicalize a name or IPv4 literal (no port, no brackets). */
static enum host_err
parse_name(const char *s, size_t n, bool nonascii, struct host *out)
{
	char buf[EGRESS_HOST_INPUT_MAX + 1];
	size_t len, i;
	enum host_err e;
	enum addr_literal lit;

	if (n == 0)
		return HOST_ERR_EMPTY;
	if (n > EGRESS_HOST_INPUT_MAX)
		return HOST_ERR_TOO_LONG;
	if (memchr(s, '%', n) != NULL)
		return HOST_ERR_PERCENT;
	memcpy(buf, s, n);
	buf[n] = '\0';
	len = n;

	if (nonascii) {
		uint8_t *a = NULL;
		int rc;

		/* ASCII bytes of an IDN input obey the same LDH rule as an ASCII name. */
		for (i = 0; i < len; i++) {
			unsigned char c = (unsigned char)buf[i];
			if (c < 0x80 && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    is_digit(c) || c == '-' || c == '.'))
				return HOST_ERR_BAD_CHAR;
		}
		rc = idn2_lookup_u8((const uint8_t *)buf, &a, HOST_IDN2_FLAGS);

		if (rc != IDN2_OK || a == NULL) {
			idn2_free(a);
			if (rc == IDN2_TOO_BIG_DOMAIN)
				return HOST_ERR_TOO_LONG;
			if (rc == IDN2_TOO_BIG_LABEL)
				return HOST_ERR_LABEL_TOO_LONG;
			return HOST_ERR_IDNA;
		}
		len = strlen((const char *)a);
		if (len > EGRESS_HOST_INPUT_MAX) {
			idn2_free(a);
			return HOST_ERR_TOO_LONG;
		}
		memcpy(buf, a, len + 1);
		idn2_free(a);
		/* What TR46 produced is judged like client bytes. */
		for (i = 0; i < len; i++)
			if ((unsigned char)buf[i] >= 0x80)
				return HOST_ERR_IDNA;
		e = scan_forbidden((const unsigned char *)buf, len, NULL);
		if (e != HOST_OK)
			return e;
		if (memchr(buf, '%', len) != NULL)
			return HOST_ERR_PERCENT;
		if (len == 0)
			return HOST_ERR_EMPTY;
	}

	for (i = 0; i < len; i++)
		if (buf[i] >= 'A' && buf[i] <= 'Z')
			buf[i] = (char)(buf[i] - 'A' + 'a');

	/* At most one trailing dot: "a.b." is the FQDN of "a.b"; "a.b.." is not a name. */
	if (buf[len - 1] == '.') {
		buf[--len] = '\0';
		if (len == 0)
			return HOST_ERR_EMPTY;
	}
	if (memchr(buf, ':', len) != NULL)      /* only reachable through TR46 mapping */
		return HOST_ERR_IPV6;

	e = check_labels(buf, len);
	if (e != HOST_OK)
		return e;
	if (len > EGRESS_HOSTNAME_MAX)
		return HOST_ERR_TOO_LONG;

	lit = addr_parse_literal(buf, len, &out->addr);
	switch (lit) {
	case ADDR_LIT_V4:
		if (out->addr.family != AF_INET ||
		    addr_to_str(&out->addr, out->name, sizeof(out->name)) == NULL)
			return HOST_ERR_NUMERIC;
		/* Canonical means the text is exactly what it names. */
		if (strcmp(out->name, buf) != 0)
			return HOST_ERR_NUMERIC;
		out->kind = HOST_IPV4;
		return HOST_OK;
	case ADDR_LIT_INVALID:
		return HOST_ERR_NUMERIC;
	case ADDR_LIT_V6:
		return HOST_ERR_IPV6;
	case ADDR_LIT_NONE:
		break;
	}
	/* Belt and braces over common/addr: numeric last label is never a name. */
	if (last_label_numeric(buf, len))
		return HOST_ERR_NUMERIC;
	memset(&out->addr, 0, sizeof(out->addr));
	memcpy(out->name, buf, len + 1);
	out->kind = HOST_NAME;
	return HOST_OK;
}

enum host_err
host_parse(const char *s, size_t len, int flags, struct host *out)
{
	const char *host, *port = NULL;
	size_t hostlen, portlen = 0;
	bool nonascii = false, bracketed = false, has_port = false;
	enum host_err e;
	struct host h;

	memset(&h, 0, sizeof(h));
	if (out != NULL)
		memset(out, 0, sizeof(*out));
	if (s == NULL || len == 0)
		return HOST_ERR_EMPTY;
	if (len > EGRESS_HOST_INPUT_MAX)
		return HOST_ERR_TOO_LONG;
	if ((flags & HOST_REQUIRE_PORT) && (flags & HOST_NO_PORT))
		return HOST_ERR_PORT;

	e = scan_forbidden((const unsigned char *)s, len, &nonascii);
	if (e != HOST_OK)
		return e;

	if (s[0] == '[') {
		const char *rb = memchr(s, ']', len);
		size_t rest;

		if (rb == NULL)
			return HOST_ERR_IPV6;
		host = s + 1;
		hostlen = (size_t)(rb - host);
		rest = len - (size_t)(rb + 1 - s);
		if (rest > 0) {
			if (rb[1] != ':')
				return HOST_ERR_IPV6;
			has_port = true;
			port = rb + 2;
			portlen = rest - 1;
		}
		bracketed = true;
	} else {
		const char *c1 = memchr(s, ':', len);

		host = s;
		hostlen = len;
		if (c1 != NULL) {
			size_t after = len - (size_t)(c1 + 1 - s);

			if (memchr(c1 + 1, ':', after) != NULL) {
				/* Two or more colons: a bare IPv6 literal, only where no port can
				 * follow; otherwise "::1:443" would be ambiguous. */
				if (!(flags & HOST_NO_PORT))
					return HOST_ERR_IPV6;
				bracketed = true;    /* treat as literal below */
			} else {
				hostlen = (size_t)(c1 - s);
				has_port = true;
				port = c1 + 1;
				portlen = after;
			}
		}
	}

	if (has_port) {
		if (flags & HOST_NO_PORT)
			return HOST_ERR_PORT_FORBIDDEN;
		if (memchr(port, '%', portlen) != NULL)
			return HOST_ERR_PERCENT;
		e = parse_port(port, portlen, &h.port);
		if (e != HOST_OK)
			return e;
	} else if (flags & HOST_REQUIRE_PORT) {
		/* Judge the host first so a bad host is not reported as a missing port. */
		e = bracketed ? parse_v6(host, hostlen, &h) : parse_name(host, hostlen, nonascii, &h);
		return e != HOST_OK ? e : HOST_ERR_PORT_MISSING;
	}

	if (bracketed)
		e = parse_v6(host, hostlen, &h);
	else
		e = parse_name(host, hostlen, nonascii, &h);
	if (e != HOST_OK)
		return e;
	if (out != NULL)
		*out = h;
	return HOST_OK;
}

const char *
host_err_str(enum host_err e)
{
	switch (e) {
	case HOST_OK:
		return "the host is valid";
	case HOST_ERR_EMPTY:
		return "the host is empty";
	case HOST_ERR_TOO_LONG:
		return "the host name is longer than 253 characters";
	case HOST_ERR_LABEL_TOO_LONG:
		return "a label of the host name is longer than 63 characters";
	case HOST_ERR_EMPTY_LABEL:
		return "the host name has an empty label (leading dot, '..', or two trailing dots)";
	case HOST_ERR_USERINFO:
		return "the host contains '@' (userinfo is not allowed)";
	case HOST_ERR_PERCENT:
		return "the host contains '%' (percent-encoding is not allowed)";
	case HOST_ERR_BACKSLASH:
		return "the host contains a backslash";
	case HOST_ERR_CONTROL:
		return "the host contains NUL, a control character or DEL";
	case HOST_ERR_SPACE:
		return "the host contains a space";
	case HOST_ERR_WILDCARD:
		return "the host contains '*' (wildcards are only allowed as '*.' in grant entries)";
	case HOST_ERR_BAD_CHAR:
		return "the host contains a character outside letters, digits, '-' and '.'";
	case HOST_ERR_IDNA:
		return "the internationalized host name is invalid (IDNA2008/UTS#46)";
	case HOST_ERR_NUMERIC:
		return "the host is a non-canonical numeric form (only dotted-quad decimal IPv4 "
		       "without leading zeros is an address; a name may not end in a numeric label)";
	case HOST_ERR_IPV6:
		return "invalid IPv6 literal (it must be in brackets when a port may follow, and "
		       "zone ids are not allowed)";
	case HOST_ERR_PORT:
		return "the port must be a decimal number from 1 to 65535 without sign or "
		       "leading zeros";
	case HOST_ERR_PORT_MISSING:
		return "a port is required (host:port)";
	case HOST_ERR_PORT_FORBIDDEN:
		return "a port is not allowed here";
	case HOST_ERR_HYPHEN:
		return "a label of the host name starts or ends with '-'";
	}
	return "the host is invalid";
}

const char *
host_to_str(const struct host *h, char *buf, size_t len)
{
	int n;

	char port[8];
	size_t nl, np = 0, need;
	bool v6;

	if (buf == NULL || len == 0)
		return NULL;
	/* By hand, not snprintf: every record names its destination (a measurable share of
	 * a transaction's user-space time went to vfprintf). Same output, same failure. */
	v6 = h->kind == HOST_IPV6;
	nl = strnlen(h->name, sizeof(h->name));
	if (h->port) {
		port[np++] = ':';
		np += u64_to_dec(port + np, h->port);
	}
	need = nl + (v6 ? 2 : 0) + np;
	if (need >= len) {
		buf[0] = '\0';
		return NULL;
	}
	n = 0;
	if (v6)
		buf[n++] = '[';
	memcpy(buf + n, h->name, nl);
	n += (int)nl;
	if (v6)
		buf[n++] = ']';
	memcpy(buf + n, port, np);
	n += (int)np;
	buf[n] = '\0';
	return buf;
}
