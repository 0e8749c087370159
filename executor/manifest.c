/*
 * manifest - build and write manifest.json (see executor/manifest.h, docs/workunit.md).
 */
#include "executor/manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "common/cryptolib.h"   /* after OpenSSL's headers: calls through the table */

#include "common/util.h"

const char *
manifest_status_str(int exit_code)
{
	switch (exit_code) {
	case EXEC_EXIT_OK: return "accepted";
	case EXEC_EXIT_REJECTED: return "rejected";
	case EXEC_EXIT_ADMISSION: return "admission_refused";
	case EXEC_EXIT_CAPABILITY: return "capability_missing";
	case EXEC_EXIT_WORKER: return "worker_failed";
	case EXEC_EXIT_USAGE: return "usage";
	default: break;
	}
	return "internal_error";
}

static json_t *
str_or_null(const char *s)
{
	json_t *j = s ? json_string(s) : NULL;

	/* json_string refuses invalid UTF-8: fall back to null rather than drop the key. */
	return j ? j : json_null();
}

static json_t *
iso_time(uint64_t ms)
{
	char buf[64];
	struct tm tm;
	time_t t = (time_t)(ms / 1000);

	if (ms == 0 || gmtime_r(&t, &tm) == NULL)
		return json_null();
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	{
		size_t l = strlen(buf);
		snprintf(buf + l, sizeof(buf) - l, ".%03uZ", (unsigned)(ms % 1000));
	}
	return json_string(buf);
}

static json_t *
workunit_json(const struct workunit *wu)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char hex[65] = "";

	if (wu == NULL)
		return json_null();
	if (EVP_Digest(wu->objective, strlen(wu->objective), md, &mdlen, EVP_sha256(), NULL) ==
	    1 && mdlen == 32)
		hex_encode(md, 32, hex);
	return json_pack("{s:o, s:o, s:o}", "id", str_or_null(wu->id), "file",
	    str_or_null(wu->file), "objective_sha256", str_or_null(hex[0] ? hex : NULL));
}

static json_t *
preset_json(const struct preset *p)
{
	char hex[65] = "";
	uint64_t size = 0;
	json_t *argv, *o;
	char *real;

	if (p == NULL)
		return json_null();
	argv = json_array();
	for (size_t i = 0; i < p->argv.n; i++)
		json_array_append_new(argv, str_or_null(p->argv.v[i]));
	/* The executable as it is on the host now (the sandbox view exposes the host's
	 * system directories), after symlinks: /bin/sh is usually a link. */
	real = realpath(p->executable, NULL);
	if (real == NULL || artifact_sha256_file(real, hex, &size) != 0)
		hex[0] = '\0';
	o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:s, s:s}", "name", str_or_null(p->name),
	    "executable", str_or_null(p->executable),
	    "executable_resolved", str_or_null(real),
	    "executable_sha256", str_or_null(hex[0] ? hex : NULL), "argv", argv,
	    "prompt_transport", preset_transport_str(p->transport),
	    "network_policy", preset_net_str(p->network));
	free(real);
	return o;
}

static json_t *
result_json(const struct sandbox_result *sr, json_t **usage)
{
	*usage = json_null();
	if (sr == NULL)
		return json_null();
	*usage = json_pack("{s:I, s:I, s:I, s:I, s:I}",
	    "wall_ms", (json_int_t)sr->wall_ms,
	    "cpu_usec", (json_int_t)sr->cpu_usec,
	    "peak_memory_bytes", (json_int_t)sr->peak_memory_bytes,
	    "oom_kills", (json_int_t)sr->oom_kills,
	    "peak_pids", (json_int_t)sr->peak_pids);
	return json_pack("{s:b, s:i, s:i, s:b, s:b, s:s, s:o}",
	    "started", sr->started, "exit_code", sr->exit_code, "signal", sr->term_signal,
	    "timed_out", sr->timed_out, "oom_killed", sr->oom_killed,
	    "reason", reason_str(sr->reason), "message", str_or_null(sr->message));
}

json_t *
manifest_build(const struct manifest_input *in)
{
	json_t *m = json_object(), *arts = json_array(), *usage = NULL, *grant, *limits;
	const struct sandbox_result *sr = in->sr;

	if (m == NULL || arts == NULL) {
		json_decref(m);
		json_decref(arts);
		return NULL;
	}
	json_object_set_new(m, "schema_version", json_integer(MANIFEST_SCHEMA_VERSION));
	json_object_set_new(m, "run_id", str_or_null(in->run_id));
	json_object_set_new(m, "started", iso_time(in->started_ms));
	json_object_set_new(m, "finished", iso_time(in->finished_ms));
	json_object_set_new(m, "outcome", json_pack("{s:s, s:i, s:s, s:o}",
	    "status", manifest_status_str(in->exit_code), "exit_code", in->exit_code,
	    "reason", reason_str(in->reason), "message", str_or_null(in->message)));
	json_object_set_new(m, "workunit", workunit_json(in->wu));
	json_object_set_new(m, "preset", preset_json(in->preset));
	json_object_set_new(m, "base_commit", in->cs ? str_or_null(in->cs->base_commit) :
	    json_null());
	json_object_set_new(m, "admission", in->adm ? admission_to_json(in->adm) :
	    json_null());
	json_object_set_new(m, "attestation", sr && sr->attestation ?
	    json_incref(sr->attestation) : json_null());

	if (in->adm != NULL && in->adm->admitted) {
		json_t *al = json_array();
		for (size_t i = 0; i < in->adm->grant.n; i++)
			json_array_append_new(al, str_or_null(in->adm->grant.v[i]));
		grant = json_pack("{s:o, s:o, s:b}", "id", sr && sr->grant_id[0] ?
		    json_string(sr->grant_id) : json_null(), "allowlist", al, "transparent",
		    sr != NULL && sr->transparent);
	} else {
		grant = json_null();
	}
	json_object_set_new(m, "grant", grant);

	limits = json_object();
	if (in->adm != NULL && in->adm->admitted) {
		json_t *aj = admission_to_json(in->adm);
		json_t *l = aj ? json_object_get(aj, "limits") : NULL;
		json_object_set(limits, "requested", l ? l : json_null());
		json_decref(aj);
	} else {
		json_object_set_new(limits, "requested", json_null());
	}
	json_object_set_new(limits, "applied", sr && sr->limits_applied ?
	    json_incref(sr->limits_applied) : json_null());
	json_object_set_new(m, "limits", limits);

	json_object_set_new(m, "exit", result_json(sr, &usage));
	json_object_set_new(m, "usage", usage);
	json_object_set_new(m, "changed_paths", in->cs ? changes_to_json(in->cs) :
	    json_null());
	json_object_set_new(m, "scope", in->scope ? scope_to_json(in->scope) : json_null());
	{
		/* What the candidate leaves out, said where a reviewer looks. */
		json_t *w = json_array();
		char line[1024];
		if (in->cs != NULL && changes_ignored_summary(in->cs, line, sizeof(line)) > 0)
			json_array_append_new(w, json_string(line));
		json_object_set_new(m, "warnings", w);
	}
	for (size_t i = 0; i < in->nartifacts; i++)
		json_array_append_new(arts, artifact_to_json(&in->artifacts[i]));
	json_object_set_new(m, "artifacts", arts);
	json_object_set_new(m, "versions", json_pack("{s:s, s:o}", "egress_exec",
	    EGRESS_VERSION, "egressd", str_or_null(in->egressd_version)));
	return m;
}

int
manifest_write(const char *out_dir, const struct manifest_input *in, char *err,
    size_t errlen)
{
	json_t *m = manifest_build(in);
	struct artifact a;
	char *s;
	int rc;

	if (m == NULL) {
		snprintf(err, errlen, "manifest: out of memory");
		return -1;
	}
	s = json_dumps(m, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(m);
	if (s == NULL) {
		snprintf(err, errlen, "manifest: out of memory");
		return -1;
	}
	{
		size_t l = strlen(s);
		char *s2 = realloc(s, l + 2);
		if (s2 == NULL) {
			free(s);
			snprintf(err, errlen, "manifest: out of memory");
			return -1;
		}
		s = s2;
		s[l] = '\n';
		s[l + 1] = '\0';
	}
	rc = artifact_write(out_dir, "manifest.json", s, strlen(s), &a, err, errlen);
	free(s);
	return rc;
}
