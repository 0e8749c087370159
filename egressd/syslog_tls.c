/* syslog_tls.c - TLS for the syslog mirror: the client context, and what a refused
 * handshake means for the operator. Contract: syslog_tls.h. */
#include "egressd/syslog_tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

void
syslog_tls_errstr(char *out, size_t cap)
{
	unsigned long e = ERR_peek_last_error();

	if (e == 0)
		snprintf(out, cap, "no detail");
	else
		ERR_error_string_n(e, out, cap);
	ERR_clear_error();
}

SSL_CTX *
syslog_tls_ctx(const char *ca, const char *cert, const char *key, char *err, size_t errlen)
{
	SSL_CTX *ctx;
	char why[256];

	if (ca == NULL) {
		errbuf_set(err, errlen, 0, "log_syslog = tls://...: log_syslog_ca is required (the "
		    "CA file that issued the collector's certificate)");
		return NULL;
	}
	if ((cert == NULL) != (key == NULL)) {
		errbuf_set(err, errlen, 0, "log_syslog_cert and log_syslog_key go together (the "
		    "client certificate and its key)");
		return NULL;
	}
	ERR_clear_error();
	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL) {
		errbuf_set(err, errlen, 0, "log_syslog: cannot create a TLS context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
		syslog_tls_errstr(why, sizeof(why));
		errbuf_set(err, errlen, 0, "log_syslog_ca %s: cannot load (%s): a PEM file of the "
		    "CA certificate(s) that issued the collector's certificate", ca, why);
		goto fail;
	}
	if (cert != NULL) {
		if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
			syslog_tls_errstr(why, sizeof(why));
			errbuf_set(err, errlen, 0, "log_syslog_cert %s: cannot load (%s): a PEM "
			    "certificate (chain)", cert, why);
			goto fail;
		}
		if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
			syslog_tls_errstr(why, sizeof(why));
			errbuf_set(err, errlen, 0, "log_syslog_key %s: cannot load (%s): a PEM private "
			    "key, readable by root", key, why);
			goto fail;
		}
		if (SSL_CTX_check_private_key(ctx) != 1) {
			syslog_tls_errstr(why, sizeof(why));
			errbuf_set(err, errlen, 0, "log_syslog_key %s does not belong to "
			    "log_syslog_cert %s (%s)", key, cert, why);
			goto fail;
		}
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

void
syslog_tls_refusal(SSL *ssl, int sslerr, char *out, size_t cap)
{
	long vr = SSL_get_verify_result(ssl);
	char why[256];
	const char *fix;

	if (vr != X509_V_OK) {
		switch (vr) {
		case X509_V_ERR_HOSTNAME_MISMATCH:
			fix = "set log_syslog_name to a name its certificate carries";
			break;
		case X509_V_ERR_IP_ADDRESS_MISMATCH:
			fix = "its certificate does not carry this address: set log_syslog_name "
			    "to a name it carries";
			break;
		case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
		case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
		case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
		case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
		case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
		case X509_V_ERR_CERT_SIGNATURE_FAILURE:
			fix = "log_syslog_ca does not hold the CA that issued it: set log_syslog_ca "
			    "to that CA's certificate";
			break;
		case X509_V_ERR_CERT_HAS_EXPIRED:
		case X509_V_ERR_CERT_NOT_YET_VALID:
			fix = "renew the collector's certificate (or check this machine's clock)";
			break;
		default:
			fix = "check log_syslog_ca, log_syslog_name and the collector's certificate";
			break;
		}
		snprintf(out, cap, "TLS handshake: the collector's certificate is refused: "
		    "%s (%s)", X509_verify_cert_error_string(vr), fix);
		ERR_clear_error();
		return;
	}
	if (ERR_peek_last_error() != 0) {
		syslog_tls_errstr(why, sizeof(why));
		snprintf(out, cap, "TLS handshake failed: %s (does the collector speak TLS on "
		    "this port (rsyslog: imtcp with StreamDriver.Mode=1)? does it want a client "
		    "certificate (log_syslog_cert, log_syslog_key)?)", why);
		return;
	}
	snprintf(out, cap, "TLS handshake failed: the collector closed the connection (%s): "
	    "does it want a client certificate (log_syslog_cert, log_syslog_key) or refuse "
	    "the one given? does it speak TLS on this port?", sslerr == SSL_ERROR_SYSCALL ?
	    (errno != 0 ? strerror(errno) : "end of stream") : "protocol error");
}
