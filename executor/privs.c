/*
 * privs - drop the worker to an unprivileged identity with no capabilities, and prove it.
 * See privs.h for the order and why it matters.
 */
#define _GNU_SOURCE 1
#include "executor/privs.h"

#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/util.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

struct rl {
	int res;
	const char *name;
	rlim_t value;
};

/* The rlimits privs_drop sets, in order; *n receives the count. */
static size_t
rlimits_of(const struct privs_spec *spec, struct rl out[4])
{
	size_t n = 0;

	out[n++] = (struct rl){ RLIMIT_CORE, "RLIMIT_CORE", 0 };
	out[n++] = (struct rl){ RLIMIT_FSIZE, "RLIMIT_FSIZE", (rlim_t)spec->fsize_bytes };
	out[n++] = (struct rl){ RLIMIT_NOFILE, "RLIMIT_NOFILE", (rlim_t)spec->open_files };
	if (spec->nproc != 0)
		out[n++] = (struct rl){ RLIMIT_NPROC, "RLIMIT_NPROC", (rlim_t)spec->nproc };
	return n;
}

static int
spec_check(const struct privs_spec *spec, char *err, size_t errlen)
{
	if (spec == NULL) {
		errbuf_set(err, errlen, 0, "privs: no spec");
		return -1;
	}
	/* Running the worker as root (or with root's group) is never what a caller means. */
	if (spec->uid == 0 || spec->gid == 0) {
		errbuf_set(err, errlen, 0, "privs: the worker uid/gid must not be 0");
		return -1;
	}
	if (spec->uid == (uid_t)-1 || spec->gid == (gid_t)-1) {
		errbuf_set(err, errlen, 0, "privs: the worker uid/gid must not be -1");
		return -1;
	}
	if (spec->fsize_bytes == 0 || spec->open_files == 0) {
		errbuf_set(err, errlen, 0, "privs: the file size and open-files limits must be nonzero");
		return -1;
	}
	return 0;
}

int
privs_drop(const struct privs_spec *spec, char *err, size_t errlen)
{
	struct rl rls[4];
	size_t nrl;
	gid_t groups[1];

	if (spec_check(spec, err, errlen) != 0)
		return -1;
	/* 1. rlimits while still privileged (raising a hard limit needs CAP_SYS_RESOURCE). */
	nrl = rlimits_of(spec, rls);
	for (size_t i = 0; i < nrl; i++) {
		struct rlimit r = { rls[i].value, rls[i].value };
		if (setrlimit(rls[i].res, &r) != 0) {
			errbuf_set(err, errlen, 0, "privs: setrlimit(%s, %llu): %s", rls[i].name,
			    (unsigned long long)rls[i].value, strerror(errno));
			return -1;
		}
	}
	/* 2. no_new_privs: nothing exec'd later can gain privileges (setuid binaries, file
	 * capabilities), and the seccomp filter can be loaded unprivileged. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		errbuf_set(err, errlen, 0, "privs: PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -1;
	}
	/* 3. Bounding set (needs CAP_SETPCAP: do it while root) and ambient set. Without the
	 * bounding set cleared, a later exec of a file with capabilities could regain them
	 * (no_new_privs blocks that too: two locks on one door). */
	capng_clear(CAPNG_SELECT_ALL);
	if (capng_apply(CAPNG_SELECT_BOUNDS) != 0) {
		errbuf_set(err, errlen, 0, "privs: clearing the capability bounding set failed (needs "
		    "CAP_SETPCAP)");
		return -1;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
		errbuf_set(err, errlen, 0, "privs: clearing the ambient capabilities: %s", strerror(errno));
		return -1;
	}
	/* Keep-caps off so the uid change below clears the permitted and effective sets. */
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0) {
		errbuf_set(err, errlen, 0, "privs: PR_SET_KEEPCAPS 0: %s", strerror(errno));
		return -1;
	}
	/* 4. Identity: groups first (needs CAP_SETGID, lost with the uid), then gid, then uid. */
	groups[0] = spec->gid;
	if (setgroups(1, groups) != 0) {
		errbuf_set(err, errlen, 0, "privs: setgroups: %s", strerror(errno));
		return -1;
	}
	if (setresgid(spec->gid, spec->gid, spec->gid) != 0) {
		errbuf_set(err, errlen, 0, "privs: setresgid(%u): %s", (unsigned)spec->gid, strerror(errno));
		return -1;
	}
	if (setresuid(spec->uid, spec->uid, spec->uid) != 0) {
		errbuf_set(err, errlen, 0, "privs: setresuid(%u): %s", (unsigned)spec->uid, strerror(errno));
		return -1;
	}
	/* 5. Whatever survived (a securebits setting we did not expect): clear it. Dropping
	 * is always allowed. */
	capng_clear(CAPNG_SELECT_CAPS);
	if (capng_apply(CAPNG_SELECT_CAPS) != 0) {
		errbuf_set(err, errlen, 0, "privs: clearing effective/permitted/inheritable failed");
		return -1;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
		errbuf_set(err, errlen, 0, "privs: clearing the ambient capabilities: %s", strerror(errno));
		return -1;
	}
	/* 6. Prove it. */
	return privs_verify(spec, err, errlen);
}

/* Value of "Key:\t..." from a /proc status text; NULL when absent. */
static const char *
status_field(const char *buf, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = buf; p != NULL && *p != '\0';) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ':') {
			p += kl + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			return p;
		}
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return NULL;
}

/* Does the field's value (up to end of line) equal want? */
static bool
field_is(const char *buf, const char *key, const char *want)
{
	const char *v = status_field(buf, key);
	size_t wl = strlen(want);

	return v != NULL && strncmp(v, want, wl) == 0 && (v[wl] == '\n' || v[wl] == '\0');
}

/* Read /proc/self/status into buf. */
TESTABLE int privs_read_status(char *buf, size_t len);

TESTABLE int
privs_read_status(char *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0 || len == 0)
		return -1;
	while (got < len - 1 && (n = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)n;
	close(fd);
	buf[got] = '\0';
	return got > 0 ? 0 : -1;
}

int
privs_verify(const struct privs_spec *spec, char *err, size_t errlen)
{
	static const char *const capkeys[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
	char buf[8192];
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	gid_t groups[8];
	int ng;
	struct rl rls[4];
	size_t nrl;

	if (spec_check(spec, err, errlen) != 0)
		return -1;
	if (privs_read_status(buf, sizeof(buf)) != 0) {
		errbuf_set(err, errlen, 0, "privs: cannot read /proc/self/status");
		return -1;
	}
	for (size_t i = 0; i < EGRESS_NELEM(capkeys); i++) {
		if (!field_is(buf, capkeys[i], "0000000000000000")) {
			errbuf_set(err, errlen, 0, "privs: %s is not zero after the drop", capkeys[i]);
			return -1;
		}
	}
	if (!field_is(buf, "NoNewPrivs", "1")) {
		errbuf_set(err, errlen, 0, "privs: NoNewPrivs is not 1");
		return -1;
	}
	if (getresuid(&ru, &eu, &su) != 0 || ru != spec->uid || eu != spec->uid ||
	    su != spec->uid) {
		errbuf_set(err, errlen, 0, "privs: uid is not %u (real, effective and saved)",
		    (unsigned)spec->uid);
		return -1;
	}
	if (getresgid(&rg, &eg, &sg) != 0 || rg != spec->gid || eg != spec->gid ||
	    sg != spec->gid) {
		errbuf_set(err, errlen, 0, "privs: gid is not %u (real, effective and saved)",
		    (unsigned)spec->gid);
		return -1;
	}
	ng = getgroups((int)EGRESS_NELEM(groups), groups);
	if (ng < 0 || ng > 1 || (ng == 1 && groups[0] != spec->gid)) {
		errbuf_set(err, errlen, 0, "privs: supplementary groups are not empty or {%u}",
		    (unsigned)spec->gid);
		return -1;
	}
	nrl = rlimits_of(spec, rls);
	for (size_t i = 0; i < nrl; i++) {
		struct rlimit r;
		if (getrlimit(rls[i].res, &r) != 0 || r.rlim_cur != rls[i].value ||
		    r.rlim_max != rls[i].value) {
			errbuf_set(err, errlen, 0, "privs: %s is not %llu (soft and hard)", rls[i].name,
			    (unsigned long long)rls[i].value);
			return -1;
		}
	}
	return 0;
}
