/*
 * sandbox_state - one record per run in progress, so `egress-exec cleanup` can tell the
 * leftovers of a kill -9'd run from a live one.
 *
 * Owns: files SANDBOX_STATE_DIR/<run_id> ("pid=", "start=", "run_dir=", "veth=" lines).
 * Callers: executor/sandbox.c (write at start, remove when released), executor/cleanup.c.
 * A record is live when its pid exists with the same start time (pid reuse safe).
 */
#ifndef EGRESS_SANDBOX_STATE_H
#define EGRESS_SANDBOX_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/limits.h"

#define SANDBOX_STATE_DIR "/run/egress-exec/state"

struct sandbox_state {
	char run_id[64];
	pid_t pid;
	uint64_t start;                 /* /proc/<pid>/stat starttime; filled by write */
	char run_dir[EGRESS_PATH_MAX];
	char veth[16];
};

/* Write the record (pid's start time filled in). 0, or -1 with err. */
int sandbox_state_write(struct sandbox_state *st, char *err, size_t errlen);
/* Remove it; missing is fine. */
void sandbox_state_remove(const char *run_id);
/* Read one record. 0, or -1. */
int sandbox_state_read(const char *run_id, struct sandbox_state *st);
/* True when the record exists and its process is the same one still running. */
bool sandbox_state_live(const char *run_id);
/* Start time of pid from /proc (0 when it does not exist). */
uint64_t sandbox_state_pid_start(pid_t pid);
/* Call fn for every record (bounded: at most 4096). Returns the number visited. */
unsigned sandbox_state_each(void (*fn)(const struct sandbox_state *st, bool live, void *arg),
    void *arg);

#ifdef EGRESS_TESTING
/* Unit tests only: keep the records in dir (NULL: SANDBOX_STATE_DIR again), so a test
 * never puts records where a real `egress-exec cleanup` would act on them. */
void sandbox_state_set_dir(const char *dir);
#endif

#endif
