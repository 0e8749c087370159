/* Unit tests for egressd/socks5: the SOCKS5 client codec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "egressd/socks5.h"

static void
test_greeting_and_method(void **state)
{
	uint8_t b[8];
	uint8_t m = 0xee;

	assert_int_equal(socks5_greeting(false, b, sizeof(b)), 3);
	assert_memory_equal(b, "\x05\x01\x00", 3);
	assert_int_equal(socks5_greeting(true, b, sizeof(b)), 4);
	assert_memory_equal(b, "\x05\x02\x00\x02", 4);

	assert_int_equal(socks5_parse_method((const uint8_t *)"\x05", 1, false, &m), 0);
	assert_int_equal(socks5_parse_method((const uint8_t *)"\x05\x00", 2, false, &m), 2);
	assert_int_equal(m, SOCKS5_METHOD_NONE);
	/* userpass chosen although we did not offer it: violation */
	assert_int_equal(socks5_parse_method((const uint8_t *)"\x05\x02", 2, false, &m), -1);
	assert_int_equal(socks5_parse_method((const uint8_t *)"\x05\x02", 2, true, &m), 2);
	assert_int_equal(socks5_parse_method((const uint8_t *)"\x05\xff", 2, true, &m), 2);
	assert_int_equal(m, SOCKS5_METHOD_REFUSED);
	assert_int_equal(socks5_parse_method((const uint8_t *)"\x04\x00", 2, true, &m), -1);
	assert_int_equal(socks5_parse_method((const uint8_t *)"\x05\x01", 2, true, &m), -1);
}

static void
test_userpass(void **state)
{
	uint8_t b[600];
	char longu[300];

	assert_int_equal(socks5_userpass("u", "pw", b, sizeof(b)), 6);
	assert_memory_equal(b, "\x01\x01u\x02pw", 6);
	memset(longu, 'x', sizeof(longu) - 1);
	longu[sizeof(longu) - 1] = '\0';
	assert_int_equal(socks5_userpass(longu, "pw", b, sizeof(b)), 0);
	assert_int_equal(socks5_userpass("", "pw", b, sizeof(b)), 0);
	assert_int_equal(socks5_parse_userpass((const uint8_t *)"\x01\x00", 2), 1);
	assert_int_equal(socks5_parse_userpass((const uint8_t *)"\x01\x01", 2), -1);
	assert_int_equal(socks5_parse_userpass((const uint8_t *)"\x01", 1), 0);
}

static void
test_connect_requests(void **state)
{
	uint8_t b[300];
	struct addr a = { .family = AF_INET };
	struct addr a6 = { .family = AF_INET6 };

	assert_int_equal(socks5_connect_name("example.com", 443, b, sizeof(b)), 7 + 11);
	assert_memory_equal(b, "\x05\x01\x00\x03\x0b" "example.com\x01\xbb", 18);
	inet_pton(AF_INET, "198.51.100.7", &a.u.v4);
	assert_int_equal(socks5_connect_addr(&a, 80, b, sizeof(b)), 10);
	assert_memory_equal(b, "\x05\x01\x00\x01\xc6\x33\x64\x07\x00\x50", 10);
	inet_pton(AF_INET6, "2001:db8::1", &a6.u.v6);
	assert_int_equal(socks5_connect_addr(&a6, 443, b, sizeof(b)), 22);
	assert_int_equal(b[3], 4);
	assert_int_equal(socks5_connect_name("example.com", 443, b, 10), 0);
}

static void
test_connect_replies(void **state)
{
	enum reason r;
	struct addr bound;
	const uint8_t ok4[] = { 5, 0, 0, 1, 10, 0, 0, 1, 0x1f, 0x90, 'X' };
	const uint8_t okname[] = { 5, 0, 0, 3, 3, 'a', 'b', 'c', 0, 80 };

	assert_int_equal(socks5_parse_connect(ok4, 5, &r, &bound), 0);
	assert_int_equal(socks5_parse_connect(ok4, sizeof(ok4), &r, &bound), 10);
	assert_int_equal(r, REASON_ALLOWED);
	assert_int_equal(bound.family, AF_INET);
	assert_int_equal(socks5_parse_connect(okname, sizeof(okname), &r, NULL), 10);
	assert_int_equal(socks5_parse_connect(okname, 9, &r, NULL), 0);

	for (uint8_t code = 1; code <= 8; code++) {
		const uint8_t fail[] = { 5, code };
		assert_int_equal(socks5_parse_connect(fail, 2, &r, NULL), -1);
		assert_int_equal(r, socks5_reply_reason(code));
		assert_int_not_equal(r, REASON_PROXY_BAD_RESPONSE);
	}
	{
		const uint8_t weird[] = { 5, 9 };
		const uint8_t badver[] = { 4, 0, 0, 1 };
		const uint8_t badrsv[] = { 5, 0, 1, 1 };
		const uint8_t badatyp[] = { 5, 0, 0, 9 };
		const uint8_t zeroname[] = { 5, 0, 0, 3, 0, 0, 80 };
		assert_int_equal(socks5_parse_connect(weird, 2, &r, NULL), -1);
		assert_int_equal(r, REASON_PROXY_BAD_RESPONSE);
		assert_int_equal(socks5_parse_connect(badver, 4, &r, NULL), -1);
		assert_int_equal(socks5_parse_connect(badrsv, 4, &r, NULL), -1);
		assert_int_equal(socks5_parse_connect(badatyp, 4, &r, NULL), -1);
		assert_int_equal(socks5_parse_connect(zeroname, 7, &r, NULL), -1);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_greeting_and_method),
		cmocka_unit_test(test_userpass),
		cmocka_unit_test(test_connect_requests),
		cmocka_unit_test(test_connect_replies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
