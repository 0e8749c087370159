/*
 * Unit tests for egressd/routehelper with fake helpers (shell scripts): answers are
 * delivered and cached, a stalled helper is killed at the deadline and the hop gets
 * route_timeout, garbage or a dead helper give route_unavailable, and a later lookup
 * restarts the helper. Every loop is bounded by a loopexit timer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>

#include "common/util.h"
#include "tmpdir.h"
#include "egressd/routehelper.h"

struct outcome {
	int done;
	enum reason status;
	struct routeproto_reply reply;
};

static void
cb(enum reason status, const struct routeproto_reply *r, void *arg)
{
	struct outcome *o = arg;

	o->done++;
	o->status = status;
	if (r != NULL)
		o->reply = *r;
}

static const char *
script(const char *name, const char *body)
{
	char text[1024];

	assert_true((size_t)snprintf(text, sizeof(text), "#!/bin/sh\n%s\n", body) <
	    sizeof(text));
	return tmpdir_put(name, text, 0755);
}

static struct routehelper *
mk(struct event_base *base, const char *path, uint32_t deadline_ms, uint32_t ttl)
{
	static const char *const env[] = { "PATH=/usr/bin:/bin", NULL };
	struct routehelper_config c = { .helper_path = path, .envp = env,
	    .deadline_ms = deadline_ms, .cache_ttl_s = ttl, .cache_max = 16 };
	char err[256];
	struct routehelper *rh = routehelper_new(base, &c, err, sizeof(err));

	assert_non_null(rh);
	return rh;
}

/* Run the loop until every outcome is done, at most 5 s. */
static void
run(struct event_base *base, struct outcome *o, size_t n)
{
	for (int i = 0; i < 500; i++) {
		size_t done = 0;
		struct timeval tv = { 0, 10000 };
		for (size_t k = 0; k < n; k++)
			done += o[k].done ? 1 : 0;
		if (done == n)
			return;
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
}

static void
test_answer_and_cache(void **state)
{
	struct event_base *base = event_base_new();
	const char *p = script("ok", "while read id url; do echo \"$id OK http://proxy.corp:3128 direct://\"; done");
	struct routehelper *rh = mk(base, p, 2000, 60);
	struct outcome o[2] = { 0 };
	struct routehelper_stats st;

	assert_non_null(routehelper_lookup(rh, "https://a.example:443/", cb, &o[0]));
	assert_int_equal(o[0].done, 0);            /* never from inside lookup */
	run(base, o, 1);
	assert_int_equal(o[0].done, 1);
	assert_int_equal(o[0].status, REASON_ALLOWED);
	assert_int_equal(o[0].reply.n, 2);
	assert_int_equal(o[0].reply.entries[0].kind, PROXY_HTTP);

	assert_non_null(routehelper_lookup(rh, "https://a.example:443/", cb, &o[1]));
	assert_int_equal(o[1].done, 0);
	run(base, &o[1], 1);
	assert_int_equal(o[1].status, REASON_ALLOWED);
	routehelper_stats(rh, &st);
	assert_int_equal(st.cache_hits, 1);
	assert_int_equal(st.restarts, 1);
	routehelper_free(rh);
	event_base_free(base);
}

static void
test_stall_times_out_and_restarts(void **state)
{
	struct event_base *base = event_base_new();
	const char *p = script("stall", "read id url; exec sleep 30");
	struct routehelper *rh = mk(base, p, 300, 0);
	struct outcome o[3] = { 0 };
	struct routehelper_stats st;
	long pid1;

	assert_non_null(routehelper_lookup(rh, "https://a.example:443/", cb, &o[0]));
	assert_non_null(routehelper_lookup(rh, "https://b.example:443/", cb, &o[1]));
	routehelper_stats(rh, &st);
	pid1 = st.pid;
	assert_true(pid1 > 0);
	run(base, o, 2);
	assert_int_equal(o[0].done, 1);
	assert_int_equal(o[1].done, 1);
	/* the first lookup timed out; the one queued behind it is denied, not left hanging */
	assert_true((o[0].status == REASON_ROUTE_TIMEOUT && o[1].status == REASON_ROUTE_UNAVAILABLE) ||
	    (o[1].status == REASON_ROUTE_TIMEOUT && o[0].status == REASON_ROUTE_UNAVAILABLE) ||
	    (o[0].status == REASON_ROUTE_TIMEOUT && o[1].status == REASON_ROUTE_TIMEOUT));
	routehelper_stats(rh, &st);
	assert_true(st.timeouts >= 1);
	assert_int_equal(st.pid, 0);
	/* killed, and reaped from a timer (never by blocking the loop): bounded wait */
	for (int i = 0; i < 50 && kill((pid_t)pid1, 0) == 0; i++) {
		struct timeval tv = { 0, 20000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	assert_int_equal(kill((pid_t)pid1, 0), -1);

	/* the next lookup starts a fresh helper */
	assert_non_null(routehelper_lookup(rh, "https://c.example:443/", cb, &o[2]));
	routehelper_stats(rh, &st);
	assert_true(st.pid > 0 && st.pid != pid1);
	run(base, &o[2], 1);
	assert_int_equal(o[2].status, REASON_ROUTE_TIMEOUT);
	routehelper_free(rh);
	event_base_free(base);
}

static void
test_garbage_and_errors(void **state)
{
	struct event_base *base = event_base_new();
	const char *p = script("junk", "read id url; echo \"$id OK PROXY evil.example:1\"; exec sleep 5");
	struct routehelper *rh = mk(base, p, 2000, 0);
	struct outcome o = { 0 };

	assert_non_null(routehelper_lookup(rh, "https://a.example:443/", cb, &o));
	run(base, &o, 1);
	assert_int_equal(o.status, REASON_ROUTE_UNAVAILABLE);
	routehelper_free(rh);

	p = script("err", "while read id url; do echo \"$id ERR pac_error\"; done");
	rh = mk(base, p, 2000, 0);
	memset(&o, 0, sizeof(o));
	assert_non_null(routehelper_lookup(rh, "https://a.example:443/", cb, &o));
	run(base, &o, 1);
	assert_int_equal(o.status, REASON_ROUTE_UNAVAILABLE);
	routehelper_free(rh);

	p = script("dies", "exit 3");
	rh = mk(base, p, 2000, 0);
	memset(&o, 0, sizeof(o));
	assert_non_null(routehelper_lookup(rh, "https://a.example:443/", cb, &o));
	run(base, &o, 1);
	assert_int_equal(o.done, 1);
	assert_int_equal(o.status, REASON_ROUTE_UNAVAILABLE);
	routehelper_free(rh);
	event_base_free(base);
}

static void
test_cancel(void **state)
{
	struct event_base *base = event_base_new();
	const char *p = script("slow", "while read id url; do sleep 0.2; echo \"$id OK direct://\"; done");
	struct routehelper *rh = mk(base, p, 2000, 0);
	struct outcome o[2] = { 0 };
	struct rh_req *q = routehelper_lookup(rh, "https://a.example:443/", cb, &o[0]);

	assert_non_null(routehelper_lookup(rh, "https://b.example:443/", cb, &o[1]));
	routehelper_cancel(q);
	run(base, &o[1], 1);
	assert_int_equal(o[0].done, 0);            /* a cancelled lookup never calls back */
	assert_int_equal(o[1].status, REASON_ALLOWED);
	routehelper_free(rh);
	event_base_free(base);
}

/* The helper's file is gone when the first lookup needs a helper: the start fails at
 * once (posix_spawn reports it, no child ever runs), the lookups are refused without
 * waiting for the deadline, and no start is tried again for 50 ms, then 100 ms after the
 * second failure in a row, even once the file is back; past that the helper starts and
 * answers. (Under valgrind, which runs posix_spawn's vfork as a fork, the failure is an
 * exit with 127 instead: only the refusal is judged there; scripts/valgrind.sh.) */
static void
test_helper_gone(void **state)
{
	static const char body[] = "while read id url; do echo \"$id OK direct://\"; done";
	struct event_base *base = event_base_new();
	const char *p = script("gone", body);
	struct routehelper *rh = mk(base, p, 30000, 0);    /* run() gives up after 5 s */
	struct outcome o[3] = { 0 };
	struct routehelper_stats st;
	uint64_t failed_at, nfail, bo;
	bool quick;

	(void)state;
	assert_int_equal(unlink(p), 0);
	failed_at = mono_msec();
	assert_non_null(routehelper_lookup(rh, "https://a.example:443/", cb, &o[0]));
	assert_int_equal(o[0].done, 0);            /* never from inside lookup */
	assert_non_null(routehelper_lookup(rh, "https://b.example:443/", cb, &o[1]));
	run(base, o, 2);
	quick = mono_msec() - failed_at < 45;      /* both met the first back-off */
	assert_int_equal(o[0].done, 1);
	assert_int_equal(o[0].status, REASON_ROUTE_UNAVAILABLE);
	assert_int_equal(o[1].done, 1);
	assert_int_equal(o[1].status, REASON_ROUTE_UNAVAILABLE);
	if (getenv("EGRESS_UNDER_VALGRIND") != NULL) {
		print_message("under valgrind: a failed start is an exit, not judged\n");
		goto out;
	}
	routehelper_stats(rh, &st);
	assert_int_equal(st.restarts, 0);          /* nothing was started */
	if (quick)
		assert_int_equal(st.start_failures, 1);    /* one try for both: the back-off */
	else
		assert_true(st.start_failures == 1 || st.start_failures == 2);
	/* past the first back-off (50 ms) it is tried again, and fails again: 100 ms now */
	usleep(70000);
	nfail = st.start_failures;
	failed_at = mono_msec();                   /* before the failure: conservative */
	assert_non_null(routehelper_lookup(rh, "https://c.example:443/", cb, &o[2]));
	run(base, &o[2], 1);
	assert_int_equal(o[2].status, REASON_ROUTE_UNAVAILABLE);
	routehelper_stats(rh, &st);
	assert_int_equal(st.start_failures, nfail + 1);
	/* the file is back: within the doubled back-off no start is tried ... */
	assert_string_equal(script("gone", body), p);
	usleep(60000);
	memset(o, 0, sizeof(o));
	assert_non_null(routehelper_lookup(rh, "https://d.example:443/", cb, &o[0]));
	run(base, &o[0], 1);
	if (mono_msec() - failed_at < 95) {
		assert_int_equal(o[0].status, REASON_ROUTE_UNAVAILABLE);
		routehelper_stats(rh, &st);
		assert_int_equal(st.restarts, 0);
	} else {
		print_message("the host stalled past the back-off: its length not judged\n");
	}
	/* ... and past it the helper starts and answers: a failure that went away costs
	 * ~100 ms of refused lookups, not a second */
	routehelper_stats(rh, &st);
	bo = 50u << (st.start_failures - 1);      /* that many failures in a row */
	while (mono_msec() < failed_at + bo + 20)
		usleep(5000);
	assert_non_null(routehelper_lookup(rh, "https://e.example:443/", cb, &o[1]));
	run(base, &o[1], 1);
	if (o[1].status != REASON_ALLOWED) {
		/* the failure itself came late (a stalled host): once more, one back-off on */
		print_message("the host stalled: trying once more after the back-off\n");
		usleep((useconds_t)(bo + 20) * 1000);
		memset(&o[1], 0, sizeof(o[1]));
		assert_non_null(routehelper_lookup(rh, "https://f.example:443/", cb, &o[1]));
		run(base, &o[1], 1);
	}
	assert_int_equal(o[1].done, 1);
	assert_int_equal(o[1].status, REASON_ALLOWED);
	routehelper_stats(rh, &st);
	assert_int_equal(st.restarts, 1);
out:
	routehelper_free(rh);
	event_base_free(base);
}

static void
test_bad_config(void **state)
{
	struct routehelper_config c = { .helper_path = "relative/helper", .deadline_ms = 100 };
	char err[256];

	assert_null(routehelper_new(NULL, &c, err, sizeof(err)));
	c.helper_path = "/nonexistent/egressd-route-helper";
	assert_null(routehelper_new(NULL, &c, err, sizeof(err)));
}

static int
setup(void **state)
{
	/* A helper that died leaves a socket whose peer is gone: egressd ignores SIGPIPE
	 * (main.c), and so must this test process. */
	signal(SIGPIPE, SIG_IGN);
	return tmpdir_make("rh");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answer_and_cache),
		cmocka_unit_test(test_stall_times_out_and_restarts),
		cmocka_unit_test(test_garbage_and_errors),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_helper_gone),
		cmocka_unit_test(test_bad_config),
	};
	return cmocka_run_group_tests(tests, setup, tmpdir_teardown);
}
