/* Unit tests for egressd/clienthello: the ClientHello peek (SNI, ALPN) and the SNI check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/ssl.h>

#include "egressd/clienthello.h"

/* SSL_set_tlsext_host_name is a macro that casts its argument to a non-const pointer. */
static void
set_sni(SSL *ssl, const char *sni)
{
	char h[256];

	snprintf(h, sizeof(h), "%s", sni);
	SSL_set_tlsext_host_name(ssl, h);
}

/* A real ClientHello from OpenSSL's client (memory BIOs), with sni (NULL: none) and an
 * ALPN wire list (NULL: none). Returns its length in out. */
static size_t
real_hello(const char *sni, const unsigned char *alpn, size_t alpnlen, int maxv,
    unsigned char *out, size_t cap)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl;
	BIO *rb, *wb;
	int n;

	assert_non_null(ctx);
	if (maxv)
		SSL_CTX_set_max_proto_version(ctx, maxv);
	ssl = SSL_new(ctx);
	rb = BIO_new(BIO_s_mem());
	wb = BIO_new(BIO_s_mem());
	SSL_set_bio(ssl, rb, wb);
	if (sni)
		set_sni(ssl, sni);
	if (alpn)
		SSL_set_alpn_protos(ssl, alpn, (unsigned)alpnlen);
	SSL_set_connect_state(ssl);
	assert_true(SSL_do_handshake(ssl) <= 0);
	n = BIO_read(wb, out, (int)cap);
	assert_true(n > 0);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return (size_t)n;
}

static const unsigned char alpn_both[] = "\x02h2\x08http/1.1";

static void
test_real(void **state)
{
	unsigned char buf[8192];
	struct clienthello ch;
	size_t n = real_hello("API.Example.com", alpn_both, sizeof(alpn_both) - 1, 0, buf,
	    sizeof(buf));
	struct host h;
	bool absent;

	assert_int_equal(clienthello_parse(buf, n, &ch), CH_OK);
	assert_true(ch.has_sni);
	assert_string_equal(ch.sni, "api.example.com");
	assert_int_equal(ch.nalpn, 2);
	assert_string_equal(ch.alpn[0], "h2");
	assert_string_equal(ch.alpn[1], "http/1.1");
	assert_true(ch.has_supported_versions);
	assert_false(ch.has_ech);
	assert_int_equal(ch.consumed, n);
	/* every strict prefix asks for more */
	for (size_t k = 0; k < n; k += 7)
		assert_int_equal(clienthello_parse(buf, k, &ch), CH_NEED_MORE);
	assert_int_equal(clienthello_parse(buf, n - 1, &ch), CH_NEED_MORE);

	/* the SNI decision and its negative twins */
	assert_int_equal(clienthello_parse(buf, n, &ch), CH_OK);
	assert_int_equal(host_parse("api.example.com", 15, 0, &h), HOST_OK);
	assert_int_equal(clienthello_sni_check(&ch, &h, &absent), REASON_ALLOWED);
	assert_false(absent);
	assert_int_equal(host_parse("other.example.com", 17, 0, &h), HOST_OK);
	assert_int_equal(clienthello_sni_check(&ch, &h, &absent), REASON_SNI_MISMATCH);
	assert_int_equal(host_parse("example.com", 11, 0, &h), HOST_OK);
	assert_int_equal(clienthello_sni_check(&ch, &h, &absent), REASON_SNI_MISMATCH);
	assert_int_equal(host_parse("198.51.100.7", 12, 0, &h), HOST_OK);
	assert_int_equal(clienthello_sni_check(&ch, &h, &absent), REASON_SNI_MISMATCH);

	/* TLS 1.2 only, and no SNI at all: allowed, recorded as absent */
	n = real_hello(NULL, NULL, 0, TLS1_2_VERSION, buf, sizeof(buf));
	assert_int_equal(clienthello_parse(buf, n, &ch), CH_OK);
	assert_false(ch.has_sni);
	assert_int_equal(ch.nalpn, 0);
	assert_int_equal(host_parse("api.example.com", 15, 0, &h), HOST_OK);
	assert_int_equal(clienthello_sni_check(&ch, &h, &absent), REASON_ALLOWED);
	assert_true(absent);
}

static void
test_split_records(void **state)
{
	unsigned char buf[8192], two[8300];
	struct clienthello ch;
	size_t n = real_hello("api.example.com", NULL, 0, 0, buf, sizeof(buf));
	size_t body = n - 5, a = 50, b = body - a;

	/* the same handshake message over two records */
	memcpy(two, "\x16\x03\x01", 3);
	two[3] = 0;
	two[4] = (unsigned char)a;
	memcpy(two + 5, buf + 5, a);
	memcpy(two + 5 + a, "\x16\x03\x01", 3);
	two[5 + a + 3] = (unsigned char)(b >> 8);
	two[5 + a + 4] = (unsigned char)b;
	memcpy(two + 10 + a, buf + 5 + a, b);
	assert_int_equal(clienthello_parse(two, n + 5, &ch), CH_OK);
	assert_string_equal(ch.sni, "api.example.com");
	assert_int_equal(ch.consumed, n + 5);
	assert_int_equal(clienthello_parse(two, 5 + a + 2, &ch), CH_NEED_MORE);
	/* an application-data record in between is not a ClientHello */
	two[5 + a] = 23;
	assert_int_equal(clienthello_parse(two, n + 5, &ch), CH_MALFORMED);
}

/* A synthetic hello with the given extensions block (raw bytes). */
static size_t
synth(const unsigned char *ext, size_t extlen, unsigned char *out)
{
	size_t bodylen = 2 + 32 + 1 + 2 + 2 + 1 + 1 + 2 + extlen, o = 0;

	out[o++] = 22;
	out[o++] = 3;
	out[o++] = 1;
	out[o++] = (unsigned char)((bodylen + 4) >> 8);
	out[o++] = (unsigned char)(bodylen + 4);
	out[o++] = 1;
	out[o++] = 0;
	out[o++] = (unsigned char)(bodylen >> 8);
	out[o++] = (unsigned char)bodylen;
	out[o++] = 3;
	out[o++] = 3;
	memset(out + o, 0xab, 32);
	o += 32;
	out[o++] = 0;                    /* session id */
	out[o++] = 0;
	out[o++] = 2;
	out[o++] = 0x13;
	out[o++] = 0x01;                 /* one suite */
	out[o++] = 1;
	out[o++] = 0;                    /* null compression */
	out[o++] = (unsigned char)(extlen >> 8);
	out[o++] = (unsigned char)extlen;
	memcpy(out + o, ext, extlen);
	return o + extlen;
}

static enum ch_result
parse_ext(const char *ext, size_t extlen, struct clienthello *ch)
{
	unsigned char buf[1024];
	size_t n = synth((const unsigned char *)ext, extlen, buf);
	return clienthello_parse(buf, n, ch);
}

#define EXT(s) s, sizeof(s) - 1

static void
test_malformed(void **state)
{
	struct clienthello ch;
	unsigned char buf[1024];
	size_t n;

	/* baseline: one SNI */
	assert_int_equal(parse_ext(EXT("\x00\x00\x00\x0a\x00\x08\x00\x00\x05" "a.com"), &ch),
	    CH_OK);
	assert_string_equal(ch.sni, "a.com");
	/* two host_name entries */
	assert_int_equal(parse_ext(EXT("\x00\x00\x00\x12\x00\x10\x00\x00\x05" "a.com"
	    "\x00\x00\x05" "b.com"), &ch), CH_MALFORMED);
	/* a duplicated server_name extension */
	assert_int_equal(parse_ext(EXT("\x00\x00\x00\x0a\x00\x08\x00\x00\x05" "a.com"
	    "\x00\x00\x00\x0a\x00\x08\x00\x00\x05" "b.com"), &ch), CH_MALFORMED);
	/* an IP literal, a trailing dot, a NUL, a bad character, an empty name */
	assert_int_equal(parse_ext(EXT("\x00\x00\x00\x0a\x00\x08\x00\x00\x05" "1.2.3"), &ch),
	    CH_MALFORMED);
	assert_int_equal(parse_ext(EXT("\x00\x00\x00\x0b\x00\x09\x00\x00\x06" "a.com."), &ch),
	    CH_MALFORMED);
	assert_int_equal(parse_ext(EXT("\x00\x00\x00\x0a\x00\x08\x00\x00\x05" "a\0com"), &ch),
	    CH_MALFORMED);
	assert_int_equal(parse_ext(EXT("\x00\x00\x00\x0a\x00\x08\x00\x00\x05" "a_com"), &ch),
	    CH_MALFORMED);
	assert_int_equal(parse_ext(EXT("\x00\x00\x00\x05\x00\x03\x00\x00\x00"), &ch),
	    CH_MALFORMED);
	/* inner lengths that disagree with the extension's */
	assert_int_equal(parse_ext(EXT("\x00\x00\x00\x0a\x00\x09\x00\x00\x05" "a.com"), &ch),
	    CH_MALFORMED);
	assert_int_equal(parse_ext(EXT("\x00\x00\x00\x0b\x00\x08\x00\x00\x05" "a.com"), &ch),
	    CH_MALFORMED);
	/* a name type other than host_name */
	assert_int_equal(parse_ext(EXT("\x00\x00\x00\x0a\x00\x08\x01\x00\x05" "a.com"), &ch),
	    CH_MALFORMED);
	/* ALPN: an empty name, a list running past its extension; ECH noticed */
	assert_int_equal(parse_ext(EXT("\x00\x10\x00\x03\x00\x01\x00"), &ch), CH_MALFORMED);
	assert_int_equal(parse_ext(EXT("\x00\x10\x00\x04\x00\x02\x05h"), &ch), CH_MALFORMED);
	assert_int_equal(parse_ext(EXT("\xfe\x0d\x00\x01\x00"), &ch), CH_OK);
	assert_true(ch.has_ech);
	assert_false(ch.has_sni);
	/* not TLS at all; a record that is not a handshake; a handshake not a ClientHello */
	assert_int_equal(clienthello_parse((const unsigned char *)"GET / HTTP/1.1\r\n", 16, &ch),
	    CH_NOT_TLS);
	assert_int_equal(clienthello_parse((const unsigned char *)"\x16\x02", 2, &ch),
	    CH_NOT_TLS);
	n = synth((const unsigned char *)"", 0, buf);
	assert_int_equal(clienthello_parse(buf, n, &ch), CH_OK);
	buf[5] = 2;
	assert_int_equal(clienthello_parse(buf, n, &ch), CH_MALFORMED);
	buf[5] = 1;
	/* trailing handshake bytes after the ClientHello inside its record */
	buf[4]++;
	buf[n] = 0;
	assert_int_equal(clienthello_parse(buf, n + 1, &ch), CH_MALFORMED);
	/* a record or message longer than the limit */
	memcpy(buf, "\x16\x03\x01\x40\x01", 5);
	assert_int_equal(clienthello_parse(buf, 5, &ch), CH_MALFORMED);
	memcpy(buf, "\x16\x03\x01\x00\x04\x01\xff\xff\xff", 9);
	assert_int_equal(clienthello_parse(buf, 9, &ch), CH_TOO_LARGE);
	memcpy(buf, "\x16\x03\x01\x00\x00", 5);
	assert_int_equal(clienthello_parse(buf, 5, &ch), CH_MALFORMED);
	assert_int_equal(clienthello_parse(buf, 0, &ch), CH_NEED_MORE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real),
		cmocka_unit_test(test_split_records),
		cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
