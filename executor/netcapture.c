/*
 * netcapture - nftables rules and the stub resolver socket in a run's link namespace
 * (contract: netcapture.h).
 */
#define _GNU_SOURCE
#include "executor/netcapture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/dynload.h"
#include "common/log.h"
#include "common/util.h"

#ifndef EGRESS_LIBNFTABLES_SONAME
#error "EGRESS_LIBNFTABLES_SONAME must name libnftables' soname (executor/CMakeLists.txt)"
#endif

/*
 * libnftables is loaded when capture rules are first made, not linked: with libnftnl,
 * libxtables and libgmp it cost every egress-exec start ~1 ms (an empty program linked
 * with egress-exec's libraries: 5.0 ms per exec, 4.3 ms without these), and every fork of
 * a run copied its mappings, though only a networked run with transparent capture (and
 * `doctor`) uses it. Loaded by the supervisor (and doctor), never in a confined process.
 */
#define NFTLIB_FUNCS(X) \
	X(nft_ctx_new) X(nft_ctx_free) X(nft_ctx_buffer_output) X(nft_ctx_buffer_error) \
	X(nft_run_cmd_from_buffer) X(nft_ctx_get_output_buffer) X(nft_ctx_get_error_buffer)

static struct nftlib {
#define NFTLIB_MEMBER(n) __typeof__(n) *n;
	NFTLIB_FUNCS(NFTLIB_MEMBER)
#undef NFTLIB_MEMBER
} nftlib;

static const char *const nftlib_names[] = { NFTLIB_FUNCS(DYNLOAD_NAME) };
DYNLOAD_CHECK(struct nftlib, nftlib_names);
static struct dynload nftlib_dl = {
	.soname = EGRESS_LIBNFTABLES_SONAME,
	.prefix = "",
	.names = nftlib_names,
	.slots = (void **)&nftlib,
	.nslots = DYNLOAD_COUNT(nftlib_names),
};

/* Load it once; 0, or -1 with the loader's message (fail closed: no capture, no run). */
static int
nftlib_load(char *err, size_t errlen)
{
	return dynload_once(&nftlib_dl, err, errlen);
}

size_t
netcapture_ruleset(const struct netns_link *link, uint16_t port, char *buf, size_t len)
{
	int n = snprintf(buf, len,
	    "table inet " NETCAPTURE_TABLE " {\n"
	    "\tchain prerouting {\n"
	    "\t\ttype nat hook prerouting priority dstnat; policy accept;\n"
	    "\t\tiifname \"%s\" ip daddr " NETCAPTURE_POOL " meta l4proto tcp redirect to :%u\n"
	    "\t}\n"
	    "\tchain input {\n"
	    "\t\ttype filter hook input priority filter; policy drop;\n"
	    "\t\tct state established,related accept\n"
	    "\t\tiifname \"%s\" ip daddr %s tcp dport %u accept\n"
	    "\t\tiifname \"%s\" ip daddr %s udp dport %u accept\n"
	    "\t\tmeta l4proto tcp reject with tcp reset\n"
	    "\t\treject\n"
	    "\t}\n"
	    "}\n",
	    link->host_if, (unsigned)port, link->host_if, link->host_addr, (unsigned)port,
	    link->host_if, link->host_addr, (unsigned)NETCAPTURE_DNS_PORT);

	return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

/* Install and read back, in the current namespace. */
static int
netcapture_apply(const struct netns_link *link, uint16_t port, char *err, size_t errlen)
{
	char rules[2048], want[64];
	struct nft_ctx *ctx;
	const char *out;
	int rc = -1;

	if (netcapture_ruleset(link, port, rules, sizeof(rules)) == 0)
		return errbuf_set(err, errlen, 0, "ruleset too long");
	if (nftlib_load(err, errlen) != 0)
		return -1;
	ctx = nftlib.nft_ctx_new(NFT_CTX_DEFAULT);
	if (ctx == NULL)
		return errbuf_set(err, errlen, ENOMEM, "nftables context");
	if (nftlib.nft_ctx_buffer_output(ctx) != 0 || nftlib.nft_ctx_buffer_error(ctx) != 0) {
		errbuf_set(err, errlen, ENOMEM, "nftables buffers");
		goto out;
	}
	if (nftlib.nft_run_cmd_from_buffer(ctx, rules) != 0) {
		const char *e = nftlib.nft_ctx_get_error_buffer(ctx);
		errbuf_set(err, errlen, 0, "nftables refused the capture rules (is nf_tables "
		    "with nat and redirect in this kernel?): %.200s", e != NULL ? e : "");
		goto out;
	}
	/* Read back: the table is there with the redirect and the stub's rule. */
	if (nftlib.nft_run_cmd_from_buffer(ctx, "list table inet " NETCAPTURE_TABLE) != 0 ||
	    (out = nftlib.nft_ctx_get_output_buffer(ctx)) == NULL) {
		errbuf_set(err, errlen, 0, "cannot read the capture rules back");
		goto out;
	}
	snprintf(want, sizeof(want), "redirect to :%u", (unsigned)port);
	if (strstr(out, want) == NULL || strstr(out, "udp dport 53 accept") == NULL ||
	    strstr(out, link->host_if) == NULL || strstr(out, "policy drop") == NULL) {
		errbuf_set(err, errlen, 0, "the capture rules read back differ from those installed");
		goto out;
	}
	rc = 0;
out:
	nftlib.nft_ctx_free(ctx);
	return rc;
}

static int
netcapture_dns_socket(const struct netns_link *link, char *err, size_t errlen)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return errbuf_set(err, errlen, errno, "stub resolver socket");
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(NETCAPTURE_DNS_PORT);
	sin.sin_addr.s_addr = htonl(link->net + 1);
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, link->host_if,
	    (socklen_t)strlen(link->host_if) + 1) != 0 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		errbuf_set(err, errlen, errno, "stub resolver on %s:53 dev %s", link->host_addr,
		    link->host_if);
		close(fd);
		return -1;
	}
	return fd;
}

int
netcapture_install(int nsfd, const struct netns_link *link, uint16_t port, int *dns_fd,
    char *err, size_t errlen)
{
	int home, fd = -1, rc = -1;

	*dns_fd = -1;
	home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		return errbuf_set(err, errlen, errno, "open /proc/self/ns/net");
	if (setns(nsfd, CLONE_NEWNET) != 0) {
		errbuf_set(err, errlen, errno, "enter the run's link namespace");
		close(home);
		return -1;
	}
	if (netcapture_apply(link, port, err, errlen) == 0 &&
	    (fd = netcapture_dns_socket(link, err, errlen)) >= 0)
		rc = 0;
	/* Back home; running on in the link namespace is never an option. */
	if (setns(home, CLONE_NEWNET) != 0) {
		log_warn("setns back to egress-exec's network namespace");
		_exit(70);
	}
	close(home);
	if (rc == 0)
		*dns_fd = fd;
	return rc;
}

int
netcapture_probe(char *err, size_t errlen)
{
	struct netns_link l;

	memset(&l, 0, sizeof(l));
	snprintf(l.host_if, sizeof(l.host_if), "egxprobe0");
	snprintf(l.host_addr, sizeof(l.host_addr), "169.254.1.1");
	l.net = 0xa9fe0100u;
	return netcapture_apply(&l, 3128, err, errlen);
}
