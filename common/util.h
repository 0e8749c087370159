/*
 * util - tiny helpers every module may use: TESTABLE, cleanup attributes, checked numbers.
 */
#ifndef EGRESS_UTIL_H
#define EGRESS_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* File-local in release builds; visible to unit tests when EGRESS_TESTING is defined. */
#ifdef EGRESS_TESTING
#define TESTABLE
#else
#define TESTABLE static
#endif

#define EGRESS_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* bubblewrap-style cleanup for short linear setup code. */
static inline void egress_freep(void *p) { free(*(void **)p); }
static inline void egress_closep(int *fd) { if (*fd >= 0) close(*fd); }
#define _cleanup_free_  __attribute__((cleanup(egress_freep)))
#define _cleanup_fd_    __attribute__((cleanup(egress_closep)))

static inline void *
egress_steal_ptr(void *pp)
{
	void **p = pp;
	void *v = *p;
	*p = NULL;
	return v;
}
#define steal_pointer(pp) egress_steal_ptr(pp)

static inline int
egress_steal_fd(int *fd)
{
	int v = *fd;
	*fd = -1;
	return v;
}

/*
 * Parse a whole string as a decimal integer in [min, max] (OpenBSD strtonum): no sign
 * unless min < 0, no leading/trailing junk, no overflow. Returns 0 and sets *out, or -1
 * with *errstr set to a static description ("too large", "invalid").
 */
int num_parse(const char *s, long long min, long long max, long long *out, const char **errstr);

/* Checked arithmetic: return nonzero on overflow. */
#define ckd_add_sz(r, a, b) __builtin_add_overflow((a), (b), (r))
#define ckd_mul_sz(r, a, b) __builtin_mul_overflow((a), (b), (r))

/* Constant-time wipe for secrets (explicit_bzero). */
void secret_wipe(void *p, size_t n);

/* Lowercase hex of n bytes into out (2n+1 bytes). */
void hex_encode(const unsigned char *in, size_t n, char *out);

/* Monotonic clock in microseconds / milliseconds. */
uint64_t mono_usec(void);
uint64_t mono_msec(void);

#endif
