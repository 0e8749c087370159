/* mitmca.c - interception CA and leaf minting (see mitmca.h). */
#include "egressd/mitmca.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/limits.h"
#include "common/util.h"
#include "egressd/secretfile.h"

#define LEAF_DAYS 7

struct leaf_slot {
	char host[EGRESS_HOSTNAME_MAX + 1];
	SSL_CTX *ctx;
	unsigned long used;             /* LRU stamp */
};

struct mitm_ca {
	X509 *cert;
	EVP_PKEY *key;
	EVP_PKEY *leaf_key;             /* one key for every leaf of this CA */
	struct leaf_slot slots[EGRESS_LEAF_CACHE_MAX];
	unsigned long clock;
	unsigned long minted, hits;
	unsigned refs;
};

void
mitm_ca_free(struct mitm_ca *ca)
{
	if (ca == NULL || --ca->refs > 0)
		return;
	for (size_t i = 0; i < EGRESS_LEAF_CACHE_MAX; i++)
		SSL_CTX_free(ca->slots[i].ctx);
	X509_free(ca->cert);
	EVP_PKEY_free(ca->key);
	EVP_PKEY_free(ca->leaf_key);
	free(ca);
}

struct mitm_ca *
mitm_ca_ref(struct mitm_ca *ca)
{
	if (ca != NULL)
		ca->refs++;
	return ca;
}

X509 *
mitm_ca_cert(const struct mitm_ca *ca)
{
	return ca->cert;
}

void
mitm_ca_stats(const struct mitm_ca *ca, unsigned long *minted, unsigned long *hits)
{
	*minted = ca->minted;
	*hits = ca->hits;
}

struct mitm_ca *
mitm_ca_from_pem(const char *cert_pem, size_t cert_len, const char *key_pem, size_t key_len,
    char *err, size_t errlen)
{
	struct mitm_ca *ca = calloc(1, sizeof(*ca));
	BIO *b = NULL;

	if (ca == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ca->refs = 1;
	if (cert_len > INT32_MAX || key_len > INT32_MAX)
		goto bad_cert;
	b = BIO_new_mem_buf(cert_pem, (int)cert_len);
	if (b == NULL || (ca->cert = PEM_read_bio_X509(b, NULL, NULL, NULL)) == NULL)
		goto bad_cert;
	BIO_free(b);
	b = BIO_new_mem_buf(key_pem, (int)key_len);
	if (b == NULL || (ca->key = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL)) == NULL) {
		snprintf(err, errlen, "interception CA: the private key is not a PEM key");
		goto fail;
	}
	BIO_free(b);
	b = NULL;
	if (X509_check_ca(ca->cert) == 0) {
		snprintf(err, errlen, "interception CA: the certificate is not a CA "
		    "(basicConstraints CA:TRUE with keyCertSign)");
		goto fail;
	}
	if (X509_check_private_key(ca->cert, ca->key) != 1) {
		snprintf(err, errlen, "interception CA: the key does not match the certificate");
		goto fail;
	}
	if (X509_cmp_current_time(X509_get0_notAfter(ca->cert)) <= 0) {
		snprintf(err, errlen, "interception CA: the certificate has expired");
		goto fail;
	}
	ca->leaf_key = EVP_EC_gen("P-256");
	if (ca->leaf_key == NULL) {
		snprintf(err, errlen, "interception CA: no leaf key (OpenSSL)");
		goto fail;
	}
	ERR_clear_error();
	return ca;
bad_cert:
	snprintf(err, errlen, "interception CA: the certificate is not a PEM X.509 certificate");
fail:
	ERR_clear_error();
	BIO_free(b);
	mitm_ca_free(ca);
	return NULL;
}

static char *
read_plain(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *buf;
	size_t n;

	if (f == NULL) {
		snprintf(err, errlen, "%s: cannot open", path);
		return NULL;
	}
	buf = malloc(EGRESS_CONF_FILE_MAX + 1);
	if (buf == NULL) {
		fclose(f);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	n = fread(buf, 1, EGRESS_CONF_FILE_MAX + 1, f);
	fclose(f);
	if (n > EGRESS_CONF_FILE_MAX) {
		free(buf);
		snprintf(err, errlen, "%s: larger than %d bytes", path, EGRESS_CONF_FILE_MAX);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

struct mitm_ca *
mitm_ca_load(const char *cert_path, const char *key_path, int check_owner, char *err,
    size_t errlen)
{
	char e2[512];
	size_t cl = 0, kl = 0;
	char *cert = read_plain(cert_path, &cl, err, errlen), *key;
	struct mitm_ca *ca;

	if (cert == NULL)
		return NULL;
	key = secretfile_read(key_path, check_owner, "the interception CA key", &kl, err, errlen);
	if (key == NULL) {
		free(cert);
		return NULL;
	}
	ca = mitm_ca_from_pem(cert, cl, key, kl, e2, sizeof(e2));
	secret_wipe(key, kl);
	free(key);
	free(cert);
	if (ca == NULL)
		snprintf(err, errlen, "%s: %s", cert_path, e2);
	return ca;
}

static int
leaf_ext(X509 *leaf, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, leaf, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (ext == NULL)
		return -1;
	ok = X509_add_ext(leaf, ext, -1);
	X509_EXTENSION_free(ext);
	return ok == 1 ? 0 : -1;
}

static X509 *
mint(struct mitm_ca *ca, const struct host *h)
{
	X509 *leaf = X509_new();
	BIGNUM *bn = NULL;
	unsigned char serial[16];
	char san[EGRESS_HOSTNAME_MAX + 16];
	X509_NAME *name;
	time_t ca_end = 0, end;
	const ASN1_TIME *na = X509_get0_notAfter(ca->cert);
	struct tm tm;

	if (leaf == NULL || RAND_bytes(serial, sizeof(serial)) != 1)
		goto fail;
	serial[0] &= 0x7f;
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	if (bn == NULL || BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(leaf)) == NULL ||
	    X509_set_version(leaf, 2) != 1)
		goto fail;
	/* Never outlive the CA: a client would refuse the chain anyway. */
	end = time(NULL) + LEAF_DAYS * 24 * 3600;
	if (ASN1_TIME_to_tm(na, &tm) == 1) {
		ca_end = timegm(&tm);
		if (ca_end < end)
			end = ca_end;
	}
	if (X509_gmtime_adj(X509_getm_notBefore(leaf), -3600) == NULL ||
	    X509_time_adj_ex(X509_getm_notAfter(leaf), 0, 0, &end) == NULL ||
	    X509_set_pubkey(leaf, ca->leaf_key) != 1 ||
	    X509_set_issuer_name(leaf, X509_get_subject_name(ca->cert)) != 1)
		goto fail;
	name = X509_get_subject_name(leaf);
	if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	    (const unsigned char *)h->name, -1, -1, 0) != 1)
		goto fail;
	snprintf(san, sizeof(san), "%s:%s", h->kind == HOST_NAME ? "DNS" : "IP", h->name);
	if (leaf_ext(leaf, ca->cert, NID_subject_alt_name, san) != 0 ||
	    leaf_ext(leaf, ca->cert, NID_basic_constraints, "critical,CA:FALSE") != 0 ||
	    leaf_ext(leaf, ca->cert, NID_key_usage, "critical,digitalSignature") != 0 ||
	    leaf_ext(leaf, ca->cert, NID_ext_key_usage, "serverAuth") != 0 ||
	    leaf_ext(leaf, ca->cert, NID_authority_key_identifier, "keyid:always") != 0)
		goto fail;
	if (X509_sign(leaf, ca->key, EVP_sha256()) <= 0)
		goto fail;
	BN_free(bn);
	return leaf;
fail:
	BN_free(bn);
	X509_free(leaf);
	return NULL;
}

/* ALPN: http/1.1 or nothing. A client offering ALPN without it gets no_application_protocol
 * (RFC 7301 3.2) instead of a protocol egressd does not parse. */
static int
alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";
	unsigned char *sel = NULL;
	unsigned char sellen = 0;

	if (SSL_select_next_proto(&sel, &sellen, h11, sizeof(h11) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	*out = sel;
	*outlen = sellen;
	return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *
server_ctx(struct mitm_ca *ca, X509 *leaf)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (ctx == NULL)
		return NULL;
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_use_certificate(ctx, leaf) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, ca->leaf_key) != 1 ||
	    SSL_CTX_add1_chain_cert(ctx, ca->cert) != 1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_NO_TICKET);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	return ctx;
}

SSL_CTX *
mitm_ca_server_ctx(struct mitm_ca *ca, const struct host *h, char *err, size_t errlen)
{
	struct leaf_slot *slot = NULL, *lru = &ca->slots[0];
	X509 *leaf;
	SSL_CTX *ctx;

	for (size_t i = 0; i < EGRESS_LEAF_CACHE_MAX; i++) {
		struct leaf_slot *s = &ca->slots[i];
		if (s->ctx != NULL && strcmp(s->host, h->name) == 0) {
			slot = s;
			break;
		}
		if (s->ctx == NULL || (lru->ctx != NULL && s->used < lru->used))
			lru = s;
	}
	if (slot != NULL) {
		slot->used = ++ca->clock;
		ca->hits++;
		SSL_CTX_up_ref(slot->ctx);
		return slot->ctx;
	}
	leaf = mint(ca, h);
	if (leaf == NULL || (ctx = server_ctx(ca, leaf)) == NULL) {
		X509_free(leaf);
		ERR_clear_error();
		snprintf(err, errlen, "minting a certificate for %s failed (OpenSSL)", h->name);
		return NULL;
	}
	X509_free(leaf);
	ca->minted++;
	SSL_CTX_free(lru->ctx);
	memcpy(lru->host, h->name, strlen(h->name) + 1);
	lru->ctx = ctx;
	lru->used = ++ca->clock;
	SSL_CTX_up_ref(ctx);
	return ctx;
}
