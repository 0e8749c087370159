/* test_manifest.c - manifest.json: every key present, null for stages that did not happen,
 * outcome strings, atomic write (executor/manifest). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <unistd.h>

#include "executor/manifest.h"

static const char WU[] =
    "id = m-1\nobjective = do it\n[security]\nsandbox_required = true\n"
    "[permissions]\nprocess_execution = true\nsecrets =\nnetwork = allowlist\n"
    "destinations = https://api.example.com\nfilesystem_write = README.md\n"
    "[budget]\nwall_seconds = 10\ncpu_millicores = 100\nmemory_bytes = 64M\n"
    "disk_bytes = 8M\nprocesses = 8\noutput_bytes = 4K\n"
    "[constraints]\nallowed_paths = README.md\nforbidden_paths =\n";
static const char PRESET[] =
    "[preset]\nname = p\nexecutable = /bin/sh\nargv = sh\nprompt_transport = stdin\n"
    "network_policy = allowlisted\n[ceilings]\nwall_seconds = 60\ncpu_millicores = 1000\n"
    "memory_bytes = 1G\ndisk_bytes = 1G\nprocesses = 64\noutput_bytes = 1M\n";

static const char *const KEYS[] = {
	"schema_version", "run_id", "started", "finished", "outcome", "workunit", "preset",
	"base_commit", "admission", "attestation", "grant", "limits", "exit", "usage",
	"changed_paths", "scope", "artifacts", "versions",
};

static void
load(struct workunit **wu, struct preset **p)
{
	enum reason why;
	char err[256];

	*wu = workunit_load_string("wu.ini", WU, strlen(WU), NULL, &why, err, sizeof(err));
	*p = preset_load_string("p.ini", PRESET, strlen(PRESET), &why, err, sizeof(err));
	assert_non_null(*wu);
	assert_non_null(*p);
}

static void
test_refused(void **state)
{
	struct manifest_input in;
	struct admission a;
	struct workunit *wu;
	struct preset *p;
	json_t *m;

	(void)state;
	load(&wu, &p);
	memset(&a, 0, sizeof(a));
	admission_refuse(&a, REASON_ADM_SECRETS, "secrets given");
	memset(&in, 0, sizeof(in));
	in.run_id = "run-1";
	in.wu = wu;
	in.preset = p;
	in.adm = &a;
	in.exit_code = EXEC_EXIT_ADMISSION;
	in.reason = REASON_ADM_SECRETS;
	in.message = "secrets given";
	in.started_ms = 1764493570123ULL;
	in.finished_ms = 1764493570456ULL;
	m = manifest_build(&in);
	assert_non_null(m);
	for (size_t i = 0; i < sizeof(KEYS) / sizeof(KEYS[0]); i++) {
		print_message("%s\n", KEYS[i]);
		assert_non_null(json_object_get(m, KEYS[i]));
	}
	assert_int_equal(json_integer_value(json_object_get(m, "schema_version")), 1);
	json_t *o = json_object_get(m, "outcome");
	assert_string_equal(json_string_value(json_object_get(o, "status")), "admission_refused");
	assert_string_equal(json_string_value(json_object_get(o, "reason")), "secrets_not_empty");
	assert_true(json_is_null(json_object_get(m, "exit")));
	assert_true(json_is_null(json_object_get(m, "attestation")));
	assert_true(json_is_null(json_object_get(m, "grant")));
	assert_true(json_is_null(json_object_get(m, "changed_paths")));
	assert_true(json_is_null(json_object_get(m, "scope")));
	assert_string_equal(json_string_value(json_object_get(m, "started")),
	    "2025-11-30T09:06:10.123Z");
	/* sha256("do it") */
	assert_string_equal(json_string_value(json_object_get(json_object_get(m, "workunit"),
	    "objective_sha256")),
	    "f51c362d5cc7defb17b2b1290bb8e9b5a4d7e1319f85b90741ff3f8578fc6bba");
	json_t *pj = json_object_get(m, "preset");
	assert_string_equal(json_string_value(json_object_get(pj, "name")), "p");
	assert_int_equal(strlen(json_string_value(json_object_get(pj, "executable_sha256"))), 64);
	json_decref(m);
	admission_free(&a);
	workunit_free(wu);
	preset_free(p);
}

static void
test_accepted_written(void **state)
{
	struct manifest_input in;
	struct admission a;
	struct sandbox_result sr;
	struct workunit *wu;
	struct preset *p;
	struct changeset cs = { 0 };
	struct scope_verdict sv = { .accepted = true };
	struct artifact art[1];
	char dir[] = "/tmp/test_manifest.XXXXXX", path[128], err[256];
	json_error_t je;
	json_t *m;

	(void)state;
	load(&wu, &p);
	assert_true(admission_decide(wu, p, NULL, NULL, &a));
	memset(&sr, 0, sizeof(sr));
	sr.started = true;
	sr.wall_ms = 42;
	sr.peak_pids = 3;
	snprintf(sr.grant_id, sizeof(sr.grant_id), "%s", "0123456789abcdef0123456789abcdef");
	sr.attestation = json_pack("{s:{s:b}}", "cpu_limit", "attested", 1);
	snprintf(cs.base_commit, sizeof(cs.base_commit), "%s",
	    "80f6bd28f709a7a9d5f6a982be393a6d19b6a4c9");
	memset(art, 0, sizeof(art));
	snprintf(art[0].name, sizeof(art[0].name), "stdout.log");
	snprintf(art[0].sha256, sizeof(art[0].sha256), "%064d", 0);

	assert_non_null(mkdtemp(dir));
	memset(&in, 0, sizeof(in));
	in.run_id = "run-2";
	in.wu = wu;
	in.preset = p;
	in.adm = &a;
	in.sr = &sr;
	in.cs = &cs;
	in.scope = &sv;
	in.artifacts = art;
	in.nartifacts = 1;
	in.exit_code = EXEC_EXIT_OK;
	in.reason = REASON_ALLOWED;
	in.egressd_version = "0.1.0";
	assert_int_equal(manifest_write(dir, &in, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	m = json_load_file(path, 0, &je);
	assert_non_null(m);
	assert_string_equal(json_string_value(json_object_get(json_object_get(m, "outcome"),
	    "status")), "accepted");
	json_t *g = json_object_get(m, "grant");
	assert_string_equal(json_string_value(json_object_get(g, "id")),
	    "0123456789abcdef0123456789abcdef");
	assert_string_equal(json_string_value(json_array_get(json_object_get(g, "allowlist"), 0)),
	    "https://api.example.com");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(m,
	    "limits"), "requested"), "memory_bytes")), 64 << 20);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(m, "usage"),
	    "wall_ms")), 42);
	assert_true(json_is_true(json_object_get(json_object_get(m, "scope"), "accepted")));
	assert_int_equal(json_array_size(json_object_get(m, "artifacts")), 1);
	assert_string_equal(json_string_value(json_object_get(m, "base_commit")),
	    "80f6bd28f709a7a9d5f6a982be393a6d19b6a4c9");
	assert_string_equal(json_string_value(json_object_get(json_object_get(m, "versions"),
	    "egressd")), "0.1.0");
	json_decref(m);
	unlink(path);
	assert_int_equal(rmdir(dir), 0);      /* no temporary file left behind */
	json_decref(sr.attestation);
	admission_free(&a);
	workunit_free(wu);
	preset_free(p);
}

static void
test_status_strings(void **state)
{
	(void)state;
	assert_string_equal(manifest_status_str(EXEC_EXIT_OK), "accepted");
	assert_string_equal(manifest_status_str(EXEC_EXIT_REJECTED), "rejected");
	assert_string_equal(manifest_status_str(EXEC_EXIT_ADMISSION), "admission_refused");
	assert_string_equal(manifest_status_str(EXEC_EXIT_CAPABILITY), "capability_missing");
	assert_string_equal(manifest_status_str(EXEC_EXIT_WORKER), "worker_failed");
	assert_string_equal(manifest_status_str(EXEC_EXIT_INTERNAL), "internal_error");
	assert_string_equal(manifest_status_str(99), "internal_error");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_accepted_written),
		cmocka_unit_test(test_status_strings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
