/*
 * gitlib - libgit2 loaded on first use (see gitlib.h for why and who calls it).
 */
#include "executor/gitlib.h"

#include "common/dynload.h"

#ifndef EGRESS_LIBGIT2_SONAME
#error "EGRESS_LIBGIT2_SONAME must name libgit2's soname (executor/CMakeLists.txt)"
#endif

struct gitlib gitlib;

static const char *const names[] = { GITLIB_FUNCS(DYNLOAD_NAME) };
DYNLOAD_CHECK(struct gitlib, names);
/* RTLD_NOW (dynload.c): never resolved later inside the collector's root, which holds no
 * libraries */
static struct dynload dl = {
	.soname = EGRESS_LIBGIT2_SONAME,
	.prefix = "git_",
	.names = names,
	.slots = (void **)&gitlib,
	.nslots = DYNLOAD_COUNT(names),
};

int
gitlib_load(char *err, size_t errlen)
{
	return dynload_once(&dl, err, errlen);
}

const struct gitlib *
gitlib_need(void)
{
	if (!dl.tried || dl.rc != 0)
		dynload_need(&dl, "libgit2");
	return &gitlib;
}
