/*
 * egload - the benchmark load generator (see docs/performance.md).
 *
 * One process, one libevent loop, non-blocking sockets driven by raw events (no
 * bufferevents: their per-read allocations would land in the figures we are measuring).
 * A transaction is: connect to the proxy (or the origin when no proxy is given), send
 * `CONNECT target`, read the 200, send a small GET through the tunnel, read the whole
 * response (Content-Length framed), close. The same code path runs direct and through
 * every proxy, so the ratio to direct compares like with like.
 *
 * Modes:
 *   latency  -n N transactions at concurrency -c (default 1); p50/p90/p99. With several
 *            proxies (--proxy A,B,...) the transactions go to them in turn, --block K
 *            each (default 1), and each proxy's figures are printed too (pI_p50_us,
 *            pI_errors, ...: I from 0 in the order given; with K > 1 the first of each
 *            block is a warm-up, counted in ok and pI_ok but not timed: pI_timed): interleaved,
 *            every proxy meets the same moments of a noisy host, which comparing runs
 *            one after the other does not give (bench/egressd_ab.sh, AB_LAT_MIX). If a
 *            warm-up fails, the block's next transaction is timed. An entry of the
 *            list is ADDR:PORT, ADDR:PORT@NAME (CONNECT NAME through that proxy, as
 *            --name does for all), or `direct` (no proxy: straight to the target)
 *   rate     -c C connections looping for -t seconds; transactions/s, errors, p99
 *   bulk     -c C tunnels each downloading --bytes from the origin's bulk source
 *   idle     -n N tunnels opened (at concurrency -c), each carrying one small exchange
 *            (origin path /hold keeps the connection), then held until SIGTERM or -t
 *            seconds; --ready FILE is written once every tunnel was tried (the script
 *            then reads the proxy's RSS from /proc); a failed tunnel is counted, not
 *            retried
 *
 * Output: one line of key=value pairs on stdout (the script parses it).
 * Every loop is bounded: by -n, by -t, and by a per-transaction deadline (--timeout).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/util.h"

#define PROXIES_MAX    16
#define HEAD_MAX       8192
#define SAMPLES_CAP    (4u * 1024u * 1024u)
#define SCRATCH_SIZE   (256u * 1024u)
#define NAME_MAX_LEN   256

enum mode { MODE_LATENCY, MODE_RATE, MODE_BULK, MODE_IDLE };

enum cstate {
	CS_FREE,
	CS_CONNECTING,
	CS_SEND_CONNECT,
	CS_READ_CONNECT,
	CS_SEND_REQ,
	CS_READ_HEAD,
	CS_READ_BODY,
	CS_HOLD,
};

struct conn {
	int fd;
	enum cstate st;
	struct event *ev;
	struct event *timer;
	uint64_t t_start;      /* ns, when connect() was called */
	uint64_t t_req;        /* ns, when the request went out (bulk throughput) */
	char out[HEAD_MAX];
	size_t outlen, outoff;
	char in[HEAD_MAX];
	size_t inlen;
	uint64_t body_left;
	uint64_t body_total;
	unsigned idx;
	unsigned pidx;         /* which proxy (o.proxy[pidx]) this transaction goes through */
	bool warmup;           /* the first of a block (--block K > 1): counted, not timed */
};

struct opts {
	enum mode mode;
	struct sockaddr_in target;
	char target_str[64];
	const char *connect_name;        /* CONNECT authority; may hold one %u */
	struct sockaddr_in proxy[PROXIES_MAX];
	bool proxy_direct[PROXIES_MAX];  /* entry `direct`: no proxy for its transactions */
	char *proxy_name[PROXIES_MAX];   /* entry ADDR@NAME: its CONNECT name (owned) */
	unsigned nproxy;
	unsigned block;                  /* consecutive transactions per proxy (>= 1) */
	unsigned long long n;
	unsigned conc;
	double seconds;
	unsigned long long bytes;
	double timeout_s;
	const char *path;
	const char *ready_file;
};

static struct opts o;
static struct event_base *base;
static struct conn *conns;
static uint32_t *samples;
static size_t nsamples;
static uint32_t *psamples[PROXIES_MAX];   /* latency mode, several proxies: each one's */
static size_t npsamples[PROXIES_MAX];
static unsigned long long pok[PROXIES_MAX], perrors[PROXIES_MAX];
static size_t pcap;
static unsigned long long started, ok, errors, name_counter;
static unsigned proxy_rr;
static unsigned long long bytes_total;
static uint64_t t_begin, t_end_deadline, t_last_done;
static bool stopping;
static unsigned holding, next_slot, idle_fail_run;
static char scratch[SCRATCH_SIZE];
static volatile sig_atomic_t got_term;

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: egload latency|rate|bulk|idle --target IP:PORT [--proxy P[,P...]]\n"
	    "              (P: IP:PORT, IP:PORT@NAME (its CONNECT name), or direct)\n"
	    "              [--name HOST:PORT (may hold %%u: a new name per transaction)]\n"
	    "              [--block K (latency, several proxies: K in a row each)]\n"
	    "              [-n COUNT] [-c CONCURRENCY] [-t SECONDS] [--bytes N]\n"
	    "              [--timeout SECONDS] [--path /] [--ready FILE]\n");
	exit(2);
}

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
	if (num_parse(colon + 1, 1, 65535, &port, &err) != 0)
		return -1;
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
		return -1;
	return 0;
}

static unsigned long long
parse_num(const char *s, long long min, long long max, const char *what)
{
	long long v;
	const char *err;

	if (num_parse(s, min, max, &v, &err) != 0) {
		fprintf(stderr, "egload: %s: %s\n", what, err);
		exit(2);
	}
	return (unsigned long long)v;
}

static void conn_start(struct conn *c);

static void
conn_reset(struct conn *c)
{
	if (c->ev != NULL) {
		event_free(c->ev);
		c->ev = NULL;
	}
	if (c->timer != NULL)
		evtimer_del(c->timer);
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	c->st = CS_FREE;
	c->inlen = 0;
	c->outlen = c->outoff = 0;
}

static bool
want_more(void)
{
	if (stopping)
		return false;
	switch (o.mode) {
	case MODE_RATE:
		return now_ns() < t_end_deadline;
	case MODE_LATENCY:
	case MODE_BULK:
	case MODE_IDLE:
		return started < o.n;
	}
	return false;
}

static void
check_finished(void)
{
	unsigned active = 0;

	for (unsigned i = 0; i < o.conc; i++)
		if (conns[i].st != CS_FREE && conns[i].st != CS_HOLD)
			active++;
	if (active > 0)
		return;
	if (o.mode == MODE_IDLE) {
		if (o.ready_file != NULL) {
			FILE *f = fopen(o.ready_file, "w");

			if (f != NULL) {
				fprintf(f, "open=%u errors=%llu\n", holding, errors);
				fclose(f);
			}
		}
		if (!stopping)
			return;    /* hold until SIGTERM or -t */
	}
	event_base_loopbreak(base);
}

static void
conn_done(struct conn *c, bool success)
{
	uint64_t t = now_ns();

	if (success && o.nproxy > 0)
		pok[c->pidx]++;
	if (success && c->warmup) {
		ok++;
		t_last_done = t;
	} else if (success) {
		ok++;
		if (nsamples < SAMPLES_CAP && samples != NULL) {
			uint64_t us = (t - c->t_start) / 1000u;

			samples[nsamples++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
		}
		if (psamples[c->pidx] != NULL && npsamples[c->pidx] < pcap) {
			uint64_t us = (t - c->t_start) / 1000u;

			psamples[c->pidx][npsamples[c->pidx]++] =
			    us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
		}
		t_last_done = t;
	} else {
		errors++;
		if (o.nproxy > 0)
			perrors[c->pidx]++;
	}
	if (success && o.mode == MODE_IDLE) {
		/* Keep the fd, drop the event: an idle tunnel costs the proxy, not us. */
		if (c->ev != NULL) {
			event_free(c->ev);
			c->ev = NULL;
		}
		evtimer_del(c->timer);
		c->st = CS_HOLD;
		holding++;
		idle_fail_run = 0;
		/* The held tunnel keeps its slot; the next tunnel takes the next one. */
		if (next_slot < o.conc && want_more())
			conn_start(&conns[next_slot++]);
		check_finished();
		return;
	}
	conn_reset(c);
	if (o.mode == MODE_IDLE) {
		/* A failed tunnel is counted, not retried: the figure is how many the proxy
		 * holds. The next tunnel takes the next slot. 32 failures in a row mean the
		 * proxy is saturated (fd limit): stop opening, report what is held. */
		if (++idle_fail_run >= 32 && o.n > started)
			o.n = started;
		if (next_slot < o.conc && want_more())
			conn_start(&conns[next_slot++]);
		check_finished();
	} else if (!want_more()) {
		check_finished();
	} else if (success) {
		conn_start(c);
	} else {
		/* Retry after 1 ms through the timer: never recurse, never spin on a dead peer. */
		struct timeval tv = { .tv_sec = 0, .tv_usec = 1000 };

		evtimer_add(c->timer, &tv);
	}
}

static void conn_cb(evutil_socket_t fd, short what, void *arg);

static void
conn_want(struct conn *c, short what)
{
	if (c->ev != NULL) {
		if (event_get_events(c->ev) == (what | EV_PERSIST))
			return;
		event_free(c->ev);
	}
	c->ev = event_new(base, c->fd, what | EV_PERSIST, conn_cb, c);
	if (c->ev == NULL || event_add(c->ev, NULL) != 0) {
		fprintf(stderr, "egload: event_add failed\n");
		exit(1);
	}
}

static void
build_request(struct conn *c)
{
	int n;

	if (o.mode == MODE_BULK)
		n = snprintf(c->out, sizeof(c->out),
		    "GET /bulk/%llu HTTP/1.1\r\nHost: bench\r\n\r\n", o.bytes);
	else if (o.mode == MODE_IDLE)
		n = snprintf(c->out, sizeof(c->out), "GET /hold HTTP/1.1\r\nHost: bench\r\n\r\n");
	else
		n = snprintf(c->out, sizeof(c->out), "GET %s HTTP/1.1\r\nHost: bench\r\n\r\n",
		    o.path);
	c->outlen = (size_t)n;
	c->outoff = 0;
	c->t_req = now_ns();
}

static void
build_connect(struct conn *c)
{
	char name[NAME_MAX_LEN];
	int n;

	if (o.proxy_name[c->pidx] != NULL) {
		snprintf(name, sizeof(name), "%s", o.proxy_name[c->pidx]);
	} else if (o.connect_name != NULL && strstr(o.connect_name, "%u") != NULL) {
		/* The only conversion in the pattern is checked above; a new name per hop. */
		const char *p = strstr(o.connect_name, "%u");

		n = snprintf(name, sizeof(name), "%.*s%llu%s", (int)(p - o.connect_name),
		    o.connect_name, name_counter++, p + 2);
		if (n < 0 || (size_t)n >= sizeof(name))
			name[0] = '\0';
	} else {
		snprintf(name, sizeof(name), "%s",
		    o.connect_name != NULL ? o.connect_name : o.target_str);
	}
	n = snprintf(c->out, sizeof(c->out), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", name,
	    name);
	c->outlen = (size_t)n;
	c->outoff = 0;
}

/* Find the end of a head in c->in; returns its length or 0. */
static size_t
head_end(const struct conn *c)
{
	for (size_t i = 3; i < c->inlen; i++)
		if (c->in[i] == '\n' && c->in[i - 1] == '\r' && c->in[i - 2] == '\n' &&
		    c->in[i - 3] == '\r')
			return i + 1;
	return 0;
}

static int
head_status(const struct conn *c)
{
	if (c->inlen < 12 || memcmp(c->in, "HTTP/1.", 7) != 0)
		return -1;
	if (c->in[9] < '1' || c->in[9] > '5')
		return -1;
	return (c->in[9] - '0') * 100 + (c->in[10] - '0') * 10 + (c->in[11] - '0');
}

static long long
head_content_length(const struct conn *c, size_t hlen)
{
	static const char key[] = "\ncontent-length:";
	size_t kl = sizeof(key) - 1;

	for (size_t i = 0; i + kl < hlen; i++) {
		if (strncasecmp(c->in + i, key, kl) == 0) {
			char num[24];
			size_t j = i + kl, k = 0;
			long long v;
			const char *err;

			while (j < hlen && c->in[j] == ' ')
				j++;
			while (j < hlen && k + 1 < sizeof(num) && c->in[j] >= '0' && c->in[j] <= '9')
				num[k++] = c->in[j++];
			num[k] = '\0';
			if (num_parse(num, 0, (long long)1 << 50, &v, &err) != 0)
				return -1;
			return v;
		}
	}
	return -1;
}

/* Consume a complete response head from c->in; returns false on a protocol error. */
static bool
take_response_head(struct conn *c, size_t hlen)
{
	long long cl = head_content_length(c, hlen);

	if (head_status(c) != 200 || cl < 0)
		return false;
	c->body_total = (uint64_t)cl;
	size_t extra = c->inlen - hlen;

	if (extra > c->body_total)
		return false;
	c->body_left = c->body_total - extra;
	bytes_total += extra;
	c->inlen = 0;
	c->st = CS_READ_BODY;
	return true;
}

static void
conn_fail(struct conn *c)
{
	conn_done(c, false);
}

static void
conn_send(struct conn *c, enum cstate next)
{
	while (c->outoff < c->outlen) {
		ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				conn_want(c, EV_WRITE);
				return;
			}
			conn_fail(c);
			return;
		}
		c->outoff += (size_t)w;
	}
	c->st = next;
	conn_want(c, EV_READ);
}

static void
conn_readable(struct conn *c)
{
	if (c->st == CS_READ_BODY) {
		/* Bounded: at most 64 reads per wake-up so one tunnel cannot starve others. */
		for (int i = 0; i < 64 && c->body_left > 0; i++) {
			size_t want = c->body_left < SCRATCH_SIZE ? (size_t)c->body_left : SCRATCH_SIZE;
			ssize_t r = recv(c->fd, scratch, want, 0);

			if (r < 0) {
				if (errno == EAGAIN || errno == EINTR)
					return;
				conn_fail(c);
				return;
			}
			if (r == 0) {
				conn_fail(c);
				return;
			}
			c->body_left -= (uint64_t)r;
			bytes_total += (uint64_t)r;
		}
		if (c->body_left == 0)
			conn_done(c, true);
		return;
	}
	if (c->inlen >= sizeof(c->in)) {
		conn_fail(c);
		return;
	}
	ssize_t r = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, 0);

	if (r < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		conn_fail(c);
		return;
	}
	if (r == 0) {
		conn_fail(c);
		return;
	}
	c->inlen += (size_t)r;
	size_t hlen = head_end(c);

	if (hlen == 0)
		return;
	if (c->st == CS_READ_CONNECT) {
		if (head_status(c) != 200 || c->inlen != hlen) {
			conn_fail(c);
			return;
		}
		c->inlen = 0;
		build_request(c);
		c->st = CS_SEND_REQ;
		conn_send(c, CS_READ_HEAD);
		return;
	}
	if (c->st == CS_READ_HEAD) {
		if (!take_response_head(c, hlen)) {
			conn_fail(c);
			return;
		}
		if (c->body_left == 0)
			conn_done(c, true);
	}
}

static void
conn_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	(void)fd;
	(void)what;

	switch (c->st) {
	case CS_CONNECTING: {
		int err = 0;
		socklen_t l = sizeof(err);

		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0 || err != 0) {
			conn_fail(c);
			return;
		}
		if (o.nproxy > 0 && !o.proxy_direct[c->pidx]) {
			build_connect(c);
			c->st = CS_SEND_CONNECT;
			conn_send(c, CS_READ_CONNECT);
		} else {
			build_request(c);
			c->st = CS_SEND_REQ;
			conn_send(c, CS_READ_HEAD);
		}
		return;
	}
	case CS_SEND_CONNECT:
		conn_send(c, CS_READ_CONNECT);
		return;
	case CS_SEND_REQ:
		conn_send(c, CS_READ_HEAD);
		return;
	case CS_READ_CONNECT:
	case CS_READ_HEAD:
	case CS_READ_BODY:
		conn_readable(c);
		return;
	case CS_FREE:
	case CS_HOLD:
		return;
	}
}

static void
conn_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	(void)fd;
	(void)what;

	if (c->st == CS_FREE) {
		if (want_more())
			conn_start(c);    /* the retry delay after an error */
		else
			check_finished();
		return;
	}
	conn_fail(c);
}

static void
conn_start(struct conn *c)
{
	const struct sockaddr_in *dst = &o.target;
	int one = 1;

	if (o.nproxy > 0) {
		/* the first of a block follows the other proxies' blocks (this one idle
		 * meanwhile): not timed, so that p99 stays the figure of back-to-back runs */
		c->warmup = o.mode == MODE_LATENCY && o.nproxy > 1 && o.block > 1 &&
		    proxy_rr % o.block == 0;
		c->pidx = proxy_rr++ / o.block % o.nproxy;
		if (!o.proxy_direct[c->pidx])
			dst = &o.proxy[c->pidx];
	}

	started++;
	c->t_start = now_ns();
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		fprintf(stderr, "egload: socket: %s\n", strerror(errno));
		c->st = CS_CONNECTING;
		conn_fail(c);
		return;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->st = CS_CONNECTING;
	if (connect(c->fd, (const struct sockaddr *)dst, sizeof(*dst)) != 0 &&
	    errno != EINPROGRESS) {
		conn_fail(c);
		return;
	}
	struct timeval tv = {
		.tv_sec = (time_t)o.timeout_s,
		.tv_usec = (suseconds_t)((o.timeout_s - (double)(time_t)o.timeout_s) * 1e6),
	};
	evtimer_add(c->timer, &tv);
	conn_want(c, EV_WRITE);
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	stopping = true;
	event_base_loopbreak(base);
}

static void
on_signal(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	got_term = 1;
	stopping = true;
	event_base_loopbreak(base);
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static uint32_t
pct_of(const uint32_t *v, size_t n, double p)
{
	if (n == 0)
		return 0;
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);

	return v[i < n ? i : n - 1];
}

static double
mean_of(const uint32_t *v, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m += v[i];
	return n > 0 ? m / (double)n : 0;
}

static uint32_t
pct(double p)
{
	return pct_of(samples, nsamples, p);
}

static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int
main(int argc, char **argv)
{
	const char *proxies = NULL, *target = NULL;

	if (argc < 2)
		usage();
	if (strcmp(argv[1], "latency") == 0)
		o.mode = MODE_LATENCY;
	else if (strcmp(argv[1], "rate") == 0)
		o.mode = MODE_RATE;
	else if (strcmp(argv[1], "bulk") == 0)
		o.mode = MODE_BULK;
	else if (strcmp(argv[1], "idle") == 0)
		o.mode = MODE_IDLE;
	else
		usage();
	o.n = 1000;
	o.conc = o.mode == MODE_RATE ? 64 : 1;
	o.seconds = o.mode == MODE_IDLE ? 120 : 10;
	o.bytes = 1ull << 30;
	o.timeout_s = 10;
	o.path = "/";
	o.block = 1;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];

		if (i + 1 >= argc)
			usage();
		const char *v = argv[++i];

		if (strcmp(a, "--target") == 0)
			target = v;
		else if (strcmp(a, "--proxy") == 0)
			proxies = v;
		else if (strcmp(a, "--name") == 0)
			o.connect_name = v;
		else if (strcmp(a, "-n") == 0)
			o.n = parse_num(v, 1, 10000000, "-n");
		else if (strcmp(a, "-c") == 0)
			o.conc = (unsigned)parse_num(v, 1, 20000, "-c");
		else if (strcmp(a, "-t") == 0)
			o.seconds = (double)parse_num(v, 1, 3600, "-t");
		else if (strcmp(a, "--bytes") == 0)
			o.bytes = parse_num(v, 1, 1ll << 40, "--bytes");
		else if (strcmp(a, "--timeout") == 0)
			o.timeout_s = (double)parse_num(v, 1, 600, "--timeout");
		else if (strcmp(a, "--path") == 0)
			o.path = v;
		else if (strcmp(a, "--ready") == 0)
			o.ready_file = v;
		else if (strcmp(a, "--block") == 0)
			o.block = (unsigned)parse_num(v, 1, 1000000, "--block");
		else
			usage();
	}
	if (target == NULL || parse_sin(target, &o.target) != 0)
		usage();
	snprintf(o.target_str, sizeof(o.target_str), "%s", target);
	if (o.connect_name != NULL && strchr(o.connect_name, '%') != NULL &&
	    (strstr(o.connect_name, "%u") == NULL ||
	     strchr(strstr(o.connect_name, "%u") + 1, '%') != NULL))
		usage();
	if (proxies != NULL) {
		const char *p = proxies;

		/* Split on commas by hand (STYLE: no strtok). */
		while (*p != '\0') {
			char one[64], *at;
			size_t l = strcspn(p, ",");

			if (l == 0 || l >= sizeof(one) || o.nproxy >= PROXIES_MAX)
				usage();
			memcpy(one, p, l);
			one[l] = '\0';
			if ((at = strchr(one, '@')) != NULL) {
				/* ADDR@NAME: the name lives in argv (p), not in one[] */
				*at = '\0';
				if (at[1] == '\0')
					usage();
				o.proxy_name[o.nproxy] = strndup(p + (at + 1 - one),
				    l - (size_t)(at + 1 - one));
				if (o.proxy_name[o.nproxy] == NULL)
					return 1;
			}
			if (strcmp(one, "direct") == 0 && o.proxy_name[o.nproxy] == NULL)
				o.proxy_direct[o.nproxy] = true;
			else if (parse_sin(one, &o.proxy[o.nproxy]) != 0)
				usage();
			o.nproxy++;
			p += l;
			if (*p == ',')
				p++;
		}
	}
	if (o.mode == MODE_BULK)
		o.n = o.conc;             /* one download per tunnel */
	if (o.mode == MODE_IDLE && o.conc > o.n)
		o.conc = (unsigned)o.n;
	if (o.mode == MODE_IDLE) {
		/* Held tunnels keep their slot; every tunnel needs one. */
		o.conc = (unsigned)o.n;
	}
	raise_nofile();
	signal(SIGPIPE, SIG_IGN);

	base = event_base_new();
	if (base == NULL)
		return 1;
	size_t cap = o.mode == MODE_RATE ? SAMPLES_CAP : (size_t)o.n;

	samples = calloc(cap, sizeof(*samples));
	conns = calloc(o.conc, sizeof(*conns));
	if (samples == NULL || conns == NULL)
		return 1;
	if (o.mode == MODE_LATENCY && o.nproxy > 1) {
		/* a proxy's share: whole blocks, plus at most one more (partial) block */
		pcap = (size_t)(o.n / o.nproxy + o.block);
		for (unsigned i = 0; i < o.nproxy; i++)
			if ((psamples[i] = calloc(pcap, sizeof(**psamples))) == NULL)
				return 1;
	}
	for (unsigned i = 0; i < o.conc; i++) {
		conns[i].fd = -1;
		conns[i].idx = i;
		conns[i].timer = evtimer_new(base, conn_timeout, &conns[i]);
		if (conns[i].timer == NULL)
			return 1;
	}
	struct event *sigev = evsignal_new(base, SIGTERM, on_signal, NULL);
	struct event *sigint = evsignal_new(base, SIGINT, on_signal, NULL);
	struct event *deadline = evtimer_new(base, on_deadline, NULL);

	if (sigev == NULL || sigint == NULL || deadline == NULL)
		return 1;
	evsignal_add(sigev, NULL);
	evsignal_add(sigint, NULL);
	/* Hard bound on the whole run: -t for rate and idle; generous for the others. */
	double bound = o.mode == MODE_RATE || o.mode == MODE_IDLE ? o.seconds : 600;
	struct timeval tv = { .tv_sec = (time_t)bound, .tv_usec = 0 };

	evtimer_add(deadline, &tv);

	t_begin = now_ns();
	t_end_deadline = t_begin + (uint64_t)(o.seconds * 1e9);
	/* Idle mode opens tunnels in waves of 64 so the proxy's accept queue is not flooded. */
	unsigned first = o.mode == MODE_IDLE ? (o.conc < 64 ? o.conc : 64) : o.conc;

	for (next_slot = 0; next_slot < first && want_more(); next_slot++)
		conn_start(&conns[next_slot]);
	event_base_dispatch(base);
	uint64_t t_stop = stopping && o.mode == MODE_RATE ? now_ns() :
	    (t_last_done > 0 ? t_last_done : now_ns());
	double elapsed = (double)(t_stop - t_begin) / 1e9;

	qsort(samples, nsamples, sizeof(*samples), cmp_u32);
	double mean = mean_of(samples, nsamples);
	switch (o.mode) {
	case MODE_LATENCY:
	case MODE_RATE:
		printf("mode=%s ok=%llu errors=%llu elapsed_s=%.3f tps=%.1f mean_us=%.0f "
		    "p50_us=%u p90_us=%u p99_us=%u max_us=%u",
		    argv[1], ok, errors, elapsed, elapsed > 0 ? (double)ok / elapsed : 0, mean,
		    pct(0.50), pct(0.90), pct(0.99), nsamples ? samples[nsamples - 1] : 0);
		for (unsigned i = 0; i < o.nproxy && psamples[i] != NULL; i++) {
			size_t n = npsamples[i];

			qsort(psamples[i], n, sizeof(*psamples[i]), cmp_u32);
			printf(" p%u_ok=%llu p%u_timed=%zu p%u_errors=%llu p%u_mean_us=%.0f "
			    "p%u_p50_us=%u p%u_p90_us=%u p%u_p99_us=%u", i, pok[i], i, n, i,
			    perrors[i], i,
			    mean_of(psamples[i], n), i, pct_of(psamples[i], n, 0.50), i,
			    pct_of(psamples[i], n, 0.90), i, pct_of(psamples[i], n, 0.99));
		}
		printf("\n");
		break;
	case MODE_BULK:
		printf("mode=bulk ok=%llu errors=%llu tunnels=%u bytes=%llu elapsed_s=%.3f "
		    "mib_s=%.1f\n", ok, errors, o.conc, bytes_total, elapsed,
		    elapsed > 0 ? (double)bytes_total / 1048576.0 / elapsed : 0);
		break;
	case MODE_IDLE:
		printf("mode=idle open=%u errors=%llu elapsed_s=%.3f\n", holding, errors, elapsed);
		break;
	}
	for (unsigned i = 0; i < o.conc; i++) {
		conn_reset(&conns[i]);
		event_free(conns[i].timer);
	}
	event_free(sigev);
	event_free(sigint);
	event_free(deadline);
	event_base_free(base);
	free(conns);
	free(samples);
	for (unsigned i = 0; i < PROXIES_MAX; i++)
		free(psamples[i]);
	for (unsigned i = 0; i < o.nproxy; i++)
		free(o.proxy_name[i]);
	return (ok > 0 && (o.mode != MODE_BULK || errors == 0)) ? 0 : 1;
}
