/* dlog_syslog.c - RFC 5424 mirror of decision-log records. Contract: dlog_syslog.h. */
#include "egressd/dlog_syslog.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "egressd/config.h"
#include "egressd/syslog_spool.h"
#include "egressd/syslog_stream.h"
#include "egressd/syslog_tls.h"

struct dlog_syslog {
	enum dlog_syslog_kind dsl_kind;
	char dsl_target[160];
	/* datagram transports */
	int dsl_fd;
	struct sockaddr_storage dsl_to;
	socklen_t dsl_tolen;
	char dsl_host[256];
	long dsl_pid;
	char *dsl_msg;             /* DLOG_SYSLOG_MSG_MAX */
	pthread_mutex_t dsl_mu;    /* sent and loss, read by stats from other threads */
	uint64_t dsl_sent;
	struct syslog_loss dsl_loss;
	/* stream transports */
	struct syslog_stream *dsl_stream;
};

static const char *const kind_names[] = { "unix", "udp", "tcp", "tls" };

int
dlog_syslog_target_parse(const char *target, enum dlog_syslog_kind *kind,
    struct sockaddr_storage *ss, socklen_t *sl, char *err, size_t errlen)
{
	static const struct { const char *prefix; enum dlog_syslog_kind k; } ip[] = {
		{ "udp:", DLOG_SYSLOG_UDP },
		{ "tcp://", DLOG_SYSLOG_TCP },
		{ "tls://", DLOG_SYSLOG_TLS },
	};

	memset(ss, 0, sizeof(*ss));
	if (strncmp(target, "unix:", 5) == 0) {
		struct sockaddr_un *sun = (struct sockaddr_un *)ss;
		const char *p = target + 5;

		if (p[0] != '/' || strlen(p) >= sizeof(sun->sun_path)) {
			errbuf_set(err, errlen, 0, "log_syslog: unix: needs an absolute socket path");
			return -1;
		}
		sun->sun_family = AF_UNIX;
		memcpy(sun->sun_path, p, strlen(p) + 1);
		*sl = (socklen_t)sizeof(*sun);
		*kind = DLOG_SYSLOG_UNIX;
		return 0;
	}
	for (size_t i = 0; i < EGRESS_NELEM(ip); i++) {
		size_t n = strlen(ip[i].prefix);
		const char *why = NULL;

		if (strncmp(target, ip[i].prefix, n) != 0)
			continue;
		if (config_parse_sockaddr(target + n, false, ss, sl, &why) != 0) {
			errbuf_set(err, errlen, 0, "log_syslog: %sADDRESS:PORT with a literal address, "
			    "[v6]:PORT for IPv6 (%s)", ip[i].prefix, why != NULL ? why : "invalid");
			return -1;
		}
		*kind = ip[i].k;
		return 0;
	}
	errbuf_set(err, errlen, 0, "log_syslog: unix:/path, udp:ADDRESS:PORT, tcp://ADDRESS:PORT "
	    "or tls://ADDRESS:PORT (or none)");
	return -1;
}

int
dlog_syslog_check(const struct dlog_syslog_config *c, bool files, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	enum dlog_syslog_kind k;

	if (dlog_syslog_target_parse(c->target, &k, &ss, &sl, err, errlen) != 0)
		return -1;
	if (k != DLOG_SYSLOG_TLS && (c->ca != NULL || c->name != NULL || c->cert != NULL ||
	    c->key != NULL)) {
		errbuf_set(err, errlen, 0, "log_syslog_ca, log_syslog_name, log_syslog_cert and "
		    "log_syslog_key belong to log_syslog = tls://ADDRESS:PORT");
		return -1;
	}
	if (k != DLOG_SYSLOG_TCP && k != DLOG_SYSLOG_TLS && c->spool_max != 0) {
		errbuf_set(err, errlen, 0, "log_syslog_spool belongs to a stream (tcp:// or tls://): "
		    "datagrams are not held");
		return -1;
	}
	if (c->spool_max != 0 && (c->spool_max < EGRESS_SYSLOG_SPOOL_MIN ||
	    c->spool_max > EGRESS_SYSLOG_SPOOL_MAX)) {
		errbuf_set(err, errlen, 0, "log_syslog_spool: between %llu and %llu bytes",
		    (unsigned long long)EGRESS_SYSLOG_SPOOL_MIN,
		    (unsigned long long)EGRESS_SYSLOG_SPOOL_MAX);
		return -1;
	}
	if (c->name != NULL && (c->name[0] == '\0' || strlen(c->name) > 253 ||
	    strpbrk(c->name, " /:@\"\\") != NULL)) {
		errbuf_set(err, errlen, 0, "log_syslog_name: a DNS name (the collector's certificate "
		    "must carry it)");
		return -1;
	}
	if (k == DLOG_SYSLOG_TLS && c->ca == NULL) {
		errbuf_set(err, errlen, 0, "log_syslog = tls://...: log_syslog_ca is required (the "
		    "CA file that issued the collector's certificate)");
		return -1;
	}
	if ((c->cert == NULL) != (c->key == NULL)) {
		errbuf_set(err, errlen, 0, "log_syslog_cert and log_syslog_key go together (the "
		    "client certificate and its key)");
		return -1;
	}
	if (k == DLOG_SYSLOG_TLS && files) {
		SSL_CTX *ctx = syslog_tls_ctx(c->ca, c->cert, c->key, err, errlen);

		if (ctx == NULL)
			return -1;
		SSL_CTX_free(ctx);
	}
	return 0;
}

struct dlog_syslog *
dlog_syslog_open(const struct dlog_syslog_config *c, char *err, size_t errlen)
{
	struct dlog_syslog *s;
	struct sockaddr_storage ss;
	socklen_t sl = 0;
	enum dlog_syslog_kind kind;

	if (dlog_syslog_check(c, true, err, errlen) != 0 ||
	    dlog_syslog_target_parse(c->target, &kind, &ss, &sl, err, errlen) != 0)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s == NULL || (s->dsl_msg = malloc(DLOG_SYSLOG_MSG_MAX)) == NULL) {
		free(s);
		errbuf_set(err, errlen, 0, "log_syslog: out of memory");
		return NULL;
	}
	s->dsl_fd = -1;
	s->dsl_kind = kind;
	pthread_mutex_init(&s->dsl_mu, NULL);
	snprintf(s->dsl_target, sizeof(s->dsl_target), "%s", c->target);
	if (gethostname(s->dsl_host, sizeof(s->dsl_host) - 1) != 0 || s->dsl_host[0] == '\0')
		snprintf(s->dsl_host, sizeof(s->dsl_host), "-");
	s->dsl_host[sizeof(s->dsl_host) - 1] = '\0';
	for (char *p = s->dsl_host; *p != '\0'; p++)
		if (*p <= 0x20 || *p >= 0x7f)
			*p = '-';
	s->dsl_pid = (long)getpid();
	if (kind == DLOG_SYSLOG_TCP || kind == DLOG_SYSLOG_TLS) {
		struct syslog_stream_config sc = {
			.sa = (struct sockaddr *)&ss, .salen = sl, .url = c->target,
			.name = c->name, .spool_max = c->spool_max, .host = s->dsl_host, .pid = s->dsl_pid,
		};

		if (kind == DLOG_SYSLOG_TLS &&
		    (sc.ctx = syslog_tls_ctx(c->ca, c->cert, c->key, err, errlen)) == NULL)
			goto fail;
		s->dsl_stream = syslog_stream_new(&sc, err, errlen);
		if (s->dsl_stream == NULL)
			goto fail;
		return s;
	}
	/* Non-blocking: a collector that does not read must never stall the writer. */
	s->dsl_fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->dsl_fd < 0) {
		errbuf_set(err, errlen, 0, "log_syslog: socket: %s", strerror(errno));
		goto fail;
	}
	/* sendto() each time rather than connect() once: a collector that starts (or
	 * restarts) later is reached without reopening anything */
	s->dsl_to = ss;
	s->dsl_tolen = sl;
	return s;
fail:
	dlog_syslog_close(s);
	return NULL;
}

void
dlog_syslog_stop(struct dlog_syslog *s)
{
	if (s == NULL)
		return;
	if (s->dsl_stream != NULL) {
		syslog_stream_stop(s->dsl_stream);
		return;
	}
	pthread_mutex_lock(&s->dsl_mu);
	syslog_loss_flush(&s->dsl_loss);
	pthread_mutex_unlock(&s->dsl_mu);
}

void
dlog_syslog_close(struct dlog_syslog *s)
{
	if (s == NULL)
		return;
	syslog_stream_free(s->dsl_stream);
	if (s->dsl_fd >= 0)
		close(s->dsl_fd);
	pthread_mutex_destroy(&s->dsl_mu);
	free(s->dsl_msg);
	free(s);
}

struct out {
	char *p;
	size_t len, cap;
	bool over;
};

static void
put(struct out *o, const char *s, size_t n)
{
	if (o->over || n >= o->cap - o->len) {
		o->over = true;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

static void
puts_(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

/* One SD-PARAM: name="value" with '"', '\' and ']' escaped (RFC 5424 6.3.3); control
 * bytes become '?' (a hostile target must not break a receiver's line handling). */
static void
param(struct out *o, const char *name, const char *v)
{
	if (v == NULL)
		return;
	puts_(o, " ");
	puts_(o, name);
	puts_(o, "=\"");
	for (; *v != '\0'; v++) {
		char c = *v;

		if (c == '"' || c == '\\' || c == ']')
			put(o, "\\", 1);
		if ((unsigned char)c < 0x20 || c == 0x7f)
			c = '?';
		put(o, &c, 1);
	}
	puts_(o, "\"");
}

int
dlog_syslog_format(const char *line, size_t len, const char *host, long pid, char *out,
    size_t cap)
{
	struct out o = { .p = out, .cap = cap };
	json_error_t jerr;
	json_t *r = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr), *a;
	const char *event, *time, *verdict;
	char head[256], seq[24];
	int sev;

	if (r == NULL || !json_is_object(r) || cap < 2)
		goto bad;
	event = json_string_value(json_object_get(r, "event"));
	time = json_string_value(json_object_get(r, "time"));
	verdict = json_string_value(json_object_get(r, "verdict"));
	if (event == NULL || time == NULL || strlen(event) > 32 || strlen(time) > 32 ||
	    strpbrk(time, " \"]") != NULL || strpbrk(event, " \"]") != NULL)
		goto bad;
	sev = verdict != NULL && strcmp(verdict, "deny") == 0 ? 5 : 6;
	snprintf(head, sizeof(head), "<%d>1 %s %.64s egressd %ld %s [" DLOG_SYSLOG_SDID,
	    DLOG_SYSLOG_FACILITY * 8 + sev, time, host, pid, event);
	puts_(&o, head);
	snprintf(seq, sizeof(seq), "%lld",
	    (long long)json_integer_value(json_object_get(r, "seq")));
	param(&o, "seq", seq);
	param(&o, "hash", json_string_value(json_object_get(r, "hash")));
	param(&o, "principal", json_string_value(json_object_get(r, "principal")));
	param(&o, "verdict", verdict);
	param(&o, "reason", json_string_value(json_object_get(r, "reason")));
	param(&o, "dest", json_string_value(json_object_get(r, "dest")));
	param(&o, "route", json_string_value(json_object_get(r, "route")));
	a = json_object_get(r, "attested");
	if (json_is_boolean(a))
		param(&o, "attested", json_is_true(a) ? "true" : "false");
	puts_(&o, "] ");
	put(&o, line, len);
	json_decref(r);
	return o.over ? -1 : (int)o.len;
bad:
	json_decref(r);
	return -1;
}

int
dlog_syslog_frame(const char *msg, size_t len, char *out, size_t cap)
{
	int h;

	if (len == 0 || len > DLOG_SYSLOG_MSG_MAX)
		return -1;
	h = snprintf(out, cap, "%zu ", len);
	if (h < 0 || (size_t)h >= cap || len > cap - (size_t)h)
		return -1;
	memcpy(out + h, msg, len);
	return h + (int)len;
}

void
dlog_syslog_send_lines(struct dlog_syslog *s, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;

	if (s->dsl_stream != NULL) {
		syslog_stream_push(s->dsl_stream, buf, len);
		return;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		int n;
		bool ok;

		if (nl == NULL)
			break;
		n = dlog_syslog_format(p, (size_t)(nl - p), s->dsl_host, s->dsl_pid, s->dsl_msg,
		    DLOG_SYSLOG_MSG_MAX);
		ok = n >= 0 && sendto(s->dsl_fd, s->dsl_msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL,
		    (struct sockaddr *)&s->dsl_to, s->dsl_tolen) >= 0;
		pthread_mutex_lock(&s->dsl_mu);
		if (ok) {
			s->dsl_sent++;
			syslog_loss_ok(&s->dsl_loss);
		} else {
			int e = errno;
			uint64_t seq = sspool_line_seq(p, (size_t)(nl - p));

			if (syslog_loss_drop(&s->dsl_loss, seq))
				log_warnx("syslog mirror %s: cannot send record seq %llu (%s); dropping "
				    "until a send succeeds; the loss is counted (metrics) and recorded "
				    "in the decision log", s->dsl_target, (unsigned long long)seq,
				    n < 0 ? "cannot format it" : strerror(e));
		}
		pthread_mutex_unlock(&s->dsl_mu);
		p = nl + 1;
	}
}

bool
dlog_syslog_loss_take(struct dlog_syslog *s, uint64_t *count, uint64_t *first,
    uint64_t *last)
{
	bool r;

	if (s->dsl_stream != NULL)
		return syslog_stream_loss_take(s->dsl_stream, count, first, last);
	pthread_mutex_lock(&s->dsl_mu);
	r = syslog_loss_take(&s->dsl_loss, count, first, last);
	pthread_mutex_unlock(&s->dsl_mu);
	return r;
}

void
dlog_syslog_loss_restore(struct dlog_syslog *s, uint64_t count, uint64_t first,
    uint64_t last)
{
	if (s->dsl_stream != NULL) {
		syslog_stream_loss_restore(s->dsl_stream, count, first, last);
		return;
	}
	pthread_mutex_lock(&s->dsl_mu);
	syslog_loss_restore(&s->dsl_loss, count, first, last);
	pthread_mutex_unlock(&s->dsl_mu);
}

void
dlog_syslog_stats(struct dlog_syslog *s, struct dlog_syslog_stats *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->target, sizeof(out->target), "%s", s->dsl_target);
	out->transport = kind_names[s->dsl_kind];
	if (s->dsl_stream != NULL) {
		syslog_stream_stats(s->dsl_stream, out);
		return;
	}
	pthread_mutex_lock(&s->dsl_mu);
	out->connected = true;
	out->sent = s->dsl_sent;
	out->dropped = s->dsl_loss.total;
	out->loss_episodes = s->dsl_loss.episodes;
	pthread_mutex_unlock(&s->dsl_mu);
}
