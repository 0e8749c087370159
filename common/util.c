/* util.c - checked number parsing, secret wiping, hex, clocks, errbuf_set, write_all, small-file
 * reads, stdio_ensure, utf8_valid, utf8_lossy_dup. */
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int
num_parse(const char *s, long long min, long long max, long long *out, const char **errstr)
{
	const char *p = s;
	int neg = 0;
	unsigned long long v = 0, lim;

	*errstr = NULL;
	if (s == NULL || *s == '\0') {
		*errstr = "empty";
		return -1;
	}
	if (*p == '-') {
		if (min >= 0) {
			*errstr = "invalid";
			return -1;
		}
		neg = 1;
		p++;
	}
	if (*p == '\0') {
		*errstr = "invalid";
		return -1;
	}
	lim = neg ? (unsigned long long)(-(min + 1)) + 1 : (unsigned long long)max;
	for (; *p != '\0'; p++) {
		if (*p < '0' || *p > '9') {
			*errstr = "invalid";
			return -1;
		}
		unsigned d = (unsigned)(*p - '0');
		if (v > lim / 10 || (v == lim / 10 && d > lim % 10)) {
			*errstr = neg ? "too small" : "too large";
			return -1;
		}
		v = v * 10 + d;
	}
	if (neg) {
		long long r = (v == 0) ? 0 : -(long long)(v - 1) - 1;
		if (r < min) {
			*errstr = "too small";
			return -1;
		}
		*out = r;
		return 0;
	}
	if ((long long)v < min) {
		*errstr = "too small";
		return -1;
	}
	if ((long long)v > max) {
		*errstr = "too large";
		return -1;
	}
	*out = (long long)v;
	return 0;
}

void
secret_wipe(void *p, size_t n)
{
	if (p != NULL)
		explicit_bzero(p, n);
}

size_t
u64_to_dec(char *out, uint64_t v)
{
	char d[EGRESS_U64_DEC_MAX];
	size_t i = sizeof(d);

	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	memcpy(out, d + i, sizeof(d) - i);
	return sizeof(d) - i;
}

void
hex_encode(const unsigned char *in, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[in[i] >> 4];
		out[2 * i + 1] = hx[in[i] & 15];
	}
	out[2 * n] = '\0';
}

uint64_t
mono_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t
mono_msec(void)
{
	return mono_usec() / 1000u;
}

int
errbuf_set(char *err, size_t errlen, int saved_errno, const char *fmt, ...)
{
	int keep = errno;
	va_list ap;
	size_t n;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
		if (saved_errno != 0) {
			n = strlen(err);
			if (n < errlen)
				snprintf(err + n, errlen - n, ": %s", strerror(saved_errno));
		}
	}
	errno = keep;
	return -1;
}

int
stdio_ensure(bool out_writable)
{
	for (int fd = 0; fd <= 2; fd++) {
		int nfd;

		if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
			continue;
		/* the lowest free number: fd itself, as the lower ones are open by now */
		if ((nfd = open("/dev/null", fd == 0 || !out_writable ? O_RDONLY : O_RDWR)) < 0)
			return -1;
		if (nfd != fd) {
			int e = dup2(nfd, fd) < 0 ? errno : 0;

			close(nfd);
			if (e != 0) {
				errno = e;
				return -1;
			}
		}
	}
	return 0;
}

size_t
utf8_seq_len(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned char c;
	size_t len;
	uint32_t cp, min;

	if (n == 0)
		return 0;
	c = u[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2; cp = c & 0x1f; min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3; cp = c & 0x0f; min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4; cp = c & 0x07; min = 0x10000;
	} else {
		return 0;   /* a continuation byte, C0/C1 (overlong), or F5-FF */
	}
	if (n < len)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((u[k] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (u[k] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool
utf8_valid(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t len = utf8_seq_len(s + i, n - i);

		if (len == 0)
			return false;
		i += len;
	}
	return true;
}

char *
utf8_lossy_dup(const char *s)
{
	size_t n = strlen(s), o = 0, i = 0;
	char *out;

	if (n > (SIZE_MAX - 1) / 2 || (out = malloc(2 * n + 1)) == NULL)
		return NULL;
	while (i < n) {
		size_t len = utf8_seq_len(s + i, n - i);

		if (len > 0) {
			memcpy(out + o, s + i, len);
			o += len;
			i += len;
			continue;
		}
		/* the byte as U+0080..U+00FF (a byte below 0x80 is always a sequence) */
		out[o++] = (char)(0xc0 | ((unsigned char)s[i] >> 6));
		out[o++] = (char)(0x80 | ((unsigned char)s[i] & 0x3f));
		i++;
	}
	out[o] = '\0';
	return out;
}

int
write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		if (w == 0) {
			errno = EIO;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int
line_read(FILE *f, char *buf, size_t max, size_t *len)
{
	size_t n = 0;
	bool over = false;
	int c;

	while ((c = getc_unlocked(f)) != EOF) {
		if (c == '\n') {
			*len = over ? max : n;
			buf[*len] = '\0';
			return over ? -1 : 1;
		}
		if (n < max)
			buf[n++] = (char)c;
		else
			over = true;
	}
	if (ferror(f))
		return -2;
	*len = n;
	buf[n] = '\0';
	if (over)
		return -1;
	return n == 0 ? 0 : 2;
}

bool
label_valid(const char *s, size_t max)
{
	size_t i;

	if (s == NULL)
		return false;
	for (i = 0; s[i] != '\0'; i++) {
		unsigned char c = (unsigned char)s[i];

		if (i >= max)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '_' || c == '-'))
			return false;
	}
	/* "." and ".." are path components, not names: a label may end up in a path. */
	return i > 0 && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

bool
hex_lower_is(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

int
hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

ssize_t
file_read_text(const char *path, int extra_flags, char *buf, size_t size)
{
	size_t got = 0;
	int fd, saved;

	if (size == 0) {
		errno = EINVAL;
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | extra_flags);
	if (fd < 0)
		return -1;
	while (got < size - 1) {
		ssize_t n = read(fd, buf + got, size - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			saved = errno;
			close(fd);
			errno = saved;
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return (ssize_t)got;
}
