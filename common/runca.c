/* runca.c - a per-run interception CA (see runca.h). */
#include "common/runca.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/cryptolib.h"   /* after OpenSSL's headers: its calls go through the table */

#include "common/limits.h"
#include "common/util.h"

static char *
bio_string(BIO *b)
{
	char *data = NULL, *out;
	long n = BIO_get_mem_data(b, &data);

	if (n <= 0 || (out = malloc((size_t)n + 1)) == NULL)
		return NULL;
	memcpy(out, data, (size_t)n);
	out[n] = '\0';
	return out;
}

static int
add_ext(X509 *cert, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, cert, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (ext == NULL)
		return -1;
	ok = X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return ok == 1 ? 0 : -1;
}

/* Only plain DNS names go into a name constraint (no commas: the value is a config
 * string). */
static int
name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > EGRESS_HOSTNAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		    s[i] == '.'))
			return 0;
	return 1;
}

int
runca_make(const char *cn, const char *const *permitted, uint32_t lifetime_s,
    char **cert_pem, char **key_pem, char *err, size_t errlen)
{
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	X509_NAME *name;
	BIGNUM *bn = NULL;
	BIO *cb = NULL, *kb = NULL;
	unsigned char serial[16];
	char *nc = NULL;
	int rc = -1;

	*cert_pem = *key_pem = NULL;
	if (lifetime_s == 0 || lifetime_s > RUNCA_LIFETIME_MAX_S || strlen(cn) > 64) {
		snprintf(err, errlen, "run CA: lifetime 1..%u s and a name of at most 64 bytes",
		    RUNCA_LIFETIME_MAX_S);
		return -1;
	}
	key = EVP_EC_gen("P-256");
	cert = X509_new();
	if (key == NULL || cert == NULL || RAND_bytes(serial, sizeof(serial)) != 1)
		goto ossl;
	serial[0] &= 0x7f;      /* positive */
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	if (bn == NULL || BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) == NULL ||
	    X509_set_version(cert, 2) != 1 ||
	    X509_gmtime_adj(X509_getm_notBefore(cert), -3600) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(cert), (long)lifetime_s) == NULL ||
	    X509_set_pubkey(cert, key) != 1)
		goto ossl;
	name = X509_get_subject_name(cert);
	if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
	    (const unsigned char *)"egress", -1, -1, 0) != 1 ||
	    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1,
	    -1, 0) != 1 || X509_set_issuer_name(cert, name) != 1)
		goto ossl;
	if (add_ext(cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") != 0 ||
	    add_ext(cert, NID_key_usage, "critical,keyCertSign,cRLSign") != 0 ||
	    add_ext(cert, NID_subject_key_identifier, "hash") != 0)
		goto ossl;
	if (permitted != NULL && permitted[0] != NULL) {
		size_t cap = 16, len;
		for (size_t i = 0; permitted[i] != NULL; i++) {
			if (!name_ok(permitted[i])) {
				snprintf(err, errlen, "run CA: '%.80s' is not a lowercase DNS name",
				    permitted[i]);
				goto out;
			}
			cap += strlen(permitted[i]) + 20;
		}
		if ((nc = malloc(cap)) == NULL)
			goto ossl;
		len = (size_t)snprintf(nc, cap, "critical");
		for (size_t i = 0; permitted[i] != NULL; i++)
			len += (size_t)snprintf(nc + len, cap - len, ",permitted;DNS:%s", permitted[i]);
		if (add_ext(cert, NID_name_constraints, nc) != 0)
			goto ossl;
	}
	if (X509_sign(cert, key, EVP_sha256()) <= 0)
		goto ossl;
	cb = BIO_new(BIO_s_mem());
	kb = BIO_new(BIO_s_secmem());
	if (cb == NULL || kb == NULL || PEM_write_bio_X509(cb, cert) != 1 ||
	    PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) != 1)
		goto ossl;
	*cert_pem = bio_string(cb);
	*key_pem = bio_string(kb);
	if (*cert_pem == NULL || *key_pem == NULL) {
		free(*cert_pem);
		if (*key_pem != NULL) {
			secret_wipe(*key_pem, strlen(*key_pem));
			free(*key_pem);
		}
		*cert_pem = *key_pem = NULL;
		goto ossl;
	}
	rc = 0;
	goto out;
ossl:
	snprintf(err, errlen, "run CA: OpenSSL failed to make the certificate");
out:
	free(nc);
	BN_free(bn);
	BIO_free(cb);
	BIO_free(kb);
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}
