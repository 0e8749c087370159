/* repocheck.c - the repository a run is asked for (see repocheck.h). */
#define _GNU_SOURCE 1
#include "executor/repocheck.h"

#include "executor/gitlib.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
rc_git_why(struct repocheck *out, const char *what)
{
	const git_error *e = git_error_last();

	snprintf(out->why, sizeof(out->why), "%s: %s", what,
	    e && e->message ? e->message : "libgit2 error");
}

int
repocheck_inspect(const char *repo, struct repocheck *out)
{
	git_repository *r = NULL;
	git_status_list *sl = NULL;
	git_status_options so;
	char real[PATH_MAX], wd[PATH_MAX];
	const char *w;
	git_oid oid;
	git_commit *c = NULL;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (gitlib_load(out->why, sizeof(out->why)) != 0)
		return -1;
	git_libgit2_init();
	git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);
	if (realpath(repo, real) == NULL) {
		snprintf(out->why, sizeof(out->why), "%.200s does not exist", repo);
		goto done;
	}
	if (git_repository_open_ext(&r, real, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) != 0) {
		snprintf(out->why, sizeof(out->why), "%.200s is not the root of a git work tree "
		    "(no .git there): pass the top of the checkout, or `git init` and commit a "
		    "base first", real);
		goto done;
	}
	w = git_repository_workdir(r);
	if (git_repository_is_bare(r) || w == NULL || realpath(w, wd) == NULL ||
	    strcmp(wd, real) != 0) {
		snprintf(out->why, sizeof(out->why), "%.200s is a bare repository or not its work "
		    "tree's root", real);
		goto done;
	}
	out->worktree_root = true;
	if (git_repository_head_unborn(r) == 1 ||
	    git_reference_name_to_id(&oid, r, "HEAD") != 0 ||
	    git_commit_lookup(&c, r, &oid) != 0) {
		snprintf(out->why, sizeof(out->why), "%.200s has no commit at HEAD (an unborn "
		    "branch): make a first commit there (git add -A && git commit) and run again; "
		    "the candidate is HEAD against the worker's work tree", real);
		goto done;
	}
	out->has_head = true;
	git_oid_tostr(out->head, sizeof(out->head), &oid);

	git_status_options_init(&so, GIT_STATUS_OPTIONS_VERSION);
	so.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
	so.flags = GIT_STATUS_OPT_INCLUDE_UNTRACKED | GIT_STATUS_OPT_RECURSE_UNTRACKED_DIRS |
	    GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
	if (git_status_list_new(&sl, r, &so) != 0) {
		rc_git_why(out, "git status");
		rc = -1;
		goto done;
	}
	out->dirty = git_status_list_entrycount(sl);
	for (size_t i = 0; i < out->dirty && i < REPOCHECK_DIRTY_SHOWN; i++) {
		const git_status_entry *e = git_status_byindex(sl, i);
		const char *p = e->index_to_workdir ? e->index_to_workdir->new_file.path :
		    e->head_to_index ? e->head_to_index->new_file.path : NULL;
		size_t n = strlen(out->dirty_paths);

		if (p != NULL)
			snprintf(out->dirty_paths + n, sizeof(out->dirty_paths) - n, "%s%s",
			    n ? ", " : "", p);
	}
done:
	git_status_list_free(sl);
	git_commit_free(c);
	git_repository_free(r);
	git_libgit2_shutdown();
	return rc;
}
