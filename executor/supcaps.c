/*
 * supcaps - drop what egress-exec's supervisor never needs. See supcaps.h; the reasons per
 * capability are in KEPT below and in docs/SECURITY.md.
 */
#define _GNU_SOURCE 1
#include "executor/supcaps.h"

#include <cap-ng.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static const struct {
	int cap;
	const char *why;
} KEPT[] = {
	{ CAP_SYS_ADMIN, "namespaces, mounts, pivot_root, tmpfs layers, cgroup namespace" },
	{ CAP_NET_ADMIN, "veth pair, addresses and links in both namespaces" },
	{ CAP_SETUID, "the worker's uid; uid maps of the idmapped repository" },
	{ CAP_SETGID, "the worker's gid and groups; gid maps" },
	{ CAP_SETPCAP, "the worker empties its bounding set" },
	{ CAP_SETFCAP, "an idmapped mount that maps uid 0 (Linux >= 5.12)" },
	{ CAP_KILL, "teardown kills the worker's uid; stopping the embedded egressd" },
	{ CAP_DAC_OVERRIDE, "the root-owned cgroup tree, control socket, run folders" },
	{ CAP_DAC_READ_SEARCH, "reading the repository and the run folder whatever their modes" },
	{ CAP_FOWNER, "modes and ownership of the upper layer and run folder" },
	{ CAP_CHOWN, "the upper layer gets the repository root's owner" },
	{ CAP_FSETID, "copy-up keeps set-id bits of repository files" },
	{ CAP_MKNOD, "device nodes of the sandbox's /dev" },
	{ CAP_SYS_CHROOT, "the sandbox's root (pivot_root/chroot fallbacks)" },
	{ CAP_SYS_RESOURCE, "worker rlimits above the current hard limit; tmpfs sizes" },
	{ CAP_NET_BIND_SERVICE, "an embedded egressd configured on a port below 1024" },
	{ CAP_SYS_PTRACE, "namespace files (/proc/<pid>/ns) and pidfds of the sandbox's init" },
};

bool
supcaps_kept(int cap)
{
	for (size_t i = 0; i < EGRESS_NELEM(KEPT); i++)
		if (KEPT[i].cap == cap)
			return true;
	return false;
}

/* The hex mask after "key:\t" in /proc/self/status. */
static int
status_mask(const char *key, uint64_t *out)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	size_t kl = strlen(key);
	int rc = -1;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
			char *end = NULL;

			errno = 0;
			*out = strtoull(line + kl + 1, &end, 16);
			rc = (errno == 0 && end != line + kl + 1) ? 0 : -1;
			break;
		}
	}
	fclose(f);
	return rc;
}

int
supcaps_limit(char *err, size_t errlen)
{
	static const char *const sets[] = { "CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb" };
	uint64_t keep = 0, m;

	if (capng_get_caps_process() != 0) {
		snprintf(err, errlen, "cannot read this process's capabilities");
		return -1;
	}
	if (!capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP))
		return 0;   /* not privileged: nothing to limit */
	for (int cap = 0; cap <= CAP_LAST_CAP && cap < 64; cap++) {
		if (supcaps_kept(cap)) {
			keep |= UINT64_C(1) << cap;
			continue;
		}
		capng_update(CAPNG_DROP, (capng_type_t)(CAPNG_EFFECTIVE | CAPNG_PERMITTED |
		    CAPNG_INHERITABLE | CAPNG_BOUNDING_SET), (unsigned)cap);
	}
	if (capng_apply(CAPNG_SELECT_BOTH) != 0) {
		snprintf(err, errlen, "cannot drop the capabilities egress-exec never needs");
		return -1;
	}
	/* Read back: no dropped bit anywhere. */
	for (size_t i = 0; i < EGRESS_NELEM(sets); i++) {
		if (status_mask(sets[i], &m) != 0) {
			if (strcmp(sets[i], "CapAmb") == 0)
				continue;
			snprintf(err, errlen, "cannot read %s back", sets[i]);
			return -1;
		}
		if ((m & ~keep) != 0) {
			snprintf(err, errlen, "%s still holds %#" PRIx64 " after the drop", sets[i],
			    m & ~keep);
			return -1;
		}
	}
	return 0;
}
