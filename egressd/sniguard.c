/* sniguard.c - the ClientHello peek before an opaque tunnel (see sniguard.h). */
#include "egressd/sniguard.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "common/limits.h"

/* Room for the hello's records: the handshake bytes plus a header per record. */
#define PEEK_MAX (EGRESS_CLIENTHELLO_MAX + 64 * 5)
#define POLL_MS  5          /* without edge-triggered events: re-peek this often */

struct sniguard {
	struct event_base *sg_base;
	int sg_fd;
	struct host sg_host;
	struct event *sg_rev;       /* readable (edge-triggered when the backend can) */
	struct event *sg_timer;     /* the deadline */
	struct event *sg_kick;      /* runs the first check, and the verdict, outside start */
	bool sg_edge;
	unsigned char *sg_buf;      /* prefix + peeked bytes */
	size_t sg_nprefix;
	struct clienthello sg_ch;
	bool sg_have_ch;
	sniguard_cb sg_cb;
	void *sg_arg;
};

void
sniguard_free(struct sniguard *g)
{
	if (g == NULL)
		return;
	if (g->sg_rev != NULL)
		event_free(g->sg_rev);
	if (g->sg_timer != NULL)
		event_free(g->sg_timer);
	if (g->sg_kick != NULL)
		event_free(g->sg_kick);
	free(g->sg_buf);
	free(g);
}

static void
finish(struct sniguard *g, enum reason r)
{
	event_del(g->sg_rev);
	event_del(g->sg_timer);
	event_del(g->sg_kick);
	/* The callback may free the guard: nothing touches g after it. */
	g->sg_cb(r, g->sg_have_ch ? &g->sg_ch : NULL, g->sg_arg);
}

/*
 * One look at what is queued after the prefix in buf (PEEK_MAX bytes; recv MSG_PEEK):
 * true with *r (and *have_ch, ch) when that decides, as the callback would be told; false
 * when more must arrive.
 */
static bool
decide(int fd, const struct host *host, unsigned char *buf, size_t nprefix,
    struct clienthello *ch, bool *have_ch, enum reason *r)
{
	ssize_t n;
	bool absent;

	*have_ch = false;
	do
		n = recv(fd, buf + nprefix, PEEK_MAX - nprefix, MSG_PEEK | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
		*r = REASON_CLOSE_ERROR;
		return true;
	}
	if (n == 0 && nprefix < PEEK_MAX) {
		*r = REASON_CLOSE_CLIENT;           /* EOF before a whole hello */
		return true;
	}
	if (n < 0)
		n = 0;                              /* nothing queued yet */
	switch (clienthello_parse(buf, nprefix + (size_t)n, ch)) {
	case CH_OK:
		*have_ch = true;
		*r = clienthello_sni_check(ch, host, &absent);
		return true;
	case CH_NOT_TLS:
		/* Not TLS at all (plain HTTP to port 443, another protocol): there is no
		 * server name to compare; allowed, and the caller records that it was not TLS.
		 * A TLS record that is not a readable ClientHello is refused below. */
		*r = REASON_ALLOWED;
		return true;
	case CH_MALFORMED:
	case CH_TOO_LARGE:
		*r = REASON_TLS_EXPECTED;
		return true;
	case CH_NEED_MORE:
		break;
	}
	if (nprefix + (size_t)n >= PEEK_MAX) {
		*r = REASON_TLS_EXPECTED;
		return true;
	}
	return false;
}

bool
sniguard_try(int cfd, const struct host *host, const unsigned char *prefix, size_t nprefix,
    struct clienthello *ch, bool *have_ch, enum reason *r)
{
	unsigned char buf[PEEK_MAX];

	if (nprefix > PEEK_MAX)
		nprefix = PEEK_MAX;      /* more than a hello: the parse refuses it */
	if (nprefix > 0)
		memcpy(buf, prefix, nprefix);
	return decide(cfd, host, buf, nprefix, ch, have_ch, r);
}

static void
check(struct sniguard *g)
{
	enum reason r;

	if (decide(g->sg_fd, &g->sg_host, g->sg_buf, g->sg_nprefix, &g->sg_ch, &g->sg_have_ch,
	    &r)) {
		finish(g, r);
		return;
	}
	if (!g->sg_edge) {
		struct timeval tv = { 0, POLL_MS * 1000 };
		event_add(g->sg_kick, &tv);
	}
}

static void
on_read(evutil_socket_t fd, short what, void *arg)
{
	check(arg);
}

static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
	check(arg);
}

static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
	finish(arg, REASON_HEADER_TIMEOUT);
}

struct sniguard *
sniguard_start(struct event_base *base, int cfd, const struct host *host,
    const unsigned char *prefix, size_t nprefix, uint64_t timeout_ms, sniguard_cb cb,
    void *arg)
{
	struct sniguard *g = calloc(1, sizeof(*g));
	struct timeval tv = { (time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000 };
	struct timeval now = { 0, 0 };

	if (g == NULL)
		return NULL;
	g->sg_base = base;
	g->sg_fd = cfd;
	g->sg_host = *host;
	g->sg_cb = cb;
	g->sg_arg = arg;
	if (nprefix > PEEK_MAX)
		nprefix = PEEK_MAX;      /* more than a hello: the parse refuses it */
	g->sg_buf = malloc(PEEK_MAX);
	/* A level-triggered read event would fire again and again while the partial hello
	 * sits unread; edge-triggered fires when more arrives. Otherwise poll. */
	g->sg_edge = (event_base_get_features(base) & EV_FEATURE_ET) != 0;
	g->sg_rev = event_new(base, cfd, EV_READ | EV_PERSIST | (g->sg_edge ? EV_ET : 0), on_read, g);
	g->sg_timer = evtimer_new(base, on_timeout, g);
	g->sg_kick = evtimer_new(base, on_kick, g);
	if (g->sg_buf == NULL || g->sg_rev == NULL || g->sg_timer == NULL || g->sg_kick == NULL) {
		sniguard_free(g);
		return NULL;
	}
	if (nprefix > 0)
		memcpy(g->sg_buf, prefix, nprefix);
	g->sg_nprefix = nprefix;
	if ((g->sg_edge && event_add(g->sg_rev, NULL) != 0) || event_add(g->sg_timer, &tv) != 0 ||
	    event_add(g->sg_kick, &now) != 0) {
		sniguard_free(g);
		return NULL;
	}
	return g;
}
