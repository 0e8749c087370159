/* Unit tests for egressd/mitm: a whole intercepted tunnel over socket pairs, with a real
 * TLS worker (thread), the mitm on an event loop, and a real TLS origin (thread) that
 * answers only with the right key and streams a chunked (SSE) body. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "common/log.h"
#include "common/runca.h"
#include "common/util.h"
#include "egressd/dlog.h"
#include "egressd/metrics.h"
#include "egressd/mitm.h"
#include "egressd/mitmca.h"

static char dir[] = "/tmp/egress-mitm-XXXXXX";
static uint64_t lifetime_ms;            /* mitm_opts.lifetime_ms of the next run */
/* The next run revokes the tunnel while its first inner allow record is in flight: the log
 * syncs always, and the writer's fdatasync (__wrap_fdatasync) waits until the revoke. */
static bool revoke_in_flight;
static pthread_mutex_t sync_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sync_cv = PTHREAD_COND_INITIALIZER;
static bool sync_held;

int __real_fdatasync(int fd);
int __wrap_fdatasync(int fd);

int
__wrap_fdatasync(int fd)
{
	pthread_mutex_lock(&sync_mu);
	while (sync_held)
		pthread_cond_wait(&sync_cv, &sync_mu);
	pthread_mutex_unlock(&sync_mu);
	return __real_fdatasync(fd);
}

static void
sync_hold(bool on)
{
	pthread_mutex_lock(&sync_mu);
	sync_held = on;
	pthread_cond_broadcast(&sync_cv);
	pthread_mutex_unlock(&sync_mu);
}
static const char secret[] = "sk-REAL-KEY-42";
static const char placeholder[] = "egress-placeholder-0123456789abcdef";

struct world {
	char *run_cert, *run_key;       /* the run CA (the worker trusts it) */
	char *origin_cert, *origin_key; /* the origin's own CA (egressd trusts it) */
	struct mitm_ca *run_ca, *origin_ca;
	char origin_ca_file[300];
	struct connections *conns;
	struct grant *grant;
};

/* ---- the origin (thread) ---- */

struct origin {
	int fd;
	SSL_CTX *ctx;
	int requests;                   /* requests answered */
	int saw_placeholder;            /* any request head held the placeholder */
	int saw_real_key;
	char last_head[4096];
	char last_body[256];            /* a request's Content-Length body */
	int app_records;                /* TLS application-data records received */
};

/*
 * SSL_set_msg_callback: count the application-data records a peer receives. Under TLS 1.3
 * every encrypted record has the outer type application_data, and OpenSSL reports the
 * inner type only of those that are not (handshake messages, alerts): each of those is
 * taken off again.
 */
static void
count_app(int write_p, int version, int content_type, const void *buf, size_t len, SSL *ssl,
    void *arg)
{
	unsigned char type = len >= 1 ? ((const unsigned char *)buf)[0] : 0;

	(void)version;
	(void)ssl;
	if (write_p || len < 1)
		return;
	if (content_type == SSL3_RT_HEADER && type == SSL3_RT_APPLICATION_DATA)
		(*(int *)arg)++;
	else if (content_type == SSL3_RT_INNER_CONTENT_TYPE && type != SSL3_RT_APPLICATION_DATA)
		(*(int *)arg)--;
}

/* The Content-Length of a head (0 when it has none or it is out of range). */
static size_t
content_length(const char *head, size_t max)
{
	const char *p = strcasestr(head, "\r\ncontent-length: ");
	unsigned long v = p != NULL ? strtoul(p + 18, NULL, 10) : 0;

	return v <= max ? (size_t)v : 0;
}

static int
read_head(SSL *ssl, char *buf, size_t cap)
{
	size_t n = 0;

	while (n + 1 < cap) {
		int k = SSL_read(ssl, buf + n, 1);
		if (k <= 0)
			return -1;
		n++;
		if (n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0) {
			buf[n] = '\0';
			return (int)n;
		}
	}
	return -1;
}

static void *
origin_main(void *arg)
{
	struct origin *o = arg;
	SSL *ssl = SSL_new(o->ctx);
	char head[4096];

	SSL_set_fd(ssl, o->fd);
	SSL_set_msg_callback(ssl, count_app);
	SSL_set_msg_callback_arg(ssl, &o->app_records);
	if (SSL_accept(ssl) != 1)
		goto out;
	while (read_head(ssl, head, sizeof(head)) > 0) {
		static const char deny[] = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n";
		size_t blen = content_length(head, sizeof(o->last_body) - 1), got = 0;
		char key[128];

		snprintf(o->last_head, sizeof(o->last_head), "%s", head);
		while (got < blen) {
			int k = SSL_read(ssl, o->last_body + got, (int)(blen - got));
			if (k <= 0)
				goto out;
			got += (size_t)k;
		}
		o->last_body[got] = '\0';
		if (strstr(head, placeholder) != NULL)
			o->saw_placeholder = 1;
		snprintf(key, sizeof(key), "x-api-key: %s\r\n", secret);
		if (strstr(head, key) == NULL) {
			SSL_write(ssl, deny, sizeof(deny) - 1);
			o->requests++;
			continue;
		}
		o->saw_real_key = 1;
		if (strstr(head, "POST /v1/messages") != NULL) {
			/* a small answer in one record, as a model API gives it */
			static const char r[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			    "Content-Length: 15\r\n\r\n{\"id\":\"msg_01\"}";
			SSL_write(ssl, r, sizeof(r) - 1);
		} else if (strstr(head, "GET /redirect-out") != NULL) {
			static const char r[] = "HTTP/1.1 302 Found\r\nLocation: https://evil.example"
			    "/x\r\nContent-Length: 0\r\n\r\n";
			SSL_write(ssl, r, sizeof(r) - 1);
		} else if (strstr(head, "GET /redirect-in") != NULL) {
			static const char r[] = "HTTP/1.1 302 Found\r\nLocation: /v1/other\r\n"
			    "Content-Length: 0\r\n\r\n";
			SSL_write(ssl, r, sizeof(r) - 1);
		} else {
			/* SSE: chunked events with pauses, so the stream is seen arriving */
			static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
			    "Transfer-Encoding: chunked\r\n\r\n";
			SSL_write(ssl, h, sizeof(h) - 1);
			for (int i = 0; i < 3; i++) {
				char ev[64], ch[96];
				int l = snprintf(ev, sizeof(ev), "data: event %d\n\n", i);
				int cl = snprintf(ch, sizeof(ch), "%x\r\n%s\r\n", l, ev);
				SSL_write(ssl, ch, cl);
				usleep(20000);
			}
			SSL_write(ssl, "0\r\n\r\n", 5);
		}
		o->requests++;
	}
out:
	SSL_free(ssl);
	close(o->fd);
	return NULL;
}

/* ---- the worker (thread) ---- */

struct worker {
	int fd;
	const char *ca_pem;             /* what it trusts */
	const char *script;             /* requests to send, one after the other */
	int nreq;
	char resp[8][4096];
	int nresp;
	int handshake_ok;
	int app_records;                /* TLS application-data records received */
};

static int
read_response(SSL *ssl, char *buf, size_t cap)
{
	/* read until the chunked terminator, a Content-Length body, or EOF (small bodies) */
	size_t n = 0;
	while (n + 1 < cap) {
		int k = SSL_read(ssl, buf + n, (int)(cap - 1 - n));
		if (k <= 0)
			break;
		n += (size_t)k;
		buf[n] = '\0';
		if (strstr(buf, "\r\n0\r\n\r\n") != NULL)
			break;
		if (strstr(buf, "Content-Length: 0\r\n") != NULL && strstr(buf, "\r\n\r\n") != NULL)
			break;
		{
			const char *e = strstr(buf, "\r\n\r\n");
			size_t cl = content_length(buf, cap);

			if (e != NULL && cl > 0 && n >= (size_t)(e + 4 - buf) + cl)
				break;
		}
	}
	buf[n] = '\0';
	return (int)n;
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	BIO *b = BIO_new_mem_buf(w->ca_pem, -1);
	X509 *ca = PEM_read_bio_X509(b, NULL, NULL, NULL);
	char line[64];
	size_t n = 0;
	SSL *ssl;
	const char *p = w->script;

	X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca);
	X509_free(ca);
	BIO_free(b);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* the 200 in clear first */
	while (n < 39) {
		ssize_t k = read(w->fd, line + n, 39 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, w->fd);
	SSL_set_msg_callback(ssl, count_app);
	SSL_set_msg_callback_arg(ssl, &w->app_records);
	SSL_set_tlsext_host_name(ssl, "api.example.com");
	SSL_set1_host(ssl, "api.example.com");
	if (SSL_connect(ssl) == 1) {
		w->handshake_ok = 1;
		for (int i = 0; i < w->nreq && *p; i++) {
			const char *e = strstr(p, "\r\n\r\n");
			char one[4096];
			size_t hl = (size_t)(e + 4 - p);

			/* the head and its Content-Length body in one write (one record) */
			snprintf(one, sizeof(one), "%.*s", (int)hl, p);
			hl += content_length(one, strlen(e + 4));
			SSL_write(ssl, p, (int)hl);
			p += hl;
			read_response(ssl, w->resp[w->nresp], sizeof(w->resp[0]));
			w->nresp++;
		}
	}
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	shutdown(w->fd, SHUT_RDWR);
	close(w->fd);
	return NULL;
}

/* ---- the mitm ---- */

struct done { int calls; enum reason why; uint64_t up, down; struct event_base *base; };

static void
on_done(enum reason why, uint64_t up, uint64_t down, void *arg)
{
	struct done *d = arg;
	d->calls++;
	d->why = why;
	d->up = up;
	d->down = down;
	event_base_loopbreak(d->base);
}

static int
setup(void **state)
{
	static struct world w;
	char err[512], path[400], conns[1024];
	const char *perm[] = { "api.example.com", NULL };
	FILE *f;

	if (mkdtemp(dir) == NULL)
		return -1;
	assert_int_equal(runca_make("run", perm, 3600, &w.run_cert, &w.run_key, err,
	    sizeof(err)), 0);
	assert_int_equal(runca_make("origin lab", NULL, 3600, &w.origin_cert, &w.origin_key,
	    err, sizeof(err)), 0);
	w.run_ca = mitm_ca_from_pem(w.run_cert, strlen(w.run_cert), w.run_key,
	    strlen(w.run_key), err, sizeof(err));
	w.origin_ca = mitm_ca_from_pem(w.origin_cert, strlen(w.origin_cert), w.origin_key,
	    strlen(w.origin_key), err, sizeof(err));
	assert_non_null(w.run_ca);
	assert_non_null(w.origin_ca);
	snprintf(w.origin_ca_file, sizeof(w.origin_ca_file), "%s/origin-ca.pem", dir);
	f = fopen(w.origin_ca_file, "w");
	fputs(w.origin_cert, f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/key", dir);
	f = fopen(path, "w");
	fprintf(f, "%s\n", secret);
	fclose(f);
	chmod(path, 0600);
	snprintf(conns, sizeof(conns), "[connection m]\ndestination = https://api.example.com\n"
	    "credential_file = %s\ncredential_header = x-api-key\nallow_method = GET\n"
	    "allow_method = POST\nallow_path = /v1/*\nallow_path = /redirect-*\n", path);
	w.conns = connections_load_string("c.ini", conns, strlen(conns), getuid() == 0, NULL, err,
	    sizeof(err));
	assert_non_null(w.conns);
	{
		json_t *j = json_pack("{s:s, s:[s]}", "principal", "p", "allow",
		    "https://api.example.com");
		w.grant = grant_from_json(j, err, sizeof(err));
		json_decref(j);
		assert_non_null(w.grant);
	}
	*state = &w;
	return 0;
}

static int
teardown(void **state)
{
	struct world *w = *state;
	char cmd[300];

	mitm_ca_free(w->run_ca);
	mitm_ca_free(w->origin_ca);
	connections_free(w->conns);
	grant_free(w->grant);
	free(w->run_cert);
	free(w->origin_cert);
	free(w->run_key);
	free(w->origin_key);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

struct run {
	struct metrics_stats stats;     /* what the tunnel counted (its inner hops) */
	struct mitm *m;
	bool revoked;                   /* revoke_in_flight: done, with the allow in flight */
	struct done done;
	struct origin origin;
	struct worker worker;
	char logpath[400];
	char log[65536];
};

/* revoke_in_flight: every millisecond, until the log holds the first inner allow (written,
 * its fdatasync held, so its callback is still due): then revoke the tunnel. */
static void
on_watch(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	char buf[8192];
	FILE *f = fopen(r->logpath, "r");
	size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	(void)fd;
	(void)what;
	if (f != NULL)
		fclose(f);
	buf[n] = '\0';
	if (r->revoked || strstr(buf, "\"hop\":\"c-1/1.1\"") == NULL)
		return;
	r->revoked = true;
	mitm_close(r->m, REASON_CLOSE_REVOKED);
	sync_hold(false);
}

/* One tunnel: worker script against the origin; origin_host is the name the origin's
 * certificate carries (another name: its certificate does not verify). */
static void
run(struct world *w, struct run *r, const char *script, int nreq, const char *origin_host,
    const char *worker_ca)
{
	struct event_base *base = event_base_new();
	struct dlog_config dc;
	struct dlog *dl;
	char err[512];
	int cs[2], os[2];
	pthread_t to, tw;
	struct mitm_opts o;
	struct mitm *m;
	bool took = true;
	struct host h;
	json_t *rb;
	struct event *watch = NULL;
	char tmo[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
	FILE *f;
	size_t n;

	memset(r, 0, sizeof(*r));
	snprintf(r->logpath, sizeof(r->logpath), "%s/decisions-%d.jsonl", dir, rand());
	memset(&dc, 0, sizeof(dc));
	dc.path = r->logpath;
	dc.sync = revoke_in_flight ? DLOG_SYNC_ALWAYS : DLOG_SYNC_NONE;
	dl = dlog_open(base, &dc, err, sizeof(err));
	assert_non_null(dl);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, cs), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, os), 0);
	assert_int_equal(host_parse(origin_host, strlen(origin_host), 0, &h), HOST_OK);
	r->origin.fd = os[1];
	r->origin.ctx = mitm_ca_server_ctx(w->origin_ca, &h, err, sizeof(err));
	assert_non_null(r->origin.ctx);
	r->worker.fd = cs[1];
	{
		int fl = fcntl(cs[1], F_GETFL);
		fcntl(cs[1], F_SETFL, fl & ~O_NONBLOCK);
	}
	r->worker.ca_pem = worker_ca;
	r->worker.script = script;
	r->worker.nreq = nreq;
	r->done.base = base;

	memset(&o, 0, sizeof(o));
	assert_int_equal(host_parse("api.example.com", 15, 0, &o.host), HOST_OK);
	o.port = 443;
	o.base = base;
	o.dlog = dl;
	/* the hop's decision as session_record.c writes it (its order): each inner record
	 * keeps these members in place and sets its own */
	rb = json_loads("{\"conn\":\"c-1\",\"principal\":\"p\",\"hop\":\"c-1/1\","
	    "\"parent_hop\":null,\"hop_kind\":\"connect\",\"method\":\"CONNECT\","
	    "\"target\":\"api.example.com:443\",\"dest\":\"api.example.com:443\","
	    "\"verdict\":\"allow\",\"reason\":\"allowed\",\"resolved\":[\"203.0.113.5\"],"
	    "\"attested\":false}", 0, NULL);
	o.record_base = rb;
	o.hop = "c-1/1";
	o.conns = w->conns;
	o.conn = connections_find(w->conns, "m");
	o.server_ctx = mitm_ca_server_ctx(w->run_ca, &o.host, err, sizeof(err));
	o.client_ctx = mitm_client_ctx(w->origin_ca_file, err, sizeof(err));
	assert_non_null(o.server_ctx);
	assert_non_null(o.client_ctx);
	o.grant = w->grant;
	o.placeholder = placeholder;
	o.idle_ms = 5000;
	o.lifetime_ms = lifetime_ms;
	o.stats = &r->stats;
	o.done = on_done;
	o.arg = &r->done;
	m = mitm_start(cs[0], os[0], tmo, sizeof(tmo) - 1, &o, &took);
	assert_non_null(m);
	assert_false(took);
	r->m = m;
	if (revoke_in_flight) {
		struct timeval ms = { 0, 1000 };

		watch = event_new(base, -1, EV_PERSIST, on_watch, r);
		assert_non_null(watch);
		event_add(watch, &ms);
		sync_hold(true);
	}
	SSL_CTX_free(o.server_ctx);
	SSL_CTX_free(o.client_ctx);
	json_decref(rb);
	pthread_create(&to, NULL, origin_main, &r->origin);
	pthread_create(&tw, NULL, worker_main, &r->worker);
	{
		struct timeval limit = { 10, 0 };
		event_base_loopexit(base, &limit);
		event_base_dispatch(base);
	}
	if (watch != NULL)
		event_free(watch);
	sync_hold(false);
	if (r->done.calls == 0)
		mitm_free(m);
	/* bufferevents are finalized (sockets closed) by the loop: let it run once more */
	for (int i = 0; i < 5; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	/* revoke_in_flight: the allow that was on its way is counted once it is written (its
	 * sync was held until the revoke): the loop takes that completion (at most 2 s) */
	for (int i = 0; revoke_in_flight && i < 2000 &&
	    r->stats.decisions[1][REASON_ALLOWED] == 0; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	pthread_join(tw, NULL);
	pthread_join(to, NULL);
	SSL_CTX_free(r->origin.ctx);
	dlog_close(dl);
	event_base_free(base);
	f = fopen(r->logpath, "r");
	assert_non_null(f);
	n = fread(r->log, 1, sizeof(r->log) - 1, f);
	r->log[n] = '\0';
	fclose(f);
}

#define REQ(m, p, extra) m " " p " HTTP/1.1\r\nHost: api.example.com\r\n" \
	"x-api-key: egress-placeholder-0123456789abcdef\r\n" extra "\r\n"

static void
test_sse_keepalive(void **state)
{
	struct world *w = *state;
	static struct run r;

	run(w, &r, REQ("GET", "/v1/stream?token=abc", "Cookie: a=b\r\nAuthorization: Bearer x\r\n")
	    REQ("GET", "/redirect-in", ""), 2, "api.example.com", w->run_cert);
	assert_true(r.worker.handshake_ok);
	assert_int_equal(r.worker.nresp, 2);
	/* the stream arrived whole; the origin saw the real key and never the placeholder */
	assert_non_null(strstr(r.worker.resp[0], "HTTP/1.1 200"));
	assert_non_null(strstr(r.worker.resp[0], "data: event 2"));
	assert_non_null(strstr(r.worker.resp[1], "HTTP/1.1 302"));
	assert_int_equal(r.origin.requests, 2);
	assert_true(r.origin.saw_real_key);
	assert_false(r.origin.saw_placeholder);
	assert_null(strcasestr(r.origin.last_head, "cookie:"));
	assert_null(strcasestr(r.origin.last_head, "authorization:"));
	/* the records: inner hops, the path without the query, never the secret */
	assert_non_null(strstr(r.log, "\"hop\":\"c-1/1.1\""));
	assert_non_null(strstr(r.log, "\"hop\":\"c-1/1.2\""));
	assert_non_null(strstr(r.log, "\"target\":\"/v1/stream\""));
	assert_null(strstr(r.log, "token=abc"));
	assert_non_null(strstr(r.log, "\"credential\":\"m\""));
	assert_non_null(strstr(r.log, "\"intercepted\":true"));
	assert_non_null(strstr(r.log, "\"status\":200"));
	assert_null(strstr(r.log, secret));
	/* whole records: the hop's members in their places, the inner request's set there or
	 * after them (what a copy of the hop's object with these members set dumps as) */
	assert_non_null(strstr(r.log, "\"event\":\"decision\",\"conn\":\"c-1\","
	    "\"principal\":\"p\",\"hop\":\"c-1/1.1\",\"parent_hop\":\"c-1/1\","
	    "\"hop_kind\":\"inner\",\"method\":\"GET\",\"target\":\"/v1/stream\","
	    "\"dest\":\"api.example.com:443\",\"verdict\":\"allow\",\"reason\":\"allowed\","
	    "\"resolved\":[\"203.0.113.5\"],\"attested\":false,\"intercepted\":true,"
	    "\"credential\":\"m\",\"prev\":"));
	assert_non_null(strstr(r.log, "\"event\":\"close\",\"conn\":\"c-1\","
	    "\"principal\":\"p\",\"hop\":\"c-1/1.1\",\"parent_hop\":\"c-1/1\","
	    "\"hop_kind\":\"inner\",\"method\":\"GET\",\"target\":\"/v1/stream\","
	    "\"dest\":\"api.example.com:443\",\"verdict\":\"allow\",\"reason\":\"allowed\","
	    "\"resolved\":[\"203.0.113.5\"],\"attested\":false,\"intercepted\":true,"
	    "\"credential\":\"m\",\"status\":200,\"bytes_up\":"));
	assert_int_equal(r.done.calls, 1);
	/* every inner request is a hop in the metrics too: two allowed, two closed */
	assert_int_equal(r.stats.decisions[1][REASON_ALLOWED], 2);
	assert_int_equal(r.stats.closes[REASON_ALLOWED], 2);
	for (int i = 0; i < REASON__COUNT; i++) {
		assert_int_equal(r.stats.decisions[0][i], 0);
		assert_int_equal(r.stats.failed[i], 0);
	}
}

static void
test_refusals(void **state)
{
	struct world *w = *state;
	static struct run r;

	/* inner Host != CONNECT host */
	run(w, &r, "GET /v1/x HTTP/1.1\r\nHost: other.example.com\r\n\r\n", 1,
	    "api.example.com", w->run_cert);
	assert_non_null(strstr(r.worker.resp[0], "403"));
	assert_non_null(strstr(r.worker.resp[0], "inner_host_mismatch"));
	assert_int_equal(r.origin.requests, 0);
	assert_int_equal(r.stats.decisions[0][REASON_INNER_HOST_MISMATCH], 1);
	assert_int_equal(r.stats.decisions[1][REASON_ALLOWED], 0);
	assert_int_equal(r.stats.failed[REASON_INNER_HOST_MISMATCH], 0);
	/* a path outside the rules, a method outside them */
	run(w, &r, REQ("GET", "/admin", ""), 1, "api.example.com", w->run_cert);
	assert_non_null(strstr(r.worker.resp[0], "connection_path_denied"));
	run(w, &r, REQ("DELETE", "/v1/x", ""), 1, "api.example.com", w->run_cert);
	assert_non_null(strstr(r.worker.resp[0], "connection_method_denied"));
	assert_int_equal(r.origin.requests, 0);
	/* the placeholder anywhere else in the head */
	run(w, &r, REQ("GET", "/v1/x", "X-Other: egress-placeholder-0123456789abcdef\r\n"), 1,
	    "api.example.com", w->run_cert);
	assert_non_null(strstr(r.worker.resp[0], "credential_misdirected"));
	assert_int_equal(r.origin.requests, 0);
	/* a redirect off the grant */
	run(w, &r, REQ("GET", "/redirect-out", ""), 1, "api.example.com", w->run_cert);
	assert_non_null(strstr(r.worker.resp[0], "redirect_denied"));
	assert_non_null(strstr(r.log, "redirect_denied"));
	/* allowed, then refused on the origin's answer: an allow, a deny, and a failed hop,
	 * as the two records say */
	assert_int_equal(r.stats.decisions[1][REASON_ALLOWED], 1);
	assert_int_equal(r.stats.decisions[0][REASON_REDIRECT_DENIED], 1);
	assert_int_equal(r.stats.failed[REASON_REDIRECT_DENIED], 1);
	/* the origin's certificate names another host: 502 origin_tls_failed, with why */
	run(w, &r, REQ("GET", "/v1/x", ""), 1, "wrong.example.com", w->run_cert);
	assert_non_null(strstr(r.worker.resp[0], "502"));
	assert_non_null(strstr(r.worker.resp[0], "origin_tls_failed"));
	assert_non_null(strstr(r.log, "\"tls_error\""));
	assert_non_null(strstr(r.log, "hostname mismatch"));
	assert_int_equal(r.stats.decisions[0][REASON_ORIGIN_TLS_FAILED], 1);
	assert_int_equal(r.stats.decisions[1][REASON_ALLOWED], 0);
	/* a worker that does not trust the run CA: client_tls_failed, nothing sent */
	run(w, &r, REQ("GET", "/v1/x", ""), 1, "api.example.com", w->origin_cert);
	assert_false(r.worker.handshake_ok);
	assert_int_equal(r.done.why, REASON_CLIENT_TLS_FAILED);
	assert_int_equal(r.origin.requests, 0);
}

/* The tunnel's maximum lifetime holds inside an interception too. */
static void
test_lifetime(void **state)
{
	struct world *w = *state;
	static struct run r;

	lifetime_ms = 30;       /* the stream takes ~60 ms */
	run(w, &r, REQ("GET", "/v1/stream", ""), 1, "api.example.com", w->run_cert);
	lifetime_ms = 0;
	assert_int_equal(r.done.calls, 1);
	assert_int_equal(r.done.why, REASON_CLOSE_LIFETIME);
	assert_null(strstr(r.worker.resp[0], "data: event 2"));
	/* a request cut short has its close record (under load the deadline may also come
	 * before the request does: then there is none to close) */
	if (strstr(r.worker.resp[0], "HTTP/1.1 200") != NULL)
		assert_non_null(strstr(r.log, "\"reason\":\"lifetime_exceeded\""));
}

/*
 * A tunnel revoked while its inner request's allow record is on its way (written, its
 * sync and callback still due): the hop still gets its close record, after the allow,
 * never an allow without one (as a session's hop: se_allow_open). Nothing reaches the
 * origin (the request goes upstream only once the record is on disk).
 */
static void
test_revoked_with_allow_in_flight(void **state)
{
	struct world *w = *state;
	static struct run r;
	const char *allow, *close;

	revoke_in_flight = true;
	run(w, &r, REQ("GET", "/v1/stream", ""), 1, "api.example.com", w->run_cert);
	revoke_in_flight = false;
	assert_true(r.revoked);
	assert_int_equal(r.done.calls, 1);
	assert_int_equal(r.done.why, REASON_CLOSE_REVOKED);
	assert_int_equal(r.origin.requests, 0);
	allow = strstr(r.log, "\"event\":\"decision\",\"conn\":\"c-1\",\"principal\":\"p\","
	    "\"hop\":\"c-1/1.1\"");
	close = strstr(r.log, "\"event\":\"close\",\"conn\":\"c-1\",\"principal\":\"p\","
	    "\"hop\":\"c-1/1.1\"");
	assert_non_null(allow);
	assert_non_null(close);
	assert_true(close > allow);
	assert_non_null(strstr(close, "\"reason\":\"revoked\""));
	assert_non_null(strstr(close, "\"status\":null"));
	assert_int_equal(r.stats.closes[REASON_CLOSE_REVOKED], 1);
	/* the allow on disk is counted (once written), though the tunnel's callback never ran */
	assert_int_equal(r.stats.decisions[1][REASON_ALLOWED], 1);
}

/*
 * A small request and its answer each cross in one TLS record: egressd writes the head it
 * builds and the body it moves from the other side as one (coalesce), where libevent
 * would write one record per piece. The bytes are the same; the peers are woken once.
 */
static void
test_one_record_each_way(void **state)
{
	struct world *w = *state;
	static struct run r;

	run(w, &r, REQ("POST", "/v1/messages", "Content-Type: application/json\r\n"
	    "Content-Length: 28\r\n") "{\"model\":\"m\",\"max_tokens\":1}", 1,
	    "api.example.com", w->run_cert);
	assert_true(r.worker.handshake_ok);
	assert_int_equal(r.origin.requests, 1);
	assert_true(r.origin.saw_real_key);
	assert_string_equal(r.origin.last_body, "{\"model\":\"m\",\"max_tokens\":1}");
	assert_int_equal(r.worker.nresp, 1);
	assert_non_null(strstr(r.worker.resp[0], "HTTP/1.1 200"));
	assert_non_null(strstr(r.worker.resp[0], "\r\n\r\n{\"id\":\"msg_01\"}"));
	assert_int_equal(r.origin.app_records, 1);
	assert_int_equal(r.worker.app_records, 1);
	assert_int_equal(r.stats.decisions[1][REASON_ALLOWED], 1);
	assert_int_equal(r.stats.closes[REASON_ALLOWED], 1);
}

/*
 * libevent's allocations (event_set_mem_functions): each block zeroed when handed out and
 * its size kept in front, so that at its free exactly what libevent wrote into it is
 * looked at. A block freed with the connection's real key in it is counted: the key must
 * only ever sit in egressd's own buffers, which are wiped (never in a libevent chain that
 * goes back to the heap as it is).
 */
static int ev_freed_with_key, ev_allocs;

static void *
ev_malloc(size_t n)
{
	char *raw = malloc(n + 16);

	__atomic_add_fetch(&ev_allocs, 1, __ATOMIC_RELAXED);
	if (raw == NULL)
		return NULL;
	memcpy(raw, &n, sizeof(n));
	memset(raw + 16, 0, n);
	return raw + 16;
}

static void
ev_free(void *p)
{
	size_t n;

	if (p == NULL)
		return;
	memcpy(&n, (char *)p - 16, sizeof(n));
	if (memmem(p, n, secret, sizeof(secret) - 1) != NULL)
		__atomic_add_fetch(&ev_freed_with_key, 1, __ATOMIC_RELAXED);
	free((char *)p - 16);
}

static void *
ev_realloc(void *p, size_t n)
{
	void *q = ev_malloc(n);
	size_t old;

	if (q == NULL || p == NULL)
		return q;
	memcpy(&old, (char *)p - 16, sizeof(old));
	memcpy(q, p, old < n ? old : n);
	ev_free(p);
	return q;
}

/* The request heads egressd writes upstream carry the real key; no libevent block that
 * held it went back to the heap unwiped (tests ran before this one: every exchange). */
static void
test_key_never_in_freed_chains(void **state)
{
	(void)state;
	assert_true(ev_allocs > 0);     /* libevent did allocate through these functions */
	assert_int_equal(ev_freed_with_key, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sse_keepalive),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_lifetime),
		cmocka_unit_test(test_revoked_with_allow_in_flight),
		cmocka_unit_test(test_one_record_each_way),
		cmocka_unit_test(test_key_never_in_freed_chains),
	};
	/* before any libevent allocation */
	event_set_mem_functions(ev_malloc, ev_realloc, ev_free);
	signal(SIGPIPE, SIG_IGN);
	if (getenv("MITM_DEBUG") != NULL)
		log_set_level(LOG_LEVEL_DEBUG);
	return cmocka_run_group_tests(tests, setup, teardown);
}
