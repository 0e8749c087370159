/*
 * dynload - a library loaded on first use, with its table of functions resolved at once.
 *
 * Owns: the one dlopen of each library it is given and the resolution of every name into
 * the caller's table. Callers: common/cryptolib.c (libcrypto), executor/gitlib.c
 * (libgit2), executor/netcapture.c (libnftables); each keeps its own table (a struct of
 * function pointers built from an X-macro list) and the list of names in the same order.
 * The load must run before anything confines the process (RTLD_NOW: nothing is resolved
 * later, inside a root that holds no libraries).
 *
 * Failure is fail-closed: dynload_once returns -1 with "cannot load <soname>: <why>" or
 * "<soname> has no <name>"; dynload_need ends the process (exit 70) with that message.
 */
#ifndef EGRESS_DYNLOAD_H
#define EGRESS_DYNLOAD_H

#include <stdbool.h>
#include <stddef.h>

struct dynload {
	const char *soname;
	const char *prefix;         /* before every name ("git_"), or "" */
	const char *const *names;   /* nslots names, in the table's order */
	void **slots;               /* the table: nslots function pointers */
	size_t nslots;
	/* the result of the first load, kept for every later call */
	bool tried;
	int rc;
	char err[256];
};

/* Load and resolve once (later calls return the first result): 0, or -1 with the
 * message in err (err may be NULL). */
int dynload_once(struct dynload *dl, char *err, size_t errlen);

/* dynload_once, or the process ends (exit 70) with "<what>: <message>". */
void dynload_need(struct dynload *dl, const char *what);

/*
 * The names from the X-macro list that built the table, in its order:
 *   static const char *const names[] = { LIST(DYNLOAD_NAME) };
 * and a check that the table holds exactly those pointers:
 *   DYNLOAD_CHECK(struct table, names);
 */
#define DYNLOAD_NAME(n) #n,
#define DYNLOAD_COUNT(names) (sizeof(names) / sizeof((names)[0]))
#define DYNLOAD_CHECK(type, names)                                                     \
	_Static_assert(sizeof(type) == DYNLOAD_COUNT(names) * sizeof(void *),             \
	    "the table holds exactly its names' function pointers")

#endif
