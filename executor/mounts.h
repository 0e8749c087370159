/*
 * mounts - the sandbox's file system view: a new root on tmpfs, read-only system binds,
 * a minimal /etc and /dev, fresh /proc, bounded /tmp, and the repository as an overlay.
 *
 * Owns: the layer tmpfs in the supervisor's mount namespace (upper + work dirs of the
 * overlay, so the upper dir outlives the worker for changed-set computation), the
 * read-only merged view made after the run, and every mount inside the child's mount
 * namespace (those vanish with the namespace).
 * Callers: executor/sandbox.c (supervisor: mounts_layer_*, mounts_merged_*; child:
 * mounts_enter, mounts_etc_finish, mounts_verify), executor/attest.c and
 * executor/cleanup.c.
 *
 * Mandatory denials (host homes, /root, credential locations, container sockets,
 * /etc/shadow) are never bound into the new root whatever the policy says; mounts_verify
 * checks that each is absent after pivot_root.
 */
#ifndef EGRESS_MOUNTS_H
#define EGRESS_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct mounts_spec {
	const char *root_dir;      /* empty host dir: the new root tmpfs is mounted here */
	const char *repo_dir;      /* overlay lower layer: the repository work tree */
	const char *upper_dir;     /* overlay upper dir (from mounts_layer_create) */
	const char *ovl_work_dir;  /* overlay work dir (same file system as upper_dir) */
	const char *workdir;       /* absolute path of the repository inside: "/work" */
	const char *const *forbidden_paths; /* repository-relative paths or globs to mask
	                                     * (a glob: every existing entry it matches), or
	                                     * NULL */
	const char *const *ro_binds; /* preset ro_bind host paths (admission checked them), or NULL */
	uint64_t tmp_bytes;        /* size of /tmp (and bound for /dev/shm) */
	uid_t uid;                 /* sandbox user, for the generated passwd/group */
	gid_t gid;
	/* Idmapped lower layer (repository owner differs from the worker): a user namespace
	 * fd from mounts_idmap_userns, or -1; lower_dir is an empty host dir where the
	 * idmapped clone of repo_dir is attached (inside the child's namespace only). */
	int idmap_fd;
	const char *lower_dir;
	/* A model connection's run CA (PEM certificate, never its key), or NULL: written with
	 * the host's roots as MOUNTS_CA_BUNDLE (docs/model-connections.md). */
	const char *run_ca_pem;
};

/* Inside the sandbox: the host's CA roots followed by the run CA. */
#define MOUNTS_CA_BUNDLE "/etc/egress/ca-bundle.pem"
/* Where the host's roots are read from (Debian's ca-certificates bundle). */
#define MOUNTS_HOST_CA_FILE "/etc/ssl/certs/ca-certificates.crt"

/*
 * Supervisor, host mount namespace: mount a tmpfs of `bytes` at layer_dir (created 0700)
 * with upper/ and work/ inside; upper/ gets the owner and mode of the repository root so
 * the merged root looks like the repository's. Paths of upper/work go to upper_out and
 * work_out (EGRESS_PATH_MAX). Returns 0, or -1 with err.
 */
int mounts_layer_create(const char *layer_dir, uint64_t bytes, const char *repo_dir,
    char *upper_out, char *work_out, char *err, size_t errlen);

/*
 * Supervisor: a user namespace whose only mappings are from_uid -> to_uid and
 * from_gid -> to_gid, for MOUNT_ATTR_IDMAP. Through such a mount, files the repository
 * owner (from_uid) owns appear owned by the worker (to_uid); files of any other owner
 * appear as the overflow id and cannot be modified. A helper child holds the namespace
 * while the maps are written and is reaped before returning. Returns the namespace fd
 * (O_CLOEXEC), or -1 with err.
 */
int mounts_idmap_userns(uid_t from_uid, gid_t from_gid, uid_t to_uid, gid_t to_gid,
    char *err, size_t errlen);

/* Chown the upper dir (after mounts_layer_create) to the idmapped owner. */
int mounts_layer_owner(const char *upper_dir, uid_t uid, gid_t gid, char *err, size_t errlen);

/* Unmount (detach) layer_dir and remove it; safe when partly created. */
void mounts_layer_destroy(const char *layer_dir);

/*
 * Supervisor, after the worker's namespace is gone: a read-only overlay of upper over
 * repo at merged_dir (created), the worker's view without its ability to write.
 */
int mounts_merged_create(const char *merged_dir, const char *upper_dir, const char *repo_dir,
    char *err, size_t errlen);
void mounts_merged_destroy(const char *merged_dir);

/*
 * Child, first process of the new mount (and pid) namespace, still root: private
 * propagation, build the new root as described in docs/sandbox.md, pivot_root into it,
 * detach the old root, make / read-only. /etc stays writable for mounts_etc_finish.
 * Runs before "go" (it needs nothing the attestation or the network step decides).
 * Returns 0, or -1 with err.
 */
int mounts_enter(const struct mounts_spec *s, char *err, size_t errlen);

/*
 * Child, after mounts_enter and "go": /etc/nsswitch.conf ("hosts: files dns" with a
 * resolver, "files" without) and, with resolver (transparent capture: the stub resolver's
 * address, the gateway; NULL = none, docs/transparent.md), /etc/resolv.conf; then /etc
 * read-only. Returns 0, or -1 with err.
 */
int mounts_etc_finish(const char *resolver, char *err, size_t errlen);

/*
 * Child, after mounts_enter: every mandatory denial is absent, system dirs and / refuse
 * writes, /proc shows only our pid namespace. Returns 0, or -1 with err naming the check.
 */
int mounts_verify(const char *workdir, char *err, size_t errlen);

/* The mandatory denials (absolute paths inside the sandbox), NULL-terminated. */
extern const char *const mounts_denied_paths[];

/* A repository-relative path is canonical: non-empty, no leading '/', no "." or ".."
 * components, no empty components, no trailing '/'. */
bool mounts_relpath_ok(const char *p);

/* The repository's mount point inside: absolute, canonical, and not inside a directory
 * the sandbox builds itself (/usr, /bin, /sbin, /lib*, /etc, /proc, /dev, /tmp). */
bool mounts_workdir_ok(const char *w);

/* Characters overlayfs mount options cannot carry (',' ':' '\\' and newlines). */
bool mounts_option_path_ok(const char *p);

#endif
