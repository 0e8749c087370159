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
/* what to try when a TLS collector ends the connection before taking any record */
#define ST_CERT_HINT "does it want a client certificate (log_syslog_cert, log_syslog_key) " \
	"or refuse the one given?"

struct syslog_stream {
	pthread_t ss_th;
	bool ss_started;
	pthread_mutex_t ss_mu;
	int ss_wfd;                  /* eventfd: records arrived, or stop */

	/* under mu */
	bool ss_stop;
	uint64_t ss_stop_by_ms;
	struct syslog_spool ss_sp;
	bool ss_connected;
	uint64_t ss_sent, ss_resent, ss_connects, ss_failures;
	char ss_error[256];

	/* the thread's own */
	struct sockaddr_storage ss_sa;
	socklen_t ss_salen;
	char ss_url[160];
	char ss_ip[INET6_ADDRSTRLEN];
	SSL_CTX *ss_ctx;
	char *ss_name;
	int ss_fd;
	SSL *ss_ssl;
	enum st_state ss_state;
	short ss_want;               /* poll events the TLS layer or a blocked write waits for */
	uint64_t ss_deadline, ss_retry_at, ss_backoff;
	uint64_t ss_blocked_at;      /* a write waits for the collector since (0: none) */
	uint64_t ss_wrote;           /* bytes written to this connection (TLS: ciphertext) */
	struct sspool_rec *ss_cur;   /* the record whose frame is being written */
	char *ss_msg, *ss_frame;
	size_t ss_flen, ss_foff;
	bool ss_warned;              /* the outage has been reported */
	bool ss_proven;              /* this connection delivered a record (acknowledged):
	                                only then is the backoff reset and the recovery said
	                                (a collector that accepts and then refuses, e.g. a
	                                client certificate after a TLS 1.3 handshake, must not
	                                be reconnected to in a tight loop) */
	char ss_host[256];
	long ss_pid;
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

		st->ss_wrote += *processed;
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
	if (st->ss_fd < 0 || getsockopt(st->ss_fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0 ||
	    tl < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
		return;
	acked = ti.tcpi_bytes_acked > 0 ? ti.tcpi_bytes_acked - 1 : 0;
	if (acked > st->ss_wrote)
		acked = st->ss_wrote;
	pthread_mutex_lock(&st->ss_mu);
	freed = sspool_acked(&st->ss_sp, acked);
	held = st->ss_sp.n;
	pthread_mutex_unlock(&st->ss_mu);
	if (freed > 0 && !st->ss_proven) {
		st->ss_proven = true;
		st->ss_backoff = EGRESS_SYSLOG_BACKOFF_MIN_MS;
		if (st->ss_warned)
			log_info("syslog mirror %s: the collector takes records again (%zu still "
			    "held, sent in order)", st->ss_url, held);
		st->ss_warned = false;
	}
}

/* Close the connection. abort: reset it (SO_LINGER 0), so that what our kernel still
 * holds unacknowledged is discarded instead of being delivered late on the old
 * connection: those records are written again on the next one, and must not arrive
 * twice (a collector that stopped reading and then resumes). */
static void
st_close_conn(struct syslog_stream *st, bool abort)
{
	if (abort && st->ss_fd >= 0) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		(void)setsockopt(st->ss_fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	if (st->ss_ssl != NULL) {
		SSL_free(st->ss_ssl);   /* also frees the BIO (BIO_NOCLOSE: not the fd) */
		st->ss_ssl = NULL;
	}
	if (st->ss_fd >= 0) {
		close(st->ss_fd);
		st->ss_fd = -1;
	}
	st->ss_cur = NULL;
	st->ss_flen = st->ss_foff = 0;
	st->ss_want = 0;
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
	if (st->ss_state == ST_UP || st->ss_state == ST_HANDSHAKE)
		st_ack(st);
	st_close_conn(st, true);
	pthread_mutex_lock(&st->ss_mu);
	again = sspool_rewind(&st->ss_sp);
	held = st->ss_sp.n;
	st->ss_resent += again;
	st->ss_connected = false;
	st->ss_failures++;
	snprintf(st->ss_error, sizeof(st->ss_error), "%s", why);
	pthread_mutex_unlock(&st->ss_mu);
	if (!st->ss_warned) {
		log_warnx("syslog mirror %s: %s; holding records (%zu now, spool up to %llu "
		    "bytes) and reconnecting with backoff up to %u ms", st->ss_url, why, held,
		    (unsigned long long)st->ss_sp.max, EGRESS_SYSLOG_BACKOFF_MAX_MS);
		st->ss_warned = true;
	} else {
		log_debug("syslog mirror %s: %s; retrying in %llu ms", st->ss_url, why,
		    (unsigned long long)st->ss_backoff);
	}
	st->ss_state = ST_DOWN;
	st->ss_retry_at = mono_msec() + st->ss_backoff;
	st->ss_backoff = st->ss_backoff * 2 > EGRESS_SYSLOG_BACKOFF_MAX_MS ?
	    EGRESS_SYSLOG_BACKOFF_MAX_MS : st->ss_backoff * 2;
}

static void
st_up(struct syslog_stream *st)
{
	st->ss_state = ST_UP;
	st->ss_proven = false;
	st->ss_blocked_at = 0;
	st->ss_want = POLLOUT;
	pthread_mutex_lock(&st->ss_mu);
	st->ss_connected = true;
	st->ss_connects++;
	st->ss_error[0] = '\0';
	pthread_mutex_unlock(&st->ss_mu);
	log_debug("syslog mirror %s: connected", st->ss_url);
}

/* A handshake failed: say why and what to change. */
static void
st_tls_failed(struct syslog_stream *st, int sslerr)
{
	char why[384];

	syslog_tls_refusal(st->ss_ssl, sslerr, why, sizeof(why));
	st_fail(st, "%s", why);
}

static void
st_handshake(struct syslog_stream *st)
{
	int r, e;

	ERR_clear_error();
	errno = 0;
	r = SSL_do_handshake(st->ss_ssl);
	if (r == 1) {
		st_up(st);
		return;
	}
	e = SSL_get_error(st->ss_ssl, r);
	if (e == SSL_ERROR_WANT_READ)
		st->ss_want = POLLIN;
	else if (e == SSL_ERROR_WANT_WRITE)
		st->ss_want = POLLOUT;
	else
		st_tls_failed(st, e);
}

/* TCP is up: TLS handshake, or ready. */
static void
st_established(struct syslog_stream *st)
{
	BIO *bio;

	st->ss_wrote = 0;
	if (st->ss_ctx == NULL) {
		st_up(st);
		return;
	}
	st->ss_ssl = SSL_new(st->ss_ctx);
	bio = BIO_new_socket(st->ss_fd, BIO_NOCLOSE);
	if (st->ss_ssl == NULL || bio == NULL) {
		BIO_free(bio);
		st_fail(st, "TLS: out of memory");
		return;
	}
	BIO_set_callback_ex(bio, bio_count_cb);
	BIO_set_callback_arg(bio, (char *)(void *)st);
	SSL_set_bio(st->ss_ssl, bio, bio);
	if (st->ss_name != NULL) {
		/* st->name is our own copy: the SNI macro casts away const */
		if (SSL_set1_host(st->ss_ssl, st->ss_name) != 1 ||
		    SSL_set_tlsext_host_name(st->ss_ssl, st->ss_name) != 1) {
			st_fail(st, "TLS: cannot set the name to verify");
			return;
		}
	} else if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(st->ss_ssl), st->ss_ip) != 1) {
		st_fail(st, "TLS: cannot set the address to verify");
		return;
	}
	SSL_set_connect_state(st->ss_ssl);
	st->ss_state = ST_HANDSHAKE;
	st->ss_deadline = mono_msec() + EGRESS_SYSLOG_HANDSHAKE_MS;
	st_handshake(st);
}

static void
st_connect(struct syslog_stream *st)
{
	st->ss_fd = socket(st->ss_sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (st->ss_fd < 0) {
		st_fail(st, "socket: %s", strerror(errno));
		return;
	}
	if (connect(st->ss_fd, (struct sockaddr *)&st->ss_sa, st->ss_salen) == 0) {
		st_established(st);
		return;
	}
	if (errno != EINPROGRESS) {
		st_fail(st, "connect: %s", strerror(errno));
		return;
	}
	st->ss_state = ST_CONNECTING;
	st->ss_deadline = mono_msec() + EGRESS_SYSLOG_CONNECT_MS;
}

/* Read and discard what the collector sends (nothing is expected), bounded. Returns -1
 * when the connection is gone (st_fail called). */
static int
st_drain(struct syslog_stream *st)
{
	char buf[4096], why[256];
	size_t got = 0;

	while (got < EGRESS_SYSLOG_DISCARD_MAX) {
		if (st->ss_ssl != NULL) {
			int r, e;

			ERR_clear_error();
			r = SSL_read(st->ss_ssl, buf, sizeof(buf));
			if (r > 0) {
				got += (size_t)r;
				continue;
			}
			e = SSL_get_error(st->ss_ssl, r);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				return 0;
			if (e == SSL_ERROR_SSL)
				syslog_tls_errstr(why, sizeof(why));
			else
				snprintf(why, sizeof(why), "%s", e == SSL_ERROR_SYSCALL &&
				    errno != 0 ? strerror(errno) : "end of stream");
			if (!st->ss_proven)
				/* TLS 1.3: the client's handshake ends before the server has judged
				 * the client certificate; its refusal arrives now */
				st_fail(st, "the collector closed the connection before taking a "
				    "record (%s): " ST_CERT_HINT, e ==
				    SSL_ERROR_ZERO_RETURN ? "close_notify" : why);
			else if (e == SSL_ERROR_ZERO_RETURN)
				st_fail(st, "the collector closed the connection");
			else
				st_fail(st, "the collector's connection broke (%s)", why);
			return -1;
		} else {
			ssize_t r = recv(st->ss_fd, buf, sizeof(buf), MSG_DONTWAIT);

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

		pthread_mutex_lock(&st->ss_mu);
		st->ss_cur = sspool_next(&st->ss_sp);
		pthread_mutex_unlock(&st->ss_mu);
		if (st->ss_cur == NULL)
			return false;
		n = dlog_syslog_format(st->ss_cur->line, st->ss_cur->len, st->ss_host, st->ss_pid, st->ss_msg,
		    DLOG_SYSLOG_MSG_MAX);
		if (n > 0)
			n = dlog_syslog_frame(st->ss_msg, (size_t)n, st->ss_frame, DLOG_SYSLOG_FRAME_MAX);
		if (n > 0) {
			st->ss_flen = (size_t)n;
			st->ss_foff = 0;
			return true;
		}
		/* not a record (cannot happen for lines dlog wrote): counted as lost */
		log_warnx("syslog mirror %s: record seq %llu cannot be formatted; not sent",
		    st->ss_url, (unsigned long long)st->ss_cur->seq);
		pthread_mutex_lock(&st->ss_mu);
		(void)syslog_loss_drop(&st->ss_sp.loss, st->ss_cur->seq);
		syslog_loss_ok(&st->ss_sp.loss);
		sspool_sent(&st->ss_sp, st->ss_cur, st->ss_wrote > 0 ? st->ss_wrote : 1);
		pthread_mutex_unlock(&st->ss_mu);
		st->ss_cur = NULL;
	}
}

/* Write held records until the socket would block. -1: the connection is gone. */
static int
st_write(struct syslog_stream *st)
{
	for (int i = 0; i < ST_WRITES_PER_WAKE; i++) {
		if (st->ss_cur == NULL && !st_next_frame(st)) {
			st->ss_want = 0;
			return 0;
		}
		if (st->ss_ssl != NULL) {
			int r, e;

			ERR_clear_error();
			errno = 0;
			r = SSL_write(st->ss_ssl, st->ss_frame, (int)st->ss_flen);
			if (r <= 0) {
				char why[256];

				e = SSL_get_error(st->ss_ssl, r);
				if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
					st->ss_want = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
					if (st->ss_blocked_at == 0)
						st->ss_blocked_at = mono_msec();
					return 0;
				}
				if (e == SSL_ERROR_SSL)
					syslog_tls_errstr(why, sizeof(why));
				else
					snprintf(why, sizeof(why), "%s", e == SSL_ERROR_SYSCALL &&
					    errno != 0 ? strerror(errno) :
					    "the collector closed the connection");
				/* Before any record was taken, the alert of a TLS 1.3 collector
				 * that refuses the client certificate, or a reset or close: its
				 * alert can lose the race with our first write (seen: "Connection
				 * reset by peer" instead of the alert) */
				st_fail(st, "TLS write failed (%s)%s", why, st->ss_proven ? "" :
				    ": the collector ended the connection before taking a record: "
				    ST_CERT_HINT);
				return -1;
			}
			st->ss_foff = st->ss_flen;   /* without partial-write mode: all or retry */
		} else {
			ssize_t w = send(st->ss_fd, st->ss_frame + st->ss_foff, st->ss_flen - st->ss_foff,
			    MSG_NOSIGNAL | MSG_DONTWAIT);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				st->ss_want = POLLOUT;
				if (st->ss_blocked_at == 0)
					st->ss_blocked_at = mono_msec();
				return 0;
			}
			if (w < 0) {
				st_fail(st, "send: %s", strerror(errno));
				return -1;
			}
			st->ss_wrote += (uint64_t)w;
			st->ss_foff += (size_t)w;
			st->ss_blocked_at = 0;
			if (st->ss_foff < st->ss_flen)
				continue;       /* a partial write: the rest of this frame next */
		}
		st->ss_blocked_at = 0;
		pthread_mutex_lock(&st->ss_mu);
		sspool_sent(&st->ss_sp, st->ss_cur, st->ss_wrote);
		st->ss_sent++;
		pthread_mutex_unlock(&st->ss_mu);
		st->ss_cur = NULL;
	}
	st->ss_want = POLLOUT;
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
		struct pollfd p[2] = { { .fd = st->ss_wfd, .events = POLLIN }, { .fd = -1 } };
		uint64_t now = mono_msec(), stop_by;
		bool stop, have, out;
		int timeout = -1, np = 1;

		pthread_mutex_lock(&st->ss_mu);
		stop = st->ss_stop;
		stop_by = st->ss_stop_by_ms;
		have = st->ss_cur != NULL || sspool_next(&st->ss_sp) != NULL;
		out = !TAILQ_EMPTY(&st->ss_sp.q) && TAILQ_FIRST(&st->ss_sp.q)->end != 0;
		pthread_mutex_unlock(&st->ss_mu);
		if (stop && (st->ss_state == ST_DOWN || (!have && !out) || now >= stop_by))
			break;
		switch (st->ss_state) {
		case ST_DOWN:
			if (now >= st->ss_retry_at) {
				st_connect(st);
				continue;
			}
			timeout = ms_until(st->ss_retry_at, now);
			break;
		case ST_CONNECTING:
		case ST_HANDSHAKE:
			if (now >= st->ss_deadline) {
				st_fail(st, st->ss_state == ST_CONNECTING ? "connect timed out after %u ms" :
				    "TLS handshake timed out after %u ms (does the collector speak TLS "
				    "on this port?)", st->ss_state == ST_CONNECTING ?
				    EGRESS_SYSLOG_CONNECT_MS : EGRESS_SYSLOG_HANDSHAKE_MS);
				continue;
			}
			p[1].fd = st->ss_fd;
			p[1].events = st->ss_state == ST_CONNECTING ? POLLOUT : st->ss_want;
			np = 2;
			timeout = ms_until(st->ss_deadline, now);
			break;
		case ST_UP:
			if (have && st->ss_blocked_at != 0 &&
			    now - st->ss_blocked_at >= EGRESS_SYSLOG_STALL_MS) {
				st_fail(st, "the collector took no data for %u ms (it stopped reading)",
				    EGRESS_SYSLOG_STALL_MS);
				continue;
			}
			p[1].fd = st->ss_fd;
			p[1].events = POLLIN | (have ? (st->ss_want != 0 ? st->ss_want : POLLOUT) : 0);
			np = 2;
			if (have && st->ss_blocked_at != 0)
				timeout = ms_until(st->ss_blocked_at + EGRESS_SYSLOG_STALL_MS, now);
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
			log_warn("syslog mirror %s: poll", st->ss_url);
			usleep(100 * 1000);
		}
		if (p[0].revents & POLLIN) {
			uint64_t v;

			(void)!read(st->ss_wfd, &v, sizeof(v));
		}
		switch (st->ss_state) {
		case ST_DOWN:
			break;
		case ST_CONNECTING:
			if (p[1].revents != 0) {
				int soerr = 0;
				socklen_t sl = sizeof(soerr);

				if (getsockopt(st->ss_fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
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
	if (st->ss_ssl != NULL && st->ss_state == ST_UP) {
		st_ack(st);
		(void)SSL_shutdown(st->ss_ssl);   /* close_notify, once, never waited for */
	}
	/* stopping: what is still unacknowledged is counted as lost (syslog_stream_stop),
	 * so it must not arrive later either */
	pthread_mutex_lock(&st->ss_mu);
	out_left = !TAILQ_EMPTY(&st->ss_sp.q);
	pthread_mutex_unlock(&st->ss_mu);
	st_close_conn(st, out_left);
	return NULL;
}

/* ---- the producer's side ---- */

struct syslog_stream *
syslog_stream_new(const struct syslog_stream_config *cfg, char *err, size_t errlen)
{
	struct syslog_stream *st = calloc(1, sizeof(*st));

	if (st == NULL || cfg->salen > sizeof(st->ss_sa)) {
		free(st);
		SSL_CTX_free(cfg->ctx);
		errbuf_set(err, errlen, 0, "log_syslog: out of memory");
		return NULL;
	}
	st->ss_ctx = cfg->ctx;
	st->ss_fd = -1;
	st->ss_wfd = -1;
	pthread_mutex_init(&st->ss_mu, NULL);
	sspool_init(&st->ss_sp, cfg->spool_max != 0 ? cfg->spool_max :
	    EGRESS_SYSLOG_SPOOL_DEFAULT);
	memcpy(&st->ss_sa, cfg->sa, cfg->salen);
	st->ss_salen = cfg->salen;
	snprintf(st->ss_url, sizeof(st->ss_url), "%s", cfg->url);
	snprintf(st->ss_host, sizeof(st->ss_host), "%s", cfg->host);
	st->ss_pid = cfg->pid;
	if (st->ss_sa.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&st->ss_sa)->sin6_addr, st->ss_ip,
		    sizeof(st->ss_ip));
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)&st->ss_sa)->sin_addr, st->ss_ip,
		    sizeof(st->ss_ip));
	st->ss_backoff = EGRESS_SYSLOG_BACKOFF_MIN_MS;
	st->ss_msg = malloc(DLOG_SYSLOG_MSG_MAX);
	st->ss_frame = malloc(DLOG_SYSLOG_FRAME_MAX);
	if (st->ss_msg == NULL || st->ss_frame == NULL ||
	    (cfg->name != NULL && (st->ss_name = strdup(cfg->name)) == NULL)) {
		errbuf_set(err, errlen, 0, "log_syslog: out of memory");
		goto fail;
	}
	st->ss_wfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (st->ss_wfd < 0) {
		errbuf_set(err, errlen, 0, "log_syslog: eventfd: %s", strerror(errno));
		goto fail;
	}
	if (pthread_create(&st->ss_th, NULL, st_main, st) != 0) {
		errbuf_set(err, errlen, 0, "log_syslog: cannot start the mirror thread");
		goto fail;
	}
	st->ss_started = true;
	return st;
fail:
	syslog_stream_free(st);
	return NULL;
}

static void
st_wake(struct syslog_stream *st)
{
	uint64_t one = 1;

	while (write(st->ss_wfd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

void
syslog_stream_stop(struct syslog_stream *st)
{
	struct sspool_rec *r;

	if (st == NULL || !st->ss_started)
		return;
	pthread_mutex_lock(&st->ss_mu);
	st->ss_stop = true;
	st->ss_stop_by_ms = mono_msec() + EGRESS_SYSLOG_CLOSE_MS;
	pthread_mutex_unlock(&st->ss_mu);
	st_wake(st);
	pthread_join(st->ss_th, NULL);
	st->ss_started = false;
	/* What the collector did not acknowledge is lost to it: count and report it. */
	pthread_mutex_lock(&st->ss_mu);
	TAILQ_FOREACH(r, &st->ss_sp.q, link)
		(void)syslog_loss_drop(&st->ss_sp.loss, r->seq);
	if (st->ss_sp.n > 0)
		log_warnx("syslog mirror %s: stopping with %zu record(s) the collector has not "
		    "acknowledged (%s)", st->ss_url, st->ss_sp.n, st->ss_connected ? "it was slow" :
		    st->ss_error);
	syslog_loss_flush(&st->ss_sp.loss);
	sspool_clear(&st->ss_sp);
	pthread_mutex_unlock(&st->ss_mu);
}

void
syslog_stream_free(struct syslog_stream *st)
{
	if (st == NULL)
		return;
	syslog_stream_stop(st);
	sspool_clear(&st->ss_sp);
	if (st->ss_wfd >= 0)
		close(st->ss_wfd);
	pthread_mutex_destroy(&st->ss_mu);
	SSL_CTX_free(st->ss_ctx);
	free(st->ss_name);
	free(st->ss_msg);
	free(st->ss_frame);
	free(st);
}

void
syslog_stream_push(struct syslog_stream *st, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;
	bool any = false;

	pthread_mutex_lock(&st->ss_mu);
	if (st->ss_stop) {
		pthread_mutex_unlock(&st->ss_mu);
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
		switch (sspool_push(&st->ss_sp, seq, p, n)) {
		case SSPOOL_QUEUED:
			any = true;
			break;
		case SSPOOL_DROPPED_FIRST:
			log_warnx("syslog mirror %s: spool full (%llu bytes, %zu records held%s%s): "
			    "dropping new records from seq %llu until the collector takes some; the "
			    "loss is counted (metrics) and recorded in the decision log", st->ss_url,
			    (unsigned long long)st->ss_sp.max, st->ss_sp.n, st->ss_connected ? "" :
			    "; collector unreachable: ", st->ss_connected ? "" : st->ss_error,
			    (unsigned long long)seq);
			break;
		case SSPOOL_DROPPED:
			break;
		}
		p = nl + 1;
	}
	pthread_mutex_unlock(&st->ss_mu);
	if (any)
		st_wake(st);
}

bool
syslog_stream_loss_take(struct syslog_stream *st, uint64_t *count, uint64_t *first,
    uint64_t *last)
{
	bool r;

	pthread_mutex_lock(&st->ss_mu);
	r = syslog_loss_take(&st->ss_sp.loss, count, first, last);
	pthread_mutex_unlock(&st->ss_mu);
	return r;
}

void
syslog_stream_loss_restore(struct syslog_stream *st, uint64_t count, uint64_t first,
    uint64_t last)
{
	pthread_mutex_lock(&st->ss_mu);
	syslog_loss_restore(&st->ss_sp.loss, count, first, last);
	pthread_mutex_unlock(&st->ss_mu);
}

void
syslog_stream_stats(struct syslog_stream *st, struct dlog_syslog_stats *out)
{
	pthread_mutex_lock(&st->ss_mu);
	out->connected = st->ss_connected;
	out->sent = st->ss_sent;
	out->dropped = st->ss_sp.loss.total;
	out->loss_episodes = st->ss_sp.loss.episodes;
	out->resent = st->ss_resent;
	out->connects = st->ss_connects;
	out->failures = st->ss_failures;
	out->spool_records = st->ss_sp.n;
	out->spool_bytes = st->ss_sp.used;
	out->spool_max = st->ss_sp.max;
	snprintf(out->error, sizeof(out->error), "%s", st->ss_error);
	pthread_mutex_unlock(&st->ss_mu);
}
