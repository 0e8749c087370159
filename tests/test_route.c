/*
 * Unit tests for egressd/route: what a system route does when the route helper reports
 * that libproxy's own configuration asks for WPAD or a PAC of its own (ROUTEPROTO_ERR_WPAD,
 * docs/routing.md "WPAD"). The helper is a fake (a shell script speaking the line protocol);
 * the WPAD domain is a public suffix, so no candidate is asked and nothing touches the
 * network. Every loop is bounded by a loopexit timer.
 */
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

#include <event2/event.h>

#include "common/host.h"
#include "common/proxyurl.h"
#include "egressd/route.h"

static char dir[] = "/tmp/egress-route-XXXXXX";

struct outcome {
	int done;
	enum reason status;
	size_t n;
	char first[300];        /* entries[0] as the records write it: "direct", a URL */
	char source[16];
	bool from_cache;
};

static void
cb(const struct route_result *res, void *arg)
{
	struct outcome *o = arg;

	o->done++;
	o->status = res->status;
	o->n = res->n;
	if (res->n > 0)
		proxyurl_to_str(&res->entries[0], o->first, sizeof(o->first));
	snprintf(o->source, sizeof(o->source), "%s", res->source != NULL ? res->source : "");
	o->from_cache = res->from_cache;
}

static char *
script(const char *name, const char *body)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\n%s\n", body);
	fclose(f);
	chmod(path, 0755);
	return path;
}

/* Lines in dir/name (how often the fake helper was asked); 0 when missing. */
static int
lines(const char *name)
{
	char path[300], buf[256];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(buf, sizeof(buf), f) != NULL)
		n++;
	fclose(f);
	return n;
}

static void
run(struct event_base *base, struct outcome *o)
{
	for (int i = 0; i < 500 && !o->done; i++) {
		struct timeval tv = { 0, 10000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	{
		/* one more turn: events scheduled by the callback (the WPAD switch) */
		struct timeval tv = { 0, 20000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
}

static struct router *
mk(struct event_base *base, const char *helper)
{
	struct route_config c;
	char err[256], copy[300];
	struct router *r;

	memset(&c, 0, sizeof(c));
	snprintf(copy, sizeof(copy), "%s/pac.copy", dir);
	c.kind = ROUTE_KIND_SYSTEM;
	c.allow_direct = true;
	c.helper = (char *)(uintptr_t)helper;
	c.pac_copy = copy;
	c.timeout_ms = 3000;
	c.wpad_domain = (char *)(uintptr_t)"co.uk";   /* a public suffix: no candidate */
	r = router_new(base, NULL, &c, NULL, err, sizeof(err));
	if (r == NULL)
		fail_msg("router_new: %s", err);
	return r;
}

static void
test_libproxy_wpad_switches_to_egressd(void **state)
{
	struct event_base *base = event_base_new();
	char asked[300];
	char *p;
	struct router *r;
	struct outcome o1 = { 0 }, o2 = { 0 };
	struct host h;

	(void)state;
	snprintf(asked, sizeof(asked), "%s/asked-wpad", dir);
	{
		char body[600];
		snprintf(body, sizeof(body), "while read id url; do echo x >> %s; "
		    "echo \"$id ERR wpad\"; done", asked);
		p = script("wpad", body);
	}
	r = mk(base, p);
	assert_int_equal(host_parse("api.example.com", 15, 0, &h), HOST_OK);
	assert_null(strstr(router_pac_status(r), "WPAD"));
	assert_non_null(route_lookup(r, SCHEME_HTTPS, &h, 443, cb, &o1));
	run(base, &o1);
	/* refused, never libproxy's direct:// */
	assert_int_equal(o1.done, 1);
	assert_int_equal(o1.status, REASON_PAC_UNAVAILABLE);
	assert_int_equal(o1.n, 0);
	assert_int_equal(lines("asked-wpad"), 1);
	/* egressd runs WPAD itself now (here: no candidate under a public suffix) */
	assert_non_null(strstr(router_pac_status(r), "WPAD: no candidate"));
	/* the next hop is refused by egressd's own WPAD state, the helper is not asked */
	assert_non_null(route_lookup(r, SCHEME_HTTPS, &h, 443, cb, &o2));
	run(base, &o2);
	assert_int_equal(o2.status, REASON_PAC_UNAVAILABLE);
	assert_int_equal(lines("asked-wpad"), 1);
	router_free(r);
	event_base_free(base);
}

/* Negative twin: an ordinary answer changes nothing. */
static void
test_manual_answer_no_switch(void **state)
{
	struct event_base *base = event_base_new();
	char *p = script("manual", "while read id url; do echo \"$id OK http://proxy.corp:3128\"; "
	    "done");
	struct router *r = mk(base, p);
	struct outcome o = { 0 };
	struct host h;

	(void)state;
	assert_int_equal(host_parse("api.example.com", 15, 0, &h), HOST_OK);
	assert_non_null(route_lookup(r, SCHEME_HTTPS, &h, 443, cb, &o));
	run(base, &o);
	assert_int_equal(o.status, REASON_ALLOWED);
	assert_int_equal(o.n, 1);
	assert_null(strstr(router_pac_status(r), "WPAD"));
	router_free(r);
	event_base_free(base);
}

/*
 * A route that does not depend on the destination (direct, one static proxy) is known at
 * once (route_static: what the session takes instead of a lookup when its loop is idle),
 * and it is the very answer route_lookup delivers; a system or PAC route is not.
 */
static void
check_static(struct event_base *base, struct router *r, const char *want_first,
    const char *want_source)
{
	struct route_result res;
	struct outcome lk = { 0 }, st = { 0 };
	struct host h;

	memset(&res, 0xa5, sizeof(res));    /* route_static sets what it promises */
	assert_true(route_static(r, &res));
	cb(&res, &st);
	assert_int_equal(st.status, REASON_ALLOWED);
	assert_int_equal(st.n, 1);
	assert_string_equal(st.first, want_first);
	assert_string_equal(st.source, want_source);
	assert_false(st.from_cache);
	assert_int_equal(router_pending(r), 0);
	/* the same answer through a lookup */
	assert_int_equal(host_parse("api.example.com", 15, 0, &h), HOST_OK);
	assert_non_null(route_lookup(r, SCHEME_HTTPS, &h, 443, cb, &lk));
	assert_int_equal(lk.done, 0);           /* never from inside route_lookup */
	run(base, &lk);
	assert_int_equal(lk.done, 1);
	assert_int_equal(lk.status, st.status);
	assert_int_equal(lk.n, st.n);
	assert_string_equal(lk.first, st.first);
	assert_string_equal(lk.source, st.source);
	assert_int_equal(lk.from_cache, st.from_cache);
}

static void
test_static_route_known_at_once(void **state)
{
	struct event_base *base = event_base_new();
	struct route_config c;
	struct route_result res;
	struct router *r;
	char err[256];

	(void)state;
	memset(&c, 0, sizeof(c));
	c.kind = ROUTE_KIND_DIRECT;
	r = router_new(base, NULL, &c, NULL, err, sizeof(err));
	if (r == NULL)
		fail_msg("router_new: %s", err);
	check_static(base, r, "direct", "direct");
	router_free(r);

	memset(&c, 0, sizeof(c));
	c.kind = ROUTE_KIND_PROXY;
	c.proxy = (char *)(uintptr_t)"http://proxy.corp:3128";
	r = router_new(base, NULL, &c, NULL, err, sizeof(err));
	if (r == NULL)
		fail_msg("router_new: %s", err);
	check_static(base, r, "http://proxy.corp:3128", "proxy");
	router_free(r);

	/* a system route depends on the destination: ask route_lookup */
	r = mk(base, script("never", "exit 1"));
	assert_false(route_static(r, &res));
	router_free(r);

	/* and so does a PAC's */
	{
		char pac[300], copy[300];
		FILE *f;

		snprintf(pac, sizeof(pac), "%s/direct.pac", dir);
		snprintf(copy, sizeof(copy), "%s/pac.copy", dir);
		f = fopen(pac, "w");
		assert_non_null(f);
		fprintf(f, "function FindProxyForURL(url, host) { return \"DIRECT\"; }\n");
		fclose(f);
		memset(&c, 0, sizeof(c));
		c.kind = ROUTE_KIND_PAC;
		c.pac = pac;
		c.allow_direct = true;
		c.helper = script("never-pac", "exit 1");
		c.pac_copy = copy;
		c.timeout_ms = 3000;
		r = router_new(base, NULL, &c, NULL, err, sizeof(err));
		if (r == NULL)
			fail_msg("router_new: %s", err);
		assert_false(route_static(r, &res));
		router_free(r);
	}
	event_base_free(base);
}

static int
setup(void **state)
{
	static const char *const proxyvars[] = { "http_proxy", "https_proxy", "HTTP_PROXY",
	    "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY" };

	(void)state;
	for (size_t i = 0; i < sizeof(proxyvars) / sizeof(proxyvars[0]); i++)
		unsetenv(proxyvars[i]);
	return mkdtemp(dir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_libproxy_wpad_switches_to_egressd),
		cmocka_unit_test(test_manual_answer_no_switch),
		cmocka_unit_test(test_static_route_known_at_once),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
