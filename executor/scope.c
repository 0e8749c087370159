/*
 * scope - the scope check over the changed set (see executor/scope.h).
 */
#include "executor/scope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/limits.h"
#include "common/pathglob.h"

static bool
matches_any(const struct strlist *l, const char *path)
{
	for (size_t i = 0; l != NULL && i < l->n; i++)
		if (path_glob_match(l->v[i], path))
			return true;
	return false;
}

enum reason
scope_path(const char *path, const struct strlist *allowed, const struct strlist *forbidden)
{
	if (path == NULL || path_check(path) != PATH_OK)
		return REASON_SCOPE_INVALID_PATH;
	if (pathglob_has_git_component(path))
		return REASON_SCOPE_GIT_DIR;
	if (matches_any(forbidden, path))
		return REASON_SCOPE_FORBIDDEN;
	if (!matches_any(allowed, path))
		return REASON_SCOPE_VIOLATION;
	return REASON_ALLOWED;
}

static int
add_violation(struct scope_verdict *out, size_t *cap, const char *path, enum reason r)
{
	if (out->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct scope_violation *nv = reallocarray(out->v, ncap, sizeof(*nv));
		if (nv == NULL)
			return -1;
		out->v = nv;
		*cap = ncap;
	}
	out->v[out->n].path = strdup(path);
	if (out->v[out->n].path == NULL)
		return -1;
	out->v[out->n].reason = r;
	out->n++;
	return 0;
}

int
scope_check(const struct changeset *cs, const struct strlist *allowed,
    const struct strlist *forbidden, struct scope_verdict *out)
{
	size_t cap = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < cs->n; i++) {
		const char *paths[2] = { cs->v[i].path, cs->v[i].old_path };
		for (int k = 0; k < 2; k++) {
			enum reason r;
			if (paths[k] == NULL)
				continue;
			r = scope_path(paths[k], allowed, forbidden);
			if (r != REASON_ALLOWED && add_violation(out, &cap, paths[k], r) != 0) {
				out->accepted = false;
				return -1;
			}
		}
	}
	out->accepted = out->n == 0;
	return 0;
}

void
scope_verdict_free(struct scope_verdict *v)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < v->n; i++)
		free(v->v[i].path);
	free(v->v);
	v->v = NULL;
	v->n = 0;
}

json_t *
scope_to_json(const struct scope_verdict *v)
{
	json_t *a = json_array();
	char buf[EGRESS_PATH_MAX * 4 + 1];

	for (size_t i = 0; a != NULL && i < v->n; i++) {
		changes_path_display(v->v[i].path, buf, sizeof(buf));
		json_array_append_new(a, json_pack("{s:s, s:s}", "path", buf, "reason",
		    reason_str(v->v[i].reason)));
	}
	return json_pack("{s:b, s:o}", "accepted", v->accepted, "violations", a);
}

void
scope_summary(const struct scope_verdict *v, char *buf, size_t len)
{
	size_t o;
	char disp[256];

	if (v->accepted) {
		snprintf(buf, len, "scope: accepted");
		return;
	}
	o = (size_t)snprintf(buf, len, "scope: rejected (%zu path%s):", v->n,
	    v->n == 1 ? "" : "s");
	for (size_t i = 0; i < v->n && i < 5 && o < len; i++) {
		changes_path_display(v->v[i].path, disp, sizeof(disp));
		o += (size_t)snprintf(buf + o, len - o, "%s %s %s", i ? "," : "",
		    reason_str(v->v[i].reason), disp);
	}
	if (v->n > 5 && o < len)
		snprintf(buf + o, len - o, ", ... (see manifest.json)");
}
