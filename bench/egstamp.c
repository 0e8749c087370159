/*
 * egstamp - the benchmark's "first instruction" probe (see docs/performance.md).
 *
 * Built static (bench/CMakeLists.txt) so no dynamic loader runs before main: the first
 * thing it does is read CLOCK_REALTIME (not namespaced, unlike a time namespace's
 * CLOCK_MONOTONIC) and print `EGSTAMP <ns since the epoch>`, then exit 0 like true(1).
 */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int
main(void)
{
	struct timespec ts;
	char buf[64];

	clock_gettime(CLOCK_REALTIME, &ts);
	int n = snprintf(buf, sizeof(buf), "EGSTAMP %lld\n",
	    (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);

	if (n > 0 && write(1, buf, (size_t)n) != n)
		return 1;
	return 0;
}
