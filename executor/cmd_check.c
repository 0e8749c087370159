/*
 * cmd_check - `egress-exec check --workunit W --preset P [--trusted-models F]
 * [--env-file F] [--repo DIR]`: admission alone (with the preset's ro_bind paths and the
 * executable's visibility), and with --repo the repository: a git work tree root with a
 * commit at HEAD (else refused: repo_not_worktree, or repo_no_commit for an unborn HEAD),
 * and whether it is dirty (reported, not refused). Prints the decision as one JSON object
 * on stdout and one human line on stderr (plus one for the repository). Exit 0 when
 * admitted, EXEC_EXIT_ADMISSION when refused.
 */
#include "executor/commands.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "executor/admission.h"
#include "executor/env.h"
#include "executor/repocheck.h"
#include "executor/sandbox.h"

static void
usage(void)
{
	fprintf(stderr, "usage: egress-exec check --workunit FILE --preset FILE "
	    "[--trusted-models FILE] [--env-file FILE] [--repo DIR]\n");
}

int
cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "workunit", required_argument, NULL, 'w' },
		{ "preset", required_argument, NULL, 'p' },
		{ "trusted-models", required_argument, NULL, 't' },
		{ "env-file", required_argument, NULL, 'e' },
		{ "repo", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *wu_path = NULL, *preset_path = NULL, *trusted = NULL, *envfile = NULL;
	const char *repo = NULL;
	struct repocheck rk;
	char **env = NULL;
	struct workunit *wu = NULL;
	struct preset *p = NULL;
	struct admission adm;
	char line[1024];
	char *js;
	int ch;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "w:p:t:e:r:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'w': wu_path = optarg; break;
		case 'p': preset_path = optarg; break;
		case 't': trusted = optarg; break;
		case 'e': envfile = optarg; break;
		case 'r': repo = optarg; break;
		case 'h': usage(); return 0;
		default: usage(); return EXEC_EXIT_USAGE;
		}
	}
	if (wu_path == NULL || preset_path == NULL || optind != argc) {
		usage();
		return EXEC_EXIT_USAGE;
	}
	if (envfile != NULL && env_file_load(envfile, &env, line, sizeof(line)) != 0) {
		fprintf(stderr, "egress-exec check: --env-file %s\n", line);
		return EXEC_EXIT_USAGE;
	}

	admission_from_files(wu_path, preset_path, trusted, (const char *const *)env, &wu, &p,
	    &adm);
	if (repo != NULL && (repocheck_inspect(repo, &rk) != 0 || !rk.worktree_root ||
	    !rk.has_head))
		admission_refuse(&adm, rk.worktree_root && !rk.has_head ?
		    REASON_ADM_REPO_NO_COMMIT : REASON_ADM_REPO_INVALID, rk.why);
	js = NULL;
	{
		json_t *o = admission_to_json(&adm);
		if (o != NULL) {
			if (wu != NULL)
				json_object_set_new(o, "workunit", json_string(wu->id));
			if (p != NULL)
				json_object_set_new(o, "preset", json_string(p->name));
			/* docs/transparent.md: what a networked run of this pair would get. */
			if (p != NULL && adm.admitted && adm.net == SANDBOX_NET_ALLOWLIST)
				json_object_set_new(o, "transparent", json_boolean(!p->no_transparent));
			if (repo != NULL && rk.has_head)
				json_object_set_new(o, "repository", json_pack("{s:s, s:I, s:s}",
				    "head", rk.head, "dirty", (json_int_t)rk.dirty, "dirty_paths",
				    rk.dirty_paths));
			js = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
			json_decref(o);
		}
	}
	if (js != NULL) {
		printf("%s\n", js);
		free(js);
	}
	fflush(stdout);
	admission_summary(&adm, line, sizeof(line));
	fprintf(stderr, "%s\n", line);
	for (size_t i = 1; i < adm.nrefusals; i++)
		fprintf(stderr, "  also: %s: %s\n", reason_str(adm.refusals[i].reason),
		    adm.refusals[i].detail);
	if (p != NULL && adm.admitted && adm.net == SANDBOX_NET_ALLOWLIST)
		fprintf(stderr, "network: %s\n", p->no_transparent ? "transparent capture off "
		    "(preset transparent = no): only clients that use HTTPS_PROXY reach the granted "
		    "destinations; others fail to resolve names" : "transparent capture on: the "
		    "worker's resolver answers only granted names and proxy-unaware clients "
		    "(ssh, Node's fetch) are captured to egressd; egress-exec doctor checks the "
		    "kernel side (turn it off with the preset's transparent = no)");
	if (repo != NULL && rk.has_head) {
		if (rk.dirty == 0)
			fprintf(stderr, "repository: clean at %.12s\n", rk.head);
		else
			fprintf(stderr, "repository: %zu uncommitted change(s) (%s%s): they would "
			    "appear in the candidate as the worker's; commit or stash them first\n",
			    rk.dirty, rk.dirty_paths, rk.dirty > REPOCHECK_DIRTY_SHOWN ? ", ..." : "");
	}

	ch = adm.admitted ? EXEC_EXIT_OK : EXEC_EXIT_ADMISSION;
	admission_free(&adm);
	workunit_free(wu);
	preset_free(p);
	env_free(env);
	return ch;
}
