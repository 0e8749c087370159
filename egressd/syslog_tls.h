/*
 * syslog_tls - TLS for the decision log's syslog mirror (RFC 5425, OpenSSL): the client
 * context built from egressd.ini's log_syslog_ca, log_syslog_cert and log_syslog_key,
 * and the sentence an operator reads when a collector's handshake is refused (the reason
 * and the setting to change).
 *
 * Callers: egressd/syslog_stream.c (per connection), egressd/dlog_syslog.c (egressd -t
 * and start-up checks). Nothing here keeps state.
 */
#ifndef EGRESS_SYSLOG_TLS_H
#define EGRESS_SYSLOG_TLS_H

#include <openssl/ssl.h>
#include <stddef.h>

/*
 * Build the client context: verify the collector against the CA file ca (required),
 * TLS 1.2 or later; with cert and key (both or neither), present that client
 * certificate. Returns NULL with a message naming the file and the fix in err. The
 * caller frees it (SSL_CTX_free).
 */
SSL_CTX *syslog_tls_ctx(const char *ca, const char *cert, const char *key, char *err,
    size_t errlen);

/*
 * A handshake on ssl failed with SSL_get_error() == sslerr: why, and what to change
 * (log_syslog_name, log_syslog_ca, a client certificate, the collector's port), into out.
 * Clears OpenSSL's error queue.
 */
void syslog_tls_refusal(SSL *ssl, int sslerr, char *out, size_t cap);

/* OpenSSL's last error as text into out ("no detail" when none); clears the queue. */
void syslog_tls_errstr(char *out, size_t cap);

#endif
