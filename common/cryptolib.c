/*
 * cryptolib - libcrypto loaded on first use (see cryptolib.h for why and who calls it).
 */
#include "common/cryptolib.h"

#include "common/dynload.h"

#ifndef EGRESS_LIBCRYPTO_SONAME
#error "EGRESS_LIBCRYPTO_SONAME must name libcrypto's soname (common/CMakeLists.txt)"
#endif

struct cryptolib cryptolib;

static const char *const names[] = { CRYPTOLIB_FUNCS(DYNLOAD_NAME) };
DYNLOAD_CHECK(struct cryptolib, names);
static struct dynload dl = {
	.soname = EGRESS_LIBCRYPTO_SONAME,
	.prefix = "",
	.names = names,
	.slots = (void **)&cryptolib,
	.nslots = DYNLOAD_COUNT(names),
};

int
cryptolib_load(char *err, size_t errlen)
{
	return dynload_once(&dl, err, errlen);
}

const struct cryptolib *
cryptolib_need(void)
{
	if (!dl.tried || dl.rc != 0)
		dynload_need(&dl, "libcrypto");
	return &cryptolib;
}
