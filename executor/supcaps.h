/*
 * supcaps - the capabilities egress-exec's supervisor keeps (docs/SECURITY.md, "Privilege design: egress-exec").
 *
 * Owns: the one list of capabilities that building, supervising and tearing down a sandbox
 * need (docs/SECURITY.md "egress-exec" table, step by step). Callers: executor/main.c,
 * first thing, for every subcommand. Everything else is dropped from the effective,
 * permitted, inheritable and ambient sets and from the bounding set, so neither egress-exec
 * nor anything it executes as root (the embedded egressd, the worker before its own drop)
 * can ever use it: no kernel modules, raw I/O, reboot, clock setting, BPF, perf, syslog,
 * MAC/audit control, immutable files, raw sockets or ptrace.
 */
#ifndef EXECUTOR_SUPCAPS_H
#define EXECUTOR_SUPCAPS_H

#include <stdbool.h>
#include <stddef.h>

/* True when cap (a CAP_* number) is on the supervisor's keep list. */
bool supcaps_kept(int cap);

/*
 * Drop every capability not on the keep list (bounding set included) and read the result
 * back from /proc/self/status (CapEff, CapPrm, CapBnd hold no dropped bit). A process
 * without CAP_SETPCAP (not root: egress-exec's commands then fail later with their own
 * message) is left alone and 0 is returned. Returns 0, or -1 with a sentence in err.
 */
int supcaps_limit(char *err, size_t errlen);

#endif
