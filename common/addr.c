/*
 * addr.c - strict IP literals and IANA special-purpose classification.
 *
 * Why strict: glibc's inet_aton, getaddrinfo and c-ares each accept their own set of
 * numeric shorthands ("127.1", "0x7f.1", "017700000001", "2130706433"). If we let any
 * of those through as a host name, a resolver could turn it into 127.0.0.1 after the
 * authorization step looked at a harmless-looking name. So one place decides: canonical
 * dotted quads and inet_pton IPv6 text are literals, anything else that ends in a number
 * is refused outright.
 *
 * Classification is table-driven: one table per family of (prefix, length, class), the
 * longest matching row wins. The tables are the IANA special-purpose registries row by
 * row (plus multicast, site-local and the IPv6 default for unallocated space).
 */
#include "common/addr.h"

#include <arpa/inet.h>
#include <string.h>

#include "common/limits.h"
#include "common/util.h"

/* ---------- literal parsing ---------- */

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool
is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/*
 * WHATWG URL "ends in a number": the last label (ignoring one trailing dot) is all digits,
 * or "0x"/"0X" followed by hex digits (possibly none). Such a name is never a host name.
 */
static bool
ends_in_number(const char *s, size_t len)
{
	size_t end = len, start;

	if (len == 0)
		return false;
	if (s[len - 1] == '.') {
		if (len == 1)
			return false;
		end = len - 1;
	}
	start = end;
	while (start > 0 && s[start - 1] != '.')
		start--;
	if (start == end)
		return false;
	bool digits = true;
	for (size_t i = start; i < end; i++)
		if (!is_digit(s[i]))
			digits = false;
	if (digits)
		return true;
	if (end - start >= 2 && s[start] == '0' && (s[start + 1] == 'x' || s[start + 1] == 'X')) {
		for (size_t i = start + 2; i < end; i++)
			if (!is_hex(s[i]))
				return false;
		return true;
	}
	return false;
}

/* Exactly four decimal octets 0-255 without leading zeros. */
static bool
parse_dotted_quad(const char *s, size_t len, struct in_addr *out)
{
	uint32_t v = 0;
	size_t i = 0;

	for (int part = 0; part < 4; part++) {
		unsigned octet = 0;
		size_t start = i;

		while (i < len && is_digit(s[i]) && i - start < 3) {
			octet = octet * 10 + (unsigned)(s[i] - '0');
			i++;
		}
		if (i == start || octet > 255)
			return false;
		if (i - start > 1 && s[start] == '0')
			return false;           /* leading zero: octal in inet_aton */
		v = (v << 8) | octet;
		if (part < 3) {
			if (i >= len || s[i] != '.')
				return false;
			i++;
		}
	}
	if (i != len)
		return false;
	out->s_addr = htonl(v);
	return true;
}

enum addr_literal
addr_parse_literal(const char *s, size_t len, struct addr *out)
{
	char buf[INET6_ADDRSTRLEN];

	if (s == NULL || len == 0)
		return ADDR_LIT_NONE;
	if (memchr(s, '\0', len) != NULL)
		return ADDR_LIT_INVALID;
	if (memchr(s, ':', len) != NULL) {
		struct in6_addr a6;

		/* A zone id names an interface of this host: never acceptable from a worker. */
		if (memchr(s, '%', len) != NULL || len >= sizeof(buf))
			return ADDR_LIT_INVALID;
		memcpy(buf, s, len);
		buf[len] = '\0';
		if (inet_pton(AF_INET6, buf, &a6) != 1)
			return ADDR_LIT_INVALID;
		if (out != NULL) {
			memset(out, 0, sizeof(*out));
			out->family = AF_INET6;
			out->u.v6 = a6;
		}
		return ADDR_LIT_V6;
	}
	if (!ends_in_number(s, len))
		return ADDR_LIT_NONE;
	struct in_addr a4;
	if (!parse_dotted_quad(s, len, &a4))
		return ADDR_LIT_INVALID;
	if (out != NULL) {
		memset(out, 0, sizeof(*out));
		out->family = AF_INET;
		out->u.v4 = a4;
	}
	return ADDR_LIT_V4;
}

const char *
addr_to_str(const struct addr *a, char *buf, size_t len)
{
	if (buf == NULL || len == 0)
		return "";
	buf[0] = '\0';
	if (a == NULL)
		return buf;
	if (a->family == AF_INET) {
		/* by hand: glibc's inet_ntop formats IPv4 with sprintf, and every record and
		 * every connection formats addresses (a measurable share of a transaction) */
		const unsigned char *b = (const unsigned char *)&a->u.v4.s_addr;
		char tmp[INET_ADDRSTRLEN];
		size_t n = 0;

		for (int i = 0; i < 4; i++) {
			if (i > 0)
				tmp[n++] = '.';
			n += u64_to_dec(tmp + n, b[i]);
		}
		if (n >= len)
			return buf;        /* too small: "" as inet_ntop's failure gave */
		memcpy(buf, tmp, n);
		buf[n] = '\0';
	} else if (a->family == AF_INET6) {
		if (inet_ntop(AF_INET6, &a->u.v6, buf, (socklen_t)len) == NULL)
			buf[0] = '\0';
	}
	return buf;
}

bool
addr_equal(const struct addr *a, const struct addr *b)
{
	if (a->family != b->family)
		return false;
	if (a->family == AF_INET)
		return a->u.v4.s_addr == b->u.v4.s_addr;
	if (a->family == AF_INET6)
		return memcmp(&a->u.v6, &b->u.v6, sizeof(a->u.v6)) == 0;
	return false;
}

void
addr_from_sockaddr(struct addr *out, const struct sockaddr *sa)
{
	memset(out, 0, sizeof(*out));
	if (sa == NULL)
		return;
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in sin;

		memcpy(&sin, sa, sizeof(sin));
		out->family = AF_INET;
		out->u.v4 = sin.sin_addr;
	} else if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 sin6;

		memcpy(&sin6, sa, sizeof(sin6));
		out->family = AF_INET6;
		out->u.v6 = sin6.sin6_addr;
	}
}

socklen_t
addr_to_sockaddr(const struct addr *a, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in sin;

		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons(port);
		sin.sin_addr = a->u.v4;
		memcpy(ss, &sin, sizeof(sin));
		return sizeof(sin);
	}
	if (a->family == AF_INET6) {
		struct sockaddr_in6 sin6;

		memset(&sin6, 0, sizeof(sin6));
		sin6.sin6_family = AF_INET6;
		sin6.sin6_port = htons(port);
		sin6.sin6_addr = a->u.v6;
		memcpy(ss, &sin6, sizeof(sin6));
		return sizeof(sin6);
	}
	return 0;
}

/* ---------- classification tables ---------- */

struct v4_row {
	uint32_t net;           /* host order */
	unsigned len;
	enum addr_class cls;
};

#define V4(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (uint32_t)(d))

/* IANA IPv4 Special-Purpose Address Registry, every row, plus multicast. */
static const struct v4_row v4_table[] = {
	{ V4(0, 0, 0, 0), 8, ADDR_CLASS_THIS_NETWORK },       /* RFC 791 "this network" */
	{ V4(0, 0, 0, 0), 32, ADDR_CLASS_THIS_NETWORK },      /* RFC 1122 "this host" */
	{ V4(10, 0, 0, 0), 8, ADDR_CLASS_PRIVATE },           /* RFC 1918 */
	{ V4(100, 64, 0, 0), 10, ADDR_CLASS_SHARED },         /* RFC 6598 */
	{ V4(127, 0, 0, 0), 8, ADDR_CLASS_LOOPBACK },         /* RFC 1122 */
	{ V4(169, 254, 0, 0), 16, ADDR_CLASS_LINK_LOCAL },    /* RFC 3927 */
	{ V4(172, 16, 0, 0), 12, ADDR_CLASS_PRIVATE },        /* RFC 1918 */
	{ V4(192, 0, 0, 0), 24, ADDR_CLASS_IETF },            /* RFC 6890 */
	{ V4(192, 0, 0, 0), 29, ADDR_CLASS_IETF },            /* RFC 7335 service continuity */
	{ V4(192, 0, 0, 8), 32, ADDR_CLASS_DUMMY },           /* RFC 7600 */
	{ V4(192, 0, 0, 9), 32, ADDR_CLASS_IETF },            /* RFC 7723 PCP anycast */
	{ V4(192, 0, 0, 10), 32, ADDR_CLASS_IETF },           /* RFC 8155 TURN anycast */
	{ V4(192, 0, 0, 170), 32, ADDR_CLASS_IETF },          /* RFC 7050 NAT64 discovery */
	{ V4(192, 0, 0, 171), 32, ADDR_CLASS_IETF },          /* RFC 7050 DNS64 discovery */
	{ V4(192, 0, 2, 0), 24, ADDR_CLASS_DOCUMENTATION },   /* RFC 5737 TEST-NET-1 */
	{ V4(192, 31, 196, 0), 24, ADDR_CLASS_AS112 },        /* RFC 7535 */
	{ V4(192, 52, 193, 0), 24, ADDR_CLASS_AMT },          /* RFC 7450 */
	{ V4(192, 88, 99, 0), 24, ADDR_CLASS_6TO4_RELAY },    /* RFC 7526 (deprecated) */
	{ V4(192, 88, 99, 2), 32, ADDR_CLASS_6TO4_RELAY },    /* RFC 6751 6a44 relay anycast */
	{ V4(192, 168, 0, 0), 16, ADDR_CLASS_PRIVATE },       /* RFC 1918 */
	{ V4(192, 175, 48, 0), 24, ADDR_CLASS_AS112 },        /* RFC 7534 direct delegation */
	{ V4(198, 18, 0, 0), 15, ADDR_CLASS_BENCHMARKING },   /* RFC 2544 */
	{ V4(198, 51, 100, 0), 24, ADDR_CLASS_DOCUMENTATION },/* RFC 5737 TEST-NET-2 */
	{ V4(203, 0, 113, 0), 24, ADDR_CLASS_DOCUMENTATION }, /* RFC 5737 TEST-NET-3 */
	{ V4(224, 0, 0, 0), 4, ADDR_CLASS_MULTICAST },        /* RFC 5771 */
	{ V4(240, 0, 0, 0), 4, ADDR_CLASS_RESERVED },         /* RFC 1112 */
	{ V4(255, 255, 255, 255), 32, ADDR_CLASS_BROADCAST }, /* RFC 919 */
};

struct v6_row {
	uint8_t net[16];
	unsigned len;
	enum addr_class cls;
};

/* Bytes of an IPv6 prefix, written as its 16-bit groups. */
#define G(a, b, c, d, e, f, g, h) { \
	(uint8_t)((a) >> 8), (uint8_t)(a), (uint8_t)((b) >> 8), (uint8_t)(b), \
	(uint8_t)((c) >> 8), (uint8_t)(c), (uint8_t)((d) >> 8), (uint8_t)(d), \
	(uint8_t)((e) >> 8), (uint8_t)(e), (uint8_t)((f) >> 8), (uint8_t)(f), \
	(uint8_t)((g) >> 8), (uint8_t)(g), (uint8_t)((h) >> 8), (uint8_t)(h) }

/*
 * IANA IPv6 Special-Purpose Address Registry, every row, plus ULA, link-local,
 * site-local and multicast. The embedding rows (::ffff:0:0/96, ::/96, 64:ff9b::/96,
 * 64:ff9b:1::/48, 2002::/16, 2001::/32) carry the class used when the embedded address
 * is public; addr_classify looks inside them first.
 */
static const struct v6_row v6_table[] = {
	{ G(0, 0, 0, 0, 0, 0, 0, 1), 128, ADDR_CLASS_LOOPBACK },          /* RFC 4291 */
	{ G(0, 0, 0, 0, 0, 0, 0, 0), 128, ADDR_CLASS_UNSPECIFIED },       /* RFC 4291 */
	{ G(0, 0, 0, 0, 0, 0, 0, 0), 96, ADDR_CLASS_V4COMPAT },           /* RFC 4291 deprecated */
	{ G(0, 0, 0, 0, 0, 0xffff, 0, 0), 96, ADDR_CLASS_V4MAPPED },      /* RFC 4291 */
	{ G(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96, ADDR_CLASS_PUBLIC },     /* RFC 6052 (reachable) */
	{ G(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48, ADDR_CLASS_NAT64_LOCAL },/* RFC 8215 */
	{ G(0x100, 0, 0, 0, 0, 0, 0, 0), 64, ADDR_CLASS_DISCARD },        /* RFC 6666 */
	{ G(0x100, 0, 0, 1, 0, 0, 0, 0), 64, ADDR_CLASS_DUMMY },          /* RFC 9780 */
	{ G(0x2001, 0, 0, 0, 0, 0, 0, 0), 23, ADDR_CLASS_IETF },          /* RFC 2928 */
	{ G(0x2001, 0, 0, 0, 0, 0, 0, 0), 32, ADDR_CLASS_TEREDO },        /* RFC 4380 */
	{ G(0x2001, 1, 0, 0, 0, 0, 0, 1), 128, ADDR_CLASS_IETF },         /* RFC 7723 PCP anycast */
	{ G(0x2001, 1, 0, 0, 0, 0, 0, 2), 128, ADDR_CLASS_IETF },         /* RFC 8155 TURN anycast */
	{ G(0x2001, 1, 0, 0, 0, 0, 0, 3), 128, ADDR_CLASS_IETF },         /* RFC 9665 DNS-SD SRP */
	{ G(0x2001, 2, 0, 0, 0, 0, 0, 0), 48, ADDR_CLASS_BENCHMARKING },  /* RFC 5180 */
	{ G(0x2001, 3, 0, 0, 0, 0, 0, 0), 32, ADDR_CLASS_AMT },           /* RFC 7450 */
	{ G(0x2001, 4, 0x112, 0, 0, 0, 0, 0), 48, ADDR_CLASS_AS112 },     /* RFC 7535 */
	{ G(0x2001, 0x10, 0, 0, 0, 0, 0, 0), 28, ADDR_CLASS_ORCHID },     /* RFC 4843 (deprecated) */
	{ G(0x2001, 0x20, 0, 0, 0, 0, 0, 0), 28, ADDR_CLASS_ORCHID },     /* RFC 7343 ORCHIDv2 */
	{ G(0x2001, 0x30, 0, 0, 0, 0, 0, 0), 28, ADDR_CLASS_IETF },       /* RFC 9374 DRIP DET */
	{ G(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32, ADDR_CLASS_DOCUMENTATION }, /* RFC 3849 */
	{ G(0x2002, 0, 0, 0, 0, 0, 0, 0), 16, ADDR_CLASS_6TO4 },          /* RFC 3056 */
	{ G(0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0), 48, ADDR_CLASS_AS112 }, /* RFC 7534 */
	{ G(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20, ADDR_CLASS_DOCUMENTATION }, /* RFC 9637 */
	{ G(0x5f00, 0, 0, 0, 0, 0, 0, 0), 16, ADDR_CLASS_SEGMENT_ROUTING }, /* RFC 9602 */
	{ G(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7, ADDR_CLASS_ULA },            /* RFC 4193 */
	{ G(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10, ADDR_CLASS_LINK_LOCAL },    /* RFC 4291 */
	{ G(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10, ADDR_CLASS_SITE_LOCAL },    /* RFC 3879 */
	{ G(0xff00, 0, 0, 0, 0, 0, 0, 0), 8, ADDR_CLASS_MULTICAST },      /* RFC 4291 */
};

static bool
v6_prefix_match(const uint8_t *a, const uint8_t *net, unsigned len)
{
	unsigned full = len / 8, rem = len % 8;

	if (memcmp(a, net, full) != 0)
		return false;
	if (rem == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rem));
	return (a[full] & mask) == (net[full] & mask);
}

/* Longest matching v4 row; PUBLIC when none. */
static enum addr_class
classify_v4(uint32_t host)
{
	enum addr_class cls = ADDR_CLASS_PUBLIC;
	int best = -1;

	for (size_t i = 0; i < EGRESS_NELEM(v4_table); i++) {
		const struct v4_row *r = &v4_table[i];
		uint32_t mask = r->len == 0 ? 0 : 0xffffffffu << (32 - r->len);

		if ((host & mask) == r->net && (int)r->len > best) {
			best = (int)r->len;
			cls = r->cls;
		}
	}
	return cls;
}

/* Longest matching v6 row, or NULL when none. */
static const struct v6_row *
lookup_v6(const uint8_t *a)
{
	const struct v6_row *best = NULL;

	for (size_t i = 0; i < EGRESS_NELEM(v6_table); i++) {
		const struct v6_row *r = &v6_table[i];

		if (v6_prefix_match(a, r->net, r->len) && (best == NULL || r->len > best->len))
			best = r;
	}
	return best;
}

static uint32_t
be32_at(const uint8_t *b, size_t i0, size_t i1, size_t i2, size_t i3)
{
	return ((uint32_t)b[i0] << 24) | ((uint32_t)b[i1] << 16) | ((uint32_t)b[i2] << 8) |
	    (uint32_t)b[i3];
}

/*
 * Embedded IPv4 candidates of an address that matched row r. Returns how many were
 * written to out (at most 4).
 */
static size_t
embedded_v4(const struct v6_row *r, const uint8_t *b, uint32_t out[4])
{
	switch (r->cls) {
	case ADDR_CLASS_V4MAPPED:
	case ADDR_CLASS_V4COMPAT:
		out[0] = be32_at(b, 12, 13, 14, 15);
		return 1;
	case ADDR_CLASS_PUBLIC:          /* 64:ff9b::/96, the only PUBLIC row */
		out[0] = be32_at(b, 12, 13, 14, 15);
		return 1;
	case ADDR_CLASS_NAT64_LOCAL:
		/* RFC 6052 positions for prefixes /96, /64, /56, /48 (byte 8 is the u octet). */
		out[0] = be32_at(b, 12, 13, 14, 15);
		out[1] = be32_at(b, 9, 10, 11, 12);
		out[2] = be32_at(b, 7, 9, 10, 11);
		out[3] = be32_at(b, 6, 7, 9, 10);
		return 4;
	case ADDR_CLASS_6TO4:
		out[0] = be32_at(b, 2, 3, 4, 5);
		return 1;
	case ADDR_CLASS_TEREDO:
		out[0] = ~be32_at(b, 12, 13, 14, 15);   /* client address is stored inverted */
		return 1;
	case ADDR_CLASS_THIS_NETWORK:
	case ADDR_CLASS_PRIVATE:
	case ADDR_CLASS_SHARED:
	case ADDR_CLASS_LOOPBACK:
	case ADDR_CLASS_LINK_LOCAL:
	case ADDR_CLASS_IETF:
	case ADDR_CLASS_DOCUMENTATION:
	case ADDR_CLASS_BENCHMARKING:
	case ADDR_CLASS_6TO4_RELAY:
	case ADDR_CLASS_AS112:
	case ADDR_CLASS_AMT:
	case ADDR_CLASS_ORCHID:
	case ADDR_CLASS_MULTICAST:
	case ADDR_CLASS_RESERVED:
	case ADDR_CLASS_BROADCAST:
	case ADDR_CLASS_UNSPECIFIED:
	case ADDR_CLASS_DISCARD:
	case ADDR_CLASS_ULA:
	case ADDR_CLASS_SITE_LOCAL:
	case ADDR_CLASS_SEGMENT_ROUTING:
	case ADDR_CLASS_DUMMY:
	case ADDR_CLASS__COUNT:
		break;
	}
	return 0;
}

enum addr_class
addr_classify(const struct addr *a, bool *embedded)
{
	if (embedded != NULL)
		*embedded = false;
	if (a == NULL)
		return ADDR_CLASS_RESERVED;
	if (a->family == AF_INET)
		return classify_v4(ntohl(a->u.v4.s_addr));
	if (a->family != AF_INET6)
		return ADDR_CLASS_RESERVED;

	const uint8_t *b = a->u.v6.s6_addr;
	const struct v6_row *r = lookup_v6(b);
	if (r == NULL) {
		/* Outside every row: only 2000::/3 is allocated global unicast. */
		return (b[0] & 0xe0) == 0x20 ? ADDR_CLASS_PUBLIC : ADDR_CLASS_RESERVED;
	}
	uint32_t cand[4];
	size_t n = embedded_v4(r, b, cand);
	for (size_t i = 0; i < n; i++) {
		enum addr_class c = classify_v4(cand[i]);

		/*
		 * With several candidate positions (64:ff9b:1::/48) the zero padding around the
		 * real one reads as 0.x.y.z; that says nothing, and the row is never PUBLIC.
		 */
		if (n > 1 && c == ADDR_CLASS_THIS_NETWORK)
			continue;
		if (c != ADDR_CLASS_PUBLIC) {
			if (embedded != NULL)
				*embedded = true;
			return c;
		}
	}
	return r->cls;
}

static const char *const class_names[ADDR_CLASS__COUNT] = {
	[ADDR_CLASS_PUBLIC] = "public",
	[ADDR_CLASS_THIS_NETWORK] = "this-network",
	[ADDR_CLASS_PRIVATE] = "private",
	[ADDR_CLASS_SHARED] = "shared",
	[ADDR_CLASS_LOOPBACK] = "loopback",
	[ADDR_CLASS_LINK_LOCAL] = "link-local",
	[ADDR_CLASS_IETF] = "ietf-protocol",
	[ADDR_CLASS_DOCUMENTATION] = "documentation",
	[ADDR_CLASS_BENCHMARKING] = "benchmarking",
	[ADDR_CLASS_6TO4_RELAY] = "6to4-relay",
	[ADDR_CLASS_AS112] = "as112",
	[ADDR_CLASS_AMT] = "amt",
	[ADDR_CLASS_ORCHID] = "orchid",
	[ADDR_CLASS_MULTICAST] = "multicast",
	[ADDR_CLASS_RESERVED] = "reserved",
	[ADDR_CLASS_BROADCAST] = "broadcast",
	[ADDR_CLASS_UNSPECIFIED] = "unspecified",
	[ADDR_CLASS_DISCARD] = "discard",
	[ADDR_CLASS_ULA] = "unique-local",
	[ADDR_CLASS_SITE_LOCAL] = "site-local",
	[ADDR_CLASS_SEGMENT_ROUTING] = "segment-routing",
	[ADDR_CLASS_DUMMY] = "dummy",
	[ADDR_CLASS_TEREDO] = "teredo",
	[ADDR_CLASS_NAT64_LOCAL] = "nat64-local",
	[ADDR_CLASS_V4MAPPED] = "ipv4-mapped",
	[ADDR_CLASS_V4COMPAT] = "ipv4-compatible",
	[ADDR_CLASS_6TO4] = "6to4",
};

const char *
addr_class_str(enum addr_class c)
{
	if ((unsigned)c >= ADDR_CLASS__COUNT || class_names[c] == NULL)
		return "unknown";
	return class_names[c];
}
