/*
 * gitlib - libgit2, loaded when it is first needed instead of when egress-exec starts.
 *
 * Owns: the one dlopen of libgit2 (EGRESS_LIBGIT2_SONAME, through common/dynload.h) and
 * the table of the libgit2 functions egress-exec calls. Every file that calls libgit2
 * includes this header instead of <git2.h>: each git_*() call below goes through the table
 * (the types and constants are git2.h's own).
 * Callers: executor/changes.c, artifacts.c, scope.c, orchestrate.c, repocheck.c (through
 * changes.h); gitlib_load before anything confines the process (the collector's root
 * holds no libraries): executor/orchestrate.c before the collector's fork,
 * executor/repocheck.c.
 *
 * Why: libgit2 and what it links (mbedtls, libssh2, krb5, pcre2, http_parser...) were 15
 * of egress-exec's 26 shared libraries, loaded and relocated by every run before its
 * first instruction and copied by each of its forks, for the collector and the admission
 * check alone (docs/performance.md, start-up). A simple `run` never calls libgit2.
 *
 * Failure is fail-closed: gitlib_load returns -1 with the loader's message; a call through
 * the table when the library could not be loaded ends the process with that message
 * (exit 70), which a collector reports as collector_failed and a caller as internal_error.
 */
#ifndef EGRESS_GITLIB_H
#define EGRESS_GITLIB_H

#include <stddef.h>

#include <git2.h>

#define GITLIB_FUNCS(X) \
	X(commit_free) X(commit_lookup) X(commit_tree) X(diff_find_options_init) \
	X(diff_find_similar) X(diff_free) X(diff_get_delta) X(diff_num_deltas) \
	X(diff_options_init) X(diff_print) X(diff_tree_to_workdir) X(error_last) \
	X(libgit2_init) X(libgit2_opts) X(libgit2_shutdown) X(oid_equal) X(oid_fromstr) \
	X(oid_is_zero) X(oid_tostr) X(reference_name_to_id) X(repository_free) \
	X(repository_head_unborn) X(repository_is_bare) X(repository_open_ext) \
	X(repository_set_workdir) X(repository_workdir) X(status_byindex) \
	X(status_list_entrycount) X(status_list_free) X(status_list_new) \
	X(status_options_init) X(tree_free)

struct gitlib {
#define GITLIB_MEMBER(n) __typeof__(git_##n) *n;
	GITLIB_FUNCS(GITLIB_MEMBER)
#undef GITLIB_MEMBER
};

extern struct gitlib gitlib;

/* Load libgit2 and resolve every function of the table (once; later calls return the
 * first result). 0, or -1 with the loader's message in err. */
int gitlib_load(char *err, size_t errlen);

/* The table, loaded: gitlib_load, or the process ends (exit 70) with its message. */
const struct gitlib *gitlib_need(void);

/* Every libgit2 call of egress-exec, through the table. */
#define git_commit_free(...)              (gitlib_need()->commit_free(__VA_ARGS__))
#define git_commit_lookup(...)            (gitlib_need()->commit_lookup(__VA_ARGS__))
#define git_commit_tree(...)              (gitlib_need()->commit_tree(__VA_ARGS__))
#define git_diff_find_options_init(...)   (gitlib_need()->diff_find_options_init(__VA_ARGS__))
#define git_diff_find_similar(...)        (gitlib_need()->diff_find_similar(__VA_ARGS__))
#define git_diff_free(...)                (gitlib_need()->diff_free(__VA_ARGS__))
#define git_diff_get_delta(...)           (gitlib_need()->diff_get_delta(__VA_ARGS__))
#define git_diff_num_deltas(...)          (gitlib_need()->diff_num_deltas(__VA_ARGS__))
#define git_diff_options_init(...)        (gitlib_need()->diff_options_init(__VA_ARGS__))
#define git_diff_print(...)               (gitlib_need()->diff_print(__VA_ARGS__))
#define git_diff_tree_to_workdir(...)     (gitlib_need()->diff_tree_to_workdir(__VA_ARGS__))
#define git_error_last(...)               (gitlib_need()->error_last(__VA_ARGS__))
#define git_libgit2_init(...)             (gitlib_need()->libgit2_init(__VA_ARGS__))
#define git_libgit2_opts(...)             (gitlib_need()->libgit2_opts(__VA_ARGS__))
#define git_libgit2_shutdown(...)         (gitlib_need()->libgit2_shutdown(__VA_ARGS__))
#define git_oid_equal(...)                (gitlib_need()->oid_equal(__VA_ARGS__))
#define git_oid_fromstr(...)              (gitlib_need()->oid_fromstr(__VA_ARGS__))
#define git_oid_is_zero(...)              (gitlib_need()->oid_is_zero(__VA_ARGS__))
#define git_oid_tostr(...)                (gitlib_need()->oid_tostr(__VA_ARGS__))
#define git_reference_name_to_id(...)     (gitlib_need()->reference_name_to_id(__VA_ARGS__))
#define git_repository_free(...)          (gitlib_need()->repository_free(__VA_ARGS__))
#define git_repository_head_unborn(...)   (gitlib_need()->repository_head_unborn(__VA_ARGS__))
#define git_repository_is_bare(...)       (gitlib_need()->repository_is_bare(__VA_ARGS__))
#define git_repository_open_ext(...)      (gitlib_need()->repository_open_ext(__VA_ARGS__))
#define git_repository_set_workdir(...)   (gitlib_need()->repository_set_workdir(__VA_ARGS__))
#define git_repository_workdir(...)       (gitlib_need()->repository_workdir(__VA_ARGS__))
#define git_status_byindex(...)           (gitlib_need()->status_byindex(__VA_ARGS__))
#define git_status_list_entrycount(...)   (gitlib_need()->status_list_entrycount(__VA_ARGS__))
#define git_status_list_free(...)         (gitlib_need()->status_list_free(__VA_ARGS__))
#define git_status_list_new(...)          (gitlib_need()->status_list_new(__VA_ARGS__))
#define git_status_options_init(...)      (gitlib_need()->status_options_init(__VA_ARGS__))
#define git_tree_free(...)                (gitlib_need()->tree_free(__VA_ARGS__))

#endif
