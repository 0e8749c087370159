/* test_hostroute.c - the private egressd's route and authentication plan from a caller's
 * environment, and the credentials file it writes (executor/hostroute). */
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

#include "executor/hostroute.h"

static void
test_parse_proxy(void **state)
{
	struct hostroute h;

	(void)state;
	memset(&h, 0, sizeof(h));
	assert_int_equal(hostroute_parse_proxy("http://alice:p%40ss%3Bw@Proxy.Corp.Example:3128/",
	    &h), 0);
	assert_string_equal(h.proxy, "proxy.corp.example:3128");
	assert_string_equal(h.user, "alice");
	assert_string_equal(h.pass, "p@ss;w");
	assert_null(strstr(h.shown, "p%40ss"));
	assert_non_null(strstr(h.shown, "***@"));
	assert_false(h.by_address);

	memset(&h, 0, sizeof(h));
	assert_int_equal(hostroute_parse_proxy("http://proxy.corp.example", &h), 0);
	assert_string_equal(h.proxy, "proxy.corp.example:80");
	assert_string_equal(h.user, "");
	memset(&h, 0, sizeof(h));
	assert_int_equal(hostroute_parse_proxy("10.1.2.3:8080", &h), 0);
	assert_string_equal(h.proxy, "10.1.2.3:8080");
	assert_true(h.by_address);
	memset(&h, 0, sizeof(h));
	assert_int_equal(hostroute_parse_proxy("pac+http://wpad.corp.example/p.pac", &h), 0);
	assert_true(h.pac);
	assert_string_equal(h.proxy, "");
	memset(&h, 0, sizeof(h));
	assert_int_equal(hostroute_parse_proxy("wpad://", &h), 0);
	assert_true(h.pac);

	/* refused: other schemes, INI-breaking user names, bad escapes, control bytes */
	assert_int_equal(hostroute_parse_proxy("socks5://proxy:1080", &h), -1);
	assert_int_equal(hostroute_parse_proxy("http://a=b:pw@proxy:3128", &h), -1);
	assert_int_equal(hostroute_parse_proxy("http://a:p%zz@proxy:3128", &h), -1);
	assert_int_equal(hostroute_parse_proxy("http://a:p%0aX@proxy:3128", &h), -1);
	assert_int_equal(hostroute_parse_proxy("http://a:pw%@proxy:3128", &h), -1);
	assert_int_equal(hostroute_parse_proxy("http://nopassword@proxy:3128", &h), -1);
	assert_int_equal(hostroute_parse_proxy("http://proxy:99999", &h), -1);
	assert_string_equal(h.pass, "");
}

static void
test_plan(void **state)
{
	char cc[] = "/tmp/egx-hostroute-cc-XXXXXX";
	char ccenv[64];
	struct hostroute h;
	int fd = mkstemp(cc);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	snprintf(ccenv, sizeof(ccenv), "KRB5CCNAME=FILE:%s", cc);
	{
		char *env[] = { "PATH=/bin", "https_proxy=http://bob:secret@proxy.corp.example:8080",
			"EGRESS_PROXY_CREDENTIALS=/nonexistent/file", ccenv, NULL };
		hostroute_plan(env, &h);
		assert_string_equal(h.var, "https_proxy");
		assert_string_equal(h.scheme, "basic");
		assert_string_equal(h.operator_file, "");
		assert_string_equal(h.ccache, cc);
		hostroute_clear(&h);
		assert_string_equal(h.pass, "");
	}
	{
		/* no userinfo: the person's Kerberos cache */
		char *env[] = { "HTTPS_PROXY=http://proxy.corp.example:8080", ccenv,
			"EGRESS_PROXY_CREDENTIALS=/nonexistent/file", NULL };
		hostroute_plan(env, &h);
		assert_string_equal(h.scheme, "negotiate");
		assert_string_equal(h.ccache_from, "KRB5CCNAME");
	}
	{
		/* a proxy by address cannot do Negotiate; EGRESS_PROXY_AUTH=none turns it off */
		char *env[] = { "http_proxy=http://10.0.0.8:8080", ccenv,
			"EGRESS_PROXY_CREDENTIALS=/nonexistent/file", NULL };
		hostroute_plan(env, &h);
		assert_string_equal(h.scheme, "");
		char *env2[] = { "http_proxy=http://proxy.corp.example:8080", ccenv,
			"EGRESS_PROXY_AUTH=none", "EGRESS_PROXY_CREDENTIALS=/nonexistent/file", NULL };
		hostroute_plan(env2, &h);
		assert_string_equal(h.scheme, "");
		assert_true(h.auth_off);
	}
	{
		/* a set but unreadable variable (libproxy would go direct): named, never
		 * skipped, whichever of the variables it is */
		char *env[] = { "https_proxy= wpad://", "EGRESS_PROXY_CREDENTIALS=/x/y", NULL };
		hostroute_plan(env, &h);
		assert_non_null(strstr(h.bad, "https_proxy"));
		assert_non_null(strstr(h.bad, "whitespace"));
		char *env2[] = { "https_proxy=http://proxy.corp.example:8080", "ALL_PROXY=:3128",
			"EGRESS_PROXY_CREDENTIALS=/x/y", NULL };
		hostroute_plan(env2, &h);
		assert_non_null(strstr(h.bad, "ALL_PROXY"));
		char *env3[] = { "https_proxy=http://proxy.corp.example:8080", "no_proxy=*",
			"EGRESS_PROXY_CREDENTIALS=/x/y", NULL };
		hostroute_plan(env3, &h);
		assert_string_equal(h.bad, "");
	}
	{
		/* a keyring cache cannot be handed over; the plan says why */
		char *env[] = { "https_proxy=http://proxy.corp.example:8080",
			"KRB5CCNAME=KEYRING:persistent:1000", "EGRESS_PROXY_CREDENTIALS=/x/y", NULL };
		hostroute_plan(env, &h);
		assert_string_equal(h.ccache, "");
		assert_non_null(strstr(h.ccache_why, "FILE:"));
		assert_string_equal(h.scheme, "");
	}
	{
		char *env[] = { "LANG=C", "EGRESS_PROXY_CREDENTIALS=/x/y", NULL };
		hostroute_plan(env, &h);
		assert_string_equal(h.var, "");
		assert_string_equal(h.scheme, "");
	}
	unlink(cc);
}

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[4096];
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void
test_write(void **state)
{
	char dir[] = "/tmp/egx-hostroute-XXXXXX";
	char path[256], op[256], pw[300], err[256], envop[300];
	struct hostroute h;
	struct stat st;
	FILE *f;
	char *t;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/creds.ini", dir);
	snprintf(op, sizeof(op), "%s/operator.ini", dir);
	snprintf(pw, sizeof(pw), "%s.password", path);
	snprintf(envop, sizeof(envop), "EGRESS_PROXY_CREDENTIALS=%s", op);

	/* nothing to write */
	{
		char *env[] = { "EGRESS_PROXY_CREDENTIALS=/x/y", NULL };
		hostroute_plan(env, &h);
		assert_int_equal(hostroute_write_credentials(&h, path, err, sizeof(err)), 0);
		assert_int_not_equal(access(path, F_OK), 0);
	}
	/* the caller's user:password: the password goes to its own file */
	{
		char *env[] = { "https_proxy=http://carol:s%20e;c@proxy.corp.example:3128",
			"EGRESS_PROXY_CREDENTIALS=/x/y", NULL };
		hostroute_plan(env, &h);
		assert_int_equal(hostroute_write_credentials(&h, path, err, sizeof(err)), 1);
		hostroute_clear(&h);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
		t = slurp(path);
		assert_non_null(strstr(t, "[proxy proxy.corp.example:3128]"));
		assert_non_null(strstr(t, "username = carol"));
		assert_null(strstr(t, "s e;c"));
		assert_string_equal(slurp(pw), "s e;c");
		unlink(path);
		unlink(pw);
	}
	/* the operator's file, root-only, with an entry for that proxy: used as is */
	if (geteuid() == 0) {
		f = fopen(op, "w");
		assert_non_null(f);
		fputs("[proxy proxy.corp.example:3128]\nscheme = basic\nusername = svc\n"
		    "password = opw\n", f);
		fclose(f);
		chmod(op, 0600);
		char *env[] = { "https_proxy=http://carol:x@proxy.corp.example:3128", envop, NULL };
		hostroute_plan(env, &h);
		assert_true(h.operator_has_proxy);
		assert_string_equal(h.scheme, "operator file");
		assert_int_equal(hostroute_write_credentials(&h, path, err, sizeof(err)), 1);
		t = slurp(path);
		assert_non_null(strstr(t, "username = svc"));
		assert_null(strstr(t, "carol"));
		unlink(path);
		/* a group-readable operator file is ignored, with a reason */
		chmod(op, 0640);
		hostroute_plan(env, &h);
		assert_string_equal(h.operator_file, "");
		assert_non_null(strstr(h.operator_why, "0600"));
		unlink(op);
	}
	rmdir(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_proxy),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_write),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
