/*
 * robind - the refusal rules for preset read-only binds (see robind.h).
 */
#define _GNU_SOURCE 1
#include "executor/robind.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/limits.h"
#include "common/util.h"
#include "executor/mounts.h"

/* Locations a bind may neither be, contain, nor lie inside. mounts_denied_paths (the
 * mandatory denials) is checked as well. */
static const char *const ROBIND_SENSITIVE[] = {
	"/root", "/home", "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh",
	"/etc/egressd", "/var/log/egressd", "/run/egressd", "/var/lib/egressd",
	"/run/egress-exec", "/run", "/var/run", "/proc", "/dev", "/sys", "/boot",
	"/var/lib/docker", "/var/lib/containerd", "/var/lib/containers",
	NULL
};

/* What the sandbox builds or binds itself: a bind may not replace or nest in these. */
static const char *const ROBIND_BUILT[] = {
	"/etc", "/tmp", "/work", NULL
};
static const char *const ROBIND_SYSTEM[] = {
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", NULL
};

/* Is a equal to b, or a directory-prefix of b ("/opt" of "/opt/node")? */
static bool
path_within(const char *inner, const char *outer)
{
	size_t n = strlen(outer);

	if (strcmp(outer, "/") == 0)
		return true;
	return strncmp(inner, outer, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

/* Same location, or one contains the other. */
static bool
path_overlaps(const char *a, const char *b)
{
	return path_within(a, b) || path_within(b, a);
}

bool
robind_path_canonical(const char *s)
{
	if (s[0] != '/' || strlen(s) >= EGRESS_PATH_MAX)
		return false;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	if (s[1] == '\0')
		return true;   /* "/" itself: canonical, refused as sensitive */
	for (const char *p = s + 1;;) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == 0 || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (e == NULL)
			break;
		p = e + 1;
	}
	return true;
}

bool
robind_sensitive(const char *path, const char **which)
{
	if (strcmp(path, "/") == 0) {
		*which = "/";
		return true;
	}
	for (size_t i = 0; ROBIND_SENSITIVE[i]; i++)
		if (path_overlaps(path, ROBIND_SENSITIVE[i])) {
			*which = ROBIND_SENSITIVE[i];
			return true;
		}
	for (size_t i = 0; mounts_denied_paths[i]; i++)
		if (path_overlaps(path, mounts_denied_paths[i])) {
			*which = mounts_denied_paths[i];
			return true;
		}
	return false;
}

/* A home directory of a person's account (uid 0 or >= 1000, not nobody) overlapping path. */
static const char *
robind_home(const char *path)
{
	static char home[EGRESS_PATH_MAX];
	struct passwd *pw;
	const char *hit = NULL;

	setpwent();
	while ((pw = getpwent()) != NULL) {
		if (!(pw->pw_uid == 0 || (pw->pw_uid >= 1000 && pw->pw_uid != 65534)))
			continue;
		if (pw->pw_dir == NULL || pw->pw_dir[0] != '/' || strcmp(pw->pw_dir, "/") == 0)
			continue;
		if (path_overlaps(path, pw->pw_dir)) {
			snprintf(home, sizeof(home), "%s", pw->pw_dir);
			hit = home;
			break;
		}
	}
	endpwent();
	return hit;
}

enum reason
robind_check(const char *path, char *msg, size_t msglen)
{
	char real[PATH_MAX];
	const char *which = NULL;
	struct stat st;

	if (!robind_path_canonical(path)) {
		errbuf_set(msg, msglen, 0, "ro_bind %s: not an absolute canonical path (no ., .., "
		    "// or trailing /)", path);
		return REASON_ADM_BIND_REFUSED;
	}
	if (robind_sensitive(path, &which)) {
		errbuf_set(msg, msglen, 0, "ro_bind %s: overlaps %s, which a worker never sees "
		    "(credentials, homes, sockets, egressd's and egress-exec's own files); bind "
		    "a narrower toolchain directory", path, which);
		return REASON_ADM_BIND_REFUSED;
	}
	for (size_t i = 0; ROBIND_BUILT[i]; i++)
		if (path_overlaps(path, ROBIND_BUILT[i])) {
			errbuf_set(msg, msglen, 0, "ro_bind %s: overlaps %s, which the sandbox builds "
			    "itself", path, ROBIND_BUILT[i]);
			return REASON_ADM_BIND_REFUSED;
		}
	for (size_t i = 0; ROBIND_SYSTEM[i]; i++)
		if (path_overlaps(path, ROBIND_SYSTEM[i])) {
			errbuf_set(msg, msglen, 0, "ro_bind %s: overlaps %s, which the sandbox already "
			    "shows read-only; drop this entry", path, ROBIND_SYSTEM[i]);
			return REASON_ADM_BIND_REFUSED;
		}
	if ((which = robind_home(path)) != NULL) {
		errbuf_set(msg, msglen, 0, "ro_bind %s: overlaps the home directory %s; install the "
		    "toolchain outside homes (e.g. /opt)", path, which);
		return REASON_ADM_BIND_REFUSED;
	}
	if (realpath(path, real) == NULL) {
		errbuf_set(msg, msglen, 0, "ro_bind %s: %s", path, strerror(errno));
		return REASON_ADM_BIND_REFUSED;
	}
	if (strcmp(real, path) != 0) {
		errbuf_set(msg, msglen, 0, "ro_bind %s: a component is a symbolic link (to %s); "
		    "name the real path", path, real);
		return REASON_ADM_BIND_REFUSED;
	}
	if (stat(path, &st) < 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
		errbuf_set(msg, msglen, 0, "ro_bind %s: neither a directory nor a regular file",
		    path);
		return REASON_ADM_BIND_REFUSED;
	}
	return REASON_ALLOWED;
}

bool
robind_visible(const char *path, const char *const *binds)
{
	for (size_t i = 0; ROBIND_SYSTEM[i]; i++)
		if (path_within(path, ROBIND_SYSTEM[i]))
			return true;
	for (size_t i = 0; binds != NULL && binds[i] != NULL; i++)
		if (path_within(path, binds[i]))
			return true;
	return false;
}
