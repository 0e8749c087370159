/* test_control.c - the control-protocol request decoder (egressd/control). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <netinet/in.h>

#include "egressd/control.h"

#define GRANT_OK "{\"principal\":\"run-7f3a\",\"allow\":[\"https://api.example.com\"]," \
	"\"limits\":{\"connections\":4,\"bytes\":0,\"lifetime_s\":900}}"

static struct control_req r;
static const char *code;
static char msg[512];

static int
dec(const char *s)
{
	return control_decode(s, strlen(s), &r, &code, msg, sizeof(msg));
}

static void
expect_code(const char *s, const char *want)
{
	int rc = dec(s);
	if (rc == 0)
		fail_msg("expected %s for %s", want, s);
	if (strcmp(code, want) != 0)
		fail_msg("expected %s for %s, got %s (%s)", want, s, code, msg);
	assert_null(r.grant);
	control_req_clear(&r);
}

static void
test_create_ok(void **st)
{
	assert_int_equal(dec("{\"op\":\"grant.create\",\"id\":7,\"grant\":" GRANT_OK
	    ",\"listen\":\"169.254.77.1:3128\",\"interface\":\"eg7f3a-h\"}"), 0);
	assert_int_equal(r.op, CTL_GRANT_CREATE);
	assert_non_null(r.grant);
	assert_string_equal(r.grant->principal, "run-7f3a");
	assert_int_equal(r.grant->lifetime_s, 900);
	assert_string_equal(r.ifname, "eg7f3a-h");
	assert_int_equal(r.listen.ss_family, AF_INET);
	assert_int_equal(ntohs(((struct sockaddr_in *)&r.listen)->sin_port), 3128);
	assert_true(json_is_integer(r.id));
	control_req_clear(&r);
	/* port 0: egressd picks one */
	assert_int_equal(dec("{\"op\":\"grant.create\",\"grant\":" GRANT_OK
	    ",\"listen\":\"169.254.77.1:0\",\"interface\":\"lo\"}"), 0);
	assert_false(r.listen_fd);
	control_req_clear(&r);
	/* a passed listener: no address, the device for the records */
	assert_int_equal(dec("{\"op\":\"grant.create\",\"grant\":" GRANT_OK
	    ",\"listen_fd\":true,\"interface\":\"egx1a2b3c4dh\"}"), 0);
	assert_true(r.listen_fd);
	assert_int_equal(r.listenlen, 0);
	assert_string_equal(r.ifname, "egx1a2b3c4dh");
	control_req_clear(&r);
}

static void
test_other_ops(void **st)
{
	assert_int_equal(dec("{\"op\":\"grant.revoke\",\"grant_id\":"
	    "\"0123456789abcdef0123456789abcdef\"}"), 0);
	assert_int_equal(r.op, CTL_GRANT_REVOKE);
	assert_string_equal(r.grant_id, "0123456789abcdef0123456789abcdef");
	control_req_clear(&r);
	assert_int_equal(dec("{\"op\":\"grant.unrevoke\",\"grant_id\":"
	    "\"0123456789abcdef0123456789abcdef\"}"), 0);
	assert_int_equal(r.op, CTL_GRANT_UNREVOKE);
	assert_string_equal(r.grant_id, "0123456789abcdef0123456789abcdef");
	control_req_clear(&r);
	/* grant.dns: the stub resolver socket comes with the request */
	assert_int_equal(dec("{\"op\":\"grant.dns\",\"grant_id\":"
	    "\"0123456789abcdef0123456789abcdef\",\"dns_fd\":true}"), 0);
	assert_int_equal(r.op, CTL_GRANT_DNS);
	assert_string_equal(r.grant_id, "0123456789abcdef0123456789abcdef");
	control_req_clear(&r);
	expect_code("{\"op\":\"grant.dns\",\"grant_id\":"
	    "\"0123456789abcdef0123456789abcdef\"}", "malformed");
	expect_code("{\"op\":\"grant.dns\",\"grant_id\":"
	    "\"0123456789abcdef0123456789abcdef\",\"dns_fd\":false}", "malformed");
	expect_code("{\"op\":\"grant.dns\",\"grant_id\":\"abc\",\"dns_fd\":true}",
	    "malformed");
	expect_code("{\"op\":\"grant.dns\",\"grant_id\":"
	    "\"0123456789abcdef0123456789abcdef\",\"dns_fd\":true,\"listen\":\"x\"}",
	    "unknown_key");
	assert_int_equal(dec("{\"op\":\"grant.list\",\"id\":\"x\"}"), 0);
	assert_int_equal(r.op, CTL_GRANT_LIST);
	assert_string_equal(json_string_value(r.id), "x");
	control_req_clear(&r);
	assert_int_equal(dec("{\"op\":\"status\"}"), 0);
	assert_int_equal(r.op, CTL_STATUS);
	control_req_clear(&r);
	assert_int_equal(dec("{\"op\":\"reload\",\"id\":null}"), 0);
	assert_int_equal(r.op, CTL_RELOAD);
	control_req_clear(&r);
}

static void
test_refusals(void **st)
{
	expect_code("", "malformed");
	expect_code("not json", "malformed");
	expect_code("[1,2]", "malformed");
	expect_code("\"status\"", "malformed");
	expect_code("{\"op\":\"status\"} trailing", "malformed");
	expect_code("{\"op\":5}", "malformed");
	expect_code("{\"id\":1}", "malformed");
	expect_code("{\"op\":\"status\",\"id\":{\"a\":1}}", "malformed");
	expect_code("{\"op\":\"status\",\"op\":\"reload\"}", "malformed");   /* duplicate key */
	expect_code("{\"op\":\"grant.delete\"}", "unknown_op");
	expect_code("{\"op\":\"status\",\"verbose\":true}", "unknown_key");
	expect_code("{\"op\":\"grant.list\",\"grant_id\":\"00\"}", "unknown_key");
	/* grant.create */
	expect_code("{\"op\":\"grant.create\",\"grant\":" GRANT_OK ",\"listen\":\"169.254.77.1:3128\"}",
	    "malformed");                                    /* interface missing */
	expect_code("{\"op\":\"grant.create\",\"grant\":" GRANT_OK ",\"listen\":\"169.254.77.1:3128\","
	    "\"interface\":\"\"}", "malformed");
	expect_code("{\"op\":\"grant.create\",\"grant\":" GRANT_OK ",\"listen\":\"169.254.77.1:3128\","
	    "\"interface\":\"a-very-long-interface-name\"}", "malformed");
	expect_code("{\"op\":\"grant.create\",\"grant\":" GRANT_OK ",\"listen\":\"169.254.77.1:3128\","
	    "\"interface\":\"a b\"}", "malformed");
	expect_code("{\"op\":\"grant.create\",\"grant\":" GRANT_OK ",\"listen\":\"host:3128\","
	    "\"interface\":\"eth0\"}", "malformed");
	expect_code("{\"op\":\"grant.create\",\"grant\":" GRANT_OK ",\"listen\":3128,"
	    "\"interface\":\"eth0\"}", "malformed");
	expect_code("{\"op\":\"grant.create\",\"grant\":" GRANT_OK ",\"interface\":\"eth0\"}",
	    "malformed");
	/* listen_fd: only true, never with listen, still with an interface */
	expect_code("{\"op\":\"grant.create\",\"grant\":" GRANT_OK ",\"listen_fd\":false,"
	    "\"interface\":\"eth0\"}", "malformed");
	expect_code("{\"op\":\"grant.create\",\"grant\":" GRANT_OK ",\"listen_fd\":1,"
	    "\"interface\":\"eth0\"}", "malformed");
	expect_code("{\"op\":\"grant.create\",\"grant\":" GRANT_OK ",\"listen_fd\":true,"
	    "\"listen\":\"169.254.77.1:3128\",\"interface\":\"eth0\"}", "malformed");
	expect_code("{\"op\":\"grant.create\",\"grant\":" GRANT_OK ",\"listen_fd\":true}",
	    "malformed");
	expect_code("{\"op\":\"status\",\"listen_fd\":true}", "unknown_key");
	expect_code("{\"op\":\"grant.create\",\"grant\":\"x\",\"listen\":\"169.254.77.1:3128\","
	    "\"interface\":\"eth0\"}", "invalid_grant");
	expect_code("{\"op\":\"grant.create\",\"grant\":{\"principal\":\"r\",\"allow\":"
	    "[\"https://*.com\"],\"limits\":{\"lifetime_s\":5}},\"listen\":\"169.254.77.1:3128\","
	    "\"interface\":\"eth0\"}", "invalid_grant");
	expect_code("{\"op\":\"grant.create\",\"grant\":{\"principal\":\"r\",\"allow\":"
	    "[\"https://a.example\"],\"limits\":{\"lifetime_s\":0}},\"listen\":\"169.254.77.1:3128\","
	    "\"interface\":\"eth0\"}", "invalid_grant");     /* dynamic grants must expire */
	expect_code("{\"op\":\"grant.create\",\"grant\":{\"principal\":\"r\",\"allow\":"
	    "[\"https://a.example\"]},\"listen\":\"169.254.77.1:3128\","
	    "\"interface\":\"eth0\"}", "invalid_grant");     /* no lifetime at all */
	expect_code("{\"op\":\"grant.create\",\"grant\":" GRANT_OK ",\"listen\":\"169.254.77.1:3128\","
	    "\"interface\":\"eth0\",\"principal\":\"other\"}", "unknown_key");
	/* grant.revoke */
	expect_code("{\"op\":\"grant.revoke\"}", "malformed");
	expect_code("{\"op\":\"grant.revoke\",\"grant_id\":\"abc\"}", "malformed");
	expect_code("{\"op\":\"grant.revoke\",\"grant_id\":\"0123456789ABCDEF0123456789ABCDEF\"}",
	    "malformed");
	expect_code("{\"op\":\"grant.revoke\",\"grant_id\":1}", "malformed");
	expect_code("{\"op\":\"grant.unrevoke\"}", "malformed");
	expect_code("{\"op\":\"grant.unrevoke\",\"grant_id\":\"abc\"}", "malformed");
	expect_code("{\"op\":\"grant.unrevoke\",\"grant_id\":"
	    "\"0123456789abcdef0123456789abcdef\",\"x\":1}", "unknown_key");
}

static void
test_id_echo_on_error(void **st)
{
	json_t *e;

	assert_int_not_equal(dec("{\"op\":\"nope\",\"id\":42}"), 0);
	assert_non_null(r.id);
	e = control_error(r.id, code, msg);
	assert_false(json_is_true(json_object_get(e, "ok")));
	assert_int_equal(json_integer_value(json_object_get(e, "id")), 42);
	assert_string_equal(json_string_value(json_object_get(e, "error")), "unknown_op");
	json_decref(e);
	control_req_clear(&r);
}

static void
test_too_long(void **st)
{
	size_t n = EGRESS_CONTROL_LINE_MAX + 10;
	char *b = malloc(n + 1);

	assert_non_null(b);
	memset(b, ' ', n);
	memcpy(b, "{\"op\":\"status\"}", 15);
	b[n] = '\0';
	assert_int_not_equal(control_decode(b, n, &r, &code, msg, sizeof(msg)), 0);
	assert_string_equal(code, "malformed");
	control_req_clear(&r);
	free(b);
}

/* A run CA travels with a grant that names a connection, and only then. */
static void
test_intercept_ca(void **state)
{
#define GRANT_CONN "{\"principal\":\"run-7f3a\",\"allow\":[\"https://api.example.com\"]," \
	"\"connection\":\"m\",\"limits\":{\"connections\":4,\"bytes\":0,\"lifetime_s\":900}}"
	assert_int_equal(dec("{\"op\":\"grant.create\",\"listen\":\"127.0.0.1:0\","
	    "\"interface\":\"lo\",\"grant\":" GRANT_CONN ",\"intercept_ca\":{\"cert\":\"C\","
	    "\"key\":\"K\"}}"), 0);
	assert_string_equal(r.ca_cert, "C");
	assert_string_equal(r.ca_key, "K");
	assert_string_equal(r.grant->connection, "m");
	control_req_clear(&r);
	assert_null(r.ca_key);
	expect_code("{\"op\":\"grant.create\",\"listen\":\"127.0.0.1:0\",\"interface\":\"lo\","
	    "\"grant\":" GRANT_OK ",\"intercept_ca\":{\"cert\":\"C\",\"key\":\"K\"}}",
	    "malformed");
	expect_code("{\"op\":\"grant.create\",\"listen\":\"127.0.0.1:0\",\"interface\":\"lo\","
	    "\"grant\":" GRANT_CONN ",\"intercept_ca\":{\"cert\":\"C\"}}", "malformed");
	expect_code("{\"op\":\"grant.create\",\"listen\":\"127.0.0.1:0\",\"interface\":\"lo\","
	    "\"grant\":" GRANT_CONN ",\"intercept_ca\":{\"cert\":\"C\",\"key\":1}}",
	    "malformed");
	assert_int_equal(dec("{\"op\":\"grant.create\",\"listen\":\"127.0.0.1:0\","
	    "\"interface\":\"lo\",\"grant\":" GRANT_CONN ",\"credential_placeholder\":"
	    "\"egress-placeholder-0123456789abcdef\"}"), 0);
	assert_string_equal(r.placeholder, "egress-placeholder-0123456789abcdef");
	control_req_clear(&r);
	expect_code("{\"op\":\"grant.create\",\"listen\":\"127.0.0.1:0\",\"interface\":\"lo\","
	    "\"grant\":" GRANT_CONN ",\"credential_placeholder\":\"short\"}", "malformed");
	expect_code("{\"op\":\"grant.create\",\"listen\":\"127.0.0.1:0\",\"interface\":\"lo\","
	    "\"grant\":" GRANT_CONN ",\"credential_placeholder\":\"has space in it 0123\"}",
	    "malformed");
	expect_code("{\"op\":\"grant.create\",\"listen\":\"127.0.0.1:0\",\"interface\":\"lo\","
	    "\"grant\":" GRANT_OK ",\"credential_placeholder\":\"egress-placeholder-0123456789\"}",
	    "malformed");
#undef GRANT_CONN
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_ok),
		cmocka_unit_test(test_other_ops),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_id_echo_on_error),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_intercept_ca),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
