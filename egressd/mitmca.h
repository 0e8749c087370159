/*
 * mitmca - the interception CA egressd holds for model connections, and the leaf
 * certificates it mints for exactly the CONNECT host (docs/model-connections.md).
 *
 * Owns: struct mitm_ca (CA certificate and key, one leaf key, a cache of at most
 * EGRESS_LEAF_CACHE_MAX server contexts, least recently used evicted). The CA key never
 * leaves this struct and is freed with it (OpenSSL clears freed key material).
 * Callers: egressd/control + daemon (a per-run CA from grant.create, or the operator's CA
 * from [egressd] intercept_ca_cert / intercept_ca_key, loaded at start-up as root),
 * egressd/mitm (the server context for one intercepted tunnel). Event-loop thread only.
 *
 * A leaf: subject CN and subjectAltName exactly the CONNECT host (DNS name, or IP address
 * for a literal), serial from 128 random bits, valid from one hour ago until the earlier of
 * seven days and the CA's own notAfter, basicConstraints CA:FALSE, keyUsage
 * digitalSignature, extendedKeyUsage serverAuth, authority key identifier. The server
 * context speaks TLS 1.2 and 1.3 and selects ALPN "http/1.1" only: a client that offers
 * ALPN without it fails the handshake (no h2 is spoken inside an interception).
 */
#ifndef EGRESS_MITMCA_H
#define EGRESS_MITMCA_H

#include <stddef.h>

#include <openssl/ssl.h>

#include "common/host.h"

struct mitm_ca;

/* From PEM text (a certificate that is a CA, and its private key, which must match).
 * NULL with err. The caller wipes key_pem afterwards. */
struct mitm_ca *mitm_ca_from_pem(const char *cert_pem, size_t cert_len, const char *key_pem,
    size_t key_len, char *err, size_t errlen);
/* From files: the key is read with secretfile_read (root-only, 0600) when check_owner. */
struct mitm_ca *mitm_ca_load(const char *cert_path, const char *key_path, int check_owner,
    char *err, size_t errlen);
/* Drop a reference (the last one frees). Accepts NULL. */
void mitm_ca_free(struct mitm_ca *ca);
/* Another reference (a reload keeps the operator's CA start-up loaded). Returns ca. */
struct mitm_ca *mitm_ca_ref(struct mitm_ca *ca);

/*
 * A server SSL_CTX presenting a leaf for exactly h (its name, or its address for an IP
 * literal), minted on first use and cached. Returns a new reference (SSL_CTX_free it), or
 * NULL with err.
 */
SSL_CTX *mitm_ca_server_ctx(struct mitm_ca *ca, const struct host *h, char *err,
    size_t errlen);

/* The CA certificate (borrowed), e.g. for tests that build a client trust store. */
X509 *mitm_ca_cert(const struct mitm_ca *ca);

/* Leaves minted and cache hits so far (tests, metrics). */
void mitm_ca_stats(const struct mitm_ca *ca, unsigned long *minted, unsigned long *hits);

#endif
