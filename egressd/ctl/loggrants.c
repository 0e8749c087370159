/* loggrants.c - replay grant records to a point in time. Contract: loggrants.h. */
#include "egressd/ctl/loggrants.h"
#include "egressd/ctl/logfiles.h"
#include "egressd/ctl/logquery.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "egressd/ctl/timearg.h"

#define EXIT_USAGE 2

struct loggrants {
	int64_t at_us;
	char *principal;
	json_t *live;          /* grant_id -> {principal, source, name, since, expires, allow,
	                          settings} */
	bool anchored;
	bool past;
	uint64_t skipped_edited;
};

struct loggrants *
loggrants_new(int64_t at_us, const char *principal)
{
	struct loggrants *g = calloc(1, sizeof(*g));

	if (g == NULL)
		return NULL;
	g->at_us = at_us;
	g->live = json_object();
	g->principal = principal != NULL ? strdup(principal) : NULL;
	if (g->live == NULL || (principal != NULL && g->principal == NULL)) {
		loggrants_free(g);
		return NULL;
	}
	return g;
}

void
loggrants_free(struct loggrants *g)
{
	if (g == NULL)
		return;
	json_decref(g->live);
	free(g->principal);
	free(g);
}

bool
loggrants_anchored(const struct loggrants *g)
{
	return g->anchored;
}

static int
append_slice(json_t *dst, json_t *slice, char *err, size_t errlen)
{
	if (!json_is_array(slice))
		return 0;
	for (size_t i = 0; i < json_array_size(slice); i++) {
		json_t *e = json_array_get(slice, i);

		if (!json_is_string(e))
			continue;
		if (json_array_size(dst) >= EGRESS_GRANT_ENTRIES_MAX) {
			snprintf(err, errlen, "a grant record lists more than %d entries",
			    EGRESS_GRANT_ENTRIES_MAX);
			return -1;
		}
		json_array_append(dst, e);
	}
	return 0;
}

/* The grant in service from this record on (create, or the new side of a replace). */
static int
grant_begin(struct loggrants *g, const struct logrec *r, const char *id, int64_t part,
    char *err, size_t errlen)
{
	json_t *o = json_object_get(g->live, id);

	if (part <= 1 || o == NULL) {
		if (o == NULL && json_object_size(g->live) >= EGRESS_AUDIT_KEYS_MAX) {
			snprintf(err, errlen, "more than %d grants in service at once",
			    EGRESS_AUDIT_KEYS_MAX);
			return -1;
		}
		o = json_object();
		if (o == NULL)
			return -1;
		json_object_set_new(o, "grant_id", json_string(id));
		json_object_set(o, "principal", json_object_get(r->obj, "principal"));
		json_object_set(o, "source", json_object_get(r->obj, "source"));
		json_object_set(o, "name", json_object_get(r->obj, "name"));
		json_object_set_new(o, "since", json_string(r->time));
		json_object_set(o, "expires", json_object_get(r->obj, "expires"));
		json_object_set_new(o, "allow", json_array());
		json_object_set(o, "settings", json_object_get(r->obj, "settings"));
		if (json_object_set_new(g->live, id, o) != 0)
			return -1;
	}
	return append_slice(json_object_get(o, "allow"), json_object_get(r->obj, "allow"),
	    err, errlen);
}

int
loggrants_add(struct loggrants *g, const struct logrec *r, char *err, size_t errlen)
{
	const char *action, *id, *old;
	json_t *jp;
	int64_t part;

	if (g->past)
		return 0;
	if (r->time_us > g->at_us) {
		g->past = true;
		return 0;
	}
	if (!r->hash_ok) {
		g->skipped_edited++;
		return 1;
	}
	if (strcmp(r->event, "start") == 0 || strcmp(r->event, "stop") == 0) {
		/* a new run starts with no grant but those it records; a stop ends them all */
		json_object_clear(g->live);
		g->anchored = true;
		return 1;
	}
	if (strcmp(r->event, "grant") != 0)
		return 1;
	g->anchored = true;
	action = json_string_value(json_object_get(r->obj, "action"));
	id = json_string_value(json_object_get(r->obj, "grant_id"));
	old = json_string_value(json_object_get(r->obj, "old_grant_id"));
	jp = json_object_get(r->obj, "part");
	part = json_is_integer(jp) ? (int64_t)json_integer_value(jp) : 1;
	if (action == NULL || id == NULL)
		return 1;
	if (strcmp(action, "create") == 0)
		return grant_begin(g, r, id, part, err, errlen) == 0 ? 1 : -1;
	if (strcmp(action, "replace") == 0) {
		if (old != NULL && part <= 1)
			json_object_del(g->live, old);
		return grant_begin(g, r, id, part, err, errlen) == 0 ? 1 : -1;
	}
	/* remove, revoke, expire: out of service from this record on */
	json_object_del(g->live, id);
	return 1;
}

json_t *
loggrants_result(struct loggrants *g)
{
	json_t *arr = json_array();
	const char *k;
	json_t *v;

	json_object_foreach(g->live, k, v) {
		const char *p = json_string_value(json_object_get(v, "principal"));
		const char *exp = json_string_value(json_object_get(v, "expires"));
		int64_t eus;

		if (g->principal != NULL && (p == NULL || strcmp(p, g->principal) != 0))
			continue;
		/* expired by then even if the expire record falls after the files' end */
		if (exp != NULL && logread_time_parse(exp, &eus) == 0 && eus <= g->at_us)
			continue;
		json_array_append(arr, v);
	}
	return arr;
}

static void
print_text(json_t *arr, const char *at)
{
	size_t i;
	json_t *v;

	if (json_array_size(arr) == 0)
		printf("no grant in service at %s\n", at);
	json_array_foreach(arr, i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		const char *exp = json_string_value(json_object_get(v, "expires"));
		size_t k;
		json_t *e;

		printf("grant %s principal %s (%s%s%s) since %s, expires %s\n",
		    json_string_value(json_object_get(v, "grant_id")),
		    json_string_value(json_object_get(v, "principal")) ?
		    json_string_value(json_object_get(v, "principal")) : "-",
		    json_string_value(json_object_get(v, "source")) ?
		    json_string_value(json_object_get(v, "source")) : "-",
		    name != NULL ? " " : "", name != NULL ? name : "",
		    json_string_value(json_object_get(v, "since")), exp != NULL ? exp : "never");
		json_array_foreach(json_object_get(v, "allow"), k, e)
			printf("  allow %s\n", json_string_value(e));
	}
}

struct grants_walk {
	struct loggrants *g;
	char err[256];
};

static int
grants_one(const struct logrec *rec, void *arg)
{
	struct grants_walk *w = arg;
	int rc = loggrants_add(w->g, rec, w->err, sizeof(w->err));

	return rc < 0 ? -1 : 0;
}

int
loggrants_cli(int argc, char **argv)
{
	const char *at = NULL, *principal = NULL;
	bool json = false;
	struct grants_walk w = { 0 };
	const char **files;
	size_t nfiles = 0;
	int64_t at_us;
	int rc = 1;

	files = calloc((size_t)argc + 1, sizeof(*files));
	if (files == NULL)
		return 1;
	for (int i = 0; i < argc;) {
		const char *val;
		int r;

		if ((r = logread_opt(argc, argv, &i, "at", &val)) != 0) {
			if (r < 0)
				goto usage;
			at = val;
			continue;
		}
		if ((r = logread_opt(argc, argv, &i, "key", &val)) != 0) {
			char kerr[256];

			if (r < 0)
				goto usage;
			if (logread_load_key(val, kerr, sizeof(kerr)) != 0) {
				fprintf(stderr, "egressctl: --key %s\n", kerr);
				free(files);
				return EXIT_USAGE;
			}
			continue;
		}
		if ((r = logread_opt(argc, argv, &i, "principal", &val)) != 0) {
			if (r < 0)
				goto usage;
			principal = val;
			continue;
		}
		if (strcmp(argv[i], "--json") == 0) {
			json = true;
			i++;
			continue;
		}
		if (strncmp(argv[i], "--", 2) == 0)
			goto usage;
		files[nfiles++] = argv[i++];
	}
	if (at == NULL)
		goto usage;
	if (nfiles == 0) {
		/* No FILE: the default decision log with its rotated files (logfiles.h), as
		 * every log command reads it. */
		char ferr[512];
		size_t dropped;
		const char **dflt = realloc(files, (LOGQUERY_FILES_MAX + 1) * sizeof(*files));
		int n;

		if (dflt == NULL)
			goto out;
		files = dflt;
		n = logfiles_default_set(files, LOGQUERY_FILES_MAX, &dropped, ferr, sizeof(ferr));
		if (n < 0) {
			fprintf(stderr, "egressctl: log grants: %s\n", ferr);
			goto out;
		}
		if (dropped > 0)
			fprintf(stderr, "egressctl: warning: %s\n", ferr);
		nfiles = (size_t)n;
	} else {
		/* Files given (a shell glob lists them by name): read them in chain order. */
		logfiles_order(files, nfiles);
	}
	if (timearg_parse(at, timearg_now_us(), &at_us) != 0) {
		fprintf(stderr, "egressctl: --at %s: takes 1h, 30m, '2026-12-01 20:07' (UTC) or an "
		    "RFC 3339 time\n", at);
		free(files);
		return EXIT_USAGE;
	}
	w.g = loggrants_new(at_us, principal);
	if (w.g == NULL)
		goto out;
	if (logread_each(files, nfiles, grants_one, NULL, &w) != 0) {
		if (w.err[0] != '\0')
			fprintf(stderr, "egressctl: log grants: %s\n", w.err);
		goto out;
	}
	if (w.g->skipped_edited > 0)
		fprintf(stderr, "egressctl: WARNING: %llu record(s) do not match their own hash "
		    "(edited, or a keyed log read without --key) and were not believed: run egressctl "
		    "log verify\n",
		    (unsigned long long)w.g->skipped_edited);
	if (!loggrants_anchored(w.g))
		fprintf(stderr, "egressctl: WARNING: no start or grant record at or before %s in "
		    "these files: grants issued before the first file are not known (give the "
		    "older, rotated files too)\n", at);
	{
		json_t *arr = loggrants_result(w.g);

		if (arr == NULL)
			goto out;
		if (json) {
			char *s = json_dumps(arr, JSON_INDENT(2));

			if (s != NULL)
				printf("%s\n", s);
			free(s);
		} else {
			print_text(arr, at);
		}
		json_decref(arr);
	}
	rc = 0;
out:
	loggrants_free(w.g);
	free(files);
	return rc;
usage:
	fprintf(stderr, "usage: egressctl log grants --at TIME [--principal P] [--key FILE] "
	    "[--json] [FILE...]   (no FILE: the default log and its rotated files)\n"
	    "  TIME: 1h, 30m, 2d (ago), '2026-12-01 20:07' (UTC) or RFC 3339\n");
	free(files);
	return EXIT_USAGE;
}
