/*
 * cleanup - `egress-exec cleanup [--dry-run]`: remove what a kill -9'd run left behind.
 *
 * A run is live when its state record's process still runs (pid and start time,
 * executor/sandbox_state.h). For every dead record: unmount (detach) and remove the run
 * folder's root, layer and merged mounts, delete its veth, remove the record. Then: veths
 * named NETNS_IF_PREFIX* not owned by a live run, cgroups under egress/ not owned by a live
 * run (h6's cgroup_cleanup_leftovers), stale probe directories.
 */
#define _GNU_SOURCE
#include "executor/commands.h"

#include <dirent.h>
#include <errno.h>
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

/*
 * Remove a run folder egress-exec created under /run/egress-exec: only the names it puts
 * there (a folder given by a caller elsewhere is left alone, its mounts are gone already).
 */
static void
cleanup_run_dir(const char *dir)
{
	static const char *const names[] = { "egressd.ini", "egressd.sock", "egressd.log",
		"decisions.jsonl", "repo", "root", "layer", "merged",
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
		if (!c->dry)
			cleanup_run_dir(p);
	}
	closedir(d);
}

static void
cleanup_run(const struct sandbox_state *st, bool live, void *arg)
{
	struct cleanup_ctx *c = arg;
	static const char *const subs[] = { "merged", "layer", "root" };
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
			    "cgroups under %s/, and their state records. Live runs are left alone.\n",
			    NETNS_IF_PREFIX, CGROUP_PARENT);
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
