/*
 * cmd_run - `egress-exec run`.
 *
 * Simple mode, to exercise the sandbox on its own:
 *   egress-exec run [--net none] [--allow URL ...] [--cpu 1000m] [--memory 256M]
 *       [--disk 64M] [--pids 128] [--wall 30s] [--output 1M] [--open-files N]
 *       [--repo DIR] [--workdir /work] [--forbid REL ...] [--uid N --gid N]
 *       [--env NAME ...] [--principal LABEL] [--egressd-control SOCK]
 *       [--egressd-setting KEY=VALUE ...] [--net-pool CIDR] [--stdin FILE] [--out DIR]
 *       -- CMD ARGS...
 * The worker's stdout and stderr are passed through (bounded); with --out DIR the result
 * (reason, usage, attestation, limits read back, changed paths) is written to
 * DIR/result.json and a networked run's decision log is copied to DIR/decisions.jsonl.
 * The upper layer's walk and the copies run in the unprivileged collector
 * (executor/collector.h), never as root; when it fails, this process writes result.json
 * from its own memory (no upper_paths) and the run ends collector_failed (exit 14).
 *
 * WorkUnit mode: --workunit W.ini --preset P.ini --repo DIR --out DIR
 *   [--egressd-control SOCK] [--trusted-models FILE] [--env-file FILE] -> orchestrate_run().
 */
#define _GNU_SOURCE
#include "executor/commands.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "executor/artifacts.h"
#include "executor/collector.h"
#include "executor/env.h"
#include "executor/mounts.h"
#include "executor/orchestrate.h"
#include "executor/sandbox.h"

#define RUN_LIST_MAX     256
#define RUN_UPPER_LIST_MAX 10000

extern char **environ;

static void
run_usage(FILE *f)
{
	fprintf(f,
	    "usage: egress-exec run [options] -- CMD [ARGS...]\n"
	    "       egress-exec run --workunit W.ini --preset P.ini --repo DIR --out DIR\n"
	    "                       [--egressd-control SOCK] [--trusted-models F] [--env-file F]\n"
	    "                       [--egressd-setting K=V ...] [--net-pool CIDR]\n"
	    "                       [--transparent on|off]\n"
	    "\nsimple mode options (defaults in brackets):\n"
	    "  --net none            no network at all (default without --allow)\n"
	    "  --allow URL           grant entry (https://host[:port], http://..., tcp://h:p);\n"
	    "                        repeatable; implies a veth to egressd\n"
	    "  --cpu N|Nm            CPU quota [1000m]\n"
	    "  --memory SIZE         memory limit, no swap [512M]\n"
	    "  --disk SIZE           upper layer, /tmp and RLIMIT_FSIZE [256M]\n"
	    "  --pids N              process limit [256]\n"
	    "  --wall DURATION       wall budget, whole tree killed at expiry [60s]\n"
	    "  --output SIZE         stdout/stderr kept per stream [1M]\n"
	    "  --open-files N        RLIMIT_NOFILE [1024]\n"
	    "  --repo DIR            repository mounted as an overlay [an empty directory]\n"
	    "  --workdir PATH        where the repository appears [/work]\n"
	    "  --forbid REL          repository path to mask; repeatable\n"
	    "  --uid N --gid N       worker identity [the repository owner; 65000 with an\n"
	    "                        idmapped repository when root owns it; 65000 without\n"
	    "                        --repo]\n"
	    "  --env NAME            pass NAME from this environment (credentials refused)\n"
	    "  --principal LABEL     principal label of the grant [the run id]\n"
	    "  --egressd-control S   control socket of a running egressd [start a private one]\n"
	    "  --egressd-setting K=V extra [egressd] setting for the private egressd\n"
	    "  --net-pool CIDR       veth address pool [169.254.0.0/16]\n"
	    "  --transparent on|off  stub resolver and capture of proxy-unaware clients [on\n"
	    "                        with --allow; a preset's transparent = no wins]\n"
	    "  --stdin FILE          the worker's stdin [/dev/null]\n"
	    "  --out DIR             write result.json (and decisions.jsonl) there\n");
}

/* "1000m" -> 1000, "2" -> 2000, "0.5" -> 500. */
static int
run_parse_cpu(const char *s, uint32_t *out)
{
	long long v, frac = 0;
	const char *es;
	char buf[32];
	size_t n = strlen(s);
	const char *dot;

	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n + 1);
	if (buf[n - 1] == 'm') {
		buf[n - 1] = '\0';
		if (num_parse(buf, 1, 1024 * 1000, &v, &es) < 0)
			return -1;
		*out = (uint32_t)v;
		return 0;
	}
	dot = strchr(buf, '.');
	if (dot) {
		size_t fl = strlen(dot + 1);
		if (fl == 0 || fl > 3)
			return -1;
		char f[4] = "000";
		memcpy(f, dot + 1, fl);
		if (num_parse(f, 0, 999, &frac, &es) < 0)
			return -1;
		buf[dot - buf] = '\0';
	}
	if (num_parse(buf, 0, 1024, &v, &es) < 0 || v * 1000 + frac == 0)
		return -1;
	*out = (uint32_t)(v * 1000 + frac);
	return 0;
}

/* A size as egress's files write it (conf_parse_size: K/M/G/T, powers of 1024), at least
 * one byte and at most 2^50. */
static int
run_parse_size(const char *s, uint64_t *out)
{
	uint64_t v;

	if (conf_parse_size(s, (uint64_t)1 << 50, &v) != 0 || v == 0)
		return -1;
	*out = v;
	return 0;
}

/* A duration as egress's files write it (conf_parse_duration_ms: ms/s/m/h, bare seconds),
 * in whole seconds (milliseconds round up), 1 s to 7 days. */
static int
run_parse_duration(const char *s, uint32_t *out)
{
	uint64_t ms;

	if (conf_parse_duration_ms(s, (uint64_t)7 * 24 * 3600 * 1000, &ms) != 0 || ms == 0)
		return -1;
	*out = (uint32_t)((ms + 999) / 1000);
	return 0;
}

static int
run_parse_id(const char *s, uint32_t *out)
{
	long long v;
	const char *es;

	if (num_parse(s, 1, 0x7fffffff, &v, &es) < 0)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

struct run_list {
	const char *v[RUN_LIST_MAX + 1];
	size_t n;
};

static int
run_list_add(struct run_list *l, const char *s)
{
	if (l->n >= RUN_LIST_MAX)
		return -1;
	l->v[l->n++] = s;
	l->v[l->n] = NULL;
	return 0;
}

/* Paths in the upper layer (what the worker wrote or deleted), bounded. */
static json_t *run_upper_list;
static size_t run_upper_prefix;

static int
run_upper_visit(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	const char *rel = path + run_upper_prefix;

	if (ftw->level == 0)
		return 0;
	if (json_array_size(run_upper_list) >= RUN_UPPER_LIST_MAX)
		return 1;
	while (*rel == '/')
		rel++;
	/* A whiteout (0/0 character device) records a deletion. */
	if (S_ISCHR(sb->st_mode) && sb->st_rdev == 0)
		json_array_append_new(run_upper_list, json_pack("{s:s, s:s}", "path", rel,
		    "change", "deleted"));
	else
		json_array_append_new(run_upper_list, json_pack("{s:s, s:s}", "path", rel,
		    "change", type == FTW_D ? "dir" : "written"));
	return 0;
}

static json_t *
run_result_json(const struct sandbox_result *r, bool with_upper)
{
	json_t *o = json_pack("{s:s, s:s, s:b, s:i, s:i, s:b, s:b, s:I, s:I, s:I, s:i, s:i, "
	    "s:I, s:b, s:I, s:b, s:s, s:s}",
	    "reason", reason_str(r->reason), "message", r->message, "started", r->started,
	    "exit_code", r->exit_code, "term_signal", r->term_signal, "timed_out", r->timed_out,
	    "oom_killed", r->oom_killed, "wall_ms", (json_int_t)r->wall_ms,
	    "cpu_usec", (json_int_t)r->cpu_usec, "peak_memory_bytes",
	    (json_int_t)r->peak_memory_bytes, "oom_kills", (int)r->oom_kills,
	    "peak_pids", (int)r->peak_pids, "out_len", (json_int_t)r->out_len,
	    "out_truncated", r->out_truncated, "err_len", (json_int_t)r->err_len,
	    "err_truncated", r->err_truncated, "grant_id", r->grant_id,
	    "decisions_path", r->decisions_path);

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "run_id", json_string(r->run_id));
	json_object_set(o, "attestation", r->attestation ? r->attestation : json_null());
	json_object_set(o, "limits_applied", r->limits_applied ? r->limits_applied : json_null());
	if (r->upper_dir[0] && with_upper) {
		run_upper_list = json_array();
		run_upper_prefix = strlen(r->upper_dir);
		nftw(r->upper_dir, run_upper_visit, 16, FTW_PHYS);
		json_object_set_new(o, "upper_paths", run_upper_list);
		run_upper_list = NULL;
	}
	return o;
}

static int
run_copy_file(const char *src, const char *dst)
{
	char buf[65536];
	int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), out;
	ssize_t n;

	if (in < 0)
		return -1;
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (out < 0) {
		close(in);
		return -1;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		(void)write_all(out, buf, (size_t)n);
	close(in);
	close(out);
	return 0;
}

/* What the collector of a simple run needs (inherited by fork). */
struct run_collect {
	const struct sandbox_result *res;
	const char *run_dir;
	const char *out;            /* absolute, canonical */
	bool with_upper;            /* walk the upper layer (false: the parent's fallback) */
	const char *why;            /* the parent's fallback: the collector's failure */
};

static int
run_write_result(const struct run_collect *c)
{
	char p[EGRESS_PATH_MAX + 32];
	json_t *j = run_result_json(c->res, c->with_upper);
	int rc = 0;

	if (j) {
		json_object_set_new(j, "run_dir", json_string(c->run_dir));
		if (c->why != NULL) {
			json_object_set_new(j, "reason", json_string(reason_str(
			    REASON_COLLECTOR_FAILED)));
			json_object_set_new(j, "message", json_string(c->why));
		}
	}
	snprintf(p, sizeof(p), "%s/result.json", c->out);
	if (j == NULL || json_dump_file(j, p, JSON_INDENT(2) | JSON_SORT_KEYS) < 0) {
		log_warnx("cannot write %s", p);
		rc = -1;
	}
	json_decref(j);
	return rc;
}

/* The collector's body: the upper layer's names and the egressd files. */
static int
run_collect_body(void *arg)
{
	const struct run_collect *c = arg;
	char p[EGRESS_PATH_MAX + 32], src[EGRESS_PATH_MAX + 32];
	int rc = run_write_result(c);

	if (c->res->decisions_path[0]) {
		snprintf(p, sizeof(p), "%s/decisions.jsonl", c->out);
		if (access(c->res->decisions_path, F_OK) == 0 &&
		    run_copy_file(c->res->decisions_path, p) != 0)
			rc = -1;
		snprintf(p, sizeof(p), "%s/egressd.log", c->out);
		snprintf(src, sizeof(src), "%s/egressd.log", c->run_dir);
		if (access(src, F_OK) == 0 && run_copy_file(src, p) != 0)
			rc = -1;
	}
	return rc == 0 ? EXEC_EXIT_OK : EXEC_EXIT_INTERNAL;
}

/* --out: result.json and the copies, in the collector. Returns 0, or -1 after writing
 * the fallback result.json (the collector failed: nothing it made is trusted). */
static int
run_collect_out(const struct sandbox_result *res, const char *run_dir, const char *out)
{
	struct collector_spec cs;
	struct collector_result cr;
	struct run_collect c = { .res = res, .run_dir = run_dir, .with_upper = true };
	char stage[EGRESS_PATH_MAX], elog[EGRESS_PATH_MAX + 32], *real;
	struct stat st;
	size_t k = 0;
	int rc;

	/* lstat: a symlink planted where the folder was to be made would send the
	 * collector's writes elsewhere. */
	if (lstat(out, &st) != 0 || !S_ISDIR(st.st_mode)) {
		log_warnx("--out %s is not a directory (a symlink is refused)", out);
		return -1;
	}
	real = realpath(out, NULL);
	if (real == NULL) {
		log_warn("--out %s", out);
		return -1;
	}
	c.out = real;
	memset(&cs, 0, sizeof(cs));
	if (res->upper_dir[0] == '/')
		cs.ro_paths[k++] = res->upper_dir;
	/* egressd's own files, root-owned: bound read-only, read by the collector. */
	if (res->decisions_path[0] == '/' && stat(res->decisions_path, &st) == 0 &&
	    S_ISREG(st.st_mode))
		cs.ro_paths[k++] = res->decisions_path;
	snprintf(elog, sizeof(elog), "%s/egressd.log", run_dir);
	if (res->decisions_path[0] && stat(elog, &st) == 0 && S_ISREG(st.st_mode))
		cs.ro_paths[k++] = elog;
	snprintf(stage, sizeof(stage), "%s/root", run_dir);
	if (mkdir(stage, 0700) != 0 && errno != EEXIST) {
		log_warn("collector stage %s", stage);
		free(real);
		return -1;
	}
	cs.rw_dir = real;
	cs.stage_dir = stage;
	cs.fn = run_collect_body;
	cs.arg = &c;
	rc = collector_run(&cs, &cr);
	if (rc == 0 && cr.exit_code != EXEC_EXIT_OK) {
		snprintf(cr.message, sizeof(cr.message), "the collector could not write %s "
		    "(exit %d)", real, cr.exit_code);
		rc = -1;
	}
	if (rc != 0) {
		/* From this process's memory only: no upper walk, nothing read from the run. */
		fprintf(stderr, "egress-exec: %s: %s\n", reason_str(REASON_COLLECTOR_FAILED),
		    cr.message);
		c.with_upper = false;
		c.why = cr.message;
		(void)run_write_result(&c);
	}
	log_debug("collector: %llu ms", (unsigned long long)cr.wall_ms);
	free(real);
	return rc;
}

/* Remove the run folder: only the names this program puts there. */
static void
run_dir_remove(const char *dir)
{
	static const char *const names[] = { "egressd.ini", "egressd.ini.state", "egressd.sock",
		"egressd.log", "decisions.jsonl", "root", "layer", "merged", "repo", NULL };
	char p[EGRESS_PATH_MAX];

	for (size_t i = 0; names[i]; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		if (unlink(p) < 0 && errno == EISDIR)
			rmdir(p);
		else if (errno == EISDIR || errno == EPERM)
			rmdir(p);
	}
	if (rmdir(dir) < 0)
		log_warn("rmdir %s", dir);
}

static int
run_workunit(const char *wu, const char *preset, const char *repo, const char *out,
    const char *control, const char *trusted, const char *envfile, const char *pool,
    const char *const *settings, bool no_transparent)
{
	struct orchestrate_opts o = { 0 };
	char **env = NULL, msg[512];
	int rc;

	if (wu == NULL || preset == NULL || repo == NULL || out == NULL) {
		fprintf(stderr, "egress-exec run: WorkUnit mode needs --workunit, --preset, "
		    "--repo and --out\n");
		return EXEC_EXIT_USAGE;
	}
	/* The parser `check` uses: a bad line refuses the run, naming file:line. */
	if (envfile && env_file_load(envfile, &env, msg, sizeof(msg)) != 0) {
		fprintf(stderr, "egress-exec run: --env-file %s\n", msg);
		return EXEC_EXIT_USAGE;
	}
	o.workunit_path = wu;
	o.preset_path = preset;
	o.repo_dir = repo;
	o.out_dir = out;
	o.egressd_control = control;
	o.trusted_models = trusted;
	o.caller_env = (const char *const *)env;
	o.net_pool = pool;
	o.egressd_settings = settings;
	o.no_transparent = no_transparent;
	rc = orchestrate_run(&o);
	env_free(env);
	return rc;
}

int
cmd_run(int argc, char **argv)
{
	enum {
		O_NET = 256, O_ALLOW, O_CPU, O_MEMORY, O_DISK, O_PIDS, O_WALL, O_OUTPUT, O_NOFILE,
		O_REPO, O_WORKDIR, O_FORBID, O_UID, O_GID, O_ENV, O_PRINCIPAL, O_CONTROL,
		O_SETTING, O_POOL, O_STDIN, O_OUT, O_WORKUNIT, O_PRESET, O_TRUSTED, O_ENVFILE,
		O_TRANSPARENT,
	};
	static const struct option opts[] = {
		{ "net", required_argument, NULL, O_NET },
		{ "allow", required_argument, NULL, O_ALLOW },
		{ "cpu", required_argument, NULL, O_CPU },
		{ "memory", required_argument, NULL, O_MEMORY },
		{ "disk", required_argument, NULL, O_DISK },
		{ "pids", required_argument, NULL, O_PIDS },
		{ "wall", required_argument, NULL, O_WALL },
		{ "output", required_argument, NULL, O_OUTPUT },
		{ "open-files", required_argument, NULL, O_NOFILE },
		{ "repo", required_argument, NULL, O_REPO },
		{ "workdir", required_argument, NULL, O_WORKDIR },
		{ "forbid", required_argument, NULL, O_FORBID },
		{ "uid", required_argument, NULL, O_UID },
		{ "gid", required_argument, NULL, O_GID },
		{ "env", required_argument, NULL, O_ENV },
		{ "principal", required_argument, NULL, O_PRINCIPAL },
		{ "egressd-control", required_argument, NULL, O_CONTROL },
		{ "egressd-setting", required_argument, NULL, O_SETTING },
		{ "net-pool", required_argument, NULL, O_POOL },
		{ "stdin", required_argument, NULL, O_STDIN },
		{ "out", required_argument, NULL, O_OUT },
		{ "workunit", required_argument, NULL, O_WORKUNIT },
		{ "preset", required_argument, NULL, O_PRESET },
		{ "trusted-models", required_argument, NULL, O_TRUSTED },
		{ "env-file", required_argument, NULL, O_ENVFILE },
		{ "transparent", required_argument, NULL, O_TRANSPARENT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sandbox_spec spec;
	struct sandbox_result res;
	struct run_list allow = { 0 }, forbid = { 0 }, envnames = { 0 }, settings = { 0 };
	const char *repo = NULL, *out = NULL, *control = NULL, *wu = NULL, *preset = NULL;
	const char *trusted = NULL, *envfile = NULL, *stdin_path = NULL, *pool = NULL;
	const char *principal = NULL, *workdir = "/work";
	bool net_none = false, uid_set = false, gid_set = false, made_repo = false;
	bool no_transparent = false;
	bool collected = true;
	uint32_t uid = 0, gid = 0;
	struct sandbox_limits lim = { 1000, 512ull << 20, 256ull << 20, 256, 1ull << 20, 60, 1024 };
	char run_dir[] = "/run/egress-exec/run-XXXXXX";
	char repo_buf[EGRESS_PATH_MAX], msg[256], **envp = NULL, *prompt = NULL;
	enum reason why;
	struct env_opts eo = { 0 };
	int ch, rc, exitc;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (ch) {
		case O_NET:
			if (strcmp(optarg, "none") != 0) {
				fprintf(stderr, "egress-exec run: --net takes 'none' (use --allow)\n");
				return EXEC_EXIT_USAGE;
			}
			net_none = true;
			break;
		case O_ALLOW: if (run_list_add(&allow, optarg) < 0) goto toomany; break;
		case O_FORBID: if (run_list_add(&forbid, optarg) < 0) goto toomany; break;
		case O_ENV: if (run_list_add(&envnames, optarg) < 0) goto toomany; break;
		case O_SETTING: if (run_list_add(&settings, optarg) < 0) goto toomany; break;
		case O_CPU:
			if (run_parse_cpu(optarg, &lim.cpu_millicores) < 0)
				goto bad;
			break;
		case O_MEMORY: if (run_parse_size(optarg, &lim.memory_bytes) < 0) goto bad; break;
		case O_DISK: if (run_parse_size(optarg, &lim.disk_bytes) < 0) goto bad; break;
		case O_OUTPUT: if (run_parse_size(optarg, &lim.output_bytes) < 0) goto bad; break;
		case O_PIDS: if (run_parse_id(optarg, &lim.pids) < 0) goto bad; break;
		case O_NOFILE: if (run_parse_id(optarg, &lim.open_files) < 0) goto bad; break;
		case O_WALL: if (run_parse_duration(optarg, &lim.wall_seconds) < 0) goto bad; break;
		case O_UID: if (run_parse_id(optarg, &uid) < 0) goto bad; uid_set = true; break;
		case O_GID: if (run_parse_id(optarg, &gid) < 0) goto bad; gid_set = true; break;
		case O_REPO: repo = optarg; break;
		case O_WORKDIR: workdir = optarg; break;
		case O_PRINCIPAL: principal = optarg; break;
		case O_CONTROL: control = optarg; break;
		case O_POOL: pool = optarg; break;
		case O_STDIN: stdin_path = optarg; break;
		case O_OUT: out = optarg; break;
		case O_WORKUNIT: wu = optarg; break;
		case O_PRESET: preset = optarg; break;
		case O_TRUSTED: trusted = optarg; break;
		case O_ENVFILE: envfile = optarg; break;
		case O_TRANSPARENT:
			if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0) {
				fprintf(stderr, "egress-exec run: --transparent takes on or off\n");
				return EXEC_EXIT_USAGE;
			}
			no_transparent = strcmp(optarg, "off") == 0;
			break;
		case 'h':
			run_usage(stdout);
			return EXEC_EXIT_OK;
		default:
			run_usage(stderr);
			return EXEC_EXIT_USAGE;
		}
	}
	if (wu || preset)
		return run_workunit(wu, preset, repo, out, control, trusted, envfile, pool,
		    settings.n ? settings.v : NULL, no_transparent);
	if (optind >= argc) {
		fprintf(stderr, "egress-exec run: no command (egress-exec run [options] -- CMD)\n");
		return EXEC_EXIT_USAGE;
	}
	if (argv[optind][0] != '/') {
		fprintf(stderr, "egress-exec run: the command must be an absolute path inside the "
		    "sandbox (e.g. /bin/sh, /usr/bin/python3)\n");
		return EXEC_EXIT_USAGE;
	}
	if (net_none && allow.n) {
		fprintf(stderr, "egress-exec run: --net none and --allow exclude each other\n");
		return EXEC_EXIT_USAGE;
	}
	if (!mounts_workdir_ok(workdir)) {
		fprintf(stderr, "egress-exec run: --workdir %s must be an absolute canonical path "
		    "outside /usr, /bin, /sbin, /lib*, /etc, /proc, /dev and /tmp\n", workdir);
		return EXEC_EXIT_USAGE;
	}
	if (uid_set != gid_set) {
		fprintf(stderr, "egress-exec run: give --uid and --gid together\n");
		return EXEC_EXIT_USAGE;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "egress-exec run: must run as root (it builds namespaces, cgroups "
		    "and mounts, then drops the worker to an unprivileged uid)\n");
		return EXEC_EXIT_CAPABILITY;
	}
	if (stdin_path) {
		FILE *f = fopen(stdin_path, "re");
		size_t cap = EGRESS_OBJECTIVE_MAX, n;

		prompt = f ? calloc(1, cap + 1) : NULL;
		if (prompt == NULL) {
			fprintf(stderr, "egress-exec run: cannot read --stdin %s\n", stdin_path);
			if (f)
				fclose(f);
			return EXEC_EXIT_USAGE;
		}
		n = fread(prompt, 1, cap, f);
		prompt[n] = '\0';
		/* Bounded, and never silently cut: a longer file is refused. */
		if (n == cap && fgetc(f) != EOF) {
			fprintf(stderr, "egress-exec run: --stdin %s exceeds %d bytes\n", stdin_path,
			    EGRESS_OBJECTIVE_MAX);
			fclose(f);
			free(prompt);
			return EXEC_EXIT_USAGE;
		}
		if (memchr(prompt, '\0', n) != NULL) {
			fprintf(stderr, "egress-exec run: --stdin %s holds a NUL byte\n", stdin_path);
			fclose(f);
			free(prompt);
			return EXEC_EXIT_USAGE;
		}
		fclose(f);
	}

	if (out != NULL) {
		/* Empty, new, or only a previous run's artifacts, removed before anything runs
		 * (executor/artifacts.h): no result of an earlier run can pass for this one's. */
		char perr[EGRESS_PATH_MAX + 256];

		if (artifacts_prepare_out(out, perr, sizeof(perr)) != 0) {
			fprintf(stderr, "egress-exec run: --out: %s\n", perr);
			free(prompt);
			return EXEC_EXIT_USAGE;
		}
	}
	mkdir("/run/egress-exec", 0700);
	if (mkdtemp(run_dir) == NULL) {
		log_warn("mkdtemp %s", run_dir);
		free(prompt);
		return EXEC_EXIT_INTERNAL;
	}
	if (repo == NULL) {
		/* No repository: an empty one the worker owns, so /work is writable. The
		 * dedicated worker uid, never 65534 (see SANDBOX_WORKER_UID). */
		if (!uid_set)
			uid = gid = SANDBOX_WORKER_UID;
		snprintf(repo_buf, sizeof(repo_buf), "%s/repo", run_dir);
		if (mkdir(repo_buf, 0755) < 0 || chown(repo_buf, uid, gid) < 0) {
			log_warn("create %s", repo_buf);
			rmdir(repo_buf);
			rmdir(run_dir);
			free(prompt);
			return EXEC_EXIT_INTERNAL;
		}
		made_repo = true;
		repo = repo_buf;
	} else {
		struct stat st;
		char *real = realpath(repo, NULL);

		if (real == NULL || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "egress-exec run: --repo %s is not a directory\n", repo);
			free(real);
			rmdir(run_dir);
			free(prompt);
			return EXEC_EXIT_USAGE;
		}
		snprintf(repo_buf, sizeof(repo_buf), "%s", real);
		free(real);
		repo = repo_buf;
		/* overlayfs copy-up keeps the lower owner: the repository owner's uid can
		 * change its files; any other uid sees them read-only (docs/sandbox.md). */
		if (!uid_set) {
			if (st.st_uid != 0) {
				uid = st.st_uid;
				gid = st.st_gid != 0 ? st.st_gid : st.st_uid;
			} else {
				/* Never root: a dedicated uid, and the sandbox idmaps the
				 * repository (root -> this uid) so the worker can change it. */
				uid = gid = SANDBOX_WORKER_UID;
			}
		}
	}

	eo.proxy_url = NULL;
	{
		const char *const *src = (const char *const *)environ;
		if (env_build(envnames.n ? envnames.v : NULL, src, &eo, &envp, &why, msg,
		    sizeof(msg)) < 0) {
			fprintf(stderr, "egress-exec run: environment refused (%s): %s\n",
			    reason_str(why), msg);
			if (made_repo)
				rmdir(repo_buf);
			rmdir(run_dir);
			free(prompt);
			return EXEC_EXIT_ADMISSION;
		}
	}

	memset(&spec, 0, sizeof(spec));
	spec.executable = argv[optind];
	spec.argv = (const char *const *)(argv + optind);
	spec.prompt_transport = prompt ? PROMPT_STDIN : PROMPT_NONE;
	spec.prompt = prompt;
	spec.envp = (const char *const *)envp;
	spec.repo_dir = repo;
	spec.workdir = workdir;
	spec.forbidden_paths = forbid.n ? forbid.v : NULL;
	spec.net = allow.n ? SANDBOX_NET_ALLOWLIST : SANDBOX_NET_NONE;
	spec.allowlist = allow.n ? allow.v : NULL;
	spec.egressd_control = control;
	spec.principal = principal;
	spec.uid = uid;
	spec.gid = gid;
	spec.limits = lim;
	spec.run_dir = run_dir;
	spec.net_pool = pool;
	spec.egressd_settings = settings.n ? settings.v : NULL;
	spec.no_transparent = no_transparent;
	spec.discard_layer = out == NULL;   /* without --out nothing reads the layer */

	rc = sandbox_run(&spec, &res);
	if (res.out_len)
		(void)write_all(1, res.out, res.out_len);
	if (res.err_len)
		(void)write_all(2, res.err, res.err_len);
	if (out) {
		collected = run_collect_out(&res, run_dir, out) == 0;
	}
	exitc = collected ? (int)sandbox_exit_code(res.reason) : EXEC_EXIT_INTERNAL;
	if (exitc != EXEC_EXIT_OK && collected)
		fprintf(stderr, "egress-exec: %s: %s\n", reason_str(res.reason), res.message);
	(void)rc;
	sandbox_release_upper(&res);
	sandbox_result_free(&res);
	env_free(envp);
	free(prompt);
	if (made_repo)
		rmdir(repo_buf);
	run_dir_remove(run_dir);
	return exitc;
toomany:
	fprintf(stderr, "egress-exec run: too many repeated options (max %d)\n", RUN_LIST_MAX);
	return EXEC_EXIT_USAGE;
bad:
	fprintf(stderr, "egress-exec run: invalid value '%s'\n", optarg);
	return EXEC_EXIT_USAGE;
}
