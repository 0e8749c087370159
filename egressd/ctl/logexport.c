/* logexport.c - decision-log records as Squid native access.log lines.
 * Contract: logexport.h. Mapping: docs/audit.md. */
#include "egressd/ctl/logexport.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/limits.h"
#include "common/reasons.h"
#include "egressd/ctl/logquery.h"

#define EXIT_USAGE 2
#define FIELD_MAX  (EGRESS_LOG_TARGET_MAX * 3 + 1)   /* a target fully %-encoded */

struct logexport {
	FILE *out;
	json_t *pending;     /* conn -> [decision objects], insertion order */
	size_t npending;
};

void
logexport_result(const char *verdict, const char *method, const char *reason,
    const char **code, int *status)
{
	enum reason r;

	if (verdict != NULL && strcmp(verdict, "allow") == 0) {
		*status = 200;
		*code = method != NULL && strcmp(method, "CONNECT") == 0 ? "TCP_TUNNEL" :
		    "TCP_MISS";
		return;
	}
	*status = 403;
	if (reason != NULL && reason_from_str(reason, &r) == 0 && reason_http_status(r) >= 400)
		*status = reason_http_status(r);
	/* Squid: refusals by policy or of a bad request are TCP_DENIED; an upstream that
	 * could not be reached (DNS, connect, proxy failures: 5xx) is NONE/5xx */
	*code = *status < 500 ? "TCP_DENIED" : "NONE";
}

/* A Squid field is one space-free token: bytes outside the printable ASCII range, the
 * space and '%' itself are %-encoded, so a hostile target can neither split the line
 * nor inject another one. Empty or absent -> "-". */
static void
field(const char *s, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	if (s == NULL || s[0] == '\0')
		s = "-";
	for (; *s != '\0' && o + 4 < cap; s++) {
		unsigned char c = (unsigned char)*s;

		if (c <= 0x20 || c >= 0x7f || c == '%') {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		} else {
			out[o++] = (char)c;
		}
	}
	out[o] = '\0';
}

/* "198.51.100.10:443" -> "198.51.100.10", "[2001:db8::1]:443" -> "2001:db8::1". */
static void
host_only(const char *hp, char *out, size_t cap)
{
	const char *c;
	size_t n;

	if (hp == NULL) {
		snprintf(out, cap, "-");
		return;
	}
	if (hp[0] == '[' && (c = strchr(hp, ']')) != NULL) {
		n = (size_t)(c - hp - 1);
		hp++;
	} else if ((c = strrchr(hp, ':')) != NULL && strchr(hp, ':') == c) {
		n = (size_t)(c - hp);
	} else {
		n = strlen(hp);
	}
	if (n >= cap)
		n = cap - 1;
	memcpy(out, hp, n);
	out[n] = '\0';
}

static const char *
jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* One access.log line for decision dec, ending at end_us. resp_status: the origin's
 * status from the close record of a forwarded HTTP exchange (schema 2), 0 when unknown. */
static void
emit(struct logexport *x, json_t *dec, int64_t end_us, int64_t elapsed_ms, int64_t bytes,
    int resp_status)
{
	char client[FIELD_MAX], url[FIELD_MAX], user[FIELD_MAX], peer[FIELD_MAX];
	char tmp[EGRESS_HOSTPORT_MAX + EGRESS_ADDRSTR_MAX];
	const char *verdict = jstr(dec, "verdict"), *method = jstr(dec, "method");
	const char *code, *hier, *route = jstr(dec, "route");
	bool allow = verdict != NULL && strcmp(verdict, "allow") == 0;
	int status;

	logexport_result(verdict, method, jstr(dec, "reason"), &code, &status);
	if (allow && resp_status >= 100 && resp_status <= 999 &&
	    (method == NULL || strcmp(method, "CONNECT") != 0))
		status = resp_status;
	host_only(jstr(dec, "client"), tmp, sizeof(tmp));
	field(tmp, client, sizeof(client));
	/* Squid logs a CONNECT's URL as host:port, a forwarded request as its URL */
	if (method != NULL && strcmp(method, "CONNECT") == 0)
		field(jstr(dec, "dest"), url, sizeof(url));
	else
		field(jstr(dec, "target") ? jstr(dec, "target") : jstr(dec, "dest"), url,
		    sizeof(url));
	field(jstr(dec, "principal"), user, sizeof(user));
	if (!allow) {
		hier = "HIER_NONE";
		snprintf(peer, sizeof(peer), "-");
	} else if (route == NULL || strcmp(route, "direct") == 0) {
		hier = "HIER_DIRECT";
		host_only(jstr(dec, "pinned") ? jstr(dec, "pinned") : jstr(dec, "dest"), tmp,
		    sizeof(tmp));
		field(tmp, peer, sizeof(peer));
	} else {
		hier = "FIRSTUP_PARENT";
		host_only(jstr(dec, "proxy_addr"), tmp, sizeof(tmp));
		field(jstr(dec, "proxy_addr") ? tmp : route, peer, sizeof(peer));
	}
	if (end_us < 0)
		end_us = 0;
	fprintf(x->out, "%9" PRId64 ".%03" PRId64 " %6" PRId64 " %s %s/%03d %" PRId64
	    " %s %s %s %s/%s -\n", end_us / 1000000, (end_us / 1000) % 1000, elapsed_ms, client,
	    code, status, bytes, method != NULL ? method : "NONE", url, user, hier, peer);
}

static int64_t
rec_time(json_t *o)
{
	int64_t us;
	const char *t = jstr(o, "time");

	return t != NULL && logread_time_parse(t, &us) == 0 ? us : 0;
}

struct logexport *
logexport_new(FILE *out)
{
	struct logexport *x = calloc(1, sizeof(*x));

	if (x == NULL)
		return NULL;
	x->out = out;
	x->pending = json_object();
	if (x->pending == NULL) {
		free(x);
		return NULL;
	}
	return x;
}

/* Write (without bytes) and forget the oldest waiting hop. */
static void
evict_oldest(struct logexport *x)
{
	void *it = json_object_iter(x->pending);
	json_t *q;

	if (it == NULL)
		return;
	q = json_object_iter_value(it);
	if (json_array_size(q) > 0) {
		json_t *dec = json_array_get(q, 0);

		emit(x, dec, rec_time(dec), 0, 0, 0);
		json_array_remove(q, 0);
		x->npending--;
	}
	if (json_array_size(q) == 0)
		json_object_del(x->pending, json_object_iter_key(it));
}

int
logexport_add(struct logexport *x, const struct logrec *r)
{
	json_t *q;

	if (r->event == NULL)
		return 0;
	if (strcmp(r->event, "decision") == 0) {
		bool allow = r->verdict != NULL && strcmp(r->verdict, "allow") == 0;

		if (!allow || r->conn == NULL) {
			int64_t ms = ((r->resolve_us > 0 ? r->resolve_us : 0) +
			    (r->connect_us > 0 ? r->connect_us : 0)) / 1000;

			emit(x, r->obj, r->time_us, ms, 0, 0);
			return 0;
		}
		if (x->npending >= EGRESS_AUDIT_PENDING_MAX)
			evict_oldest(x);
		q = json_object_get(x->pending, r->conn);
		if (q == NULL) {
			q = json_array();
			if (q == NULL || json_object_set_new(x->pending, r->conn, q) != 0)
				return -1;
		}
		if (json_array_append(q, r->obj) != 0)
			return -1;
		x->npending++;
		return 0;
	}
	if (strcmp(r->event, "close") == 0 && r->conn != NULL &&
	    (q = json_object_get(x->pending, r->conn)) != NULL && json_array_size(q) > 0) {
		json_t *dec = json_array_get(q, 0), *st = json_object_get(r->obj, "status");

		emit(x, dec, r->time_us, r->duration_us > 0 ? r->duration_us / 1000 : 0,
		    r->bytes_down > 0 ? r->bytes_down : 0,
		    json_is_integer(st) ? (int)json_integer_value(st) : 0);
		json_array_remove(q, 0);
		x->npending--;
		if (json_array_size(q) == 0)
			json_object_del(x->pending, r->conn);
	}
	/* a close without its decision (cut by a rotation or a filter) has no verdict: skip */
	return 0;
}

void
logexport_finish(struct logexport *x)
{
	if (x == NULL)
		return;
	while (x->npending > 0 && json_object_size(x->pending) > 0)
		evict_oldest(x);
	json_decref(x->pending);
	free(x);
}

struct export_walk {
	struct logexport *x;
	const struct logquery_filter *q;
};

static int
export_one(const struct logrec *rec, void *arg)
{
	struct export_walk *w = arg;

	/* closes carry no verdict or route: let them through so the hop they end gets its
	 * bytes; the filter applies to the decision */
	if (strcmp(rec->event, "close") != 0 && !logquery_match(w->q, rec))
		return 0;
	return logexport_add(w->x, rec);
}

static void
export_warn(const struct logread *r, void *arg)
{
	(void)arg;
	if (r->bad_hash > 0)
		fprintf(stderr, "egressctl: %s: WARNING: %llu record(s) do not match their own "
		    "hash (edited): run egressctl log verify\n", r->name,
		    (unsigned long long)r->bad_hash);
}

int
logexport_cli(int argc, char **argv)
{
	const char *format = NULL;
	struct logexport *x = NULL;
	struct logquery_opts o;
	struct export_walk xa;
	char **rest, err[256];
	int nrest = 0, i = 0, rc = 1;

	rest = calloc((size_t)argc + 1, sizeof(*rest));
	if (rest == NULL)
		return 1;
	while (i < argc) {
		const char *val;
		int r = logread_opt(argc, argv, &i, "format", &val);

		if (r < 0) {
			snprintf(err, sizeof(err), "--format needs a value");
			goto usage;
		}
		if (r > 0)
			format = val;
		else
			rest[nrest++] = argv[i++];
	}
	if (format == NULL || strcmp(format, "squid") != 0) {
		snprintf(err, sizeof(err), "--format squid is the one export format");
		goto usage;
	}
	if (logquery_parse_args(&o, nrest, rest, err, sizeof(err)) != 0)
		goto usage;
	if (o.follow || o.table) {
		snprintf(err, sizeof(err), "--follow and --table belong to log query");
		goto usage;
	}
	if ((x = logexport_new(stdout)) == NULL)
		goto out;
	xa.x = x;
	xa.q = &o.q;
	if (logread_each(o.files, o.nfiles, export_one, export_warn, &xa) != 0)
		goto out;
	rc = 0;
	goto out;
usage:
	fprintf(stderr, "egressctl log export: %s\n"
	    "usage: egressctl log export --format squid [query filters] [FILE...]\n", err);
	rc = EXIT_USAGE;
out:
	logexport_finish(x);
	if (fflush(stdout) != 0 && rc == 0)
		rc = 1;
	free(rest);
	return rc;
}
