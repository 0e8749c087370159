/*
 * ccimport - copy a person's Kerberos credential cache into egressd's own memory.
 *
 * Owns: nothing after the call; the MEMORY: cache lives as long as the process (MIT krb5
 * keeps memory caches in a process-wide list until destroyed).
 * Callers: egressd/proxycreds (a `ccache_import` entry), at load, i.e. at start-up while
 * egressd still runs as root — before the privilege drop, so the person's 0600 cache file
 * is readable and is never needed again afterwards.
 *
 * Why: egress-exec's private egressd authenticates to the host's proxy as the person who
 * ran it (docs/routing.md, "A private egressd"). Reading the file lazily, as the dropped
 * egressd account, would need the file to be readable by that account; a copy in memory
 * needs nothing, and the worker never sees either.
 */
#ifndef EGRESS_CCIMPORT_H
#define EGRESS_CCIMPORT_H

#include <stddef.h>

/*
 * Copy every credential of the cache `src` (a krb5 cache name such as FILE:/tmp/krb5cc_1000
 * or a path) into a new MEMORY: cache. Returns 0 with its full name ("MEMORY:...") in out,
 * or -1 with err (no such cache, no principal, no credentials, out of memory).
 */
int ccimport_to_memory(const char *src, char *out, size_t outlen, char *err, size_t errlen);

#endif
