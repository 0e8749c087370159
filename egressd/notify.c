/*
 * notify.c - sd_notify(3) without libsystemd: the protocol is one datagram of
 * newline-separated KEY=VALUE assignments to the AF_UNIX socket named by $NOTIFY_SOCKET
 * (a path, or '@' for the abstract namespace). Written here rather than linking libsystemd
 * so that the socket is opened once before the privilege drop and the seccomp filter, and
 * a notification afterwards is a single send(2) on an fd egressd already holds.
 */
#include "egressd/notify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* STATUS= texts are one line for `systemctl status`: keep them short. */
#define NOTIFY_STATUS_MAX 400

static int notify_fd = -1;

int
notify_open(char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const char *path = getenv("NOTIFY_SOCKET");
	socklen_t slen;
	size_t n;
	int fd;

	if (path == NULL || path[0] == '\0')
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "NOTIFY_SOCKET=%s: not an absolute path or an abstract "
		    "socket name (at most %zu bytes)", path, sizeof(sun.sun_path) - 1);
		return -1;
	}
	memcpy(sun.sun_path, path, n);
	if (path[0] == '@')
		sun.sun_path[0] = '\0';
	slen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
	    (path[0] == '@' ? 0 : 1));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "NOTIFY_SOCKET: socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sun, slen) != 0) {
		snprintf(err, errlen, "NOTIFY_SOCKET=%s: connect: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	notify_close();
	notify_fd = fd;
	unsetenv("NOTIFY_SOCKET");
	return 0;
}

int
notify_send(const char *state)
{
	ssize_t w;

	if (notify_fd < 0) {
		errno = ENOTCONN;
		return -1;
	}
	do
		w = send(notify_fd, state, strlen(state), MSG_NOSIGNAL | MSG_DONTWAIT);
	while (w < 0 && errno == EINTR);
	return w < 0 ? -1 : 0;
}

int
notify_ready(const char *status)
{
	char msg[NOTIFY_STATUS_MAX + 32];
	size_t off;

	if (status == NULL)
		return notify_send("READY=1");
	off = (size_t)snprintf(msg, sizeof(msg), "READY=1\nSTATUS=");
	for (const char *p = status; *p != '\0' && off < sizeof(msg) - 1; p++)
		msg[off++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
	msg[off] = '\0';
	return notify_send(msg);
}

int
notify_reloading(void)
{
	return notify_send("RELOADING=1");
}

int
notify_stopping(void)
{
	return notify_send("STOPPING=1");
}

int
notify_enabled(void)
{
	return notify_fd >= 0;
}

void
notify_close(void)
{
	if (notify_fd >= 0)
		close(notify_fd);
	notify_fd = -1;
}
