/*
 * sandbox_state - run records for cleanup.
 */
#define _GNU_SOURCE
#include "executor/sandbox_state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

static const char *state_dir = SANDBOX_STATE_DIR;

#ifdef EGRESS_TESTING
void
sandbox_state_set_dir(const char *dir)
{
	state_dir = dir != NULL ? dir : SANDBOX_STATE_DIR;
}
#endif

/* A run id usable as a file name here (the cgroup's rule, shorter). */
static bool
state_id_ok(const char *id)
{
	return label_valid(id, 63);
}

uint64_t
sandbox_state_pid_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	long long v;
	const char *es;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (file_read_text(path, 0, buf, sizeof(buf)) <= 0)
		return 0;
	/* comm may hold spaces and parentheses: fields start after the last ')'. */
	p = strrchr(buf, ')');
	if (p == NULL)
		return 0;
	p++;
	/* after ')' come fields 3..; starttime is field 22, i.e. the 20th after ')' */
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (p == NULL)
			return 0;
	}
	p++;
	{
		char *end = strchr(p, ' ');
		if (end)
			*end = '\0';
	}
	if (num_parse(p, 0, INT64_MAX, &v, &es) < 0)
		return 0;
	return (uint64_t)v;
}

static int
state_path(char *out, size_t len, const char *run_id)
{
	int n = snprintf(out, len, "%s/%s", state_dir, run_id);
	return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

/*
 * The record appears complete or not at all, whenever the run is killed: its lines are
 * written to an unnamed file in the state directory (O_TMPFILE) that is then given its
 * name (linkat). A run killed before the link leaves nothing behind (the kernel frees the
 * unnamed file); one killed after it leaves a whole record that `egress-exec cleanup`
 * reads. A named temporary file (the former "<id>.tmp" then rename) outlived a kill
 * between its creation and the rename, and cleanup never looked at it.
 */
int
sandbox_state_write(struct sandbox_state *st, char *err, size_t errlen)
{
	char path[EGRESS_PATH_MAX], line[EGRESS_PATH_MAX + 128], proc[64];
	int fd, n;

	if (!state_id_ok(st->run_id) || state_path(path, sizeof(path), st->run_id) < 0) {
		snprintf(err, errlen, "invalid run id");
		return -1;
	}
	st->start = sandbox_state_pid_start(st->pid);
	if (strcmp(state_dir, SANDBOX_STATE_DIR) == 0)
		mkdir("/run/egress-exec", 0700);
	if (mkdir(state_dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "mkdir %s: %s", state_dir, strerror(errno));
		return -1;
	}
	n = snprintf(line, sizeof(line), "pid=%d\nstart=%llu\nrun_dir=%s\nveth=%s\n",
	    (int)st->pid, (unsigned long long)st->start, st->run_dir, st->veth);
	if (n < 0 || (size_t)n >= sizeof(line)) {
		snprintf(err, errlen, "state record of %s too long", st->run_id);
		return -1;
	}
	fd = open(state_dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "write %s: unnamed file in %s: %s", path, state_dir,
		    strerror(errno));
		return -1;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (write_all(fd, line, (size_t)n) < 0 ||
	    linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0) {
		snprintf(err, errlen, "write %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

void
sandbox_state_remove(const char *run_id)
{
	char path[EGRESS_PATH_MAX];

	if (run_id && state_id_ok(run_id) && state_path(path, sizeof(path), run_id) == 0)
		unlink(path);
}

int
sandbox_state_read(const char *run_id, struct sandbox_state *st)
{
	char path[EGRESS_PATH_MAX], buf[2 * EGRESS_PATH_MAX];
	char *line, *next;
	long long v;
	const char *es;

	memset(st, 0, sizeof(*st));
	if (!state_id_ok(run_id) || state_path(path, sizeof(path), run_id) < 0)
		return -1;
	if (file_read_text(path, O_NOFOLLOW, buf, sizeof(buf)) <= 0)
		return -1;
	snprintf(st->run_id, sizeof(st->run_id), "%s", run_id);
	for (line = buf; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (strncmp(line, "pid=", 4) == 0 && num_parse(line + 4, 1, INT32_MAX, &v, &es) == 0)
			st->pid = (pid_t)v;
		else if (strncmp(line, "start=", 6) == 0 &&
		    num_parse(line + 6, 0, INT64_MAX, &v, &es) == 0)
			st->start = (uint64_t)v;
		else if (strncmp(line, "run_dir=", 8) == 0)
			snprintf(st->run_dir, sizeof(st->run_dir), "%s", line + 8);
		else if (strncmp(line, "veth=", 5) == 0)
			snprintf(st->veth, sizeof(st->veth), "%s", line + 5);
	}
	return st->pid > 0 ? 0 : -1;
}

bool
sandbox_state_live(const char *run_id)
{
	struct sandbox_state st;

	if (sandbox_state_read(run_id, &st) < 0)
		return false;
	return st.start != 0 && sandbox_state_pid_start(st.pid) == st.start;
}

unsigned
sandbox_state_each(void (*fn)(const struct sandbox_state *st, bool live, void *arg), void *arg)
{
	DIR *d = opendir(state_dir);
	struct dirent *de;
	unsigned n = 0;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL && n < 4096) {
		struct sandbox_state st;
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.' || (len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0))
			continue;
		if (sandbox_state_read(de->d_name, &st) < 0)
			continue;
		fn(&st, st.start != 0 && sandbox_state_pid_start(st.pid) == st.start, arg);
		n++;
	}
	closedir(d);
	return n;
}
