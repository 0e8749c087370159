/*
 * cryptolib - libcrypto loaded on first use (see cryptolib.h for why and who calls it).
 */
#define _GNU_SOURCE
#include "common/cryptolib.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include "common/log.h"

#ifndef EGRESS_LIBCRYPTO_SONAME
#error "EGRESS_LIBCRYPTO_SONAME must name libcrypto's soname (common/CMakeLists.txt)"
#endif

struct cryptolib cryptolib;

static bool cryptolib_tried;
static int cryptolib_rc;
static char cryptolib_err[256];

int
cryptolib_load(char *err, size_t errlen)
{
	void *h;

	if (!cryptolib_tried) {
		cryptolib_tried = true;
		cryptolib_rc = -1;
		/* RTLD_NOW: every symbol resolved here, before any confinement. */
		h = dlopen(EGRESS_LIBCRYPTO_SONAME, RTLD_NOW | RTLD_LOCAL);
		if (h == NULL) {
			const char *e = dlerror();
			snprintf(cryptolib_err, sizeof(cryptolib_err), "cannot load %s: %s",
			    EGRESS_LIBCRYPTO_SONAME, e != NULL ? e : "unknown error");
			goto out;
		}
#define CRYPTOLIB_RESOLVE(n)                                                           \
		*(void **)&cryptolib.n = dlsym(h, #n);                                  \
		if (cryptolib.n == NULL) {                                              \
			snprintf(cryptolib_err, sizeof(cryptolib_err), "%s has no %s",     \
			    EGRESS_LIBCRYPTO_SONAME, #n);                                   \
			goto out;                                                       \
		}
		CRYPTOLIB_FUNCS(CRYPTOLIB_RESOLVE)
#undef CRYPTOLIB_RESOLVE
		cryptolib_rc = 0;   /* the handle stays open for the life of the process */
	}
out:
	if (cryptolib_rc != 0 && err != NULL)
		snprintf(err, errlen, "%s", cryptolib_err);
	return cryptolib_rc;
}

const struct cryptolib *
cryptolib_need(void)
{
	if (!cryptolib_tried || cryptolib_rc != 0) {
		char err[256];

		if (cryptolib_load(err, sizeof(err)) != 0) {
			log_warnx("libcrypto: %s", err);
			_exit(70);
		}
	}
	return &cryptolib;
}
