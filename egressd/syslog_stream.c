/* syslog_stream.c - the syslog mirror's TCP/TLS transport and its thread.
 * Contract: syslog_stream.h. */
#include "egressd/syslog_stream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "egressd/dlog_syslog.h"
#include "egressd/syslog_spool.h"
#include "egressd/syslog_tls.h"

enum st_state {
	ST_DOWN = 0,        /* waiting for retry_at */
	ST_CONNECTING,
	ST_HANDSHAKE,
	ST_UP,
};

#define ST_WRITES_PER_WAKE 512   /* records written before the loop looks around again */
#define ST_ACK_POLL_MS     100   /* re-read the acknowledged count while records are out */

struct syslog_stream {
	pthread_t th;
	bool started;
	pthread_mutex_t mu;
	int wfd;                     /* eventfd: records arrived, or stop */

	/* under mu */
	bool stop;
	uint64_t stop_by_ms;
	struct syslog_spool sp;
	bool connected;
	uint64_t sent, resent, connects, failures;
	char error[256];

	/* the thread's own */
	struct sockaddr_storage sa;
	socklen_t salen;
	char url[160];
	char ip[INET6_ADDRSTRLEN];
	SSL_CTX *ctx;
	char *name;
	int fd;
	SSL *ssl;
	enum st_state state;
	short want;                  /* poll events the TLS layer or a blocked write waits for */
	uint64_t deadline, retry_at, backoff;
	uint64_t blocked_at;         /* a write waits for the collector since (0: none) */
	uint64_t wrote;              /* bytes written to this connection (TLS: ciphertext) */
	struct sspool_rec *cur;      /* the record whose frame is being written */
	char *msg, *frame;
	size_t flen, foff;
	bool warned;                 /* the outage has been reported */
	bool proven;                 /* this connection delivered a record (acknowledged):
	                                only then is the backoff reset and the recovery said
	                                (a collector that accepts and then refuses, e.g. a
	                                client certificate after a TLS 1.3 handshake, must not
	                                be reconnected to in a tight loop) */
	char host[256];
	long pid;
};

/* ---- the thread ---- */

/* Count the bytes the TLS layer writes to the socket: record offsets in the same units
 * as the kernel's acknowledged count. */
static long
bio_count_cb(BIO *b, int oper, const char *argp, size_t len, int argi, long argl, int ret,
    size_t *processed)
{
	(void)argp;
	(void)len;
	(void)argi;
	(void)argl;
	if (oper == (BIO_CB_WRITE | BIO_CB_RETURN) && ret > 0 && processed != NULL) {
		struct syslog_stream *st = (struct syslog_stream *)(void *)BIO_get_callback_arg(b);

		st->wrote += *processed;
	}
	return ret;
}

/* Free what the collector's TCP acknowledged (the SYN counts one byte). */
static void
st_ack(struct syslog_stream *st)
{
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);
	uint64_t acked;
	size_t freed, held;

	memset(&ti, 0, sizeof(ti));
	if (st->fd < 0 || getsockopt(st->fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0 ||
	    tl < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
		return;
	acked = ti.tcpi_bytes_acked > 0 ? ti.tcpi_bytes_acked - 1 : 0;
	if (acked > st->wrote)
		acked = st->wrote;
	pthread_mutex_lock(&st->mu);
	freed = sspool_acked(&st->sp, acked);
	held = st->sp.n;
	pthread_mutex_unlock(&st->mu);
	if (freed > 0 && !st->proven) {
		st->proven = true;
		st->backoff = EGRESS_SYSLOG_BACKOFF_MIN_MS;
		if (st->warned)
			log_info("syslog mirror %s: the collector takes records again (%zu still "
			    "held, sent in order)", st->url, held);
		st->warned = false;
	}
}

/* Close the connection. abort: reset it (SO_LINGER 0), so that what our kernel still
 * holds unacknowledged is discarded instead of being delivered late on the old
 * connection: those records are written again on the next one, and must not arrive
 * twice (a collector that stopped reading and then resumes). */
static void
st_close_conn(struct syslog_stream *st, bool abort)
{
	if (abort && st->fd >= 0) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		(void)setsockopt(st->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	if (st->ssl != NULL) {
		SSL_free(st->ssl);   /* also frees the BIO (BIO_NOCLOSE: not the fd) */
		st->ssl = NULL;
	}
	if (st->fd >= 0) {
		close(st->fd);
		st->fd = -1;
	}
	st->cur = NULL;
	st->flen = st->foff = 0;
	st->want = 0;
}

static void st_fail(struct syslog_stream *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The connection failed or is dropped: keep the unacknowledged records for the next one,
 * back off. */
static void
st_fail(struct syslog_stream *st, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	size_t again, held;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (st->state == ST_UP || st->state == ST_HANDSHAKE)
		st_ack(st);
	st_close_conn(st, true);
	pthread_mutex_lock(&st->mu);
	again = sspool_rewind(&st->sp);
	held = st->sp.n;
	st->resent += again;
	st->connected = false;
	st->failures++;
	snprintf(st->error, sizeof(st->error), "%s", why);
	pthread_mutex_unlock(&st->mu);
	if (!st->warned) {
		log_warnx("syslog mirror %s: %s; holding records (%zu now, spool up to %llu "
		    "bytes) and reconnecting with backoff up to %u ms", st->url, why, held,
		    (unsigned long long)st->sp.max, EGRESS_SYSLOG_BACKOFF_MAX_MS);
		st->warned = true;
	} else {
		log_debug("syslog mirror %s: %s; retrying in %llu ms", st->url, why,
		    (unsigned long long)st->backoff);
	}
	st->state = ST_DOWN;
	st->retry_at = mono_msec() + st->backoff;
	st->backoff = st->backoff * 2 > EGRESS_SYSLOG_BACKOFF_MAX_MS ?
	    EGRESS_SYSLOG_BACKOFF_MAX_MS : st->backoff * 2;
}

static void
st_up(struct syslog_stream *st)
{
	st->state = ST_UP;
	st->proven = false;
	st->blocked_at = 0;
	st->want = POLLOUT;
	pthread_mutex_lock(&st->mu);
	st->connected = true;
	st->connects++;
	st->error[0] = '\0';
	pthread_mutex_unlock(&st->mu);
	log_debug("syslog mirror %s: connected", st->url);
}

/* A handshake failed: say why and what to change. */
static void
st_tls_failed(struct syslog_stream *st, int sslerr)
{
	char why[384];

	syslog_tls_refusal(st->ssl, sslerr, why, sizeof(why));
	st_fail(st, "%s", why);
}

static void
st_handshake(struct syslog_stream *st)
{
	int r, e;

	ERR_clear_error();
	errno = 0;
	r = SSL_do_handshake(st->ssl);
	if (r == 1) {
		st_up(st);
		return;
	}
	e = SSL_get_error(st->ssl, r);
	if (e == SSL_ERROR_WANT_READ)
		st->want = POLLIN;
	else if (e == SSL_ERROR_WANT_WRITE)
		st->want = POLLOUT;
	else
		st_tls_failed(st, e);
}

/* TCP is up: TLS handshake, or ready. */
static void
st_established(struct syslog_stream *st)
{
	BIO *bio;

	st->wrote = 0;
	if (st->ctx == NULL) {
		st_up(st);
		return;
	}
	st->ssl = SSL_new(st->ctx);
	bio = BIO_new_socket(st->fd, BIO_NOCLOSE);
	if (st->ssl == NULL || bio == NULL) {
		BIO_free(bio);
		st_fail(st, "TLS: out of memory");
		return;
	}
	BIO_set_callback_ex(bio, bio_count_cb);
	BIO_set_callback_arg(bio, (char *)(void *)st);
	SSL_set_bio(st->ssl, bio, bio);
	if (st->name != NULL) {
		/* st->name is our own copy: the SNI macro casts away const */
		if (SSL_set1_host(st->ssl, st->name) != 1 ||
		    SSL_set_tlsext_host_name(st->ssl, st->name) != 1) {
			st_fail(st, "TLS: cannot set the name to verify");
			return;
		}
	} else if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(st->ssl), st->ip) != 1) {
		st_fail(st, "TLS: cannot set the address to verify");
		return;
	}
	SSL_set_connect_state(st->ssl);
	st->state = ST_HANDSHAKE;
	st->deadline = mono_msec() + EGRESS_SYSLOG_HANDSHAKE_MS;
	st_handshake(st);
}

static void
st_connect(struct syslog_stream *st)
{
	st->fd = socket(st->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (st->fd < 0) {
		st_fail(st, "socket: %s", strerror(errno));
		return;
	}
	if (connect(st->fd, (struct sockaddr *)&st->sa, st->salen) == 0) {
		st_established(st);
		return;
	}
	if (errno != EINPROGRESS) {
		st_fail(st, "connect: %s", strerror(errno));
		return;
	}
	st->state = ST_CONNECTING;
	st->deadline = mono_msec() + EGRESS_SYSLOG_CONNECT_MS;
}

/* Read and discard what the collector sends (nothing is expected), bounded. Returns -1
 * when the connection is gone (st_fail called). */
static int
st_drain(struct syslog_stream *st)
{
	char buf[4096], why[256];
	size_t got = 0;

	while (got < EGRESS_SYSLOG_DISCARD_MAX) {
		if (st->ssl != NULL) {
			int r, e;

			ERR_clear_error();
			r = SSL_read(st->ssl, buf, sizeof(buf));
			if (r > 0) {
				got += (size_t)r;
				continue;
			}
			e = SSL_get_error(st->ssl, r);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				return 0;
			if (e == SSL_ERROR_SSL)
				syslog_tls_errstr(why, sizeof(why));
			else
				snprintf(why, sizeof(why), "%s", e == SSL_ERROR_SYSCALL &&
				    errno != 0 ? strerror(errno) : "end of stream");
			if (!st->proven)
				/* TLS 1.3: the client's handshake ends before the server has judged
				 * the client certificate; its refusal arrives now */
				st_fail(st, "the collector closed the connection before taking a "
				    "record (%s): does it want a client certificate (log_syslog_cert, "
				    "log_syslog_key) or refuse the one given?", e ==
				    SSL_ERROR_ZERO_RETURN ? "close_notify" : why);
			else if (e == SSL_ERROR_ZERO_RETURN)
				st_fail(st, "the collector closed the connection");
			else
				st_fail(st, "the collector's connection broke (%s)", why);
			return -1;
		} else {
			ssize_t r = recv(st->fd, buf, sizeof(buf), MSG_DONTWAIT);

			if (r > 0) {
				got += (size_t)r;
				continue;
			}
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return 0;
			if (r == 0)
				st_fail(st, "the collector closed the connection");
			else
				st_fail(st, "the collector's connection broke (%s)", strerror(errno));
			return -1;
		}
	}
	return 0;   /* more waits: the next wake-up reads on */
}

/* Next record into the frame buffer; false when nothing is held. */
static bool
st_next_frame(struct syslog_stream *st)
{
	for (;;) {
		int n;

		pthread_mutex_lock(&st->mu);
		st->cur = sspool_next(&st->sp);
		pthread_mutex_unlock(&st->mu);
		if (st->cur == NULL)
			return false;
		n = dlog_syslog_format(st->cur->line, st->cur->len, st->host, st->pid, st->msg,
		    DLOG_SYSLOG_MSG_MAX);
		if (n > 0)
			n = dlog_syslog_frame(st->msg, (size_t)n, st->frame, DLOG_SYSLOG_FRAME_MAX);
		if (n > 0) {
			st->flen = (size_t)n;
			st->foff = 0;
			return true;
		}
		/* not a record (cannot happen for lines dlog wrote): counted as lost */
		log_warnx("syslog mirror %s: record seq %llu cannot be formatted; not sent",
		    st->url, (unsigned long long)st->cur->seq);
		pthread_mutex_lock(&st->mu);
		(void)syslog_loss_drop(&st->sp.loss, st->cur->seq);
		syslog_loss_ok(&st->sp.loss);
		sspool_sent(&st->sp, st->cur, st->wrote > 0 ? st->wrote : 1);
		pthread_mutex_unlock(&st->mu);
		st->cur = NULL;
	}
}

/* Write held records until the socket would block. -1: the connection is gone. */
static int
st_write(struct syslog_stream *st)
{
	for (int i = 0; i < ST_WRITES_PER_WAKE; i++) {
		if (st->cur == NULL && !st_next_frame(st)) {
			st->want = 0;
			return 0;
		}
		if (st->ssl != NULL) {
			int r, e;

			ERR_clear_error();
			errno = 0;
			r = SSL_write(st->ssl, st->frame, (int)st->flen);
			if (r <= 0) {
				e = SSL_get_error(st->ssl, r);
				if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
					st->want = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
					if (st->blocked_at == 0)
						st->blocked_at = mono_msec();
					return 0;
				}
				if (e == SSL_ERROR_SSL) {
					char why[256];

					syslog_tls_errstr(why, sizeof(why));
					st_fail(st, "TLS write failed (%s)%s", why, st->proven ? "" :
					    ": does the collector want a client certificate "
					    "(log_syslog_cert, log_syslog_key) or refuse the one given?");
				} else {
					st_fail(st, "TLS write failed (%s)", e == SSL_ERROR_SYSCALL &&
					    errno != 0 ? strerror(errno) :
					    "the collector closed the connection");
				}
				return -1;
			}
			st->foff = st->flen;   /* without partial-write mode: all or retry */
		} else {
			ssize_t w = send(st->fd, st->frame + st->foff, st->flen - st->foff,
			    MSG_NOSIGNAL | MSG_DONTWAIT);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				st->want = POLLOUT;
				if (st->blocked_at == 0)
					st->blocked_at = mono_msec();
				return 0;
			}
			if (w < 0) {
				st_fail(st, "send: %s", strerror(errno));
				return -1;
			}
			st->wrote += (uint64_t)w;
			st->foff += (size_t)w;
			st->blocked_at = 0;
			if (st->foff < st->flen)
				continue;       /* a partial write: the rest of this frame next */
		}
		st->blocked_at = 0;
		pthread_mutex_lock(&st->mu);
		sspool_sent(&st->sp, st->cur, st->wrote);
		st->sent++;
		pthread_mutex_unlock(&st->mu);
		st->cur = NULL;
	}
	st->want = POLLOUT;
	return 0;
}

static int
ms_until(uint64_t when, uint64_t now)
{
	if (when <= now)
		return 0;
	return when - now > 60000 ? 60000 : (int)(when - now);
}

static void *
st_main(void *arg)
{
	struct syslog_stream *st = arg;
	bool out_left;

	for (;;) {
		struct pollfd p[2] = { { .fd = st->wfd, .events = POLLIN }, { .fd = -1 } };
		uint64_t now = mono_msec(), stop_by;
		bool stop, have, out;
		int timeout = -1, np = 1;

		pthread_mutex_lock(&st->mu);
		stop = st->stop;
		stop_by = st->stop_by_ms;
		have = st->cur != NULL || sspool_next(&st->sp) != NULL;
		out = !TAILQ_EMPTY(&st->sp.q) && TAILQ_FIRST(&st->sp.q)->end != 0;
		pthread_mutex_unlock(&st->mu);
		if (stop && (st->state == ST_DOWN || (!have && !out) || now >= stop_by))
			break;
		switch (st->state) {
		case ST_DOWN:
			if (now >= st->retry_at) {
				st_connect(st);
				continue;
			}
			timeout = ms_until(st->retry_at, now);
			break;
		case ST_CONNECTING:
		case ST_HANDSHAKE:
			if (now >= st->deadline) {
				st_fail(st, st->state == ST_CONNECTING ? "connect timed out after %u ms" :
				    "TLS handshake timed out after %u ms (does the collector speak TLS "
				    "on this port?)", st->state == ST_CONNECTING ?
				    EGRESS_SYSLOG_CONNECT_MS : EGRESS_SYSLOG_HANDSHAKE_MS);
				continue;
			}
			p[1].fd = st->fd;
			p[1].events = st->state == ST_CONNECTING ? POLLOUT : st->want;
			np = 2;
			timeout = ms_until(st->deadline, now);
			break;
		case ST_UP:
			if (have && st->blocked_at != 0 &&
			    now - st->blocked_at >= EGRESS_SYSLOG_STALL_MS) {
				st_fail(st, "the collector took no data for %u ms (it stopped reading)",
				    EGRESS_SYSLOG_STALL_MS);
				continue;
			}
			p[1].fd = st->fd;
			p[1].events = POLLIN | (have ? (st->want != 0 ? st->want : POLLOUT) : 0);
			np = 2;
			if (have && st->blocked_at != 0)
				timeout = ms_until(st->blocked_at + EGRESS_SYSLOG_STALL_MS, now);
			if (out && (timeout < 0 || timeout > ST_ACK_POLL_MS))
				timeout = ST_ACK_POLL_MS;
			break;
		}
		if (stop) {
			int t = ms_until(stop_by, now);

			if (timeout < 0 || timeout > t)
				timeout = t;
		}
		if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR) {
			log_warn("syslog mirror %s: poll", st->url);
			usleep(100 * 1000);
		}
		if (p[0].revents & POLLIN) {
			uint64_t v;

			(void)!read(st->wfd, &v, sizeof(v));
		}
		switch (st->state) {
		case ST_DOWN:
			break;
		case ST_CONNECTING:
			if (p[1].revents != 0) {
				int soerr = 0;
				socklen_t sl = sizeof(soerr);

				if (getsockopt(st->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
					soerr = errno;
				if (soerr != 0)
					st_fail(st, "connect: %s", strerror(soerr));
				else
					st_established(st);
			}
			break;
		case ST_HANDSHAKE:
			if (p[1].revents != 0)
				st_handshake(st);
			break;
		case ST_UP:
			if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && st_drain(st) != 0)
				break;
			if (st_write(st) != 0)
				break;
			st_ack(st);
			break;
		}
	}
	if (st->ssl != NULL && st->state == ST_UP) {
		st_ack(st);
		(void)SSL_shutdown(st->ssl);   /* close_notify, once, never waited for */
	}
	/* stopping: what is still unacknowledged is counted as lost (syslog_stream_stop),
	 * so it must not arrive later either */
	pthread_mutex_lock(&st->mu);
	out_left = !TAILQ_EMPTY(&st->sp.q);
	pthread_mutex_unlock(&st->mu);
	st_close_conn(st, out_left);
	return NULL;
}

/* ---- the producer's side ---- */

struct syslog_stream *
syslog_stream_new(const struct syslog_stream_config *cfg, char *err, size_t errlen)
{
	struct syslog_stream *st = calloc(1, sizeof(*st));

	if (st == NULL || cfg->salen > sizeof(st->sa)) {
		free(st);
		SSL_CTX_free(cfg->ctx);
		errbuf_set(err, errlen, 0, "log_syslog: out of memory");
		return NULL;
	}
	st->ctx = cfg->ctx;
	st->fd = -1;
	st->wfd = -1;
	pthread_mutex_init(&st->mu, NULL);
	sspool_init(&st->sp, cfg->spool_max != 0 ? cfg->spool_max :
	    EGRESS_SYSLOG_SPOOL_DEFAULT);
	memcpy(&st->sa, cfg->sa, cfg->salen);
	st->salen = cfg->salen;
	snprintf(st->url, sizeof(st->url), "%s", cfg->url);
	snprintf(st->host, sizeof(st->host), "%s", cfg->host);
	st->pid = cfg->pid;
	if (st->sa.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&st->sa)->sin6_addr, st->ip,
		    sizeof(st->ip));
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)&st->sa)->sin_addr, st->ip,
		    sizeof(st->ip));
	st->backoff = EGRESS_SYSLOG_BACKOFF_MIN_MS;
	st->msg = malloc(DLOG_SYSLOG_MSG_MAX);
	st->frame = malloc(DLOG_SYSLOG_FRAME_MAX);
	if (st->msg == NULL || st->frame == NULL ||
	    (cfg->name != NULL && (st->name = strdup(cfg->name)) == NULL)) {
		errbuf_set(err, errlen, 0, "log_syslog: out of memory");
		goto fail;
	}
	st->wfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (st->wfd < 0) {
		errbuf_set(err, errlen, 0, "log_syslog: eventfd: %s", strerror(errno));
		goto fail;
	}
	if (pthread_create(&st->th, NULL, st_main, st) != 0) {
		errbuf_set(err, errlen, 0, "log_syslog: cannot start the mirror thread");
		goto fail;
	}
	st->started = true;
	return st;
fail:
	syslog_stream_free(st);
	return NULL;
}

static void
st_wake(struct syslog_stream *st)
{
	uint64_t one = 1;

	while (write(st->wfd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

void
syslog_stream_stop(struct syslog_stream *st)
{
	struct sspool_rec *r;

	if (st == NULL || !st->started)
		return;
	pthread_mutex_lock(&st->mu);
	st->stop = true;
	st->stop_by_ms = mono_msec() + EGRESS_SYSLOG_CLOSE_MS;
	pthread_mutex_unlock(&st->mu);
	st_wake(st);
	pthread_join(st->th, NULL);
	st->started = false;
	/* What the collector did not acknowledge is lost to it: count and report it. */
	pthread_mutex_lock(&st->mu);
	TAILQ_FOREACH(r, &st->sp.q, link)
		(void)syslog_loss_drop(&st->sp.loss, r->seq);
	if (st->sp.n > 0)
		log_warnx("syslog mirror %s: stopping with %zu record(s) the collector has not "
		    "acknowledged (%s)", st->url, st->sp.n, st->connected ? "it was slow" :
		    st->error);
	syslog_loss_flush(&st->sp.loss);
	sspool_clear(&st->sp);
	pthread_mutex_unlock(&st->mu);
}

void
syslog_stream_free(struct syslog_stream *st)
{
	if (st == NULL)
		return;
	syslog_stream_stop(st);
	sspool_clear(&st->sp);
	if (st->wfd >= 0)
		close(st->wfd);
	pthread_mutex_destroy(&st->mu);
	SSL_CTX_free(st->ctx);
	free(st->name);
	free(st->msg);
	free(st->frame);
	free(st);
}

void
syslog_stream_push(struct syslog_stream *st, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;
	bool any = false;

	pthread_mutex_lock(&st->mu);
	if (st->stop) {
		pthread_mutex_unlock(&st->mu);
		return;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n;
		uint64_t seq;

		if (nl == NULL)
			break;
		n = (size_t)(nl - p);
		seq = sspool_line_seq(p, n);
		switch (sspool_push(&st->sp, seq, p, n)) {
		case SSPOOL_QUEUED:
			any = true;
			break;
		case SSPOOL_DROPPED_FIRST:
			log_warnx("syslog mirror %s: spool full (%llu bytes, %zu records held%s%s): "
			    "dropping new records from seq %llu until the collector takes some; the "
			    "loss is counted (metrics) and recorded in the decision log", st->url,
			    (unsigned long long)st->sp.max, st->sp.n, st->connected ? "" :
			    "; collector unreachable: ", st->connected ? "" : st->error,
			    (unsigned long long)seq);
			break;
		case SSPOOL_DROPPED:
			break;
		}
		p = nl + 1;
	}
	pthread_mutex_unlock(&st->mu);
	if (any)
		st_wake(st);
}

bool
syslog_stream_loss_take(struct syslog_stream *st, uint64_t *count, uint64_t *first,
    uint64_t *last)
{
	bool r;

	pthread_mutex_lock(&st->mu);
	r = syslog_loss_take(&st->sp.loss, count, first, last);
	pthread_mutex_unlock(&st->mu);
	return r;
}

void
syslog_stream_loss_restore(struct syslog_stream *st, uint64_t count, uint64_t first,
    uint64_t last)
{
	pthread_mutex_lock(&st->mu);
	syslog_loss_restore(&st->sp.loss, count, first, last);
	pthread_mutex_unlock(&st->mu);
}

void
syslog_stream_stats(struct syslog_stream *st, struct dlog_syslog_stats *out)
{
	pthread_mutex_lock(&st->mu);
	out->connected = st->connected;
	out->sent = st->sent;
	out->dropped = st->sp.loss.total;
	out->loss_episodes = st->sp.loss.episodes;
	out->resent = st->resent;
	out->connects = st->connects;
	out->failures = st->failures;
	out->spool_records = st->sp.n;
	out->spool_bytes = st->sp.used;
	out->spool_max = st->sp.max;
	snprintf(out->error, sizeof(out->error), "%s", st->error);
	pthread_mutex_unlock(&st->mu);
}
