/*
 * opaque - opaque overlay directories found by comparison, not by xattr (see opaque.h).
 */
#define _GNU_SOURCE
#include "executor/opaque.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/limits.h"

#define OPAQUE_DEPTH_MAX 256   /* as changes.c: deeper upper layers are refused there first */

struct opq {
	struct changeset *cs;
	int lowerfd, mergedfd;
	char rel[EGRESS_PATH_MAX];
	bool appended;
	char *err;
	size_t errlen;
};

/* openat2 beneath dirfd without following any symlink: the repository is the host's,
 * but nothing here should leave it. */
static int
opq_open_dir(int dirfd, const char *rel)
{
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };

	return (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
}

static int
opq_mark(struct opq *q)
{
	struct changeset *cs = q->cs;

	for (size_t i = 0; i < cs->n; i++) {
		if (strcmp(cs->v[i].path, q->rel) == 0) {
			if (cs->v[i].upper_kind == NULL || strcmp(cs->v[i].upper_kind, "written") != 0)
				cs->v[i].upper_kind = "opaque";
			return 0;
		}
	}
	if (cs->n >= EGRESS_CHANGED_PATHS_MAX) {
		snprintf(q->err, q->errlen, "more than %d changed paths", EGRESS_CHANGED_PATHS_MAX);
		return CHANGES_TOO_MANY;
	}
	if (cs->n == cs->cap) {
		size_t ncap = cs->cap ? cs->cap * 2 : 16;
		struct change *nv = reallocarray(cs->v, ncap, sizeof(*nv));
		if (nv == NULL)
			goto oom;
		cs->v = nv;
		cs->cap = ncap;
	}
	memset(&cs->v[cs->n], 0, sizeof(cs->v[cs->n]));
	if ((cs->v[cs->n].path = strdup(q->rel)) == NULL)
		goto oom;
	cs->v[cs->n].upper_kind = "opaque";
	cs->n++;
	q->appended = true;
	return 0;
oom:
	snprintf(q->err, q->errlen, "changed set: out of memory");
	return -1;
}

/* Is the upper directory ufd (at q->rel) opaque? 1 yes, 0 no, -1 error. */
static int
opq_check(struct opq *q, int ufd)
{
	int lfd = opq_open_dir(q->lowerfd, q->rel), mfd, rc = 0;
	DIR *d;
	struct dirent *de;
	struct stat st;

	if (lfd < 0)
		return 0;      /* not a directory in the repository: new, reported as written */
	mfd = opq_open_dir(q->mergedfd, q->rel);
	if (mfd < 0 || (d = fdopendir(lfd)) == NULL) {
		snprintf(q->err, q->errlen, "opaque check %s: %s", q->rel, strerror(errno));
		close(lfd);
		if (mfd >= 0)
			close(mfd);
		return -1;
	}
	while (rc == 0) {
		errno = 0;
		if ((de = readdir(d)) == NULL) {
			if (errno != 0) {
				snprintf(q->err, q->errlen, "opaque check %s: %s", q->rel,
				    strerror(errno));
				rc = -1;
			}
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(ufd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			continue;           /* named by the upper layer: written or whited out */
		if (errno == ENOENT && fstatat(mfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 &&
		    errno == ENOENT)
			rc = 1;             /* hidden by the directory itself */
		else if (errno != 0 && errno != ENOENT) {
			snprintf(q->err, q->errlen, "opaque check %s/%s: %s", q->rel, de->d_name,
			    strerror(errno));
			rc = -1;
		}
	}
	closedir(d);
	close(mfd);
	return rc;
}

/* Walk the upper directory dfd (consumed) at q->rel (length rellen). */
static int
opq_walk(struct opq *q, int dfd, size_t rellen, unsigned depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int rc = 0;

	if (d == NULL) {
		snprintf(q->err, q->errlen, "upper layer: %s", strerror(errno));
		close(dfd);
		return -1;
	}
	while (rc == 0) {
		struct stat st;
		size_t nl;
		int cfd, o;

		errno = 0;
		if ((de = readdir(d)) == NULL) {
			if (errno != 0) {
				snprintf(q->err, q->errlen, "upper layer: %s", strerror(errno));
				rc = -1;
			}
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		nl = strlen(de->d_name);
		if (depth >= OPAQUE_DEPTH_MAX || rellen + 1 + nl >= sizeof(q->rel)) {
			/* changes_compute refuses these first (too deep or too long) */
			snprintf(q->err, q->errlen, "upper layer nested too deep");
			rc = CHANGES_TOO_MANY;
			break;
		}
		if (rellen)
			q->rel[rellen] = '/';
		memcpy(q->rel + rellen + (rellen ? 1 : 0), de->d_name, nl + 1);
		cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0) {
			snprintf(q->err, q->errlen, "upper layer %s: %s", q->rel, strerror(errno));
			rc = -1;
			break;
		}
		o = opq_check(q, cfd);
		if (o < 0 || (o == 1 && (rc = opq_mark(q)) != 0)) {
			close(cfd);
			rc = rc ? rc : -1;
			break;
		}
		rc = opq_walk(q, cfd, rellen + (rellen ? 1 : 0) + nl, depth + 1);
		q->rel[rellen] = '\0';
	}
	closedir(d);
	return rc;
}

static int
opq_change_cmp(const void *a, const void *b)
{
	return strcmp(((const struct change *)a)->path, ((const struct change *)b)->path);
}

int
opaque_add(const char *repo, const char *merged, const char *upper,
    struct changeset *cs, char *err, size_t errlen)
{
	struct opq q = { .cs = cs, .err = err, .errlen = errlen, .lowerfd = -1, .mergedfd = -1 };
	int ufd, rc = -1;

	q.lowerfd = open(repo, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	q.mergedfd = open(merged, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ufd = open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (q.lowerfd < 0 || q.mergedfd < 0 || ufd < 0) {
		snprintf(err, errlen, "opaque check: %s", strerror(errno));
		if (ufd >= 0)
			close(ufd);
	} else {
		rc = opq_walk(&q, ufd, 0, 0);
	}
	if (q.lowerfd >= 0)
		close(q.lowerfd);
	if (q.mergedfd >= 0)
		close(q.mergedfd);
	if (q.appended)
		qsort(cs->v, cs->n, sizeof(*cs->v), opq_change_cmp);
	return rc;
}

