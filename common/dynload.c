/* dynload.c - a library loaded on first use (see dynload.h). */
#define _GNU_SOURCE
#include "common/dynload.h"

#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#include "common/log.h"

int
dynload_once(struct dynload *dl, char *err, size_t errlen)
{
	if (!dl->tried) {
		void *h;

		dl->tried = true;
		dl->rc = -1;
		/* RTLD_NOW: every symbol resolved here, before any confinement. */
		h = dlopen(dl->soname, RTLD_NOW | RTLD_LOCAL);
		if (h == NULL) {
			const char *e = dlerror();

			snprintf(dl->err, sizeof(dl->err), "cannot load %s: %s", dl->soname,
			    e != NULL ? e : "unknown error");
			goto out;
		}
		for (size_t i = 0; i < dl->nslots; i++) {
			char sym[128];

			snprintf(sym, sizeof(sym), "%s%s", dl->prefix, dl->names[i]);
			dl->slots[i] = dlsym(h, sym);
			if (dl->slots[i] == NULL) {
				snprintf(dl->err, sizeof(dl->err), "%s has no %s", dl->soname, sym);
				goto out;
			}
		}
		dl->rc = 0;   /* the handle stays open for the life of the process */
	}
out:
	if (dl->rc != 0 && err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", dl->err);
	return dl->rc;
}

void
dynload_need(struct dynload *dl, const char *what)
{
	char err[256];

	if (dynload_once(dl, err, sizeof(err)) != 0) {
		log_warnx("%s: %s", what, err);
		_exit(70);
	}
}
