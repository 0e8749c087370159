/*
 * egmodel - the model-connection benchmark's peers (bench/model.sh, docs/performance.md).
 *
 *   egmodel ca DIR                       a CA (DIR/ca.pem, DIR/ca.key 0600) via common/runca
 *   egmodel origin ADDR PORT CADIR       a TLS origin with a leaf for ADDR from CADIR's CA:
 *                                        every request gets 200 and a 64-byte body,
 *                                        keep-alive; one thread per connection
 *   egmodel client MODE PROXY TARGET CAFILE N CONC
 *                                        MODE keepalive: per thread one CONNECT + TLS, then
 *                                          N requests on it; prints per-request latency
 *                                          percentiles and the rate over all threads
 *                                        MODE fresh: per request a new CONNECT + TLS
 *                                          handshake + one request (what a new tunnel costs)
 *                                        PROXY "direct" connects to TARGET itself
 *
 * Everything is blocking and bounded (5 s socket timeouts); loopback only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/host.h"
#include "common/runca.h"
#include "egressd/mitmca.h"

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
tcp_connect(const char *addr, int port)
{
	struct sockaddr_in sa;
	struct timeval tv = { 5, 0 };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (fd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- ca ---- */

static int
cmd_ca(const char *dir)
{
	char *cert, *key, err[256], p[512];
	FILE *f;

	if (runca_make("egmodel bench CA", NULL, 86400, &cert, &key, err, sizeof(err)) != 0) {
		fprintf(stderr, "egmodel: %s\n", err);
		return 1;
	}
	snprintf(p, sizeof(p), "%s/ca.pem", dir);
	if ((f = fopen(p, "w")) != NULL) {
		fputs(cert, f);
		fclose(f);
	}
	free(cert);
	snprintf(p, sizeof(p), "%s/ca.key", dir);
	if (f != NULL && (f = fopen(p, "w")) != NULL) {
		fchmod(fileno(f), 0600);
		fputs(key, f);
		fclose(f);
	}
	free(key);
	return f == NULL;
}

/* ---- origin ---- */

static SSL_CTX *origin_ctx;

static void *
origin_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	SSL *ssl = SSL_new(origin_ctx);
	char buf[16384];
	size_t have = 0;
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	    "Content-Length: 64\r\n\r\n"
	    "{\"id\":\"bench\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"}],\"x\":1234}\n";

	SSL_set_fd(ssl, fd);
	if (SSL_accept(ssl) != 1)
		goto out;
	for (;;) {
		char *e;
		int k = SSL_read(ssl, buf + have, (int)(sizeof(buf) - 1 - have));
		if (k <= 0)
			break;
		have += (size_t)k;
		buf[have] = '\0';
		while ((e = strstr(buf, "\r\n\r\n")) != NULL) {
			size_t used = (size_t)(e + 4 - buf);
			if (SSL_write(ssl, resp, sizeof(resp) - 1) <= 0)
				goto out;
			memmove(buf, buf + used, have - used);
			have -= used;
			buf[have] = '\0';
		}
		if (have >= sizeof(buf) - 1)
			break;
	}
out:
	SSL_free(ssl);
	close(fd);
	return NULL;
}

static int
cmd_origin(const char *addr, int port, const char *cadir)
{
	char c[512], k[512], err[256];
	struct mitm_ca *ca;
	struct host h;
	struct sockaddr_in sa;
	int one = 1, lfd;

	snprintf(c, sizeof(c), "%s/ca.pem", cadir);
	snprintf(k, sizeof(k), "%s/ca.key", cadir);
	ca = mitm_ca_load(c, k, 0, err, sizeof(err));
	if (ca == NULL || host_parse(addr, strlen(addr), 0, &h) != HOST_OK ||
	    (origin_ctx = mitm_ca_server_ctx(ca, &h, err, sizeof(err))) == NULL) {
		fprintf(stderr, "egmodel origin: %s\n", err);
		return 1;
	}
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, addr, &sa.sin_addr);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 1024) != 0) {
		perror("egmodel origin: bind");
		return 1;
	}
	for (;;) {
		pthread_t t;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (pthread_create(&t, NULL, origin_conn, (void *)(intptr_t)fd) != 0)
			close(fd);
		else
			pthread_detach(t);
	}
}

/* ---- client ---- */

struct cl {
	const char *mode, *proxy, *target;
	SSL_CTX *ctx;
	int n;
	double *lat;            /* per request, microseconds */
	int done, failed;
};

/* A TLS session to target, through proxy's CONNECT (or direct). NULL on failure. */
static SSL *
open_tls(struct cl *c, int *fdp)
{
	char host[64], req[256], resp[512];
	int port, fd, k, n = 0;
	const char *colon = strrchr(c->target, ':');
	SSL *ssl;

	snprintf(host, sizeof(host), "%.*s", (int)(colon - c->target), c->target);
	port = atoi(colon + 1);
	if (strcmp(c->proxy, "direct") == 0) {
		fd = tcp_connect(host, port);
	} else {
		char ph[64];
		const char *pc = strrchr(c->proxy, ':');
		snprintf(ph, sizeof(ph), "%.*s", (int)(pc - c->proxy), c->proxy);
		fd = tcp_connect(ph, atoi(pc + 1));
		if (fd < 0)
			return NULL;
		k = snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
		    c->target, c->target);
		if (write(fd, req, (size_t)k) != k)
			goto fail;
		while (n < (int)sizeof(resp) - 1) {
			k = (int)read(fd, resp + n, 1);
			if (k <= 0)
				goto fail;
			n += k;
			resp[n] = '\0';
			if (n >= 4 && strcmp(resp + n - 4, "\r\n\r\n") == 0)
				break;
		}
		if (strncmp(resp, "HTTP/1.1 200", 12) != 0)
			goto fail;
	}
	if (fd < 0)
		return NULL;
	ssl = SSL_new(c->ctx);
	SSL_set_fd(ssl, fd);
	X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
	if (SSL_connect(ssl) != 1) {
		SSL_free(ssl);
		goto fail;
	}
	*fdp = fd;
	return ssl;
fail:
	close(fd);
	return NULL;
}

static int
one_request(SSL *ssl, const char *target)
{
	char req[256], buf[4096];
	/* Host names the port: the origin is not on 443 (egressd compares host and port) */
	int k = snprintf(req, sizeof(req), "POST /v1/messages HTTP/1.1\r\nHost: %s\r\n"
	    "x-api-key: egress-placeholder-bench\r\nContent-Type: application/json\r\n"
	    "Content-Length: 2\r\n\r\n{}", target);
	size_t have = 0;

	if (SSL_write(ssl, req, k) != k)
		return -1;
	/* the origin's answer: head + 64-byte body */
	for (;;) {
		char *e;
		int r = SSL_read(ssl, buf + have, (int)(sizeof(buf) - 1 - have));
		if (r <= 0)
			return -1;
		have += (size_t)r;
		buf[have] = '\0';
		if ((e = strstr(buf, "\r\n\r\n")) != NULL && have >= (size_t)(e + 4 - buf) + 64)
			return strncmp(buf, "HTTP/1.1 200", 12) == 0 ? 0 : -1;
	}
}

static void *
client_main(void *arg)
{
	struct cl *c = arg;
	int fd = -1;
	SSL *ssl = NULL;

	for (int i = 0; i < c->n; i++) {
		double t0 = now_us();
		if (ssl == NULL || strcmp(c->mode, "fresh") == 0) {
			if (ssl != NULL) {
				SSL_free(ssl);
				close(fd);
			}
			ssl = open_tls(c, &fd);
			if (ssl == NULL) {
				c->failed++;
				continue;
			}
		}
		if (one_request(ssl, c->target) != 0) {
			c->failed++;
			SSL_free(ssl);
			close(fd);
			ssl = NULL;
			continue;
		}
		c->lat[c->done++] = now_us() - t0;
	}
	if (ssl != NULL) {
		SSL_free(ssl);
		close(fd);
	}
	return NULL;
}

static int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int
cmd_client(const char *mode, const char *proxy, const char *target, const char *cafile,
    int n, int conc)
{
	struct cl *cs = calloc((size_t)conc, sizeof(*cs));
	pthread_t *ts = calloc((size_t)conc, sizeof(*ts));
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	double *all, t0, t1;
	size_t total = 0;
	int failed = 0;

	SSL_CTX_load_verify_locations(ctx, cafile, NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x08http/1.1", 9);
	all = calloc((size_t)n * (size_t)conc, sizeof(double));
	t0 = now_us();
	for (int i = 0; i < conc; i++) {
		cs[i] = (struct cl){ mode, proxy, target, ctx, n, all + (size_t)i * (size_t)n, 0, 0 };
		pthread_create(&ts[i], NULL, client_main, &cs[i]);
	}
	for (int i = 0; i < conc; i++) {
		pthread_join(ts[i], NULL);
		failed += cs[i].failed;
	}
	t1 = now_us();
	for (int i = 0; i < conc; i++) {
		memmove(all + total, cs[i].lat, (size_t)cs[i].done * sizeof(double));
		total += (size_t)cs[i].done;
	}
	qsort(all, total, sizeof(double), cmp_d);
	if (total == 0)
		printf("mode=%s proxy=%s ok=0 failed=%d\n", mode, proxy, failed);
	else
		printf("mode=%s proxy=%s ok=%zu failed=%d rate=%.0f p50_us=%.0f p90_us=%.0f "
		    "p99_us=%.0f\n", mode, proxy, total, failed, (double)total / ((t1 - t0) / 1e6),
		    all[total / 2], all[total * 9 / 10], all[total * 99 / 100]);
	free(all);
	free(cs);
	free(ts);
	SSL_CTX_free(ctx);
	return total == 0 || failed > 0;
}

int
main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc == 3 && strcmp(argv[1], "ca") == 0)
		return cmd_ca(argv[2]);
	if (argc == 5 && strcmp(argv[1], "origin") == 0)
		return cmd_origin(argv[2], atoi(argv[3]), argv[4]);
	if (argc == 8 && strcmp(argv[1], "client") == 0)
		return cmd_client(argv[2], argv[3], argv[4], argv[5], atoi(argv[6]),
		    atoi(argv[7]));
	fprintf(stderr, "usage: egmodel ca DIR | origin ADDR PORT CADIR | "
	    "client keepalive|fresh PROXY|direct ADDR:PORT CAFILE N CONC\n");
	return 2;
}
