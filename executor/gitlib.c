/*
 * gitlib - libgit2 loaded on first use (see gitlib.h for why and who calls it).
 */
#define _GNU_SOURCE
#include "executor/gitlib.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/log.h"

#ifndef EGRESS_LIBGIT2_SONAME
#error "EGRESS_LIBGIT2_SONAME must name libgit2's soname (executor/CMakeLists.txt)"
#endif

struct gitlib gitlib;

static bool gitlib_tried;
static int gitlib_rc;
static char gitlib_err[256];

int
gitlib_load(char *err, size_t errlen)
{
	void *h;

	if (!gitlib_tried) {
		gitlib_tried = true;
		gitlib_rc = -1;
		/* RTLD_NOW: every symbol resolved here, before any confinement, never on a
		 * later call inside the collector's root (which holds no libraries). */
		h = dlopen(EGRESS_LIBGIT2_SONAME, RTLD_NOW | RTLD_LOCAL);
		if (h == NULL) {
			const char *e = dlerror();
			snprintf(gitlib_err, sizeof(gitlib_err), "cannot load %s: %s",
			    EGRESS_LIBGIT2_SONAME, e != NULL ? e : "unknown error");
			goto out;
		}
#define GITLIB_RESOLVE(n)                                                              \
		*(void **)&gitlib.n = dlsym(h, "git_" #n);                              \
		if (gitlib.n == NULL) {                                                 \
			snprintf(gitlib_err, sizeof(gitlib_err), "%s has no git_%s",      \
			    EGRESS_LIBGIT2_SONAME, #n);                                     \
			goto out;                                                       \
		}
		GITLIB_FUNCS(GITLIB_RESOLVE)
#undef GITLIB_RESOLVE
		gitlib_rc = 0;   /* the handle stays open for the life of the process */
	}
out:
	if (gitlib_rc != 0 && err != NULL)
		snprintf(err, errlen, "%s", gitlib_err);
	return gitlib_rc;
}

const struct gitlib *
gitlib_need(void)
{
	if (!gitlib_tried || gitlib_rc != 0) {
		char err[256];

		if (gitlib_load(err, sizeof(err)) != 0) {
			log_warnx("libgit2: %s", err);
			_exit(70);
		}
	}
	return &gitlib;
}
