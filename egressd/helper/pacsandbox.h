/*
 * pacsandbox - the confinement of egressd-route-helper, the process that runs libproxy and
 * the PAC script (JavaScript from the network) for egressd.
 *
 * What PAC evaluation needs, and so all the helper keeps:
 *   - the PAC copy egressd wrote (a file; egressd fetches PAC itself, libproxy never does);
 *   - name resolution for dnsResolve()/isResolvable()/isInNet()/myIpAddress(): glibc's
 *     stub resolver over UDP (AF_INET/AF_INET6 datagram sockets) and, for address
 *     selection and interface lookup, NETLINK_ROUTE sockets;
 *   - memory, threads, time (the JavaScript engine).
 * Everything else is refused by the filter: TCP and every other stream, raw or packet
 * socket (no HTTP, no connection to egressd's listeners or any local service), AF_UNIX
 * and every other address family, listen/accept (no server), exec, ptrace, mounts,
 * namespaces, modules, bpf, keyrings, io_uring, file handles — and every change to a file
 * (opens for writing, create, truncate, unlink, rename, link, mkdir, chmod, chown, times,
 * xattrs): after egressd's drop the helper shares the egressd user's uid, which owns the
 * decision-log directory and the PAC copy.
 *
 * Owns: nothing. Callers: egressd/helper/main.c (after no_new_privs), tests.
 */
#ifndef EGRESS_PACSANDBOX_H
#define EGRESS_PACSANDBOX_H

#include <stddef.h>

/* Drop to uid/gid 65534 (nobody) when running as root: supplementary groups cleared, real,
 * effective and saved ids set, read back. A process that is not root keeps its ids (egressd
 * started it after its own drop). Returns 0, or -1 with err set. */
int pacsandbox_drop(char *err, size_t errlen);

/* Install the helper's seccomp filter on the calling thread (no_new_privs must be set).
 * Refused calls fail with EPERM (EAFNOSUPPORT for a refused address family): libproxy and
 * the JavaScript engine see an error, never a kill, so a PAC that tries anything else just
 * gets no answer from that call. Returns 0, or -1 with err set. */
int pacsandbox_filter(char *err, size_t errlen);

/*
 * Restrict the file system to reads of what PAC evaluation needs (Landlock): /usr and
 * the libraries, the resolver's and NSS's files under /etc, /proc, the CPU count,
 * /dev/null, /dev/urandom and pac_path (may be NULL). Nothing may be written, created or
 * removed anywhere, and nothing else read — not the decision logs, the configuration or a
 * keytab, although the helper shares the egressd user's uid. no_new_privs must be set.
 * Returns 0 when applied, 1 when the kernel has no Landlock (the seccomp filter is then
 * the only file barrier), -1 with err on any other failure (fail closed: the helper
 * exits).
 */
int pacsandbox_landlock(const char *pac_path, char *err, size_t errlen);

#endif
