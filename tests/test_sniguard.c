/* Unit tests for egressd/sniguard: every verdict over bytes read so far, and over what is
 * queued on a real socket pair, left unconsumed. */
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

/* sniguard_judge over the bytes read so far: every verdict, and "more" for a part. */
static void
test_verdicts(void **state)
{
	unsigned char buf[SNIGUARD_HELLO_MAX + 100];
	size_t n = hello("api.example.com", buf, sizeof(buf));
	struct clienthello ch;
	struct host h;
	bool have;
	enum reason r;

	(void)state;
	assert_int_equal(host_parse("api.example.com", 15, 0, &h), HOST_OK);
	h.port = 443;
	/* the whole hello: allowed with its name; any part of it (the first byte, a record
	 * header, all but the last byte): more must arrive */
	assert_true(sniguard_judge(buf, n, &h, &ch, &have, &r));
	assert_int_equal(r, REASON_ALLOWED);
	assert_true(have);
	assert_string_equal(ch.sni, "api.example.com");
	assert_false(sniguard_judge(buf, 0, &h, &ch, &have, &r));
	assert_false(sniguard_judge(buf, 1, &h, &ch, &have, &r));
	assert_false(sniguard_judge(buf, 5, &h, &ch, &have, &r));
	assert_false(sniguard_judge(buf, n - 1, &h, &ch, &have, &r));
	/* bytes behind the hello (the client's next record) change nothing */
	memset(buf + n, 0x17, 50);
	assert_true(sniguard_judge(buf, n + 50, &h, &ch, &have, &r));
	assert_int_equal(r, REASON_ALLOWED);
	/* another server name; no SNI (allowed, absent) */
	n = hello("evil.example.net", buf, sizeof(buf));
	assert_true(sniguard_judge(buf, n, &h, &ch, &have, &r));
	assert_int_equal(r, REASON_SNI_MISMATCH);
	assert_string_equal(ch.sni, "evil.example.net");
	n = hello(NULL, buf, sizeof(buf));
	assert_true(sniguard_judge(buf, n, &h, &ch, &have, &r));
	assert_int_equal(r, REASON_ALLOWED);
	assert_true(have);
	assert_false(ch.has_sni);
	/* not TLS at all: nothing to compare, allowed without a hello (the caller records it) */
	assert_true(sniguard_judge((const unsigned char *)"SSH-2.0-OpenSSH_9.2\r\n", 21, &h,
	    &ch, &have, &r));
	assert_int_equal(r, REASON_ALLOWED);
	assert_false(have);
	/* a TLS record that is no ClientHello: refused */
	assert_true(sniguard_judge((const unsigned char *)"\x16\x03\x01\x00\x05\x02\x00\x00"
	    "\x01\x00", 10, &h, &ch, &have, &r));
	assert_int_equal(r, REASON_TLS_EXPECTED);
	/* a hello (16,000 bytes, within EGRESS_CLIENTHELLO_MAX) spread over records of 100
	 * bytes each: with their headers it does not end within SNIGUARD_HELLO_MAX bytes, so
	 * one byte short of that more may come, and at it the answer is tls_expected */
	memset(buf, 0, sizeof(buf));
	for (size_t k = 0; k < sizeof(buf); k += 105) {
		buf[k] = 0x16;
		if (k + 5 <= sizeof(buf)) {
			buf[k + 1] = 0x03;
			buf[k + 2] = 0x01;
			buf[k + 3] = 0x00;
			buf[k + 4] = 100;
		}
	}
	buf[5] = 0x01;                      /* client_hello, length 0x003e80 = 16,000 */
	buf[6] = 0x00;
	buf[7] = 0x3e;
	buf[8] = 0x80;
	buf[9] = 0x03;
	buf[10] = 0x03;
	assert_false(sniguard_judge(buf, SNIGUARD_HELLO_MAX - 1, &h, &ch, &have, &r));
	assert_true(sniguard_judge(buf, SNIGUARD_HELLO_MAX, &h, &ch, &have, &r));
	assert_int_equal(r, REASON_TLS_EXPECTED);
	assert_true(sniguard_judge(buf, sizeof(buf), &h, &ch, &have, &r));
	assert_int_equal(r, REASON_TLS_EXPECTED);
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
