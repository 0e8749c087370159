/*
 * changes - the changed set: libgit2 over the original repository with the merged view as
 * work tree, united with a walk of the overlay upper layer (see executor/changes.h).
 */
#define _GNU_SOURCE
#include "executor/changes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/pathglob.h"
#include "common/util.h"

/* libgit2 (1.5) reads a work tree at most 100 frames deep, the top included (its
 * FILESYSTEM_MAX_DEPTH): a directory nested 99 deep is "too deep" for it. A worker that
 * nests deeper gets a clean rejection instead of an error from inside the diff. */
#define UPPER_DEPTH_MAX 98

static void
git_err(char *err, size_t errlen, const char *what)
{
	const git_error *e = git_error_last();

	snprintf(err, errlen, "%s: %s", what, e && e->message ? e->message : "libgit2 error");
}

static void
git_init_once(void)
{
	static bool done;

	if (done)
		return;
	git_libgit2_init();
	/* egress-exec runs as root over a repository its user owns; we only read the host
	 * repository (no hooks, no filters run by libgit2), so the owner check adds nothing. */
	git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);
	done = true;
}

void
changes_free(struct changeset *cs)
{
	if (cs == NULL)
		return;
	for (size_t i = 0; i < cs->n; i++) {
		free(cs->v[i].path);
		free(cs->v[i].old_path);
	}
	free(cs->v);
	cs->v = NULL;
	cs->n = cs->cap = 0;
}

static int
cs_add(struct changeset *cs, const char *path, size_t plen, const char *old_path,
    const char *git_status, const char *upper_kind)
{
	struct change *c;

	/* Each path may be named twice (git and the upper layer) before cs_merge folds
	 * them; the bound on distinct paths is checked after the merge. */
	if (cs->n >= 2 * (size_t)EGRESS_CHANGED_PATHS_MAX)
		return CHANGES_TOO_MANY;
	if (cs->n == cs->cap) {
		size_t ncap = cs->cap ? cs->cap * 2 : 64;
		struct change *nv = reallocarray(cs->v, ncap, sizeof(*nv));
		if (nv == NULL)
			return -1;
		cs->v = nv;
		cs->cap = ncap;
	}
	c = &cs->v[cs->n];
	memset(c, 0, sizeof(*c));
	c->path = strndup(path, plen);
	if (c->path == NULL)
		return -1;
	if (old_path != NULL && (c->old_path = strdup(old_path)) == NULL) {
		free(c->path);
		return -1;
	}
	c->git_status = git_status;
	c->upper_kind = upper_kind;
	cs->n++;
	return 0;
}

static const char *
delta_str(git_delta_t s)
{
	switch (s) {
	case GIT_DELTA_ADDED: return "added";
	case GIT_DELTA_DELETED: return "deleted";
	case GIT_DELTA_MODIFIED: return "modified";
	case GIT_DELTA_RENAMED: return "renamed";
	case GIT_DELTA_COPIED: return "copied";
	case GIT_DELTA_IGNORED: return "ignored";
	case GIT_DELTA_UNTRACKED: return "untracked";
	case GIT_DELTA_TYPECHANGE: return "typechange";
	case GIT_DELTA_UNREADABLE: return "unreadable";
	case GIT_DELTA_CONFLICTED: return "conflicted";
	case GIT_DELTA_UNMODIFIED: break;
	}
	return NULL;
}

/* The merged view's own .git is the host's, seen through the overlay; git's view of it
 * is meaningless. Writes to it are caught by the upper walk (and refused by scope). */
static bool
is_top_dotgit(const char *p)
{
	return strcmp(p, ".git") == 0 || strncmp(p, ".git/", 5) == 0;
}

int
changes_diff(const char *repo_dir, const char *merged_dir, enum changes_diff_mode mode,
    git_repository **repo_out, git_diff **out, char *err, size_t errlen)
{
	git_repository *repo = NULL;
	git_tree *tree = NULL;
	git_diff *diff = NULL;
	git_diff_options opts;
	git_diff_find_options fopts;
	int rc;

	git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
	git_diff_find_options_init(&fopts, GIT_DIFF_FIND_OPTIONS_VERSION);

	*repo_out = NULL;
	*out = NULL;
	git_init_once();
	if (git_repository_open_ext(&repo, repo_dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) != 0) {
		git_err(err, errlen, "open repository");
		return -1;
	}
	/* Only this in-memory handle points at the merged view; nothing is written back
	 * (update_gitlink = 0, and no index write happens below). */
	if (git_repository_set_workdir(repo, merged_dir, 0) != 0) {
		git_err(err, errlen, "set work tree");
		goto fail;
	}
	/* Only an unborn HEAD (no commit yet) means "compare with the empty tree"; a HEAD
	 * whose commit or tree is missing (a broken clone, unreachable alternates) would turn
	 * every file into an addition: refuse instead. (Looked up step by step: libgit2 1.5's
	 * revparse leaks on a missing object.) */
	if (git_repository_head_unborn(repo) != 1) {
		git_oid hid;
		git_commit *commit = NULL;

		rc = git_reference_name_to_id(&hid, repo, "HEAD");
		if (rc == 0)
			rc = git_commit_lookup(&commit, repo, &hid);
		if (rc == 0)
			rc = git_commit_tree(&tree, commit);
		git_commit_free(commit);
		if (rc != 0) {
			git_err(err, errlen, "read HEAD");
			goto fail;
		}
	}

	opts.flags = GIT_DIFF_INCLUDE_UNTRACKED | GIT_DIFF_RECURSE_UNTRACKED_DIRS |
	    GIT_DIFF_SHOW_UNTRACKED_CONTENT | GIT_DIFF_IGNORE_SUBMODULES |
	    GIT_DIFF_DISABLE_PATHSPEC_MATCH;
	if (mode == CHANGES_DIFF_STATUS) {
		opts.flags |= GIT_DIFF_INCLUDE_IGNORED | GIT_DIFF_RECURSE_IGNORED_DIRS |
		    GIT_DIFF_INCLUDE_TYPECHANGE | GIT_DIFF_INCLUDE_TYPECHANGE_TREES;
	} else {
		/*
		 * The candidate is what `git apply --binary` replays on a clone of HEAD: binary
		 * content as git binary patches, which git applies only with full object ids
		 * on the index line; a type change (file <-> symlink <-> directory) as a
		 * deletion and an addition (libgit2 splits it when typechanges are not asked
		 * for), in path order, which git apply handles (removals before creations).
		 * No rename detection: a rename is its deletion and its addition, so every
		 * hunk is a whole, independently checkable file.
		 */
		opts.flags |= GIT_DIFF_SHOW_BINARY;
		opts.id_abbrev = GIT_OID_HEXSZ;
		/* libgit2 marks a blob above max_size binary without loading it, which would
		 * print "Binary files differ": a patch that does not apply. The caller refuses
		 * larger files before asking (EGRESS_DIFF_FILE_MAX). */
		opts.max_size = (git_off_t)EGRESS_DIFF_FILE_MAX + 1;
	}
	opts.ignore_submodules = GIT_SUBMODULE_IGNORE_ALL;
	/* Content-hashed comparison of HEAD against the work tree: the host index's stat
	 * cache describes host files, not the merged view, and is not trusted. */
	if (git_diff_tree_to_workdir(&diff, repo, tree, &opts) != 0) {
		git_err(err, errlen, "diff");
		goto fail;
	}
	fopts.flags = GIT_DIFF_FIND_RENAMES | GIT_DIFF_FIND_FOR_UNTRACKED |
	    GIT_DIFF_FIND_REMOVE_UNMODIFIED;
	fopts.rename_limit = 1000;
	if (mode == CHANGES_DIFF_STATUS && git_diff_find_similar(diff, &fopts) != 0) {
		git_err(err, errlen, "find renames");
		goto fail;
	}
	git_tree_free(tree);
	*repo_out = repo;
	*out = diff;
	return 0;
fail:
	git_diff_free(diff);
	git_tree_free(tree);
	git_repository_free(repo);
	return -1;
}

static int
base_commit(const char *repo_dir, char *out, size_t outlen)
{
	git_repository *repo = NULL;
	git_oid oid;

	out[0] = '\0';
	if (git_repository_open_ext(&repo, repo_dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) != 0)
		return -1;
	if (git_reference_name_to_id(&oid, repo, "HEAD") == 0)
		git_oid_tostr(out, outlen, &oid);
	git_repository_free(repo);
	return 0;
}

static int
collect_git(const char *repo_dir, const char *merged_dir, struct changeset *cs, char *err,
    size_t errlen)
{
	git_repository *repo = NULL;
	git_diff *diff = NULL;
	size_t n;

	if (changes_diff(repo_dir, merged_dir, CHANGES_DIFF_STATUS, &repo, &diff, err,
	    errlen) != 0)
		return -1;
	n = git_diff_num_deltas(diff);
	for (size_t i = 0; i < n; i++) {
		const git_diff_delta *d = git_diff_get_delta(diff, i);
		const char *st = delta_str(d->status);
		const char *np = d->new_file.path ? d->new_file.path : d->old_file.path;
		const char *op = NULL;
		size_t nl;

		if (st == NULL || np == NULL)
			continue;
		if (is_top_dotgit(np))
			continue;
		if ((d->status == GIT_DELTA_RENAMED || d->status == GIT_DELTA_COPIED) &&
		    d->old_file.path != NULL && strcmp(d->old_file.path, np) != 0)
			op = d->old_file.path;
		nl = strlen(np);
		/* An untracked nested repository is reported as "dir/": keep the directory. */
		while (nl > 1 && np[nl - 1] == '/')
			nl--;
		int arc = cs_add(cs, np, nl, op, st, NULL);
		if (arc == 0 && d->status != GIT_DELTA_DELETED &&
		    d->new_file.mode == GIT_FILEMODE_LINK)
			cs->v[cs->n - 1].is_link = true;
		if (arc != 0) {
			if (arc == CHANGES_TOO_MANY)
				snprintf(err, errlen, "more than %d changed paths",
				    EGRESS_CHANGED_PATHS_MAX);
			else
				snprintf(err, errlen, "changed set: out of memory");
			git_diff_free(diff);
			git_repository_free(repo);
			return arc == CHANGES_TOO_MANY ? CHANGES_TOO_MANY : -1;
		}
	}
	git_diff_free(diff);
	git_repository_free(repo);
	return 0;
}

struct upper_walk {
	struct changeset *cs;
	int lowerfd;            /* repo_dir, for "was this directory there before?" */
	const char *upper_dir;
	char rel[EGRESS_PATH_MAX];
	char *err;
	size_t errlen;
	/* The first entry git must never be allowed to read (see changes_compute). */
	char hazard[EGRESS_REPO_PATH_MAX];
	const char *hazard_what;
};

/*
 * Entries that would make libgit2 (running as root over the merged view) block or read
 * outside the repository: a FIFO, socket or device (not a whiteout) anywhere, and a .git,
 * .gitattributes, .gitignore or .gitmodules that is not a regular file (libgit2 opens these
 * by path, following symlinks — in egress-exec's mount namespace, that is the host). A
 * nested .git of any kind is one too: git would treat its directory as another repository.
 */
static const char *
upper_hazard(const char *name, const struct stat *st, bool whiteout, bool top)
{
	static const char *const gitfiles[] = { ".gitattributes", ".gitignore", ".gitmodules" };

	if (!whiteout && !S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode) && !S_ISLNK(st->st_mode))
		return "a FIFO, socket or device";
	/* the top-level .git is the repository's own (libgit2 opens the original one) */
	if (strcasecmp(name, ".git") == 0 && !whiteout && !top)
		return "a nested .git entry";
	for (size_t i = 0; i < sizeof(gitfiles) / sizeof(gitfiles[0]); i++)
		if (strcasecmp(name, gitfiles[i]) == 0 && !whiteout && !S_ISREG(st->st_mode))
			return "a git control file that is not a regular file";
	return NULL;
}

/* Does the upper entry at w->rel carry xattr attr (with value want, when non-NULL)?
 * lgetxattr never follows a symlink; the worker is gone, so the path is stable. */
static bool
xattr_is(const struct upper_walk *w, const char *attr, const char *want)
{
	char path[EGRESS_PATH_MAX * 2];
	char val[8];
	ssize_t r;

	if (snprintf(path, sizeof(path), "%s/%s", w->upper_dir, w->rel) >= (int)sizeof(path))
		return false;
	r = lgetxattr(path, attr, val, sizeof(val));
	if (r < 0)
		return false;
	if (want == NULL)
		return true;
	return (size_t)r == strlen(want) && memcmp(val, want, (size_t)r) == 0;
}

static bool
is_opaque(const struct upper_walk *w)
{
	return xattr_is(w, "trusted.overlay.opaque", "y") ||
	    xattr_is(w, "user.overlay.opaque", "y");
}

static bool
is_xattr_whiteout(const struct upper_walk *w)
{
	return xattr_is(w, "trusted.overlay.whiteout", NULL) ||
	    xattr_is(w, "user.overlay.whiteout", NULL);
}

static int
walk_dir(struct upper_walk *w, int dfd, size_t rellen, unsigned depth)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (depth > UPPER_DEPTH_MAX) {
		snprintf(w->err, w->errlen, "directories nested deeper than %d (%s/...), more "
		    "than git's library reads", UPPER_DEPTH_MAX, w->rel);
		close(dfd);
		return CHANGES_TOO_MANY;
	}
	d = fdopendir(dfd);
	if (d == NULL) {
		snprintf(w->err, w->errlen, "upper layer: %s", strerror(errno));
		close(dfd);
		return -1;
	}
	while (rc == 0) {
		struct stat st;
		size_t nl, newlen;
		const char *kind = NULL;
		bool recurse = false, new_dir = false;

		errno = 0;
		de = readdir(d);
		if (de == NULL) {
			if (errno != 0) {
				snprintf(w->err, w->errlen, "upper layer: %s", strerror(errno));
				rc = -1;
			}
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		nl = strlen(de->d_name);
		newlen = rellen + (rellen ? 1 : 0) + nl;
		if (newlen >= sizeof(w->rel)) {
			snprintf(w->err, w->errlen, "upper layer: path longer than %zu bytes",
			    sizeof(w->rel));
			rc = CHANGES_TOO_MANY;
			break;
		}
		if (rellen)
			w->rel[rellen] = '/';
		memcpy(w->rel + rellen + (rellen ? 1 : 0), de->d_name, nl + 1);

		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
			snprintf(w->err, w->errlen, "upper layer: %s", strerror(errno));
			rc = -1;
			break;
		}
		if (w->hazard_what == NULL) {
			bool wo = S_ISCHR(st.st_mode) && major(st.st_rdev) == 0 &&
			    minor(st.st_rdev) == 0;
			const char *hz = upper_hazard(de->d_name, &st, wo, rellen == 0);
			if (hz != NULL) {
				size_t hl = strnlen(w->rel, sizeof(w->hazard) - 1);
				w->hazard_what = hz;
				memcpy(w->hazard, w->rel, hl);
				w->hazard[hl] = '\0';
			}
		}
		if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 0 && minor(st.st_rdev) == 0) {
			kind = "deleted";
		} else if (S_ISDIR(st.st_mode)) {
			struct stat lst;
			bool lower_any = fstatat(w->lowerfd, w->rel, &lst, AT_SYMLINK_NOFOLLOW) == 0;
			bool lower_dir = lower_any && S_ISDIR(lst.st_mode);
			new_dir = !lower_any;
			recurse = true;
			if (is_opaque(w))
				kind = "opaque";
			else if (!lower_dir)
				kind = "written";
			/* else: a parent copied up for a change below it; not a change itself */
		} else if (S_ISREG(st.st_mode)) {
			kind = is_xattr_whiteout(w) ? "deleted" : "written";
		} else if (S_ISLNK(st.st_mode)) {
			kind = "written";
		} else {
			kind = "special";
		}
		if (kind != NULL && (rc = cs_add(w->cs, w->rel, newlen, NULL, NULL, kind)) == 0) {
			struct change *c = &w->cs->v[w->cs->n - 1];
			c->is_dir = S_ISDIR(st.st_mode);
			c->new_dir = new_dir;
			c->is_link = S_ISLNK(st.st_mode);
			c->special = strcmp(kind, "special") == 0;
		}
		if (rc != 0) {
			if (rc == CHANGES_TOO_MANY)
				snprintf(w->err, w->errlen, "more than %d changed paths",
				    EGRESS_CHANGED_PATHS_MAX);
			else
				snprintf(w->err, w->errlen, "changed set: out of memory");
			break;
		}
		if (recurse) {
			int cfd = openat(dirfd(d), de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0) {
				snprintf(w->err, w->errlen, "upper layer: %s", strerror(errno));
				rc = -1;
				break;
			}
			rc = walk_dir(w, cfd, newlen, depth + 1);
		}
		w->rel[rellen] = '\0';
	}
	closedir(d);
	return rc;
}

static int
collect_upper(const char *repo_dir, const char *upper_dir, struct changeset *cs, char *err,
    size_t errlen)
{
	struct upper_walk w;
	int ufd, rc;

	memset(&w, 0, sizeof(w));
	w.cs = cs;
	w.err = err;
	w.errlen = errlen;
	w.upper_dir = upper_dir;
	w.lowerfd = open(repo_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w.lowerfd < 0) {
		snprintf(err, errlen, "open %s: %s", repo_dir, strerror(errno));
		return -1;
	}
	ufd = open(upper_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ufd < 0) {
		snprintf(err, errlen, "open upper layer %s: %s", upper_dir, strerror(errno));
		close(w.lowerfd);
		return -1;
	}
	rc = walk_dir(&w, ufd, 0, 0);
	close(w.lowerfd);
	if (rc == 0 && w.hazard_what != NULL) {
		snprintf(err, errlen, "the worker left %s at %s", w.hazard_what, w.hazard);
		return strstr(w.hazard_what, ".git entry") != NULL ? CHANGES_UNSAFE_GIT :
		    CHANGES_UNSAFE;
	}
	return rc;
}

static int
change_cmp(const void *a, const void *b)
{
	const struct change *x = a, *y = b;

	return strcmp(x->path, y->path);
}

/* Sort by path and fold the git and upper observations of one path into one entry. */
static void
cs_merge(struct changeset *cs)
{
	size_t out = 0;

	if (cs->n == 0)
		return;
	qsort(cs->v, cs->n, sizeof(*cs->v), change_cmp);
	for (size_t i = 1; i < cs->n; i++) {
		struct change *keep = &cs->v[out], *c = &cs->v[i];
		if (strcmp(keep->path, c->path) == 0) {
			if (keep->git_status == NULL)
				keep->git_status = c->git_status;
			if (keep->upper_kind == NULL)
				keep->upper_kind = c->upper_kind;
			keep->is_dir |= c->is_dir;
			keep->new_dir |= c->new_dir;
			keep->is_link |= c->is_link;
			keep->special |= c->special;
			if (keep->old_path == NULL) {
				keep->old_path = c->old_path;
				c->old_path = NULL;
			}
			free(c->path);
			free(c->old_path);
			continue;
		}
		cs->v[++out] = *c;
	}
	cs->n = out + 1;
}

#define LINK_HOPS_MAX 40      /* as the kernel's ELOOP bound */

/*
 * Resolve target, a link's text, from the directory dir (a repository path, "" for the
 * top) in the merged view at mfd, as the kernel would but never above the top: each
 * component is appended; ".." drops the last one (dropping past the top escapes); a
 * component that is a symbolic link in the merged view is replaced by the resolution of
 * its own target (absolute escapes), at most LINK_HOPS_MAX links in all (past that the
 * kernel answers ELOOP: the path reaches nothing). Once a component does not exist (or
 * loops), the rest is resolved lexically. A component git treats as .git escapes.
 * Nothing is opened or read but link texts (readlinkat). Returns 0 with the resolved
 * repository path in out, or -1 when the link escapes.
 */
static int
link_resolve(int mfd, const char *dir, const char *target, char *out, size_t outlen,
    unsigned *hops)
{
	size_t clen = strlen(dir);
	bool exists = true;
	const char *s = target;

	if (target[0] == '/' || target[0] == '\0' || clen >= outlen)
		return -1;
	memmove(out, dir, clen + 1);
	while (*s) {
		const char *e = strchr(s, '/');
		size_t l = e ? (size_t)(e - s) : strlen(s);

		if (l == 2 && s[0] == '.' && s[1] == '.') {
			char *sl;

			if (clen == 0)
				return -1;
			sl = strrchr(out, '/');
			clen = sl ? (size_t)(sl - out) : 0;
			out[clen] = '\0';
		} else if (l > 0 && !(l == 1 && s[0] == '.')) {
			size_t parent_len = clen;
			struct stat st;

			if (path_component_is_dotgit(s, l) || clen + 1 + l >= outlen)
				return -1;
			if (clen)
				out[clen++] = '/';
			memcpy(out + clen, s, l);
			clen += l;
			out[clen] = '\0';
			if (exists && fstatat(mfd, out, &st, AT_SYMLINK_NOFOLLOW) != 0)
				exists = false;
			if (exists && S_ISLNK(st.st_mode)) {
				char t[EGRESS_PATH_MAX], parent[EGRESS_PATH_MAX];
				ssize_t r;

				/* Past the bound the kernel refuses the path (ELOOP): nothing is
				 * reached through it; the rest is resolved lexically. */
				if (++*hops > LINK_HOPS_MAX) {
					exists = false;
					goto next;
				}
				r = readlinkat(mfd, out, t, sizeof(t) - 1);
				if (r <= 0)
					return -1;
				t[r] = '\0';
				memcpy(parent, out, parent_len);
				parent[parent_len] = '\0';
				if (link_resolve(mfd, parent, t, out, outlen, hops) != 0)
					return -1;
				clen = strlen(out);
			}
		}
next:
		if (e == NULL)
			break;
		s = e + 1;
	}
	return 0;
}

/* Mark every link the worker wrote that escapes (see changes.h). */
static int
links_check(const char *merged_dir, struct changeset *cs, char *err, size_t errlen)
{
	int mfd = -1;

	for (size_t i = 0; i < cs->n; i++) {
		struct change *c = &cs->v[i];
		char t[EGRESS_PATH_MAX], dir[EGRESS_PATH_MAX], res[EGRESS_PATH_MAX];
		const char *sl;
		unsigned hops = 0;
		ssize_t r;

		if (!c->is_link)
			continue;
		if (mfd < 0 && (mfd = open(merged_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
			snprintf(err, errlen, "open %s: %s", merged_dir, strerror(errno));
			return -1;
		}
		r = readlinkat(mfd, c->path, t, sizeof(t) - 1);
		if (r < 0) {
			/* gone or replaced since the walk: nothing runs any more, so this is
			 * the merged view disagreeing with its upper layer */
			snprintf(err, errlen, "readlink %s: %s", c->path, strerror(errno));
			close(mfd);
			return -1;
		}
		t[r] = '\0';
		sl = strrchr(c->path, '/');
		snprintf(dir, sizeof(dir), "%.*s", sl ? (int)(sl - c->path) : 0, c->path);
		c->link_escape = link_resolve(mfd, dir, t, res, sizeof(res), &hops) != 0;
	}
	if (mfd >= 0)
		close(mfd);
	return 0;
}

int
changes_compute(const char *repo_dir, const char *merged_dir, const char *upper_dir,
    struct changeset *cs, char *err, size_t errlen)
{
	int rc;

	memset(cs, 0, sizeof(*cs));
	git_init_once();
	if (base_commit(repo_dir, cs->base_commit, sizeof(cs->base_commit)) != 0) {
		git_err(err, errlen, "open repository");
		return -1;
	}
	/* The upper layer first: git reads the merged view only once nothing in it can make
	 * git block or follow the worker's symlinks out of the repository. */
	if (upper_dir != NULL && (rc = collect_upper(repo_dir, upper_dir, cs, err, errlen)) != 0) {
		if (rc == CHANGES_UNSAFE || rc == CHANGES_UNSAFE_GIT) {
			/* the upper layer alone names every write: report it, without git */
			char lerr[256];
			cs_merge(cs);
			if (cs->n > EGRESS_CHANGED_PATHS_MAX) {
				snprintf(err, errlen, "more than %d changed paths",
				    EGRESS_CHANGED_PATHS_MAX);
				rc = CHANGES_TOO_MANY;
				goto fail;
			}
			if (links_check(merged_dir, cs, lerr, sizeof(lerr)) != 0) {
				snprintf(err, errlen, "%s", lerr);
				goto fail;
			}
			return rc;
		}
		goto fail;
	}
	if ((rc = collect_git(repo_dir, merged_dir, cs, err, errlen)) != 0)
		goto fail;
	cs_merge(cs);
	if (cs->n > EGRESS_CHANGED_PATHS_MAX) {
		snprintf(err, errlen, "more than %d changed paths", EGRESS_CHANGED_PATHS_MAX);
		rc = CHANGES_TOO_MANY;
		goto fail;
	}
	if ((rc = links_check(merged_dir, cs, err, errlen)) != 0)
		goto fail;
	return 0;
fail:
	changes_free(cs);
	return rc == CHANGES_TOO_MANY || rc == CHANGES_UNSAFE || rc == CHANGES_UNSAFE_GIT ? rc :
	    -1;
}

/* Length of a valid UTF-8 sequence at s (1-4), or 0. */
static size_t
utf8_len(const unsigned char *s)
{
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (s[0] >= 0xe0 && s[0] <= 0xef) {
		if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
			return 0;
		if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f))
			return 0;
		return 3;
	}
	if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
			return 0;
		if ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
			return 0;
		return 4;
	}
	return 0;
}

void
changes_path_display(const char *p, char *buf, size_t len)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t o = 0;

	if (len == 0)
		return;
	while (*s) {
		size_t ul = utf8_len(s);
		bool ctl = *s < 0x20 || *s == 0x7f || *s == '\\';
		if (ul == 0 || ctl) {
			if (o + 4 >= len)
				break;
			snprintf(buf + o, len - o, "\\x%02x", *s);
			o += 4;
			s++;
			continue;
		}
		if (o + ul >= len)
			break;
		memcpy(buf + o, s, ul);
		o += ul;
		s += ul;
	}
	buf[o] = '\0';
}

json_t *
changes_to_json(const struct changeset *cs)
{
	json_t *a = json_array();
	char buf[EGRESS_PATH_MAX * 4 + 1];

	if (a == NULL)
		return NULL;
	for (size_t i = 0; i < cs->n; i++) {
		const struct change *c = &cs->v[i];
		json_t *o = json_object();
		changes_path_display(c->path, buf, sizeof(buf));
		json_object_set_new(o, "path", json_string(buf));
		if (c->old_path != NULL) {
			changes_path_display(c->old_path, buf, sizeof(buf));
			json_object_set_new(o, "old_path", json_string(buf));
		}
		json_object_set_new(o, "git", c->git_status ? json_string(c->git_status) :
		    json_null());
		json_object_set_new(o, "upper", c->upper_kind ? json_string(c->upper_kind) :
		    json_null());
		/* Ignored files and paths git did not report have no hunk in candidate.diff:
		 * say so rather than let the diff look complete. */
		json_object_set_new(o, "in_diff", json_boolean(c->git_status != NULL &&
		    strcmp(c->git_status, "ignored") != 0));
		json_array_append_new(a, o);
	}
	return a;
}

size_t
changes_ignored_summary(const struct changeset *cs, char *buf, size_t len)
{
	size_t n = 0, o = 0, shown = 0;
	char disp[256];

	for (size_t i = 0; i < cs->n; i++)
		if (cs->v[i].git_status != NULL && strcmp(cs->v[i].git_status, "ignored") == 0)
			n++;
	if (len == 0)
		return n;
	buf[0] = '\0';
	if (n == 0)
		return 0;
	o = (size_t)snprintf(buf, len, "%zu changed path%s ignored by .gitignore, not in "
	    "candidate.diff (in_diff false in manifest.json):", n, n == 1 ? " is" : "s are");
	for (size_t i = 0; i < cs->n && shown < 5 && o < len; i++) {
		if (cs->v[i].git_status == NULL || strcmp(cs->v[i].git_status, "ignored") != 0)
			continue;
		changes_path_display(cs->v[i].path, disp, sizeof(disp));
		o += (size_t)snprintf(buf + o, len - o, "%s %s", shown ? "," : "", disp);
		shown++;
	}
	if (n > shown && o < len)
		snprintf(buf + o, len - o, ", ...");
	return n;
}
