/*
 * Unit tests for egressd/pacfetch against a loopback server thread (127.0.0.1 only) that
 * serves canned answers: a PAC is installed atomically; 404, a stall, an oversize body,
 * a body that is not a PAC and a redirect loop are failures that keep the last good copy;
 * a same-origin redirect is followed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "tmpdir.h"
#include "egressd/pacfetch.h"

static const char *pac_body = "function FindProxyForURL(url, host) { return \"DIRECT\"; }\n";
static char answer[8192];       /* what the server sends to the next client */
static int stall;               /* server reads but never answers */
static int lfd = -1;
static uint16_t port;

static void *
server(void *arg)
{
	(void)arg;
	for (;;) {
		char req[2048];
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			return NULL;
		(void)!read(c, req, sizeof(req));
		if (stall) {
			sleep(2);
		} else {
			size_t n = strlen(answer);
			(void)!write(c, answer, n);
		}
		close(c);
	}
}

struct res {
	int done;
	enum reason status;
};

static void
cb(enum reason status, const char *detail, void *arg)
{
	struct res *r = arg;

	(void)detail;
	r->done++;
	r->status = status;
}

static struct res
fetch(const char *path, uint32_t timeout_ms, bool *have)
{
	struct event_base *base = event_base_new();
	char url[128], copy[256], err[256];
	struct res r = { 0 };
	struct pacfetch_config c = { .url = url, .copy_path = copy, .timeout_ms = timeout_ms,
	    .max_bytes = 4096, .max_redirects = 2, .refresh_s = 0, .retry_s = 3600 };
	struct pacfetch *p;

	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
	snprintf(copy, sizeof(copy), "%s/pac.js", tmpdir);
	p = pacfetch_new(base, NULL, &c, cb, &r, err, sizeof(err));
	assert_non_null(p);
	for (int i = 0; i < 300 && !r.done; i++) {   /* at most 3 s */
		struct timeval tv = { 0, 10000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	*have = pacfetch_have_copy(p);
	pacfetch_free(p);
	event_base_free(base);
	return r;
}

static void
serve(const char *fmt_status, const char *extra, const char *body)
{
	snprintf(answer, sizeof(answer), "HTTP/1.1 %s\r\nContent-Length: %zu\r\n%s\r\n%s",
	    fmt_status, strlen(body), extra, body);
}

static char *
read_copy(void)
{
	static char buf[8192];
	char path[256];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/pac.js", tmpdir);
	f = fopen(path, "r");
	if (f == NULL)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* The copy is the PAC followed by egressd's wrapper (fail-closed runtime errors). */
static void
assert_copy_is_wrapped(void)
{
	char *c = read_copy();

	assert_non_null(c);
	assert_true(strncmp(c, pac_body, strlen(pac_body)) == 0);
	assert_non_null(strstr(c, PAC_WRAPPER_MARKER));
	assert_non_null(strstr(c, PAC_ERROR_HOST));
}

static void
test_fetch_and_keep(void **state)
{
	bool have;
	struct res r;
	struct stat st;
	char path[256];

	/* no copy yet, 404: unavailable, no copy */
	serve("404 Not Found", "", "nope");
	r = fetch("/pac", 2000, &have);
	assert_int_equal(r.status, REASON_PAC_UNAVAILABLE);
	assert_false(have);
	assert_null(read_copy());

	/* 200 with a PAC: installed, readable by the unprivileged helper */
	serve("200 OK", "Content-Type: application/x-ns-proxy-autoconfig\r\n", pac_body);
	r = fetch("/pac", 2000, &have);
	assert_int_equal(r.status, REASON_ALLOWED);
	assert_true(have);
	assert_copy_is_wrapped();
	snprintf(path, sizeof(path), "%s/pac.js", tmpdir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);

	/* failures keep the good copy untouched */
	serve("404 Not Found", "", "nope");
	r = fetch("/pac", 2000, &have);
	assert_int_equal(r.status, REASON_PAC_UNAVAILABLE);
	assert_true(have);
	assert_copy_is_wrapped();

	serve("200 OK", "", "<html>captive portal</html>");
	r = fetch("/pac", 2000, &have);
	assert_int_equal(r.status, REASON_PAC_UNAVAILABLE);
	assert_copy_is_wrapped();

	{
		static char big[6000];
		memset(big, 'a', sizeof(big) - 1);
		memcpy(big, "FindProxyForURL", 15);
		serve("200 OK", "", big);
		r = fetch("/pac", 2000, &have);
		assert_int_equal(r.status, REASON_PAC_UNAVAILABLE);
		assert_copy_is_wrapped();
	}

	/* Content-Length larger than what arrived: truncated, refused */
	snprintf(answer, sizeof(answer), "HTTP/1.1 200 OK\r\nContent-Length: 999\r\n\r\n%s", pac_body);
	r = fetch("/pac", 2000, &have);
	assert_int_equal(r.status, REASON_PAC_UNAVAILABLE);

	/* stalled server: the deadline fires */
	stall = 1;
	r = fetch("/pac", 300, &have);
	stall = 0;
	assert_int_equal(r.status, REASON_PAC_UNAVAILABLE);
	assert_copy_is_wrapped();
}

static void
test_redirects(void **state)
{
	bool have;
	struct res r;

	/* a redirect loop (always 302 to itself) ends at max_redirects */
	snprintf(answer, sizeof(answer), "HTTP/1.1 302 Found\r\nLocation: /pac\r\nContent-Length: 0\r\n\r\n");
	r = fetch("/pac", 2000, &have);
	assert_int_equal(r.status, REASON_PAC_UNAVAILABLE);
	snprintf(answer, sizeof(answer), "HTTP/1.1 302 Found\r\nContent-Length: 0\r\n\r\n");
	r = fetch("/pac", 2000, &have);
	assert_int_equal(r.status, REASON_PAC_UNAVAILABLE);
}

static void
test_bad_config(void **state)
{
	char err[256];
	struct pacfetch_config c = { .url = "ftp://x/pac", .copy_path = "/tmp/x", .timeout_ms = 100,
	    .max_bytes = 100 };

	assert_null(pacfetch_new(NULL, NULL, &c, NULL, NULL, err, sizeof(err)));
	c.url = "http://x/pac";
	c.copy_path = "relative";
	assert_null(pacfetch_new(NULL, NULL, &c, NULL, NULL, err, sizeof(err)));
	c.copy_path = "/tmp/x";
	c.max_bytes = 0;
	assert_null(pacfetch_new(NULL, NULL, &c, NULL, NULL, err, sizeof(err)));
	assert_false(pacfetch_body_plausible("", 0));
	assert_false(pacfetch_body_plausible("FindProxyForURL\0", 16));
	assert_true(pacfetch_body_plausible("function FindProxyForURL(){}", 28));
}

static int
setup(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	pthread_t t;
	int one = 1;

	if (tmpdir_make("pac") != 0)
		return -1;
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 16) != 0)
		return -1;
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin_port);
	pthread_create(&t, NULL, server, NULL);
	pthread_detach(t);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fetch_and_keep),
		cmocka_unit_test(test_redirects),
		cmocka_unit_test(test_bad_config),
	};
	return cmocka_run_group_tests(tests, setup, tmpdir_teardown);
}
