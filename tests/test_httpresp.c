/* Unit tests for egressd/httpresp: the upstream response head parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "egressd/httpresp.h"

static enum httpresp_result
parse(const char *s, struct httpresp *r)
{
	return httpresp_parse(s, strlen(s), 0, r);
}

static void
test_ok_connect_reply(void **state)
{
	struct httpresp r;
	const char *s = "HTTP/1.1 200 Connection established\r\nVia: 1.1 squid\r\n\r\nTUNNELDATA";

	assert_int_equal(parse(s, &r), HTTPRESP_OK);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.minor, 1);
	assert_int_equal(r.nheaders, 1);
	assert_int_equal(r.head_len, strlen(s) - strlen("TUNNELDATA"));
	assert_int_equal(httpresp_find(&r, "via", 0), 0);
	assert_int_equal(httpresp_find(&r, "Via", 1), -1);
}

static void
test_407_schemes(void **state)
{
	struct httpresp r;
	const char *s = "HTTP/1.0 407 Proxy Authentication Required\r\n"
	    "Proxy-Authenticate: Negotiate\r\nProxy-Authenticate: Basic realm=\"corp\"\r\n"
	    "Content-Length: 0\r\n\r\n";
	long i;

	assert_int_equal(parse(s, &r), HTTPRESP_OK);
	assert_int_equal(r.status, 407);
	assert_int_equal(r.minor, 0);
	i = httpresp_find(&r, "proxy-authenticate", 1);
	assert_true(i >= 0);
	assert_int_equal(r.headers[i].value_len, strlen("Basic realm=\"corp\""));
}

static void
test_no_phrase(void **state)
{
	struct httpresp r;

	assert_int_equal(parse("HTTP/1.1 204\r\n\r\n", &r), HTTPRESP_OK);
	assert_int_equal(r.status, 204);
	assert_int_equal(r.phrase_len, 0);
}

static void
test_incomplete(void **state)
{
	struct httpresp r;

	assert_int_equal(parse("HTTP/1.1 200 OK\r\nA: b\r\n", &r), HTTPRESP_INCOMPLETE);
	assert_int_equal(parse("HTTP/1.", &r), HTTPRESP_INCOMPLETE);
	assert_int_equal(parse("HTT", &r), HTTPRESP_INCOMPLETE);
	assert_int_equal(parse("", &r), HTTPRESP_INCOMPLETE);
}

static void
test_invalid(void **state)
{
	struct httpresp r;
	static const char *bad[] = {
		"HTTP/2.0 200 OK\r\n\r\n",
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 099 OK\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"HTTP/1.1 600 Nope\r\n\r\n",          /* status past 599 */
		"HTTP/1.1 999 Nope\r\n\r\n",
		"HTTP/1.1  200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\n\r\n",              /* bare LF */
		"HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n",   /* bare CR */
		"HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", /* obs-fold */
		"HTTP/1.1 200 OK\r\nA b: c\r\n\r\n",     /* space in name */
		"HTTP/1.1 200 OK\r\nA : c\r\n\r\n",      /* space before colon */
		"HTTP/1.1 200 OK\r\n: c\r\n\r\n",        /* empty name */
		"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
		"HTTP/1.1 200 O\x01K\r\n\r\n",           /* control in phrase */
		"HTTP/1.1 200 OK\r\nA: \x7f\r\n\r\n",    /* DEL in value */
		"SSH-2.0-OpenSSH\r\n\r\n",
		"GARBAGE",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum httpresp_result res = parse(bad[i], &r);
		if (res != HTTPRESP_INVALID)
			fail_msg("case %zu accepted (%d): %s", i, res, bad[i]);
	}
	/* embedded NUL */
	assert_int_equal(httpresp_parse("HTTP/1.1 200 O\0K\r\n\r\n", 19, 0, &r), HTTPRESP_INVALID);
}

static void
test_limits(void **state)
{
	struct httpresp r;
	char big[300];
	char many[EGRESS_HEADER_COUNT_MAX * 6 + 64];
	size_t n = 0;

	memset(big, 'a', sizeof(big));
	memcpy(big, "HTTP/1.1 200 ", 13);
	assert_int_equal(httpresp_parse(big, sizeof(big), 100, &r), HTTPRESP_TOO_LARGE);

	n += (size_t)snprintf(many, sizeof(many), "HTTP/1.1 200 OK\r\n");
	for (int i = 0; i <= EGRESS_HEADER_COUNT_MAX; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "A: b\r\n");
	n += (size_t)snprintf(many + n, sizeof(many) - n, "\r\n");
	assert_int_equal(httpresp_parse(many, n, 0, &r), HTTPRESP_TOO_LARGE);
}

static void
test_token_list(void **state)
{
	const char *v = "keep-alive, Upgrade ,  close";

	assert_true(httpresp_value_has_token(v, strlen(v), "upgrade"));
	assert_true(httpresp_value_has_token(v, strlen(v), "close"));
	assert_false(httpresp_value_has_token(v, strlen(v), "keep"));
	assert_false(httpresp_value_has_token("", 0, "close"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ok_connect_reply),
		cmocka_unit_test(test_407_schemes),
		cmocka_unit_test(test_no_phrase),
		cmocka_unit_test(test_incomplete),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_token_list),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
