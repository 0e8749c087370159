/* ctlclient.c - one request, one reply over egressd's control socket. Contract: ctlclient.h. */
#define _GNU_SOURCE
#include "common/ctlclient.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/util.h"

static int
cc_wait(int fd, short ev, uint64_t deadline)
{
	for (;;) {
		uint64_t now = mono_msec();
		struct pollfd p = { fd, ev, 0 };
		int r;

		if (now >= deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		r = poll(&p, 1, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		return 0;
	}
}

/* Send buf (n bytes); the first chunk carries pass_fd (SCM_RIGHTS) when it is >= 0. */
static int
cc_send(int fd, const char *buf, size_t n, int pass_fd, uint64_t deadline)
{
	size_t off = 0;

	while (off < n) {
		ssize_t w;

		if (cc_wait(fd, POLLOUT, deadline) < 0)
			return -1;
		if (pass_fd >= 0) {
			union {
				struct cmsghdr h;
				char b[CMSG_SPACE(sizeof(int))];
			} cbuf;
			struct iovec iov = { (void *)(uintptr_t)buf, n };
			struct msghdr mh;
			struct cmsghdr *cm;

			memset(&cbuf, 0, sizeof(cbuf));
			memset(&mh, 0, sizeof(mh));
			mh.msg_iov = &iov;
			mh.msg_iovlen = 1;
			mh.msg_control = cbuf.b;
			mh.msg_controllen = sizeof(cbuf.b);
			cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
			w = sendmsg(fd, &mh, MSG_NOSIGNAL);
			if (w > 0)
				pass_fd = -1;   /* the fd went with the first bytes */
		} else
			w = send(fd, buf + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (w < 0)
			return -1;
		off += (size_t)w;
	}
	return 0;
}

int
ctlclient_request(const char *sock_path, json_t *req, int pass_fd, json_t **reply,
    unsigned timeout_ms, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	uint64_t deadline = mono_msec() + (timeout_ms ? timeout_ms : CTLCLIENT_TIMEOUT_MS);
	_cleanup_free_ char *line = NULL, *in = NULL;
	_cleanup_fd_ int fd = -1;
	size_t len, inlen = 0;
	json_error_t jerr;
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	*reply = NULL;
	if (sock_path == NULL || strlen(sock_path) >= sizeof(sun.sun_path))
		return errbuf_set(err, errlen, 0, "control socket path too long");
	memcpy(sun.sun_path, sock_path, strlen(sock_path) + 1);
	line = json_dumps(req, JSON_COMPACT);
	if (line == NULL)
		return errbuf_set(err, errlen, ENOMEM, "encode request");
	len = strlen(line);
	if (len + 1 > EGRESS_CONTROL_LINE_MAX)
		return errbuf_set(err, errlen, 0, "request too long");
	{
		char *nl = realloc(line, len + 2);
		if (nl == NULL)
			return errbuf_set(err, errlen, ENOMEM, "encode request");
		line = nl;
		line[len++] = '\n';
		line[len] = '\0';
	}

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return errbuf_set(err, errlen, errno, "socket");
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		if (errno != EINPROGRESS && errno != EAGAIN)
			return errbuf_set(err, errlen, errno, "connect %s", sock_path);
		if (cc_wait(fd, POLLOUT, deadline) < 0)
			return errbuf_set(err, errlen, errno, "connect %s", sock_path);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr)
			return errbuf_set(err, errlen, soerr, "connect %s", sock_path);
	}
	/* Send the line and its newline (with the fd, if one is passed). */
	if (cc_send(fd, line, len, pass_fd, deadline) < 0)
		return errbuf_set(err, errlen, errno, "send to %s", sock_path);
	/* Read one line, bounded: grow as bytes arrive, never past the protocol limit. */
	in = malloc(EGRESS_CONTROL_LINE_MAX + 1);
	if (in == NULL)
		return errbuf_set(err, errlen, ENOMEM, "reply buffer");
	for (;;) {
		ssize_t r;
		char *nl;

		if (inlen >= EGRESS_CONTROL_LINE_MAX)
			return errbuf_set(err, errlen, 0, "reply from %s exceeds %d bytes", sock_path,
			    EGRESS_CONTROL_LINE_MAX);
		if (cc_wait(fd, POLLIN, deadline) < 0)
			return errbuf_set(err, errlen, errno, "reply from %s", sock_path);
		r = recv(fd, in + inlen, EGRESS_CONTROL_LINE_MAX - inlen, 0);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0)
			return errbuf_set(err, errlen, errno, "reply from %s", sock_path);
		if (r == 0)
			return errbuf_set(err, errlen, 0, "egressd closed the control connection");
		nl = memchr(in + inlen, '\n', (size_t)r);
		inlen += (size_t)r;
		if (nl) {
			inlen = (size_t)(nl - in);
			break;
		}
	}
	*reply = json_loadb(in, inlen, JSON_REJECT_DUPLICATES, &jerr);
	if (*reply == NULL || !json_is_object(*reply)) {
		json_decref(*reply);
		*reply = NULL;
		return errbuf_set(err, errlen, 0, "malformed reply from %s: not a JSON object", sock_path);
	}
	return 0;
}
