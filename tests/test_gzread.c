/* test_gzread.c - rotated .gz logs: read like plain ones; bombs, cut and corrupt streams
 * are read errors, never silently shorter data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "egressd/ctl/gzread.h"
#include "egressd/ctl/logread.h"
#include "logfixture.h"

/* gzip-compress in[0..n) into a new FILE (tmpfile). */
static FILE *
gz_of(const void *in, size_t n, int level)
{
	z_stream z;
	size_t cap = compressBound((uLong)n) + 64;
	unsigned char *out = malloc(cap);
	FILE *f = tmpfile();

	assert_non_null(out);
	assert_non_null(f);
	memset(&z, 0, sizeof(z));
	assert_int_equal(deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8,
	    Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	fwrite(out, 1, cap - z.avail_out, f);
	deflateEnd(&z);
	free(out);
	rewind(f);
	return f;
}

static size_t
read_all(FILE *f, char *buf, size_t cap, int *err)
{
	size_t n = fread(buf, 1, cap, f);

	*err = ferror(f) ? errno : 0;
	return n;
}

static void
test_plain_roundtrip_and_members(void **state)
{
	static const char text[] = "{\"a\":1}\n{\"b\":2}\n";
	char buf[256];
	int err;
	FILE *g, *raw;
	size_t n;

	(void)state;
	raw = gz_of(text, sizeof(text) - 1, 6);
	assert_true(gzread_is_gzip(raw));
	g = gzread_wrap(raw);
	assert_non_null(g);
	n = read_all(g, buf, sizeof(buf), &err);
	assert_int_equal(err, 0);
	assert_int_equal(n, sizeof(text) - 1);
	assert_memory_equal(buf, text, n);
	fclose(g);
	/* two members back to back (cat a.gz b.gz) read as one stream */
	{
		FILE *a = gz_of(text, sizeof(text) - 1, 6), *both = tmpfile();
		int c;

		for (int k = 0; k < 2; k++) {
			rewind(a);
			while ((c = fgetc(a)) != EOF)
				fputc(c, both);
		}
		fclose(a);
		rewind(both);
		g = gzread_wrap(both);
		n = read_all(g, buf, sizeof(buf), &err);
		assert_int_equal(err, 0);
		assert_int_equal(n, 2 * (sizeof(text) - 1));
		fclose(g);
	}
}

static void
test_bomb_refused(void **state)
{
	size_t n = 8 * 1024 * 1024;
	char *zeros = calloc(1, n), *buf = malloc(1 << 20);
	FILE *g;
	int err = 0;
	size_t got = 0, k;

	(void)state;
	g = gzread_wrap(gz_of(zeros, n, 9));     /* ~1000:1 */
	while ((k = fread(buf, 1, 1 << 20, g)) > 0)
		got += k;
	err = ferror(g) ? errno : 0;
	assert_int_equal(err, EFBIG);
	assert_true(got < n);
	assert_non_null(strstr(gzread_strerror(EFBIG), "bomb"));
	fclose(g);
	free(zeros);
	free(buf);
}

static void
test_cut_and_corrupt(void **state)
{
	char text[4096], buf[8192], bytes[8192];
	int err;
	size_t n, zn;
	FILE *raw, *g;

	(void)state;
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = (char)('a' + (i * 7919) % 26);
	raw = gz_of(text, sizeof(text), 6);
	zn = fread(bytes, 1, sizeof(bytes), raw);
	fclose(raw);
	/* cut inside the stream: an error, not a shorter file */
	raw = tmpfile();
	fwrite(bytes, 1, zn - 10, raw);
	rewind(raw);
	g = gzread_wrap(raw);
	n = read_all(g, buf, sizeof(buf), &err);
	assert_int_equal(err, EILSEQ);
	fclose(g);
	/* one flipped byte in the CRC-32 trailer */
	bytes[zn - 6] ^= 0x5a;
	raw = tmpfile();
	fwrite(bytes, 1, zn, raw);
	rewind(raw);
	g = gzread_wrap(raw);
	n = read_all(g, buf, sizeof(buf), &err);
	assert_int_equal(err, EILSEQ);
	(void)n;
	fclose(g);
}

static void
test_log_reader_reads_gz(void **state)
{
	char *plain = NULL, path[] = "/tmp/test_gzread.XXXXXX";
	size_t len;
	FILE *m = open_memstream(&plain, &len), *gz, *out;
	struct lchain c;
	struct logread r;
	struct logrec *rec;
	struct dlog_verify v;
	int fd, nrec = 0, ch;

	(void)state;
	lchain_init(&c, m);
	for (int i = 0; i < 200; i++)
		lchain_add(&c, "2026-12-01T10:00:00.000000Z", "decision",
		    "\"principal\":\"run-a\",\"verdict\":\"allow\"");
	fclose(m);
	gz = gz_of(plain, len, 6);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	out = fdopen(fd, "w");
	while ((ch = fgetc(gz)) != EOF)
		fputc(ch, out);
	fclose(out);
	fclose(gz);
	assert_int_equal(logread_open(&r, path), 0);
	while (logread_next(&r, &rec) == 1)
		nrec++;
	assert_int_equal(nrec, 200);
	assert_int_equal(r.malformed, 0);
	logread_close(&r);
	dlog_verify_init(&v, false);
	assert_int_equal(gzread_verify_file(&v, path), DLOG_INTACT);
	assert_int_equal(v.records, 200);
	unlink(path);
	free(plain);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_roundtrip_and_members),
		cmocka_unit_test(test_bomb_refused),
		cmocka_unit_test(test_cut_and_corrupt),
		cmocka_unit_test(test_log_reader_reads_gz),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
