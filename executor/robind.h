/*
 * robind - which host paths an AgentPreset may show its worker read-only (`ro_bind`).
 *
 * Owns: the refusal rules for preset read-only binds (toolchains such as /opt/node, an
 * agent cache such as /var/cache/egress-agents) and the "is this file visible inside the
 * sandbox's view" question egress-exec check asks about the executable.
 * Callers: executor/admission (robind_check on every preset ro_bind, before anything runs),
 * executor/cmd_check (robind_visible for the executable), executor/preset
 * (robind_path_canonical for every path a preset names). Nothing here allocates.
 *
 * Why the preset and not the WorkUnit: what the worker can run is operation authority,
 * owned by the maintainer's preset; WorkUnit text never widens the view.
 *
 * A bind is refused (REASON_ADM_BIND_REFUSED, the message names the rule) when:
 *  - it is not an absolute canonical path (no ".", "..", "//", trailing "/", control
 *    characters), or it does not exist, or it is neither a directory nor a regular file;
 *  - a component is a symbolic link (realpath differs): the preset names exactly what
 *    is shown, never where a link happens to point at run time;
 *  - it is, contains or lies inside a sensitive path: "/", home directories (/home,
 *    /root and every passwd entry's home), credential and container-runtime locations
 *    (mounts_denied_paths: /etc/shadow, docker/containerd/podman sockets, ...), egressd's
 *    files (/etc/egressd, /var/log/egressd, /run/egressd, /var/lib/egressd), the run
 *    folder (/run/egress-exec), /run and /var/run as a whole, /proc, /dev, /sys;
 *  - it would replace what the sandbox builds itself (/etc, /tmp, /work) or lies inside a
 *    system directory the sandbox already shows (/usr, /bin, /sbin, /lib*: it is visible
 *    anyway, and a mount point cannot be made inside a read-only bind).
 */
#ifndef EGRESS_ROBIND_H
#define EGRESS_ROBIND_H

#include <stdbool.h>
#include <stddef.h>

#include "common/reasons.h"

#define ROBIND_MAX 16   /* ro_bind entries of one preset */

/* REASON_ALLOWED, or REASON_ADM_BIND_REFUSED with a one-line msg naming the path and rule. */
enum reason robind_check(const char *path, char *msg, size_t msglen);

/* An absolute canonical path: no ".", ".." or empty components ("//", a trailing "/"), no
 * control characters, shorter than EGRESS_PATH_MAX; "/" itself is canonical. The one
 * test for host paths an AgentPreset names (its executable and ro_bind entries). Pure. */
bool robind_path_canonical(const char *s);

/* Pure form of the sensitive-path rule (no file system access), for tests: true when
 * path is, contains or lies inside a refused location; *which names it. */
bool robind_sensitive(const char *path, const char **which);

/*
 * Is the host file `path` visible inside the sandbox's view, given the preset's binds?
 * True when it lies under a system directory the sandbox binds (/usr, /bin, /sbin, /lib*)
 * or under one of binds (NULL-terminated, may be NULL). Pure string test after the caller
 * resolved symbolic links.
 */
bool robind_visible(const char *path, const char *const *binds);

#endif
