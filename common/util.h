/*
 * util - tiny helpers every module may use: TESTABLE, cleanup attributes, checked numbers,
 * the error-buffer convention, write_all.
 */
#ifndef EGRESS_UTIL_H
#define EGRESS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
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

/* The decimal digits of v at out (at most EGRESS_U64_DEC_MAX bytes, not terminated);
 * returns how many. The one formatter of the hot paths that must not go through
 * printf (records, addresses, connection ids). */
#define EGRESS_U64_DEC_MAX 20
size_t u64_to_dec(char *out, uint64_t v);

/* Lowercase hex of n bytes into out (2n+1 bytes). */
void hex_encode(const unsigned char *in, size_t n, char *out);

/*
 * The error-buffer convention of the whole project: a function that can fail takes
 * (char *err, size_t errlen) and, on failure, leaves one line there for a person.
 * errbuf_set formats into err (nothing when err is NULL or errlen is 0) and, when
 * saved_errno is not 0, appends ": <strerror(saved_errno)>". Always returns -1, so a
 * helper can end with `return errbuf_set(err, errlen, errno, "open %s", path);`.
 * errno is preserved.
 */
int errbuf_set(char *err, size_t errlen, int saved_errno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Make sure file descriptors 0, 1 and 2 are open: each closed one is opened on /dev/null.
 * Called first thing in main(): started with one of them closed (a careless supervisor,
 * "2>&-"), a program's next open(2) or socket(2) would get that number, and its log lines
 * on stderr would go into that file or socket: the decision log, a client's connection.
 * out_writable: 1 and 2 are opened for writing (a daemon's log lines vanish quietly);
 * false: read-only, so that a tool whose output was closed still fails to write it (and
 * says so in its exit status) instead of succeeding into /dev/null.
 * Returns 0, or -1 with errno when /dev/null cannot be opened (the caller exits).
 */
int stdio_ensure(bool out_writable);

/*
 * Whether s[0..n) is well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates
 * (U+D800-U+DFFF), nothing above U+10FFFF, no truncated sequence. An embedded NUL counts
 * as a character. What JSON text (jansson) and the decision log accept as a string.
 */
bool utf8_valid(const char *s, size_t n);

/* The length (1-4) of the well-formed UTF-8 sequence at s[0..n), or 0 when none starts
 * there (the rules of utf8_valid). */
size_t utf8_seq_len(const char *s, size_t n);

/*
 * A malloc'd copy of the NUL-terminated s that is valid UTF-8 whatever s holds: every
 * well-formed sequence as it is, every other byte as the code point of the same number
 * (U+0080-U+00FF), the way egressd's record writer (jsonw) escapes such a byte. For text
 * from outside (a path, an error message quoting a file) that goes into a JSON record,
 * where jansson refuses invalid UTF-8 and the member would be lost. NULL when out of
 * memory.
 */
char *utf8_lossy_dup(const char *s);

/*
 * Write all len bytes to fd, retrying after EINTR and short writes. Returns 0, or -1 with
 * errno (EIO when write(2) returned 0). Async-signal-safe (only write(2)), so usable
 * between fork and exec.
 */
int write_all(int fd, const void *buf, size_t len);

/*
 * Read one line of at most max bytes (without newline) into buf (max + 1 bytes).
 * Returns 1 for a complete line, 2 for a final line without newline, 0 at EOF, -1 when
 * the line exceeds max (the rest of that line is skipped), -2 on a read error.
 * *len gets the length. NUL bytes are kept (the caller's parser refuses them). The one
 * bounded line reader for files: nothing is allocated from a length found in the file.
 */
int line_read(FILE *f, char *buf, size_t max, size_t *len);

/*
 * Read the small file path (opened O_RDONLY | O_CLOEXEC | extra_flags, e.g. O_NOFOLLOW)
 * into buf as a string: up to size - 1 bytes, NUL-terminated, retrying after EINTR and
 * short reads. Returns the length (0: empty), or -1 with errno. For /proc, /sys and
 * state files that fit a buffer the caller sizes; a longer file is cut at size - 1.
 */
ssize_t file_read_text(const char *path, int extra_flags, char *buf, size_t size);

/* A name people and paths both carry (principal labels, connection names, preset and
 * WorkUnit ids, run ids, user names): 1 to max characters of A-Z a-z 0-9 . _ -, and never
 * "." or "..". Pure; s may be NULL (false). */
bool label_valid(const char *s, size_t max);

/* True when the n bytes at s are lowercase hex digits (the form hex_encode writes: grant
 * ids, chain hashes). The caller has checked that s holds n bytes. Pure. */
bool hex_lower_is(const char *s, size_t n);

/* The value of one hex digit of either case, or -1. */
int hex_digit(char c);

/* Monotonic clock in microseconds / milliseconds. */
uint64_t mono_usec(void);
uint64_t mono_msec(void);

#endif
