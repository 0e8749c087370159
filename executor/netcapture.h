/*
 * netcapture - transparent capture in a run's link namespace (docs/transparent.md): the
 * packet rules that hand a worker's TCP connections to the run's synthetic addresses to
 * egressd's listener, and the UDP socket of the run's stub resolver.
 *
 * Owns: the nftables table NETCAPTURE_TABLE inside the run's link namespace (it goes with
 * that namespace; nothing is ever added to the host's namespace or to the worker's), and
 * the stub resolver's socket until it is handed to egressd. Callers: executor/sandbox.c
 * (supervisor), executor/doctor.c (the probe).
 *
 * Why libnftables (Debian's libnftables1, the library the nft command is built on) and not
 * netlink by hand (libnftnl) or exec'ing nft: the ruleset is a few lines of text a person
 * can read and compare with `nft list table`, the library validates and commits it as one
 * netlink batch (all or nothing), and no program is exec'd as root with a PATH. The
 * context is created after entering the link namespace, so its netlink socket is that
 * namespace's.
 *
 * The rules (link namespace; HOSTIF is the veth's host end, GW its address):
 *   nat prerouting:  iifname HOSTIF ip daddr 198.18.0.0/15 tcp  -> redirect to :PORT
 *   filter input (policy drop): established/related; from HOSTIF to GW: tcp PORT (the
 *                    listener, proxy-aware or redirected), udp 53 (the stub); anything
 *                    else addressed to the link namespace is rejected (TCP reset, ICMP
 *                    port unreachable), so it fails at once instead of timing out.
 * UDP to anything but the stub, ICMP and other protocols to other addresses find no route
 * out of the link namespace (it has no other interface and does not forward).
 */
#ifndef EGRESS_NETCAPTURE_H
#define EGRESS_NETCAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "executor/netns.h"

#define NETCAPTURE_TABLE   "egress_capture"
#define NETCAPTURE_POOL    "198.18.0.0/15"   /* the synthetic pool (egressd/tpool.h) */
#define NETCAPTURE_DNS_PORT 53

/*
 * Supervisor: enter the link namespace nsfd, install the ruleset above for link and the
 * listener's port, read it back, create the stub's UDP socket (device first, then
 * GW:53), and return to our own namespace. 0 with *dns_fd (O_CLOEXEC; the caller passes
 * it to egressd and closes its copy); -1 with err (nothing of it remains except what the
 * link namespace takes with it).
 */
int netcapture_install(int nsfd, const struct netns_link *link, uint16_t port, int *dns_fd,
    char *err, size_t errlen);

/*
 * The ruleset text for link and port into buf. Returns its length, or 0 when buf is too
 * small. Pure (tests compare it).
 */
size_t netcapture_ruleset(const struct netns_link *link, uint16_t port, char *buf,
    size_t len);

/*
 * Probe (doctor, attestation of the feature): in the CURRENT namespace (call it from a
 * throwaway network namespace), install the ruleset for a made-up link and read it back.
 * Returns 0, or -1 with err.
 */
int netcapture_probe(char *err, size_t errlen);

#endif
