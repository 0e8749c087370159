/* Unit tests for egressd/sniguard: the ClientHello wait over a real socket pair and event
 * loop, bytes left unconsumed, every verdict. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>

#include "egressd/sniguard.h"

/* SSL_set_tlsext_host_name is a macro that casts its argument to a non-const pointer. */
static void
set_sni(SSL *ssl, const char *sni)
{
	char h[256];

	snprintf(h, sizeof(h), "%s", sni);
	SSL_set_tlsext_host_name(ssl, h);
}

struct result {
	int calls;
	enum reason r;
	bool have_ch;
	char sni[300];
};

static void
on_verdict(enum reason r, const struct clienthello *ch, void *arg)
{
	struct result *res = arg;

	res->calls++;
	res->r = r;
	res->have_ch = ch != NULL;
	snprintf(res->sni, sizeof(res->sni), "%s", ch != NULL && ch->has_sni ? ch->sni : "");
}

static size_t
hello(const char *sni, unsigned char *out, size_t cap)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(ctx);
	BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	int n;

	SSL_set_bio(ssl, rb, wb);
	if (sni)
		set_sni(ssl, sni);
	SSL_set_connect_state(ssl);
	SSL_do_handshake(ssl);
	n = BIO_read(wb, out, (int)cap);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	assert_true(n > 0);
	return (size_t)n;
}

/* Run the guard on one end of a socket pair while `feed` writes into the other: first
 * `split` bytes, then (after the loop ran a while) the rest; close the writer when asked. */
static struct result
run(const unsigned char *data, size_t n, size_t split, bool close_after, uint64_t timeout_ms,
    const unsigned char *prefix, size_t nprefix, size_t *left_queued)
{
	struct result res = { 0, REASON_ALLOWED, false, "" };
	struct event_base *base = event_base_new();
	struct timeval step = { 0, 30 * 1000 };
	struct sniguard *g;
	struct host h;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(host_parse("api.example.com", 15, 0, &h), HOST_OK);
	h.port = 443;
	if (split > 0)
		assert_int_equal(write(sv[1], data, split), (ssize_t)split);
	g = sniguard_start(base, sv[0], &h, prefix, nprefix, timeout_ms, on_verdict, &res);
	assert_non_null(g);
	assert_int_equal(res.calls, 0);            /* never inside start */
	for (int i = 0; i < 100 && res.calls == 0; i++) {
		event_base_loopexit(base, &step);
		event_base_dispatch(base);
		if (i == 2 && split < n)
			assert_int_equal(write(sv[1], data + split, n - split), (ssize_t)(n - split));
		if (i == 3 && close_after)
			close(sv[1]), sv[1] = -1;
	}
	sniguard_free(g);
	if (left_queued != NULL) {
		unsigned char buf[20000];
		ssize_t k = recv(sv[0], buf, sizeof(buf), MSG_DONTWAIT);
		*left_queued = k > 0 ? (size_t)k : 0;
	}
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	event_base_free(base);
	return res;
}

static void
test_verdicts(void **state)
{
	unsigned char buf[4096];
	size_t n = hello("api.example.com", buf, sizeof(buf)), left = 0;
	struct result r;

	/* whole hello at once: allowed, and every byte is still queued for the tunnel */
	r = run(buf, n, n, false, 2000, NULL, 0, &left);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.r, REASON_ALLOWED);
	assert_string_equal(r.sni, "api.example.com");
	assert_int_equal(left, n);
	/* in two pieces, the first one not even a record header */
	r = run(buf, n, 3, false, 2000, NULL, 0, &left);
	assert_int_equal(r.r, REASON_ALLOWED);
	assert_int_equal(left, n);
	/* a prefix the session had already read, and the rest on the socket */
	r = run(buf + 20, n - 20, n - 20, false, 2000, buf, 20, &left);
	assert_int_equal(r.r, REASON_ALLOWED);
	assert_int_equal(left, n - 20);

	/* twins: another server name; no SNI (allowed, absent); not TLS; EOF; timeout */
	n = hello("evil.example.net", buf, sizeof(buf));
	r = run(buf, n, n, false, 2000, NULL, 0, NULL);
	assert_int_equal(r.r, REASON_SNI_MISMATCH);
	assert_string_equal(r.sni, "evil.example.net");
	n = hello(NULL, buf, sizeof(buf));
	r = run(buf, n, n, false, 2000, NULL, 0, NULL);
	assert_int_equal(r.r, REASON_ALLOWED);
	assert_true(r.have_ch);
	assert_string_equal(r.sni, "");
	/* not TLS at all: nothing to compare, allowed without a hello (the caller records it) */
	r = run((const unsigned char *)"SSH-2.0-OpenSSH_9.2\r\n", 21, 21, false, 2000, NULL, 0,
	    NULL);
	assert_int_equal(r.r, REASON_ALLOWED);
	assert_false(r.have_ch);
	/* a TLS record that is no ClientHello: refused */
	r = run((const unsigned char *)"\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00", 10, 10,
	    false, 2000, NULL, 0, NULL);
	assert_int_equal(r.r, REASON_TLS_EXPECTED);
	n = hello("api.example.com", buf, sizeof(buf));
	r = run(buf, 0, 0, true, 2000, NULL, 0, NULL);
	assert_int_equal(r.r, REASON_CLOSE_CLIENT);
	r = run(buf, n, 10, false, 2000, NULL, 0, NULL);
	/* the rest arrives later, within the deadline: allowed */
	assert_int_equal(r.r, REASON_ALLOWED);
	r = run(buf, 10, 10, false, 100, NULL, 0, NULL);
	assert_int_equal(r.r, REASON_HEADER_TIMEOUT);
}

/* sniguard_try: the same verdicts at once, without a loop, when the hello (or what
 * decides) is queued already; false (undecided) when not all of it is; never a byte
 * consumed. */
static void
test_try_now(void **state)
{
	unsigned char buf[4096], rest[4096];
	size_t n = hello("api.example.com", buf, sizeof(buf));
	struct clienthello ch;
	struct host h;
	bool have;
	enum reason r;
	int sv[2];

	(void)state;
	assert_int_equal(host_parse("api.example.com", 15, 0, &h), HOST_OK);
	h.port = 443;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* nothing queued yet; then only a part */
	assert_false(sniguard_try(sv[0], &h, NULL, 0, &ch, &have, &r));
	assert_int_equal(write(sv[1], buf, 10), 10);
	assert_false(sniguard_try(sv[0], &h, NULL, 0, &ch, &have, &r));
	/* the whole hello: allowed with its name, every byte still queued */
	assert_int_equal(write(sv[1], buf + 10, n - 10), (ssize_t)(n - 10));
	assert_true(sniguard_try(sv[0], &h, NULL, 0, &ch, &have, &r));
	assert_int_equal(r, REASON_ALLOWED);
	assert_true(have);
	assert_string_equal(ch.sni, "api.example.com");
	assert_int_equal(recv(sv[0], rest, sizeof(rest), MSG_DONTWAIT), (ssize_t)n);
	/* a prefix the session read already, the rest queued */
	assert_int_equal(write(sv[1], buf + 30, n - 30), (ssize_t)(n - 30));
	assert_true(sniguard_try(sv[0], &h, buf, 30, &ch, &have, &r));
	assert_int_equal(r, REASON_ALLOWED);
	assert_int_equal(recv(sv[0], rest, sizeof(rest), MSG_DONTWAIT), (ssize_t)(n - 30));
	/* another name: refused at once */
	n = hello("evil.example.net", buf, sizeof(buf));
	assert_int_equal(write(sv[1], buf, n), (ssize_t)n);
	assert_true(sniguard_try(sv[0], &h, NULL, 0, &ch, &have, &r));
	assert_int_equal(r, REASON_SNI_MISMATCH);
	assert_string_equal(ch.sni, "evil.example.net");
	assert_int_equal(recv(sv[0], rest, sizeof(rest), MSG_DONTWAIT), (ssize_t)n);
	/* not TLS: allowed without a hello */
	assert_int_equal(write(sv[1], "SSH-2.0-x\r\n", 11), 11);
	assert_true(sniguard_try(sv[0], &h, NULL, 0, &ch, &have, &r));
	assert_int_equal(r, REASON_ALLOWED);
	assert_false(have);
	assert_int_equal(recv(sv[0], rest, sizeof(rest), MSG_DONTWAIT), 11);
	/* the client left before any hello */
	close(sv[1]);
	assert_true(sniguard_try(sv[0], &h, NULL, 0, &ch, &have, &r));
	assert_int_equal(r, REASON_CLOSE_CLIENT);
	close(sv[0]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verdicts),
		cmocka_unit_test(test_try_now),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
