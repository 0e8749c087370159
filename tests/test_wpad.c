/* test_wpad.c - WPAD candidates never reach a public suffix; the search domain is read
 * like the resolver reads it (egressd/wpad). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/pattern.h"
#include "egressd/wpad.h"

static void
test_candidates_walk_up(void **state)
{
	char urls[WPAD_CANDIDATES_MAX][WPAD_URL_MAX];
	size_t n;

	(void)state;
	n = wpad_candidates("a.b.corp.example.com", urls, WPAD_CANDIDATES_MAX);
	assert_int_equal(n, 4);
	assert_string_equal(urls[0], "http://wpad.a.b.corp.example.com/wpad.dat");
	assert_string_equal(urls[1], "http://wpad.b.corp.example.com/wpad.dat");
	assert_string_equal(urls[2], "http://wpad.corp.example.com/wpad.dat");
	assert_string_equal(urls[3], "http://wpad.example.com/wpad.dat");
	/* never wpad.com: "com" is a public suffix */
	n = wpad_candidates("corp.example.co.uk", urls, WPAD_CANDIDATES_MAX);
	assert_int_equal(n, 2);
	assert_string_equal(urls[1], "http://wpad.example.co.uk/wpad.dat");
	n = wpad_candidates("lab.test", urls, WPAD_CANDIDATES_MAX);
	assert_int_equal(n, 1);
	assert_string_equal(urls[0], "http://wpad.lab.test/wpad.dat");
	/* a private-section suffix stops the walk too (anyone can own x.github.io) */
	n = wpad_candidates("team.github.io", urls, WPAD_CANDIDATES_MAX);
	assert_int_equal(n, 1);
	assert_string_equal(urls[0], "http://wpad.team.github.io/wpad.dat");
}

static void
test_candidates_refused(void **state)
{
	char urls[WPAD_CANDIDATES_MAX][WPAD_URL_MAX];

	(void)state;
	/* a domain that is itself a public suffix, a single label, an address, garbage */
	assert_int_equal(wpad_candidates("co.uk", urls, WPAD_CANDIDATES_MAX), 0);
	assert_int_equal(wpad_candidates("com", urls, WPAD_CANDIDATES_MAX), 0);
	assert_int_equal(wpad_candidates("github.io", urls, WPAD_CANDIDATES_MAX), 0);
	assert_int_equal(wpad_candidates("corp", urls, WPAD_CANDIDATES_MAX), 0);
	assert_int_equal(wpad_candidates("10.0.0.1", urls, WPAD_CANDIDATES_MAX), 0);
	assert_int_equal(wpad_candidates("a b.example.com", urls, WPAD_CANDIDATES_MAX), 0);
	assert_int_equal(wpad_candidates("", urls, WPAD_CANDIDATES_MAX), 0);
	/* bounded by max */
	assert_int_equal(wpad_candidates("a.b.c.d.e.f.g.h.i.j.example.com", urls, 3), 3);
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void
test_search_domain(void **state)
{
	char path[] = "/tmp/egx-wpad-resolv-XXXXXX";
	char out[300];
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	write_file(path, "nameserver 10.0.0.1\nsearch Corp.Example.COM other.example\n");
	assert_int_equal(wpad_search_domain(path, out, sizeof(out)), 0);
	assert_string_equal(out, "corp.example.com");
	/* the later of search/domain wins, a rooted name loses its dot */
	write_file(path, "search a.example\ndomain b.example.org.\n");
	assert_int_equal(wpad_search_domain(path, out, sizeof(out)), 0);
	assert_string_equal(out, "b.example.org");
	/* none, or not a name */
	write_file(path, "nameserver 10.0.0.1\noptions ndots:1\n");
	assert_int_equal(wpad_search_domain(path, out, sizeof(out)), -1);
	write_file(path, "search 10.1.2.3\n");
	assert_int_equal(wpad_search_domain(path, out, sizeof(out)), -1);
	write_file(path, "searchx a.example\n");
	assert_int_equal(wpad_search_domain(path, out, sizeof(out)), -1);
	unlink(path);
	assert_int_equal(wpad_search_domain(path, out, sizeof(out)), -1);
}

static void
test_public_suffix(void **state)
{
	(void)state;
	assert_int_equal(pattern_public_suffix("com"), 1);
	assert_int_equal(pattern_public_suffix("co.uk"), 1);
	assert_int_equal(pattern_public_suffix("github.io"), 1);
	assert_int_equal(pattern_public_suffix("internal"), 1);
	assert_int_equal(pattern_public_suffix("example.com"), 0);
	assert_int_equal(pattern_public_suffix("lab.test"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_candidates_walk_up),
		cmocka_unit_test(test_candidates_refused),
		cmocka_unit_test(test_search_domain),
		cmocka_unit_test(test_public_suffix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
