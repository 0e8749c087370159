/*
 * addr - strict IP literals and special-purpose address classes.
 *
 * Owns: what counts as an IP literal (decided here, before anything reaches c-ares or
 * getaddrinfo, which disagree: "010.0.0.1", "127.1", "2130706433"), and the classification
 * of any address against the IANA IPv4 and IPv6 special-purpose address registries,
 * including IPv4 addresses embedded in IPv6 forms (v4-mapped, v4-compatible, NAT64
 * 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32).
 * Callers: common/host, common/cidr, egressd (authorization, resolve, pinning).
 * No allocation; nothing to free.
 */
#ifndef EGRESS_ADDR_H
#define EGRESS_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* An address of either family. Compare with addr_equal, never memcmp of the struct. */
struct addr {
	int family;                 /* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} u;
};

/* Outcome of addr_parse_literal. */
enum addr_literal {
	ADDR_LIT_V4,        /* canonical dotted-quad decimal, e.g. 198.51.100.7 */
	ADDR_LIT_V6,        /* IPv6 literal (bare or in brackets when allowed by caller) */
	ADDR_LIT_NONE,      /* not an address: treat as a host name */
	ADDR_LIT_INVALID,   /* looks numeric but is not canonical (octal, hex, short, integer,
	                       leading zeros, zone id): neither an address nor a host name */
};

/*
 * Decide whether s (len bytes, not necessarily NUL-terminated) is an IP literal.
 * IPv4: exactly four decimal octets 0-255, no leading zeros ("010.1.1.1" is INVALID),
 * no hex/octal/short/bare-integer forms (INVALID). IPv6: inet_pton-valid text, no zone id
 * ("%eth0" is INVALID), no brackets (strip them before calling); any text containing ':'
 * is V6 or INVALID. A name that "ends in a number" (WHATWG URL: its last label, ignoring
 * one trailing dot, is all digits or 0x followed by hex digits, e.g. "example.123",
 * "1.2.3.4.", "0x7f000001") is INVALID unless it is exactly a canonical dotted quad:
 * resolvers disagree on such names, so they are refused. Embedded NUL is INVALID; empty
 * is NONE. On V4/V6 fills *out (may be NULL).
 */
enum addr_literal addr_parse_literal(const char *s, size_t len, struct addr *out);

/* Canonical text (inet_ntop; v6 compressed lowercase). buf of EGRESS_ADDRSTR_MAX bytes. */
const char *addr_to_str(const struct addr *a, char *buf, size_t len);

bool addr_equal(const struct addr *a, const struct addr *b);
void addr_from_sockaddr(struct addr *out, const struct sockaddr *sa);
/* Build a sockaddr for connect(); returns its length, 0 on bad family. */
socklen_t addr_to_sockaddr(const struct addr *a, uint16_t port, struct sockaddr_storage *ss);

/*
 * Address classes from the IANA special-purpose registries. ADDR_CLASS_PUBLIC means
 * globally reachable and not special. Every other class is blocked by default in egressd.
 *
 * Policy choices (a security proxy fails closed where the registry is permissive):
 * - The registry marks some rows "globally reachable" (192.0.0.9/32 PCP anycast,
 *   192.0.0.10/32 TURN anycast, and 2001:1::1/128, 2001:1::2/128, 2001:1::3/128,
 *   2001:3::/32, 2001:4:112::/48, 2001:20::/28, 2001:30::/28 inside 2001::/23). We still
 *   classify all of 192.0.0.0/24 and 2001::/23 as special: a worker has no business with
 *   protocol anycast services, and an operator can lift a class with an explicit override.
 *   Sub-rows with their own class (AS112, AMT, ORCHID, benchmarking, Teredo, dummy) keep
 *   it; the rest are IETF.
 * - The most specific (longest) matching row wins.
 * - IPv6 outside 2000::/3 that no row names is RESERVED (unallocated space).
 * - 64:ff9b::/96 is globally reachable: an address there takes the class of its embedded
 *   IPv4 address (PUBLIC when that is public), so IPv6-only hosts behind DNS64 work.
 * - v4-mapped, v4-compatible, 6to4, Teredo and 64:ff9b:1::/48 are never PUBLIC: with a
 *   special embedded address they take its class, otherwise their own class below.
 * New classes are appended before ADDR_CLASS__COUNT so existing values never move.
 */
enum addr_class {
	ADDR_CLASS_PUBLIC = 0,
	ADDR_CLASS_THIS_NETWORK,      /* 0.0.0.0/8, 0.0.0.0/32 */
	ADDR_CLASS_PRIVATE,           /* 10/8, 172.16/12, 192.168/16 */
	ADDR_CLASS_SHARED,            /* 100.64/10 (CGNAT) */
	ADDR_CLASS_LOOPBACK,          /* 127/8, ::1 */
	ADDR_CLASS_LINK_LOCAL,        /* 169.254/16, fe80::/10 */
	ADDR_CLASS_IETF,              /* 192.0.0.0/24 (and its sub-rows), 2001::/23 rest */
	ADDR_CLASS_DOCUMENTATION,     /* 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20 */
	ADDR_CLASS_BENCHMARKING,      /* 198.18/15, 2001:2::/48 */
	ADDR_CLASS_6TO4_RELAY,        /* 192.88.99.0/24, 192.88.99.2/32 */
	ADDR_CLASS_AS112,             /* 192.31.196/24, 192.175.48/24, 2620:4f:8000::/48, 2001:4:112::/48 */
	ADDR_CLASS_AMT,               /* 192.52.193/24, 2001:3::/32 */
	ADDR_CLASS_ORCHID,            /* 2001:10::/28, 2001:20::/28 */
	ADDR_CLASS_MULTICAST,         /* 224/4, ff00::/8 */
	ADDR_CLASS_RESERVED,          /* 240/4; IPv6 outside 2000::/3 not otherwise named */
	ADDR_CLASS_BROADCAST,         /* 255.255.255.255/32 */
	ADDR_CLASS_UNSPECIFIED,       /* ::/128 */
	ADDR_CLASS_DISCARD,           /* 100::/64 */
	ADDR_CLASS_ULA,               /* fc00::/7 */
	ADDR_CLASS_SITE_LOCAL,        /* fec0::/10 (deprecated) */
	ADDR_CLASS_SEGMENT_ROUTING,   /* 5f00::/16 */
	ADDR_CLASS_DUMMY,             /* 192.0.0.8/32, 100:0:0:1::/64 (dummy prefixes) */
	ADDR_CLASS_TEREDO,            /* 2001::/32 with a public client address */
	ADDR_CLASS_NAT64_LOCAL,       /* 64:ff9b:1::/48 with a public embedded address */
	ADDR_CLASS_V4MAPPED,          /* ::ffff:0:0/96 with a public embedded address */
	ADDR_CLASS_V4COMPAT,          /* ::/96 (deprecated) with a public embedded address */
	ADDR_CLASS_6TO4,              /* 2002::/16 with a public embedded address */
	ADDR_CLASS__COUNT
};

/*
 * Classify a, looking inside IPv6 forms that embed IPv4 (v4-mapped ::ffff:0:0/96,
 * v4-compatible ::/96 other than :: and ::1, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4
 * 2002::/16, Teredo 2001::/32 whose client address is the inverted last 32 bits): when the
 * embedded address is special, that class is returned. For 64:ff9b:1::/48 every RFC 6052
 * position (/96, /64, /56, /48, in that order) is examined and the first special one
 * decides, ignoring this-network (0.0.0.0/8) which is what zero padding reads as. 'embedded' (may
 * be NULL) is set true when an embedded IPv4 address decided the class, false otherwise.
 * A family other than AF_INET/AF_INET6 classifies as RESERVED.
 */
enum addr_class addr_classify(const struct addr *a, bool *embedded);

/* Stable name of a class ("private", "loopback", "documentation", ...). */
const char *addr_class_str(enum addr_class c);

#endif
