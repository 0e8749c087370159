/* Unit tests for egressd/dnsstub: the strict query parser and the answer builder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egressd/dnsstub.h"

/* A query for name (dotted; labels copied as given) of qtype, header flags, counts. */
static size_t
mkq(uint8_t *out, const char *name, uint16_t qtype, uint16_t flags, uint16_t qd, uint16_t ar)
{
	size_t o = 12;
	const char *p = name;

	memset(out, 0, 12);
	out[0] = 0x12;
	out[1] = 0x34;
	out[2] = (uint8_t)(flags >> 8);
	out[3] = (uint8_t)flags;
	out[5] = (uint8_t)qd;
	out[11] = (uint8_t)ar;
	while (*p != '\0') {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		out[o++] = (uint8_t)l;
		memcpy(out + o, p, l);
		o += l;
		p += l + (dot ? 1 : 0);
	}
	out[o++] = 0;
	out[o++] = (uint8_t)(qtype >> 8);
	out[o++] = (uint8_t)qtype;
	out[o++] = 0;
	out[o++] = 1;
	return o;
}

static void
t_parse_ok(void **state)
{
	uint8_t q[512];
	struct dnsq d;
	size_t n = mkq(q, "API.Example.com", DNS_TYPE_A, 0x0100, 1, 0);

	(void)state;
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_OK);
	assert_int_equal(d.id, 0x1234);
	assert_int_equal(d.qtype, DNS_TYPE_A);
	assert_int_equal(d.qclass, DNS_CLASS_IN);
	assert_string_equal(d.name, "api.example.com");
	assert_true(d.name_ok);
	assert_int_equal(d.qend, n);
	/* bytes no host name may hold: the name is kept printable and marked */
	n = mkq(q, "_sip._tcp.example.com", 33, 0x0100, 1, 0);
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_OK);
	assert_true(d.name_ok);         /* '_' is readable; host_parse refuses it later */
	n = mkq(q, "a b.example.com", DNS_TYPE_A, 0, 1, 0);
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_OK);
	assert_false(d.name_ok);
	assert_string_equal(d.name, "a?b.example.com");
	/* the root */
	n = mkq(q, "", DNS_TYPE_A, 0, 1, 0);
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_OK);
	assert_string_equal(d.name, "");
}

static void
t_parse_edns(void **state)
{
	uint8_t q[512];
	struct dnsq d;
	size_t n = mkq(q, "example.com", DNS_TYPE_A, 0x0100, 1, 1);
	static const uint8_t opt[] = { 0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0 };

	(void)state;
	/* ARCOUNT 1 but nothing there */
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_FORMERR);
	memcpy(q + n, opt, sizeof(opt));
	assert_int_equal(dnsstub_parse(q, n + sizeof(opt), &d), DNSQ_OK);
	assert_int_equal(d.qend, n);
	/* trailing bytes without ARCOUNT */
	n = mkq(q, "example.com", DNS_TYPE_A, 0x0100, 1, 0);
	q[n] = 0;
	assert_int_equal(dnsstub_parse(q, n + 1, &d), DNSQ_FORMERR);
}

static void
t_parse_refusals(void **state)
{
	uint8_t q[600];
	struct dnsq d;
	size_t n;

	(void)state;
	n = mkq(q, "example.com", DNS_TYPE_A, 0x0100, 1, 0);
	assert_int_equal(dnsstub_parse(q, 11, &d), DNSQ_DROP);          /* no header */
	q[2] |= 0x80;                                                   /* a response */
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_DROP);
	q[2] &= 0x7f;
	q[2] |= 0x08;                                                   /* opcode 1 */
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_NOTIMP);
	assert_int_equal(d.id, 0x1234);
	q[2] &= (uint8_t)~0x78;
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_OK);
	n = mkq(q, "example.com", DNS_TYPE_A, 0, 2, 0);                 /* QDCOUNT 2 */
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_FORMERR);
	n = mkq(q, "example.com", DNS_TYPE_A, 0, 0, 0);                 /* QDCOUNT 0 */
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_FORMERR);
	n = mkq(q, "example.com", DNS_TYPE_A, 0, 1, 0);
	q[7] = 1;                                                       /* ANCOUNT 1 */
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_FORMERR);
	/* a compression pointer in the question */
	n = mkq(q, "example.com", DNS_TYPE_A, 0, 1, 0);
	q[12] = 0xc0;
	q[13] = 12;
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_FORMERR);
	/* a label longer than 63 */
	n = mkq(q, "example.com", DNS_TYPE_A, 0, 1, 0);
	q[12] = 64;
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_FORMERR);
	/* a label running past the end, a missing QTYPE/QCLASS */
	n = mkq(q, "example.com", DNS_TYPE_A, 0, 1, 0);
	assert_int_equal(dnsstub_parse(q, 16, &d), DNSQ_FORMERR);
	assert_int_equal(dnsstub_parse(q, n - 1, &d), DNSQ_FORMERR);
	/* a name over 255 bytes of wire form: five labels of 63 */
	{
		char name[400];
		size_t o = 0;
		for (int i = 0; i < 5; i++) {
			memset(name + o, 'a', 63);
			o += 63;
			name[o++] = '.';
		}
		name[o - 1] = '\0';
		n = mkq(q, name, DNS_TYPE_A, 0, 1, 0);
		assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_FORMERR);
	}
	/* larger than EGRESS_DNSSTUB_MSG_MAX */
	assert_int_equal(dnsstub_parse(q, EGRESS_DNSSTUB_MSG_MAX + 1, &d), DNSQ_DROP);
}

static void
t_answer(void **state)
{
	uint8_t q[512], out[DNS_HEADER_LEN + DNS_NAME_WIRE_MAX + 4 + 16];
	struct dnsq d;
	size_t n = mkq(q, "Api.example.com", DNS_TYPE_A, 0x0100, 1, 0), a;
	uint32_t addr = 0xc6120005u;
	static const uint8_t rr[] = { 0xc0, 12, 0, 1, 0, 1, 0, 0, 0x01, 0x2c, 0, 4, 198, 18, 0, 5 };

	(void)state;
	assert_int_equal(dnsstub_parse(q, n, &d), DNSQ_OK);
	a = dnsstub_answer(q, DNSQ_OK, &d, DNS_RCODE_NOERROR, &addr, 300, out, sizeof(out));
	assert_int_equal(a, n + 16);
	assert_int_equal(out[0], 0x12);
	assert_int_equal(out[1], 0x34);
	assert_int_equal(out[2], 0x81);         /* QR, RD echoed */
	assert_int_equal(out[3], 0x80);         /* RA, NOERROR */
	assert_int_equal(out[5], 1);            /* QDCOUNT */
	assert_int_equal(out[7], 1);            /* ANCOUNT */
	assert_memory_equal(out + 12, q + 12, n - 12);   /* the question, case kept */
	assert_memory_equal(out + n, rr, sizeof(rr));
	/* NXDOMAIN: the question, no answer */
	a = dnsstub_answer(q, DNSQ_OK, &d, DNS_RCODE_NXDOMAIN, NULL, 300, out, sizeof(out));
	assert_int_equal(a, n);
	assert_int_equal(out[3] & 0xf, DNS_RCODE_NXDOMAIN);
	assert_int_equal(out[7], 0);
	/* FORMERR / NOTIMP: a bare header */
	a = dnsstub_answer(q, DNSQ_FORMERR, &d, DNS_RCODE_FORMERR, NULL, 0, out, sizeof(out));
	assert_int_equal(a, DNS_HEADER_LEN);
	assert_int_equal(out[5], 0);
	assert_int_equal(out[3] & 0xf, DNS_RCODE_FORMERR);
	/* no answer to a dropped datagram, none into a short buffer */
	assert_int_equal(dnsstub_answer(q, DNSQ_DROP, &d, 0, NULL, 0, out, sizeof(out)), 0);
	assert_int_equal(dnsstub_answer(q, DNSQ_OK, &d, 0, &addr, 300, out, n + 15), 0);
}

static void
t_new_refuses(void **state)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char err[256];
	struct sockaddr_in sin;

	(void)state;
	/* a TCP socket, an unbound UDP socket, one bound to 0.0.0.0: refused and closed */
	assert_true(fd >= 0);
	assert_null(dnsstub_new(NULL, NULL, fd, err, sizeof(err)));
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_null(dnsstub_new(NULL, NULL, fd, err, sizeof(err)));
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_null(dnsstub_new(NULL, NULL, fd, err, sizeof(err)));
	assert_non_null(strstr(err, "UDP socket bound"));
}

/* The deny-record budget (docs/transparent.md, "Floods"): a burst, then the rate, never
 * more than the burst after any pause, nothing gained from a clock that does not move. */
static void
t_budget(void **state)
{
	struct dnsstub_budget b;
	uint64_t t = 1000000;
	unsigned n = 0;

	(void)state;
	dnsstub_budget_init(&b, t);
	while (dnsstub_budget_take(&b, t))
		n++;
	assert_int_equal(n, EGRESS_DNSSTUB_DENY_BURST);
	/* a flood at one instant gets nothing more */
	for (int i = 0; i < 10000; i++)
		assert_false(dnsstub_budget_take(&b, t));
	/* one second of flooding (a query every millisecond): the rate, give or take one */
	n = 0;
	for (int i = 1; i <= 1000; i++)
		n += dnsstub_budget_take(&b, t + (uint64_t)i) ? 1 : 0;
	assert_true(n >= EGRESS_DNSSTUB_DENY_RATE - 1 && n <= EGRESS_DNSSTUB_DENY_RATE + 1);
	t += 1000;
	/* a long pause refills the burst, no more */
	t += 3600u * 1000u;
	n = 0;
	while (dnsstub_budget_take(&b, t))
		n++;
	assert_int_equal(n, EGRESS_DNSSTUB_DENY_BURST);
	/* a clock that went back refills nothing */
	assert_false(dnsstub_budget_take(&b, t - 5000));
	assert_false(dnsstub_budget_take(&b, t));
	/* a far future (wrap guard): still just the burst */
	n = 0;
	while (dnsstub_budget_take(&b, UINT64_MAX - 1))
		n++;
	assert_int_equal(n, EGRESS_DNSSTUB_DENY_BURST);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_parse_ok),
		cmocka_unit_test(t_parse_edns),
		cmocka_unit_test(t_parse_refusals),
		cmocka_unit_test(t_answer),
		cmocka_unit_test(t_new_refuses),
		cmocka_unit_test(t_budget),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
