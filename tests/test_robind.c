/* test_robind.c - preset read-only binds: which host paths may be shown, the executable
 * visibility rule, and the preset/admission plumbing (executor/robind, preset, admission). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "executor/admission.h"
#include "executor/preset.h"
#include "executor/robind.h"

static void
test_sensitive(void **state)
{
	static const char *const refused[] = {
		"/", "/home", "/home/alice/.nvm", "/root", "/root/.ssh", "/etc/shadow",
		"/var/run/docker.sock", "/run/docker.sock", "/run", "/run/egress-exec",
		"/run/egress-exec/wu-abc", "/etc/egressd", "/var/log/egressd/decisions.jsonl",
		"/var/log", "/var", "/proc/self", "/dev", "/sys/fs", "/var/lib/docker",
		"/var/lib", "/etc/ssh/ssh_host_rsa_key",
	};
	static const char *const fine[] = {
		"/opt/node", "/opt", "/var/cache/egress-agents", "/srv/toolchains/go",
		"/var/lib/egress-agent-lab/x/ca.pem", "/etc-not-etc",
	};
	const char *which;

	(void)state;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		which = NULL;
		if (!robind_sensitive(refused[i], &which))
			fail_msg("%s should be sensitive", refused[i]);
		assert_non_null(which);
	}
	for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++)
		if (robind_sensitive(fine[i], &which))
			fail_msg("%s refused as %s", fine[i], which);
}

static void
test_check(void **state)
{
	static const struct { const char *path; bool ok; const char *word; } cases[] = {
		{ "/opt/../etc", false, "canonical" },
		{ "opt/node", false, "canonical" },
		{ "/opt//node", false, "canonical" },
		{ "/opt/node/", false, "canonical" },
		{ "/etc", false, "/etc/shadow" },
		{ "/etc/ssl/certs", false, "builds" },
		{ "/tmp/x", false, "builds" },
		{ "/usr/local", false, "already" },
		{ "/lib/x86_64-linux-gnu", false, "already" },
		{ "/root", false, "overlaps" },
		{ "/var/run/docker.sock", false, "overlaps" },
		{ "/run/egress-exec", false, "overlaps" },
		{ "/var/lib/no-such-dir-egress", false, "No such file" },
	};
	char msg[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum reason r = robind_check(cases[i].path, msg, sizeof(msg));
		if (cases[i].ok) {
			assert_int_equal(r, REASON_ALLOWED);
			continue;
		}
		if (r != REASON_ADM_BIND_REFUSED)
			fail_msg("%s: not refused", cases[i].path);
		if (strstr(msg, cases[i].word) == NULL)
			fail_msg("%s: message %s lacks %s", cases[i].path, msg, cases[i].word);
	}
}

/* A real directory and a symbolic link to it, outside every refused location. */
static void
test_check_real_and_link(void **state)
{
	char dir[] = "/var/tmp/egx-robind-XXXXXX";
	char link[64], msg[512];

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(robind_check(dir, msg, sizeof(msg)), REASON_ALLOWED);
	snprintf(link, sizeof(link), "%s-link", dir);
	assert_int_equal(symlink(dir, link), 0);
	assert_int_equal(robind_check(link, msg, sizeof(msg)), REASON_ADM_BIND_REFUSED);
	assert_non_null(strstr(msg, "symbolic link"));
	unlink(link);
	rmdir(dir);
}

static void
test_visible(void **state)
{
	const char *binds[] = { "/opt/node", "/var/cache/egress-agents", NULL };

	(void)state;
	assert_true(robind_visible("/usr/bin/node", NULL));
	assert_true(robind_visible("/bin/sh", NULL));
	assert_true(robind_visible("/opt/node/bin/node", binds));
	assert_true(robind_visible("/var/cache/egress-agents/codex/bin/codex", binds));
	/* negative twins: outside the view, and a sibling that only shares a prefix */
	assert_false(robind_visible("/opt/node/bin/node", NULL));
	assert_false(robind_visible("/opt/node2/bin/node", binds));
	assert_false(robind_visible("/usr2/bin/x", binds));
	assert_false(robind_visible("/home/alice/.nvm/bin/node", binds));
}

static const char PRESET_HEAD[] =
    "[preset]\nname = t\nprompt_transport = stdin\nnetwork_policy = disabled\n";
static const char PRESET_CEIL[] =
    "[ceilings]\nwall_seconds = 60\ncpu_millicores = 1000\nmemory_bytes = 256M\n"
    "disk_bytes = 64M\nprocesses = 64\noutput_bytes = 1M\n";
static const char WU[] =
    "id = t\nobjective = x\n[security]\nsandbox_required = true\n[permissions]\n"
    "process_execution = true\nsecrets =\nnetwork = none\nfilesystem_write = README.md\n"
    "[budget]\nwall_seconds = 30\ncpu_millicores = 500\nmemory_bytes = 128M\n"
    "disk_bytes = 32M\nprocesses = 32\noutput_bytes = 64K\n[constraints]\n"
    "allowed_paths = README.md\nforbidden_paths = secrets\n";

static bool
admit(const char *preset_body, enum reason want)
{
	char text[2048], err[512];
	enum reason why;
	struct preset *p;
	struct workunit *wu;
	struct admission a;
	bool found = false;

	snprintf(text, sizeof(text), "%s%s%s", PRESET_HEAD, preset_body, PRESET_CEIL);
	p = preset_load_string("t.ini", text, strlen(text), &why, err, sizeof(err));
	if (p == NULL)
		fail_msg("preset: %s", err);
	wu = workunit_load_string("wu.ini", WU, strlen(WU), NULL, &why, err, sizeof(err));
	if (wu == NULL)
		fail_msg("workunit: %s", err);
	admission_decide(wu, p, NULL, NULL, &a);
	for (size_t i = 0; i < a.nrefusals; i++)
		if (a.refusals[i].reason == want)
			found = true;
	if (want == REASON_ALLOWED)
		found = a.admitted;
	admission_free(&a);
	workunit_free(wu);
	preset_free(p);
	return found;
}

static void
test_admission(void **state)
{
	char dir[] = "/var/tmp/egx-robind-XXXXXX";
	char body[512], exe[128];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	chmod(dir, 0755);
	snprintf(exe, sizeof(exe), "%s/agent", dir);
	f = fopen(exe, "w");
	assert_non_null(f);
	fputs("#!/bin/sh\n", f);
	fclose(f);
	chmod(exe, 0755);

	assert_true(admit("executable = /bin/sh\n", REASON_ALLOWED));
	/* the executable is outside the view until its directory is bound */
	snprintf(body, sizeof(body), "executable = %s\n", exe);
	assert_true(admit(body, REASON_ADM_EXECUTABLE_HIDDEN));
	snprintf(body, sizeof(body), "executable = %s\nro_bind = %s\n", exe, dir);
	assert_true(admit(body, REASON_ALLOWED));
	assert_true(admit("executable = /bin/no-such-agent\n", REASON_ADM_EXECUTABLE_HIDDEN));
	/* sensitive binds are refused whatever the executable */
	assert_true(admit("executable = /bin/sh\nro_bind = /root\n", REASON_ADM_BIND_REFUSED));
	assert_true(admit("executable = /bin/sh\nro_bind = /run/egress-exec\n",
	    REASON_ADM_BIND_REFUSED));
	assert_true(admit("executable = /bin/sh\nro_bind = /etc/shadow\n",
	    REASON_ADM_BIND_REFUSED));
	unlink(exe);
	rmdir(dir);
}

static void
test_preset_syntax(void **state)
{
	char text[4096], err[512];
	enum reason why;
	struct preset *p;
	size_t n;

	(void)state;
	n = (size_t)snprintf(text, sizeof(text), "%sexecutable = /bin/sh\nro_bind = opt\n%s",
	    PRESET_HEAD, PRESET_CEIL);
	p = preset_load_string("t.ini", text, n, &why, err, sizeof(err));
	assert_null(p);
	assert_non_null(strstr(err, "ro_bind"));
	n = (size_t)snprintf(text, sizeof(text), "%sexecutable = /bin/sh\n", PRESET_HEAD);
	for (int i = 0; i <= ROBIND_MAX; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "ro_bind = /opt/t%d\n", i);
	n += (size_t)snprintf(text + n, sizeof(text) - n, "%s", PRESET_CEIL);
	p = preset_load_string("t.ini", text, n, &why, err, sizeof(err));
	assert_null(p);
	assert_non_null(strstr(err, "more than"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sensitive),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_check_real_and_link),
		cmocka_unit_test(test_visible),
		cmocka_unit_test(test_admission),
		cmocka_unit_test(test_preset_syntax),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
