/*
 * gitconfig - the repository configuration a worker sees: the host's .git/config with every
 * credential-bearing entry removed.
 *
 * Owns: the sanitizing rules (below; docs/sandbox.md "git inside" lists them for people)
 * and the buffer it returns (caller frees).
 * Callers: executor/mounts (mounts_git_writable, in the child before pivot_root), the fuzz
 * harness fuzz/fuzz_gitconfig.c. Pure: no I/O.
 *
 * The input is a repository's own config file: written by git, but also by whatever tool
 * ran in that checkout (actions/checkout leaves an Authorization header in
 * http.<url>.extraheader), so it is parsed as hostile bytes, line by line, bounded.
 *
 * Removed:
 *  - sections credential (any subsection), include, includeIf (an include could pull in a
 *    host file the worker never sees otherwise);
 *  - in http (any subsection): extraHeader, cookieFile, sslCert, sslKey, proxy; an http or
 *    url section whose subsection URL carries user information;
 *  - url.<base>.insteadOf / pushInsteadOf whose value carries user information;
 *  - core.sshCommand, core.askPass, core.fsmonitor (host programs and credential prompts),
 *    commit.gpgSign, tag.gpgSign (no signing key inside: a commit would fail);
 *  - a value continued over several lines (backslash-newline) that would need rewriting.
 * Rewritten: user information (scheme://user:password@host) removed from every other value
 * (remote.<name>.url, pushurl, submodule urls, ...). Kept: everything else, verbatim.
 * Added: a [user] section (name "egress worker", email worker@egress.invalid) when the file
 * has none, so `git commit` works inside; HOME has no global config.
 * Lines that cannot be parsed are dropped (counted), never passed through.
 */
#ifndef EGRESS_GITCONFIG_H
#define EGRESS_GITCONFIG_H

#include <stddef.h>

#define GITCONFIG_MAX (1024 * 1024)   /* larger input is refused whole */

/*
 * Sanitize in[0..len). Returns 0 with *out (NUL-terminated, malloc'd) and *outlen, and the
 * number of removed or rewritten entries in *changed; -1 when len > GITCONFIG_MAX or on
 * out-of-memory.
 */
int gitconfig_sanitize(const char *in, size_t len, char **out, size_t *outlen,
    unsigned *changed);

#endif
