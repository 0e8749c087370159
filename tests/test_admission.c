/* test_admission.c - WorkUnit/AgentPreset loading and every row and refusal of the
 * admission table (executor/workunit, executor/preset, executor/admission). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/limits.h"
#include "common/util.h"
#include "executor/admission.h"
#include "executor/preset.h"
#include "executor/workunit.h"

static const char WU_ALLOW[] =
    "id = demo-1\n"
    "objective = Update the greeting in README.md\n"
    "[security]\n"
    "sandbox_required = true\n"
    "[permissions]\n"
    "process_execution = true\n"
    "secrets =\n"
    "network = allowlist\n"
    "destinations = https://api.example.com\n"
    "destinations = https://198.51.100.10:8443\n"
    "filesystem_write = README.md\n"
    "filesystem_write = docs\n"
    "[budget]\n"
    "wall_seconds = 60\n"
    "cpu_millicores = 500\n"
    "memory_bytes = 256M\n"
    "disk_bytes = 64M\n"
    "processes = 32\n"
    "output_bytes = 64K\n"
    "[constraints]\n"
    "allowed_paths = docs\n"
    "allowed_paths = README.md\n"
    "forbidden_paths = docs/secret\n";

static const char PRESET_ALLOW[] =
    "[preset]\n"
    "name = shell\n"
    "executable = /bin/sh\n"
    "argv = sh\n"
    "argv = -c\n"
    "argv = echo hi\n"
    "prompt_transport = stdin\n"
    "network_policy = allowlisted\n"
    "env_allowlist = LANG\n"
    "env_allowlist = TERM\n"
    "[ceilings]\n"
    "wall_seconds = 30\n"
    "cpu_millicores = 1000\n"
    "memory_bytes = 1G\n"
    "disk_bytes = 32M\n"
    "processes = 64\n"
    "output_bytes = 1M\n"
    "diff_bytes = 2M\n";

/* Replace the first occurrence of old by new in base (old must occur). */
static char *
subst(const char *base, const char *old, const char *new)
{
	const char *at = strstr(base, old);
	size_t bl = strlen(base), ol = strlen(old), nl = strlen(new);
	char *out;

	assert_non_null(at);
	out = malloc(bl - ol + nl + 1);
	assert_non_null(out);
	memcpy(out, base, (size_t)(at - base));
	memcpy(out + (at - base), new, nl);
	memcpy(out + (at - base) + nl, at + ol, bl - (size_t)(at - base) - ol + 1);
	return out;
}

static struct workunit *
wu_load(const char *text, enum reason *why)
{
	char err[512];
	struct workunit *wu;

	*why = REASON_ALLOWED;
	wu = workunit_load_string("wu.ini", text, strlen(text), NULL, why, err, sizeof(err));
	if (wu == NULL)
		print_message("workunit refused: %s (%s)\n", err, reason_str(*why));
	return wu;
}

static struct preset *
preset_ld(const char *text, enum reason *why)
{
	char err[512];
	struct preset *p;

	*why = REASON_ALLOWED;
	p = preset_load_string("preset.ini", text, strlen(text), why, err, sizeof(err));
	if (p == NULL)
		print_message("preset refused: %s (%s)\n", err, reason_str(*why));
	return p;
}

static bool
has_reason(const struct admission *a, enum reason r)
{
	for (size_t i = 0; i < a->nrefusals; i++)
		if (a->refusals[i].reason == r)
			return true;
	return false;
}

/* Decide wu_text x preset_text; return admitted, and fill *a (caller frees). */
static bool
decide(const char *wu_text, const char *preset_text, const struct strlist *trusted,
    const char *const *env, struct admission *a)
{
	enum reason why;
	struct workunit *wu = wu_load(wu_text, &why);
	struct preset *p = preset_ld(preset_text, &why);
	bool ok;

	assert_non_null(wu);
	assert_non_null(p);
	ok = admission_decide(wu, p, trusted, env, a);
	for (size_t i = 0; i < a->nrefusals; i++)
		print_message("  refusal %s: %s\n", reason_str(a->refusals[i].reason),
		    a->refusals[i].detail);
	workunit_free(wu);
	preset_free(p);
	return ok;
}

/* Expect exactly one refusal reason r (possibly repeated). */
static void
expect_refused(const char *wu_text, const char *preset_text, const struct strlist *trusted,
    const char *const *env, enum reason r)
{
	struct admission a;

	assert_false(decide(wu_text, preset_text, trusted, env, &a));
	assert_true(has_reason(&a, r));
	for (size_t i = 0; i < a.nrefusals; i++)
		assert_int_equal(a.refusals[i].reason, r);
	assert_int_equal(a.grant.n, 0);
	admission_free(&a);
}

/* ---------- loading ---------- */

static void
test_load_fields(void **state)
{
	enum reason why;
	struct workunit *wu = wu_load(WU_ALLOW, &why);
	struct preset *p = preset_ld(PRESET_ALLOW, &why);

	(void)state;
	assert_non_null(wu);
	assert_string_equal(wu->id, "demo-1");
	assert_string_equal(wu->objective, "Update the greeting in README.md");
	assert_int_equal(wu->sandbox_required, WU_FLAG_TRUE);
	assert_int_equal(wu->network, WU_NET_ALLOWLIST);
	assert_int_equal(wu->destinations.n, 2);
	assert_true(wu->secrets.present);
	assert_int_equal(wu->secrets.n, 0);
	assert_int_equal(wu->allowed_paths.n, 2);
	assert_true(wu->forbidden_paths.present);
	assert_int_equal(wu->budget.state[CEIL_MEMORY_BYTES], CEIL_OK);
	assert_int_equal(wu->budget.value[CEIL_MEMORY_BYTES], 256ULL << 20);
	assert_int_equal(wu->budget.state[CEIL_DIFF_BYTES], CEIL_ABSENT);

	assert_non_null(p);
	assert_string_equal(p->name, "shell");
	assert_string_equal(p->executable, "/bin/sh");
	assert_int_equal(p->argv.n, 3);
	assert_string_equal(p->argv.v[2], "echo hi");
	assert_int_equal(p->transport, PT_STDIN);
	assert_int_equal(p->network, PN_ALLOWLISTED);
	workunit_free(wu);
	preset_free(p);
}

static void
test_objective_multiline(void **state)
{
	enum reason why;
	char *t = subst(WU_ALLOW, "objective = Update the greeting in README.md\n",
	    "objective = line one\nobjective = line two\n");
	struct workunit *wu = wu_load(t, &why);

	(void)state;
	assert_non_null(wu);
	assert_string_equal(wu->objective, "line one\nline two");
	workunit_free(wu);
	free(t);

	/* objective_file is refused without a base directory, and with a bad path. */
	t = subst(WU_ALLOW, "objective = Update the greeting in README.md\n",
	    "objective_file = task.txt\n");
	assert_null(wu_load(t, &why));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	free(t);
	t = subst(WU_ALLOW, "objective = Update the greeting in README.md\n",
	    "objective_file = ../task.txt\n");
	assert_null(wu_load(t, &why));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	free(t);
	/* Both forms at once, and neither. */
	t = subst(WU_ALLOW, "objective = Update", "objective_file = x.txt\nobjective = Update");
	assert_null(wu_load(t, &why));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	free(t);
	t = subst(WU_ALLOW, "objective = Update the greeting in README.md\n", "");
	assert_null(wu_load(t, &why));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	free(t);
	t = subst(WU_ALLOW, "objective = Update the greeting in README.md\n", "objective =   \n");
	assert_null(wu_load(t, &why));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	free(t);
}

static void
test_refused_keys(void **state)
{
	static const char *const exec_keys[] = {
		"executable = /bin/sh\n", "argv = -c\n", "shell = bash\n", "command = make\n",
	};
	static const char *const text_keys[] = {
		"prompt = do it\n", "goal = do it\n", "title = do it\n",
	};
	static const char *const anchors[] = { "[security]\n", "[permissions]\n",
		"[constraints]\n" };
	enum reason why;

	(void)state;
	for (size_t a = 0; a < EGRESS_NELEM(anchors); a++) {
		for (size_t i = 0; i < EGRESS_NELEM(exec_keys); i++) {
			char repl[128];
			snprintf(repl, sizeof(repl), "%s%s", anchors[a], exec_keys[i]);
			char *t = subst(WU_ALLOW, anchors[a], repl);
			assert_null(wu_load(t, &why));
			assert_int_equal(why, REASON_ADM_EXECUTABLE);
			free(t);
		}
		for (size_t i = 0; i < EGRESS_NELEM(text_keys); i++) {
			char repl[128];
			snprintf(repl, sizeof(repl), "%s%s", anchors[a], text_keys[i]);
			char *t = subst(WU_ALLOW, anchors[a], repl);
			assert_null(wu_load(t, &why));
			assert_int_equal(why, REASON_ADM_INVALID_FILE);
			free(t);
		}
	}
	/* Top level too. */
	char *t = subst(WU_ALLOW, "id = demo-1\n", "id = demo-1\nexecutable = /bin/sh\n");
	assert_null(wu_load(t, &why));
	assert_int_equal(why, REASON_ADM_EXECUTABLE);
	free(t);
	/* Unknown keys and sections are refused with file:line. */
	char err[256];
	t = subst(WU_ALLOW, "[budget]\n", "[budget]\nbogus = 1\n");
	assert_null(workunit_load_string("wu.ini", t, strlen(t), NULL, &why, err, sizeof(err)));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	assert_non_null(strstr(err, "wu.ini:"));
	free(t);
	t = subst(WU_ALLOW, "[budget]\n", "[agent]\nname = x\n[budget]\n");
	assert_null(wu_load(t, &why));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	free(t);
	/* Bad id, bad network value. */
	t = subst(WU_ALLOW, "id = demo-1", "id = a b");
	assert_null(wu_load(t, &why));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	free(t);
	t = subst(WU_ALLOW, "network = allowlist", "network = some");
	assert_null(wu_load(t, &why));
	assert_int_equal(why, REASON_ADM_INVALID_FILE);
	free(t);
}

static void
test_preset_invalid(void **state)
{
	static const struct { const char *old, *new; } cases[] = {
		{ "executable = /bin/sh", "executable = sh" },
		{ "executable = /bin/sh", "executable = /bin/../bin/sh" },
		{ "executable = /bin/sh\n", "" },
		{ "name = shell", "name = a/b" },
		{ "prompt_transport = stdin", "prompt_transport = pipe" },
		{ "prompt_transport = stdin", "prompt_transport = argument" },   /* no flag */
		{ "prompt_transport = stdin", "prompt_transport = stdin\nprompt_flag = -p" },
		{ "network_policy = allowlisted", "network_policy = open" },
		{ "network_policy = allowlisted", "network_policy = model_only" }, /* no conn */
		{ "network_policy = allowlisted",
		  "network_policy = allowlisted\nmodel_connection = m" },
		{ "[ceilings]\n", "[ceilings]\nbogus = 1\n" },
		{ "[preset]\n", "[other]\n" },
	};
	enum reason why;

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(cases); i++) {
		char *t = subst(PRESET_ALLOW, cases[i].old, cases[i].new);
		print_message("case %zu\n", i);
		assert_null(preset_ld(t, &why));
		assert_int_equal(why, REASON_ADM_INVALID_FILE);
		free(t);
	}
	/* argument transport with its flag loads. */
	char *t = subst(PRESET_ALLOW, "prompt_transport = stdin",
	    "prompt_transport = argument\nprompt_flag = --prompt");
	struct preset *p = preset_ld(t, &why);
	assert_non_null(p);
	assert_int_equal(p->transport, PT_ARGUMENT);
	assert_string_equal(p->prompt_flag, "--prompt");
	preset_free(p);
	free(t);
}

/* ---------- the table, row by row ---------- */

static void
test_row_none_disabled(void **state)
{
	struct admission a;
	char *wu = subst(WU_ALLOW, "network = allowlist\ndestinations = https://api.example.com\n"
	    "destinations = https://198.51.100.10:8443\n", "network = none\n");
	char *pr = subst(PRESET_ALLOW, "network_policy = allowlisted", "network_policy = disabled");

	(void)state;
	assert_true(decide(wu, pr, NULL, NULL, &a));
	assert_int_equal(a.net, SANDBOX_NET_NONE);
	assert_int_equal(a.grant.n, 0);
	admission_free(&a);
	/* Negative twins: none with an allowlisted or model_only preset. */
	expect_refused(wu, PRESET_ALLOW, NULL, NULL, REASON_ADM_NETWORK_MISMATCH);
	char *pm = subst(PRESET_ALLOW, "network_policy = allowlisted",
	    "network_policy = model_only\nmodel_connection = m");
	expect_refused(wu, pm, NULL, NULL, REASON_ADM_NETWORK_MISMATCH);
	/* none with destinations is contradictory. */
	char *wud = subst(WU_ALLOW, "network = allowlist", "network = none");
	expect_refused(wud, pr, NULL, NULL, REASON_ADM_NETWORK_MISMATCH);
	free(wud);
	free(pm);
	free(wu);
	free(pr);
}

static void
test_row_allowlist_allowlisted(void **state)
{
	struct admission a;

	(void)state;
	assert_true(decide(WU_ALLOW, PRESET_ALLOW, NULL, NULL, &a));
	assert_int_equal(a.net, SANDBOX_NET_ALLOWLIST);
	/* Grant = exactly the WorkUnit allowlist, canonical. */
	assert_int_equal(a.grant.n, 2);
	assert_string_equal(a.grant.v[0], "https://api.example.com");
	assert_string_equal(a.grant.v[1], "https://198.51.100.10:8443");
	assert_int_equal(a.transport, PROMPT_STDIN);
	admission_free(&a);
	/* Negative twin: allowlist with a disabled preset. */
	char *pr = subst(PRESET_ALLOW, "network_policy = allowlisted", "network_policy = disabled");
	expect_refused(WU_ALLOW, pr, NULL, NULL, REASON_ADM_NETWORK_MISMATCH);
	free(pr);
	/* allowlist without destinations; with an invalid destination. */
	char *wu = subst(WU_ALLOW, "destinations = https://api.example.com\n"
	    "destinations = https://198.51.100.10:8443\n", "");
	expect_refused(wu, PRESET_ALLOW, NULL, NULL, REASON_ADM_INVALID_DESTINATION);
	free(wu);
	wu = subst(WU_ALLOW, "destinations = https://api.example.com", "destinations = ftp://x");
	expect_refused(wu, PRESET_ALLOW, NULL, NULL, REASON_ADM_INVALID_DESTINATION);
	free(wu);
	wu = subst(WU_ALLOW, "destinations = https://api.example.com", "destinations = https://*.com");
	expect_refused(wu, PRESET_ALLOW, NULL, NULL, REASON_ADM_INVALID_DESTINATION);
	free(wu);
}

static void
test_row_model_only(void **state)
{
	char *pr = subst(PRESET_ALLOW, "network_policy = allowlisted",
	    "network_policy = model_only\nmodel_connection = models");
	char *wu = subst(WU_ALLOW, "destinations = https://198.51.100.10:8443\n", "");
	struct strlist trusted;
	struct admission a;
	char err[256];
	static const char tf[] = "[connection models]\ndestination = https://*.example.com\n"
	    "[connection other]\ndestination = https://198.51.100.10:8443\n";

	(void)state;
	assert_int_equal(trusted_models_load_string("trusted.ini", tf, strlen(tf), "models",
	    &trusted, err, sizeof(err)), 0);
	assert_true(trusted.present);
	assert_true(decide(wu, pr, &trusted, NULL, &a));
	assert_int_equal(a.net, SANDBOX_NET_ALLOWLIST);
	assert_int_equal(a.grant.n, 1);
	assert_string_equal(a.grant.v[0], "https://api.example.com");
	admission_free(&a);
	/* A destination outside the trusted set. */
	expect_refused(WU_ALLOW, pr, &trusted, NULL, REASON_ADM_DEST_NOT_TRUSTED);
	strlist_free(&trusted);
	/* Trusted input missing: no file, or a file without this connection. */
	expect_refused(wu, pr, NULL, NULL, REASON_ADM_MODEL_DEST_MISSING);
	assert_int_equal(trusted_models_load_string("trusted.ini", tf, strlen(tf), "nope",
	    &trusted, err, sizeof(err)), 0);
	assert_false(trusted.present);
	expect_refused(wu, pr, &trusted, NULL, REASON_ADM_MODEL_DEST_MISSING);
	strlist_free(&trusted);
	/* placeholder_env: egress-exec sets it; a caller may never supply it (twin: another
	 * caller variable is fine). */
	{
		char *pp = subst(pr, "model_connection = models",
		    "model_connection = models\nplaceholder_env = ANTHROPIC_API_KEY");
		const char *const sneaky[] = { "ANTHROPIC_API_KEY=sk-real", NULL };
		const char *const fine[] = { "LANG=C.UTF-8", NULL };

		assert_int_equal(trusted_models_load_string("trusted.ini", tf, strlen(tf),
		    "models", &trusted, err, sizeof(err)), 0);
		assert_true(decide(wu, pp, &trusted, fine, &a));
		admission_free(&a);
		expect_refused(wu, pp, &trusted, sneaky, REASON_ADM_ENV_FORBIDDEN);
		strlist_free(&trusted);
		free(pp);
	}
	/* A trusted file with unknown keys is refused at load. */
	assert_int_equal(trusted_models_load_string("trusted.ini", "[connection m]\nx = 1\n", 22,
	    "m", &trusted, err, sizeof(err)), -1);
	free(pr);
	free(wu);
}

static void
test_row_unrestricted(void **state)
{
	static const char *const policies[] = { "allowlisted", "disabled",
		"model_only\nmodel_connection = m" };
	char *wu = subst(WU_ALLOW, "network = allowlist", "network = unrestricted");

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(policies); i++) {
		char repl[64];
		snprintf(repl, sizeof(repl), "network_policy = %s", policies[i]);
		char *pr = subst(PRESET_ALLOW, "network_policy = allowlisted", repl);
		struct admission a;
		assert_false(decide(wu, pr, NULL, NULL, &a));
		assert_true(has_reason(&a, REASON_ADM_NETWORK_UNRESTRICTED));
		admission_free(&a);
		free(pr);
	}
	free(wu);
	/* network missing altogether. */
	wu = subst(WU_ALLOW, "network = allowlist\n", "");
	struct admission a;
	assert_false(decide(wu, PRESET_ALLOW, NULL, NULL, &a));
	assert_true(has_reason(&a, REASON_ADM_NETWORK_MISMATCH));
	admission_free(&a);
	free(wu);
}

/* ---------- the other refusals ---------- */

static void
test_refusals(void **state)
{
	static const struct {
		const char *old, *new;
		enum reason r;
	} cases[] = {
		{ "sandbox_required = true", "sandbox_required = false", REASON_ADM_SANDBOX_REQUIRED },
		{ "sandbox_required = true", "sandbox_required = maybe", REASON_ADM_SANDBOX_REQUIRED },
		/* only the words the docs name: conf's other boolean spellings are refused */
		{ "sandbox_required = true", "sandbox_required = yes", REASON_ADM_SANDBOX_REQUIRED },
		{ "sandbox_required = true", "sandbox_required = 1", REASON_ADM_SANDBOX_REQUIRED },
		{ "sandbox_required = true", "sandbox_required = on", REASON_ADM_SANDBOX_REQUIRED },
		{ "sandbox_required = true", "sandbox_required = TRUE", REASON_ADM_SANDBOX_REQUIRED },
		{ "process_execution = true", "process_execution = yes", REASON_ADM_PROCESS_EXECUTION },
		{ "process_execution = true", "process_execution = 1", REASON_ADM_PROCESS_EXECUTION },
		{ "sandbox_required = true\n", "", REASON_ADM_SANDBOX_REQUIRED },
		{ "process_execution = true", "process_execution = no", REASON_ADM_PROCESS_EXECUTION },
		{ "process_execution = true\n", "", REASON_ADM_PROCESS_EXECUTION },
		{ "secrets =\n", "secrets = GITHUB_TOKEN\n", REASON_ADM_SECRETS },
		{ "secrets =\n", "", REASON_ADM_SECRETS },
		{ "wall_seconds = 60\n", "", REASON_ADM_BUDGET },
		{ "wall_seconds = 60", "wall_seconds = 0", REASON_ADM_BUDGET },
		{ "wall_seconds = 60", "wall_seconds = -5", REASON_ADM_BUDGET },
		{ "cpu_millicores = 500", "cpu_millicores = lots", REASON_ADM_BUDGET },
		{ "memory_bytes = 256M\n", "", REASON_ADM_BUDGET },
		{ "disk_bytes = 64M", "disk_bytes = 0", REASON_ADM_BUDGET },
		{ "processes = 32\n", "", REASON_ADM_BUDGET },
		{ "output_bytes = 64K", "output_bytes = 0K", REASON_ADM_BUDGET },
		{ "[budget]\n", "[budget]\ndiff_bytes = 0\n", REASON_ADM_BUDGET },
		{ "filesystem_write = docs\n", "", REASON_ADM_WRITE_SCOPE },
		{ "filesystem_write = docs\n", "filesystem_write = docs\nfilesystem_write = src\n",
		  REASON_ADM_WRITE_SCOPE },
		{ "forbidden_paths = docs/secret\n", "", REASON_ADM_SCOPE_MISSING },
		{ "forbidden_paths = docs/secret", "forbidden_paths = ../docs", REASON_ADM_INVALID_PATH },
		{ "forbidden_paths = docs/secret", "forbidden_paths = /etc", REASON_ADM_INVALID_PATH },
		{ "forbidden_paths = docs/secret", "forbidden_paths = a\\\\b",
		  REASON_ADM_INVALID_PATH },
		{ "forbidden_paths = docs/secret", "forbidden_paths = a/./b", REASON_ADM_INVALID_PATH },
		{ "forbidden_paths = docs/secret", "forbidden_paths = a//b", REASON_ADM_INVALID_PATH },
	};

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(cases); i++) {
		char *wu = subst(WU_ALLOW, cases[i].old, cases[i].new);
		print_message("case %zu: %s\n", i, reason_str(cases[i].r));
		expect_refused(wu, PRESET_ALLOW, NULL, NULL, cases[i].r);
		free(wu);
	}
	/* Paths that fail in both lists at once (allowed and filesystem_write stay equal). */
	static const char *const bad_allowed[] = { ".git/hooks", "../docs", "/abs", "a/../b",
		"src/.GIT", "src/.git.", "GIT~1/x", "src/.g\xe2\x80\x8cit" };
	for (size_t i = 0; i < EGRESS_NELEM(bad_allowed); i++) {
		char r1[128], r2[128];
		snprintf(r1, sizeof(r1), "allowed_paths = %s\n", bad_allowed[i]);
		snprintf(r2, sizeof(r2), "filesystem_write = %s\n", bad_allowed[i]);
		char *t1 = subst(WU_ALLOW, "allowed_paths = docs\n", r1);
		char *t2 = subst(t1, "filesystem_write = docs\n", r2);
		expect_refused(t2, PRESET_ALLOW, NULL, NULL, REASON_ADM_INVALID_PATH);
		free(t1);
		free(t2);
	}
	char *t1, *t2;
	/* Empty allowed_paths with an empty filesystem_write is admissible (nothing may
	 * change); allowed_paths missing is not. */
	t1 = subst(WU_ALLOW, "allowed_paths = docs\nallowed_paths = README.md\n",
	    "allowed_paths =\n");
	t2 = subst(t1, "filesystem_write = README.md\nfilesystem_write = docs\n",
	    "filesystem_write =\n");
	struct admission a;
	assert_true(decide(t2, PRESET_ALLOW, NULL, NULL, &a));
	admission_free(&a);
	free(t1);
	free(t2);
	t1 = subst(WU_ALLOW, "allowed_paths = docs\nallowed_paths = README.md\n", "");
	assert_false(decide(t1, PRESET_ALLOW, NULL, NULL, &a));
	assert_true(has_reason(&a, REASON_ADM_SCOPE_MISSING));
	admission_free(&a);
	free(t1);
}

static void
test_preset_refusals(void **state)
{
	static const struct {
		const char *old, *new;
		enum reason r;
	} cases[] = {
		{ "prompt_transport = stdin", "prompt_transport = file", REASON_ADM_PROMPT_FILE },
		{ "env_allowlist = TERM", "env_allowlist = GITHUB_TOKEN", REASON_ADM_ENV_FORBIDDEN },
		{ "env_allowlist = TERM", "env_allowlist = AWS_SECRET_ACCESS_KEY",
		  REASON_ADM_ENV_FORBIDDEN },
		{ "env_allowlist = TERM", "env_allowlist = SSH_AUTH_SOCK", REASON_ADM_ENV_FORBIDDEN },
		{ "env_allowlist = TERM", "env_allowlist = HTTPS_PROXY", REASON_ADM_ENV_FORBIDDEN },
		{ "wall_seconds = 30\n", "", REASON_ADM_BUDGET },
		{ "memory_bytes = 1G", "memory_bytes = 0", REASON_ADM_BUDGET },
		{ "processes = 64", "processes = many", REASON_ADM_BUDGET },
	};

	(void)state;
	for (size_t i = 0; i < EGRESS_NELEM(cases); i++) {
		char *pr = subst(PRESET_ALLOW, cases[i].old, cases[i].new);
		print_message("case %zu: %s\n", i, reason_str(cases[i].r));
		expect_refused(WU_ALLOW, pr, NULL, NULL, cases[i].r);
		free(pr);
	}
}

static void
test_argument_objective_bound(void **state)
{
	char *pr = subst(PRESET_ALLOW, "prompt_transport = stdin",
	    "prompt_transport = argument\nprompt_flag = --prompt");
	size_t n = 40, linelen = 4000;
	size_t cap = strlen(WU_ALLOW) + n * (linelen + 16) + 1;
	char *wu = malloc(cap), *line = malloc(linelen + 1);
	size_t o = 0;
	struct admission a;

	(void)state;
	assert_non_null(wu);
	assert_non_null(line);
	memset(line, 'x', linelen);
	line[linelen] = '\0';
	o += (size_t)snprintf(wu + o, cap - o, "id = big\n");
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(wu + o, cap - o, "objective = %s\n", line);
	snprintf(wu + o, cap - o, "%s", strstr(WU_ALLOW, "[security]"));
	/* stdin takes it; argument does not (MAX_ARG_STRLEN). */
	assert_true(decide(wu, PRESET_ALLOW, NULL, NULL, &a));
	admission_free(&a);
	expect_refused(wu, pr, NULL, NULL, REASON_ADM_INVALID_FILE);
	free(wu);
	free(line);
	free(pr);
}

static void
test_env_socket(void **state)
{
	static const char *const bad[][2] = {
		{ "LANG=/var/run/docker.sock", NULL },
		{ "TERM=unix:///run/containerd/containerd.sock", NULL },
		{ "FOO=/run/podman/podman.sock", NULL },
		{ "DOCKER_HOST=tcp://127.0.0.1:2375", NULL },
	};
	const char *const good[] = { "LANG=C.UTF-8", "TERM=xterm", NULL };
	struct admission a;

	(void)state;
	assert_true(decide(WU_ALLOW, PRESET_ALLOW, NULL, good, &a));
	admission_free(&a);
	for (size_t i = 0; i < EGRESS_NELEM(bad); i++) {
		print_message("env case %zu\n", i);
		expect_refused(WU_ALLOW, PRESET_ALLOW, NULL, bad[i], REASON_ADM_ENV_SOCKET);
	}
}

static void
test_stricter_ceilings(void **state)
{
	struct admission a;

	(void)state;
	assert_true(decide(WU_ALLOW, PRESET_ALLOW, NULL, NULL, &a));
	assert_int_equal(a.limits.wall_seconds, 30);          /* preset stricter */
	assert_int_equal(a.limits.cpu_millicores, 500);       /* WorkUnit stricter */
	assert_int_equal(a.limits.memory_bytes, 256ULL << 20);
	assert_int_equal(a.limits.disk_bytes, 32ULL << 20);
	assert_int_equal(a.limits.pids, 32);
	assert_int_equal(a.limits.output_bytes, 64ULL << 10);
	assert_int_equal(a.diff_bytes, 2ULL << 20);           /* only the preset sets it */
	admission_free(&a);
	/* A WorkUnit asking for more than the preset never loosens it. */
	char *wu = subst(WU_ALLOW, "memory_bytes = 256M", "memory_bytes = 64G");
	char *wu2 = subst(wu, "[budget]\n", "[budget]\ndiff_bytes = 100M\n");
	assert_true(decide(wu2, PRESET_ALLOW, NULL, NULL, &a));
	assert_int_equal(a.limits.memory_bytes, 1ULL << 30);
	assert_int_equal(a.diff_bytes, 2ULL << 20);
	admission_free(&a);
	free(wu);
	free(wu2);
	/* Neither sets diff_bytes: the default. */
	char *pr = subst(PRESET_ALLOW, "diff_bytes = 2M\n", "");
	assert_true(decide(WU_ALLOW, pr, NULL, NULL, &a));
	assert_int_equal(a.diff_bytes, EGRESS_DIFF_DEFAULT_MAX);
	admission_free(&a);
	free(pr);
}

static void
test_json_and_summary(void **state)
{
	struct admission a;
	char line[512];
	json_t *o;

	(void)state;
	assert_true(decide(WU_ALLOW, PRESET_ALLOW, NULL, NULL, &a));
	o = admission_to_json(&a);
	assert_non_null(o);
	assert_true(json_is_true(json_object_get(o, "admitted")));
	assert_int_equal(json_array_size(json_object_get(o, "grant")), 2);
	json_decref(o);
	admission_summary(&a, line, sizeof(line));
	assert_non_null(strstr(line, "admitted"));
	admission_free(&a);

	char *wu = subst(WU_ALLOW, "sandbox_required = true", "sandbox_required = false");
	char *wu2 = subst(wu, "secrets =", "secrets = X");
	assert_false(decide(wu2, PRESET_ALLOW, NULL, NULL, &a));
	assert_int_equal(a.nrefusals, 2);
	o = admission_to_json(&a);
	assert_false(json_is_true(json_object_get(o, "admitted")));
	assert_int_equal(json_array_size(json_object_get(o, "reasons")), 2);
	assert_null(json_object_get(o, "grant"));
	json_decref(o);
	admission_summary(&a, line, sizeof(line));
	assert_non_null(strstr(line, "refused: sandbox_required"));
	admission_free(&a);
	free(wu);
	free(wu2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_fields),
		cmocka_unit_test(test_objective_multiline),
		cmocka_unit_test(test_refused_keys),
		cmocka_unit_test(test_preset_invalid),
		cmocka_unit_test(test_row_none_disabled),
		cmocka_unit_test(test_row_allowlist_allowlisted),
		cmocka_unit_test(test_row_model_only),
		cmocka_unit_test(test_row_unrestricted),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_preset_refusals),
		cmocka_unit_test(test_argument_objective_bound),
		cmocka_unit_test(test_env_socket),
		cmocka_unit_test(test_stricter_ceilings),
		cmocka_unit_test(test_json_and_summary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
