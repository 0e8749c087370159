/* test_report_html.c - the HTML audit report: self-contained (no fetchable reference),
 * hostile strings escaped, and it renders in headless Chromium with its three SVG charts
 * and its tables. The render test skips (and says so) only when Chromium cannot start. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "egressd/ctl/logread.h"
#include "egressd/ctl/logsummary.h"
#include "egressd/ctl/report_html.h"
#include "logfixture.h"

#define CHROMIUM_TIMEOUT_MS 90000

struct fix {
	char dir[64];
	char html[128];
};

/* The sample plus a principal and destination that try to inject markup. */
static void
write_report(struct fix *fx)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len), *in, *out;
	struct lchain c;
	struct logsummary *s = logsummary_new();
	struct logread r;
	struct logrec *rec;

	lchain_init(&c, f);
	lchain_sample(&c);
	lchain_decision(&c, "2026-11-30T10:31:00.000000Z", "c-x", "<script>alert(1)</script>",
	    "\\\"><img src=x>.example.com:443", "deny", "not_granted", "direct", 1);
	fclose(f);
	in = fmemopen(buf, len, "r");
	assert_int_equal(logread_open_stream(&r, in, "mem"), 0);
	while (logread_next(&r, &rec) == 1)
		assert_int_equal(logsummary_add(s, rec), 0);
	logsummary_add_counters(s, &r);
	logread_close(&r);
	fclose(in);
	out = fopen(fx->html, "w");
	assert_non_null(out);
	assert_int_equal(report_html_write(out, logsummary_finish(s), "audit <test> & co"), 0);
	assert_int_equal(fclose(out), 0);
	logsummary_free(s);
	free(buf);
}

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *b;
	size_t n;

	assert_non_null(f);
	b = calloc(1, 4 << 20);
	n = fread(b, 1, (4 << 20) - 1, f);
	b[n] = '\0';
	fclose(f);
	return b;
}

static int
setup(void **state)
{
	struct fix *fx = calloc(1, sizeof(*fx));

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_report_html.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->html, sizeof(fx->html), "%s/report.html", fx->dir);
	write_report(fx);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fix *fx = *state;
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", fx->dir);
	free(fx);
	return 0;
}

static size_t
count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static void
test_self_contained(void **state)
{
	struct fix *fx = *state;
	char *h = slurp(fx->html);

	/* nothing that makes a browser fetch: no scripts, links, sources, CSS urls */
	assert_null(strstr(h, "<script"));
	assert_null(strstr(h, "<img"));
	assert_null(strstr(h, "<link"));
	assert_null(strstr(h, "<iframe"));
	assert_null(strstr(h, "<object"));
	assert_null(strstr(h, "<embed"));
	assert_null(strstr(h, "<image"));
	assert_null(strstr(h, "<source"));
	assert_null(strstr(h, "<use"));
	assert_null(strstr(h, "href="));
	assert_null(strstr(h, "url("));
	assert_null(strstr(h, "@import"));
	assert_non_null(strstr(h, "Content-Security-Policy"));
	assert_non_null(strstr(h, "default-src 'none'"));
	/* the hostile strings are text */
	assert_non_null(strstr(h, "&lt;script&gt;alert(1)&lt;/script&gt;"));
	assert_non_null(strstr(h, "&quot;&gt;&lt;img src=x&gt;.example.com:443"));
	assert_non_null(strstr(h, "<title>audit &lt;test&gt; &amp; co</title>"));
	assert_int_equal(count(h, "<svg"), 3);
	assert_non_null(strstr(h, "id=\"principals\""));
	assert_non_null(strstr(h, "id=\"destinations\""));
	free(h);
}

static void
test_escape(void **state)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	(void)state;
	report_html_escape(f, "a<b>&\"'\x01z");
	fclose(f);
	assert_string_equal(out, "a&lt;b&gt;&amp;&quot;&#39;&#xfffd;z");
	free(out);
}

/* Run chromium --dump-dom on the report with a bounded wait. Returns the exit status
 * (or -1 when it could not be started or timed out); the DOM is in dom_path. */
static int
run_chromium(struct fix *fx, const char *dom_path, const char *err_path)
{
	char profile[128], url[256], udd[160];
	uint64_t deadline;
	pid_t pid;
	int status;

	snprintf(profile, sizeof(profile), "%s/profile", fx->dir);
	assert_int_equal(mkdir(profile, 0700), 0);   /* a new, empty profile each run */
	snprintf(udd, sizeof(udd), "--user-data-dir=%s", profile);
	snprintf(url, sizeof(url), "file://%s", fx->html);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int o = open(dom_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int nul = open("/dev/null", O_RDONLY);

		if (o < 0 || e < 0 || nul < 0)
			_exit(126);
		dup2(nul, 0);
		dup2(o, 1);
		dup2(e, 2);
		setpgid(0, 0);   /* one group: the timeout kills chromium's helpers too */
		execlp("chromium", "chromium", "--headless", "--no-sandbox", "--disable-gpu",
		    "--disable-quic", "--no-first-run", "--disable-background-networking",
		    "--disable-component-update", "--disable-sync", udd, "--dump-dom", url,
		    (char *)NULL);
		_exit(127);
	}
	deadline = mono_msec() + CHROMIUM_TIMEOUT_MS;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		struct timespec ts = { 0, 100 * 1000000L };

		if (w == pid)
			break;
		if (mono_msec() >= deadline) {
			fprintf(stderr, "chromium did not finish within %d ms\n",
			    CHROMIUM_TIMEOUT_MS);
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		nanosleep(&ts, NULL);
	}
	kill(-pid, SIGKILL);   /* stray helpers of the group, if any */
	if (!WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void
test_renders_in_chromium(void **state)
{
	struct fix *fx = *state;
	char dom_path[160], err_path[160];
	char *dom;
	int rc;

	snprintf(dom_path, sizeof(dom_path), "%s/dom.html", fx->dir);
	snprintf(err_path, sizeof(err_path), "%s/chromium.err", fx->dir);
	rc = run_chromium(fx, dom_path, err_path);
	dom = slurp(dom_path);
	if (rc == 127 || (rc != 0 && dom[0] == '\0')) {
		char *e = slurp(err_path);

		fprintf(stderr, "SKIP: chromium could not start (exit %d): %.400s\n", rc, e);
		free(e);
		free(dom);
		skip();
	}
	assert_int_equal(rc, 0);
	/* the DOM Chromium built: three SVG charts with bars, both tables with rows */
	assert_int_equal(count(dom, "<svg"), 3);
	assert_non_null(strstr(dom, "id=\"chart-timeline\""));
	assert_non_null(strstr(dom, "id=\"chart-destinations\""));
	assert_non_null(strstr(dom, "id=\"chart-denials\""));
	assert_true(count(dom, "<rect") >= 8);
	assert_non_null(strstr(dom, "<table id=\"principals\""));
	assert_non_null(strstr(dom, "<table id=\"destinations\""));
	assert_true(count(dom, "<tr>") >= 3 + 8);
	assert_non_null(strstr(dom, "run-a"));
	assert_non_null(strstr(dom, "pypi.example.org:443"));
	/* the injected markup stayed text: no script or img element in the DOM */
	assert_null(strstr(dom, "<script"));
	assert_null(strstr(dom, "<img"));
	assert_non_null(strstr(dom, "&lt;script&gt;alert(1)&lt;/script&gt;"));
	free(dom);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_self_contained, setup, teardown),
		cmocka_unit_test(test_escape),
		cmocka_unit_test_setup_teardown(test_renders_in_chromium, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
