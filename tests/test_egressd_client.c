/*
 * test_egressd_client - the control-socket client against a fake egressd (a forked child
 * on a unix socket in a temp dir) that answers well, badly, too much, or never: replies
 * are bounded, the exchange has a deadline, and a grant id that is not 32 hex digits is
 * never accepted (negative twins of the good grant.create).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/util.h"
#include "common/ctlclient.h"
#include "executor/egressd_client.h"

static char sock_path[108];
static char tmpdir[64];

/* Serve one connection: read a line, then send `reply` (len bytes), then maybe hang. */
/* The fake egressd's listening socket at sock_path. */
static int
serve_listen(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	unlink(sock_path);
	memcpy(sun.sun_path, sock_path, strlen(sock_path) + 1);
	assert_true(ls >= 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(ls, 4), 0);
	return ls;
}

static pid_t
serve(const char *reply, size_t len, int hang_ms)
{
	int ls = serve_listen();
	pid_t pid;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char buf[4096];
		int c = accept(ls, NULL, NULL);
		size_t off = 0;

		if (c < 0)
			_exit(1);
		/* read until the request's newline */
		for (;;) {
			ssize_t n = read(c, buf, sizeof(buf));
			if (n <= 0 || memchr(buf, '\n', (size_t)n))
				break;
		}
		while (off < len) {
			ssize_t w = write(c, reply + off, len - off);
			if (w <= 0)
				break;
			off += (size_t)w;
		}
		if (hang_ms)
			usleep((useconds_t)hang_ms * 1000);
		close(c);
		_exit(0);
	}
	close(ls);
	return pid;
}

static void
reap(pid_t pid)
{
	int st;

	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

static int
setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/egcli-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	snprintf(sock_path, sizeof(sock_path), "%s/control.sock", tmpdir);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	unlink(sock_path);
	rmdir(tmpdir);
	return 0;
}

static void
test_grant_create_ok(void **state)
{
	const char *r = "{\"ok\": true, \"id\": 1, \"grant_id\": "
	    "\"0123456789abcdef0123456789abcdef\", \"listen\": \"169.254.7.1:40000\"}\n";
	const char *allow[] = { "https://api.example.com", NULL };
	char gid[EGRESSD_GRANT_ID_LEN + 1], listen[EGRESS_HOSTPORT_MAX + 1], err[256];
	pid_t p = serve(r, strlen(r), 0);

	(void)state;
	assert_int_equal(egressd_grant_create(sock_path, "run-1", allow, "169.254.7.1:0",
	    "egxdeadbeefh", 90, gid, listen, err, sizeof(err)), 0);
	assert_string_equal(gid, "0123456789abcdef0123456789abcdef");
	assert_string_equal(listen, "169.254.7.1:40000");
	reap(p);
}

/* Serve one grant.create that must carry a listening socket (SCM_RIGHTS) and say
 * "listen_fd": true without "listen": answer ok with the socket's port, else an error. */
static pid_t
serve_fd(void)
{
	int ls = serve_listen();
	pid_t pid;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char buf[8192], reply[256];
		union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } cbuf;
		struct iovec iov = { buf, sizeof(buf) - 1 };
		struct msghdr mh = { 0 };
		struct cmsghdr *cm;
		struct sockaddr_in sin;
		socklen_t sl = sizeof(sin), ol = sizeof(int);
		int c = accept(ls, NULL, NULL), pfd = -1, acc = 0;
		ssize_t n;

		if (c < 0)
			_exit(1);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf.b;
		mh.msg_controllen = sizeof(cbuf.b);
		n = recvmsg(c, &mh, 0);
		if (n <= 0)
			_exit(1);
		buf[n] = '\0';
		cm = CMSG_FIRSTHDR(&mh);
		if (cm != NULL && cm->cmsg_type == SCM_RIGHTS)
			memcpy(&pfd, CMSG_DATA(cm), sizeof(int));
		if (pfd >= 0 && getsockopt(pfd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &ol) == 0 &&
		    acc == 1 && getsockname(pfd, (struct sockaddr *)&sin, &sl) == 0 &&
		    strstr(buf, "\"listen_fd\":true") != NULL &&
		    strstr(buf, "\"listen\":") == NULL)
			snprintf(reply, sizeof(reply), "{\"ok\": true, \"grant_id\": "
			    "\"0123456789abcdef0123456789abcdef\", \"listen\": \"127.0.0.1:%u\"}\n",
			    (unsigned)ntohs(sin.sin_port));
		else
			snprintf(reply, sizeof(reply), "{\"ok\": false, \"error\": \"bad_listener\", "
			    "\"message\": \"fd %d acc %d\"}\n", pfd, acc);
		if (write(c, reply, strlen(reply)) < 0)
			_exit(1);
		close(c);
		_exit(0);
	}
	close(ls);
	return pid;
}

static void
test_grant_create_fd(void **state)
{
	const char *allow[] = { "https://api.example.com", NULL };
	char gid[EGRESSD_GRANT_ID_LEN + 1], lis[EGRESS_HOSTPORT_MAX + 1], err[256];
	char want[32];
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid_t p;

	(void)state;
	assert_true(lfd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &sl), 0);
	snprintf(want, sizeof(want), "127.0.0.1:%u", (unsigned)ntohs(sin.sin_port));
	p = serve_fd();
	assert_int_equal(egressd_grant_create_fd(sock_path, "run-1", NULL, allow, lfd,
	    "egxdeadbeefh", 90, gid, lis, err, sizeof(err)), 0);
	assert_string_equal(lis, want);
	reap(p);
	/* negative twin: without an fd the fake egressd refuses, and so does the client */
	p = serve_fd();
	assert_int_equal(egressd_grant_create(sock_path, "run-1", allow, "127.0.0.1:0",
	    "egxdeadbeefh", 90, gid, lis, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "bad_listener"));
	reap(p);
	assert_int_equal(egressd_grant_create_fd(sock_path, "run-1", NULL, allow, -1,
	    "egxdeadbeefh", 90, gid, lis, err, sizeof(err)), -1);
	close(lfd);
}

static void
test_grant_create_bad_id(void **state)
{
	static const char *const replies[] = {
		"{\"ok\": true, \"grant_id\": \"../../etc\", \"listen\": \"169.254.7.1:1\"}\n",
		"{\"ok\": true, \"grant_id\": \"0123456789ABCDEF0123456789abcdef\", \"listen\": \"a:1\"}\n",
		"{\"ok\": true, \"grant_id\": 5, \"listen\": \"169.254.7.1:1\"}\n",
		"{\"ok\": true, \"grant_id\": \"0123456789abcdef0123456789abcdef\"}\n",
	};
	const char *allow[] = { "https://api.example.com", NULL };
	char gid[EGRESSD_GRANT_ID_LEN + 1], listen[EGRESS_HOSTPORT_MAX + 1], err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
		pid_t p = serve(replies[i], strlen(replies[i]), 0);
		assert_int_equal(egressd_grant_create(sock_path, "run-1", allow, "169.254.7.1:0",
		    "egxdeadbeefh", 90, gid, listen, err, sizeof(err)), -1);
		reap(p);
	}
}

static void
test_refusal_message(void **state)
{
	const char *r = "{\"ok\": false, \"error\": \"bind_failed\", \"message\": \"EADDRINUSE\"}\n";
	const char *allow[] = { "https://api.example.com", NULL };
	char gid[EGRESSD_GRANT_ID_LEN + 1], listen[EGRESS_HOSTPORT_MAX + 1], err[256];
	pid_t p = serve(r, strlen(r), 0);

	(void)state;
	assert_int_equal(egressd_grant_create(sock_path, "run-1", allow, "169.254.7.1:0",
	    "egxdeadbeefh", 90, gid, listen, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "bind_failed"));
	reap(p);
	/* a dynamic grant without a lifetime is refused before anything is sent */
	assert_int_equal(egressd_grant_create(sock_path, "run-1", allow, "169.254.7.1:0",
	    "egxdeadbeefh", 0, gid, listen, err, sizeof(err)), -1);
}

static void
test_revoke_unknown_is_fine(void **state)
{
	const char *r = "{\"ok\": false, \"error\": \"unknown_grant\"}\n";
	char err[256];
	pid_t p = serve(r, strlen(r), 0);

	(void)state;
	assert_int_equal(egressd_grant_revoke(sock_path, "0123456789abcdef0123456789abcdef",
	    err, sizeof(err)), 0);
	reap(p);
	r = "{\"ok\": false, \"error\": \"internal\"}\n";
	p = serve(r, strlen(r), 0);
	assert_int_equal(egressd_grant_revoke(sock_path, "0123456789abcdef0123456789abcdef",
	    err, sizeof(err)), -1);
	reap(p);
}

static void
test_reply_too_long(void **state)
{
	size_t len = EGRESS_CONTROL_LINE_MAX + 100;
	char *big = malloc(len);
	json_t *req = json_pack("{s:s}", "op", "status"), *reply = NULL;
	char err[256];
	pid_t p;

	(void)state;
	assert_non_null(big);
	memset(big, 'x', len);   /* no newline at all */
	p = serve(big, len, 0);
	assert_int_equal(ctlclient_request(sock_path, req, -1, &reply, 2000, err, sizeof(err)), -1);
	assert_null(reply);
	assert_non_null(strstr(err, "exceeds"));
	reap(p);
	free(big);
	json_decref(req);
}

static void
test_timeout_and_garbage(void **state)
{
	json_t *req = json_pack("{s:s}", "op", "status"), *reply = NULL;
	char err[256];
	uint64_t t0;
	pid_t p;

	(void)state;
	/* never answers: bounded by the deadline */
	p = serve("", 0, 3000);
	t0 = mono_msec();
	assert_int_equal(ctlclient_request(sock_path, req, -1, &reply, 300, err, sizeof(err)), -1);
	assert_true(mono_msec() - t0 < 2000);
	reap(p);
	/* closes without a newline */
	p = serve("{\"ok\": true}", 12, 0);
	assert_int_equal(ctlclient_request(sock_path, req, -1, &reply, 2000, err, sizeof(err)), -1);
	reap(p);
	/* not an object */
	p = serve("[1,2]\n", 6, 0);
	assert_int_equal(ctlclient_request(sock_path, req, -1, &reply, 2000, err, sizeof(err)), -1);
	reap(p);
	/* duplicate keys are refused */
	p = serve("{\"ok\": true, \"ok\": false}\n", 26, 0);
	assert_int_equal(ctlclient_request(sock_path, req, -1, &reply, 2000, err, sizeof(err)), -1);
	reap(p);
	/* nobody listening */
	unlink(sock_path);
	assert_int_equal(ctlclient_request(sock_path, req, -1, &reply, 500, err, sizeof(err)), -1);
	json_decref(req);
}

static void
test_status(void **state)
{
	const char *r = "{\"ok\": true, \"version\": \"0.1.0\", \"pid\": 7}\n";
	json_t *st = NULL;
	char err[256];
	pid_t p = serve(r, strlen(r), 0);

	(void)state;
	assert_int_equal(egressd_status(sock_path, &st, err, sizeof(err)), 0);
	assert_string_equal(json_string_value(json_object_get(st, "version")), "0.1.0");
	json_decref(st);
	reap(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_grant_create_fd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grant_create_ok, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grant_create_bad_id, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusal_message, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoke_unknown_is_fine, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reply_too_long, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_and_garbage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status, setup, teardown),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
