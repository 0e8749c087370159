/*
 * dnsstub - the stub resolver a run's worker sees at its gateway address when transparent
 * capture is on (docs/transparent.md): A queries for names the run's grant names get an
 * address from the grant's synthetic pool (egressd/tpool), AAAA and every other type for
 * such a name an empty NOERROR answer, any other name NXDOMAIN and a deny record
 * (dns_not_granted; past a budget, a count: dnsstub_budget below). Nothing is ever looked up on behalf of the worker: the real resolution
 * happens when a captured connection is authorized, exactly as for CONNECT.
 *
 * Owns: struct dnsstub (the UDP socket egress-exec made in the run's link namespace and
 * passed with grant.dns, its read event, and the timer that writes the count of
 * suppressed deny records). Callers: egressd/control (grant.dns creates
 * it), egressd/grants (the grant frees it), fuzz/fuzz_dnsstub and tests (the pure parser and
 * answer builder). Event-loop thread only.
 *
 * The query parser reads hostile bytes: strict and bounded. One message of at most
 * EGRESS_DNSSTUB_MSG_MAX bytes; a header whose QR bit is clear; QDCOUNT exactly 1,
 * ANCOUNT and NSCOUNT 0, ARCOUNT at most 1 (an EDNS OPT record, ignored: answers carry no
 * OPT and stay under 512 bytes); the question's name as plain labels (no compression
 * pointer, no extended label type), each 1..63 bytes, the whole name at most 255 bytes in
 * wire form; nothing follows the question except the one additional record, which is not
 * parsed. Opcodes other than QUERY are answered NOTIMP, a malformed question FORMERR, a
 * message without a readable header is dropped.
 *
 * Why not a library: Debian 12's c-ares is 1.18.1, whose only message parsers read answers
 * (ares_parse_*_reply); a parser of queries (ares_dns_parse) came with 1.22. A query with
 * one uncompressed question is small enough to parse strictly here (fuzz/fuzz_dnsstub.c).
 */
#ifndef EGRESS_DNSSTUB_H
#define EGRESS_DNSSTUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

#define DNS_TYPE_A     1
#define DNS_TYPE_AAAA  28
#define DNS_CLASS_IN   1

#define DNS_RCODE_NOERROR  0
#define DNS_RCODE_FORMERR  1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_NOTIMP   4

#define DNS_HEADER_LEN 12
#define DNS_NAME_WIRE_MAX 255

enum dnsq_result {
	DNSQ_OK = 0,        /* one question parsed */
	DNSQ_DROP,          /* not even a query header: no answer at all */
	DNSQ_FORMERR,       /* a query header, but the rest is malformed */
	DNSQ_NOTIMP,        /* an opcode other than QUERY */
};

struct dnsq {
	uint16_t id;
	uint16_t flags;             /* the query's header flags (opcode, RD are echoed) */
	uint16_t qtype, qclass;
	size_t qend;                /* offset just past the question (12 + name + 4) */
	/* The name as dotted text, lowercase, no trailing dot ("" for the root). name_ok is
	 * false when a label holds a byte outside letters, digits, '-' and '_' (such a name
	 * can never be granted: it is answered NXDOMAIN). */
	char name[DNS_NAME_WIRE_MAX + 1];
	bool name_ok;
};

/* Parse one query datagram p[0..n). DNSQ_OK fills *q entirely; FORMERR and NOTIMP fill
 * id and flags only. Pure, no allocation. */
enum dnsq_result dnsstub_parse(const uint8_t *p, size_t n, struct dnsq *q);

/*
 * Build the answer to query p (whose parse gave r and q) into out[0..outlen): for DNSQ_OK
 * the question is echoed byte for byte (the worker's case is kept) and, when a4 is
 * non-NULL, one A record (the name as a pointer to the question, TTL ttl, address *a4 in
 * host byte order) follows; for FORMERR and NOTIMP a bare header. rcode is the answer's
 * RCODE. Returns the length, or 0 when r is DNSQ_DROP or out is too small.
 * At most DNS_HEADER_LEN + DNS_NAME_WIRE_MAX + 4 + 16 bytes. Pure.
 */
size_t dnsstub_answer(const uint8_t *p, enum dnsq_result r, const struct dnsq *q, int rcode,
    const uint32_t *a4, uint32_t ttl, uint8_t *out, size_t outlen);

/*
 * The stub's budget of deny records (docs/transparent.md, "Floods"): a query costs the
 * worker one datagram and egressd one hash-chained record, so a loop of queries for names
 * outside the grant would otherwise fill the decision log (and its queue, which the
 * records of every other grant of a system egressd share). A token bucket of
 * EGRESS_DNSSTUB_DENY_BURST records, refilled at EGRESS_DNSSTUB_DENY_RATE a second. A
 * denial past it is answered exactly the same (NXDOMAIN / SERVFAIL) and counted; the count
 * is written as one dns_suppressed record at most every EGRESS_DNSSTUB_SUPPRESS_MS, and
 * when the stub closes. Pure: the caller gives the time.
 */
struct dnsstub_budget {
	uint64_t credit;            /* milli-records */
	uint64_t last_ms;
};

void dnsstub_budget_init(struct dnsstub_budget *b, uint64_t now_ms);
/* May one more deny record be written at now_ms? true takes it from the budget. */
bool dnsstub_budget_take(struct dnsstub_budget *b, uint64_t now_ms);

struct daemon;
struct lgrant;
struct dnsstub;

/*
 * Serve queries on fd (a bound UDP socket, now owned by the stub: closed on failure too)
 * for lg, whose grant and pool decide every answer; records go to d's decision log. lg is
 * borrowed: the grant frees the stub (dnsstub_free) before it goes. NULL with err.
 */
struct dnsstub *dnsstub_new(struct daemon *d, struct lgrant *lg, int fd, char *err,
    size_t errlen);
/* Stop and close the socket; a count of suppressed denials still unwritten is written
 * first (dns_suppressed). Accepts NULL. */
void dnsstub_free(struct dnsstub *s);
/* "addr:port" of the socket into buf. */
const char *dnsstub_addr_str(const struct dnsstub *s, char *buf, size_t len);

#endif
