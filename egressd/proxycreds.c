/* proxycreds.c - root-only upstream proxy credentials (see proxycreds.h). */
#define _GNU_SOURCE
#include "egressd/proxycreds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/conf.h"
#include "common/limits.h"
#include "common/util.h"
#include "egressd/ccimport.h"
#include "egressd/secretfile.h"

static const struct conf_key schema[] = {
	{ "proxy *", "scheme", CONF_REQUIRED },
	{ "proxy *", "username", 0 },
	{ "proxy *", "password", 0 },
	{ "proxy *", "password_file", 0 },
	{ "proxy *", "keytab", 0 },
	{ "proxy *", "ccache", 0 },
	{ "proxy *", "ccache_import", 0 },
	{ "proxy *", "principal", 0 },
};

const char *
proxy_auth_scheme_str(enum proxy_auth_scheme s)
{
	switch (s) {
	case PROXY_AUTH_BASIC:     return "basic";
	case PROXY_AUTH_NEGOTIATE: return "negotiate";
	case PROXY_AUTH_NTLM:      return "ntlm";
	}
	return "unknown";
}

static char *
dup_opt(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void
cred_clear(struct proxycred *c)
{
	if (c->password != NULL) {
		secret_wipe(c->password, strlen(c->password));
		free(c->password);
	}
	free(c->username);
	free(c->keytab);
	free(c->ccache);
	free(c->principal);
	memset(c, 0, sizeof(*c));
}

void
proxycreds_free(struct proxycreds *c)
{
	if (c == NULL || --c->refs > 0)
		return;
	for (size_t i = 0; i < c->n; i++)
		cred_clear(&c->v[i]);
	free(c->v);
	free(c);
}

struct proxycreds *
proxycreds_ref(struct proxycreds *c)
{
	c->refs++;
	return c;
}

struct proxycreds *
proxycreds_load(const char *path, int check_owner, char *err, size_t errlen)
{
	struct proxycreds *out = NULL;
	struct conf *conf = NULL;
	size_t len = 0, nsec;
	char *text = secretfile_read(path, check_owner, "proxy credentials", &len, err,
	    errlen);

	if (text == NULL)
		return NULL;
	conf = conf_load_string(path, text, len, schema, EGRESS_NELEM(schema), err, errlen);
	secret_wipe(text, len);
	free(text);
	if (conf == NULL)
		return NULL;
	out = calloc(1, sizeof(*out));
	if (out != NULL)
		out->refs = 1;
	nsec = conf_nsections(conf);
	if (out == NULL || (nsec > 0 && (out->v = calloc(nsec, sizeof(*out->v))) == NULL))
		goto nomem;
	for (size_t i = 0; i < nsec; i++) {
		const char *label = conf_section_label(conf, i);
		const char *scheme = conf_get(conf, i, "scheme", NULL);
		const char *pwfile = conf_get(conf, i, "password_file", NULL);
		unsigned line = conf_line(conf, i, "scheme");
		struct proxycred *c = &out->v[out->n];
		const char *imp;

		if (label == NULL || label[0] == '\0')
			continue;     /* keys outside [proxy ...] are refused by the schema */
		if (host_parse(label, strlen(label), HOST_REQUIRE_PORT, &c->proxy) != HOST_OK) {
			snprintf(err, errlen, "%s:%u: [proxy %s]: expected host:port of the proxy",
			    path, line, label);
			goto fail;
		}
		for (size_t k = 0; k < out->n; k++)
			if (strcmp(out->v[k].proxy.name, c->proxy.name) == 0 &&
			    out->v[k].proxy.port == c->proxy.port) {
				snprintf(err, errlen, "%s:%u: [proxy %s] appears twice", path, line, label);
				goto fail;
			}
		if (strcmp(scheme, "basic") == 0)
			c->scheme = PROXY_AUTH_BASIC;
		else if (strcmp(scheme, "negotiate") == 0)
			c->scheme = PROXY_AUTH_NEGOTIATE;
		else if (strcmp(scheme, "ntlm") == 0)
			c->scheme = PROXY_AUTH_NTLM;
		else {
			snprintf(err, errlen, "%s:%u: scheme must be basic, negotiate or ntlm", path, line);
			goto fail;
		}
		c->username = dup_opt(conf_get(conf, i, "username", NULL));
		c->password = dup_opt(conf_get(conf, i, "password", NULL));
		c->keytab = dup_opt(conf_get(conf, i, "keytab", NULL));
		c->ccache = dup_opt(conf_get(conf, i, "ccache", NULL));
		c->principal = dup_opt(conf_get(conf, i, "principal", NULL));
		out->n++;
		if ((imp = conf_get(conf, i, "ccache_import", NULL)) != NULL) {
			char mem[256];

			if (c->scheme != PROXY_AUTH_NEGOTIATE || c->ccache != NULL) {
				snprintf(err, errlen, "%s:%u: ccache_import is for scheme = negotiate "
				    "and excludes ccache", path, conf_line(conf, i, "ccache_import"));
				goto fail;
			}
			/* Read now, while egressd may still read the person's cache (before the
			 * privilege drop); afterwards only the memory copy is used. */
			if (ccimport_to_memory(imp, mem, sizeof(mem), err, errlen) != 0) {
				char e2[256];
				snprintf(e2, sizeof(e2), "%s", err);
				snprintf(err, errlen, "%s:%u: ccache_import: %s", path,
				    conf_line(conf, i, "ccache_import"), e2);
				goto fail;
			}
			if ((c->ccache = strdup(mem)) == NULL)
				goto nomem;
		}
		if (pwfile != NULL) {
			size_t pl;
			char *pw;
			if (c->password != NULL) {
				snprintf(err, errlen, "%s:%u: password and password_file are exclusive",
				    path, conf_line(conf, i, "password_file"));
				goto fail;
			}
			pw = secretfile_read(pwfile, check_owner, "a proxy password", &pl, err,
			    errlen);
			if (pw == NULL)
				goto fail;
			while (pl > 0 && (pw[pl - 1] == '\n' || pw[pl - 1] == '\r'))
				pw[--pl] = '\0';
			c->password = pw;
		}
		if ((c->scheme == PROXY_AUTH_BASIC || c->scheme == PROXY_AUTH_NTLM) &&
		    (c->username == NULL || c->password == NULL || c->username[0] == '\0' ||
		     strchr(c->username, ':') != NULL)) {
			snprintf(err, errlen, "%s:%u: %s needs username (without ':') and password",
			    path, line, scheme);
			goto fail;
		}
	}
	conf_free(conf);
	return out;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	conf_free(conf);
	proxycreds_free(out);
	return NULL;
}

const struct proxycred *
proxycreds_find(const struct proxycreds *c, const struct host *proxy)
{
	if (c == NULL)
		return NULL;
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].proxy.port == proxy->port && strcmp(c->v[i].proxy.name, proxy->name) == 0)
			return &c->v[i];
	return NULL;
}

size_t
proxycreds_basic_header(const struct proxycred *c, char *out, size_t outlen)
{
	char plain[600];
	size_t ul, pl, need;
	int n;

	if (c->username == NULL || c->password == NULL)
		return 0;
	ul = strlen(c->username);
	pl = strlen(c->password);
	if (ul + pl + 1 > sizeof(plain))
		return 0;
	memcpy(plain, c->username, ul);
	plain[ul] = ':';
	memcpy(plain + ul + 1, c->password, pl);
	need = 6 + 4 * ((ul + pl + 1 + 2) / 3) + 1;
	if (outlen < need) {
		secret_wipe(plain, sizeof(plain));
		return 0;
	}
	memcpy(out, "Basic ", 6);
	n = EVP_EncodeBlock((unsigned char *)out + 6, (const unsigned char *)plain, (int)(ul + pl + 1));
	secret_wipe(plain, sizeof(plain));
	if (n < 0)
		return 0;
	return 6 + (size_t)n;
}
