/*
 * cleanup - `egress-exec cleanup [--dry-run]`: remove what a kill -9'd run left behind.
 *
 * A run is live when its state record's process still runs (pid and start time,
 * executor/sandbox_state.h). For every dead record: first the evidence is kept - the
 * private egressd's decision log (decisions.jsonl), its own log and configuration, and
 * the state record - moved (never deleted) to CLEANUP_KEEP_DIR/<run folder name>/ and
 * reported on stdout ("kept ..."); then the run folder's root, layer, merged and lower
 * (the idmapped repository of a root-owned run) mounts are detached and removed, its veth
 * deleted, the record removed. When the evidence cannot be kept, it stays where it is and
 * cleanup exits non-zero. Then: veths named NETNS_IF_PREFIX* not owned by a live run,
 * cgroups under egress/ not owned by a live run (cgroup_cleanup_leftovers), stale probe
 * directories; orphan run folders (no record) keep their evidence the same way.
 */
#define _GNU_SOURCE
#include "executor/commands.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "executor/cgroup.h"
#include "executor/mounts.h"
#include "executor/netns.h"
#include "executor/sandbox.h"
#include "executor/sandbox_state.h"

#define CLEANUP_RUN_PREFIX "/run/egress-exec/run-"   /* simple runs (cmd_run.c) */
/* Where a killed run's evidence goes: off /run (a tmpfs, gone at reboot), root-only. */
#define CLEANUP_KEEP_PARENT "/var/lib/egress-exec"
#define CLEANUP_KEEP_DIR    CLEANUP_KEEP_PARENT "/killed"
#define CLEANUP_WU_PREFIX  "/run/egress-exec/wu-"    /* WorkUnit runs (orchestrate.c) */

struct cleanup_ctx {
	bool dry;
	unsigned runs, failures;
	char live_veths[256][16];
	char live_dirs[256][EGRESS_PATH_MAX];
	size_t nlive;
};

static bool
cleanup_dir_claimed(const struct cleanup_ctx *c, const char *dir)
{
	for (size_t i = 0; i < c->nlive; i++)
		if (strcmp(c->live_dirs[i], dir) == 0)
			return true;
	return false;
}

/* The evidence of a run: what its private egressd wrote (decision log, own log, the
 * configuration it ran with). Never deleted by cleanup: kept, or left in place. */
static const char *const cleanup_evidence[] = { "decisions.jsonl", "egressd.log",
	"egressd.ini" };

/* Copy src to dst (created exclusively, 0600), fsync'd. Neither may be a symlink. */
static int
cleanup_copy(const char *src, const char *dst)
{
	char buf[65536];
	int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), out;
	int rc = 0;

	if (in < 0)
		return -1;
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		close(in);
		return -1;
	}
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -1 : 0;
			break;
		}
		if (write_all(out, buf, (size_t)n) != 0)
			rc = -1;
		if (rc != 0)
			break;
	}
	if (rc == 0 && fsync(out) != 0)
		rc = -1;
	if (close(out) != 0)
		rc = -1;
	close(in);
	if (rc != 0)
		unlink(dst);
	return rc;
}

/* Move src to dst: rename, or (across file systems: /run is a tmpfs) copy then unlink. */
static int
cleanup_move(const char *src, const char *dst)
{
	if (rename(src, dst) == 0)
		return 0;
	if (errno != EXDEV)
		return -1;
	if (cleanup_copy(src, dst) != 0)
		return -1;
	return unlink(src) == 0 || errno == ENOENT ? 0 : -1;
}

/*
 * Keep the evidence of the dead run in dir (run_id: its state record, or NULL for an
 * orphan folder): CLEANUP_KEEP_DIR/<basename of dir>[.N]/. Prints what was kept.
 * Returns 0 when everything there was kept (or there was nothing), -1 when something could
 * not be: the caller must then leave it in place.
 */
static int
cleanup_keep_evidence(struct cleanup_ctx *c, const char *dir, const char *run_id)
{
	char dest[EGRESS_PATH_MAX], src[EGRESS_PATH_MAX], dst[EGRESS_PATH_MAX + 16];
	char kept[256] = "";
	const char *base = strrchr(dir, '/');
	struct stat sb;
	bool any = false;
	size_t o = 0;
	int rc = 0;

	base = base ? base + 1 : dir;
	for (size_t i = 0; i < EGRESS_NELEM(cleanup_evidence); i++) {
		snprintf(src, sizeof(src), "%s/%s", dir, cleanup_evidence[i]);
		if (lstat(src, &sb) == 0 && S_ISREG(sb.st_mode))
			any = true;
	}
	if (run_id != NULL) {
		snprintf(src, sizeof(src), "%s/%s", SANDBOX_STATE_DIR, run_id);
		if (lstat(src, &sb) == 0 && S_ISREG(sb.st_mode))
			any = true;
	}
	if (!any)
		return 0;
	if (c->dry) {
		printf("would keep the evidence of %s in %s/%s\n", dir, CLEANUP_KEEP_DIR, base);
		return 0;
	}
	if ((mkdir(CLEANUP_KEEP_PARENT, 0700) != 0 && errno != EEXIST) ||
	    (mkdir(CLEANUP_KEEP_DIR, 0700) != 0 && errno != EEXIST)) {
		log_warn("keep the evidence of %s: mkdir %s", dir, CLEANUP_KEEP_DIR);
		return -1;
	}
	for (int n = 0;; n++) {
		if (n == 0)
			snprintf(dest, sizeof(dest), "%s/%s", CLEANUP_KEEP_DIR, base);
		else
			snprintf(dest, sizeof(dest), "%s/%s.%d", CLEANUP_KEEP_DIR, base, n);
		if (mkdir(dest, 0700) == 0)
			break;
		if (errno != EEXIST || n >= 1000) {
			log_warn("keep the evidence of %s: mkdir %s", dir, dest);
			return -1;
		}
	}
	for (size_t i = 0; i < EGRESS_NELEM(cleanup_evidence); i++) {
		snprintf(src, sizeof(src), "%s/%s", dir, cleanup_evidence[i]);
		if (lstat(src, &sb) != 0 || !S_ISREG(sb.st_mode))
			continue;
		snprintf(dst, sizeof(dst), "%s/%s", dest, cleanup_evidence[i]);
		if (cleanup_move(src, dst) != 0) {
			log_warn("keep %s", src);
			rc = -1;
			continue;
		}
		o += (size_t)snprintf(kept + o, sizeof(kept) - o, " %s", cleanup_evidence[i]);
	}
	if (run_id != NULL) {
		/* a copy: the record itself goes with the rest of the run, below */
		snprintf(src, sizeof(src), "%s/%s", SANDBOX_STATE_DIR, run_id);
		snprintf(dst, sizeof(dst), "%s/state", dest);
		if (lstat(src, &sb) == 0 && S_ISREG(sb.st_mode)) {
			if (cleanup_copy(src, dst) != 0) {
				log_warn("keep %s", src);
				rc = -1;
			} else if (o < sizeof(kept)) {
				snprintf(kept + o, sizeof(kept) - o, " state");
			}
		}
	}
	printf("kept the evidence of %s in %s:%s\n", run_id ? run_id : dir, dest, kept);
	return rc;
}

/*
 * Remove a run folder egress-exec created under /run/egress-exec: only the names it puts
 * there (a folder given by a caller elsewhere is left alone, its mounts are gone already).
 * The evidence files are never removed here: cleanup_keep_evidence moved them first, and
 * what it could not move stays (and so does the folder).
 */
static void
cleanup_run_dir(const char *dir)
{
	static const char *const names[] = { "egressd.sock", "egressd.ini.state", "repo", "root",
		"layer", "merged", "lower",
		/* the private egressd's generated credentials (egressd_client.c) */
		"proxy-credentials.ini", "proxy-credentials.ini.password",
		"pac/egressd-pac.js", "pac", NULL };
	char p[EGRESS_PATH_MAX];

	if ((strncmp(dir, CLEANUP_RUN_PREFIX, strlen(CLEANUP_RUN_PREFIX)) != 0 &&
	    strncmp(dir, CLEANUP_WU_PREFIX, strlen(CLEANUP_WU_PREFIX)) != 0) ||
	    strstr(dir, "/..") != NULL)
		return;
	for (size_t i = 0; names[i]; i++) {
		if (snprintf(p, sizeof(p), "%s/%s", dir, names[i]) >= (int)sizeof(p))
			continue;
		for (int k = 0; k < 8 && umount2(p, MNT_DETACH) == 0; k++)
			;
		if (unlink(p) < 0 && (errno == EISDIR || errno == EPERM))
			rmdir(p);
	}
	if (rmdir(dir) == 0)
		printf("removed %s\n", dir);
}

/* Run folders and probe directories no live run owns, older than a minute (a run that is
 * starting has not written its state record yet). */
static void
cleanup_orphan_dirs(struct cleanup_ctx *c)
{
	DIR *d = opendir("/run/egress-exec");
	struct dirent *de;
	unsigned n = 0;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL && n++ < 4096) {
		char p[EGRESS_PATH_MAX];
		struct stat sb;

		if (strncmp(de->d_name, "run-", 4) != 0 && strncmp(de->d_name, "wu-", 3) != 0 &&
		    strncmp(de->d_name, "probe-", 6) != 0)
			continue;
		if (snprintf(p, sizeof(p), "/run/egress-exec/%s", de->d_name) >= (int)sizeof(p))
			continue;
		if (lstat(p, &sb) < 0 || !S_ISDIR(sb.st_mode) || time(NULL) - sb.st_mtime < 60)
			continue;
		if (cleanup_dir_claimed(c, p))
			continue;
		if (strncmp(de->d_name, "probe-", 6) == 0) {
			long long pid;
			const char *es;
			if (num_parse(de->d_name + 6, 1, INT32_MAX, &pid, &es) == 0 &&
			    sandbox_state_pid_start((pid_t)pid) != 0)
				continue;
			if (!c->dry) {
				umount2(p, MNT_DETACH);
				rmdir(p);
			}
			continue;
		}
		printf("orphan run folder %s\n", p);
		if (cleanup_keep_evidence(c, p, NULL) != 0) {
			c->failures++;
			continue;
		}
		if (!c->dry)
			cleanup_run_dir(p);
	}
	closedir(d);
}

static void
cleanup_run(const struct sandbox_state *st, bool live, void *arg)
{
	struct cleanup_ctx *c = arg;
	static const char *const subs[] = { "merged", "layer", "root", "lower" };
	char p[EGRESS_PATH_MAX];

	if (live) {
		if (c->nlive < EGRESS_NELEM(c->live_veths)) {
			snprintf(c->live_veths[c->nlive], 16, "%s", st->veth);
			snprintf(c->live_dirs[c->nlive++], EGRESS_PATH_MAX, "%s", st->run_dir);
		}
		return;
	}
	printf("stale run %s (pid %d): %s\n", st->run_id, (int)st->pid, st->run_dir);
	c->runs++;
	/* The audit record of a killed run outlives its cleanup: kept first, or the run is
	 * left as it is (and reported) rather than lose it. */
	if (cleanup_keep_evidence(c, st->run_dir, st->run_id) != 0) {
		c->failures++;
		return;
	}
	if (c->dry)
		return;
	for (size_t i = 0; i < EGRESS_NELEM(subs); i++) {
		if (snprintf(p, sizeof(p), "%s/%s", st->run_dir, subs[i]) >= (int)sizeof(p))
			continue;
		/* Mounts may be stacked (overlay over tmpfs): detach until none is left. */
		for (int k = 0; k < 8 && umount2(p, MNT_DETACH) == 0; k++)
			;
		if (rmdir(p) < 0 && errno != ENOENT) {
			log_warn("rmdir %s", p);
			c->failures++;
		}
	}
	if (st->veth[0] && netns_veth_destroy(st->veth) < 0)
		c->failures++;
	cleanup_run_dir(st->run_dir);
	sandbox_state_remove(st->run_id);
}

static bool
cleanup_keep_veth(const char *ifname, void *arg)
{
	struct cleanup_ctx *c = arg;

	for (size_t i = 0; i < c->nlive; i++)
		if (strcmp(c->live_veths[i], ifname) == 0)
			return true;
	return false;
}

/* cgroups: run groups "egx-<tag>" live by their record; probe groups "egx-probe-<pid>-<n>"
 * live while that pid runs. */
static bool
cleanup_cgroup_live(const char *run_id, void *arg)
{
	(void)arg;
	if (strncmp(run_id, "egx-probe-", 10) == 0) {
		long long pid;
		const char *es;
		char buf[16];
		const char *dash = strchr(run_id + 10, '-');
		size_t n = dash ? (size_t)(dash - (run_id + 10)) : strlen(run_id + 10);

		if (n == 0 || n >= sizeof(buf))
			return false;
		memcpy(buf, run_id + 10, n);
		buf[n] = '\0';
		if (num_parse(buf, 1, INT32_MAX, &pid, &es) < 0)
			return false;
		return sandbox_state_pid_start((pid_t)pid) != 0;
	}
	return sandbox_state_live(run_id);
}

int
cmd_cleanup(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cleanup_ctx *c = calloc(1, sizeof(*c));
	char err[256];
	unsigned removed = 0;
	int ch, rc = EXEC_EXIT_OK;

	if (c == NULL)
		return EXEC_EXIT_INTERNAL;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "nh", opts, NULL)) != -1) {
		switch (ch) {
		case 'n': c->dry = true; break;
		case 'h':
			printf("usage: egress-exec cleanup [--dry-run]\n"
			    "Remove leftovers of killed runs: mounts and run folders, veths named %s*,\n"
			    "cgroups under %s/, and their state records. Live runs are left alone.\n"
			    "A killed run's evidence (decisions.jsonl, egressd.log, egressd.ini, its\n"
			    "state record) is moved to %s/<run folder>/ first, never deleted.\n",
			    NETNS_IF_PREFIX, CGROUP_PARENT, CLEANUP_KEEP_DIR);
			free(c);
			return EXEC_EXIT_OK;
		default:
			free(c);
			return EXEC_EXIT_USAGE;
		}
	}
	if (geteuid() != 0) {
		fprintf(stderr, "egress-exec cleanup: must run as root\n");
		free(c);
		return EXEC_EXIT_CAPABILITY;
	}
	sandbox_state_each(cleanup_run, c);
	printf("stale runs: %u\n", c->runs);
	cleanup_orphan_dirs(c);
	if (!c->dry) {
		if (netns_cleanup_leftovers(cleanup_keep_veth, c, &removed, err, sizeof(err)) < 0) {
			log_warnx("veths: %s", err);
			rc = EXEC_EXIT_INTERNAL;
		}
		printf("veths removed: %u\n", removed);
		removed = 0;
		if (cgroup_cleanup_leftovers(NULL, cleanup_cgroup_live, NULL, &removed, err,
		    sizeof(err)) < 0) {
			log_warnx("cgroups: %s", err);
			rc = EXEC_EXIT_INTERNAL;
		}
		printf("cgroups removed: %u\n", removed);
	}
	if (c->failures)
		rc = EXEC_EXIT_INTERNAL;
	free(c);
	return rc;
}
