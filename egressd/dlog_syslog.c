/* dlog_syslog.c - RFC 5424 mirror of decision-log records. Contract: dlog_syslog.h. */
#include "egressd/dlog_syslog.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "egressd/config.h"

struct dlog_syslog {
	int fd;
	struct sockaddr_storage to;
	socklen_t tolen;
	char host[256];
	long pid;
	char *msg;                 /* DLOG_SYSLOG_MSG_MAX */
	uint64_t sent, dropped;
};

struct dlog_syslog *
dlog_syslog_open(const char *target, char *err, size_t errlen)
{
	struct dlog_syslog *s;
	struct sockaddr_storage ss;
	socklen_t sl = 0;
	int family;

	memset(&ss, 0, sizeof(ss));
	if (strncmp(target, "unix:", 5) == 0) {
		struct sockaddr_un *sun = (struct sockaddr_un *)&ss;
		const char *p = target + 5;

		if (p[0] != '/' || strlen(p) >= sizeof(sun->sun_path)) {
			snprintf(err, errlen, "log_syslog: unix: needs an absolute socket path");
			return NULL;
		}
		sun->sun_family = AF_UNIX;
		memcpy(sun->sun_path, p, strlen(p) + 1);
		sl = (socklen_t)sizeof(*sun);
		family = AF_UNIX;
	} else if (strncmp(target, "udp:", 4) == 0) {
		const char *why = NULL;

		if (config_parse_sockaddr(target + 4, false, &ss, &sl, &why) != 0) {
			snprintf(err, errlen, "log_syslog: udp:ADDRESS:PORT with a literal address "
			    "(%s)", why != NULL ? why : "invalid");
			return NULL;
		}
		family = ss.ss_family;
	} else {
		snprintf(err, errlen, "log_syslog: unix:/path or udp:ADDRESS:PORT");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL || (s->msg = malloc(DLOG_SYSLOG_MSG_MAX)) == NULL) {
		free(s);
		snprintf(err, errlen, "log_syslog: out of memory");
		return NULL;
	}
	/* Non-blocking: a collector that does not read must never stall the writer. */
	s->fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		snprintf(err, errlen, "log_syslog: socket: %s", strerror(errno));
		dlog_syslog_close(s);
		return NULL;
	}
	/* sendto() each time rather than connect() once: a collector that starts (or
	 * restarts) later is reached without reopening anything */
	s->to = ss;
	s->tolen = sl;
	if (gethostname(s->host, sizeof(s->host) - 1) != 0 || s->host[0] == '\0')
		snprintf(s->host, sizeof(s->host), "-");
	s->host[sizeof(s->host) - 1] = '\0';
	for (char *c = s->host; *c != '\0'; c++)
		if (*c <= 0x20 || *c >= 0x7f)
			*c = '-';
	s->pid = (long)getpid();
	return s;
}

void
dlog_syslog_close(struct dlog_syslog *s)
{
	if (s == NULL)
		return;
	if (s->fd >= 0)
		close(s->fd);
	free(s->msg);
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

void
dlog_syslog_send_lines(struct dlog_syslog *s, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		int n;

		if (nl == NULL)
			break;
		n = dlog_syslog_format(p, (size_t)(nl - p), s->host, s->pid, s->msg,
		    DLOG_SYSLOG_MSG_MAX);
		if (n < 0 || sendto(s->fd, s->msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL,
		    (struct sockaddr *)&s->to, s->tolen) < 0)
			s->dropped++;
		else
			s->sent++;
		p = nl + 1;
	}
}

void
dlog_syslog_counts(const struct dlog_syslog *s, uint64_t *sent, uint64_t *dropped)
{
	*sent = s != NULL ? s->sent : 0;
	*dropped = s != NULL ? s->dropped : 0;
}
