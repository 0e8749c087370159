/*
 * pathglob - canonical repository paths and fnmatchcase-style globs over them.
 *
 * Owns: the definition of a canonical git-style path and the glob semantics used by
 * WorkUnit scope (allowed_paths / forbidden_paths) and the scope check.
 * Semantics follow Python's fnmatch.fnmatchcase exactly (CPython 3.11 translate() then
 * re.fullmatch with DOTALL), on Unicode code points decoded from UTF-8 (an invalid byte
 * counts as one character, as os.fsdecode's surrogateescape does): case-sensitive; '*'
 * matches any run of characters including '/' and newline; '?' one character including
 * '/'; "[...]" classes where only a leading '!' negates ('^' is literal), a ']' first in
 * the class (after '!') is literal, "a-z" ranges, reversed ranges are dropped, a '-'
 * first or last is literal; an unclosed '[' matches a literal '['. There is no escape
 * character. Matching is iterative (two-pointer star algorithm): O(len(pattern) *
 * len(name)) time, no recursion, no exponential backtracking.
 * A pattern with no glob characters that names a directory also matches everything
 * beneath it ("src" matches "src/a/b.c").
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

/*
 * Check that p is a canonical repository path; never normalizes. Non-empty, at most
 * EGRESS_REPO_PATH_MAX bytes, relative, '/' separators only, no control characters
 * (< 0x20 or DEL), no empty, "." or ".." components, no trailing '/'. Other bytes
 * (including non-UTF-8) are allowed: git allows them. The first problem found is
 * returned, checking characters before components.
 */
enum path_err path_check(const char *p);
const char *path_err_str(enum path_err e);

/*
 * git's own rules for names it treats as its repository directory, applied whatever the
 * file system (core.protectNTFS and core.protectHFS both on, as git does by default on
 * the systems where they matter, and as a reviewer on any system needs):
 *   - ".git" in any case;
 *   - NTFS: ".git" or the short name "git~1" followed only by spaces and periods, or by
 *     ':' (an alternate data stream): ".git.", ".git ", "GIT~1", ".git::$INDEX_ALLOCATION";
 *   - HFS+: ".git" with any of the code points HFS+ ignores (U+200C-U+200F,
 *     U+202A-U+202E, U+206A-U+206F, U+FEFF) anywhere, any case: ".g\u200cit";
 *     an invalid UTF-8 sequence right after ".git" counts as its end, as in git.
 * path_component_is_dotgit judges one component of len bytes; path_has_dotgit every
 * component of a '/'-separated path.
 */
bool path_component_is_dotgit(const char *c, size_t len);
bool path_has_dotgit(const char *path);

/*
 * The last component of path names one of git's control files that git refuses as a
 * symbolic link (.gitmodules, .gitattributes, .gitignore, .mailmap), under the same NTFS
 * (including the 8.3 short names "gitmod~1", "gi7eba~1" ...) and HFS+ equivalences.
 */
bool path_is_git_control_file(const char *path);

/*
 * True when pattern is usable: not NULL and at most EGRESS_GLOB_MAX bytes. Callers check
 * patterns when loading them, so that a too-long forbidden pattern is an error at load
 * time instead of a silent non-match.
 */
bool glob_valid(const char *pattern);
/* fnmatchcase(name, pattern). False when pattern is not glob_valid or name is NULL. */
bool glob_match(const char *pattern, const char *name);
/* glob_match, or pattern is non-empty, literal (no *?[) and names a parent directory of
 * name: name starts with pattern followed by '/'. */
bool path_glob_match(const char *pattern, const char *name);
/* True when pattern contains glob metacharacters. */
bool glob_is_pattern(const char *pattern);


#endif
