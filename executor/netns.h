/*
 * netns - the worker's network: an empty network namespace with `lo`, and, when the run has
 * an allowlist, one veth pair whose host end carries egressd's listener for this run.
 *
 * Owns: the veth pair (host end named NETNS_IF_PREFIX + 8 hex digits + "h"; the worker end
 * is "eth0" inside the worker's namespace) and its /30 from the address pool. Deleting the
 * host end deletes the pair; the pair also vanishes with the worker's namespace.
 * Callers: executor/sandbox.c (supervisor: netns_veth_create/destroy; child:
 * netns_worker_setup), executor/attest.c, executor/cleanup.c.
 *
 * All of it is rtnetlink over libmnl; no `ip` command runs. Every netlink exchange has a
 * receive timeout (NETNS_NL_TIMEOUT_MS).
 *
 * The worker side gets its address and a connected /30 route only: no default route, no
 * resolver, IPv6 disabled on both ends (no link-local side channel to host services).
 */
#ifndef EGRESS_NETNS_H
#define EGRESS_NETNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NETNS_IF_PREFIX     "egx"
#define NETNS_WORKER_IF     "eth0"
#define NETNS_POOL_DEFAULT  "169.254.0.0/16"
#define NETNS_NL_TIMEOUT_MS 3000
#define NETNS_USED_MAX      4096     /* addresses read from the host namespace */
#define NETNS_LOCK_PATH     "/run/egress-exec/netpool.lock"
#define NETNS_CAPTURE_NET   0xc6120000u      /* 198.18.0.0: the synthetic pool ... */
#define NETNS_CAPTURE_PREFIX 15              /* ... /15 (egressd/tpool.h) */

/* An IPv4 pool of /30 pairs, host byte order. */
struct netns_pool {
	uint32_t base;      /* network address, aligned to prefix */
	unsigned prefix;    /* 8..30 */
};

struct netns_link {
	char host_if[16];       /* host end (IFNAMSIZ) */
	char worker_if[16];     /* "eth0" inside the worker's namespace */
	uint32_t net;           /* the /30, host byte order */
	char host_addr[16];     /* dotted quad of net+1: egressd listens here */
	char worker_addr[16];   /* dotted quad of net+2 */
	int host_ifindex;
	/* Transparent capture is on (executor/netcapture.h): the worker gets a route to the
	 * synthetic pool (198.18.0.0/15) via host_addr, and only that. */
	bool capture;
};

/* Parse "a.b.c.d/len" (len 8..30, address aligned). Returns 0, or -1. */
int netns_pool_parse(const char *s, struct netns_pool *out);

/*
 * Choose a free /30 in the pool: never inside 169.254.169.0/24 (cloud metadata lives
 * there), nor 169.254.0.0/24 and 169.254.255.0/24 (reserved by RFC 3927), nor one holding
 * any address in used[]. The search starts at seed (mod pool size) and visits every pair
 * once. Returns 0 with *net_out, or -1 when the pool is exhausted. Pure function.
 */
int netns_pick_pair(const struct netns_pool *pool, const uint32_t *used, size_t nused,
    uint32_t seed, uint32_t *net_out);

/* True when the /30 at net may be used at all (the reserved ranges above). Pure. */
bool netns_pair_allowed(uint32_t net);

/*
 * Supervisor (inside the run's link namespace, see netns_link_create, where no other
 * address exists, so the pick is free; the lock keeps callers in a shared namespace
 * apart): under an exclusive lock on NETNS_LOCK_PATH, read the IPv4 addresses of the
 * current namespace, pick a /30, create the veth pair with its peer created directly in
 * the namespace of child_pid, give the host end net+1/30, disable IPv6 on it and bring it
 * up; read the address back. tag: 8 hex digits naming the run. Returns 0, or -1 with err
 * (everything created is removed).
 */
int netns_veth_create(const struct netns_pool *pool, pid_t child_pid, const char *tag,
    struct netns_link *out, char *err, size_t errlen);

/* Delete the host end (and so the pair). Returns 0, or -1 when it is still present. */
int netns_veth_destroy(const char *host_if);

/*
 * Supervisor, for a networked run: the run's own "link namespace". A new network namespace
 * is made that holds only `lo` (down) and the veth's host end; netns_veth_create runs
 * inside it (peer straight into child_pid's namespace), and the listening TCP socket for
 * egressd is created there too, bound to the host end's address and port (device first),
 * then the caller returns to its own namespace. The listener is passed to egressd
 * (grant.create with listen_fd), so egressd needs no privilege to bind it, and nothing
 * else in egressd's or the host's namespace — sshd on 0.0.0.0:22, a DNS forwarder — is
 * reachable from the worker: the host end is not in that namespace at all.
 * On success returns 0 with *nsfd (the link namespace, keeps it alive) and *listen_fd;
 * -1 with err otherwise (everything made is gone; the caller is back in its namespace,
 * or the process exits: running on in the wrong namespace is never an option).
 */
int netns_link_create(const struct netns_pool *pool, pid_t child_pid, const char *tag,
    uint16_t port, struct netns_link *out, int *nsfd, int *listen_fd, char *err,
    size_t errlen);

/* Delete the veth inside the link namespace nsfd and close nsfd. The namespace itself goes
 * when egressd has closed its listener (grant revoked or expired). Returns 0, or -1 when
 * the veth is still present. (A teardown that saw every process of the run gone only
 * closes nsfd: the pair goes with the worker's namespace; executor/sandbox.c.) */
int netns_link_destroy(int nsfd, const char *host_if);

/*
 * Child, inside the new network namespace, still privileged: bring `lo` up; when link is
 * not NULL also give worker_if net+2/30, disable IPv6 on it and bring it up, and with
 * link->capture add the route to the synthetic pool (198.18.0.0/15 via net+1). Then
 * verify: no default route, only `lo` (and worker_if) exist. Returns 0, or -1 with err.
 */
int netns_worker_setup(const struct netns_link *link, char *err, size_t errlen);

/*
 * Probe (attestation, doctor): in the CURRENT namespace (call it from a throwaway network
 * namespace), create a veth pair "egxprobe0"/"egxprobe1", check it exists, delete it.
 * Returns 0, or -1 with err.
 */
int netns_probe_veth(char *err, size_t errlen);

/*
 * Cleanup: delete host-namespace links named NETNS_IF_PREFIX* for which keep(name, arg)
 * returns false (keep may be NULL: delete all). *removed counts deletions. Returns 0, or -1.
 */
int netns_cleanup_leftovers(bool (*keep)(const char *ifname, void *arg), void *arg,
    unsigned *removed, char *err, size_t errlen);

#endif
