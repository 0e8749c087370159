/* stderrcap.h - what a unit test's code under test writes to stderr (the operator log),
 * captured into an unlinked temporary file: stderrcap_start puts that file on fd 2,
 * stderrcap_end puts stderr back and reads what was written. A file, not a pipe: nothing
 * the code writes can block on a full pipe while the test waits.
 * Header-only; include it after <cmocka.h> (it asserts). */
#ifndef EGRESS_TEST_STDERRCAP_H
#define EGRESS_TEST_STDERRCAP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct stderrcap {
	int fd;                 /* the capture file (unlinked) */
	int saved;              /* stderr as it was */
};

static inline void
stderrcap_start(struct stderrcap *c)
{
	char path[] = "/tmp/egress-stderr-XXXXXX";

	fflush(stderr);
	c->fd = mkstemp(path);
	assert_true(c->fd >= 0);
	unlink(path);
	c->saved = dup(STDERR_FILENO);
	assert_true(c->saved >= 0);
	assert_true(dup2(c->fd, STDERR_FILENO) == STDERR_FILENO);
}

/* Restores stderr; out (cap bytes) gets what was written, NUL-terminated, cut at cap - 1.
 * Returns its length. */
static inline size_t
stderrcap_end(struct stderrcap *c, char *out, size_t cap)
{
	ssize_t n;

	fflush(stderr);
	assert_true(dup2(c->saved, STDERR_FILENO) == STDERR_FILENO);
	close(c->saved);
	n = pread(c->fd, out, cap - 1, 0);
	assert_true(n >= 0);
	out[n] = '\0';
	close(c->fd);
	return (size_t)n;
}

/* How many times needle occurs in s. */
static inline size_t
stderrcap_count(const char *s, const char *needle)
{
	size_t n = 0;

	for (const char *q = s; (q = strstr(q, needle)) != NULL; q++)
		n++;
	return n;
}

#endif
