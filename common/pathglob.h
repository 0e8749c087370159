/*
 * pathglob - canonical repository paths and fnmatchcase-style globs over them.
 *
 * Owns: the definition of a canonical git-style path and the glob semantics used by
 * WorkUnit scope (allowed_paths / forbidden_paths) and the scope check.
 * Semantics follow Python's fnmatch.fnmatchcase: case-sensitive; '*' matches any run of
 * characters including '/'; '?' one character including '/'; "[...]" classes with '!' or
 * '^'? -> only '!' negates (as fnmatch), ranges "a-z", a ']' first in the class is literal;
 * an unclosed '[' matches a literal '['. A pattern with no glob characters that names a
 * directory also matches everything beneath it ("src" matches "src/a/b.c").
 * No allocation.
 */
#ifndef EGRESS_PATHGLOB_H
#define EGRESS_PATHGLOB_H

#include <stdbool.h>
#include <stddef.h>

enum path_err {
	PATH_OK = 0,
	PATH_ERR_EMPTY,
	PATH_ERR_TOO_LONG,
	PATH_ERR_ABSOLUTE,      /* starts with '/' */
	PATH_ERR_BACKSLASH,
	PATH_ERR_CONTROL,       /* control characters or DEL */
	PATH_ERR_EMPTY_COMPONENT, /* "a//b", trailing '/' */
	PATH_ERR_DOT,           /* a "." component */
	PATH_ERR_DOTDOT,        /* a ".." component */
};

/* Check that p is a canonical repository path; never normalizes. */
enum path_err path_check(const char *p);
const char *path_err_str(enum path_err e);

/* fnmatchcase(name, pattern). */
bool glob_match(const char *pattern, const char *name);
/* glob_match, or pattern is literal (no *?[) and names a parent directory of name. */
bool path_glob_match(const char *pattern, const char *name);
/* True when pattern contains glob metacharacters. */
bool glob_is_pattern(const char *pattern);

#endif
