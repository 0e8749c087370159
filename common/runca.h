/*
 * runca - make a per-run interception CA (OpenSSL): the certificate a sandbox trusts for
 * its model connection's destinations, and the private key only egressd holds.
 *
 * Owns: nothing after return; the caller frees both PEM strings, wiping the key
 * (secret_wipe) first. Callers: egress-exec (one CA per run, handed to egressd with
 * grant.create, the certificate alone written into the sandbox's CA bundle), unit and
 * integration tests (a lab CA).
 *
 * The CA: EC P-256 key, self-signed, SHA-256, serial from 128 random bits, valid from one
 * hour ago for lifetime_s (at most RUNCA_LIFETIME_MAX_S), basicConstraints critical
 * CA:TRUE pathlen:0, keyUsage critical keyCertSign+cRLSign, and, when `permitted` names
 * hosts, a critical nameConstraints extension permitting exactly those DNS names (and
 * their subdomains, RFC 5280 4.2.1.10): a leaked run CA key can then sign for nothing
 * else in a client that enforces name constraints (OpenSSL, Go, NSS, Node, browsers).
 */
#ifndef EGRESS_RUNCA_H
#define EGRESS_RUNCA_H

#include <stddef.h>
#include <stdint.h>

#define RUNCA_LIFETIME_MAX_S (31U * 24 * 3600)

/*
 * Make a CA with common name cn (printable, at most 64 bytes) permitting the host names in
 * permitted (NULL-terminated, may be NULL or empty: no constraint). Returns 0 with
 * *cert_pem and *key_pem (NUL-terminated heap strings), or -1 with err.
 */
int runca_make(const char *cn, const char *const *permitted, uint32_t lifetime_s,
    char **cert_pem, char **key_pem, char *err, size_t errlen);

#endif
