/*
 * auditev.c - start, stop, config and grant records of the decision log. Contract:
 * auditev.h; schema: docs/decision-log.md.
 */
#include "egressd/auditev.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/grant.h"
#include "common/limits.h"
#include "common/log.h"
#include "egressd/config.h"
#include "egressd/daemon.h"
#include "egressd/dlog.h"
#include "egressd/grants.h"
#include "egressd/listener.h"

#define AUDITEV_STOP_WAIT_MS 2000

int
auditev_file_sha256(const char *path, char *out)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char buf[8192], md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	size_t total = 0;
	ssize_t n;
	int fd, rc = -1;
	EVP_MD_CTX *ctx;

	out[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	ctx = EVP_MD_CTX_new();
	if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		goto out;
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			goto out;
		}
		total += (size_t)n;
		if (total > EGRESS_CONF_FILE_MAX)      /* not a config egressd would load */
			goto out;
		if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1)
			goto out;
	}
	if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != 32)
		goto out;
	for (unsigned i = 0; i < mdlen; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[2 * mdlen] = '\0';
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	close(fd);
	return rc;
}

static json_t *
time_json(time_t t)
{
	struct tm tm;
	char b[32];

	if (t == 0 || gmtime_r(&t, &tm) == NULL ||
	    strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return json_null();
	return json_string(b);
}

static void
append(struct daemon *d, const char *event, json_t *f)
{
	if (f == NULL) {
		log_warnx("decision log: out of memory building a %s record", event);
		return;
	}
	if (dlog_append(d->dlog, event, f, NULL, NULL, NULL) != 0)
		log_warn("decision log refused a %s record", event);
}

static json_t *
config_hash_json(const char *path)
{
	char h[65];

	return auditev_file_sha256(path, h) == 0 ? json_string(h) : json_null();
}

void
auditev_start(struct daemon *d)
{
	json_t *f = json_object();

	if (f != NULL) {
		json_object_set_new(f, "version", json_string(EGRESS_VERSION));
		json_object_set_new(f, "pid", json_integer((json_int_t)getpid()));
		json_object_set_new(f, "config", dlog_text(d->cfg->path));
		json_object_set_new(f, "config_sha256", config_hash_json(d->cfg->path));
	}
	append(d, "start", f);
	for (struct lgrant *lg = grants_first(d->grants); lg != NULL; lg = lg->next)
		auditev_grant_created(d, lg);
}

void
auditev_stop(struct daemon *d, const char *cause)
{
	json_t *f = json_object();

	if (f == NULL || d->dlog == NULL) {
		json_decref(f);
		return;
	}
	json_object_set_new(f, "cause", json_string(cause));
	if (dlog_append_sync(d->dlog, "stop", f, AUDITEV_STOP_WAIT_MS) != 0)
		log_warn("decision log: the stop record was not written");
}

void
auditev_config(struct daemon *d, const char *path, bool ok, const char *error)
{
	json_t *f = json_object();

	if (f != NULL) {
		json_object_set_new(f, "action", json_string("reload"));
		json_object_set_new(f, "result", json_string(ok ? "ok" : "failed"));
		json_object_set_new(f, "path", dlog_text(path));
		json_object_set_new(f, "sha256", config_hash_json(path));
		json_object_set_new(f, "error", ok ? json_null() : dlog_text(error));
	}
	append(d, "config", f);
}

/* entries [from, from + AUDITEV_ENTRIES_PER_RECORD) of g's allow list */
static json_t *
allow_slice(const struct grant *g, size_t from)
{
	json_t *all = grant_to_json(g), *src, *arr = json_array();

	src = json_object_get(all, "allow");
	for (size_t i = from; arr != NULL && i < json_array_size(src) &&
	    i < from + AUDITEV_ENTRIES_PER_RECORD; i++)
		json_array_append(arr, json_array_get(src, i));
	json_decref(all);
	return arr;
}

/* The grant's settings besides its allow list (pinning, limits, lifetime, ...). */
static json_t *
settings_json(const struct grant *g)
{
	json_t *all = grant_to_json(g);

	if (all != NULL) {
		json_object_del(all, "allow");
		json_object_del(all, "principal");
	}
	return all;
}

static size_t
parts_for(size_t n)
{
	size_t p = (n + AUDITEV_ENTRIES_PER_RECORD - 1) / AUDITEV_ENTRIES_PER_RECORD;

	return p == 0 ? 1 : p;
}

/*
 * One grant event, in as many parts as its entry lists need. Every part names the grant
 * and the action; part 1 also carries the settings; allow (and old_allow for a replace)
 * are sliced in entry order: a reader concatenates the parts.
 */
static void
grant_event(struct daemon *d, const char *action, const struct lgrant *lg,
    const struct lgrant *old, enum reason why)
{
	size_t parts = parts_for(lg->g->nallow);
	char b[EGRESS_HOSTPORT_MAX + 1];

	if (old != NULL && parts_for(old->g->nallow) > parts)
		parts = parts_for(old->g->nallow);
	for (size_t p = 0; p < parts; p++) {
		json_t *f = json_object(), *ls = json_array();

		if (f == NULL || ls == NULL) {
			json_decref(f);
			json_decref(ls);
			append(d, "grant", NULL);
			return;
		}
		json_object_set_new(f, "action", json_string(action));
		json_object_set_new(f, "grant_id", json_string(lg->id));
		json_object_set_new(f, "principal", json_string(lg->g->principal));
		json_object_set_new(f, "source", json_string(lg->dynamic ? "dynamic" : "static"));
		json_object_set_new(f, "name", lg->name[0] != '\0' ? json_string(lg->name) :
		    json_null());
		json_object_set_new(f, "reason", why == REASON_ALLOWED ? json_null() :
		    json_string(reason_str(why)));
		json_object_set_new(f, "part", json_integer((json_int_t)p + 1));
		json_object_set_new(f, "parts", json_integer((json_int_t)parts));
		if (p == 0) {
			for (size_t i = 0; i < lg->nlisteners; i++)
				json_array_append_new(ls, json_string(listener_addr_str(lg->listeners[i],
				    b, sizeof(b))));
			json_object_set_new(f, "listen", ls);
			ls = NULL;
			json_object_set_new(f, "interface", lg->ifname[0] != '\0' ?
			    json_string(lg->ifname) : json_null());
			json_object_set_new(f, "created", time_json(lg->created));
			json_object_set_new(f, "expires", time_json(lg->expires));
			json_object_set_new(f, "live_connections", json_integer(lg->nconns));
			json_object_set_new(f, "settings", settings_json(lg->g));
		}
		json_decref(ls);
		json_object_set_new(f, "allow_count", json_integer((json_int_t)lg->g->nallow));
		json_object_set_new(f, "allow", allow_slice(lg->g, p * AUDITEV_ENTRIES_PER_RECORD));
		if (old != NULL) {
			json_object_set_new(f, "old_grant_id", json_string(old->id));
			if (p == 0)
				json_object_set_new(f, "old_settings", settings_json(old->g));
			json_object_set_new(f, "old_allow_count",
			    json_integer((json_int_t)old->g->nallow));
			json_object_set_new(f, "old_allow", allow_slice(old->g,
			    p * AUDITEV_ENTRIES_PER_RECORD));
		}
		append(d, "grant", f);
	}
}

void
auditev_grant_created(struct daemon *d, const struct lgrant *lg)
{
	grant_event(d, "create", lg, NULL, REASON_ALLOWED);
}

static bool
grant_same(const struct lgrant *a, const struct lgrant *b)
{
	json_t *ja = grant_to_json(a->g), *jb = grant_to_json(b->g);
	bool same = ja != NULL && jb != NULL && json_equal(ja, jb);

	json_decref(ja);
	json_decref(jb);
	return same;
}

void
auditev_reload_grants(struct daemon *d, struct lgrant *const *old, size_t nold,
    struct lgrant *const *nw, size_t nnew)
{
	for (size_t i = 0; i < nnew; i++) {
		const struct lgrant *o = NULL;

		for (size_t k = 0; k < nold; k++)
			if (strcmp(old[k]->name, nw[i]->name) == 0)
				o = old[k];
		if (o == NULL)
			grant_event(d, "create", nw[i], NULL, REASON_ALLOWED);
		else if (!grant_same(o, nw[i]) || strcmp(o->id, nw[i]->id) != 0)
			grant_event(d, "replace", nw[i], o, REASON_ALLOWED);
	}
	for (size_t k = 0; k < nold; k++) {
		bool kept = false;

		for (size_t i = 0; i < nnew; i++)
			if (strcmp(old[k]->name, nw[i]->name) == 0)
				kept = true;
		if (!kept)
			grant_event(d, "remove", old[k], NULL, REASON_NO_GRANT);
	}
}

void
auditev_retired(void *arg, const struct lgrant *lg, enum reason why)
{
	struct daemon *d = arg;

	if (why == REASON_GRANT_REVOKED)
		grant_event(d, "revoke", lg, NULL, why);
	else if (why == REASON_GRANT_EXPIRED)
		grant_event(d, "expire", lg, NULL, why);
}
