/*
 * egspawn - start-up timing for egress-exec and its references (see docs/performance.md).
 *
 *   egspawn -n RUNS [--timeout SECONDS] [--raw FILE] -- CMD [ARGS...]
 *
 * Runs CMD RUNS times, one after another. For each run: t0 = CLOCK_REALTIME just before
 * fork; the whole run ends when the child has exited and its stdout reached EOF. When the
 * child's stdout holds a line `EGSTAMP <ns>` (bench/egstamp as the worker), the time to the
 * worker's first instruction is that stamp minus t0. Prints one key=value line:
 *   runs= ok= failed= whole_p50_ms= whole_p90_ms= first_p50_ms= first_p90_ms= (first_* only
 *   when stamps were seen). Every run is bounded by --timeout (default 30 s: killed).
 * --raw FILE appends one line per successful run, `<whole_ns> <first_ns or 0>`, so a script
 * can interleave several commands in short blocks and compute percentiles over all blocks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

#define RUNS_MAX 10000

static long long
real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int
cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

static double
pct_ms(long long *v, size_t n, double p)
{
	if (n == 0)
		return 0;
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);

	return (double)v[i < n ? i : n - 1] / 1e6;
}

/* Parse `EGSTAMP <digits>` out of the child's output; 0 when absent. */
static long long
find_stamp(const char *out)
{
	const char *p = strstr(out, "EGSTAMP ");
	char num[32];
	size_t k = 0;
	long long v;
	const char *err;

	if (p == NULL)
		return 0;
	for (p += 8; k + 1 < sizeof(num) && *p >= '0' && *p <= '9'; p++)
		num[k++] = *p;
	num[k] = '\0';
	if (num_parse(num, 1, 0x7fffffffffffffffLL, &v, &err) != 0)
		return 0;
	return v;
}

int
main(int argc, char **argv)
{
	long long runs = 50, timeout_s = 30;
	const char *err, *raw_path = NULL;
	FILE *raw = NULL;
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		if (i + 1 >= argc)
			goto usage;
		if (strcmp(argv[i], "-n") == 0) {
			if (num_parse(argv[++i], 1, RUNS_MAX, &runs, &err) != 0)
				goto usage;
		} else if (strcmp(argv[i], "--raw") == 0) {
			raw_path = argv[++i];
		} else if (strcmp(argv[i], "--timeout") == 0) {
			if (num_parse(argv[++i], 1, 600, &timeout_s, &err) != 0)
				goto usage;
		} else {
			goto usage;
		}
	}
	if (i >= argc)
		goto usage;
	char **cmd = argv + i;
	long long *whole = calloc((size_t)runs, sizeof(*whole));
	long long *first = calloc((size_t)runs, sizeof(*first));
	size_t nw = 0, nf = 0, failed = 0;

	if (whole == NULL || first == NULL)
		return 1;
	if (raw_path != NULL && (raw = fopen(raw_path, "a")) == NULL) {
		fprintf(stderr, "egspawn: %s: %s\n", raw_path, strerror(errno));
		return 1;
	}
	for (long long r = 0; r < runs; r++) {
		int pfd[2];
		char out[4096];
		size_t outlen = 0;

		if (pipe2(pfd, O_CLOEXEC) != 0)
			return 1;
		long long t0 = real_ns(), m0 = mono_ns();
		pid_t pid = fork();

		if (pid < 0)
			return 1;
		if (pid == 0) {
			dup2(pfd[1], 1);
			execvp(cmd[0], cmd);
			_exit(127);
		}
		close(pfd[1]);
		long long deadline = m0 + timeout_s * 1000000000LL;
		bool killed = false;

		for (;;) {
			long long left = (deadline - mono_ns()) / 1000000;
			struct pollfd p = { .fd = pfd[0], .events = POLLIN };

			if (left <= 0) {
				kill(pid, SIGKILL);
				killed = true;
				break;
			}
			int pr = poll(&p, 1, (int)(left > 1000 ? 1000 : left));

			if (pr < 0 && errno == EINTR)
				continue;
			if (pr <= 0)
				continue;
			char tmp[1024];
			ssize_t n = read(pfd[0], tmp, sizeof(tmp));

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			size_t room = sizeof(out) - 1 - outlen;
			size_t take = (size_t)n < room ? (size_t)n : room;

			memcpy(out + outlen, tmp, take);
			outlen += take;
		}
		close(pfd[0]);
		int st;

		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		long long t1 = mono_ns();

		out[outlen] = '\0';
		if (killed || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			failed++;
			if (failed == 1)
				fprintf(stderr, "egspawn: run %lld of %s failed (status %d)\n", r, cmd[0],
				    st);
			continue;
		}
		whole[nw++] = t1 - m0;
		long long stamp = find_stamp(out);

		if (stamp > 0)
			first[nf++] = stamp - t0;
		if (raw != NULL)
			fprintf(raw, "%lld %lld\n", t1 - m0, stamp > 0 ? stamp - t0 : 0);
	}
	if (raw != NULL)
		fclose(raw);
	qsort(whole, nw, sizeof(*whole), cmp_ll);
	qsort(first, nf, sizeof(*first), cmp_ll);
	printf("runs=%lld ok=%zu failed=%zu whole_p50_ms=%.2f whole_p90_ms=%.2f", runs, nw,
	    failed, pct_ms(whole, nw, 0.5), pct_ms(whole, nw, 0.9));
	if (nf > 0)
		printf(" first_p50_ms=%.2f first_p90_ms=%.2f", pct_ms(first, nf, 0.5),
		    pct_ms(first, nf, 0.9));
	printf("\n");
	free(whole);
	free(first);
	return nw > 0 ? 0 : 1;
usage:
	fprintf(stderr, "usage: egspawn [-n RUNS] [--timeout SECONDS] [--raw FILE] -- CMD [ARGS...]\n");
	return 2;
}
