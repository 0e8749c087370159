/* scfilter.c - seccomp tables and their installer (see scfilter.h). */
#include "common/scfilter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"

scmp_filter_ctx
scf_new(const struct scf_spec *spec, char *err, size_t errlen)
{
	scmp_filter_ctx ctx = seccomp_init(spec->default_action);
	int rc = 0;

	if (ctx == NULL) {
		errbuf_set(err, errlen, 0, "seccomp_init failed (out of memory?)");
		return NULL;
	}
	if (spec->badarch_kill)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (rc == 0 && spec->tsync)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (rc == 0 && spec->nnp_first)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
	if (rc != 0) {
		errbuf_set(err, errlen, 0, "seccomp: setting filter attributes failed: %s",
		    strerror(-rc));
		seccomp_release(ctx);
		return NULL;
	}
	/* Only speed is at stake: an old libseccomp without the attribute is fine. */
	if (spec->optimize)
		(void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	return ctx;
}

/* Newer than libseccomp 2.5.4 (Debian 12): numbered alike on every architecture. */
static const struct {
	const char *name;
	int nr;
} scf_newer[] = {
	{ "fchmodat2", 452 }, { "setxattrat", 463 }, { "removexattrat", 466 },
	{ "file_setattr", 469 },
};

int
scf_resolve(const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);

	if (nr != __NR_SCMP_ERROR)
		return nr < 0 ? -1 : nr;   /* negative: a pseudo number, not a call here */
	for (size_t i = 0; i < EGRESS_NELEM(scf_newer); i++)
		if (strcmp(scf_newer[i].name, name) == 0)
			return scf_newer[i].nr;
	return -1;
}

int
scf_rule_failed(const char *what, int rc, char *err, size_t errlen)
{
	return errbuf_set(err, errlen, 0, "seccomp rule %s: %s", what, strerror(-rc));
}

int
scf_add_table(scmp_filter_ctx ctx, uint32_t action, const struct scf_rule *rows, size_t n,
    char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		int nr = scf_resolve(rows[i].name);
		int rc;

		if (nr < 0)
			continue;   /* not a system call on this architecture */
		if ((rc = seccomp_rule_add(ctx, action, nr, 0)) != 0)
			return scf_rule_failed(rows[i].name, rc, err, errlen);
	}
	return 0;
}

int
scf_compile(scmp_filter_ctx ctx, struct scf_prog *out, char *err, size_t errlen)
{
	uint32_t tsync = 0, nnp = 1;
	unsigned char *dst = (unsigned char *)out->insns;
	size_t got = 0;
	int sv[2], rc;

	out->len = 0;
	if (seccomp_attr_get(ctx, SCMP_FLTATR_CTL_TSYNC, &tsync) != 0 ||
	    seccomp_attr_get(ctx, SCMP_FLTATR_CTL_NNP, &nnp) != 0) {
		seccomp_release(ctx);
		return errbuf_set(err, errlen, 0, "seccomp: reading the filter attributes failed");
	}
	/* libseccomp 2.5 exports only to a descriptor. A socket pair, not a memfd: a process
	 * that already runs under a filter (the route helper under egressd's) may have no
	 * memfd_create, and a socket's buffer (far above the 32 KiB of the largest program)
	 * is not cut by the per-user pipe limit. Non-blocking: a program that did not fit
	 * fails the export, it never hangs. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) {
		seccomp_release(ctx);
		return errbuf_set(err, errlen, errno, "seccomp: socketpair");
	}
	rc = seccomp_export_bpf(ctx, sv[1]);
	seccomp_release(ctx);
	close(sv[1]);
	if (rc != 0) {
		close(sv[0]);
		return errbuf_set(err, errlen, 0, "seccomp: exporting the compiled filter failed: %s",
		    strerror(-rc));
	}
	while (got < sizeof(out->insns)) {
		ssize_t k = read(sv[0], dst + got, sizeof(out->insns) - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	if (got == sizeof(out->insns)) {
		unsigned char more;
		if (read(sv[0], &more, 1) == 1)
			got++;          /* past BPF_MAXINSNS: the kernel would refuse it */
	}
	close(sv[0]);
	if (got == 0 || got > sizeof(out->insns) || got % sizeof(struct sock_filter) != 0)
		return errbuf_set(err, errlen, 0, "seccomp: the compiled filter has an unusable size "
		    "(%zu bytes)", got);
	out->len = (unsigned short)(got / sizeof(struct sock_filter));
	out->tsync = tsync != 0;
	out->set_nnp = nnp != 0;
	return 0;
}

int
scf_install(struct scf_prog *p, char *err, size_t errlen)
{
	struct sock_fprog fprog = { .len = p->len, .filter = p->insns };
	long rc;

	if (p->len == 0)
		return errbuf_set(err, errlen, 0, "seccomp: no compiled filter to install");
	/* Without no_new_privs loading needs CAP_SYS_ADMIN, and a later set-user-ID exec could
	 * shed what the filter intends. */
	if (p->set_nnp && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return errbuf_set(err, errlen, errno, "seccomp: PR_SET_NO_NEW_PRIVS");
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return errbuf_set(err, errlen, 0, "seccomp: no_new_privs is not set; the step that "
		    "sets it must run before the filter is installed");
	/* A positive return names a thread that could not be synchronized. */
	rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
	    p->tsync ? SECCOMP_FILTER_FLAG_TSYNC : 0, &fprog);
	if (rc > 0)
		return errbuf_set(err, errlen, 0, "seccomp: loading the filter failed: thread %ld "
		    "could not be synchronized", rc);
	if (rc != 0)
		return errbuf_set(err, errlen, errno, "seccomp: loading the filter failed");
	return 0;
}

int
scf_load(scmp_filter_ctx ctx, char *err, size_t errlen)
{
	struct scf_prog *p = malloc(sizeof(*p));
	int rc;

	if (p == NULL) {
		seccomp_release(ctx);
		return errbuf_set(err, errlen, 0, "seccomp: out of memory");
	}
	rc = scf_compile(ctx, p, err, errlen);
	if (rc == 0)
		rc = scf_install(p, err, errlen);
	free(p);
	return rc;
}

bool
scf_active(void)
{
	char buf[4096];
	const char *p;

	if (file_read_text("/proc/self/status", 0, buf, sizeof(buf)) < 0)
		return false;
	if ((p = strstr(buf, "\nSeccomp:")) == NULL)
		return false;
	p += strlen("\nSeccomp:");
	while (*p == ' ' || *p == '\t')
		p++;
	return p[0] == '2' && (p[1] == '\n' || p[1] == '\0');
}
