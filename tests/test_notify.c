/* test_notify.c - egressd/notify.c against a real AF_UNIX datagram socket standing in for
 * systemd's: the exact datagrams for READY/RELOADING/STOPPING and STATUS, path and
 * abstract addresses, the variable unset after open (children must not inherit it), and
 * the refusals: no variable means off (every send ENOTCONN), a relative or missing socket
 * is an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "egressd/notify.h"

static int
listen_dgram(const char *name, bool abstract)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	size_t n = strlen(name);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	socklen_t len;

	assert_true(fd >= 0);
	memcpy(sun.sun_path + (abstract ? 1 : 0), name, n);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, len), 0);
	return fd;
}

static void
expect(int fd, const char *want)
{
	char buf[1024];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	assert_true(n >= 0);
	buf[n] = '\0';
	assert_string_equal(buf, want);
}

static void
test_path_socket(void **state)
{
	char dir[] = "/tmp/test_notify.XXXXXX", path[128], err[256];
	int srv;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/notify", dir);
	srv = listen_dgram(path, false);
	setenv("NOTIFY_SOCKET", path, 1);
	assert_int_equal(notify_open(err, sizeof(err)), 0);
	assert_true(notify_enabled());
	assert_null(getenv("NOTIFY_SOCKET"));
	assert_int_equal(notify_ready("running"), 0);
	expect(srv, "READY=1\nSTATUS=running");
	assert_int_equal(notify_reloading(), 0);
	expect(srv, "RELOADING=1");
	/* a status line cannot smuggle another assignment */
	assert_int_equal(notify_ready("bad\nMAINPID=1"), 0);
	expect(srv, "READY=1\nSTATUS=bad?MAINPID=1");
	assert_int_equal(notify_stopping(), 0);
	expect(srv, "STOPPING=1");
	notify_close();
	assert_false(notify_enabled());
	close(srv);
	unlink(path);
	rmdir(dir);
}

static void
test_abstract_socket(void **state)
{
	char name[64], var[80], err[256];
	int srv;

	(void)state;
	snprintf(name, sizeof(name), "egress-test-notify-%d", (int)getpid());
	srv = listen_dgram(name, true);
	snprintf(var, sizeof(var), "@%s", name);
	setenv("NOTIFY_SOCKET", var, 1);
	assert_int_equal(notify_open(err, sizeof(err)), 0);
	assert_int_equal(notify_ready(NULL), 0);
	expect(srv, "READY=1");
	notify_close();
	close(srv);
}

static void
test_off_and_refusals(void **state)
{
	char err[256];

	(void)state;
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(notify_open(err, sizeof(err)), 0);
	assert_false(notify_enabled());
	errno = 0;
	assert_int_equal(notify_ready("running"), -1);
	assert_int_equal(errno, ENOTCONN);

	setenv("NOTIFY_SOCKET", "relative/socket", 1);
	assert_int_equal(notify_open(err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not an absolute path"));
	assert_false(notify_enabled());

	setenv("NOTIFY_SOCKET", "/nonexistent/egress/notify", 1);
	assert_int_equal(notify_open(err, sizeof(err)), -1);
	assert_non_null(strstr(err, "connect"));
	assert_false(notify_enabled());
	unsetenv("NOTIFY_SOCKET");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_socket),
		cmocka_unit_test(test_abstract_socket),
		cmocka_unit_test(test_off_and_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
