/* util.c - checked number parsing, secret wiping, hex, clocks. */
#include "common/util.h"

#include <errno.h>
#include <string.h>
#include <time.h>

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
