/* gssauth.c - SPNEGO tokens in worker threads, delivered on the loop (see gssauth.h). */
#define _GNU_SOURCE
#include "egressd/gssauth.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <gssapi/gssapi.h>
#include <gssapi/gssapi_ext.h>
#include <gssapi/gssapi_krb5.h>
#include <openssl/evp.h>

#include "common/log.h"
#include "common/util.h"

#define GSS_TOKEN_MAX 16384

/* 1.3.6.1.4.1.311.2.2.10: NTLMSSP (gss-ntlmssp) */
static gss_OID_desc ntlm_oid = { 10, (void *)"\x2b\x06\x01\x04\x01\x82\x37\x02\x02\x0a" };

struct gss_sec {
	gss_ctx_id_t ctx;
	gss_cred_id_t cred;
};

struct gss_req {
	struct gssauth *gq_g;
	char gq_host[256];
	char *gq_keytab, *gq_ccache, *gq_principal;
	gss_cb gq_cb;
	void *gq_arg;
	/* NTLM steps */
	int gq_ntlm;
	struct gss_sec *gq_sec; /* owned by the request while it runs */
	char *gq_user, *gq_pass; /* wiped on free */
	char *gq_challenge;
	gss_step_cb gq_step_cb;
	int gq_cancelled;       /* loop thread only */
	int gq_wfd;             /* the pipe's write end, copied so the thread never touches g */
	/* filled by the thread */
	char *gq_token;
	char gq_err[256];
	struct gss_req *gq_next; /* pending list, loop thread only */
};

struct gssauth {
	struct event_base *base;
	int pipefd[2];          /* threads write finished request pointers */
	struct event *ev;
	struct gss_req *pending;
};

static void
req_free(struct gss_req *r)
{
	if (r == NULL)
		return;
	if (r->gq_token != NULL) {
		secret_wipe(r->gq_token, strlen(r->gq_token));
		free(r->gq_token);
	}
	free(r->gq_keytab);
	free(r->gq_ccache);
	free(r->gq_principal);
	if (r->gq_pass != NULL) {
		secret_wipe(r->gq_pass, strlen(r->gq_pass));
		free(r->gq_pass);
	}
	free(r->gq_user);
	free(r->gq_challenge);
	gssauth_sec_free(r->gq_sec);
	free(r);
}

void
gssauth_sec_free(struct gss_sec *sec)
{
	OM_uint32 min;

	if (sec == NULL)
		return;
	if (sec->ctx != GSS_C_NO_CONTEXT)
		gss_delete_sec_context(&min, &sec->ctx, GSS_C_NO_BUFFER);
	if (sec->cred != GSS_C_NO_CREDENTIAL)
		gss_release_cred(&min, &sec->cred);
	free(sec);
}

static void
gss_errtext(OM_uint32 maj, OM_uint32 min, char *out, size_t len)
{
	OM_uint32 ctx = 0, m;
	gss_buffer_desc b = GSS_C_EMPTY_BUFFER;
	size_t off = 0;

	out[0] = '\0';
	gss_display_status(&m, maj, GSS_C_GSS_CODE, GSS_C_NO_OID, &ctx, &b);
	off += (size_t)snprintf(out, len, "%.*s", (int)b.length, (const char *)b.value);
	gss_release_buffer(&m, &b);
	if (min != 0 && off < len) {
		ctx = 0;
		gss_display_status(&m, min, GSS_C_MECH_CODE, GSS_C_NO_OID, &ctx, &b);
		snprintf(out + off, len - off, ": %.*s", (int)b.length, (const char *)b.value);
		gss_release_buffer(&m, &b);
	}
}

/* r->token = "<scheme> <base64 of out>" (worker thread). Returns 0, or -1 with r->err. */
static int
set_token(struct gss_req *r, const char *scheme, const gss_buffer_desc *out)
{
	size_t sl = strlen(scheme);

	r->gq_token = malloc(sl + 1 + 4 * ((out->length + 2) / 3) + 1);
	if (r->gq_token == NULL) {
		snprintf(r->gq_err, sizeof(r->gq_err), "out of memory");
		return -1;
	}
	memcpy(r->gq_token, scheme, sl);
	r->gq_token[sl] = ' ';
	EVP_EncodeBlock((unsigned char *)r->gq_token + sl + 1, out->value, (int)out->length);
	return 0;
}

/* End of a worker thread: hand the request back to the loop (a pointer-sized write to a
 * pipe is atomic); if egressd is shutting down, nobody will read it: free it here. */
static void *
hand_back(struct gss_req *r)
{
	if (write(r->gq_wfd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		req_free(r);
	return NULL;
}

/* Run fn(r) in a detached thread and put r on the pending list. 0, or -1. */
static int
start_thread(struct gssauth *g, struct gss_req *r, void *(*fn)(void *))
{
	pthread_t t;
	pthread_attr_t at;
	int rc;

	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &at, fn, r);
	pthread_attr_destroy(&at);
	if (rc != 0)
		return -1;
	r->gq_next = g->pending;
	g->pending = r;
	return 0;
}

/* Runs in a worker thread: no libevent calls, no shared state but the request. */
static void *
token_thread(void *arg)
{
	struct gss_req *r = arg;
	static gss_OID_desc spnego = { 6, (void *)"\x2b\x06\x01\x05\x05\x02" };
	OM_uint32 maj, min;
	char spn[300];
	gss_buffer_desc nb, out = GSS_C_EMPTY_BUFFER;
	gss_name_t name = GSS_C_NO_NAME, client = GSS_C_NO_NAME;
	gss_cred_id_t cred = GSS_C_NO_CREDENTIAL;
	gss_ctx_id_t ctx = GSS_C_NO_CONTEXT;
	gss_OID_set_desc mechs = { 1, &spnego };

	snprintf(spn, sizeof(spn), "HTTP@%s", r->gq_host);
	nb.value = spn;
	nb.length = strlen(spn);
	maj = gss_import_name(&min, &nb, GSS_C_NT_HOSTBASED_SERVICE, &name);
	if (GSS_ERROR(maj)) {
		gss_errtext(maj, min, r->gq_err, sizeof(r->gq_err));
		goto out;
	}
	if (r->gq_keytab != NULL || r->gq_ccache != NULL || r->gq_principal != NULL) {
		gss_key_value_element_desc el[2];
		gss_key_value_set_desc store = { 0, el };

		if (r->gq_keytab != NULL) {
			el[store.count].key = "client_keytab";
			el[store.count++].value = r->gq_keytab;
		}
		/* A TGT obtained from a keytab goes to egressd's own in-memory cache, never to
		 * the process default (/tmp/krb5cc_0 is shared with every root process). */
		if (r->gq_ccache != NULL || r->gq_keytab != NULL) {
			el[store.count].key = "ccache";
			el[store.count++].value = r->gq_ccache != NULL ? r->gq_ccache : "MEMORY:egressd";
		}
		if (r->gq_principal != NULL) {
			gss_buffer_desc pb = { strlen(r->gq_principal), r->gq_principal };
			maj = gss_import_name(&min, &pb, GSS_C_NT_USER_NAME, &client);
			if (GSS_ERROR(maj)) {
				gss_errtext(maj, min, r->gq_err, sizeof(r->gq_err));
				goto out;
			}
		}
		maj = gss_acquire_cred_from(&min, client, GSS_C_INDEFINITE, &mechs, GSS_C_INITIATE,
		    store.count ? &store : GSS_C_NO_CRED_STORE, &cred, NULL, NULL);
		if (GSS_ERROR(maj)) {
			gss_errtext(maj, min, r->gq_err, sizeof(r->gq_err));
			goto out;
		}
	}
	maj = gss_init_sec_context(&min, cred, &ctx, name, &spnego, GSS_C_MUTUAL_FLAG, 0,
	    GSS_C_NO_CHANNEL_BINDINGS, GSS_C_NO_BUFFER, NULL, &out, NULL, NULL);
	if (GSS_ERROR(maj) || out.length == 0 || out.length > GSS_TOKEN_MAX) {
		if (GSS_ERROR(maj))
			gss_errtext(maj, min, r->gq_err, sizeof(r->gq_err));
		else
			snprintf(r->gq_err, sizeof(r->gq_err), "no usable Negotiate token");
		goto out;
	}
	(void)set_token(r, "Negotiate", &out);
out:
	if (out.length)
		gss_release_buffer(&min, &out);
	if (ctx != GSS_C_NO_CONTEXT)
		gss_delete_sec_context(&min, &ctx, GSS_C_NO_BUFFER);
	if (cred != GSS_C_NO_CREDENTIAL)
		gss_release_cred(&min, &cred);
	if (name != GSS_C_NO_NAME)
		gss_release_name(&min, &name);
	if (client != GSS_C_NO_NAME)
		gss_release_name(&min, &client);
	return hand_back(r);
}

/* One NTLM leg, in a worker thread. */
static void *
ntlm_thread(void *arg)
{
	struct gss_req *r = arg;
	OM_uint32 maj, min;
	char spn[300];
	gss_buffer_desc nb, in = GSS_C_EMPTY_BUFFER, out = GSS_C_EMPTY_BUFFER;
	gss_name_t target = GSS_C_NO_NAME;
	unsigned char *raw = NULL;

	if (r->gq_sec == NULL) {
		gss_name_t user = GSS_C_NO_NAME;
		gss_buffer_desc ub = { strlen(r->gq_user), r->gq_user };
		gss_buffer_desc pb = { strlen(r->gq_pass), r->gq_pass };
		gss_OID_set_desc mechs = { 1, &ntlm_oid };

		r->gq_sec = calloc(1, sizeof(*r->gq_sec));
		if (r->gq_sec == NULL) {
			snprintf(r->gq_err, sizeof(r->gq_err), "out of memory");
			goto out;
		}
		maj = gss_import_name(&min, &ub, GSS_C_NT_USER_NAME, &user);
		if (!GSS_ERROR(maj))
			maj = gss_acquire_cred_with_password(&min, user, &pb, GSS_C_INDEFINITE, &mechs,
			    GSS_C_INITIATE, &r->gq_sec->cred, NULL, NULL);
		if (user != GSS_C_NO_NAME)
			gss_release_name(&min, &user);
		if (GSS_ERROR(maj)) {
			gss_errtext(maj, min, r->gq_err, sizeof(r->gq_err));
			if (r->gq_err[0] == '\0' || strstr(r->gq_err, "unsupported") != NULL)
				snprintf(r->gq_err, sizeof(r->gq_err), "no NTLM mechanism (install gss-ntlmssp)");
			goto out;
		}
	} else if (r->gq_challenge != NULL) {
		size_t cl = strlen(r->gq_challenge);
		int n;
		if (cl == 0 || cl > GSS_TOKEN_MAX || cl % 4 != 0) {
			snprintf(r->gq_err, sizeof(r->gq_err), "malformed NTLM challenge");
			goto out;
		}
		raw = malloc(cl);
		n = raw ? EVP_DecodeBlock(raw, (const unsigned char *)r->gq_challenge, (int)cl) : -1;
		if (n <= 0) {
			snprintf(r->gq_err, sizeof(r->gq_err), "malformed NTLM challenge");
			goto out;
		}
		/* EVP_DecodeBlock counts '=' padding as zero bytes */
		if (r->gq_challenge[cl - 1] == '=')
			n--;
		if (cl > 1 && r->gq_challenge[cl - 2] == '=')
			n--;
		in.value = raw;
		in.length = (size_t)n;
	}
	snprintf(spn, sizeof(spn), "HTTP@%s", r->gq_host);
	nb.value = spn;
	nb.length = strlen(spn);
	maj = gss_import_name(&min, &nb, GSS_C_NT_HOSTBASED_SERVICE, &target);
	if (!GSS_ERROR(maj))
		maj = gss_init_sec_context(&min, r->gq_sec->cred, &r->gq_sec->ctx, target, &ntlm_oid, 0, 0,
		    GSS_C_NO_CHANNEL_BINDINGS, in.length ? &in : GSS_C_NO_BUFFER, NULL, &out, NULL,
		    NULL);
	if (GSS_ERROR(maj) || out.length == 0 || out.length > GSS_TOKEN_MAX) {
		if (GSS_ERROR(maj))
			gss_errtext(maj, min, r->gq_err, sizeof(r->gq_err));
		else
			snprintf(r->gq_err, sizeof(r->gq_err), "no usable NTLM message");
		goto out;
	}
	(void)set_token(r, "NTLM", &out);
out:
	if (out.length)
		gss_release_buffer(&min, &out);
	if (target != GSS_C_NO_NAME)
		gss_release_name(&min, &target);
	free(raw);
	return hand_back(r);
}

static void
on_pipe(evutil_socket_t fd, short what, void *arg)
{
	struct gssauth *g = arg;
	struct gss_req *r;

	(void)what;
	while (read(fd, &r, sizeof(r)) == (ssize_t)sizeof(r)) {
		struct gss_req **pp;
		for (pp = &g->pending; *pp != NULL && *pp != r; pp = &(*pp)->gq_next)
			;
		if (*pp == r)
			*pp = r->gq_next;
		if (!r->gq_cancelled) {
			if (r->gq_ntlm) {
				struct gss_sec *sec = r->gq_sec;
				r->gq_sec = NULL;      /* back to the caller */
				r->gq_step_cb(r->gq_token, r->gq_token ? NULL : r->gq_err, sec, r->gq_arg);
			} else {
				r->gq_cb(r->gq_token, r->gq_token ? NULL : r->gq_err, r->gq_arg);
			}
		}
		req_free(r);
	}
}

struct gssauth *
gssauth_new(struct event_base *base)
{
	struct gssauth *g = calloc(1, sizeof(*g));

	if (g == NULL)
		return NULL;
	g->base = base;
	if (pipe2(g->pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
		free(g);
		return NULL;
	}
	/* writers must block rather than lose a result: only the read end is non-blocking */
	fcntl(g->pipefd[1], F_SETFL, 0);
	g->ev = event_new(base, g->pipefd[0], EV_READ | EV_PERSIST, on_pipe, g);
	if (g->ev == NULL || event_add(g->ev, NULL) != 0) {
		gssauth_free(g);
		return NULL;
	}
	return g;
}

struct gss_req *
gssauth_token(struct gssauth *g, const char *proxy_host, const char *keytab,
    const char *ccache, const char *principal, gss_cb cb, void *arg)
{
	struct gss_req *r = calloc(1, sizeof(*r));

	if (r == NULL || strlen(proxy_host) >= sizeof(r->gq_host))
		goto fail;
	snprintf(r->gq_host, sizeof(r->gq_host), "%s", proxy_host);
	if ((keytab && !(r->gq_keytab = strdup(keytab))) || (ccache && !(r->gq_ccache = strdup(ccache))) ||
	    (principal && !(r->gq_principal = strdup(principal))))
		goto fail;
	r->gq_g = g;
	r->gq_wfd = g->pipefd[1];
	r->gq_cb = cb;
	r->gq_arg = arg;
	if (start_thread(g, r, token_thread) != 0)
		goto fail;
	return r;
fail:
	req_free(r);
	return NULL;
}

struct gss_req *
gssauth_ntlm_step(struct gssauth *g, struct gss_sec *sec, const char *proxy_host,
    const char *username, const char *password, const char *challenge, gss_step_cb cb,
    void *arg)
{
	struct gss_req *r = calloc(1, sizeof(*r));

	if (r == NULL) {
		gssauth_sec_free(sec);
		return NULL;
	}
	r->gq_sec = sec;           /* owned from here on, whatever happens */
	if (strlen(proxy_host) >= sizeof(r->gq_host) || username == NULL || password == NULL)
		goto fail;
	snprintf(r->gq_host, sizeof(r->gq_host), "%s", proxy_host);
	if ((r->gq_user = strdup(username)) == NULL || (r->gq_pass = strdup(password)) == NULL ||
	    (challenge != NULL && (r->gq_challenge = strdup(challenge)) == NULL))
		goto fail;
	r->gq_ntlm = 1;
	r->gq_g = g;
	r->gq_wfd = g->pipefd[1];
	r->gq_step_cb = cb;
	r->gq_arg = arg;
	if (start_thread(g, r, ntlm_thread) != 0)
		goto fail;
	return r;
fail:
	req_free(r);
	return NULL;
}

void
gssauth_cancel(struct gss_req *r)
{
	if (r != NULL)
		r->gq_cancelled = 1;    /* freed when its thread hands it back */
}

void
gssauth_free(struct gssauth *g)
{
	if (g == NULL)
		return;
	/* Threads still running would write to the pipe: mark their requests cancelled and
	 * keep the write end open (leaked on purpose) only if any are pending. */
	for (struct gss_req *r = g->pending; r != NULL; r = r->gq_next)
		r->gq_cancelled = 1;
	if (g->ev)
		event_free(g->ev);
	close(g->pipefd[0]);
	if (g->pending == NULL)
		close(g->pipefd[1]);
	free(g);
}
