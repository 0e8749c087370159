/* test_preset.c - AgentPreset and trusted-destinations files on disk, including the
 * samples under conf/ (executor/preset). Refusal coverage is in test_admission.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "executor/admission.h"
#include "executor/preset.h"

static const char *
src_dir(void)
{
	const char *s = getenv("EGRESS_SOURCE_DIR");

	return s ? s : EGRESS_SOURCE_DIR;
}

static void
path_of(char *buf, size_t len, const char *rel)
{
	snprintf(buf, len, "%s/%s", src_dir(), rel);
}

static void
test_samples_load(void **state)
{
	static const char *const presets[] = { "conf/presets/demo-agent.ini",
		"conf/presets/offline-agent.ini", "conf/presets/model-agent.ini" };
	char p[1024], err[512];
	enum reason why;

	(void)state;
	for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++) {
		path_of(p, sizeof(p), presets[i]);
		struct preset *pr = preset_load(p, &why, err, sizeof(err));
		if (pr == NULL)
			print_message("%s\n", err);
		assert_non_null(pr);
		assert_true(pr->executable[0] == '/');
		assert_int_equal(pr->ceilings.state[CEIL_WALL_SECONDS], CEIL_OK);
		preset_free(pr);
	}
}

static void
test_samples_admission(void **state)
{
	static const struct { const char *wu, *preset; bool trusted, admitted; } runs[] = {
		{ "conf/workunits/demo.ini", "conf/presets/demo-agent.ini", false, true },
		{ "conf/workunits/demo-forbidden.ini", "conf/presets/demo-agent.ini", false, true },
		{ "conf/workunits/offline.ini", "conf/presets/offline-agent.ini", false, true },
		{ "conf/workunits/demo.ini", "conf/presets/model-agent.ini", true, true },
		/* negative twins */
		{ "conf/workunits/demo.ini", "conf/presets/model-agent.ini", false, false },
		{ "conf/workunits/demo.ini", "conf/presets/offline-agent.ini", false, false },
		{ "conf/workunits/offline.ini", "conf/presets/demo-agent.ini", false, false },
	};
	char w[1024], p[1024], t[1024];

	(void)state;
	path_of(t, sizeof(t), "conf/presets/trusted-models.ini");
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		struct workunit *wu;
		struct preset *pr;
		struct admission a;
		path_of(w, sizeof(w), runs[i].wu);
		path_of(p, sizeof(p), runs[i].preset);
		bool ok = admission_from_files(w, p, runs[i].trusted ? t : NULL, NULL, &wu, &pr, &a);
		print_message("%zu: %s\n", i, a.nrefusals ? a.refusals[0].detail : "admitted");
		assert_int_equal(ok, runs[i].admitted);
		admission_free(&a);
		workunit_free(wu);
		preset_free(pr);
	}
}

static void
test_trusted_file(void **state)
{
	char t[1024], err[512];
	struct strlist l;

	(void)state;
	path_of(t, sizeof(t), "conf/presets/trusted-models.ini");
	assert_int_equal(trusted_models_load(t, "lab-models", &l, err, sizeof(err)), 0);
	assert_true(l.present);
	assert_int_equal(l.n, 2);
	strlist_free(&l);
	assert_int_equal(trusted_models_load(t, "other", &l, err, sizeof(err)), 0);
	assert_false(l.present);
	assert_int_equal(trusted_models_load("/nonexistent-h8", "x", &l, err, sizeof(err)), -1);
	/* An unreadable trusted file refuses admission; it is never "no restriction". */
	{
		char w[1024], p[1024];
		struct workunit *wu;
		struct preset *pr;
		struct admission a;
		path_of(w, sizeof(w), "conf/workunits/demo.ini");
		path_of(p, sizeof(p), "conf/presets/model-agent.ini");
		assert_false(admission_from_files(w, p, "/nonexistent-h8", NULL, &wu, &pr, &a));
		assert_int_equal(a.refusals[0].reason, REASON_ADM_INVALID_FILE);
		admission_free(&a);
		workunit_free(wu);
		preset_free(pr);
	}
	assert_string_equal(preset_transport_str(PT_ARGUMENT), "argument");
	assert_string_equal(preset_net_str(PN_MODEL_ONLY), "model_only");
}

/* Issue: `argv = sh -c 'a ; b'` reached the worker as "sh -c 'a" (INI inline comment). */
static void
test_argv_inline_comment(void **state)
{
	static const char head[] = "[preset]\nname = p\nexecutable = /bin/sh\nargv = sh\n"
	    "argv = -c\n";
	static const char tail[] = "prompt_transport = stdin\nnetwork_policy = disabled\n";
	static const char *const refused[] = {
		"argv = echo a ; echo b\n", "argv = echo a\t;echo b\n", "  argv=x ;\n",
	};
	char text[512], err[512], path[] = "/tmp/egress-preset-XXXXXX";
	enum reason why;
	struct preset *p;

	(void)state;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		snprintf(text, sizeof(text), "%s%s%s", head, refused[i], tail);
		p = preset_load_string("p.ini", text, strlen(text), &why, err, sizeof(err));
		assert_null(p);
		assert_int_equal(why, REASON_ADM_INVALID_FILE);
		print_message("%s\n", err);
		assert_non_null(strstr(err, "p.ini:6:"));
	}
	/* the same through a file on disk (common/conf's loader), named by its path */
	snprintf(text, sizeof(text), "%s%s%s", head, refused[0], tail);
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_null(preset_load(path, &why, err, sizeof(err)));
	char want[64];
	snprintf(want, sizeof(want), "%s:6:", path);
	assert_non_null(strstr(err, want));
	unlink(path);

	/* negative twins: ';' glued to a word is kept whole, and so is a comment line and an
	 * inline comment on another key */
	snprintf(text, sizeof(text), "%s%s; a whole-line comment\n%s", head,
	    "argv = echo a; echo b\n", "prompt_transport = stdin ; stdin\n"
	    "network_policy = disabled\n");
	p = preset_load_string("p.ini", text, strlen(text), &why, err, sizeof(err));
	if (p == NULL)
		fail_msg("%s", err);
	assert_int_equal(p->argv.n, 3);
	assert_string_equal(p->argv.v[2], "echo a; echo b");
	assert_int_equal(p->transport, PT_STDIN);
	preset_free(p);
}

/* placeholder_env: an upper-case name, only with model_connection, never also copied. */
static void
test_placeholder_env(void **state)
{
	static const char base[] = "[preset]\nname = p\nexecutable = /bin/true\n"
	    "prompt_transport = stdin\nnetwork_policy = model_only\nmodel_connection = m\n";
	char text[1024], err[512];
	enum reason why;
	struct preset *p;
	const char *bad[] = { "placeholder_env = lower", "placeholder_env = 1X",
	    "placeholder_env = A-B", "placeholder_env = K\nenv_allowlist = K" };

	(void)state;
	snprintf(text, sizeof(text), "%splaceholder_env = ANTHROPIC_API_KEY\n", base);
	p = preset_load_string("p.ini", text, strlen(text), &why, err, sizeof(err));
	assert_non_null(p);
	assert_string_equal(p->placeholder_env, "ANTHROPIC_API_KEY");
	preset_free(p);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "%s%s\n", base, bad[i]);
		assert_null(preset_load_string("p.ini", text, strlen(text), &why, err,
		    sizeof(err)));
		assert_non_null(strstr(err, "placeholder_env"));
	}
	/* without a model connection */
	snprintf(text, sizeof(text), "[preset]\nname = p\nexecutable = /bin/true\n"
	    "prompt_transport = stdin\nnetwork_policy = allowlisted\nplaceholder_env = K\n");
	assert_null(preset_load_string("p.ini", text, strlen(text), &why, err, sizeof(err)));
}

/* transparent: yes (the default) or no; anything else refused with its line. */
static void
test_transparent(void **state)
{
	static const char base[] = "[preset]\nname = p\nexecutable = /bin/true\n"
	    "prompt_transport = stdin\nnetwork_policy = allowlisted\n";
	char text[1024], err[512];
	enum reason why;
	struct preset *p;

	(void)state;
	p = preset_load_string("p.ini", base, strlen(base), &why, err, sizeof(err));
	assert_non_null(p);
	assert_false(p->no_transparent);
	preset_free(p);
	snprintf(text, sizeof(text), "%stransparent = no\n", base);
	p = preset_load_string("p.ini", text, strlen(text), &why, err, sizeof(err));
	assert_non_null(p);
	assert_true(p->no_transparent);
	preset_free(p);
	snprintf(text, sizeof(text), "%stransparent = yes\n", base);
	p = preset_load_string("p.ini", text, strlen(text), &why, err, sizeof(err));
	assert_non_null(p);
	assert_false(p->no_transparent);
	preset_free(p);
	snprintf(text, sizeof(text), "%stransparent = off\n", base);
	assert_null(preset_load_string("p.ini", text, strlen(text), &why, err, sizeof(err)));
	assert_non_null(strstr(err, "p.ini:6: transparent must be yes or no"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_transparent),
		cmocka_unit_test(test_samples_load),
		cmocka_unit_test(test_samples_admission),
		cmocka_unit_test(test_trusted_file),
		cmocka_unit_test(test_argv_inline_comment),
		cmocka_unit_test(test_placeholder_env),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
