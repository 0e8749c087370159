/*
 * Unit tests for egressd/upstream against fake proxies on 127.0.0.1 (a server thread that
 * records what it received and answers with canned bytes).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "egressd/upstream.h"

static int lfd = -1;
static uint16_t port;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char reply[1024];
static size_t reply_len;
static char reply2[256];       /* SOCKS: second and third replies */
static size_t reply2_len;
static char reply3[256];
static size_t reply3_len;
static int socks;              /* 1: speak in rounds (greeting, [auth], connect) */
static int stall;
static char got[4096];
static size_t got_len;

static void
rd(int c, char *buf, size_t *len)
{
	ssize_t n = recv(c, buf + *len, sizeof(got) - 1 - *len, 0);
	if (n > 0)
		*len += (size_t)n;
}

static void *
server(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		struct timeval tv = { 2, 0 };
		if (c < 0)
			return NULL;
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		pthread_mutex_lock(&mu);
		got_len = 0;
		if (socks) {
			rd(c, got, &got_len);                      /* greeting */
			(void)!write(c, reply, reply_len);         /* method */
			rd(c, got, &got_len);                      /* auth or connect */
			(void)!write(c, reply2, reply2_len);
			if (reply3_len) {
				rd(c, got, &got_len);
				(void)!write(c, reply3, reply3_len);
			}
		} else {
			rd(c, got, &got_len);
			if (!stall)
				(void)!write(c, reply, reply_len);
		}
		got[got_len] = '\0';
		pthread_mutex_unlock(&mu);
		if (stall)
			sleep(1);
		usleep(200000);
		close(c);
	}
}

struct out {
	int done;
	struct upstream_result r;
	char data[64];
};

static void
cb(const struct upstream_result *r, void *arg)
{
	struct out *o = arg;

	o->done = 1;
	o->r = *r;
	if (r->fd >= 0) {
		/* bytes after the proxy's answer are tunnel data */
		usleep(50000);
		ssize_t n = recv(r->fd, o->data, sizeof(o->data) - 1, MSG_DONTWAIT);
		if (n > 0)
			o->data[n] = '\0';
		close(r->fd);
	}
}

/* Forward mode: nothing is sent; the header value comes back for the caller to use. */
static void
fwd_cb(const struct upstream_result *r, void *arg)
{
	struct out *o = arg;

	o->done = 1;
	o->r = *r;
	if (r->proxy_authorization != NULL) {
		snprintf(o->data, sizeof(o->data), "%s", r->proxy_authorization);
		free(r->proxy_authorization);
		o->r.proxy_authorization = NULL;
	}
	if (r->fd >= 0)
		close(r->fd);
}

static struct out
go(enum proxy_kind kind, uint16_t p_port, const struct proxycred *cred, const struct addr *pin,
    uint32_t timeout_ms)
{
	struct event_base *base = event_base_new();
	struct proxy_route via = { .kind = kind };
	struct upstream_params p = { .via = &via, .target_name = "api.example.com",
	    .target_addr = pin, .target_port = 443, .cred = cred, .timeout_ms = timeout_ms };
	struct out o = { 0 };
	char hp[32];

	snprintf(hp, sizeof(hp), "127.0.0.1:%u", p_port);
	assert_int_equal(host_parse(hp, strlen(hp), HOST_REQUIRE_PORT, &via.proxy), HOST_OK);
	assert_non_null(upstream_connect(base, &p, cb, &o));
	assert_int_equal(o.done, 0);
	for (int i = 0; i < 300 && !o.done; i++) {
		struct timeval tv = { 0, 10000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	assert_int_equal(o.done, 1);
	event_base_free(base);
	pthread_mutex_lock(&mu);     /* wait for the server to finish recording */
	pthread_mutex_unlock(&mu);
	return o;
}

static void
set_reply(const char *s)
{
	reply_len = strlen(s);
	memcpy(reply, s, reply_len);
}

static void
test_http_connect_ok_keeps_tunnel_bytes(void **state)
{
	struct out o;

	set_reply("HTTP/1.1 200 Connection established\r\nVia: test\r\n\r\nHELLO");
	o = go(PROXY_HTTP, port, NULL, NULL, 2000);
	assert_int_equal(o.r.status, REASON_ALLOWED);
	assert_int_equal(o.r.proxy_status, 200);
	assert_true(o.r.have_proxy_addr);
	assert_string_equal(o.data, "HELLO");
	assert_non_null(strstr(got, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n"));
	assert_null(strstr(got, "Proxy-Authorization"));
}

static void
test_basic_auth_and_refusals(void **state)
{
	struct proxycred c = { .scheme = PROXY_AUTH_BASIC, .username = "alice", .password = "s3cret" };
	struct out o;

	set_reply("HTTP/1.1 200 OK\r\n\r\n");
	o = go(PROXY_HTTP, port, &c, NULL, 2000);
	assert_int_equal(o.r.status, REASON_ALLOWED);
	assert_string_equal(o.r.auth, "basic");
	assert_non_null(strstr(got, "Proxy-Authorization: Basic YWxpY2U6czNjcmV0\r\n"));

	set_reply("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Negotiate\r\n"
	    "Proxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 0\r\n\r\n");
	o = go(PROXY_HTTP, port, NULL, NULL, 2000);
	assert_int_equal(o.r.status, REASON_UPSTREAM_AUTH_REQUIRED);
	assert_string_equal(o.r.offered, "Negotiate,Basic");
	assert_false(o.r.failover_ok);
	assert_int_equal(o.r.fd, -1);
	o = go(PROXY_HTTP, port, &c, NULL, 2000);
	assert_int_equal(o.r.status, REASON_UPSTREAM_AUTH_FAILED);
	assert_false(o.r.failover_ok);

	set_reply("HTTP/1.1 403 Forbidden\r\n\r\n");
	o = go(PROXY_HTTP, port, NULL, NULL, 2000);
	assert_int_equal(o.r.status, REASON_PROXY_REFUSED);
	assert_int_equal(o.r.proxy_status, 403);
	assert_false(o.r.failover_ok);

	set_reply("SSH-2.0-nope\r\n\r\n");
	o = go(PROXY_HTTP, port, NULL, NULL, 2000);
	assert_int_equal(o.r.status, REASON_PROXY_BAD_RESPONSE);
}

static void
test_pinned_literal(void **state)
{
	struct addr a = { .family = AF_INET6 };
	struct out o;

	inet_pton(AF_INET6, "2001:db8::7", &a.u.v6);
	set_reply("HTTP/1.1 200 OK\r\n\r\n");
	o = go(PROXY_HTTP, port, NULL, &a, 2000);
	assert_int_equal(o.r.status, REASON_ALLOWED);
	assert_non_null(strstr(got, "CONNECT [2001:db8::7]:443 HTTP/1.1\r\n"));
	assert_null(strstr(got, "api.example.com"));
}

static void
test_unreachable_and_timeout(void **state)
{
	struct out o;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	uint16_t closed;

	/* a port nobody listens on: bind, note, close */
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	bind(s, (struct sockaddr *)&sa, sizeof(sa));
	getsockname(s, (struct sockaddr *)&sa, &sl);
	closed = ntohs(sa.sin_port);
	close(s);
	o = go(PROXY_HTTP, closed, NULL, NULL, 2000);
	assert_int_equal(o.r.status, REASON_PROXY_UNREACHABLE);
	assert_true(o.r.failover_ok);

	stall = 1;
	o = go(PROXY_HTTP, port, NULL, NULL, 300);
	stall = 0;
	assert_int_equal(o.r.status, REASON_UPSTREAM_TIMEOUT);
	assert_false(o.r.failover_ok);
}

static void
test_socks5(void **state)
{
	struct out o;
	struct proxycred c = { .scheme = PROXY_AUTH_BASIC, .username = "u", .password = "pw" };

	socks = 1;
	memcpy(reply, "\x05\x00", 2);
	reply_len = 2;
	memcpy(reply2, "\x05\x00\x00\x01\x0a\x00\x00\x01\x01\xbbHELLO", 15);
	reply2_len = 15;
	reply3_len = 0;
	o = go(PROXY_SOCKS5, port, NULL, NULL, 2000);
	assert_int_equal(o.r.status, REASON_ALLOWED);
	assert_string_equal(o.data, "HELLO");
	assert_memory_equal(got, "\x05\x01\x00\x05\x01\x00\x03\x0f" "api.example.com\x01\xbb", 25);

	memcpy(reply2, "\x05\x05\x00\x01\x00\x00\x00\x00\x00\x00", 10);
	reply2_len = 10;
	o = go(PROXY_SOCKS5, port, NULL, NULL, 2000);
	assert_int_equal(o.r.status, REASON_SOCKS_CONN_REFUSED);

	/* username/password */
	memcpy(reply, "\x05\x02", 2);
	memcpy(reply2, "\x01\x00", 2);
	reply2_len = 2;
	memcpy(reply3, "\x05\x00\x00\x01\x0a\x00\x00\x01\x01\xbb", 10);
	reply3_len = 10;
	o = go(PROXY_SOCKS5, port, &c, NULL, 2000);
	assert_int_equal(o.r.status, REASON_ALLOWED);
	assert_memory_equal(got, "\x05\x02\x00\x02\x01\x01u\x02pw", 10);
	memcpy(reply2, "\x01\x01", 2);
	reply3_len = 0;
	o = go(PROXY_SOCKS5, port, &c, NULL, 2000);
	assert_int_equal(o.r.status, REASON_SOCKS_AUTH_FAILED);
	socks = 0;
}

static void
test_forward_mode(void **state)
{
	struct event_base *base = event_base_new();
	struct proxycred c = { .scheme = PROXY_AUTH_BASIC, .username = "alice", .password = "s3cret" };
	struct proxy_route via = { .kind = PROXY_HTTP };
	struct upstream_params p = { .via = &via, .target_name = "api.example.com",
	    .target_port = 80, .cred = &c, .timeout_ms = 2000, .forward = true };
	struct out o = { 0 };
	char hp[32];

	set_reply("");
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", port);
	assert_int_equal(host_parse(hp, strlen(hp), HOST_REQUIRE_PORT, &via.proxy), HOST_OK);
	o.r.proxy_authorization = NULL;
	assert_non_null(upstream_connect(base, &p, fwd_cb, &o));
	for (int i = 0; i < 300 && !o.done; i++) {
		struct timeval tv = { 0, 10000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	assert_int_equal(o.done, 1);
	assert_int_equal(o.r.status, REASON_ALLOWED);
	assert_string_equal(o.data, "Basic YWxpY2U6czNjcmV0");   /* copied by fwd_cb */
	event_base_free(base);
}

static void
test_connect_head(void **state)
{
	char buf[256];
	struct addr a = { .family = AF_INET };

	inet_pton(AF_INET, "198.51.100.7", &a.u.v4);
	assert_true(upstream_connect_head("x.example", &a, 8443, NULL, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "CONNECT 198.51.100.7:8443 HTTP/1.1\r\n"));
	assert_int_equal(upstream_connect_head("x.example", NULL, 443, NULL, buf, 20), 0);
}

static int
setup(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	pthread_t t;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 16) != 0)
		return -1;
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin_port);
	pthread_create(&t, NULL, server, NULL);
	pthread_detach(t);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_http_connect_ok_keeps_tunnel_bytes),
		cmocka_unit_test(test_basic_auth_and_refusals),
		cmocka_unit_test(test_pinned_literal),
		cmocka_unit_test(test_unreachable_and_timeout),
		cmocka_unit_test(test_socks5),
		cmocka_unit_test(test_forward_mode),
		cmocka_unit_test(test_connect_head),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
