/*
 * cryptolib - libcrypto (OpenSSL 3), loaded when it is first needed instead of when the
 * program starts.
 *
 * Owns: the one dlopen of libcrypto (EGRESS_LIBCRYPTO_SONAME, through common/dynload.h)
 * and the table of the libcrypto functions its callers use. A file that calls them
 * includes this header after its <openssl/...> headers: each call below goes through the
 * table (the types, constants and OpenSSL's own macros are the headers'; a header macro
 * that expands to one of these functions, BIO_get_mem_data to BIO_ctrl, lands here too).
 * Callers: common/runca.c (a model connection's run CA); executor/artifacts.c and
 * executor/manifest.c (SHA-256), executor/orchestrate.c (RAND_bytes). A program that links
 * these links egress_cryptolib, not libcrypto. cryptolib_load must run before anything
 * confines the process: executor/collector.c loads it before the collector's fork (the
 * collector's root holds no libraries).
 *
 * Why: libcrypto is 4.7 MB with ~20,000 relocations and its own initialization; linked,
 * it cost every egress-exec start ~2 ms of CPU (an empty program linked with egress-exec's
 * libraries: 5.0 ms per exec, 3.1 ms without libcrypto), and every fork copied its
 * mappings; a plain `egress-exec run` without --out never calls it (docs/performance.md).
 *
 * Failure is fail-closed: cryptolib_load returns -1 with the loader's message; a call
 * through the table when the library could not be loaded ends the process with that
 * message (exit 70).
 */
#ifndef EGRESS_CRYPTOLIB_H
#define EGRESS_CRYPTOLIB_H

#include <stddef.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define CRYPTOLIB_FUNCS(X) \
	X(BIO_ctrl) X(BIO_free) X(BIO_new) X(BIO_s_mem) X(BIO_s_secmem) X(BN_bin2bn) \
	X(BN_free) X(BN_to_ASN1_INTEGER) X(EVP_Digest) X(EVP_DigestFinal_ex) \
	X(EVP_DigestInit_ex) X(EVP_DigestUpdate) X(EVP_MD_CTX_free) X(EVP_MD_CTX_new) \
	X(EVP_PKEY_Q_keygen) X(EVP_PKEY_free) X(EVP_sha256) X(PEM_write_bio_PrivateKey) \
	X(PEM_write_bio_X509) X(RAND_bytes) X(X509V3_EXT_conf_nid) X(X509V3_set_ctx) \
	X(X509_EXTENSION_free) X(X509_NAME_add_entry_by_txt) X(X509_add_ext) X(X509_free) \
	X(X509_get_serialNumber) X(X509_get_subject_name) X(X509_getm_notAfter) \
	X(X509_getm_notBefore) X(X509_gmtime_adj) X(X509_new) X(X509_set_issuer_name) \
	X(X509_set_pubkey) X(X509_set_version) X(X509_sign)

struct cryptolib {
#define CRYPTOLIB_MEMBER(n) __typeof__(n) *n;
	CRYPTOLIB_FUNCS(CRYPTOLIB_MEMBER)
#undef CRYPTOLIB_MEMBER
};

extern struct cryptolib cryptolib;

/* Load libcrypto and resolve every function of the table (once; later calls return the
 * first result). 0, or -1 with the loader's message in err. */
int cryptolib_load(char *err, size_t errlen);

/* The table, loaded: cryptolib_load, or the process ends (exit 70) with its message. */
const struct cryptolib *cryptolib_need(void);

/* Every libcrypto call of its callers, through the table. */
#define BIO_ctrl(...)                   (cryptolib_need()->BIO_ctrl(__VA_ARGS__))
#define BIO_free(...)                   (cryptolib_need()->BIO_free(__VA_ARGS__))
#define BIO_new(...)                    (cryptolib_need()->BIO_new(__VA_ARGS__))
#define BIO_s_mem(...)                  (cryptolib_need()->BIO_s_mem(__VA_ARGS__))
#define BIO_s_secmem(...)               (cryptolib_need()->BIO_s_secmem(__VA_ARGS__))
#define BN_bin2bn(...)                  (cryptolib_need()->BN_bin2bn(__VA_ARGS__))
#define BN_free(...)                    (cryptolib_need()->BN_free(__VA_ARGS__))
#define BN_to_ASN1_INTEGER(...)         (cryptolib_need()->BN_to_ASN1_INTEGER(__VA_ARGS__))
#define EVP_Digest(...)                 (cryptolib_need()->EVP_Digest(__VA_ARGS__))
#define EVP_DigestFinal_ex(...)         (cryptolib_need()->EVP_DigestFinal_ex(__VA_ARGS__))
#define EVP_DigestInit_ex(...)          (cryptolib_need()->EVP_DigestInit_ex(__VA_ARGS__))
#define EVP_DigestUpdate(...)           (cryptolib_need()->EVP_DigestUpdate(__VA_ARGS__))
#define EVP_MD_CTX_free(...)            (cryptolib_need()->EVP_MD_CTX_free(__VA_ARGS__))
#define EVP_MD_CTX_new(...)             (cryptolib_need()->EVP_MD_CTX_new(__VA_ARGS__))
#define EVP_PKEY_Q_keygen(...)          (cryptolib_need()->EVP_PKEY_Q_keygen(__VA_ARGS__))
#define EVP_PKEY_free(...)              (cryptolib_need()->EVP_PKEY_free(__VA_ARGS__))
#define EVP_sha256(...)                 (cryptolib_need()->EVP_sha256(__VA_ARGS__))
#define PEM_write_bio_PrivateKey(...)   (cryptolib_need()->PEM_write_bio_PrivateKey(__VA_ARGS__))
#define PEM_write_bio_X509(...)         (cryptolib_need()->PEM_write_bio_X509(__VA_ARGS__))
#define RAND_bytes(...)                 (cryptolib_need()->RAND_bytes(__VA_ARGS__))
#define X509V3_EXT_conf_nid(...)        (cryptolib_need()->X509V3_EXT_conf_nid(__VA_ARGS__))
#define X509V3_set_ctx(...)             (cryptolib_need()->X509V3_set_ctx(__VA_ARGS__))
#define X509_EXTENSION_free(...)        (cryptolib_need()->X509_EXTENSION_free(__VA_ARGS__))
#define X509_NAME_add_entry_by_txt(...) (cryptolib_need()->X509_NAME_add_entry_by_txt(__VA_ARGS__))
#define X509_add_ext(...)               (cryptolib_need()->X509_add_ext(__VA_ARGS__))
#define X509_free(...)                  (cryptolib_need()->X509_free(__VA_ARGS__))
#define X509_get_serialNumber(...)      (cryptolib_need()->X509_get_serialNumber(__VA_ARGS__))
#define X509_get_subject_name(...)      (cryptolib_need()->X509_get_subject_name(__VA_ARGS__))
#define X509_getm_notAfter(...)         (cryptolib_need()->X509_getm_notAfter(__VA_ARGS__))
#define X509_getm_notBefore(...)        (cryptolib_need()->X509_getm_notBefore(__VA_ARGS__))
#define X509_gmtime_adj(...)            (cryptolib_need()->X509_gmtime_adj(__VA_ARGS__))
#define X509_new(...)                   (cryptolib_need()->X509_new(__VA_ARGS__))
#define X509_set_issuer_name(...)       (cryptolib_need()->X509_set_issuer_name(__VA_ARGS__))
#define X509_set_pubkey(...)            (cryptolib_need()->X509_set_pubkey(__VA_ARGS__))
#define X509_set_version(...)           (cryptolib_need()->X509_set_version(__VA_ARGS__))
#define X509_sign(...)                  (cryptolib_need()->X509_sign(__VA_ARGS__))

#endif
