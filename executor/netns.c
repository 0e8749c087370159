/*
 * netns - veth pair and addresses over rtnetlink (libmnl); pool choice is pure for tests.
 */
#define _GNU_SOURCE
#include "executor/netns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

/* Fixed sizes (NETNS_NL_REQ is a run-time expression): a request fits in 8 KiB;
 * dump answers are read 32 KiB at a time so no multipart message is truncated. */
#define NETNS_NL_REQ  8192
#define NETNS_NL_RECV 32768

int
netns_pool_parse(const char *s, struct netns_pool *out)
{
	char addr[32];
	const char *slash;
	struct in_addr a;
	long long len;
	const char *errstr;
	uint32_t mask;

	if (s == NULL || (slash = strchr(s, '/')) == NULL || (size_t)(slash - s) >= sizeof(addr))
		return -1;
	memcpy(addr, s, (size_t)(slash - s));
	addr[slash - s] = '\0';
	if (inet_pton(AF_INET, addr, &a) != 1)
		return -1;
	if (num_parse(slash + 1, 8, 30, &len, &errstr) < 0)
		return -1;
	mask = len == 0 ? 0 : 0xffffffffu << (32 - len);
	if ((ntohl(a.s_addr) & ~mask) != 0)
		return -1;
	out->base = ntohl(a.s_addr);
	out->prefix = (unsigned)len;
	return 0;
}

bool
netns_pair_allowed(uint32_t net)
{
	if ((net & 3u) != 0)
		return false;
	if ((net & 0xffffff00u) == 0xa9fea900u)    /* 169.254.169.0/24: metadata services */
		return false;
	if ((net & 0xffffff00u) == 0xa9fe0000u)    /* 169.254.0.0/24: reserved (RFC 3927) */
		return false;
	if ((net & 0xffffff00u) == 0xa9feff00u)    /* 169.254.255.0/24: reserved */
		return false;
	return true;
}

int
netns_pick_pair(const struct netns_pool *pool, const uint32_t *used, size_t nused,
    uint32_t seed, uint32_t *net_out)
{
	uint32_t npairs, i;

	if (pool->prefix < 8 || pool->prefix > 30)
		return -1;
	npairs = 1u << (30 - pool->prefix);
	for (i = 0; i < npairs; i++) {
		uint32_t idx = (uint32_t)(((uint64_t)seed + i) % npairs);
		uint32_t net = pool->base + idx * 4u;
		bool taken = false;

		if (!netns_pair_allowed(net))
			continue;
		for (size_t k = 0; k < nused && !taken; k++)
			taken = (used[k] & ~3u) == net;
		if (!taken) {
			*net_out = net;
			return 0;
		}
	}
	return -1;
}

/* --- rtnetlink plumbing --- */

static struct mnl_socket *
netns_nl_open(char *err, size_t errlen)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	struct timeval tv = { NETNS_NL_TIMEOUT_MS / 1000, (NETNS_NL_TIMEOUT_MS % 1000) * 1000 };

	if (nl == NULL) {
		errbuf_set(err, errlen, errno, "netlink socket");
		return NULL;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		errbuf_set(err, errlen, errno, "netlink bind");
		mnl_socket_close(nl);
		return NULL;
	}
	setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return nl;
}

/* Send one request and run cb over the answers until ACK/DONE. Returns 0 or -1 (errno). */
static int
netns_nl_talk(struct mnl_socket *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	static unsigned seqbase;
	char buf[NETNS_NL_RECV];
	unsigned portid = mnl_socket_get_portid(nl);
	unsigned seq;
	int ret;

	seq = (unsigned)time(NULL) + ++seqbase;
	nlh->nlmsg_seq = seq;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (n < 0)
			return -1;      /* EAGAIN on timeout */
		ret = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
		if (ret < 0)
			return -1;
		if (ret == MNL_CB_STOP)
			return 0;
	}
}

static struct nlmsghdr *
netns_nl_req(char *buf, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh;

	memset(buf, 0, NETNS_NL_REQ);
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	return nlh;
}

/* Dump one table (RTM_GET*, NLM_F_DUMP) of family through cb. The request's family
 * header (ifaddrmsg, ifinfomsg, rtmsg) is hdrlen bytes; in all three the family is the
 * first. */
static int
netns_nl_dump(struct mnl_socket *nl, uint16_t type, size_t hdrlen, unsigned char family,
    mnl_cb_t cb, void *data)
{
	char buf[NETNS_NL_REQ];
	struct nlmsghdr *nlh = netns_nl_req(buf, type, NLM_F_DUMP);
	unsigned char *h = mnl_nlmsg_put_extra_header(nlh, hdrlen);

	h[0] = family;
	return netns_nl_talk(nl, nlh, cb, data);
}

struct netns_addrs {
	uint32_t *v;
	size_t n;
};

static int
netns_addr_attr(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(attr);

	if (mnl_attr_type_valid(attr, IFA_MAX) < 0)
		return MNL_CB_OK;
	if ((type == IFA_LOCAL || type == IFA_ADDRESS) &&
	    mnl_attr_validate2(attr, MNL_TYPE_BINARY, 4) < 0)
		return MNL_CB_OK;
	tb[type] = attr;
	return MNL_CB_OK;
}

static int
netns_addr_cb(const struct nlmsghdr *nlh, void *data)
{
	struct netns_addrs *a = data;
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *tb[IFA_MAX + 1] = { 0 };
	const int kinds[] = { IFA_LOCAL, IFA_ADDRESS };

	if (ifa->ifa_family != AF_INET)
		return MNL_CB_OK;
	mnl_attr_parse(nlh, sizeof(*ifa), netns_addr_attr, tb);
	for (size_t i = 0; i < EGRESS_NELEM(kinds); i++) {
		uint32_t v;

		if (tb[kinds[i]] == NULL || a->n >= NETNS_USED_MAX)
			continue;
		memcpy(&v, mnl_attr_get_payload(tb[kinds[i]]), 4);
		a->v[a->n++] = ntohl(v);
	}
	return MNL_CB_OK;
}

static int
netns_addrs_read(struct mnl_socket *nl, struct netns_addrs *a)
{
	return netns_nl_dump(nl, RTM_GETADDR, sizeof(struct ifaddrmsg), AF_INET, netns_addr_cb,
	    a);
}

static int
netns_link_up(struct mnl_socket *nl, int ifindex)
{
	char buf[NETNS_NL_REQ];
	struct nlmsghdr *nlh = netns_nl_req(buf, RTM_NEWLINK, NLM_F_ACK);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));

	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	ifm->ifi_change = IFF_UP;
	ifm->ifi_flags = IFF_UP;
	return netns_nl_talk(nl, nlh, NULL, NULL);
}

static int
netns_addr_add(struct mnl_socket *nl, int ifindex, uint32_t addr, unsigned prefix)
{
	char buf[NETNS_NL_REQ];
	struct nlmsghdr *nlh = netns_nl_req(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	uint32_t be = htonl(addr);

	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)prefix;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned)ifindex;
	mnl_attr_put(nlh, IFA_LOCAL, 4, &be);
	mnl_attr_put(nlh, IFA_ADDRESS, 4, &be);
	return netns_nl_talk(nl, nlh, NULL, NULL);
}

/* dst/prefix via gw on ifindex (main table, IPv4). */
static int
netns_route_add(struct mnl_socket *nl, int ifindex, uint32_t dst, unsigned prefix,
    uint32_t gw)
{
	char buf[NETNS_NL_REQ];
	struct nlmsghdr *nlh = netns_nl_req(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL |
	    NLM_F_ACK);
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	uint32_t bdst = htonl(dst), bgw = htonl(gw);

	rtm->rtm_family = AF_INET;
	rtm->rtm_dst_len = (unsigned char)prefix;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put(nlh, RTA_DST, 4, &bdst);
	mnl_attr_put(nlh, RTA_GATEWAY, 4, &bgw);
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
	return netns_nl_talk(nl, nlh, NULL, NULL);
}

static int
netns_link_del(struct mnl_socket *nl, const char *name)
{
	char buf[NETNS_NL_REQ];
	struct nlmsghdr *nlh = netns_nl_req(buf, RTM_DELLINK, NLM_F_ACK);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));

	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return netns_nl_talk(nl, nlh, NULL, NULL);
}

/* A veth pair host_if <-> peer_if. into: the process whose network namespace the peer is
 * created in (never present in ours); NULL only for the doctor's probe, which makes both
 * ends here and deletes them at once. */
static int
netns_veth_add(struct mnl_socket *nl, const char *host_if, const char *peer_if,
    const pid_t *into)
{
	char buf[NETNS_NL_REQ];
	struct nlmsghdr *nlh = netns_nl_req(buf, RTM_NEWLINK,
	    NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	struct nlattr *linkinfo, *data, *peer;
	struct ifinfomsg *pifm;

	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, host_if);
	linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	/* VETH_INFO_PEER carries an ifinfomsg followed by the peer's attributes. */
	pifm = mnl_nlmsg_get_payload_tail(nlh);
	memset(pifm, 0, sizeof(*pifm));
	pifm->ifi_family = AF_UNSPEC;
	nlh->nlmsg_len += MNL_ALIGN(sizeof(*pifm));
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer_if);
	/* Created directly inside the worker's namespace: never present in ours. */
	if (into != NULL)
		mnl_attr_put_u32(nlh, IFLA_NET_NS_PID, (uint32_t)*into);
	mnl_attr_nest_end(nlh, peer);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, linkinfo);
	return netns_nl_talk(nl, nlh, NULL, NULL);
}

/* Disable IPv6 on an interface of the namespace whose /proc/sys we see. */
static int
netns_ipv6_off(const char *ifname)
{
	char path[128];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", ifname);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;    /* no IPv6 in this kernel: nothing to leak */
	if (write(fd, "1", 1) != 1)
		rc = -1;
	close(fd);
	return rc;
}

static void
netns_quad(uint32_t a, char out[16])
{
	struct in_addr in = { htonl(a) };

	inet_ntop(AF_INET, &in, out, 16);
}

int
netns_veth_create(const struct netns_pool *pool, pid_t child_pid, const char *tag,
    struct netns_link *out, char *err, size_t errlen)
{
	struct mnl_socket *nl = NULL;
	struct netns_addrs used = { 0 };
	uint32_t seed, net;
	int lockfd = -1, rc = -1;
	bool created = false;

	memset(out, 0, sizeof(*out));
	if (tag == NULL || strlen(tag) != 8)
		return errbuf_set(err, errlen, 0, "veth tag must be 8 characters");
	snprintf(out->host_if, sizeof(out->host_if), "%s%sh", NETNS_IF_PREFIX, tag);
	snprintf(out->worker_if, sizeof(out->worker_if), "%s", NETNS_WORKER_IF);

	used.v = calloc(NETNS_USED_MAX, sizeof(*used.v));
	if (used.v == NULL)
		return errbuf_set(err, errlen, ENOMEM, "address list");
	/* Two runs starting together must not pick the same pair: pick + assign under one
	 * lock; the address is in the namespace before the lock is released. */
	mkdir("/run/egress-exec", 0700);
	lockfd = open(NETNS_LOCK_PATH, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lockfd < 0 || flock(lockfd, LOCK_EX) < 0) {
		errbuf_set(err, errlen, errno, "lock %s", NETNS_LOCK_PATH);
		goto out;
	}
	nl = netns_nl_open(err, errlen);
	if (nl == NULL)
		goto out;
	if (netns_addrs_read(nl, &used) < 0) {
		errbuf_set(err, errlen, errno, "read addresses");
		goto out;
	}
	seed = (uint32_t)getpid() * 2654435761u ^ (uint32_t)mono_usec();
	if (netns_pick_pair(pool, used.v, used.n, seed, &net) < 0) {
		errbuf_set(err, errlen, 0, "address pool exhausted");
		goto out;
	}
	out->net = net;
	netns_quad(net + 1, out->host_addr);
	netns_quad(net + 2, out->worker_addr);

	if (netns_veth_add(nl, out->host_if, out->worker_if, &child_pid) < 0) {
		errbuf_set(err, errlen, errno, "create veth %s", out->host_if);
		goto out;
	}
	created = true;
	out->host_ifindex = (int)if_nametoindex(out->host_if);
	if (out->host_ifindex == 0) {
		errbuf_set(err, errlen, errno, "veth %s missing after create", out->host_if);
		goto out;
	}
	if (netns_ipv6_off(out->host_if) < 0) {
		errbuf_set(err, errlen, errno, "disable IPv6 on %s", out->host_if);
		goto out;
	}
	if (netns_addr_add(nl, out->host_ifindex, net + 1, 30) < 0) {
		errbuf_set(err, errlen, errno, "address on %s", out->host_if);
		goto out;
	}
	if (netns_link_up(nl, out->host_ifindex) < 0) {
		errbuf_set(err, errlen, errno, "bring %s up", out->host_if);
		goto out;
	}
	/* Read back: the address is on the link now. */
	used.n = 0;
	if (netns_addrs_read(nl, &used) < 0) {
		errbuf_set(err, errlen, errno, "read addresses back");
		goto out;
	}
	for (size_t i = 0; i < used.n && rc < 0; i++)
		if (used.v[i] == net + 1)
			rc = 0;
	if (rc < 0)
		errbuf_set(err, errlen, 0, "address %s not present after adding it", out->host_addr);
out:
	if (rc < 0 && created && nl)
		netns_link_del(nl, out->host_if);
	if (nl)
		mnl_socket_close(nl);
	if (lockfd >= 0)
		close(lockfd);
	free(used.v);
	return rc;
}

int
netns_veth_destroy(const char *host_if)
{
	struct mnl_socket *nl;
	int rc = 0;

	if (host_if == NULL || host_if[0] == '\0')
		return 0;
	nl = netns_nl_open(NULL, 0);
	if (nl == NULL)
		return -1;
	if (netns_link_del(nl, host_if) < 0 && errno != ENODEV)
		rc = -1;
	mnl_socket_close(nl);
	if (if_nametoindex(host_if) != 0)
		rc = -1;
	return rc;
}

/* --- inside the worker's namespace --- */

struct netns_links {
	char names[8][IFNAMSIZ];
	size_t n;
	bool overflow;
};

static int
netns_link_attr(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;

	if (mnl_attr_type_valid(attr, IFLA_MAX) < 0)
		return MNL_CB_OK;
	tb[mnl_attr_get_type(attr)] = attr;
	return MNL_CB_OK;
}

static int
netns_link_cb(const struct nlmsghdr *nlh, void *data)
{
	struct netns_links *l = data;
	const struct nlattr *tb[IFLA_MAX + 1] = { 0 };
	const char *name;

	mnl_attr_parse(nlh, sizeof(struct ifinfomsg), netns_link_attr, tb);
	if (tb[IFLA_IFNAME] == NULL || mnl_attr_validate(tb[IFLA_IFNAME], MNL_TYPE_STRING) < 0)
		return MNL_CB_OK;
	name = mnl_attr_get_str(tb[IFLA_IFNAME]);
	if (l->n >= EGRESS_NELEM(l->names)) {
		l->overflow = true;
		return MNL_CB_OK;
	}
	snprintf(l->names[l->n++], IFNAMSIZ, "%s", name);
	return MNL_CB_OK;
}

static int
netns_links_read(struct mnl_socket *nl, struct netns_links *l)
{
	return netns_nl_dump(nl, RTM_GETLINK, sizeof(struct ifinfomsg), AF_UNSPEC,
	    netns_link_cb, l);
}

struct netns_routes {
	bool has_default;
};

static int
netns_route_cb(const struct nlmsghdr *nlh, void *data)
{
	struct netns_routes *r = data;
	const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);

	if (rtm->rtm_table == RT_TABLE_MAIN && rtm->rtm_dst_len == 0)
		r->has_default = true;
	return MNL_CB_OK;
}

int
netns_worker_setup(const struct netns_link *link, char *err, size_t errlen)
{
	struct mnl_socket *nl = netns_nl_open(err, errlen);
	struct netns_links links = { 0 };
	struct netns_routes routes = { false };
	int lo, rc = -1;

	if (nl == NULL)
		return -1;
	lo = (int)if_nametoindex("lo");
	if (lo == 0 || netns_link_up(nl, lo) < 0) {
		errbuf_set(err, errlen, errno, "bring lo up");
		goto out;
	}
	if (link != NULL) {
		int idx = (int)if_nametoindex(link->worker_if);

		if (idx == 0) {
			errbuf_set(err, errlen, errno, "%s missing in the worker namespace",
			    link->worker_if);
			goto out;
		}
		if (netns_ipv6_off(link->worker_if) < 0) {
			errbuf_set(err, errlen, errno, "disable IPv6 on %s", link->worker_if);
			goto out;
		}
		if (netns_addr_add(nl, idx, link->net + 2, 30) < 0) {
			errbuf_set(err, errlen, errno, "address on %s", link->worker_if);
			goto out;
		}
		if (netns_link_up(nl, idx) < 0) {
			errbuf_set(err, errlen, errno, "bring %s up", link->worker_if);
			goto out;
		}
		if (link->capture && netns_route_add(nl, idx, NETNS_CAPTURE_NET,
		    NETNS_CAPTURE_PREFIX, link->net + 1) < 0) {
			errbuf_set(err, errlen, errno, "route to the synthetic pool via %s",
			    link->host_addr);
			goto out;
		}
	}
	/* Verify: only lo (and our link) exist, and nothing routes beyond the /30. */
	if (netns_links_read(nl, &links) < 0) {
		errbuf_set(err, errlen, errno, "list links");
		goto out;
	}
	for (size_t i = 0; i < links.n; i++) {
		if (strcmp(links.names[i], "lo") == 0)
			continue;
		if (link != NULL && strcmp(links.names[i], link->worker_if) == 0)
			continue;
		errbuf_set(err, errlen, 0, "unexpected link %s in the worker namespace",
		    links.names[i]);
		goto out;
	}
	if (links.overflow || links.n != (link ? 2u : 1u)) {
		errbuf_set(err, errlen, 0, "worker namespace has %zu links", links.n);
		goto out;
	}
	if (netns_nl_dump(nl, RTM_GETROUTE, sizeof(struct rtmsg), AF_INET, netns_route_cb,
	    &routes) < 0) {
		errbuf_set(err, errlen, errno, "list routes");
		goto out;
	}
	if (routes.has_default) {
		errbuf_set(err, errlen, 0, "the worker namespace has a default route");
		goto out;
	}
	rc = 0;
out:
	mnl_socket_close(nl);
	return rc;
}

int
netns_probe_veth(char *err, size_t errlen)
{
	struct mnl_socket *nl = netns_nl_open(err, errlen);
	int rc = -1;

	if (nl == NULL)
		return -1;
	if (netns_veth_add(nl, "egxprobe0", "egxprobe1", NULL) < 0) {
		errbuf_set(err, errlen, errno, "create a veth pair");
		goto out;
	}
	if (if_nametoindex("egxprobe0") == 0 || if_nametoindex("egxprobe1") == 0) {
		errbuf_set(err, errlen, 0, "veth pair missing after create");
		goto out;
	}
	if (netns_link_del(nl, "egxprobe0") < 0 || if_nametoindex("egxprobe1") != 0) {
		errbuf_set(err, errlen, errno, "delete the veth pair");
		goto out;
	}
	rc = 0;
out:
	mnl_socket_close(nl);
	return rc;
}

/* Back to the namespace home; a failure leaves this process in the wrong network
 * namespace, which nothing after may run in: exit. */
static void
netns_go_home(int home)
{
	if (setns(home, CLONE_NEWNET) != 0) {
		log_warn("setns back to egress-exec's network namespace");
		_exit(70);
	}
}

int
netns_link_create(const struct netns_pool *pool, pid_t child_pid, const char *tag,
    uint16_t port, struct netns_link *out, int *nsfd, int *listen_fd, char *err,
    size_t errlen)
{
	struct sockaddr_in sin;
	int home, ns = -1, fd = -1, one = 1;
	bool veth = false;

	*nsfd = *listen_fd = -1;
	home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		return errbuf_set(err, errlen, errno, "open /proc/self/ns/net");
	if (unshare(CLONE_NEWNET) != 0) {
		errbuf_set(err, errlen, errno, "unshare a link namespace");
		close(home);
		return -1;
	}
	ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (ns < 0) {
		errbuf_set(err, errlen, errno, "open the link namespace");
		goto fail;
	}
	if (netns_veth_create(pool, child_pid, tag, out, err, errlen) < 0)
		goto fail;
	veth = true;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		errbuf_set(err, errlen, errno, "listener socket");
		goto fail;
	}
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(out->net + 1);
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, out->host_if,
	    (socklen_t)strlen(out->host_if) + 1) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 || listen(fd, 511) != 0) {
		errbuf_set(err, errlen, errno, "listener on %s:%u dev %s", out->host_addr,
		    (unsigned)port, out->host_if);
		goto fail;
	}
	netns_go_home(home);
	close(home);
	*nsfd = ns;
	*listen_fd = fd;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	if (veth)
		netns_veth_destroy(out->host_if);
	netns_go_home(home);
	close(home);
	if (ns >= 0)
		close(ns);
	return -1;
}

int
netns_link_destroy(int nsfd, const char *host_if)
{
	int home, rc;

	if (nsfd < 0)
		return 0;
	home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0 || setns(nsfd, CLONE_NEWNET) != 0) {
		if (home >= 0)
			close(home);
		close(nsfd);
		return -1;
	}
	rc = netns_veth_destroy(host_if);
	netns_go_home(home);
	close(home);
	close(nsfd);
	return rc;
}

struct netns_all_links {
	char (*names)[IFNAMSIZ];
	size_t n, max;
};

static int
netns_all_link_cb(const struct nlmsghdr *nlh, void *data)
{
	struct netns_all_links *l = data;
	const struct nlattr *tb[IFLA_MAX + 1] = { 0 };

	mnl_attr_parse(nlh, sizeof(struct ifinfomsg), netns_link_attr, tb);
	if (tb[IFLA_IFNAME] == NULL || mnl_attr_validate(tb[IFLA_IFNAME], MNL_TYPE_STRING) < 0)
		return MNL_CB_OK;
	if (l->n < l->max)
		snprintf(l->names[l->n++], IFNAMSIZ, "%s", mnl_attr_get_str(tb[IFLA_IFNAME]));
	return MNL_CB_OK;
}

int
netns_cleanup_leftovers(bool (*keep)(const char *ifname, void *arg), void *arg,
    unsigned *removed, char *err, size_t errlen)
{
	struct mnl_socket *nl = netns_nl_open(err, errlen);
	struct netns_all_links l = { 0 };
	int rc = 0;

	if (removed)
		*removed = 0;
	if (nl == NULL)
		return -1;
	l.max = 4096;
	l.names = calloc(l.max, IFNAMSIZ);
	if (l.names == NULL) {
		mnl_socket_close(nl);
		return errbuf_set(err, errlen, ENOMEM, "link list");
	}
	if (netns_nl_dump(nl, RTM_GETLINK, sizeof(struct ifinfomsg), AF_UNSPEC,
	    netns_all_link_cb, &l) < 0) {
		rc = errbuf_set(err, errlen, errno, "list links");
		goto out;
	}
	for (size_t i = 0; i < l.n; i++) {
		if (strncmp(l.names[i], NETNS_IF_PREFIX, strlen(NETNS_IF_PREFIX)) != 0)
			continue;
		if (keep && keep(l.names[i], arg))
			continue;
		if (netns_link_del(nl, l.names[i]) < 0 && errno != ENODEV) {
			rc = errbuf_set(err, errlen, errno, "delete %s", l.names[i]);
			continue;
		}
		if (removed)
			(*removed)++;
	}
out:
	free(l.names);
	mnl_socket_close(nl);
	return rc;
}
