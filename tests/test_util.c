/* Unit tests for common/util: the shared helpers every program uses instead of its own
 * copy (errbuf_set, write_all, file_read_text, label_valid, hex_lower_is, hex_digit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tmpdir.h"
#include "common/dynload.h"
#include "common/util.h"

static void
test_errbuf(void **st)
{
	char err[64];

	(void)st;
	errno = EINTR;
	assert_int_equal(errbuf_set(err, sizeof(err), ENOENT, "open %s", "x"), -1);
	assert_string_equal(err, "open x: No such file or directory");
	assert_int_equal(errno, EINTR);             /* preserved */
	assert_int_equal(errbuf_set(err, sizeof(err), 0, "plain"), -1);
	assert_string_equal(err, "plain");
	assert_int_equal(errbuf_set(NULL, 0, 0, "nowhere"), -1);
	/* cut to the buffer, never past it */
	assert_int_equal(errbuf_set(err, 4, 0, "abcdef"), -1);
	assert_string_equal(err, "abc");
}

static void
test_write_all_and_read(void **st)
{
	char big[100000], buf[16];
	const char *p;
	int fd;

	(void)st;
	memset(big, 'z', sizeof(big));
	p = tmpdir_put("w", "", 0600);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write_all(fd, big, sizeof(big)), 0);
	close(fd);
	/* read back, cut at size - 1 and NUL-terminated */
	assert_int_equal(file_read_text(p, 0, buf, sizeof(buf)), (ssize_t)sizeof(buf) - 1);
	assert_int_equal(strlen(buf), sizeof(buf) - 1);
	assert_int_equal(buf[0], 'z');
	p = tmpdir_put("small", "12\n", 0600);
	assert_int_equal(file_read_text(p, 0, buf, sizeof(buf)), 3);
	assert_string_equal(buf, "12\n");
	p = tmpdir_put("empty", "", 0600);
	assert_int_equal(file_read_text(p, 0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
	/* negative twins: a missing file, a link with O_NOFOLLOW, a zero-sized buffer */
	errno = 0;
	assert_int_equal(file_read_text("/nonexistent/egress", 0, buf, sizeof(buf)), -1);
	assert_int_equal(errno, ENOENT);
	{
		char lnk[256];
		snprintf(lnk, sizeof(lnk), "%s/lnk", tmpdir);
		assert_int_equal(symlink(p, lnk), 0);
		assert_int_equal(file_read_text(lnk, O_NOFOLLOW, buf, sizeof(buf)), -1);
		assert_int_equal(errno, ELOOP);
		assert_int_equal(file_read_text(lnk, 0, buf, sizeof(buf)), 0);
	}
	assert_int_equal(file_read_text(p, 0, buf, 0), -1);
	/* write_all to a closed descriptor fails with errno */
	assert_int_equal(write_all(-1, "x", 1), -1);
	assert_int_equal(errno, EBADF);
}

static void
test_label_valid(void **st)
{
	(void)st;
	assert_true(label_valid("run-1", 64));
	assert_true(label_valid("a.b_c-D9", 8));
	assert_true(label_valid("...", 8));          /* dots are fine, just not a path step */
	assert_false(label_valid("a.b_c-D9x", 8));   /* past max */
	assert_false(label_valid("", 8));
	assert_false(label_valid(NULL, 8));
	assert_false(label_valid(".", 8));
	assert_false(label_valid("..", 8));
	assert_false(label_valid("a/b", 8));
	assert_false(label_valid("a b", 8));
}

static void
test_hex(void **st)
{
	(void)st;
	assert_true(hex_lower_is("0123456789abcdef", 16));
	assert_true(hex_lower_is("ab", 0));
	assert_false(hex_lower_is("0123456789abcdeF", 16));
	assert_false(hex_lower_is("g0", 2));
	assert_true(hex_lower_is("abXY", 2));        /* only the n bytes asked for */
	assert_int_equal(hex_digit('0'), 0);
	assert_int_equal(hex_digit('9'), 9);
	assert_int_equal(hex_digit('a'), 10);
	assert_int_equal(hex_digit('F'), 15);
	assert_int_equal(hex_digit('g'), -1);
	assert_int_equal(hex_digit('\0'), -1);
}

/* u64_to_dec: the digits of printf's %llu, no terminator, every width up to UINT64_MAX. */
static void
test_u64_to_dec(void **state)
{
	static const uint64_t vals[] = { 0, 1, 9, 10, 99, 100, 65535, 4294967295ULL,
	    10000000000000000000ULL, UINT64_MAX };
	(void)state;
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		char want[32], got[EGRESS_U64_DEC_MAX + 1];
		int n = snprintf(want, sizeof(want), "%llu", (unsigned long long)vals[i]);

		memset(got, 'x', sizeof(got));
		assert_int_equal(u64_to_dec(got, vals[i]), (size_t)n);
		assert_memory_equal(got, want, (size_t)n);
		if ((size_t)n < sizeof(got))
			assert_int_equal(got[n], 'x');   /* nothing written past the digits */
	}
}

/* dynload: a table resolved at once from the library, with a prefix; the first result
 * (also a failure, with its message) kept for every later call; a missing library and a
 * missing name fail with what is missing. */
static void
test_dynload(void **state)
{
	static struct { __typeof__(strlen) *len; __typeof__(strcmp) *cmp; } ok;
	static const char *const ok_names[] = { "len", "cmp" };
	struct dynload dl = { .soname = "libc.so.6", .prefix = "str", .names = ok_names,
	    .slots = (void **)&ok, .nslots = 2 };
	static void *slot[1];
	static const char *const missing[] = { "no_such_function_here" };
	struct dynload nosym = { .soname = "libc.so.6", .prefix = "", .names = missing,
	    .slots = slot, .nslots = 1 };
	struct dynload nolib = { .soname = "libegress-none.so.9", .prefix = "", .names = missing,
	    .slots = slot, .nslots = 1 };
	char err[256];

	(void)state;
	assert_int_equal(dynload_once(&dl, err, sizeof(err)), 0);
	assert_int_equal(ok.len("abc"), 3);
	assert_int_equal(ok.cmp("a", "a"), 0);
	assert_int_equal(dynload_once(&dl, NULL, 0), 0);
	assert_int_equal(dynload_once(&nosym, err, sizeof(err)), -1);
	assert_string_equal(err, "libc.so.6 has no no_such_function_here");
	err[0] = '\0';
	assert_int_equal(dynload_once(&nosym, err, sizeof(err)), -1);   /* kept */
	assert_string_equal(err, "libc.so.6 has no no_such_function_here");
	assert_int_equal(dynload_once(&nolib, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot load libegress-none.so.9: "));
}

/* In a child started with 0 and 2 closed (1 left open): both are opened on /dev/null,
 * 1 is left alone, and the next socket gets a number above 2; 2 is writable for a daemon
 * (out_writable) and read-only for a tool, whose writes then fail with EBADF. The child's exit status
 * says which check failed (cmocka cannot report from there: its output may be closed). */
static int
stdio_child(void)
{
	struct stat st, st1_before, st1_after;
	int s;

	if (fstat(1, &st1_before) != 0)
		return 10;
	close(0);
	close(2);
	if (stdio_ensure(true) != 0)
		return 11;
	for (int fd = 0; fd <= 2; fd += 2) {
		if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode) ||
		    st.st_rdev != makedev(1, 3))
			return 12 + fd;
		if (fcntl(fd, F_GETFD) != 0)        /* inherited across exec: no FD_CLOEXEC */
			return 13 + fd;
	}
	if (fstat(1, &st1_after) != 0 || st1_after.st_ino != st1_before.st_ino ||
	    st1_after.st_dev != st1_before.st_dev)
		return 16;
	if ((s = socket(AF_UNIX, SOCK_STREAM, 0)) < 3)
		return 17;
	close(s);
	if (stdio_ensure(true) != 0)            /* all open: nothing changes */
		return 18;
	if (write(2, "", 0) != 0)               /* a daemon's stderr: writable */
		return 19;
	/* a tool's closed output stays unwritable: its write fails, not vanishes */
	close(2);
	if (stdio_ensure(false) != 0)
		return 20;
	errno = 0;
	if (write(2, "x", 1) != -1 || errno != EBADF)
		return 21;
	return 0;
}

/* utf8_valid: RFC 3629, as JSON strings (jansson) require */
static void
test_utf8_valid(void **state)
{
	static const struct { const char *s; size_t n; bool ok; } cases[] = {
		{ "", 0, true },
		{ "plain ascii", 11, true },
		{ "caf\xc3\xa9", 5, true },                 /* U+00E9 */
		{ "\xe2\x82\xac", 3, true },                /* U+20AC */
		{ "\xf0\x9f\x98\x80", 4, true },            /* U+1F600 */
		{ "\xf4\x8f\xbf\xbf", 4, true },            /* U+10FFFF, the last */
		{ "a\0b", 3, true },                        /* NUL is a character */
		{ "\xdd", 1, false },                        /* a lead byte alone */
		{ "api.e\xdd" "Find", 11, false },          /* the fuzz finding's byte */
		{ "\x80", 1, false },                        /* a continuation byte first */
		{ "\xc0\xaf", 2, false },                    /* overlong '/' */
		{ "\xc1\xbf", 2, false },                    /* overlong */
		{ "\xe0\x80\xaf", 3, false },                /* overlong 3-byte */
		{ "\xf0\x80\x80\xaf", 4, false },            /* overlong 4-byte */
		{ "\xed\xa0\x80", 3, false },                /* U+D800, a surrogate */
		{ "\xed\xbf\xbf", 3, false },                /* U+DFFF */
		{ "\xf4\x90\x80\x80", 4, false },            /* U+110000 */
		{ "\xf5\x80\x80\x80", 4, false },            /* F5: never a lead */
		{ "\xff", 1, false },
		{ "\xe2\x82", 2, false },                    /* truncated */
		{ "\xe2\x82\xac", 2, false },                /* truncated by n */
		{ "\xe2\x28\xa1", 3, false },                /* bad continuation */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (utf8_valid(cases[i].s, cases[i].n) != cases[i].ok)
			fail_msg("case %zu: expected %s", i, cases[i].ok ? "valid" : "invalid");
}

/* utf8_seq_len and utf8_lossy_dup: sequences kept, other bytes as U+0080-U+00FF, the
 * result always valid. */
static void
test_utf8_lossy(void **state)
{
	static const struct { const char *in, *out; } cases[] = {
		{ "", "" },
		{ "plain", "plain" },
		{ "caf\xc3\xa9 \xf0\x9f\x98\x80", "caf\xc3\xa9 \xf0\x9f\x98\x80" },
		{ "\xff", "\xc3\xbf" },
		{ "api.e\xdd" "Find", "api.e\xc3\x9d" "Find" },
		{ "\xe2\x82", "\xc3\xa2\xc2\x82" },              /* truncated at the end */
		{ "\xc0\xaf", "\xc3\x80\xc2\xaf" },              /* overlong */
		{ "\xed\xa0\x80", "\xc3\xad\xc2\xa0\xc2\x80" },  /* a surrogate */
		{ "a\x80" "b\xe2\x82\xac", "a\xc2\x80" "b\xe2\x82\xac" },
	};

	(void)state;
	assert_int_equal(utf8_seq_len("", 0), 0);
	assert_int_equal(utf8_seq_len("a", 1), 1);
	assert_int_equal(utf8_seq_len("\xc3\xa9", 2), 2);
	assert_int_equal(utf8_seq_len("\xe2\x82\xac", 3), 3);
	assert_int_equal(utf8_seq_len("\xe2\x82\xac", 2), 0);
	assert_int_equal(utf8_seq_len("\xf0\x9f\x98\x80", 4), 4);
	assert_int_equal(utf8_seq_len("\x80", 1), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *o = utf8_lossy_dup(cases[i].in);

		assert_non_null(o);
		if (strcmp(o, cases[i].out) != 0)
			fail_msg("case %zu: unexpected output", i);
		assert_true(utf8_valid(o, strlen(o)));
		free(o);
	}
}

static void
test_stdio_ensure(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(stdio_child());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errbuf),
		cmocka_unit_test(test_write_all_and_read),
		cmocka_unit_test(test_label_valid),
		cmocka_unit_test(test_hex),
		cmocka_unit_test(test_u64_to_dec),
		cmocka_unit_test(test_dynload),
		cmocka_unit_test(test_stdio_ensure),
		cmocka_unit_test(test_utf8_valid),
		cmocka_unit_test(test_utf8_lossy),
	};
	return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
