/*
 * cidr.c - CIDR prefixes and immutable sets of them.
 *
 * The address part goes through addr_parse_literal, so the same strict literal rules hold
 * here as for destinations: "010.0.0.0/8" is refused, not read as octal.
 */
#include "common/cidr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/util.h"

/* Longest accepted text: an IPv6 literal plus "/128". */
#define CIDR_TEXT_MAX (INET6_ADDRSTRLEN + 4)

static bool
bits_zero_from(const uint8_t *b, size_t nbytes, unsigned prefix)
{
	for (size_t i = 0; i < nbytes; i++) {
		unsigned bit0 = (unsigned)i * 8;
		uint8_t mask;

		if (bit0 + 8 <= prefix)
			continue;
		mask = bit0 >= prefix ? 0xff : (uint8_t)(0xff >> (prefix - bit0));
		if (b[i] & mask)
			return false;
	}
	return true;
}

/* Decimal 0..max, no sign, no leading zeros. */
static int
parse_prefix(const char *s, unsigned max, unsigned *out)
{
	unsigned v = 0;
	size_t n = strlen(s);

	if (n == 0 || n > 3 || (n > 1 && s[0] == '0'))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

int
cidr_parse(const char *s, struct cidr *out, const char **err)
{
	const char *slash;
	size_t alen, n;
	struct addr a;
	unsigned prefix, max;

	*err = NULL;
	if (s == NULL || *s == '\0') {
		*err = "empty CIDR";
		return -1;
	}
	n = strnlen(s, CIDR_TEXT_MAX + 1);
	if (n > CIDR_TEXT_MAX) {
		*err = "CIDR too long";
		return -1;
	}
	slash = memchr(s, '/', n);
	alen = slash != NULL ? (size_t)(slash - s) : n;
	switch (addr_parse_literal(s, alen, &a)) {
	case ADDR_LIT_V4:
	case ADDR_LIT_V6:
		break;
	case ADDR_LIT_NONE:
	case ADDR_LIT_INVALID:
		*err = "not a canonical IPv4 or IPv6 address";
		return -1;
	}
	max = a.family == AF_INET ? 32 : 128;
	if (slash == NULL) {
		prefix = max;
	} else if (parse_prefix(slash + 1, max, &prefix) != 0) {
		*err = "prefix length is not a decimal number within the address size";
		return -1;
	}
	const uint8_t *b = a.family == AF_INET ? (const uint8_t *)&a.u.v4 : a.u.v6.s6_addr;
	if (!bits_zero_from(b, max / 8, prefix)) {
		/* "10.0.0.1/8" is ambiguous: a host or a network? Say what you mean. */
		*err = "host bits set below the prefix length";
		return -1;
	}
	out->net = a;
	out->prefix = prefix;
	return 0;
}

const char *
cidr_to_str(const struct cidr *c, char *buf, size_t len)
{
	char a[EGRESS_ADDRSTR_MAX];

	if (buf == NULL || len == 0)
		return "";
	addr_to_str(&c->net, a, sizeof(a));
	if ((size_t)snprintf(buf, len, "%s/%u", a, c->prefix) >= len)
		buf[0] = '\0';
	return buf;
}

int
cidr_set_add(struct cidr_set *set, const struct cidr *c)
{
	struct cidr *nv;

	if (set->n >= EGRESS_GRANT_CIDRS_MAX) {
		errno = E2BIG;
		return -1;
	}
	nv = reallocarray(set->v, set->n + 1, sizeof(*nv));
	if (nv == NULL)
		return -1;
	set->v = nv;
	set->v[set->n++] = *c;
	return 0;
}

int
cidr_set_add_str(struct cidr_set *set, const char *s, const char **err)
{
	struct cidr c;

	if (cidr_parse(s, &c, err) != 0)
		return -1;
	if (cidr_set_add(set, &c) != 0) {
		*err = errno == E2BIG ? "too many CIDR entries" : "out of memory";
		return -1;
	}
	return 0;
}

/* The IPv4 address inside a v4-mapped IPv6 address; false for anything else. */
static bool
unmap_v4(const struct addr *a, struct addr *out)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (a->family != AF_INET6 || memcmp(a->u.v6.s6_addr, pfx, sizeof(pfx)) != 0)
		return false;
	memset(out, 0, sizeof(*out));
	out->family = AF_INET;
	memcpy(&out->u.v4, a->u.v6.s6_addr + 12, 4);
	return true;
}

static bool
prefix_equal(const uint8_t *a, const uint8_t *n, unsigned prefix)
{
	unsigned full = prefix / 8, rem = prefix % 8;

	if (memcmp(a, n, full) != 0)
		return false;
	if (rem == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rem));
	return (a[full] & mask) == (n[full] & mask);
}

bool
cidr_match(const struct cidr *c, const struct addr *a)
{
	if (c == NULL || a == NULL || c->net.family != a->family)
		return false;
	if (a->family == AF_INET)
		return prefix_equal((const uint8_t *)&a->u.v4, (const uint8_t *)&c->net.u.v4,
		    c->prefix);
	if (a->family == AF_INET6)
		return prefix_equal(a->u.v6.s6_addr, c->net.u.v6.s6_addr, c->prefix);
	return false;
}

bool
cidr_set_match(const struct cidr_set *set, const struct addr *a)
{
	struct addr v4;
	bool mapped;

	if (set == NULL || a == NULL)
		return false;
	mapped = unmap_v4(a, &v4);
	for (size_t i = 0; i < set->n; i++) {
		if (cidr_match(&set->v[i], a))
			return true;
		if (mapped && cidr_match(&set->v[i], &v4))
			return true;
	}
	return false;
}

void
cidr_set_free(struct cidr_set *set)
{
	if (set == NULL)
		return;
	free(set->v);
	set->v = NULL;
	set->n = 0;
}
