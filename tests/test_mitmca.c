/* Unit tests for common/runca and egressd/mitmca: the run CA, leaf minting, real TLS
 * handshakes against it (memory BIO pairs), ALPN, name constraints, cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/runca.h"
#include "common/util.h"
#include "egressd/mitmca.h"

/* SSL_set_tlsext_host_name is a macro that casts its argument to a non-const pointer. */
static void
set_sni(SSL *ssl, const char *sni)
{
	char h[256];

	snprintf(h, sizeof(h), "%s", sni);
	SSL_set_tlsext_host_name(ssl, h);
}

struct hs {
	int ok;                 /* both sides finished */
	long verify;            /* the client's verification result */
	char alpn[32];
};

/* A client trusting only ca_pem, verifying `verify_host`, offering alpn (wire form or
 * NULL), against a server context; bounded handshake over a BIO pair. */
static struct hs
handshake(SSL_CTX *sctx, const char *ca_pem, const char *sni, const char *verify_host,
    const unsigned char *alpn, size_t alpnlen)
{
	struct hs r = { 0, -1, "" };
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	X509_STORE *st = SSL_CTX_get_cert_store(cctx);
	BIO *cb = BIO_new_mem_buf(ca_pem, -1), *b1 = NULL, *b2 = NULL;
	X509 *ca = PEM_read_bio_X509(cb, NULL, NULL, NULL);
	SSL *c, *s;
	int cd = 0, sd = 0;
	const unsigned char *sel;
	unsigned sellen;

	assert_non_null(ca);
	X509_STORE_add_cert(st, ca);
	X509_free(ca);
	BIO_free(cb);
	SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
	c = SSL_new(cctx);
	s = SSL_new(sctx);
	SSL_set1_host(c, verify_host);
	if (sni)
		set_sni(c, sni);
	if (alpn)
		SSL_set_alpn_protos(c, alpn, (unsigned)alpnlen);
	assert_int_equal(BIO_new_bio_pair(&b1, 0, &b2, 0), 1);
	SSL_set_bio(c, b1, b1);
	SSL_set_bio(s, b2, b2);
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
	for (int i = 0; i < 100 && !(cd && sd); i++) {
		if (!cd) {
			int k = SSL_do_handshake(c);
			if (k == 1)
				cd = 1;
			else if (SSL_get_error(c, k) != SSL_ERROR_WANT_READ)
				break;
		}
		if (!sd) {
			int k = SSL_do_handshake(s);
			if (k == 1)
				sd = 1;
			else if (SSL_get_error(s, k) != SSL_ERROR_WANT_READ)
				break;
		}
	}
	r.ok = cd && sd;
	r.verify = SSL_get_verify_result(c);
	SSL_get0_alpn_selected(c, &sel, &sellen);
	if (sellen > 0 && sellen < sizeof(r.alpn)) {
		memcpy(r.alpn, sel, sellen);
		r.alpn[sellen] = '\0';
	}
	SSL_free(c);
	SSL_free(s);
	SSL_CTX_free(cctx);
	ERR_clear_error();
	return r;
}

static const unsigned char alpn_h2_h11[] = "\x02h2\x08http/1.1";
static const unsigned char alpn_h2[] = "\x02h2";

static void
test_leaf_handshake(void **state)
{
	const char *permitted[] = { "api.example.com", "model.example.net", NULL };
	char *cert = NULL, *key = NULL, err[512];
	struct mitm_ca *ca;
	struct host h;
	SSL_CTX *ctx, *ctx2;
	struct hs r;
	unsigned long minted, hits;

	assert_int_equal(runca_make("egress run test", permitted, 3600, &cert, &key, err,
	    sizeof(err)), 0);
	assert_non_null(strstr(cert, "BEGIN CERTIFICATE"));
	assert_non_null(strstr(key, "PRIVATE KEY"));
	ca = mitm_ca_from_pem(cert, strlen(cert), key, strlen(key), err, sizeof(err));
	assert_non_null(ca);

	assert_int_equal(host_parse("api.example.com", 15, 0, &h), HOST_OK);
	ctx = mitm_ca_server_ctx(ca, &h, err, sizeof(err));
	assert_non_null(ctx);
	/* a client that trusts the run CA: verified, ALPN http/1.1 chosen over h2 */
	r = handshake(ctx, cert, "api.example.com", "api.example.com", alpn_h2_h11,
	    sizeof(alpn_h2_h11) - 1);
	assert_true(r.ok);
	assert_int_equal(r.verify, X509_V_OK);
	assert_string_equal(r.alpn, "http/1.1");
	/* no ALPN at all is fine */
	r = handshake(ctx, cert, "api.example.com", "api.example.com", NULL, 0);
	assert_true(r.ok);
	assert_int_equal(r.verify, X509_V_OK);
	/* twins: h2 only is refused; the leaf does not name another host */
	r = handshake(ctx, cert, "api.example.com", "api.example.com", alpn_h2,
	    sizeof(alpn_h2) - 1);
	assert_false(r.ok);
	r = handshake(ctx, cert, "other.example.com", "other.example.com", NULL, 0);
	assert_false(r.ok);
	assert_int_equal(r.verify, X509_V_ERR_HOSTNAME_MISMATCH);
	/* cached: the second context for the same host is the same object */
	ctx2 = mitm_ca_server_ctx(ca, &h, err, sizeof(err));
	assert_ptr_equal(ctx, ctx2);
	mitm_ca_stats(ca, &minted, &hits);
	assert_int_equal(minted, 1);
	assert_int_equal(hits, 1);
	SSL_CTX_free(ctx2);
	SSL_CTX_free(ctx);

	/* name constraints: a leaf this CA mints for a host outside them is not trusted */
	assert_int_equal(host_parse("evil.example.org", 16, 0, &h), HOST_OK);
	ctx = mitm_ca_server_ctx(ca, &h, err, sizeof(err));
	assert_non_null(ctx);
	r = handshake(ctx, cert, "evil.example.org", "evil.example.org", NULL, 0);
	assert_false(r.ok);
	assert_int_equal(r.verify, X509_V_ERR_PERMITTED_VIOLATION);
	SSL_CTX_free(ctx);
	/* a client with another CA does not trust the leaf */
	{
		char *c2 = NULL, *k2 = NULL;
		assert_int_equal(runca_make("other", NULL, 3600, &c2, &k2, err, sizeof(err)), 0);
		assert_int_equal(host_parse("api.example.com", 15, 0, &h), HOST_OK);
		ctx = mitm_ca_server_ctx(ca, &h, err, sizeof(err));
		r = handshake(ctx, c2, "api.example.com", "api.example.com", NULL, 0);
		assert_false(r.ok);
		assert_int_not_equal(r.verify, X509_V_OK);
		SSL_CTX_free(ctx);
		/* a key that does not match the certificate is refused */
		assert_null(mitm_ca_from_pem(cert, strlen(cert), k2, strlen(k2), err, sizeof(err)));
		assert_non_null(strstr(err, "does not match"));
		free(c2);
		secret_wipe(k2, strlen(k2));
		free(k2);
	}
	mitm_ca_free(ca);
	free(cert);
	secret_wipe(key, strlen(key));
	free(key);
}

static void
test_refusals(void **state)
{
	char *cert = NULL, *key = NULL, err[512];

	assert_int_equal(runca_make("x", NULL, 3600, &cert, &key, err, sizeof(err)), 0);
	assert_null(mitm_ca_from_pem("junk", 4, key, strlen(key), err, sizeof(err)));
	assert_non_null(strstr(err, "not a PEM X.509"));
	assert_null(mitm_ca_from_pem(cert, strlen(cert), "junk", 4, err, sizeof(err)));
	assert_non_null(strstr(err, "not a PEM key"));
	{
		char *c0, *k0;
		assert_int_equal(runca_make("x", NULL, 0, &c0, &k0, err, sizeof(err)), -1);
		assert_null(c0);
	}
	{
		const char *bad[] = { "Upper.example", NULL };
		char *c3, *k3;
		assert_int_equal(runca_make("x", bad, 60, &c3, &k3, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "not a lowercase DNS name"));
	}
	assert_null(mitm_ca_load("/nonexistent/ca.pem", "/nonexistent/ca.key", 0, err,
	    sizeof(err)));
	free(cert);
	secret_wipe(key, strlen(key));
	free(key);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_leaf_handshake),
		cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
