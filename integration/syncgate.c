/*
 * syncgate - an LD_PRELOAD library for the integration tests (never installed): while the
 * file named by EGRESS_SYNCGATE exists, fdatasync(2) waits (polled every millisecond, at
 * most 20 s), then syncs. A test holds egressd's decision log there as a slow disk would:
 * a record is written and its fdatasync, and so its callback (the hop's next step), are
 * due. Without EGRESS_SYNCGATE it is plain fdatasync. A gate that cannot be looked at
 * (any error but ENOENT, e.g. a path the process may not reach) holds, and says so once
 * on stderr. Built without the sanitizers: it is preloaded into programs that have none
 * (ip netns exec) as well as into the sanitized egressd.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int (*real_fdatasync)(int);
static char gate[4096];         /* copied at load: egressd may clear its environment */

__attribute__((constructor)) static void
syncgate_init(void)
{
	const char *g = getenv("EGRESS_SYNCGATE");

	real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	if (g != NULL && strlen(g) < sizeof(gate)) {
		memcpy(gate, g, strlen(g) + 1);
	} else if (g != NULL) {
		static const char m[] = "syncgate: EGRESS_SYNCGATE is too long; no gate\n";
		(void)!write(2, m, sizeof(m) - 1);
	}
}

/* Is the gate there (or unknowable)? */
static int
held(void)
{
	static int said;
	struct stat st;

	if (stat(gate, &st) == 0)
		return 1;
	if (errno == ENOENT)
		return 0;
	if (!said) {
		static const char m[] = "syncgate: the gate cannot be looked at; holding\n";
		said = 1;
		(void)!write(2, m, sizeof(m) - 1);
	}
	return 1;
}

int
fdatasync(int fd)
{
	const struct timespec ms = { 0, 1000000 };
	int e = errno;

	for (int i = 0; gate[0] != '\0' && i < 20000 && held(); i++)
		nanosleep(&ms, NULL);
	errno = e;
	if (real_fdatasync == NULL) {
		errno = ENOSYS;
		return -1;
	}
	return real_fdatasync(fd);
}
