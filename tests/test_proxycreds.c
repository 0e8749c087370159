/* Unit tests for egressd/proxycreds: the root-only upstream proxy credentials file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tmpdir.h"
#include "egressd/proxycreds.h"

static void
test_load_and_find(void **state)
{
	char err[512];
	const char *p = tmpdir_put("ok.ini",
	    "[proxy Proxy.Corp.Example:3128]\nscheme = basic\nusername = alice\npassword = s3cret\n"
	    "[proxy 10.1.2.3:8080]\nscheme = negotiate\nkeytab = /etc/egressd/k.keytab\n", 0600);
	struct proxycreds *c = proxycreds_load(p, getuid() == 0, err, sizeof(err));
	struct host h;
	const struct proxycred *pc;
	char hdr[128];

	assert_non_null(c);
	assert_int_equal(c->n, 2);
	assert_int_equal(host_parse("proxy.corp.example:3128", 23, HOST_REQUIRE_PORT, &h), HOST_OK);
	pc = proxycreds_find(c, &h);
	assert_non_null(pc);
	assert_int_equal(pc->scheme, PROXY_AUTH_BASIC);
	assert_true(proxycreds_basic_header(pc, hdr, sizeof(hdr)) > 0);
	assert_string_equal(hdr, "Basic YWxpY2U6czNjcmV0");   /* base64("alice:s3cret") */
	assert_int_equal(proxycreds_basic_header(pc, hdr, 10), 0);
	h.port = 3129;
	assert_null(proxycreds_find(c, &h));
	assert_int_equal(host_parse("10.1.2.3:8080", 13, HOST_REQUIRE_PORT, &h), HOST_OK);
	pc = proxycreds_find(c, &h);
	assert_non_null(pc);
	assert_int_equal(pc->scheme, PROXY_AUTH_NEGOTIATE);
	assert_string_equal(pc->keytab, "/etc/egressd/k.keytab");
	proxycreds_free(c);
}

static void
test_password_file(void **state)
{
	char err[512], text[512];
	const char *pw = tmpdir_put("pw", "hunter2\n", 0600);
	struct proxycreds *c;

	snprintf(text, sizeof(text), "[proxy proxy.corp.example:3128]\nscheme = basic\n"
	    "username = bob\npassword_file = %s\n", pw);
	c = proxycreds_load(tmpdir_put("pwf.ini", text, 0600), getuid() == 0, err, sizeof(err));
	assert_non_null(c);
	assert_string_equal(c->v[0].password, "hunter2");
	proxycreds_free(c);
}

static void
test_refusals(void **state)
{
	char err[512];
	static const char *bad[] = {
		"[proxy proxy.corp.example]\nscheme = basic\nusername = a\npassword = b\n", /* no port */
		"[proxy p.example:1]\nscheme = digest\n",
		"[proxy p.example:1]\nscheme = basic\nusername = a\n",            /* no password */
		"[proxy p.example:1]\nscheme = basic\nusername = a:b\npassword = c\n",
		"[proxy p.example:1]\nscheme = basic\nusername = a\npassword = b\nrealm = x\n",
		("[proxy p.example:1]\nscheme = negotiate\n[proxy p.example:1]\nscheme = basic\n"
		 "username = a\npassword = b\n"),
		"[other]\nscheme = basic\n",
		"scheme = basic\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct proxycreds *c = proxycreds_load(tmpdir_put("bad.ini", bad[i], 0600), 0, err, sizeof(err));
		if (c != NULL)
			fail_msg("accepted case %zu", i);
		assert_null(strstr(err, "password = "));
	}
	/* the refusal never quotes a secret */
	assert_null(proxycreds_load(tmpdir_put("bad2.ini",
	    "[proxy p.example:1]\nscheme = basic\nusername = a\npassword = TOPSECRET\nbogus = 1\n", 0600),
	    0, err, sizeof(err)));
	assert_null(strstr(err, "TOPSECRET"));
}

static void
test_mode_and_owner(void **state)
{
	char err[512];
	const char *p = tmpdir_put("loose.ini", "[proxy p.example:1]\nscheme = negotiate\n", 0644);

	if (getuid() != 0)
		skip();
	assert_null(proxycreds_load(p, 1, err, sizeof(err)));
	assert_non_null(strstr(err, "0600"));
	chmod(p, 0600);
	assert_non_null(strstr(p, "loose"));
	{
		struct proxycreds *c = proxycreds_load(p, 1, err, sizeof(err));
		assert_non_null(c);
		proxycreds_free(c);
	}
	/* a symlink is not followed */
	{
		char link[300];
		snprintf(link, sizeof(link), "%s/link.ini", tmpdir);
		assert_int_equal(symlink(p, link), 0);
		assert_null(proxycreds_load(link, 1, err, sizeof(err)));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_and_find),
		cmocka_unit_test(test_password_file),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_mode_and_owner),
	};
	return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
