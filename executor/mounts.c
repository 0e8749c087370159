/*
 * mounts - new root on tmpfs, read-only system binds, overlay over the repository.
 * The order of the steps and why is in docs/sandbox.md ("mounts").
 */
#define _GNU_SOURCE
#include "executor/mounts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/pathglob.h"
#include "common/util.h"
#include "executor/gitconfig.h"

const char *const mounts_denied_paths[] = {
	"/root", "/home", "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh",
	"/var/run/docker.sock", "/run/docker.sock", "/run/containerd", "/run/podman",
	"/var/lib/docker", "/var/lib/containerd", "/run/user", "/var/run/secrets",
	"/root/.ssh", "/root/.gnupg", "/root/.aws", "/root/.config/gcloud", "/root/.azure",
	"/root/.docker", "/root/.kube", "/sys", "/boot",
	NULL
};

bool
mounts_relpath_ok(const char *p)
{
	const char *c = p;

	if (p == NULL || *p == '\0' || *p == '/' || strlen(p) > EGRESS_REPO_PATH_MAX)
		return false;
	while (*c) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);

		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!slash)
			break;
		c = slash + 1;
		if (*c == '\0')
			return false;   /* trailing slash */
	}
	return true;
}

bool
mounts_workdir_ok(const char *w)
{
	static const char *const reserved[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64",
		"libx32", "etc", "proc", "dev", "tmp", NULL };
	size_t n;

	if (w == NULL || w[0] != '/' || !mounts_relpath_ok(w + 1))
		return false;
	n = strcspn(w + 1, "/");
	for (size_t i = 0; reserved[i]; i++)
		if (strlen(reserved[i]) == n && strncmp(w + 1, reserved[i], n) == 0)
			return false;
	return true;
}

bool
mounts_option_path_ok(const char *p)
{
	if (p == NULL || *p != '/' || strlen(p) >= EGRESS_PATH_MAX)
		return false;
	return strpbrk(p, ",:\\\n\r") == NULL;
}

static int
mounts_path(char *out, const char *a, const char *b)
{
	int n = snprintf(out, EGRESS_PATH_MAX, "%s%s", a, b);
	return (n < 0 || n >= EGRESS_PATH_MAX) ? -1 : 0;
}

/* Bind src onto dst (which exists) and make the bind read-only, nosuid, nodev. */
static int
mounts_bind_ro(const char *src, const char *dst, bool allow_dev, char *err, size_t errlen)
{
	unsigned long fl = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID;

	if (!allow_dev)
		fl |= MS_NODEV;
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return errbuf_set(err, errlen, errno, "bind %s", src);
	if (mount(NULL, dst, NULL, fl, NULL) < 0)
		return errbuf_set(err, errlen, errno, "remount read-only %s", dst);
	return 0;
}

/* Inodes of a bounded tmpfs: directories, empty files and symlinks take no blocks, so
 * without an inode bound `size=` would not bound what a worker can make the kernel hold. */
static uint64_t
mounts_inodes_for(uint64_t bytes)
{
	uint64_t n = bytes / 2048;

	if (n < 1024)
		n = 1024;
	if (n > (1u << 22))
		n = 1u << 22;
	return n;
}

static int
mounts_tmpfs(const char *dst, uint64_t bytes, unsigned mode, unsigned long flags,
    char *err, size_t errlen)
{
	char opt[128];

	snprintf(opt, sizeof(opt), "size=%llu,nr_inodes=%llu,mode=%04o",
	    (unsigned long long)bytes, (unsigned long long)mounts_inodes_for(bytes), mode);
	if (mount("tmpfs", dst, "tmpfs", flags, opt) < 0)
		return errbuf_set(err, errlen, errno, "tmpfs %s", dst);
	return 0;
}

static int
mounts_write_file(const char *path, const char *text, char *err, size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	size_t len = strlen(text);

	if (fd < 0)
		return errbuf_set(err, errlen, errno, "create %s", path);
	if (write_all(fd, text, len) != 0) {
		int e = errno;
		close(fd);
		return errbuf_set(err, errlen, e, "write %s", path);
	}
	close(fd);
	return 0;
}

/* Create an empty file to bind onto. */
static int
mounts_touch(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);

	if (fd < 0)
		return errbuf_set(err, errlen, errno, "create %s", path);
	close(fd);
	return 0;
}

/* mkdir -p for an absolute path under root (both host paths). */
static int
mounts_mkdir_p(const char *root, const char *abs, char *err, size_t errlen)
{
	char path[EGRESS_PATH_MAX];
	size_t rl = strlen(root);
	char *c;

	if (mounts_path(path, root, abs) < 0)
		return errbuf_set(err, errlen, 0, "path too long: %s", abs);
	for (c = path + rl + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return errbuf_set(err, errlen, errno, "mkdir %s", path);
		*c = '/';
	}
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return errbuf_set(err, errlen, errno, "mkdir %s", path);
	return 0;
}

/* The system directories the executable needs, read-only; merged-usr symlinks copied. */
static int
mounts_system_dirs(const char *root, char *err, size_t errlen)
{
	static const char *const dirs[] = {
		"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", NULL
	};

	for (size_t i = 0; dirs[i]; i++) {
		char dst[EGRESS_PATH_MAX];
		struct stat st;

		if (lstat(dirs[i], &st) < 0) {
			if (errno == ENOENT)
				continue;
			return errbuf_set(err, errlen, errno, "lstat %s", dirs[i]);
		}
		if (mounts_path(dst, root, dirs[i]) < 0)
			return errbuf_set(err, errlen, 0, "path too long");
		if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t n = readlink(dirs[i], target, sizeof(target) - 1);

			if (n < 0)
				return errbuf_set(err, errlen, errno, "readlink %s", dirs[i]);
			target[n] = '\0';
			if (symlink(target, dst) < 0)
				return errbuf_set(err, errlen, errno, "symlink %s", dst);
			continue;
		}
		if (!S_ISDIR(st.st_mode))
			continue;
		if (mkdir(dst, 0755) < 0)
			return errbuf_set(err, errlen, errno, "mkdir %s", dst);
		if (mounts_bind_ro(dirs[i], dst, false, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* A minimal /etc: generated identity files, the CA store, the loader cache. */
/* MOUNTS_CA_BUNDLE: the host's roots (bounded) and the run CA, in the new /etc. */
static int
mounts_ca_bundle(const char *etc, const char *run_ca_pem, char *err, size_t errlen)
{
	char dir[EGRESS_PATH_MAX], p[EGRESS_PATH_MAX];
	char *buf;
	size_t n = 0, cl = strlen(run_ca_pem);
	FILE *f = fopen(MOUNTS_HOST_CA_FILE, "re");
	int rc;

	buf = malloc(EGRESS_CONF_FILE_MAX + cl + 2);
	if (buf == NULL) {
		if (f != NULL)
			fclose(f);
		return errbuf_set(err, errlen, ENOMEM, "CA bundle");
	}
	/* No host bundle: the run CA alone (then only the model connection verifies). */
	if (f != NULL) {
		n = fread(buf, 1, EGRESS_CONF_FILE_MAX, f);
		fclose(f);
		if (n > 0 && buf[n - 1] != '\n')
			buf[n++] = '\n';
	}
	memcpy(buf + n, run_ca_pem, cl);
	buf[n + cl] = '\0';
	if (mounts_path(dir, etc, "/egress") < 0 || mkdir(dir, 0755) < 0) {
		free(buf);
		return errbuf_set(err, errlen, errno, "mkdir /etc/egress");
	}
	if (mounts_path(p, etc, "/egress/ca-bundle.pem") < 0) {
		free(buf);
		return errbuf_set(err, errlen, 0, "path too long");
	}
	rc = mounts_write_file(p, buf, err, errlen);
	free(buf);
	return rc;
}

static int
mounts_etc(const char *root, uid_t uid, gid_t gid, const char *run_ca_pem, char *err,
    size_t errlen)
{
	static const char *const binds[] = {
		"/etc/ssl", "/etc/ca-certificates", "/etc/ca-certificates.conf",
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
		"/etc/localtime", "/etc/mime.types", NULL
	};
	char etc[EGRESS_PATH_MAX], p[EGRESS_PATH_MAX], text[512];

	if (mounts_path(etc, root, "/etc") < 0 || mkdir(etc, 0755) < 0)
		return errbuf_set(err, errlen, errno, "mkdir /etc");
	if (mounts_tmpfs(etc, 1024 * 1024, 0755, MS_NOSUID | MS_NODEV | MS_NOEXEC, err, errlen) < 0)
		return -1;

	snprintf(text, sizeof(text),
	    "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
	    "sandbox:x:%u:%u:egress sandbox:/tmp:/bin/sh\n%s",
	    (unsigned)uid, (unsigned)gid, uid == 65534 ? "" :
	    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
	if (mounts_path(p, etc, "/passwd") < 0 || mounts_write_file(p, text, err, errlen) < 0)
		return -1;
	snprintf(text, sizeof(text), "root:x:0:\nsandbox:x:%u:\n%s", (unsigned)gid,
	    gid == 65534 ? "" : "nogroup:x:65534:\n");
	if (mounts_path(p, etc, "/group") < 0 || mounts_write_file(p, text, err, errlen) < 0)
		return -1;
	/* nsswitch.conf and resolv.conf follow "go" (mounts_etc_finish): the resolver's
	 * address is the run's link, made after the attestation. */
	/* localhost only. */
	if (mounts_path(p, etc, "/hosts") < 0 || mounts_write_file(p,
	    "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n", err, errlen) < 0)
		return -1;
	if (mounts_path(p, etc, "/hostname") < 0 || mounts_write_file(p, "sandbox\n", err, errlen) < 0)
		return -1;
	if (run_ca_pem != NULL && mounts_ca_bundle(etc, run_ca_pem, err, errlen) < 0)
		return -1;

	for (size_t i = 0; binds[i]; i++) {
		struct stat st;

		if (lstat(binds[i], &st) < 0)
			continue;
		if (mounts_path(p, root, binds[i]) < 0)
			return errbuf_set(err, errlen, 0, "path too long");
		if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t n = readlink(binds[i], target, sizeof(target) - 1);

			if (n < 0)
				continue;
			target[n] = '\0';
			if (symlink(target, p) < 0)
				return errbuf_set(err, errlen, errno, "symlink %s", p);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (mkdir(p, 0755) < 0)
				return errbuf_set(err, errlen, errno, "mkdir %s", p);
		} else if (S_ISREG(st.st_mode)) {
			if (mounts_touch(p, err, errlen) < 0)
				return -1;
		} else {
			continue;
		}
		if (mounts_bind_ro(binds[i], p, false, err, errlen) < 0)
			return -1;
	}
	/* /etc stays writable (to this process alone: nothing else runs in the namespace)
	 * until mounts_etc_finish, which makes it read-only; mounts_verify proves that. */
	return 0;
}

int
mounts_etc_finish(const char *resolver, char *err, size_t errlen)
{
	char text[512];

	if (mounts_write_file("/etc/nsswitch.conf", resolver != NULL ?
	    "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n"
	    "protocols: files\nservices: files\n" :
	    "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n"
	    "protocols: files\nservices: files\n", err, errlen) < 0)
		return -1;
	/* Transparent capture: the run's stub resolver, which answers only granted names
	 * (docs/transparent.md); without it no resolv.conf at all: names are egressd's
	 * business. No search list: a name is asked as written. */
	if (resolver != NULL) {
		snprintf(text, sizeof(text), "# egress: the run's stub resolver (egressd); it "
		    "answers granted names only\nnameserver %s\noptions ndots:1 timeout:2 "
		    "attempts:2\n", resolver);
		if (mounts_write_file("/etc/resolv.conf", text, err, errlen) < 0)
			return -1;
	}
	if (mount(NULL, "/etc", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL) < 0)
		return errbuf_set(err, errlen, errno, "remount /etc read-only");
	return 0;
}

/* A minimal /dev: five character devices bound from the host, /dev/shm, fd links. */
static int
mounts_dev(const char *root, uint64_t shm_bytes, char *err, size_t errlen)
{
	static const char *const devs[] = { "null", "zero", "full", "random", "urandom", NULL };
	static const char *const links[][2] = {
		{ "/proc/self/fd", "fd" }, { "/proc/self/fd/0", "stdin" },
		{ "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" },
	};
	char dev[EGRESS_PATH_MAX], p[EGRESS_PATH_MAX], src[64];

	if (mounts_path(dev, root, "/dev") < 0 || mkdir(dev, 0755) < 0)
		return errbuf_set(err, errlen, errno, "mkdir /dev");
	if (mounts_tmpfs(dev, 64 * 1024, 0755, MS_NOSUID | MS_NOEXEC, err, errlen) < 0)
		return -1;
	for (size_t i = 0; devs[i]; i++) {
		if (snprintf(src, sizeof(src), "/dev/%s", devs[i]) >= (int)sizeof(src) ||
		    snprintf(p, sizeof(p), "%s/%s", dev, devs[i]) >= (int)sizeof(p))
			return errbuf_set(err, errlen, 0, "path too long");
		if (mounts_touch(p, err, errlen) < 0)
			return -1;
		/* Device nodes keep working on a nodev-free bind; writes to null/zero/full are
		 * harmless, so the bind stays read-write (a read-only bind would refuse them). */
		if (mount(src, p, NULL, MS_BIND, NULL) < 0)
			return errbuf_set(err, errlen, errno, "bind %s", src);
		if (mount(NULL, p, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NOEXEC, NULL) < 0)
			return errbuf_set(err, errlen, errno, "remount %s", p);
	}
	for (size_t i = 0; i < EGRESS_NELEM(links); i++) {
		if (snprintf(p, sizeof(p), "%s/%s", dev, links[i][1]) >= (int)sizeof(p))
			return errbuf_set(err, errlen, 0, "path too long");
		if (symlink(links[i][0], p) < 0)
			return errbuf_set(err, errlen, errno, "symlink %s", p);
	}
	if (mounts_path(p, dev, "/shm") < 0)
		return errbuf_set(err, errlen, 0, "path too long");
	if (mkdir(p, 01777) < 0)
		return errbuf_set(err, errlen, errno, "mkdir /dev/shm");
	if (shm_bytes > 16ull * 1024 * 1024)
		shm_bytes = 16ull * 1024 * 1024;
	if (mounts_tmpfs(p, shm_bytes, 01777, MS_NOSUID | MS_NODEV | MS_NOEXEC, err, errlen) < 0)
		return -1;
	if (mount(NULL, dev, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL) < 0)
		return errbuf_set(err, errlen, errno, "remount /dev read-only");
	return 0;
}

/*
 * Mask a file with a read-only, nodev bind of /dev/null, attached onto the O_PATH fd. The new
 * mount API is used because a remount through /proc/self/fd/N would reach the file under
 * the mask, not the mask: the detached tree is made read-only first, then moved in place.
 */
static int
mounts_mask_file(int target_fd, char *err, size_t errlen)
{
	/* nodev: the mask cannot even be opened (EACCES), so neither reads nor writes reach
	 * anything; read-only and noexec on top. */
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
		MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NODEV };
	int tree = (int)syscall(SYS_open_tree, AT_FDCWD, "/dev/null",
	    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	int rc = 0;

	if (tree < 0)
		return errbuf_set(err, errlen, errno, "open_tree /dev/null");
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		rc = errbuf_set(err, errlen, errno, "mount_setattr read-only");
	else if (syscall(SYS_move_mount, tree, "", target_fd, "",
	    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		rc = errbuf_set(err, errlen, errno, "move_mount mask");
	close(tree);
	return rc;
}

/*
 * Mask one repository-relative path inside the overlay. The path is resolved without
 * following any symlink (a repository symlink must not redirect the mask to a host path);
 * a path that does not exist or goes through a symlink is not masked (the changed-set
 * scope check refuses writes to it later).
 */
static int
mounts_mask(const char *work_host, const char *rel, char *err, size_t errlen)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH,
	};
	char fdpath[64];
	struct stat st;
	int dirfd, fd, rc;

	if (!mounts_relpath_ok(rel))
		return errbuf_set(err, errlen, 0, "forbidden path is not canonical: %s", rel);
	dirfd = open(work_host, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return errbuf_set(err, errlen, errno, "open %s", work_host);
	fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	close(dirfd);
	if (fd < 0) {
		if (errno == ENOENT || errno == ELOOP || errno == EXDEV || errno == ENOTDIR)
			return 0;
		return errbuf_set(err, errlen, errno, "open forbidden path %s", rel);
	}
	if (fstat(fd, &st) < 0) {
		close(fd);
		return errbuf_set(err, errlen, errno, "stat %s", rel);
	}
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	if (S_ISDIR(st.st_mode)) {
		rc = mounts_tmpfs(fdpath, 4096, 0, MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
		    err, errlen);
	} else if (S_ISREG(st.st_mode)) {
		rc = mounts_mask_file(fd, err, errlen);
	} else {
		rc = 0;   /* sockets, fifos: nothing readable to hide */
	}
	close(fd);
	return rc;
}

struct mask_walk {
	const char *work_host;
	const char *pattern;
	char rel[EGRESS_REPO_PATH_MAX + 1];
	unsigned visited, masked;
	char *err;
	size_t errlen;
};

/* One directory of the glob walk: every entry whose repository path matches is masked
 * (a matching directory whole, not entered); other directories are entered ('*' crosses
 * '/'). Never follows a symlink; the top-level .git is not entered (it is read-only and
 * holds no work-tree path). Bounded in depth, entries visited and masks made. */
static int
mounts_mask_walk(struct mask_walk *w, int dfd, size_t rellen, unsigned depth)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (depth > EGRESS_MASK_DEPTH_MAX) {
		close(dfd);
		return errbuf_set(w->err, w->errlen, 0, "forbidden glob %s: the repository nests "
		    "deeper than %d directories; name the paths literally", w->pattern,
		    EGRESS_MASK_DEPTH_MAX);
	}
	if ((d = fdopendir(dfd)) == NULL) {
		close(dfd);
		return errbuf_set(w->err, w->errlen, errno, "forbidden glob %s: read %s",
		    w->pattern, rellen ? w->rel : ".");
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		size_t nl = strlen(de->d_name), nlen = rellen + (rellen ? 1 : 0) + nl;
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (rellen == 0 && strcmp(de->d_name, ".git") == 0)
			continue;
		if (++w->visited > EGRESS_CHANGED_PATHS_MAX) {
			rc = errbuf_set(w->err, w->errlen, 0, "forbidden glob %s: more than %d "
			    "entries in the repository to match it against; name the paths "
			    "literally", w->pattern, EGRESS_CHANGED_PATHS_MAX);
			break;
		}
		if (nlen > EGRESS_REPO_PATH_MAX)
			continue;       /* no canonical path: nothing a pattern can name */
		if (rellen)
			w->rel[rellen] = '/';
		memcpy(w->rel + rellen + (rellen ? 1 : 0), de->d_name, nl + 1);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
			rc = errbuf_set(w->err, w->errlen, errno, "forbidden glob %s: stat %s",
			    w->pattern, w->rel);
			break;
		}
		if (glob_match(w->pattern, w->rel)) {
			if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
				if (++w->masked > EGRESS_MASK_GLOB_MAX) {
					rc = errbuf_set(w->err, w->errlen, 0, "forbidden glob %s matches "
					    "more than %d paths; forbid their directory instead",
					    w->pattern, EGRESS_MASK_GLOB_MAX);
					break;
				}
				rc = mounts_mask(w->work_host, w->rel, w->err, w->errlen);
			}
		} else if (S_ISDIR(st.st_mode)) {
			int cfd = openat(dirfd(d), de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0)
				rc = errbuf_set(w->err, w->errlen, errno, "forbidden glob %s: open %s",
				    w->pattern, w->rel);
			else
				rc = mounts_mask_walk(w, cfd, nlen, depth + 1);
		}
		w->rel[rellen] = '\0';
	}
	closedir(d);
	return rc;
}

/*
 * A glob forbidden path: mask every existing repository entry it matches, as a literal
 * one is masked (mounts_mask). Paths created later are the scope check's to refuse.
 */
static int
mounts_mask_glob(const char *work_host, const char *pattern, char *err, size_t errlen)
{
	struct mask_walk w = { .work_host = work_host, .pattern = pattern, .err = err,
		.errlen = errlen };
	int dfd;

	if (!glob_valid(pattern))
		return errbuf_set(err, errlen, 0, "forbidden glob is too long: %s", pattern);
	dfd = open(work_host, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errbuf_set(err, errlen, errno, "open %s", work_host);
	return mounts_mask_walk(&w, dfd, 0, 0);
}

/*
 * Attach an idmapped clone of src at dst_fd/dst_path: open_tree(OPEN_TREE_CLONE) gives a
 * detached copy, mount_setattr(MOUNT_ATTR_IDMAP) sets the mapping (only allowed on a
 * detached mount), move_mount attaches it. extra: more MOUNT_ATTR_* (read-only for .git).
 */
static int
mounts_attach_idmapped(const char *src, int userns_fd, uint64_t extra, const char *dst,
    char *err, size_t errlen)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | extra,
		.userns_fd = (uint64_t)userns_fd,
	};
	int tree = (int)syscall(SYS_open_tree, AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	int rc = 0;

	if (tree < 0)
		return errbuf_set(err, errlen, errno, "open_tree %s", src);
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		rc = errbuf_set(err, errlen, errno, "idmap %s (file system without idmapped "
		    "mounts?)", src);
	else if (syscall(SYS_move_mount, tree, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		rc = errbuf_set(err, errlen, errno, "attach idmapped %s", src);
	close(tree);
	return rc;
}

/*
 * git inside: an overlay on the worker's .git (dst, already the read-only view of the
 * host's .git) whose upper layer lives on a tmpfs of this mount namespace only — `git add`,
 * `commit`, `stash`, `checkout -b` work, and all of it vanishes with the namespace: nothing
 * reaches the host repository or the run's upper layer (the candidate stays the base commit
 * against the final work tree). The tmpfs is mounted at a scratch point in the new root,
 * used, then detached, so the worker cannot reach the upper layer except through .git. The
 * config the worker sees is the host's sanitized (executor/gitconfig.h), written through
 * the overlay (a copy-up) before anything runs. host_git is the host's .git (read as root).
 */
static int
mounts_git_writable(const struct mounts_spec *s, const char *host_git, const char *dst,
    char *err, size_t errlen)
{
	char layer[EGRESS_PATH_MAX], up[EGRESS_PATH_MAX], wk[EGRESS_PATH_MAX];
	char opt[3 * EGRESS_PATH_MAX + 64], cfg[EGRESS_PATH_MAX];
	uint64_t bytes = s->tmp_bytes < EGRESS_GIT_LAYER_MAX ? s->tmp_bytes : EGRESS_GIT_LAYER_MAX;
	struct stat st;
	char *text = NULL, *clean = NULL;
	size_t cleanlen = 0;
	unsigned changed = 0;
	int rc = -1;

	if (stat(dst, &st) < 0)
		return errbuf_set(err, errlen, errno, "stat %s", dst);
	if (mounts_path(layer, s->root_dir, "/.egress-git") < 0 ||
	    mounts_path(up, layer, "/upper") < 0 || mounts_path(wk, layer, "/work") < 0 ||
	    mounts_path(cfg, host_git, "/config") < 0)
		return errbuf_set(err, errlen, 0, "path too long");
	if (!mounts_option_path_ok(dst) || !mounts_option_path_ok(up) ||
	    !mounts_option_path_ok(wk))
		return errbuf_set(err, errlen, 0, ".git overlay paths must not contain ',' ':' "
		    "or '\\'");
	if (mkdir(layer, 0700) < 0)
		return errbuf_set(err, errlen, errno, "mkdir %s", layer);
	if (mounts_tmpfs(layer, bytes, 0700, MS_NOSUID | MS_NODEV, err, errlen) < 0)
		return -1;
	/* The upper root stands for .git itself: same owner and mode, so the worker (the
	 * owner, or the idmapped owner) may create files in it. */
	if (mkdir(up, st.st_mode & 07777) < 0 || chown(up, st.st_uid, st.st_gid) < 0 ||
	    chmod(up, st.st_mode & 07777) < 0 || mkdir(wk, 0700) < 0) {
		errbuf_set(err, errlen, errno, "git layer dirs");
		goto out;
	}
	snprintf(opt, sizeof(opt), "lowerdir=%s,upperdir=%s,workdir=%s", dst, up, wk);
	if (mount("overlay", dst, "overlay", MS_NOSUID | MS_NODEV, opt) < 0) {
		errbuf_set(err, errlen, errno, "overlay on .git");
		goto out;
	}
	/* The sanitized config, when there is one (bounded read of the host file). */
	{
		int fd = open(cfg, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		struct stat cs;

		if (fd >= 0 && fstat(fd, &cs) == 0 && S_ISREG(cs.st_mode) &&
		    cs.st_size <= GITCONFIG_MAX) {
			ssize_t n;

			text = malloc((size_t)cs.st_size + 1);
			n = text ? read(fd, text, (size_t)cs.st_size) : -1;
			if (n != cs.st_size) {
				close(fd);
				errbuf_set(err, errlen, errno, "read %s", cfg);
				goto out;
			}
			if (gitconfig_sanitize(text, (size_t)n, &clean, &cleanlen, &changed) != 0) {
				close(fd);
				errbuf_set(err, errlen, 0, "sanitize %s", cfg);
				goto out;
			}
		} else if (fd >= 0) {
			close(fd);
			errbuf_set(err, errlen, 0, "%s: not a regular file of at most %d bytes",
			    cfg, GITCONFIG_MAX);
			goto out;
		}
		if (fd >= 0)
			close(fd);
	}
	if (clean != NULL) {
		char inside[EGRESS_PATH_MAX];

		if (mounts_path(inside, dst, "/config") < 0 ||
		    mounts_write_file(inside, clean, err, errlen) < 0)
			goto out;
	}
	rc = 0;
out:
	free(text);
	free(clean);
	/* The overlay keeps its upper layer alive; the scratch mount point goes. */
	if (umount2(layer, MNT_DETACH) < 0 && rc == 0)
		rc = errbuf_set(err, errlen, errno, "detach the git layer");
	if (rmdir(layer) < 0 && rc == 0)
		rc = errbuf_set(err, errlen, errno, "rmdir %s", layer);
	return rc;
}

static int
mounts_overlay(const struct mounts_spec *s, const char *work_host, char *err, size_t errlen)
{
	char opt[3 * EGRESS_PATH_MAX + 64], p[EGRESS_PATH_MAX], g[EGRESS_PATH_MAX];
	struct stat st;

	if (!mounts_option_path_ok(s->repo_dir) || !mounts_option_path_ok(s->upper_dir) ||
	    !mounts_option_path_ok(s->ovl_work_dir))
		return errbuf_set(err, errlen, 0,
		    "overlay paths must be absolute without ',' ':' or '\\'");
	if (s->idmap_fd >= 0) {
		if (!mounts_option_path_ok(s->lower_dir))
			return errbuf_set(err, errlen, 0, "invalid lower dir");
		if (mounts_attach_idmapped(s->repo_dir, s->idmap_fd, 0, s->lower_dir, err,
		    errlen) < 0)
			return -1;
	}
	snprintf(opt, sizeof(opt), "lowerdir=%s,upperdir=%s,workdir=%s",
	    s->idmap_fd >= 0 ? s->lower_dir : s->repo_dir, s->upper_dir, s->ovl_work_dir);
	if (mount("overlay", work_host, "overlay", MS_NOSUID | MS_NODEV, opt) < 0)
		return errbuf_set(err, errlen, errno, "overlay on %s", s->workdir);

	/* .git read-only: bind the host's own .git over it, so no write reaches even the
	 * upper layer. */
	if (mounts_path(g, s->repo_dir, "/.git") < 0 || mounts_path(p, work_host, "/.git") < 0)
		return errbuf_set(err, errlen, 0, "path too long");
	if (lstat(g, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
		/* With an idmapped repository .git is idmapped too, so git inside sees the
		 * work tree and .git owned by the same user (no "dubious ownership"). */
		if (s->idmap_fd >= 0) {
			if (mounts_attach_idmapped(g, s->idmap_fd, MOUNT_ATTR_RDONLY, p, err,
			    errlen) < 0)
				return -1;
		} else if (mounts_bind_ro(g, p, false, err, errlen) < 0) {
			return -1;
		}
		/* ... and writable on top of that, for git inside, when .git is a directory */
		if (S_ISDIR(st.st_mode) && mounts_git_writable(s, g, p, err, errlen) < 0)
			return -1;
	}
	for (size_t i = 0; s->forbidden_paths && s->forbidden_paths[i]; i++) {
		const char *f = s->forbidden_paths[i];
		if ((glob_is_pattern(f) ? mounts_mask_glob(work_host, f, err, errlen) :
		    mounts_mask(work_host, f, err, errlen)) < 0)
			return -1;
	}
	return 0;
}

/*
 * The preset's read-only binds (robind.h; admission refused sensitive ones), each at the
 * same path inside. Not recursive: a mount below a bound directory stays hidden. The
 * path is checked again here, after admission, because a link could have been planted
 * in between: realpath equal to the path means no component is a symbolic link.
 */
static int
mounts_ro_binds(const char *root, const char *const *binds, char *err, size_t errlen)
{
	for (size_t i = 0; binds != NULL && binds[i] != NULL; i++) {
		const char *src = binds[i];
		char real[PATH_MAX], dst[EGRESS_PATH_MAX];
		struct stat st;

		if (realpath(src, real) == NULL || strcmp(real, src) != 0 ||
		    stat(src, &st) < 0)
			return errbuf_set(err, errlen, errno, "ro_bind %s: changed since admission",
			    src);
		if (mounts_path(dst, root, src) < 0)
			return errbuf_set(err, errlen, 0, "ro_bind %s: path too long", src);
		if (S_ISDIR(st.st_mode)) {
			if (mounts_mkdir_p(root, src, err, errlen) < 0)
				return -1;
		} else if (S_ISREG(st.st_mode)) {
			char parent[EGRESS_PATH_MAX];
			char *slash;

			snprintf(parent, sizeof(parent), "%s", src);
			slash = strrchr(parent, '/');
			if (slash != NULL && slash != parent) {
				*slash = '\0';
				if (mounts_mkdir_p(root, parent, err, errlen) < 0)
					return -1;
			}
			if (mounts_touch(dst, err, errlen) < 0)
				return -1;
		} else {
			return errbuf_set(err, errlen, 0, "ro_bind %s: not a directory or file", src);
		}
		if (mounts_bind_ro(src, dst, false, err, errlen) < 0)
			return -1;
	}
	return 0;
}

int
mounts_enter(const struct mounts_spec *s, char *err, size_t errlen)
{
	const char *root = s->root_dir;
	char p[EGRESS_PATH_MAX];

	if (s->workdir == NULL || s->workdir[0] != '/' || strcmp(s->workdir, "/") == 0 ||
	    !mounts_relpath_ok(s->workdir + 1))
		return errbuf_set(err, errlen, 0, "workdir must be an absolute canonical path");
	if (!mounts_workdir_ok(s->workdir))
		return errbuf_set(err, errlen, 0, "workdir %s would cover a system directory",
		    s->workdir);
	/* Nothing we mount may propagate back to the host, nor host mounts into us. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return errbuf_set(err, errlen, errno, "make / private");
	if (mounts_tmpfs(root, 16 * 1024 * 1024, 0755, MS_NOSUID | MS_NODEV, err, errlen) < 0)
		return -1;
	if (mounts_system_dirs(root, err, errlen) < 0)
		return -1;
	if (mounts_etc(root, s->uid, s->gid, s->run_ca_pem, err, errlen) < 0)
		return -1;
	if (mounts_dev(root, s->tmp_bytes, err, errlen) < 0)
		return -1;
	if (mounts_ro_binds(root, s->ro_binds, err, errlen) < 0)
		return -1;

	if (mounts_path(p, root, "/proc") < 0 || mkdir(p, 0555) < 0)
		return errbuf_set(err, errlen, errno, "mkdir /proc");
	/* A fresh proc instance: it shows the pid namespace of the mounting process (us). */
	if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return errbuf_set(err, errlen, errno, "mount /proc");

	if (mounts_path(p, root, "/tmp") < 0 || mkdir(p, 01777) < 0)
		return errbuf_set(err, errlen, errno, "mkdir /tmp");
	if (mounts_tmpfs(p, s->tmp_bytes, 01777, MS_NOSUID | MS_NODEV, err, errlen) < 0)
		return -1;

	if (mounts_mkdir_p(root, s->workdir, err, errlen) < 0)
		return -1;
	if (mounts_path(p, root, s->workdir) < 0)
		return errbuf_set(err, errlen, 0, "path too long");
	if (mounts_overlay(s, p, err, errlen) < 0)
		return -1;

	/* pivot_root(".", ".") stacks the old root on top of the new one; detaching it
	 * leaves only the new root (runc's trick: no directory for the old root needed). */
	if (chdir(root) < 0)
		return errbuf_set(err, errlen, errno, "chdir new root");
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return errbuf_set(err, errlen, errno, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		return errbuf_set(err, errlen, errno, "detach old root");
	if (chdir("/") < 0)
		return errbuf_set(err, errlen, errno, "chdir /");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		return errbuf_set(err, errlen, errno, "remount / read-only");
	return 0;
}

int
mounts_verify(const char *workdir, char *err, size_t errlen)
{
	static const char *const ro_probes[] = {
		"/egress-probe", "/usr/egress-probe", "/etc/egress-probe", "/dev/egress-probe", NULL
	};
	char buf[64];
	ssize_t n;

	for (size_t i = 0; mounts_denied_paths[i]; i++) {
		struct stat st;

		if (lstat(mounts_denied_paths[i], &st) == 0 || errno != ENOENT)
			return errbuf_set(err, errlen, 0, "mandatory denial %s is visible",
			    mounts_denied_paths[i]);
	}
	/* Root ignores permissions but not a read-only mount: EROFS proves the mount flag. */
	for (size_t i = 0; ro_probes[i]; i++) {
		if (mkdir(ro_probes[i], 0700) == 0) {
			rmdir(ro_probes[i]);
			return errbuf_set(err, errlen, 0, "%s is writable", ro_probes[i]);
		}
		if (errno != EROFS)
			return errbuf_set(err, errlen, errno, "write probe %s", ro_probes[i]);
	}
	/* Our /proc is our pid namespace's: we are pid 1 in it. */
	n = file_read_text("/proc/self/stat", 0, buf, sizeof(buf));
	if (n < 0)
		return errbuf_set(err, errlen, errno, "read /proc/self/stat");
	if (n < 2 || buf[0] != '1' || buf[1] != ' ')
		return errbuf_set(err, errlen, 0, "/proc does not show the sandbox pid namespace");
	{
		struct stat st;
		if (stat(workdir, &st) < 0 || !S_ISDIR(st.st_mode))
			return errbuf_set(err, errlen, errno, "workdir %s missing", workdir);
	}
	return 0;
}

int
mounts_layer_create(const char *layer_dir, uint64_t bytes, const char *repo_dir,
    char *upper_out, char *work_out, char *err, size_t errlen)
{
	struct stat st;

	if (stat(repo_dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return errbuf_set(err, errlen, errno, "repository %s", repo_dir);
	if (mkdir(layer_dir, 0700) < 0 && errno != EEXIST)
		return errbuf_set(err, errlen, errno, "mkdir %s", layer_dir);
	if (mounts_tmpfs(layer_dir, bytes, 0700, MS_NOSUID | MS_NODEV, err, errlen) < 0)
		return -1;
	if (mounts_path(upper_out, layer_dir, "/upper") < 0 ||
	    mounts_path(work_out, layer_dir, "/work") < 0)
		return errbuf_set(err, errlen, 0, "path too long");
	if (mkdir(upper_out, st.st_mode & 07777) < 0 || mkdir(work_out, 0700) < 0)
		return errbuf_set(err, errlen, errno, "mkdir in %s", layer_dir);
	/* The merged root takes its attributes from the upper dir: mirror the repository's. */
	if (chown(upper_out, st.st_uid, st.st_gid) < 0 || chmod(upper_out, st.st_mode & 07777) < 0)
		return errbuf_set(err, errlen, errno, "chown %s", upper_out);
	return 0;
}

int
mounts_layer_owner(const char *upper_dir, uid_t uid, gid_t gid, char *err, size_t errlen)
{
	if (chown(upper_dir, uid, gid) < 0)
		return errbuf_set(err, errlen, errno, "chown %s", upper_dir);
	return 0;
}

static int
mounts_write_map(pid_t pid, const char *file, unsigned from, unsigned to)
{
	char path[64], line[64];
	int fd, n, rc = 0;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	n = snprintf(line, sizeof(line), "%u %u 1\n", from, to);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (write(fd, line, (size_t)n) != n)
		rc = -1;
	close(fd);
	return rc;
}

int
mounts_idmap_userns(uid_t from_uid, gid_t from_gid, uid_t to_uid, gid_t to_gid,
    char *err, size_t errlen)
{
	int go[2], ready[2], fd = -1;
	char path[64], c = 0;
	pid_t pid;
	int st;

	if (pipe2(go, O_CLOEXEC) < 0)
		return errbuf_set(err, errlen, errno, "pipe");
	if (pipe2(ready, O_CLOEXEC) < 0) {
		close(go[0]);
		close(go[1]);
		return errbuf_set(err, errlen, errno, "pipe");
	}
	pid = fork();
	if (pid == 0) {
		close(go[1]);
		close(ready[0]);
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		/* hold the namespace until the supervisor has what it needs */
		if (read(go[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(go[0]);
	close(ready[1]);
	if (pid < 0) {
		close(go[1]);
		close(ready[0]);
		return errbuf_set(err, errlen, errno, "fork");
	}
	if (read(ready[0], &c, 1) != 1) {
		errbuf_set(err, errlen, 0, "unshare(CLONE_NEWUSER) failed (user namespaces "
		    "disabled? see egress-exec doctor)");
	} else if (mounts_write_map(pid, "uid_map", (unsigned)from_uid, (unsigned)to_uid) < 0 ||
	    mounts_write_map(pid, "gid_map", (unsigned)from_gid, (unsigned)to_gid) < 0) {
		errbuf_set(err, errlen, errno, "write the id maps");
	} else {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			errbuf_set(err, errlen, errno, "open %s", path);
	}
	close(go[1]);   /* the helper exits; the fd keeps the namespace alive */
	close(ready[0]);
	waitpid(pid, &st, 0);
	return fd;
}

void
mounts_layer_destroy(const char *layer_dir)
{
	if (layer_dir == NULL || layer_dir[0] == '\0')
		return;
	if (umount2(layer_dir, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		log_warn("umount %s", layer_dir);
	if (rmdir(layer_dir) < 0 && errno != ENOENT)
		log_warn("rmdir %s", layer_dir);
}

int
mounts_merged_create(const char *merged_dir, const char *upper_dir, const char *repo_dir,
    char *err, size_t errlen)
{
	char opt[2 * EGRESS_PATH_MAX + 32];

	if (!mounts_option_path_ok(upper_dir) || !mounts_option_path_ok(repo_dir))
		return errbuf_set(err, errlen, 0, "overlay paths must not contain ',' ':' or '\\'");
	if (mkdir(merged_dir, 0700) < 0 && errno != EEXIST)
		return errbuf_set(err, errlen, errno, "mkdir %s", merged_dir);
	/* Two lower layers and no upper: overlayfs mounts it read-only by construction. */
	snprintf(opt, sizeof(opt), "lowerdir=%s:%s", upper_dir, repo_dir);
	if (mount("overlay", merged_dir, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, opt) < 0)
		return errbuf_set(err, errlen, errno, "merged view %s", merged_dir);
	return 0;
}

void
mounts_merged_destroy(const char *merged_dir)
{
	if (merged_dir == NULL || merged_dir[0] == '\0')
		return;
	if (umount2(merged_dir, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		log_warn("umount %s", merged_dir);
	if (rmdir(merged_dir) < 0 && errno != ENOENT)
		log_warn("rmdir %s", merged_dir);
}
