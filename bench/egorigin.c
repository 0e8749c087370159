/*
 * egorigin - the benchmark origin (see docs/performance.md): HTTP/1.1 on a loopback TCP
 * port, and optionally a tiny DNS responder on a loopback UDP port.
 *
 * HTTP paths (anything else is treated like "/"):
 *   /            small response (--small BYTES, default 64), Connection: close, then close
 *   /hold        small response, keep-alive: the connection stays open until the client
 *                closes it (idle tunnels)
 *   /bulk/N      N bytes of body from a static buffer (bulk source), then close
 *   PUT /sink    reads Content-Length bytes and answers 200 (bulk sink)
 * DNS (--dns IP:PORT): every A query is answered with --dns-answer (default 127.0.0.1,
 * TTL 300); every other query type gets NOERROR with no answer (so AAAA lookups end fast).
 * The responder counts queries; SIGTERM prints `dns_queries=N` on stderr.
 *
 * One libevent loop, raw events, non-blocking sockets. Every read is bounded (8 KiB head),
 * every connection closes on a malformed head. The origin runs only on loopback.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/util.h"

#define HEAD_MAX     8192
#define BULK_CHUNK   (256u * 1024u)

struct oconn {
	int fd;
	struct event *ev;
	char in[HEAD_MAX];
	size_t inlen;
	char out[512];
	size_t outlen, outoff;
	uint64_t bulk_left;      /* body bytes still to send */
	uint64_t sink_left;      /* body bytes still to read */
	bool keep;               /* keep-alive after the response */
	bool writing;
};

static struct event_base *base;
static unsigned small_bytes = 64;
static char bulkbuf[BULK_CHUNK];
static char smallbody[4096];
static unsigned long long dns_queries, http_requests;
static struct in_addr dns_answer;

static void oconn_cb(evutil_socket_t fd, short what, void *arg);

static int
parse_sin(const char *s, struct sockaddr_in *sin)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	long long port;
	const char *err;

	if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	if (num_parse(colon + 1, 0, 65535, &port, &err) != 0)
		return -1;
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
		return -1;
	/* Loopback only: this is a benchmark peer, never a service. */
	if ((ntohl(sin->sin_addr.s_addr) >> 24) != 127)
		return -1;
	return 0;
}

static void
oconn_free(struct oconn *c)
{
	if (c->ev != NULL)
		event_free(c->ev);
	close(c->fd);
	free(c);
}

static void
oconn_want(struct oconn *c, short what)
{
	event_del(c->ev);
	event_assign(c->ev, base, c->fd, what | EV_PERSIST, oconn_cb, c);
	event_add(c->ev, NULL);
}

static size_t
head_end(const struct oconn *c)
{
	for (size_t i = 3; i < c->inlen; i++)
		if (c->in[i] == '\n' && c->in[i - 1] == '\r' && c->in[i - 2] == '\n' &&
		    c->in[i - 3] == '\r')
			return i + 1;
	return 0;
}

static long long
content_length(const char *h, size_t hlen)
{
	static const char key[] = "\ncontent-length:";
	size_t kl = sizeof(key) - 1;

	for (size_t i = 0; i + kl < hlen; i++) {
		if (strncasecmp(h + i, key, kl) == 0) {
			char num[24];
			size_t j = i + kl, k = 0;
			long long v;
			const char *err;

			while (j < hlen && h[j] == ' ')
				j++;
			while (j < hlen && k + 1 < sizeof(num) && h[j] >= '0' && h[j] <= '9')
				num[k++] = h[j++];
			num[k] = '\0';
			if (num_parse(num, 0, (long long)1 << 50, &v, &err) != 0)
				return -1;
			return v;
		}
	}
	return 0;
}

/* Send what is queued: the head in c->out, then small or bulk body. Returns -1 when the
 * connection was freed, 0 when more remains (EV_WRITE armed), 1 when all is sent. */
static int
oconn_flush(struct oconn *c)
{
	while (c->outoff < c->outlen) {
		ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				goto again;
			oconn_free(c);
			return -1;
		}
		c->outoff += (size_t)w;
	}
	/* Bounded per wake-up: 64 chunks (16 MiB) then yield to the loop. */
	for (int i = 0; i < 64 && c->bulk_left > 0; i++) {
		size_t n = c->bulk_left < BULK_CHUNK ? (size_t)c->bulk_left : BULK_CHUNK;
		ssize_t w = send(c->fd, bulkbuf, n, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				goto again;
			oconn_free(c);
			return -1;
		}
		c->bulk_left -= (uint64_t)w;
	}
	if (c->bulk_left > 0)
		goto again;
	c->writing = false;
	c->outlen = c->outoff = 0;
	if (!c->keep) {
		oconn_free(c);
		return -1;
	}
	oconn_want(c, EV_READ);
	return 1;
again:
	if (!c->writing) {
		c->writing = true;
		oconn_want(c, EV_WRITE);
	}
	return 0;
}

static void
oconn_respond(struct oconn *c, uint64_t len, bool bulk, bool keep)
{
	int n = snprintf(c->out, sizeof(c->out),
	    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
	    "Content-Length: %" PRIu64 "\r\nConnection: %s\r\n\r\n",
	    len, keep ? "keep-alive" : "close");

	c->outlen = (size_t)n;
	c->outoff = 0;
	if (!bulk && len > 0 && c->outlen + len <= sizeof(c->out)) {
		memcpy(c->out + c->outlen, smallbody, (size_t)len);
		c->outlen += (size_t)len;
	} else if (bulk) {
		c->bulk_left = len;
	}
	c->keep = keep;
	http_requests++;
	oconn_flush(c);
}

/* A complete head is in c->in[0..hlen). Returns -1 when c was freed. */
static int
oconn_request(struct oconn *c, size_t hlen)
{
	const char *sp = memchr(c->in, ' ', hlen);

	if (sp == NULL) {
		oconn_free(c);
		return -1;
	}
	const char *path = sp + 1;
	size_t rest = hlen - (size_t)(path - c->in);

	if (strncmp(c->in, "PUT ", 4) == 0 && rest > 5 && memcmp(path, "/sink", 5) == 0) {
		long long cl = content_length(c->in, hlen);

		if (cl < 0) {
			oconn_free(c);
			return -1;
		}
		size_t extra = c->inlen - hlen;

		c->sink_left = (uint64_t)cl > extra ? (uint64_t)cl - extra : 0;
		c->inlen = 0;
		if (c->sink_left == 0)
			oconn_respond(c, 0, false, false);
		return 0;
	}
	if (rest > 6 && memcmp(path, "/bulk/", 6) == 0) {
		char num[24];
		size_t k = 0;
		long long v;
		const char *err;

		for (const char *p = path + 6; k + 1 < sizeof(num) && *p >= '0' && *p <= '9'; p++)
			num[k++] = *p;
		num[k] = '\0';
		if (num_parse(num, 0, 1ll << 40, &v, &err) != 0) {
			oconn_free(c);
			return -1;
		}
		c->inlen = 0;
		oconn_respond(c, (uint64_t)v, true, false);
		return 0;
	}
	bool hold = rest > 5 && memcmp(path, "/hold", 5) == 0;

	/* Pipelined bytes after the head are not expected; drop them. */
	c->inlen = 0;
	oconn_respond(c, small_bytes, false, hold);
	return 0;
}

static void
oconn_readable(struct oconn *c)
{
	if (c->sink_left > 0) {
		for (int i = 0; i < 64 && c->sink_left > 0; i++) {
			size_t want = c->sink_left < BULK_CHUNK ? (size_t)c->sink_left : BULK_CHUNK;
			ssize_t r = recv(c->fd, bulkbuf, want, 0);

			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			if (r <= 0) {
				oconn_free(c);
				return;
			}
			c->sink_left -= (uint64_t)r;
		}
		if (c->sink_left == 0)
			oconn_respond(c, 0, false, false);
		return;
	}
	if (c->inlen >= sizeof(c->in)) {
		oconn_free(c);
		return;
	}
	ssize_t r = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, 0);

	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		oconn_free(c);
		return;
	}
	c->inlen += (size_t)r;
	size_t hlen = head_end(c);

	if (hlen > 0)
		oconn_request(c, hlen);
}

static void
oconn_cb(evutil_socket_t fd, short what, void *arg)
{
	struct oconn *c = arg;
	(void)fd;

	if (c->writing) {
		if (what & EV_WRITE)
			oconn_flush(c);
		return;
	}
	if (what & EV_READ)
		oconn_readable(c);
}

static void
on_accept(evutil_socket_t lfd, short what, void *arg)
{
	(void)what;
	(void)arg;
	/* Bounded: at most 64 accepts per wake-up. */
	for (int i = 0; i < 64; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int one = 1;

		if (fd < 0)
			return;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct oconn *c = calloc(1, sizeof(*c));

		if (c == NULL) {
			close(fd);
			return;
		}
		c->fd = fd;
		c->ev = event_new(base, fd, EV_READ | EV_PERSIST, oconn_cb, c);
		if (c->ev == NULL || event_add(c->ev, NULL) != 0) {
			oconn_free(c);
			return;
		}
	}
}

/* DNS: answer A queries with dns_answer (TTL 300), anything else NOERROR/NODATA. */
static void
on_dns(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	(void)arg;
	for (int i = 0; i < 64; i++) {
		unsigned char q[512], a[600];
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);

		if (n < 0)
			return;
		if (n < 12 || (q[2] & 0x80) != 0 || q[4] != 0 || q[5] != 1)
			continue;
		/* Walk the one question name, bounded by the packet. */
		size_t p = 12;

		while (p < (size_t)n && q[p] != 0) {
			if ((q[p] & 0xc0) != 0)
				break;
			p += (size_t)q[p] + 1;
		}
		if (p >= (size_t)n || q[p] != 0 || p + 5 > (size_t)n)
			continue;
		size_t qend = p + 5;                 /* zero label, qtype, qclass */
		unsigned qtype = ((unsigned)q[p + 1] << 8) | q[p + 2];

		dns_queries++;
		memcpy(a, q, qend);
		a[2] = 0x84 | (q[2] & 0x01);         /* QR, AA, keep RD */
		a[3] = 0x80;                         /* RA, NOERROR */
		a[6] = 0;
		a[7] = qtype == 1 ? 1 : 0;           /* ANCOUNT */
		a[8] = a[9] = a[10] = a[11] = 0;     /* no authority, no additional */
		size_t len = qend;

		if (qtype == 1) {
			static const unsigned char rr[] = {
				0xc0, 0x0c, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x01, 0x2c, 0x00, 0x04,
			};

			memcpy(a + len, rr, sizeof(rr));
			len += sizeof(rr);
			memcpy(a + len, &dns_answer, 4);
			len += 4;
		}
		sendto(fd, a, len, 0, (struct sockaddr *)&from, fl);
	}
}

static void
on_term(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	event_base_loopbreak(base);
}

int
main(int argc, char **argv)
{
	const char *listen_s = "127.0.0.1:0", *dns_s = NULL, *port_file = NULL;
	struct sockaddr_in lsin, dsin;
	struct rlimit rl;

	inet_pton(AF_INET, "127.0.0.1", &dns_answer);
	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			goto usage;
		const char *a = argv[i], *v = argv[++i];

		if (strcmp(a, "--listen") == 0) {
			listen_s = v;
		} else if (strcmp(a, "--dns") == 0) {
			dns_s = v;
		} else if (strcmp(a, "--dns-answer") == 0) {
			if (inet_pton(AF_INET, v, &dns_answer) != 1)
				goto usage;
		} else if (strcmp(a, "--port-file") == 0) {
			port_file = v;
		} else if (strcmp(a, "--small") == 0) {
			long long s;
			const char *err;

			if (num_parse(v, 0, sizeof(smallbody), &s, &err) != 0)
				goto usage;
			small_bytes = (unsigned)s;
		} else {
			goto usage;
		}
	}
	if (parse_sin(listen_s, &lsin) != 0 || (dns_s != NULL && parse_sin(dns_s, &dsin) != 0))
		goto usage;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	memset(bulkbuf, 'x', sizeof(bulkbuf));
	memset(smallbody, 'o', sizeof(smallbody));
	base = event_base_new();
	if (base == NULL)
		return 1;

	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;

	if (lfd < 0)
		return 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&lsin, sizeof(lsin)) != 0 || listen(lfd, 4096) != 0) {
		fprintf(stderr, "egorigin: bind %s: %s\n", listen_s, strerror(errno));
		return 1;
	}
	socklen_t sl = sizeof(lsin);

	getsockname(lfd, (struct sockaddr *)&lsin, &sl);
	struct event *lev = event_new(base, lfd, EV_READ | EV_PERSIST, on_accept, NULL);
	struct event *dev = NULL;

	if (lev == NULL || event_add(lev, NULL) != 0)
		return 1;
	if (dns_s != NULL) {
		int dfd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

		if (dfd < 0 || bind(dfd, (struct sockaddr *)&dsin, sizeof(dsin)) != 0) {
			fprintf(stderr, "egorigin: bind dns %s: %s\n", dns_s, strerror(errno));
			return 1;
		}
		dev = event_new(base, dfd, EV_READ | EV_PERSIST, on_dns, NULL);
		if (dev == NULL || event_add(dev, NULL) != 0)
			return 1;
	}
	struct event *t1 = evsignal_new(base, SIGTERM, on_term, NULL);
	struct event *t2 = evsignal_new(base, SIGINT, on_term, NULL);

	if (t1 == NULL || t2 == NULL)
		return 1;
	evsignal_add(t1, NULL);
	evsignal_add(t2, NULL);
	if (port_file != NULL) {
		/* Written last, so a reader that sees the file can connect at once. */
		char tmp[4096];
		int n = snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
		FILE *f;

		if (n < 0 || (size_t)n >= sizeof(tmp) || (f = fopen(tmp, "w")) == NULL)
			return 1;
		fprintf(f, "%u\n", ntohs(lsin.sin_port));
		fclose(f);
		if (rename(tmp, port_file) != 0)
			return 1;
	}
	event_base_dispatch(base);
	fprintf(stderr, "egorigin: http_requests=%llu dns_queries=%llu\n", http_requests,
	    dns_queries);
	return 0;
usage:
	fprintf(stderr, "usage: egorigin [--listen 127.0.0.1:PORT] [--port-file F] "
	    "[--small BYTES] [--dns 127.0.0.x:PORT] [--dns-answer IPV4]\n");
	return 2;
}
