/*
 * grant.c - one principal's immutable authority set and its JSON form (see common/grant.h).
 *
 * Parsing is strict in the way the control protocol promises: unknown keys, wrong types,
 * embedded NULs, out-of-range numbers and invalid entries are errors naming the field, and
 * nothing half-built escapes (the partial grant is freed on every error path).
 */
#include "common/grant.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

bool
grant_principal_valid(const char *s)
{
	return label_valid(s, EGRESS_PRINCIPAL_MAX);   /* never "." or "..": it may be a path */
}

/* A JSON string without embedded NUL (jansson can carry "\u0000" in a string). */
static const char *
json_cstr(const json_t *v)
{
	const char *s;

	if (!json_is_string(v))
		return NULL;
	s = json_string_value(v);
	if (s == NULL || strlen(s) != json_string_length(v))
		return NULL;
	return s;
}

/* Parse an array of pattern strings into a freshly allocated vector. */
static int
parse_patterns(const json_t *arr, const char *key, bool http_only, struct dest_pattern **out,
    size_t *nout, char *err, size_t errlen)
{
	struct dest_pattern *v;
	size_t n, i;

	*out = NULL;
	*nout = 0;
	if (!json_is_array(arr)) {
		errbuf_set(err, errlen, 0, "%s: must be an array of strings", key);
		return -1;
	}
	n = json_array_size(arr);
	if (n > EGRESS_GRANT_ENTRIES_MAX) {
		errbuf_set(err, errlen, 0, "%s: more than %d entries", key, EGRESS_GRANT_ENTRIES_MAX);
		return -1;
	}
	if (n == 0)
		return 0;
	v = calloc(n, sizeof(*v));
	if (v == NULL) {
		errbuf_set(err, errlen, 0, "%s: out of memory", key);
		return -1;
	}
	for (i = 0; i < n; i++) {
		const char *s = json_cstr(json_array_get(arr, i));
		const char *perr = NULL;

		if (s == NULL) {
			errbuf_set(err, errlen, 0, "%s[%zu]: must be a string without NUL", key, i);
			goto fail;
		}
		if (pattern_parse(s, &v[i], &perr) != 0) {
			errbuf_set(err, errlen, 0, "%s[%zu]: %s", key, i, perr);
			goto fail;
		}
		/* Credentials are HTTP headers: binding them to a raw tcp:// origin means
		 * nothing and would only widen what a redirect may carry. */
		if (http_only && v[i].scheme == SCHEME_TCP) {
			errbuf_set(err, errlen, 0, "%s[%zu]: must be an https:// or http:// origin", key, i);
			goto fail;
		}
	}
	*out = v;
	*nout = n;
	return 0;
fail:
	free(v);
	return -1;
}

static int
parse_cidrs(const json_t *arr, struct cidr_set *set, char *err, size_t errlen)
{
	size_t n, i;

	if (!json_is_array(arr)) {
		errbuf_set(err, errlen, 0, "allow_address: must be an array of strings");
		return -1;
	}
	n = json_array_size(arr);
	if (n > EGRESS_GRANT_CIDRS_MAX) {
		errbuf_set(err, errlen, 0, "allow_address: more than %d entries", EGRESS_GRANT_CIDRS_MAX);
		return -1;
	}
	for (i = 0; i < n; i++) {
		const char *s = json_cstr(json_array_get(arr, i));
		const char *cerr = NULL;

		if (s == NULL) {
			errbuf_set(err, errlen, 0, "allow_address[%zu]: must be a string without NUL", i);
			return -1;
		}
		if (cidr_set_add_str(set, s, &cerr) != 0) {
			errbuf_set(err, errlen, 0, "allow_address[%zu]: %s", i,
			    cerr != NULL ? cerr : "invalid or too many entries");
			return -1;
		}
	}
	return 0;
}

/* A JSON integer (not a real, not a boolean) within [min, max]. */
static int
get_int(const json_t *v, const char *key, long long min, long long max, long long *out,
    char *err, size_t errlen)
{
	json_int_t x;

	if (!json_is_integer(v)) {
		errbuf_set(err, errlen, 0, "limits.%s: must be an integer", key);
		return -1;
	}
	x = json_integer_value(v);
	if (x < min || x > max) {
		errbuf_set(err, errlen, 0, "limits.%s: must be from %lld to %lld", key, min, max);
		return -1;
	}
	*out = x;
	return 0;
}

static int
parse_limits(const json_t *obj, struct grant *g, char *err, size_t errlen)
{
	const char *key;
	json_t *v;
	long long x;

	if (!json_is_object(obj)) {
		errbuf_set(err, errlen, 0, "limits: must be an object");
		return -1;
	}
	json_object_foreach((json_t *)(uintptr_t)obj, key, v) {
		if (strcmp(key, "connections") == 0) {
			if (get_int(v, key, 1, EGRESS_GRANT_CONNECTIONS_MAX, &x, err, errlen) != 0)
				return -1;
			g->max_connections = (uint32_t)x;
		} else if (strcmp(key, "bytes") == 0) {
			if (get_int(v, key, 0, INT64_MAX, &x, err, errlen) != 0)
				return -1;
			g->max_bytes = (uint64_t)x;
		} else if (strcmp(key, "lifetime_s") == 0) {
			if (get_int(v, key, 0, EGRESS_GRANT_LIFETIME_MAX_S, &x, err, errlen) != 0)
				return -1;
			g->lifetime_s = (uint32_t)x;
		} else {
			errbuf_set(err, errlen, 0, "limits: unknown key \"%.64s\"", key);
			return -1;
		}
	}
	return 0;
}

struct grant *
grant_from_json(const json_t *obj, char *err, size_t errlen)
{
	struct grant *g;
	const char *key;
	json_t *v;
	bool have_principal = false, have_allow = false;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (!json_is_object(obj)) {
		errbuf_set(err, errlen, 0, "grant: must be a JSON object");
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (g == NULL) {
		errbuf_set(err, errlen, 0, "grant: out of memory");
		return NULL;
	}
	g->pinning = PINNING_PREFERRED;
	g->max_connections = GRANT_DEFAULT_CONNECTIONS;
	g->max_bytes = 0;
	g->lifetime_s = 0;

	/* jansson's foreach takes a non-const object; it does not modify it. */
	json_object_foreach((json_t *)(uintptr_t)obj, key, v) {
		if (strcmp(key, "principal") == 0) {
			const char *s = json_cstr(v);

			if (s == NULL || !grant_principal_valid(s)) {
				errbuf_set(err, errlen, 0, "principal: must be 1-%d characters of "
				    "[A-Za-z0-9._-] (not \".\" or \"..\")", EGRESS_PRINCIPAL_MAX);
				goto fail;
			}
			memcpy(g->principal, s, strlen(s) + 1);
			have_principal = true;
		} else if (strcmp(key, "allow") == 0) {
			if (parse_patterns(v, "allow", false, &g->allow, &g->nallow, err,
			    errlen) != 0)
				goto fail;
			have_allow = true;
		} else if (strcmp(key, "allow_address") == 0) {
			if (parse_cidrs(v, &g->allow_address, err, errlen) != 0)
				goto fail;
		} else if (strcmp(key, "pinning") == 0) {
			const char *s = json_cstr(v);

			if (s != NULL && strcmp(s, "preferred") == 0) {
				g->pinning = PINNING_PREFERRED;
			} else if (s != NULL && strcmp(s, "required") == 0) {
				g->pinning = PINNING_REQUIRED;
			} else {
				errbuf_set(err, errlen, 0, "pinning: must be \"preferred\" or \"required\"");
				goto fail;
			}
		} else if (strcmp(key, "credential_origin") == 0) {
			if (parse_patterns(v, "credential_origin", true, &g->credential_origin,
			    &g->ncredential_origin, err, errlen) != 0)
				goto fail;
		} else if (strcmp(key, "limits") == 0) {
			if (parse_limits(v, g, err, errlen) != 0)
				goto fail;
		} else if (strcmp(key, "connection") == 0) {
			const char *s = json_cstr(v);

			/* a connection name: 1-EGRESS_CONNECTION_NAME_MAX of [A-Za-z0-9._-] */
			if (!label_valid(s, EGRESS_CONNECTION_NAME_MAX)) {
				errbuf_set(err, errlen, 0, "connection: must be a connection name, 1-%d "
				    "characters of [A-Za-z0-9._-]", EGRESS_CONNECTION_NAME_MAX);
				goto fail;
			}
			memcpy(g->connection, s, strlen(s) + 1);
		} else {
			/* Unknown keys are errors: a misspelt restriction must not vanish. */
			errbuf_set(err, errlen, 0, "grant: unknown key \"%.64s\"", key);
			goto fail;
		}
	}
	if (!have_principal) {
		errbuf_set(err, errlen, 0, "principal: missing");
		goto fail;
	}
	if (!have_allow) {
		errbuf_set(err, errlen, 0, "allow: missing");
		goto fail;
	}
	return g;
fail:
	grant_free(g);
	return NULL;
}

static json_t *
patterns_to_json(const struct dest_pattern *v, size_t n)
{
	char buf[EGRESS_DEST_PATTERN_MAX + 1];
	json_t *arr = json_array();
	size_t i;

	if (arr == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		if (pattern_to_str(&v[i], buf, sizeof(buf)) == NULL ||
		    json_array_append_new(arr, json_string(buf)) != 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

json_t *
grant_to_json(const struct grant *g)
{
	char buf[EGRESS_ADDRSTR_MAX + 8];
	json_t *o, *allow, *cidrs, *creds, *limits;
	size_t i;

	if (g == NULL)
		return NULL;
	o = json_object();
	allow = patterns_to_json(g->allow, g->nallow);
	creds = patterns_to_json(g->credential_origin, g->ncredential_origin);
	cidrs = json_array();
	limits = json_pack("{s:I, s:I, s:I}", "connections", (json_int_t)g->max_connections,
	    "bytes", (json_int_t)(g->max_bytes > INT64_MAX ? INT64_MAX : g->max_bytes),
	    "lifetime_s", (json_int_t)g->lifetime_s);
	if (o == NULL || allow == NULL || creds == NULL || cidrs == NULL || limits == NULL)
		goto fail;
	for (i = 0; i < g->allow_address.n; i++) {
		if (cidr_to_str(&g->allow_address.v[i], buf, sizeof(buf)) == NULL ||
		    json_array_append_new(cidrs, json_string(buf)) != 0)
			goto fail;
	}
	if (json_object_set_new(o, "principal", json_string(g->principal)) != 0)
		goto fail;
	if (json_object_set_new(o, "allow", allow) != 0) {
		allow = NULL;
		goto fail;
	}
	allow = NULL;
	if (json_object_set_new(o, "allow_address", cidrs) != 0) {
		cidrs = NULL;
		goto fail;
	}
	cidrs = NULL;
	if (json_object_set_new(o, "pinning", json_string(g->pinning == PINNING_REQUIRED ?
	    "required" : "preferred")) != 0)
		goto fail;
	if (json_object_set_new(o, "credential_origin", creds) != 0) {
		creds = NULL;
		goto fail;
	}
	creds = NULL;
	if (json_object_set_new(o, "limits", limits) != 0) {
		limits = NULL;
		goto fail;
	}
	limits = NULL;
	if (g->connection[0] != '\0' &&
	    json_object_set_new(o, "connection", json_string(g->connection)) != 0)
		goto fail;
	return o;
fail:
	/* json_object_set_new steals its value even on failure, hence the NULLing above. */
	json_decref(o);
	json_decref(allow);
	json_decref(creds);
	json_decref(cidrs);
	json_decref(limits);
	return NULL;
}

void
grant_free(struct grant *g)
{
	if (g == NULL)
		return;
	free(g->allow);
	free(g->credential_origin);
	cidr_set_free(&g->allow_address);
	free(g);
}

bool
grant_allows(const struct grant *g, enum dest_scheme hop_scheme, const struct host *h,
    uint16_t port, size_t *entry)
{
	size_t i;

	if (g == NULL || h == NULL)
		return false;
	/* pattern_match already refuses an IP literal against a name or wildcard entry; the
	 * only way an address is granted is an entry naming that very literal. */
	for (i = 0; i < g->nallow; i++) {
		if (pattern_match(&g->allow[i], hop_scheme, h, port)) {
			if (entry != NULL)
				*entry = i;
			return true;
		}
	}
	return false;
}

bool
grant_expects_tls(const struct grant *g, const struct host *h, uint16_t port)
{
	if (g == NULL || h == NULL)
		return false;
	for (size_t i = 0; i < g->nallow; i++)
		if (g->allow[i].scheme == SCHEME_HTTPS &&
		    pattern_match(&g->allow[i], SCHEME_HTTPS, h, port))
			return true;
	return false;
}

bool
grant_credentials_bound(const struct grant *g, enum dest_scheme scheme, const struct host *h,
    uint16_t port)
{
	size_t i;

	if (g == NULL || h == NULL)
		return false;
	for (i = 0; i < g->ncredential_origin; i++) {
		const struct dest_pattern *p = &g->credential_origin[i];

		/* An origin is scheme, host and port: https credentials never follow to http. */
		if (p->scheme == scheme && pattern_match(p, scheme, h, port))
			return true;
	}
	return false;
}
