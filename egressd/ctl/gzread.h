/*
 * gzread - open a decision-log file for reading whether it is plain or gzip-compressed
 * (logrotate's `compress`: decisions.jsonl.1.gz), as a stdio stream the readers use
 * unchanged (line_read, dlog_verify_stream).
 *
 * A .gz file is hostile like any log: decompression is bounded in total
 * (EGRESS_LOG_GZ_OUT_MAX) and in ratio (EGRESS_LOG_GZ_RATIO_MAX once past
 * EGRESS_LOG_GZ_RATIO_FREE bytes): past either, the stream reports a read error (errno
 * EFBIG) instead of inflating a bomb. A corrupt stream (bad header, CRC or length, or a
 * file cut inside a member) is a read error (EILSEQ) too, never silently shorter data.
 * Concatenated gzip members are read in order. Callers: logread.c, egressctl log verify,
 * fuzz/fuzz_gzread.c. The returned FILE is closed with fclose (which frees everything).
 */
#ifndef EGRESS_GZREAD_H
#define EGRESS_GZREAD_H

#include <stdbool.h>
#include <stdio.h>

/* True when f starts with the gzip magic (1f 8b); f is rewound. */
bool gzread_is_gzip(FILE *f);

/* Open path: a gzip file (by its magic bytes, whatever its name) is decompressed, anything
 * else is read as is. NULL with errno on failure. */
FILE *gzread_open(const char *path);

/* Wrap an open stream of gzip bytes (taken over: closed by the returned FILE's fclose).
 * NULL with errno (f is then closed). */
FILE *gzread_wrap(FILE *f);

/* strerror, with the two errors of a .gz stream said for people. */
const char *gzread_strerror(int e);

/* dlog_verify_file for a file that may be gzip-compressed (rotated logs, oldest first). */
#include "common/dlogchain.h"
enum dlog_break gzread_verify_file(struct dlog_verify *v, const char *path);

#endif
