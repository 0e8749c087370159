/* test_gitconfig.c - the repository config a worker sees (executor/gitconfig): every rule
 * of the documented list, and what must survive untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "executor/gitconfig.h"

static char *
clean(const char *in, unsigned *changed)
{
	char *out = NULL;
	size_t len = 0;
	unsigned ch = 0;

	assert_int_equal(gitconfig_sanitize(in, strlen(in), &out, &len, &ch), 0);
	assert_non_null(out);
	assert_int_equal(strlen(out), len);
	if (changed)
		*changed = ch;
	return out;
}

static void
test_checkout_leftovers(void **state)
{
	static const char in[] =
	    "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
	    "\tsshCommand = ssh -i /root/.ssh/deploy\n\tfsmonitor = /usr/bin/watcher\n"
	    "[remote \"origin\"]\n\turl = https://x-access-token:ghs_T0K3N@github.com/o/r.git\n"
	    "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
	    "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic c2VjcmV0\n"
	    "\tsslVerify = true\n"
	    "[http]\n\tcookieFile = /root/cookies\n\tproxy = http://u:p@proxy:3128\n"
	    "[credential]\n\thelper = store\n[credential \"https://github.com\"]\n\tusername = x\n"
	    "[include]\n\tpath = /root/.gitconfig\n[includeIf \"gitdir:/w/\"]\n\tpath = /x\n"
	    "[url \"https://u:pw@mirror.example/\"]\n\tinsteadOf = https://github.com/\n"
	    "[url \"https://mirror2.example/\"]\n\tinsteadOf = https://a:b@github.com/\n"
	    "\tpushInsteadOf = git@github.com:\n"
	    "[commit]\n\tgpgSign = true\n[tag]\n\tgpgsign = true\n"
	    "[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";
	unsigned changed;
	char *o;

	(void)state;
	o = clean(in, &changed);
	for (const char *bad = "ghs_T0K3N\0c2VjcmV0\0extraheader\0cookieFile\0u:p@\0"
	    "[credential\0helper\0[include\0/root/.gitconfig\0u:pw@\0a:b@\0gpgSign\0gpgsign\0"
	    "sshCommand\0fsmonitor\0"; *bad; bad += strlen(bad) + 1)
		if (strstr(o, bad) != NULL)
			fail_msg("kept %s:\n%s", bad, o);
	/* kept: the remote by URL without user information, everything harmless */
	assert_non_null(strstr(o, "url = https://github.com/o/r.git\n"));
	assert_non_null(strstr(o, "fetch = +refs/heads/*:refs/remotes/origin/*"));
	assert_non_null(strstr(o, "sslVerify = true"));
	assert_non_null(strstr(o, "[url \"https://mirror2.example/\"]"));
	assert_non_null(strstr(o, "pushInsteadOf = git@github.com:"));
	assert_non_null(strstr(o, "[branch \"main\"]\n\tremote = origin"));
	assert_non_null(strstr(o, "repositoryformatversion = 0"));
	/* a [user] for commits, since the file had none */
	assert_non_null(strstr(o, "email = worker@egress.invalid"));
	assert_true(changed >= 14);
	free(o);
}

static void
test_user_kept(void **state)
{
	char *o = clean("[user]\n\tname = Alice\n\temail = alice@example.com\n", NULL);

	(void)state;
	assert_non_null(strstr(o, "alice@example.com"));
	assert_null(strstr(o, "worker@egress.invalid"));
	free(o);
}

static void
test_tricky_syntax(void **state)
{
	unsigned changed;
	char *o;

	(void)state;
	/* a key on the header line; the legacy [section.sub] form; a comment with a token */
	o = clean("# cloned from https://u:secret@h/r\n[credential] helper = store\n"
	    "[http.example] extraHeader = X\n[core] bare = false\n", &changed);
	assert_null(strstr(o, "helper"));
	assert_null(strstr(o, "extraHeader"));
	assert_null(strstr(o, "secret"));
	assert_non_null(strstr(o, "# cloned from https://h/r"));
	assert_non_null(strstr(o, "[core]\nbare = false"));
	free(o);
	/* a continued value carrying a token is dropped whole; its continuation too */
	o = clean("[remote \"o\"]\n\turl = https://h/r \\\n  https://u:tok@h2/r\n"
	    "\tfetch = x\n", NULL);
	assert_null(strstr(o, "tok"));
	assert_null(strstr(o, "h2/r"));
	assert_non_null(strstr(o, "fetch = x"));
	free(o);
	/* a continued value whose next line reads as a header ("[include]") is dropped
	 * whole (found by fuzz_gitconfig): no reader can take the line for a section */
	o = clean("[core]\n\tnote = x \\\n[include]\n\tpath = /home/a/.secret\n"
	    "[ok]\n\tk = v\n", NULL);
	assert_null(strstr(o, "note"));
	assert_null(strstr(o, "[include]"));
	assert_non_null(strstr(o, "[ok]\n\tk = v\n"));
	free(o);
	/* header material anywhere, keys outside sections, garbage, NUL bytes */
	o = clean("stray = 1\n[core]\n\tnote = Authorization: Bearer abc\n\tweird/key = 1\n"
	    "[bad header\n\tk = v\n[ok]\n\tk = v\n", NULL);
	assert_null(strstr(o, "stray"));
	assert_null(strstr(o, "Bearer"));
	assert_null(strstr(o, "weird"));
	assert_non_null(strstr(o, "[ok]\n\tk = v\n"));
	free(o);
	{
		static const char nul[] = "[core]\n\ta = 1\0x\n\tb = 2\n";
		char *out;
		size_t len;
		unsigned ch;

		assert_int_equal(gitconfig_sanitize(nul, sizeof(nul) - 1, &out, &len, &ch), 0);
		assert_null(strstr(out, "a = 1"));
		assert_non_null(strstr(out, "b = 2"));
		free(out);
	}
}

static void
test_bounds(void **state)
{
	char *big = malloc(GITCONFIG_MAX + 2), *out = NULL;
	size_t len;
	unsigned ch;

	(void)state;
	assert_non_null(big);
	memset(big, '#', GITCONFIG_MAX + 1);
	assert_int_equal(gitconfig_sanitize(big, GITCONFIG_MAX + 1, &out, &len, &ch), -1);
	assert_null(out);
	free(big);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_checkout_leftovers),
		cmocka_unit_test(test_user_kept),
		cmocka_unit_test(test_tricky_syntax),
		cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
