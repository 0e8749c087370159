/*
 * orchestrate - one WorkUnit run end to end (see executor/orchestrate.h).
 *
 * The order, and why:
 *   1. load WorkUnit + AgentPreset, admission       nothing runs unless admitted
 *   2. environment from the preset allowlist         env_build: credentials never pass
 *   3. sandbox_run                                   the worker, confined; gone on return
 *   4. changed set (libgit2 + upper layer)           after the worker is gone, never before
 *   5. scope check                                   any violation rejects the whole candidate
 *   6. artifacts: logs, decisions, candidate.diff    the diff only for an accepted candidate
 *   7. manifest.json                                 in every case where out_dir is usable
 * Nothing the worker produced is trusted, and none of it is parsed by this (root) process:
 * it writes the evidence (the worker's output copied from memory, this run's records from
 * the decision log, which egressd wrote), then steps 4-7 and the summary run in the
 * collector (executor/collector.h), a forked child with no root, no network, a root of
 * its own holding only the repository and the overlay views (read-only) and the output
 * folder, and a seccomp filter. The parent asks a running egressd for its log path first
 * (a root-only socket), waits for the collector with a bound, accepts only an egress-exec
 * exit code from it, writes a minimal manifest itself when the collector failed
 * (collector_failed), and then releases the mounts. There is no message channel to parse:
 * the verdict is the exit code.
 */
#define _GNU_SOURCE
#include "executor/orchestrate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "common/cryptolib.h"   /* after OpenSSL's headers: calls through the table */

#include "common/limits.h"
#include "common/log.h"
#include "common/pathglob.h"
#include "common/util.h"
#include "executor/admission.h"
#include "executor/artifacts.h"
#include "executor/changes.h"
#include "executor/collector.h"
#include "executor/egressd_client.h"
#include "executor/env.h"
#include "executor/manifest.h"
#include "executor/opaque.h"
#include "executor/preset.h"
#include "executor/repocheck.h"
#include "executor/sandbox.h"
#include "executor/scope.h"
#include "executor/workunit.h"

#define ORCH_ARTIFACTS_MAX 4

struct orch {
	const struct orchestrate_opts *o;
	char run_id[40];
	char repo[EGRESS_PATH_MAX];
	char out[EGRESS_PATH_MAX];       /* the output folder, absolute and canonical */
	char run_dir[64];
	bool run_dir_made;
	struct workunit *wu;
	struct preset *p;
	struct admission adm;
	bool adm_done;
	struct sandbox_result sr;
	bool sr_valid;
	struct changeset cs;
	bool cs_valid;
	struct scope_verdict scope;
	bool scope_valid;
	struct artifact arts[ORCH_ARTIFACTS_MAX];
	size_t narts;
	char **envp;
	char egressd_version[64];
	char ext_log[EGRESS_PATH_MAX];   /* decision log of an external egressd (status) */
	bool collected;                  /* the collector wrote the manifest and summary */
	uint64_t collect_ms;             /* the collector's wall time, fork to reap */
	int exit_code;
	enum reason reason;
	char message[640];
	uint64_t started_ms;
};

static uint64_t
wall_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

__attribute__((format(printf, 4, 5)))
static int
orch_set(struct orch *r, int code, enum reason why, const char *fmt, ...)
{
	va_list ap;

	r->exit_code = code;
	r->reason = why;
	va_start(ap, fmt);
	vsnprintf(r->message, sizeof(r->message), fmt, ap);
	va_end(ap);
	return code;
}

/* The run folder holds only what the sandbox puts there; remove those names. */
static void
run_dir_remove(const char *dir)
{
	static const char *const names[] = { "egressd.ini", "egressd.ini.state", "egressd.sock",
		"egressd.log", "decisions.jsonl", "root", "layer", "merged", NULL };
	char p[EGRESS_PATH_MAX];

	for (size_t i = 0; names[i]; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		if (unlink(p) < 0 && (errno == EISDIR || errno == EPERM))
			rmdir(p);
	}
	if (rmdir(dir) < 0 && errno != ENOENT)
		log_warn("rmdir %s", dir);
}

static void
print_decisions(const char *out_dir)
{
	char p[EGRESS_PATH_MAX];
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	unsigned shown = 0;

	if (snprintf(p, sizeof(p), "%s/decisions.jsonl", out_dir) >= (int)sizeof(p))
		return;
	f = fopen(p, "re");
	if (f == NULL)
		return;
	while ((n = getline(&line, &cap, f)) > 0 && shown < 20) {
		json_t *o = json_loadb(line, (size_t)n, 0, NULL);
		const char *reason = json_string_value(json_object_get(o, "reason"));
		const char *what = NULL;
		static const char *const keys[] = { "target", "authority", "host", "dest",
			"destination", "url" };
		for (size_t i = 0; i < EGRESS_NELEM(keys) && what == NULL; i++)
			what = json_string_value(json_object_get(o, keys[i]));
		/* Decisions name a destination; close records (no target) are left out here. */
		if (reason != NULL && what != NULL) {
			fprintf(stderr, "  decision: %-14s %s\n", reason, what);
			shown++;
		}
		json_decref(o);
	}
	free(line);
	fclose(f);
}

/* read_outputs: also list decisions from the output folder (the collector only; the
 * privileged parent never reads what a run put there). */
static void
print_summary(const struct orch *r, bool read_outputs)
{
	char line[1024];

	fprintf(stderr, "egress-exec: run %s: WorkUnit %s, preset %s\n", r->run_id,
	    r->wu ? r->wu->id : "?", r->p ? r->p->name : "?");
	if (r->adm_done) {
		admission_summary(&r->adm, line, sizeof(line));
		fprintf(stderr, "  %s\n", line);
		for (size_t i = 1; i < r->adm.nrefusals; i++)
			fprintf(stderr, "    also: %s: %s\n", reason_str(r->adm.refusals[i].reason),
			    r->adm.refusals[i].detail);
	}
	if (r->sr_valid && r->sr.attestation != NULL) {
		const char *k;
		json_t *v;
		size_t ok = 0, all = 0;
		json_object_foreach(r->sr.attestation, k, v) {
			all++;
			if (json_is_true(json_object_get(v, "attested")))
				ok++;
		}
		fprintf(stderr, "  attestation: %zu/%zu capabilities attested\n", ok, all);
	}
	if (r->sr_valid && r->sr.started)
		fprintf(stderr, "  worker: exit %d%s%s%s, wall %llu ms\n", r->sr.exit_code,
		    r->sr.term_signal ? ", killed by a signal" : "",
		    r->sr.timed_out ? ", timed out" : "", r->sr.oom_killed ? ", OOM" : "",
		    (unsigned long long)r->sr.wall_ms);
	if (r->sr_valid && r->sr.started && read_outputs)
		print_decisions(r->out);
	if (r->scope_valid) {
		scope_summary(&r->scope, line, sizeof(line));
		fprintf(stderr, "  %s (%zu changed path%s)\n", line, r->cs.n,
		    r->cs.n == 1 ? "" : "s");
	}
	if (r->cs_valid && changes_ignored_summary(&r->cs, line, sizeof(line)) > 0)
		fprintf(stderr, "  warning: %s\n", line);
	for (size_t i = 0; i < r->narts; i++)
		if (strcmp(r->arts[i].name, "candidate.diff") == 0)
			fprintf(stderr, "  diff: %s/candidate.diff (%llu bytes)\n", r->out,
			    (unsigned long long)r->arts[i].size);
	fprintf(stderr, "  outcome: %s (%s)%s%s\n", manifest_status_str(r->exit_code),
	    reason_str(r->reason), r->message[0] ? ": " : "", r->message);
	fprintf(stderr, "  manifest: %s/manifest.json\n", r->out);
}

static int
write_manifest(struct orch *r)
{
	struct manifest_input in;
	char err[512];

	memset(&in, 0, sizeof(in));
	in.run_id = r->run_id;
	in.wu = r->wu;
	in.preset = r->p;
	in.adm = r->adm_done ? &r->adm : NULL;
	in.sr = r->sr_valid ? &r->sr : NULL;
	in.cs = r->cs_valid ? &r->cs : NULL;
	in.scope = r->scope_valid ? &r->scope : NULL;
	in.artifacts = r->arts;
	in.nartifacts = r->narts;
	in.exit_code = r->exit_code;
	in.reason = r->reason;
	in.message = r->message[0] ? r->message : NULL;
	/* The embedded egressd is this build; an external one reports nothing here. */
	if (r->egressd_version[0])
		in.egressd_version = r->egressd_version;
	else
		in.egressd_version = r->sr_valid && r->adm.net == SANDBOX_NET_ALLOWLIST &&
		    r->o->egressd_control == NULL ? EGRESS_VERSION : NULL;
	in.started_ms = r->started_ms;
	in.finished_ms = wall_ms();
	if (manifest_write(r->out, &in, err, sizeof(err)) != 0) {
		log_warnx("manifest: %s", err);
		return -1;
	}
	return 0;
}

/* NULL-terminated copy of the forbidden entries: the sandbox masks every existing path
 * they name (a glob: every entry it matches, executor/mounts.c); what the worker creates
 * under them is the scope check's to refuse afterwards. */
static const char **
forbidden_copy(const struct strlist *l)
{
	const char **v = calloc(l->n + 1, sizeof(*v));

	if (v == NULL)
		return NULL;
	for (size_t i = 0; i < l->n; i++)
		v[i] = l->v[i];
	return v;
}

static int
run_sandbox(struct orch *r)
{
	const struct orchestrate_opts *o = r->o;
	struct sandbox_spec spec;
	struct env_opts eo = { 0 };
	struct stat st;
	const char **argv = NULL, **forbid = NULL, **settings = NULL;
	char *conn_setting = NULL;
	char msg[256];
	enum reason why;
	uid_t uid;
	gid_t gid;
	int rc;

	if (env_build((const char *const *)r->p->env_allowlist.v, o->caller_env, &eo, &r->envp,
	    &why, msg, sizeof(msg)) != 0)
		return orch_set(r, why == REASON_INTERNAL_ERROR ? EXEC_EXIT_INTERNAL :
		    EXEC_EXIT_ADMISSION, why, "environment: %s", msg);

	if (stat(r->repo, &st) != 0)
		return orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "repository %s: %s",
		    r->repo, strerror(errno));
	/* overlayfs copy-up keeps the lower owner: the worker runs as the repository owner;
	 * never as root: a root-owned repository gets a dedicated uid, and the sandbox idmaps
	 * the lower layer to it (the same choice as `egress-exec run`, docs/sandbox.md). */
	if (st.st_uid != 0) {
		uid = st.st_uid;
		gid = st.st_gid != 0 ? st.st_gid : st.st_uid;
	} else {
		uid = gid = SANDBOX_WORKER_UID;
	}

	/* argv: the preset's fixed list, or just the executable. */
	argv = calloc(r->p->argv.n + 2, sizeof(*argv));
	forbid = forbidden_copy(&r->wu->forbidden_paths);
	if (argv == NULL || forbid == NULL) {
		free(argv);
		free(forbid);
		return orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "out of memory");
	}
	if (r->p->argv.n == 0)
		argv[0] = r->p->executable;
	for (size_t i = 0; i < r->p->argv.n; i++)
		argv[i] = r->p->argv.v[i];

	mkdir("/run/egress-exec", 0700);
	snprintf(r->run_dir, sizeof(r->run_dir), "/run/egress-exec/wu-XXXXXX");
	if (mkdtemp(r->run_dir) == NULL) {
		free(argv);
		free(forbid);
		return orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "mkdtemp %s: %s",
		    r->run_dir, strerror(errno));
	}
	r->run_dir_made = true;

	memset(&spec, 0, sizeof(spec));
	spec.executable = r->p->executable;
	spec.argv = argv;
	spec.ro_binds = r->p->ro_binds.n ? (const char *const *)r->p->ro_binds.v : NULL;
	spec.java_proxy = r->p->java_proxy;
	/* Either the preset or the operator may turn capture off; neither alone turns it on
	 * against the other. */
	spec.no_transparent = r->p->no_transparent || o->no_transparent;
	spec.prompt_transport = r->adm.transport;
	spec.prompt = r->wu->objective;
	spec.prompt_flag = r->p->prompt_flag;
	spec.envp = (const char *const *)r->envp;
	spec.repo_dir = r->repo;
	spec.workdir = "/work";
	spec.forbidden_paths = forbid[0] ? forbid : NULL;
	spec.net = r->adm.net;
	spec.allowlist = r->adm.net == SANDBOX_NET_ALLOWLIST ?
	    (const char *const *)r->adm.grant.v : NULL;
	spec.egressd_control = o->egressd_control;
	spec.principal = r->run_id;
	spec.uid = uid;
	spec.gid = gid;
	spec.limits = r->adm.limits;
	spec.run_dir = r->run_dir;
	spec.net_pool = o->net_pool;
	spec.egressd_settings = o->egressd_settings;
	/* A model connection with a credential: the grant names it (egressd holds the
	 * credential, docs/model-connections.md); a private egressd reads the same file. */
	if (r->p->network == PN_MODEL_ONLY && r->p->model_connection != NULL &&
	    o->trusted_models != NULL) {
		bool bound = false;
		char terr[512];

		if (trusted_models_bound(o->trusted_models, r->p->model_connection, &bound, terr,
		    sizeof(terr)) != 0) {
			free(argv);
			free(forbid);
			return orch_set(r, EXEC_EXIT_ADMISSION, REASON_ADM_INVALID_FILE, "%s", terr);
		}
		if (bound) {
			size_t n = 0;
			spec.connection = r->p->model_connection;
			spec.placeholder_env = r->p->placeholder_env;
			while (o->egressd_settings != NULL && o->egressd_settings[n] != NULL)
				n++;
			settings = calloc(n + 2, sizeof(*settings));
			if (settings == NULL || asprintf(&conn_setting, "connections=%s",
			    o->trusted_models) < 0) {
				conn_setting = NULL;
				free(settings);
				free(argv);
				free(forbid);
				return orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR,
				    "out of memory");
			}
			for (size_t i = 0; i < n; i++)
				settings[i] = o->egressd_settings[i];
			settings[n] = conn_setting;
			spec.egressd_settings = settings;
		}
	}

	memset(&r->sr, 0, sizeof(r->sr));
	rc = sandbox_run(&spec, &r->sr);
	r->sr_valid = true;
	free(argv);
	free(forbid);
	free(settings);
	free(conn_setting);
	if (rc != 0) {
		int code = r->sr.reason == REASON_CAPABILITY_MISSING ? EXEC_EXIT_CAPABILITY :
		    EXEC_EXIT_INTERNAL;
		return orch_set(r, code, r->sr.reason, "sandbox: %s", r->sr.message);
	}
	return EXEC_EXIT_OK;
}

/* With a running egressd, ask it (status) for its version and decision-log path, so the
 * run's records can be copied. Best effort: without them decisions.jsonl stays empty and
 * the manifest says the egressd version is unknown. */
static void
external_egressd_info(struct orch *r)
{
	json_t *st = NULL;
	char err[256];
	const char *v, *lp;

	if (r->o->egressd_control == NULL || r->adm.net != SANDBOX_NET_ALLOWLIST)
		return;
	if (egressd_status(r->o->egressd_control, &st, err, sizeof(err)) != 0) {
		log_warnx("egressd status: %s", err);
		return;
	}
	v = json_string_value(json_object_get(st, "version"));
	lp = json_string_value(json_object_get(json_object_get(st, "log"), "path"));
	if (v != NULL)
		snprintf(r->egressd_version, sizeof(r->egressd_version), "%s", v);
	if (lp != NULL && lp[0] == '/')
		snprintf(r->ext_log, sizeof(r->ext_log), "%s", lp);
	json_decref(st);
}

/*
 * The evidence, whatever the verdict: the worker's output (copied from memory, never
 * parsed) and this run's records from the decision log. In the privileged parent, before
 * the collector: the decision log of an external egressd holds every principal's records,
 * and the collector must see none but this run's.
 */
static void
write_evidence(struct orch *r)
{
	char err[512];

	if (artifacts_write_log(r->out, "stdout.log", r->sr.out, r->sr.out_len,
	    r->sr.out_truncated, &r->arts[r->narts], err, sizeof(err)) == 0)
		r->narts++;
	else
		log_warnx("%s", err);
	if (artifacts_write_log(r->out, "stderr.log", r->sr.err, r->sr.err_len,
	    r->sr.err_truncated, &r->arts[r->narts], err, sizeof(err)) == 0)
		r->narts++;
	else
		log_warnx("%s", err);
	if (artifacts_write_decisions(r->out, r->sr.decisions_path[0] ?
	    r->sr.decisions_path : r->ext_log, r->run_id,
	    r->sr.grant_id, &r->arts[r->narts], err, sizeof(err)) == 0)
		r->narts++;
	else
		log_warnx("%s", err);
}

/* After the worker: changed set, scope, artifacts. Sets the outcome. In the collector. */
static void
collect(struct orch *r)
{
	char err[512];
	bool worker_ok;
	int crc, orc;
	bool unsafe;

	/* The worker's outcome as sandbox_run classified it (once, for every caller). */
	if (r->sr.reason != REASON_ALLOWED)
		orch_set(r, sandbox_exit_code(r->sr.reason), r->sr.reason, "%s", r->sr.message);
	worker_ok = r->exit_code == EXEC_EXIT_OK;

	/* The changed set is computed (and reported) even for a failed worker. */
	if (r->sr.merged_dir[0] == '\0' || r->sr.upper_dir[0] == '\0') {
		orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "the sandbox kept no "
		    "overlay to compute the changed set from");
		return;
	}
	crc = changes_compute(r->repo, r->sr.merged_dir, r->sr.upper_dir, &r->cs, err,
	    sizeof(err));
	unsafe = crc == CHANGES_UNSAFE || crc == CHANGES_UNSAFE_GIT;
	if (crc != 0 && !unsafe) {
		/* Too many changes to judge is the worker's doing: a rejected candidate. */
		if (worker_ok && crc == CHANGES_TOO_MANY)
			orch_set(r, EXEC_EXIT_REJECTED, REASON_ARTIFACT_TOO_LARGE, "changed set: %s; "
			    "the candidate is rejected whole", err);
		else if (worker_ok)
			orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "changed set: %s", err);
		return;
	}
	if ((orc = opaque_add(r->repo, r->sr.merged_dir, r->sr.upper_dir, &r->cs, err,
	    sizeof(err))) != 0) {
		changes_free(&r->cs);
		if (worker_ok && orc == CHANGES_TOO_MANY)
			orch_set(r, EXEC_EXIT_REJECTED, REASON_ARTIFACT_TOO_LARGE, "changed set: %s; "
			    "the candidate is rejected whole", err);
		else if (worker_ok)
			orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "changed set: %s", err);
		return;
	}
	r->cs_valid = true;
	if (scope_check(&r->cs, &r->wu->allowed_paths, &r->wu->forbidden_paths,
	    &r->scope) != 0) {
		orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "scope check: out of memory");
		return;
	}
	r->scope_valid = true;
	if (!worker_ok)
		return;
	if (!r->scope.accepted) {
		char disp[256];
		changes_path_display(r->scope.v[0].path, disp, sizeof(disp));
		orch_set(r, EXEC_EXIT_REJECTED, r->scope.v[0].reason, "%zu path%s out of scope, "
		    "first %s (%s)", r->scope.n, r->scope.n == 1 ? "" : "s", disp,
		    reason_str(r->scope.v[0].reason));
		return;
	}
	if (unsafe) {
		/* in scope, but nothing git may read: no diff can be made of it */
		orch_set(r, EXEC_EXIT_REJECTED, crc == CHANGES_UNSAFE_GIT ? REASON_SCOPE_GIT_DIR :
		    REASON_SCOPE_INVALID_PATH, "changed set: %s; the candidate is rejected whole",
		    err);
		return;
	}
	{
		uint64_t needed = 0;
		enum diff_outcome d = artifacts_write_diff(r->out, r->repo, r->sr.merged_dir,
		    r->adm.diff_bytes, &r->arts[r->narts], &needed, err, sizeof(err));
		switch (d) {
		case DIFF_WRITTEN:
			r->narts++;
			orch_set(r, EXEC_EXIT_OK, REASON_ALLOWED, "%s", "");
			break;
		case DIFF_TOO_LARGE:
			orch_set(r, EXEC_EXIT_REJECTED, REASON_DIFF_TOO_LARGE, "candidate.diff "
			    "needs more than %llu bytes (bound %llu; %s); the candidate is rejected "
			    "whole", (unsigned long long)needed,
			    (unsigned long long)r->adm.diff_bytes, err);
			break;
		case DIFF_ERROR:
			orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "candidate.diff: %s",
			    err);
			break;
		}
	}
}

/* The collector's body (executor/collector.h): everything that reads what the worker
 * produced, unprivileged. Returns the run's exit code, which is all the parent learns. */
static int
collector_body(void *arg)
{
	struct orch *r = arg;
	static const int levels[] = { GIT_CONFIG_LEVEL_SYSTEM, GIT_CONFIG_LEVEL_XDG,
		GIT_CONFIG_LEVEL_GLOBAL, GIT_CONFIG_LEVEL_PROGRAMDATA };

	/* The host's /etc/gitconfig and root's ~/.gitconfig are not in the collector's root:
	 * tell libgit2 so it does not look (the diff depends on the repository alone). */
	git_libgit2_init();
	for (size_t i = 0; i < EGRESS_NELEM(levels); i++)
		git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, levels[i], "");
	collect(r);
	if (write_manifest(r) != 0 && r->exit_code == EXEC_EXIT_OK)
		orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "manifest.json could not "
		    "be written");
	print_summary(r, true);
	return r->exit_code;
}

/* The first line of a small host file, without its newline; -1 when unreadable. */
static int
read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	bool ok;

	if (f == NULL)
		return -1;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (!ok)
		return -1;
	buf[strcspn(buf, "\r\n")] = '\0';
	return 0;
}

/* realpath of rel (relative to base unless absolute) into out when it is a directory. */
static bool
dir_at(const char *base, const char *rel, char *out, size_t outlen)
{
	char p[EGRESS_PATH_MAX * 2];
	char *real;
	struct stat st;
	bool ok;

	if (rel[0] == '/')
		snprintf(p, sizeof(p), "%s", rel);
	else
		snprintf(p, sizeof(p), "%s/%s", base, rel);
	real = realpath(p, NULL);
	ok = real != NULL && strlen(real) < outlen && stat(real, &st) == 0 &&
	    S_ISDIR(st.st_mode);
	if (ok)
		snprintf(out, outlen, "%s", real);
	free(real);
	return ok;
}

/*
 * A linked worktree's .git is a file naming its git dir elsewhere ("gitdir: PATH"), and
 * that dir names the common one ("commondir"). libgit2 needs both; the collector's root
 * holds only what is bound, so find them here. These are the host repository's own files
 * as the caller left them, never the worker's (its writes go to the upper layer), and
 * only two short path lines are read.
 */
static void
worktree_gitdirs(const char *repo, char gitdir[EGRESS_PATH_MAX], char common[EGRESS_PATH_MAX])
{
	char p[EGRESS_PATH_MAX + 16], line[EGRESS_PATH_MAX];
	struct stat st;

	gitdir[0] = common[0] = '\0';
	snprintf(p, sizeof(p), "%s/.git", repo);
	if (lstat(p, &st) != 0 || !S_ISREG(st.st_mode) || read_line(p, line, sizeof(line)) != 0 ||
	    strncmp(line, "gitdir: ", 8) != 0 || !dir_at(repo, line + 8, gitdir, EGRESS_PATH_MAX))
		return;
	snprintf(p, sizeof(p), "%s/commondir", gitdir);
	if (read_line(p, line, sizeof(line)) == 0 &&
	    !dir_at(gitdir, line, common, EGRESS_PATH_MAX))
		common[0] = '\0';
}

#define ORCH_ALTERNATES_MAX 4

/*
 * Object directories named by objects/info/alternates (git clone --shared, --reference),
 * followed through their own alternates files, at most ORCH_ALTERNATES_MAX in all: without
 * them libgit2 cannot read HEAD in the collector's root. Host repository files again,
 * read line by line; relative entries are relative to the objects directory naming them.
 * Returns the count, or -1 when there are more than the bound.
 */
static int
alternates(const char *gitcommon, char out[ORCH_ALTERNATES_MAX][EGRESS_PATH_MAX])
{
	char objs[ORCH_ALTERNATES_MAX + 1][EGRESS_PATH_MAX];
	size_t nobjs = 1, n = 0;

	if (snprintf(objs[0], sizeof(objs[0]), "%s/objects", gitcommon) >= (int)sizeof(objs[0]))
		return 0;
	for (size_t i = 0; i < nobjs; i++) {
		char p[EGRESS_PATH_MAX + 32], line[EGRESS_PATH_MAX];
		FILE *f;

		snprintf(p, sizeof(p), "%s/info/alternates", objs[i]);
		if ((f = fopen(p, "re")) == NULL)
			continue;
		while (fgets(line, sizeof(line), f) != NULL) {
			line[strcspn(line, "\r\n")] = '\0';
			if (line[0] == '\0' || line[0] == '#')
				continue;
			if (n == ORCH_ALTERNATES_MAX) {
				fclose(f);
				return -1;
			}
			if (!dir_at(objs[i], line, out[n], EGRESS_PATH_MAX))
				continue;   /* missing: libgit2 would not find it as root either */
			snprintf(objs[nobjs++], sizeof(objs[0]), "%s", out[n]);
			n++;
		}
		fclose(f);
	}
	return (int)n;
}

/* Steps 4-7 in the collector. On return either r->collected (the collector wrote the
 * manifest and printed the summary; r->exit_code is its verdict) or the outcome is
 * internal_error/collector_failed and the caller writes the manifest. */
static void
run_collector(struct orch *r)
{
	struct collector_spec cs;
	struct collector_result res;
	char stage[EGRESS_PATH_MAX], mpath[EGRESS_PATH_MAX];
	char gitdir[EGRESS_PATH_MAX], common[EGRESS_PATH_MAX], gc[EGRESS_PATH_MAX + 8];
	char alt[ORCH_ALTERNATES_MAX][EGRESS_PATH_MAX];
	int nalt;
	struct stat st;
	char *exe_real;
	size_t k = 0;
	int rc;

	memset(&cs, 0, sizeof(cs));
	cs.ro_paths[k++] = r->repo;
	worktree_gitdirs(r->repo, gitdir, common);
	if (gitdir[0])
		cs.ro_paths[k++] = gitdir;
	if (common[0])
		cs.ro_paths[k++] = common;
	snprintf(gc, sizeof(gc), "%s", common[0] ? common : gitdir);
	if (gc[0] == '\0')
		snprintf(gc, sizeof(gc), "%s/.git", r->repo);
	if ((nalt = alternates(gc, alt)) < 0) {
		orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "the repository names "
		    "more than %d alternate object directories", ORCH_ALTERNATES_MAX);
		return;
	}
	for (int i = 0; i < nalt; i++)
		cs.ro_paths[k++] = alt[i];
	if (r->sr.merged_dir[0] == '/')
		cs.ro_paths[k++] = r->sr.merged_dir;
	if (r->sr.upper_dir[0] == '/')
		cs.ro_paths[k++] = r->sr.upper_dir;
	/* The preset's executable (a host file the maintainer named; the manifest records its
	 * hash), as the host resolves it: /bin/sh is usually a link. */
	exe_real = realpath(r->p->executable, NULL);
	if (exe_real != NULL && stat(exe_real, &st) == 0 && S_ISREG(st.st_mode)) {
		cs.ro_paths[k++] = exe_real;
		if (strcmp(exe_real, r->p->executable) != 0) {
			cs.links[0].path = r->p->executable;
			cs.links[0].target = exe_real;
		}
	}
	/* The stage is the run folder's "root" (the sandbox's, gone by now): `egress-exec
	 * cleanup` knows the name. The tmpfs lives only in the collector's namespace. */
	snprintf(stage, sizeof(stage), "%s/root", r->run_dir);
	if (mkdir(stage, 0700) != 0 && errno != EEXIST) {
		orch_set(r, EXEC_EXIT_INTERNAL, REASON_COLLECTOR_FAILED, "collector stage %s: %s",
		    stage, strerror(errno));
		free(exe_real);
		return;
	}
	/* A manifest left from an earlier run must not pass for this run's. */
	if (snprintf(mpath, sizeof(mpath), "%s/manifest.json", r->out) >= (int)sizeof(mpath)) {
		orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "output folder path too "
		    "long");
		free(exe_real);
		return;
	}
	if (unlink(mpath) != 0 && errno != ENOENT) {
		orch_set(r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "cannot remove the old "
		    "%s: %s", mpath, strerror(errno));
		free(exe_real);
		return;
	}
	write_evidence(r);
	/* libgit2 is loaded now, by this process, before the collector's fork: the collector's
	 * root holds no libraries to load it from (executor/gitlib.h). */
	{
		char gerr[256];

		if (gitlib_load(gerr, sizeof(gerr)) != 0) {
			orch_set(r, EXEC_EXIT_INTERNAL, REASON_COLLECTOR_FAILED, "libgit2: %s",
			    gerr);
			free(exe_real);
			return;
		}
	}
	cs.rw_dir = r->out;
	cs.stage_dir = stage;
	cs.fn = collector_body;
	cs.arg = r;
	rc = collector_run(&cs, &res);
	free(exe_real);
	/* A candidate stands only beside an accepted verdict: a collector that failed, was
	 * killed after writing candidate.diff, or ended on anything but success leaves none
	 * (removing a name; the parent never opens what the collector wrote). */
	if (rc != 0 || res.exit_code != EXEC_EXIT_OK) {
		char dpath[EGRESS_PATH_MAX + 32];
		snprintf(dpath, sizeof(dpath), "%s/candidate.diff", r->out);
		if (unlink(dpath) != 0 && errno != ENOENT)
			log_warn("remove %s", dpath);
	}
	if (rc != 0) {
		r->collect_ms = res.wall_ms;
		orch_set(r, EXEC_EXIT_INTERNAL, REASON_COLLECTOR_FAILED, "%s", res.message);
		return;
	}
	r->collect_ms = res.wall_ms;
	r->exit_code = res.exit_code;
	/* lstat only: the parent never opens what the collector wrote. */
	if (lstat(mpath, &st) != 0 || !S_ISREG(st.st_mode)) {
		char dpath[EGRESS_PATH_MAX + 32];
		snprintf(dpath, sizeof(dpath), "%s/candidate.diff", r->out);
		unlink(dpath);
		orch_set(r, EXEC_EXIT_INTERNAL, REASON_COLLECTOR_FAILED, "the collector exited "
		    "with %d but left no manifest.json", res.exit_code);
		return;
	}
	r->collected = true;
	/* After the collector's summary: the time it took (changed set, scope, diff,
	 * manifest), for the person waiting and for bench/collector.sh. */
	fprintf(stderr, "  collector: %llu ms\n", (unsigned long long)r->collect_ms);
}

static void
orch_free(struct orch *r)
{
	if (r->sr_valid) {
		sandbox_release_upper(&r->sr);
		sandbox_result_free(&r->sr);
	}
	if (r->run_dir_made)
		run_dir_remove(r->run_dir);
	scope_verdict_free(&r->scope);
	changes_free(&r->cs);
	admission_free(&r->adm);
	workunit_free(r->wu);
	preset_free(r->p);
	env_free(r->envp);
}

int
orchestrate_run(const struct orchestrate_opts *o)
{
	struct orch r;
	unsigned char rnd[8];
	char hex[17];
	char *real;
	char err[EGRESS_PATH_MAX + 256];
	int code;

	memset(&r, 0, sizeof(r));
	r.o = o;
	r.started_ms = wall_ms();
	r.exit_code = EXEC_EXIT_INTERNAL;
	r.reason = REASON_INTERNAL_ERROR;

	if (o->workunit_path == NULL || o->preset_path == NULL || o->repo_dir == NULL ||
	    o->out_dir == NULL) {
		log_warnx("orchestrate: workunit, preset, repository and output folder are "
		    "required");
		return EXEC_EXIT_USAGE;
	}
	/* Empty, new, or holding only a previous run's artifacts (removed now): see
	 * artifacts_prepare_out. */
	if (artifacts_prepare_out(o->out_dir, err, sizeof(err)) != 0) {
		log_warnx("%s", err);
		return EXEC_EXIT_INTERNAL;
	}
	/* Absolute and canonical: the collector sees it at this path in its own root. */
	real = realpath(o->out_dir, NULL);
	if (real == NULL || strlen(real) >= sizeof(r.out)) {
		log_warnx("output folder %s: %s", o->out_dir, real ? "path too long" :
		    strerror(errno));
		free(real);
		return EXEC_EXIT_INTERNAL;
	}
	snprintf(r.out, sizeof(r.out), "%s", real);
	free(real);
	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		log_warnx("orchestrate: no randomness for the run id");
		return EXEC_EXIT_INTERNAL;
	}
	hex_encode(rnd, sizeof(rnd), hex);
	snprintf(r.run_id, sizeof(r.run_id), "run-%s", hex);

	/* 1. Admission: nothing runs unless admitted. */
	admission_from_files(o->workunit_path, o->preset_path, o->trusted_models, o->caller_env,
	    &r.wu, &r.p, &r.adm);
	r.adm_done = true;
	if (!r.adm.admitted) {
		orch_set(&r, EXEC_EXIT_ADMISSION, r.adm.nrefusals ? r.adm.refusals[0].reason :
		    REASON_ADM_INVALID_FILE, "%s", r.adm.nrefusals ? r.adm.refusals[0].detail : "");
		goto out;
	}

	real = realpath(o->repo_dir, NULL);
	if (real == NULL || strlen(real) >= sizeof(r.repo)) {
		orch_set(&r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "repository %s: %s",
		    o->repo_dir, real ? "path too long" : strerror(errno));
		free(real);
		goto out;
	}
	snprintf(r.repo, sizeof(r.repo), "%s", real);
	free(real);
	/* A repository that cannot give a candidate is refused before the budget is spent; a
	 * dirty one runs, but the person is told now (executor/repocheck.h). An unborn HEAD
	 * is refused like check refuses it: the fix (a first commit) is the person's. */
	{
		struct repocheck rk;

		if (repocheck_inspect(r.repo, &rk) != 0 || !rk.worktree_root || !rk.has_head) {
			orch_set(&r, EXEC_EXIT_ADMISSION, rk.worktree_root && !rk.has_head ?
			    REASON_ADM_REPO_NO_COMMIT : REASON_ADM_REPO_INVALID, "%s", rk.why);
			goto out;
		}
		if (rk.dirty > 0)
			log_warnx("repository %s has %zu uncommitted change(s) (%s%s): they will "
			    "appear in the candidate as if the worker made them; commit or stash "
			    "them first", r.repo, rk.dirty, rk.dirty_paths,
			    rk.dirty > REPOCHECK_DIRTY_SHOWN ? ", ..." : "");
	}

	/* 2-3. Environment and the sandbox. */
	if (run_sandbox(&r) != EXEC_EXIT_OK)
		goto out;
	/* 4-7. After the worker is gone, in the unprivileged collector. What a trusted,
	 * root-only socket says (an external egressd's log path) is asked for first. */
	orch_set(&r, EXEC_EXIT_OK, REASON_ALLOWED, "%s", "");
	external_egressd_info(&r);
	run_collector(&r);
	if (r.collected) {
		code = r.exit_code;
		orch_free(&r);
		return code;
	}
out:
	/* 7. The manifest, in every case: here when nothing was collected (admission, a
	 * sandbox that could not be built, a failed collector) - from the parent's own
	 * memory, nothing read from the run. */
	if (write_manifest(&r) != 0 && r.exit_code == EXEC_EXIT_OK)
		orch_set(&r, EXEC_EXIT_INTERNAL, REASON_INTERNAL_ERROR, "manifest.json could not "
		    "be written");
	print_summary(&r, false);
	code = r.exit_code;
	orch_free(&r);
	return code;
}
