/*
 * notify - the systemd readiness protocol (sd_notify(3)) for egressd under Type=notify.
 *
 * Owns: one datagram socket connected to $NOTIFY_SOCKET, opened at start-up while egressd
 * is still root and before its seccomp filter (after that only send(2) on this fd is
 * needed: no socket(2), no path lookup, no credentials). Without $NOTIFY_SOCKET every call
 * is a no-op, so egressd behaves the same outside systemd.
 *
 * Called by main.c (READY=1 once listeners, control socket and decision log exist and the
 * privilege drop is done; RELOADING=1/READY=1 around SIGHUP reloads; STOPPING=1 when the
 * drain starts) and control.c (around a reload asked on the control socket).
 * Single-threaded: the event loop thread only.
 */
#ifndef EGRESSD_NOTIFY_H
#define EGRESSD_NOTIFY_H

#include <stddef.h>

/* Read and unset $NOTIFY_SOCKET (children such as the route helper must not inherit it),
 * open and connect the socket. Returns 0 (also when the variable is unset: notifications
 * are then off), or -1 with a message in err (bad address, socket unreachable). */
int notify_open(char *err, size_t errlen);

/* Send one notification, "KEY=VALUE" lines separated by '\n' (e.g. "READY=1\nSTATUS=...").
 * Returns 0, or -1 with errno set (no socket: ENOTCONN). Never blocks. */
int notify_send(const char *state);

/* Convenience: "READY=1" plus STATUS=status when status is not NULL (status bytes outside
 * printable ASCII are replaced, its length is bounded). */
int notify_ready(const char *status);

/* "RELOADING=1" and "STOPPING=1". */
int notify_reloading(void);
int notify_stopping(void);

/* Whether notifications are on (a socket is open). */
int notify_enabled(void);

void notify_close(void);

#endif
