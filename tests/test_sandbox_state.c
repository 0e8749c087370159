/* test_sandbox_state.c - egress-exec's run records (executor/sandbox_state.h), kept in a
 * private directory (sandbox_state_set_dir). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "executor/sandbox_state.h"

#define KILLS 60

static char dir_[64];

/* Records in a private directory: a real `egress-exec cleanup` running beside the unit
 * tests never sees them. */
static int
setup(void **state)
{
	(void)state;
	snprintf(dir_, sizeof(dir_), "/tmp/test_sandbox_state.XXXXXX");
	if (mkdtemp(dir_) == NULL)
		return -1;
	sandbox_state_set_dir(dir_);
	return 0;
}

static int
teardown(void **state)
{
	DIR *d = opendir(dir_);
	struct dirent *de;
	char p[sizeof(dir_) + 258];

	(void)state;
	while (d != NULL && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir_, de->d_name);
		unlink(p);
	}
	if (d != NULL)
		closedir(d);
	rmdir(dir_);
	sandbox_state_set_dir(NULL);
	return 0;
}

static void
fill(struct sandbox_state *st, const char *id, pid_t pid)
{
	memset(st, 0, sizeof(*st));
	snprintf(st->run_id, sizeof(st->run_id), "%s", id);
	snprintf(st->run_dir, sizeof(st->run_dir), "/run/egress-exec/run-%s", id);
	snprintf(st->veth, sizeof(st->veth), "egxtesth");
	st->pid = pid;
}

/* A record written is read back whole, is live while its process runs, and is gone once
 * removed. */
static void
test_write_read_remove(void **state)
{
	struct sandbox_state st, rd;
	char id[64], err[256] = "";

	(void)state;
	snprintf(id, sizeof(id), "egx-ut%d", (int)getpid());
	fill(&st, id, getpid());
	assert_int_equal(sandbox_state_write(&st, err, sizeof(err)), 0);
	assert_int_equal(sandbox_state_read(id, &rd), 0);
	assert_int_equal(rd.pid, getpid());
	assert_true(rd.start != 0);
	assert_string_equal(rd.run_dir, st.run_dir);
	assert_string_equal(rd.veth, "egxtesth");
	assert_true(sandbox_state_live(id));
	sandbox_state_remove(id);
	assert_int_equal(sandbox_state_read(id, &rd), -1);
	assert_false(sandbox_state_live(id));
}

/*
 * A writer killed at any moment leaves each record whole or absent, and nothing else in
 * the state directory: what `egress-exec cleanup` reads (sandbox_state_each) is all there
 * is. Children write records in a loop and get SIGKILL after a random delay; then every
 * name in the directory must be a complete record.
 */
static void
test_killed_writer_whole_or_nothing(void **state)
{
	char prefix[24];
	unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	unsigned records = 0, strays = 0;
	DIR *dir;
	struct dirent *de;

	(void)state;
	snprintf(prefix, sizeof(prefix), "egx-ut%d-", (int)getpid());
	for (int k = 0; k < KILLS; k++) {
		pid_t c = fork();

		assert_true(c >= 0);
		if (c == 0) {
			for (int j = 0; j < 100000; j++) {
				struct sandbox_state st;
				char id[64], err[256];

				snprintf(id, sizeof(id), "%s%d-%d", prefix, k, j);
				fill(&st, id, getpid());
				if (sandbox_state_write(&st, err, sizeof(err)) < 0)
					_exit(2);
			}
			_exit(0);
		}
		usleep(200 + rand_r(&seed) % 3000);
		kill(c, SIGKILL);
		assert_int_equal(waitpid(c, NULL, 0), c);
	}
	dir = opendir(dir_);
	assert_non_null(dir);
	while ((de = readdir(dir)) != NULL) {
		struct sandbox_state rd;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (sandbox_state_read(de->d_name, &rd) == 0 && rd.start != 0 &&
		    strstr(rd.run_dir, de->d_name) != NULL && strcmp(rd.veth, "egxtesth") == 0) {
			records++;
		} else {
			fprintf(stderr, "stray or partial state entry %s\n", de->d_name);
			strays++;
		}
	}
	closedir(dir);
	assert_true(records > 0);
	assert_int_equal(strays, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_read_remove, setup, teardown),
		cmocka_unit_test_setup_teardown(test_killed_writer_whole_or_nothing, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
