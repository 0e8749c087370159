/* ccimport.c - a Kerberos credential cache copied into memory (see ccimport.h). */
#include "egressd/ccimport.h"

#include <stdio.h>
#include <string.h>

#include <krb5.h>

static void
cc_err(krb5_context ctx, krb5_error_code code, const char *what, char *err, size_t errlen)
{
	const char *m = ctx ? krb5_get_error_message(ctx, code) : NULL;

	snprintf(err, errlen, "%s: %s", what, m ? m : "Kerberos error");
	if (m != NULL)
		krb5_free_error_message(ctx, m);
}

int
ccimport_to_memory(const char *src, char *out, size_t outlen, char *err, size_t errlen)
{
	krb5_context ctx = NULL;
	krb5_ccache in = NULL, mem = NULL;
	krb5_principal princ = NULL;
	krb5_error_code code;
	const char *name;
	int rc = -1;

	if ((code = krb5_init_context(&ctx)) != 0) {
		snprintf(err, errlen, "cannot initialise Kerberos");
		return -1;
	}
	if ((code = krb5_cc_resolve(ctx, src, &in)) != 0) {
		cc_err(ctx, code, src, err, errlen);
		goto out;
	}
	if ((code = krb5_cc_get_principal(ctx, in, &princ)) != 0) {
		cc_err(ctx, code, "credential cache (run kinit as the invoking user)", err, errlen);
		goto out;
	}
	if ((code = krb5_cc_new_unique(ctx, "MEMORY", NULL, &mem)) != 0 ||
	    (code = krb5_cc_initialize(ctx, mem, princ)) != 0 ||
	    (code = krb5_cc_copy_creds(ctx, in, mem)) != 0) {
		cc_err(ctx, code, "copy the credential cache", err, errlen);
		if (mem != NULL) {
			krb5_cc_destroy(ctx, mem);
			mem = NULL;
		}
		goto out;
	}
	name = krb5_cc_get_name(ctx, mem);
	if (name == NULL || (size_t)snprintf(out, outlen, "MEMORY:%s", name) >= outlen) {
		snprintf(err, errlen, "memory cache name too long");
		krb5_cc_destroy(ctx, mem);
		mem = NULL;
		goto out;
	}
	rc = 0;
out:
	if (mem != NULL)
		krb5_cc_close(ctx, mem);   /* closes the handle; the memory cache stays */
	if (princ != NULL)
		krb5_free_principal(ctx, princ);
	if (in != NULL)
		krb5_cc_close(ctx, in);
	krb5_free_context(ctx);
	return rc;
}
