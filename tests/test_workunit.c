/* test_workunit.c - WorkUnit files on disk: objective_file, lists, ceilings, file:line
 * errors (executor/workunit). Table and refusal coverage is in test_admission.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <unistd.h>

#include "common/limits.h"
#include "executor/workunit.h"

static char dir[] = "/tmp/test_workunit.XXXXXX";

static void
put(const char *name, const char *text, size_t len)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	assert_non_null(f);
	fwrite(text, 1, len, f);
	fclose(f);
}

static struct workunit *
load(const char *name, enum reason *why, char *err, size_t errlen)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return workunit_load(p, why, err, errlen);
}

static int
setup(void **state)
{
	(void)state;
	return mkdtemp(dir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void
test_objective_file(void **state)
{
	static const char task[] = "Line one.\nLine two; with a semicolon.\n";
	static const char wu[] = "id = f\nobjective_file = tasks/t.txt\n";
	enum reason why;
	char err[256];
	struct workunit *w;

	(void)state;
	mkdir("/tmp", 0755);
	{
		char p[256];
		snprintf(p, sizeof(p), "%s/tasks", dir);
		mkdir(p, 0755);
	}
	put("tasks/t.txt", task, sizeof(task) - 1);
	put("wu.ini", wu, sizeof(wu) - 1);
	w = load("wu.ini", &why, err, sizeof(err));
	assert_non_null(w);
	assert_string_equal(w->objective, task);
	/* Defaults: everything else absent, for admission to refuse by name. */
	assert_int_equal(w->sandbox_required, WU_FLAG_ABSENT);
	assert_int_equal(w->network, WU_NET_ABSENT);
	assert_false(w->secrets.present);
	assert_false(w->forbidden_paths.present);
	assert_int_equal(w->budget.state[CEIL_WALL_SECONDS], CEIL_ABSENT);
	workunit_free(w);

	/* A NUL byte, a missing file, a directory, and a symlink are refused. */
	put("tasks/nul.txt", "a\0b", 3);
	put("wu.ini", "id = f\nobjective_file = tasks/nul.txt\n", 38);
	assert_null(load("wu.ini", &why, err, sizeof(err)));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	assert_non_null(strstr(err, "wu.ini:2:"));
	put("wu.ini", "id = f\nobjective_file = tasks/none.txt\n", 39);
	assert_null(load("wu.ini", &why, err, sizeof(err)));
	put("wu.ini", "id = f\nobjective_file = tasks\n", 30);
	assert_null(load("wu.ini", &why, err, sizeof(err)));
	{
		char p[256];
		snprintf(p, sizeof(p), "%s/tasks/link.txt", dir);
		assert_int_equal(symlink("/etc/hostname", p), 0);
	}
	put("wu.ini", "id = f\nobjective_file = tasks/link.txt\n", 39);
	assert_null(load("wu.ini", &why, err, sizeof(err)));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	/* A symlinked directory on the way: never followed (egress-exec runs as root). */
	{
		char p[256];
		snprintf(p, sizeof(p), "%s/etc", dir);
		assert_int_equal(symlink("/etc", p), 0);
	}
	put("wu.ini", "id = f\nobjective_file = etc/hostname\n", 37);
	assert_null(load("wu.ini", &why, err, sizeof(err)));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
}

static void
test_objective_too_large(void **state)
{
	size_t n = EGRESS_OBJECTIVE_MAX + 2;
	char *big = malloc(n);
	enum reason why;
	char err[256];

	(void)state;
	assert_non_null(big);
	memset(big, 'a', n);
	put("tasks/big.txt", big, n);
	free(big);
	put("wu.ini", "id = f\nobjective_file = tasks/big.txt\n", 38);
	assert_null(load("wu.ini", &why, err, sizeof(err)));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
}

static void
test_lists_and_ceilings(void **state)
{
	static const char wu[] =
	    "id = l\nobjective = x\n[permissions]\nsecrets =\nfilesystem_write = a\n"
	    "filesystem_write =\nfilesystem_write = b\n[budget]\nwall_seconds = 5\n"
	    "memory_bytes = 2G\ndisk_bytes = 0\nprocesses = 99999999999\noutput_bytes = 1x\n"
	    "[constraints]\nforbidden_paths =\n";
	enum reason why;
	char err[256];
	struct workunit *w;

	(void)state;
	put("wu.ini", wu, sizeof(wu) - 1);
	w = load("wu.ini", &why, err, sizeof(err));
	assert_non_null(w);
	assert_true(w->secrets.present);
	assert_int_equal(w->secrets.n, 0);
	assert_int_equal(w->filesystem_write.n, 2);          /* the empty value is dropped */
	assert_string_equal(w->filesystem_write.v[1], "b");
	assert_null(w->filesystem_write.v[2]);               /* NULL-terminated */
	assert_true(w->forbidden_paths.present);
	assert_int_equal(w->forbidden_paths.n, 0);
	assert_int_equal(w->budget.state[CEIL_WALL_SECONDS], CEIL_OK);
	assert_int_equal(w->budget.value[CEIL_WALL_SECONDS], 5);
	assert_int_equal(w->budget.value[CEIL_MEMORY_BYTES], 2ULL << 30);
	assert_int_equal(w->budget.state[CEIL_DISK_BYTES], CEIL_INVALID);
	assert_int_equal(w->budget.state[CEIL_PROCESSES], CEIL_INVALID);
	assert_int_equal(w->budget.state[CEIL_OUTPUT_BYTES], CEIL_INVALID);
	assert_int_equal(w->budget.state[CEIL_CPU_MILLICORES], CEIL_ABSENT);
	assert_int_equal(w->budget.line[CEIL_WALL_SECONDS], 9);
	workunit_free(w);

	/* A repeated non-list key and an unknown key name their line. */
	put("wu.ini", "id = l\nobjective = x\nid = m\n", 28);
	assert_null(load("wu.ini", &why, err, sizeof(err)));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	put("wu.ini", "id = l\nobjective = x\n[budget]\nwall = 5\n", 38);
	assert_null(load("wu.ini", &why, err, sizeof(err)));
	assert_non_null(strstr(err, "wu.ini:4"));
	assert_null(load("missing.ini", &why, err, sizeof(err)));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	assert_true(strlist_set_equal(&(struct strlist){ 0 }, &(struct strlist){ 0 }));
	assert_string_equal(wu_network_str(WU_NET_ALLOWLIST), "allowlist");
	assert_string_equal(ceiling_key(CEIL_PROCESSES), "processes");
	assert_false(ceiling_required(CEIL_DIFF_BYTES));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_objective_file),
		cmocka_unit_test(test_objective_too_large),
		cmocka_unit_test(test_lists_and_ceilings),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
