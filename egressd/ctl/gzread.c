/* gzread.c - bounded gzip decompression behind a stdio stream. Contract: gzread.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "egressd/ctl/gzread.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/limits.h"

#define GZ_IN_BUF 65536

struct gz {
	FILE *f;
	z_stream z;
	unsigned char in[GZ_IN_BUF];
	uint64_t in_total, out_total;
	bool member_done;   /* the last member ended: more input is a new member, or EOF */
	bool eof, failed;
	int err;
};

bool
gzread_is_gzip(FILE *f)
{
	int a = fgetc(f), b = fgetc(f);

	rewind(f);
	return a == 0x1f && b == 0x8b;
}

static ssize_t
gz_read(void *cookie, char *buf, size_t size)
{
	struct gz *g = cookie;
	size_t produced = 0;

	if (g->failed) {
		errno = g->err;
		return -1;
	}
	while (produced == 0 && !g->eof) {
		int rc;

		if (g->z.avail_in == 0) {
			size_t n = fread(g->in, 1, sizeof(g->in), g->f);

			if (n == 0) {
				if (ferror(g->f)) {
					g->err = EIO;
					goto fail;
				}
				if (!g->member_done) {      /* cut inside a member */
					g->err = EILSEQ;
					goto fail;
				}
				g->eof = true;
				break;
			}
			g->in_total += n;
			g->z.next_in = g->in;
			g->z.avail_in = (uInt)n;
		}
		if (g->member_done) {
			/* another member follows (cat a.gz b.gz) */
			if (inflateReset(&g->z) != Z_OK) {
				g->err = EILSEQ;
				goto fail;
			}
			g->member_done = false;
		}
		g->z.next_out = (Bytef *)buf + produced;
		g->z.avail_out = (uInt)(size - produced);
		rc = inflate(&g->z, Z_NO_FLUSH);
		produced = size - g->z.avail_out;
		if (rc == Z_STREAM_END) {
			g->member_done = true;
		} else if (rc != Z_OK && !(rc == Z_BUF_ERROR && produced > 0)) {
			g->err = rc == Z_MEM_ERROR ? ENOMEM : EILSEQ;
			goto fail;
		}
		g->out_total += produced;
		/* a bomb: too much in total, or far too much for the bytes it came from */
		if (g->out_total > EGRESS_LOG_GZ_OUT_MAX ||
		    (g->out_total > EGRESS_LOG_GZ_RATIO_FREE &&
		    g->out_total / EGRESS_LOG_GZ_RATIO_MAX > g->in_total)) {
			g->err = EFBIG;
			goto fail;
		}
	}
	return (ssize_t)produced;
fail:
	g->failed = true;
	errno = g->err;
	return -1;
}

static int
gz_close(void *cookie)
{
	struct gz *g = cookie;

	inflateEnd(&g->z);
	fclose(g->f);
	free(g);
	return 0;
}

FILE *
gzread_wrap(FILE *f)
{
	cookie_io_functions_t io = { .read = gz_read, .write = NULL, .seek = NULL,
	    .close = gz_close };
	struct gz *g = calloc(1, sizeof(*g));
	FILE *out;

	if (g == NULL) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	g->f = f;
	/* 16 + MAX_WBITS: gzip framing only (header, CRC-32 and length are checked) */
	if (inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK) {
		fclose(f);
		free(g);
		errno = ENOMEM;
		return NULL;
	}
	out = fopencookie(g, "r", io);
	if (out == NULL) {
		int e = errno;

		gz_close(g);
		errno = e;
	}
	return out;
}

FILE *
gzread_open(const char *path)
{
	FILE *f = fopen(path, "re");

	if (f == NULL)
		return NULL;
	if (!gzread_is_gzip(f))
		return f;
	return gzread_wrap(f);
}

const char *
gzread_strerror(int e)
{
	if (e == EFBIG)
		return "gzip data decompresses past the bound (EGRESS_LOG_GZ_OUT_MAX, or more than "
		    "100x its compressed size): refused as a decompression bomb";
	if (e == EILSEQ)
		return "corrupt or cut gzip data";
	return strerror(e);
}

enum dlog_break
gzread_verify_file(struct dlog_verify *v, const char *path)
{
	FILE *f = gzread_open(path);
	enum dlog_break b;

	if (f == NULL)
		return dlog_verify_unopened(v, path, errno);
	errno = 0;
	b = dlog_verify_stream(v, f, path);
	if (b == DLOG_BREAK_IO && (errno == EFBIG || errno == EILSEQ))
		snprintf(v->message, sizeof(v->message), "%s:%llu: io_error: %s", path,
		    (unsigned long long)v->line, gzread_strerror(errno));
	fclose(f);
	return b;
}
