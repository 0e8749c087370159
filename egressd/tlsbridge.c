/* tlsbridge.c - an https:// proxy connection as a plain socketpair end (tlsbridge.h). */
#define _GNU_SOURCE
#include "egressd/tlsbridge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#define BRIDGE_HIGH_WM (256 * 1024)

struct tlsbridge {
	struct event_base *tb_base;
	struct bufferevent *tb_tls;  /* to the proxy */
	struct bufferevent *tb_app;  /* our socketpair end */
	int tb_app_peer;             /* the end handed out (-1 once handed out) */
	tlsbridge_cb tb_cb;
	void *tb_arg;
	int tb_connected;
	int tb_tls_eof, tb_app_eof;
	struct tlsbridge *tb_next, *tb_prev;
};

static struct tlsbridge *bridges;

static void
bridge_free(struct tlsbridge *b)
{
	if (b->tb_prev)
		b->tb_prev->tb_next = b->tb_next;
	else if (bridges == b)
		bridges = b->tb_next;
	if (b->tb_next)
		b->tb_next->tb_prev = b->tb_prev;
	if (b->tb_tls)
		bufferevent_free(b->tb_tls);
	if (b->tb_app)
		bufferevent_free(b->tb_app);
	if (b->tb_app_peer >= 0)
		close(b->tb_app_peer);
	free(b);
}

static void
fail(struct tlsbridge *b, const char *why)
{
	tlsbridge_cb cb = b->tb_cb;
	void *arg = b->tb_arg;
	int was_connected = b->tb_connected;

	bridge_free(b);
	if (!was_connected && cb != NULL)
		cb(-1, why, arg);
}

/* Relay from one bufferevent to the other with backpressure. */
static void
relay(struct bufferevent *from, struct bufferevent *to)
{
	struct evbuffer *out = bufferevent_get_output(to);

	evbuffer_add_buffer(out, bufferevent_get_input(from));
	if (evbuffer_get_length(out) >= BRIDGE_HIGH_WM)
		bufferevent_disable(from, EV_READ);
}

static void
maybe_done(struct tlsbridge *b)
{
	if (b->tb_tls_eof && b->tb_app_eof &&
	    evbuffer_get_length(bufferevent_get_output(b->tb_tls)) == 0 &&
	    evbuffer_get_length(bufferevent_get_output(b->tb_app)) == 0)
		bridge_free(b);
}

static void
tls_read(struct bufferevent *bev, void *arg)
{
	struct tlsbridge *b = arg;

	relay(bev, b->tb_app);
}

static void
app_read(struct bufferevent *bev, void *arg)
{
	struct tlsbridge *b = arg;

	relay(bev, b->tb_tls);
}

/* Output drained: resume reading the other side; pass on a pending half-close. */
static void
tls_write(struct bufferevent *bev, void *arg)
{
	struct tlsbridge *b = arg;

	if (!b->tb_app_eof)
		bufferevent_enable(b->tb_app, EV_READ);
	else if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		maybe_done(b);
}

static void
app_write(struct bufferevent *bev, void *arg)
{
	struct tlsbridge *b = arg;

	if (!b->tb_tls_eof)
		bufferevent_enable(b->tb_tls, EV_READ);
	else if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
		shutdown(bufferevent_getfd(bev), SHUT_WR);
		maybe_done(b);
	}
}

static void app_event(struct bufferevent *bev, short what, void *arg);

static void
tls_event(struct bufferevent *bev, short what, void *arg)
{
	struct tlsbridge *b = arg;

	if (what & BEV_EVENT_CONNECTED) {
		int sv[2];
		tlsbridge_cb cb = b->tb_cb;

		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) {
			fail(b, "socketpair failed");
			return;
		}
		b->tb_app = bufferevent_socket_new(b->tb_base, sv[0], BEV_OPT_CLOSE_ON_FREE);
		if (b->tb_app == NULL) {
			close(sv[0]);
			close(sv[1]);
			fail(b, "out of memory");
			return;
		}
		b->tb_connected = 1;
		bufferevent_setcb(b->tb_app, app_read, app_write, app_event, b);
		bufferevent_setcb(b->tb_tls, tls_read, tls_write, tls_event, b);
		bufferevent_enable(b->tb_app, EV_READ | EV_WRITE);
		bufferevent_enable(b->tb_tls, EV_READ | EV_WRITE);
		b->tb_cb = NULL;
		cb(sv[1], NULL, b->tb_arg);
		return;
	}
	if (what & (BEV_EVENT_ERROR | BEV_EVENT_EOF)) {
		if (!b->tb_connected) {
			char why[200];
			unsigned long e = bufferevent_get_openssl_error(bev);
			long vr = SSL_get_verify_result(bufferevent_openssl_get_ssl(bev));

			if (vr != X509_V_OK)
				snprintf(why, sizeof(why), "certificate verification failed: %s",
				    X509_verify_cert_error_string(vr));
			else if (e != 0)
				snprintf(why, sizeof(why), "TLS handshake failed: %s",
				    ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "error");
			else
				snprintf(why, sizeof(why), "the proxy closed the connection during TLS");
			fail(b, why);
			return;
		}
		/* proxy side ended: flush to the app side, then half-close it */
		b->tb_tls_eof = 1;
		relay(bev, b->tb_app);
		if (evbuffer_get_length(bufferevent_get_output(b->tb_app)) == 0) {
			shutdown(bufferevent_getfd(b->tb_app), SHUT_WR);
			if (what & BEV_EVENT_ERROR)
				b->tb_app_eof = 1;   /* nothing more can reach a broken TLS link */
			maybe_done(b);
		}
	}
}

static void
app_event(struct bufferevent *bev, short what, void *arg)
{
	struct tlsbridge *b = arg;

	(void)bev;
	if (what & (BEV_EVENT_ERROR | BEV_EVENT_EOF)) {
		b->tb_app_eof = 1;
		if (what & BEV_EVENT_ERROR)
			b->tb_tls_eof = 1;
		maybe_done(b);
	}
}

struct tlsbridge *
tlsbridge_new(struct event_base *base, int fd, SSL_CTX *ctx, const struct host *peer,
    tlsbridge_cb cb, void *arg)
{
	struct tlsbridge *b = calloc(1, sizeof(*b));
	SSL *ssl = NULL;

	if (b == NULL || (ssl = SSL_new(ctx)) == NULL)
		goto fail;
	b->tb_base = base;
	b->tb_app_peer = -1;
	b->tb_cb = cb;
	b->tb_arg = arg;
	if (peer->kind == HOST_NAME) {
		char sni[sizeof(peer->name)];     /* the SNI macro takes a non-const pointer */
		memcpy(sni, peer->name, sizeof(sni));
		SSL_set_tlsext_host_name(ssl, sni);
		SSL_set1_host(ssl, peer->name);
	} else {
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), peer->name);
	}
	SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
	b->tb_tls = bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
	    BEV_OPT_CLOSE_ON_FREE);
	ssl = NULL;       /* libevent's from the call on: freed by it when the call fails */
	if (b->tb_tls == NULL)
		goto fail;
	bufferevent_openssl_set_allow_dirty_shutdown(b->tb_tls, 1);
	bufferevent_setcb(b->tb_tls, NULL, NULL, tls_event, b);
	bufferevent_enable(b->tb_tls, EV_READ | EV_WRITE);
	b->tb_next = bridges;
	if (bridges)
		bridges->tb_prev = b;
	bridges = b;
	return b;
fail:
	if (ssl != NULL)
		SSL_free(ssl);
	close(fd);
	free(b);
	return NULL;
}

void
tlsbridge_abort(struct tlsbridge *b)
{
	if (b != NULL && !b->tb_connected)
		bridge_free(b);
}

void
tlsbridge_shutdown_all(void)
{
	while (bridges != NULL)
		bridge_free(bridges);
}
