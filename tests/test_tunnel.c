/* test_tunnel.c - egressd/tunnel in both splice and copy modes (relayd runs its regress
 * suite in both): integrity and counts, half-close, idle and lifetime limits, kill,
 * pending bytes, pipe pool return, and the HTTP exchange framing (no pipelined bytes
 * forwarded, response head rebuilt, refusal when the origin answers garbage). */
#define _GNU_SOURCE 1   /* F_SETPIPE_SZ */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "egressd/httpresp.h"
#include "common/limits.h"
#include "egressd/tunnel.h"

/*
 * Allocation failure on demand. tests/CMakeLists.txt links this test with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc, so every allocation of egressd's code
 * (a static library) and of this file comes through here; libevent's and libc's own do
 * not. alloc_fail_in = k: the allocation k calls from now fails with ENOMEM (0: the
 * next); -1: none fails. alloc_failed says that the armed failure happened.
 */
static int alloc_fail_in = -1;
static bool alloc_failed;

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);

static bool
alloc_fails(void)
{
	if (alloc_fail_in < 0 || alloc_fail_in-- > 0)
		return false;
	alloc_failed = true;
	errno = ENOMEM;
	return true;
}

void *__wrap_malloc(size_t n) { return alloc_fails() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n) { return alloc_fails() ? NULL : __real_calloc(k, n); }
void *__wrap_realloc(void *p, size_t n) { return alloc_fails() ? NULL : __real_realloc(p, n); }

struct done {
	bool fired;
	enum reason why;
	uint64_t up, down;
};

static void
on_done(enum reason why, uint64_t up, uint64_t down, void *arg)
{
	struct done *d = arg;

	d->fired = true;
	d->why = why;
	d->up = up;
	d->down = down;
}

/* A connected TCP pair on loopback: *a is the connecting end, *b the accepted one. */
static void
tcp_pair(int *a, int *b)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(l >= 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &sl), 0);
	*a = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(*a, (struct sockaddr *)&sin, sizeof(sin)), 0);
	*b = accept(l, NULL, NULL);
	assert_true(*b >= 0);
	close(l);
}

static void
nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

struct fixture {
	struct event_base *base;
	struct pipe_pool *pool;
	bool shared_pool;       /* the caller's pool: not freed by fx_close */
	int cpeer, cfd;         /* client side: test end, tunnel end */
	int ufd, upeer;         /* upstream side: tunnel end, test end */
};

/* A fixture whose tunnels borrow pipes from shared (NULL: a pool of its own with at most
 * max_big big pipes). */
static void
fx_open_pool(struct fixture *f, struct pipe_pool *shared, size_t max_big)
{
	f->base = event_base_new();
	f->shared_pool = shared != NULL;
	f->pool = shared != NULL ? shared : pipe_pool_new(8, max_big);
	assert_non_null(f->base);
	assert_non_null(f->pool);
	tcp_pair(&f->cpeer, &f->cfd);
	tcp_pair(&f->ufd, &f->upeer);
	nonblock(f->cfd);
	nonblock(f->ufd);
}

static void
fx_open(struct fixture *f)
{
	fx_open_pool(f, NULL, EGRESS_SPLICE_BIG_PIPES);
}

static void
fx_close(struct fixture *f)
{
	close(f->cpeer);
	close(f->upeer);
	if (!f->shared_pool)
		pipe_pool_free(f->pool);
	event_base_free(f->base);
}

/* Run the loop until the tunnel reported, at most ms. */
static void
run_until(struct fixture *f, struct done *d, int ms)
{
	for (int i = 0; i < ms / 5 && !d->fired; i++) {
		struct timeval tv = { 0, 5000 };
		event_base_loopexit(f->base, &tv);
		event_base_dispatch(f->base);
	}
}

/* ---- bulk transfer both ways, with half-close ---- */

struct pump {
	int fd;
	const unsigned char *out;
	size_t nout;
	unsigned char *in;
	size_t nin, cap;
};

static void *
pump_writer(void *arg)
{
	struct pump *p = arg;
	size_t off = 0;

	while (off < p->nout) {
		ssize_t n = send(p->fd, p->out + off, p->nout - off, MSG_NOSIGNAL);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	shutdown(p->fd, SHUT_WR);
	return NULL;
}

static void *
pump_reader(void *arg)
{
	struct pump *p = arg;

	for (;;) {
		ssize_t n = recv(p->fd, p->in + p->nin, p->cap - p->nin, 0);
		if (n <= 0)
			break;
		p->nin += (size_t)n;
		if (p->nin == p->cap)
			break;
	}
	return NULL;
}

/* Can this process have a pipe of EGRESS_SPLICE_BIG_SIZE (pipe-max-size, the user's pipe
 * limits; root is not bound by them)? Then the pool makes big pipes; else none. */
static bool
kernel_allows_big(void)
{
	int p[2];
	bool ok;

	assert_int_equal(pipe(p), 0);
	ok = fcntl(p[1], F_SETPIPE_SZ, EGRESS_SPLICE_BIG_SIZE) >= EGRESS_SPLICE_BIG_SIZE;
	close(p[0]);
	close(p[1]);
	return ok;
}

/* 4 MiB each way through one tunnel whose pipes come from shared (NULL: a pool of its own
 * with at most max_big big pipes); lo..hi: how many big pipes the pool must hold
 * afterwards where the kernel allows them (both directions are bulk transfers past
 * EGRESS_SPLICE_BIG_AFTER, so at least one got a big pipe; a direction may take over the
 * other's big pipe while that one waits for its source, so it may be one; the cap holds;
 * the bytes are exact either way). */
static void
bulk_through(struct pipe_pool *shared, bool splice_mode, size_t max_big, size_t lo, size_t hi)
{
	struct fixture f;
	struct done d = { 0 };
	const size_t N = 4 * 1024 * 1024 + 17;
	unsigned char *up = malloc(N), *down = malloc(N);
	struct pump cw, cr, uw, ur;
	pthread_t t1, t2, t3, t4;
	struct tunnel_opts o = { .splice = splice_mode, .idle_ms = 10000, .lifetime_ms = 60000 };
	uint64_t total = 0;
	static const char hello[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
	static const char early[] = "EARLY";

	assert_non_null(up);
	assert_non_null(down);
	for (size_t i = 0; i < N; i++) {
		up[i] = (unsigned char)(i * 7 + 3);
		down[i] = (unsigned char)(i * 13 + 1);
	}
	o.bytes_total = &total;
	fx_open_pool(&f, shared, max_big);
	struct tunnel *t = tunnel_new(f.base, f.pool, f.cfd, f.ufd, hello, sizeof(hello) - 1,
	    NULL, 0, early, sizeof(early) - 1, &o, on_done, &d);
	assert_non_null(t);

	cw = (struct pump){ .fd = f.cpeer, .out = up, .nout = N };
	uw = (struct pump){ .fd = f.upeer, .out = down, .nout = N };
	cr = (struct pump){ .fd = f.cpeer, .in = malloc(N + 64), .cap = N + 64 };
	ur = (struct pump){ .fd = f.upeer, .in = malloc(N + 64), .cap = N + 64 };
	pthread_create(&t1, NULL, pump_writer, &cw);
	pthread_create(&t2, NULL, pump_writer, &uw);
	pthread_create(&t3, NULL, pump_reader, &cr);
	pthread_create(&t4, NULL, pump_reader, &ur);
	run_until(&f, &d, 20000);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	pthread_join(t3, NULL);
	pthread_join(t4, NULL);

	assert_true(d.fired);
	assert_true(d.why == REASON_CLOSE_CLIENT || d.why == REASON_CLOSE_UPSTREAM);
	/* client received the 200 line first, then exactly the origin's bytes */
	assert_int_equal(cr.nin, sizeof(hello) - 1 + N);
	assert_memory_equal(cr.in, hello, sizeof(hello) - 1);
	assert_memory_equal(cr.in + sizeof(hello) - 1, down, N);
	/* origin received the early client bytes first, then the stream */
	assert_int_equal(ur.nin, sizeof(early) - 1 + N);
	assert_memory_equal(ur.in, early, sizeof(early) - 1);
	assert_memory_equal(ur.in + sizeof(early) - 1, up, N);
	assert_int_equal(d.up, sizeof(early) - 1 + N);
	/* the 200 line is egressd's own, not the destination's */
	assert_int_equal(d.down, N);
	assert_int_equal(total, d.up + d.down);
	assert_int_equal(pipe_pool_in_use(f.pool), 0);
	if (splice_mode)
		/* pipes came back to the pool: default ones, and the big ones apart */
		assert_true(pipe_pool_idle(f.pool) > 0 || pipe_pool_big(f.pool) > 0);
	else
		assert_int_equal(pipe_pool_idle(f.pool), 0);
	if (kernel_allows_big()) {
		assert_true(pipe_pool_big(f.pool) >= lo);
		assert_true(pipe_pool_big(f.pool) <= hi);
	} else {
		assert_int_equal(pipe_pool_big(f.pool), 0);
	}
	free(up);
	free(down);
	free(cr.in);
	free(ur.in);
	fx_close(&f);
}

static void test_bulk_splice(void **st) { bulk_through(NULL, true, EGRESS_SPLICE_BIG_PIPES, 1, 2); }
static void test_bulk_splice_one_big(void **st) { bulk_through(NULL, true, 1, 1, 1); }
static void test_bulk_splice_no_big(void **st) { bulk_through(NULL, true, 0, 0, 0); }
static void test_bulk_copy(void **st) { bulk_through(NULL, false, EGRESS_SPLICE_BIG_PIPES, 0, 0); }

/* The big pipes one tunnel gave back serve the next tunnels' bulk directions: after three
 * tunnels one after the other there are still at most two (one per direction; six if
 * each tunnel made its own), and not a byte of one tunnel reaches the next (every stream
 * is checked byte for byte). With a cap of 1 the one big pipe goes from tunnel to tunnel. */
static void
test_bulk_big_reused(void **st)
{
	struct pipe_pool *pool = pipe_pool_new(8, EGRESS_SPLICE_BIG_PIPES);
	struct pipe_pool *one = pipe_pool_new(8, 1);

	(void)st;
	assert_non_null(pool);
	assert_non_null(one);
	for (int i = 0; i < 3; i++)
		bulk_through(pool, true, 0, 1, 2);
	for (int i = 0; i < 3; i++)
		bulk_through(one, true, 0, 1, 1);
	pipe_pool_free(pool);
	pipe_pool_free(one);
}

/* The kernel refuses big pipes to a user past its pipe pages (pipe-user-pages-soft; root
 * is exempt, so this runs in a child as a uid of its own, which no other process shares:
 * the pages are counted per uid, and two runs at once as nobody took each other's
 * pages): the tunnels move every byte through
 * default pipes and the pool makes no big pipe; once the pages are free again, the next
 * bulk direction after the one-second wait gets one. The child's failures reach the
 * parent as its exit status (cmocka's runner in the child counts them). */
static void
test_bulk_big_refused(void **st)
{
	pid_t pid;
	int status;

	(void)st;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		static int fill[256][2];
		struct pipe_pool *pool;
		int n = 0;
		bool refused = false;

		/* a uid nobody else runs as (no passwd entry is needed to become one) */
		uid_t uid = (uid_t)(3000000 + getpid() % 1000000);

		if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0)
			_exit(3);
		/* use up the user's pipe pages with big pipes until the kernel refuses one */
		while (n < 256 && !refused) {
			if (pipe2(fill[n], O_CLOEXEC) != 0)
				_exit(4);
			refused = fcntl(fill[n][1], F_SETPIPE_SZ, EGRESS_SPLICE_BIG_SIZE) < 0;
			n++;
		}
		if (!refused)
			_exit(77);      /* no per-user limit here: nothing to test */
		pool = pipe_pool_new(8, EGRESS_SPLICE_BIG_PIPES);
		if (pool == NULL)
			_exit(5);
		bulk_through(pool, true, 0, 0, 0);      /* kernel_allows_big() is false */
		if (pipe_pool_big(pool) != 0)
			_exit(6);
		for (int i = 0; i < n; i++) {
			close(fill[i][0]);
			close(fill[i][1]);
		}
		usleep(1100 * 1000);                     /* the pool's wait before it tries again */
		bulk_through(pool, true, 0, 1, 2);       /* allowed again: a big pipe */
		pipe_pool_free(pool);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- half-close: the client finishes sending, the origin still answers ---- */

static void
half_close(bool splice_mode)
{
	struct fixture f;
	struct done d = { 0 };
	struct tunnel_opts o = { .splice = splice_mode, .idle_ms = 5000, .lifetime_ms = 60000 };
	char buf[64];

	fx_open(&f);
	assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, NULL, 0, NULL, 0, &o,
	    on_done, &d));
	assert_int_equal(send(f.cpeer, "question", 8, 0), 8);
	shutdown(f.cpeer, SHUT_WR);
	run_until(&f, &d, 200);
	assert_false(d.fired);
	/* the origin sees the bytes and then EOF */
	assert_int_equal(recv(f.upeer, buf, sizeof(buf), 0), 8);
	assert_int_equal(recv(f.upeer, buf, sizeof(buf), 0), 0);
	/* and can still answer */
	assert_int_equal(send(f.upeer, "answer", 6, 0), 6);
	shutdown(f.upeer, SHUT_WR);
	run_until(&f, &d, 2000);
	assert_int_equal(recv(f.cpeer, buf, sizeof(buf), 0), 6);
	assert_true(d.fired);
	assert_int_equal(d.why, REASON_CLOSE_CLIENT);
	assert_int_equal(d.up, 8);
	assert_int_equal(d.down, 6);
	fx_close(&f);
}

/* An idle tunnel holds no splice pipe: the fd budget is two sockets per idle tunnel. */
static void
test_idle_holds_no_pipe(void **st)
{
	struct fixture f;
	struct done d = { 0 };
	struct tunnel_opts o = { .splice = true, .idle_ms = 5000, .lifetime_ms = 60000 };
	char buf[64];

	fx_open(&f);
	struct tunnel *t = tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, NULL, 0, NULL, 0,
	    &o, on_done, &d);
	assert_non_null(t);
	assert_int_equal(send(f.cpeer, "ping", 4, 0), 4);
	assert_int_equal(send(f.upeer, "pong", 4, 0), 4);
	run_until(&f, &d, 100);
	assert_int_equal(recv(f.upeer, buf, sizeof(buf), MSG_DONTWAIT), 4);
	assert_int_equal(recv(f.cpeer, buf, sizeof(buf), MSG_DONTWAIT), 4);
	assert_false(d.fired);
	assert_int_equal(pipe_pool_in_use(f.pool), 0);
	assert_true(pipe_pool_idle(f.pool) >= 1);
	tunnel_close(t, REASON_CLOSE_REVOKED);
	fx_close(&f);
}

static void test_half_close_splice(void **st) { half_close(true); }
static void test_half_close_copy(void **st) { half_close(false); }

/* ---- limits and kill ---- */

static void
test_idle(void **st)
{
	for (int m = 0; m < 2; m++) {
		struct fixture f;
		struct done d = { 0 };
		struct tunnel_opts o = { .splice = m == 0, .idle_ms = 150, .lifetime_ms = 60000 };
		char c;

		fx_open(&f);
		assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, NULL, 0, NULL, 0,
		    &o, on_done, &d));
		run_until(&f, &d, 2000);
		assert_true(d.fired);
		assert_int_equal(d.why, REASON_CLOSE_IDLE);
		/* both peers see the close */
		assert_int_equal(recv(f.cpeer, &c, 1, 0), 0);
		assert_int_equal(recv(f.upeer, &c, 1, 0), 0);
		fx_close(&f);
	}
}

static void
test_lifetime(void **st)
{
	struct fixture f;
	struct done d = { 0 };
	struct tunnel_opts o = { .splice = true, .idle_ms = 100000, .lifetime_ms = 300 };

	fx_open(&f);
	assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, NULL, 0, NULL, 0, &o,
	    on_done, &d));
	/* keep it busy: traffic does not extend a lifetime */
	for (int i = 0; i < 100 && !d.fired; i++) {
		char buf[16];
		send(f.cpeer, "x", 1, MSG_NOSIGNAL);
		run_until(&f, &d, 10);
		(void)recv(f.upeer, buf, sizeof(buf), MSG_DONTWAIT);
	}
	assert_true(d.fired);
	assert_int_equal(d.why, REASON_CLOSE_LIFETIME);
	fx_close(&f);
}

static void
test_kill(void **st)
{
	struct fixture f;
	struct done d = { 0 };
	struct tunnel_opts o = { .splice = true, .idle_ms = 100000, .lifetime_ms = 100000 };
	char c;

	fx_open(&f);
	struct tunnel *t = tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, NULL, 0, NULL, 0,
	    &o, on_done, &d);
	assert_non_null(t);
	run_until(&f, &d, 50);
	assert_false(d.fired);
	tunnel_close(t, REASON_CLOSE_REVOKED);
	assert_true(d.fired);                    /* synchronously */
	assert_int_equal(d.why, REASON_CLOSE_REVOKED);
	assert_int_equal(recv(f.cpeer, &c, 1, 0), 0);
	assert_int_equal(recv(f.upeer, &c, 1, 0), 0);
	fx_close(&f);
}

static void
test_byte_budget(void **st)
{
	for (int m = 0; m < 2; m++) {
		struct fixture f;
		struct done d = { 0 };
		uint64_t total = 900;           /* the grant already used 900 of its 1000 bytes */
		struct tunnel_opts o = { .splice = m == 0, .idle_ms = 5000, .lifetime_ms = 60000,
			.bytes_total = &total, .bytes_limit = 1000 };
		char buf[4096];

		memset(buf, 'b', sizeof(buf));
		fx_open(&f);
		assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, NULL, 0, NULL, 0,
		    &o, on_done, &d));
		assert_int_equal(send(f.cpeer, buf, 50, 0), 50);
		run_until(&f, &d, 100);
		assert_false(d.fired);          /* 950: still within the budget */
		assert_int_equal(send(f.cpeer, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
		run_until(&f, &d, 2000);
		assert_true(d.fired);
		assert_int_equal(d.why, REASON_LIMIT_BYTES);
		/* overshoot is bounded by one buffer */
		assert_true(total <= 1000 + 65536);
		fx_close(&f);
	}
}

/* ---- HTTP exchange ---- */

static size_t
read_all(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	struct timeval tv = { 2, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (;;) {
		ssize_t k = recv(fd, buf + n, cap - n, 0);
		if (k <= 0)
			break;
		n += (size_t)k;
		if (n == cap)
			break;
	}
	return n;
}

static void
test_http_exchange(void **st)
{
	struct fixture f;
	struct done d = { 0 };
	struct tunnel_opts o = { .http = true, .idle_ms = 2000, .lifetime_ms = 60000,
		.req_body = 1, .req_body_len = 10 };
	static const char head[] = "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n"
	    "Connection: close\r\n\r\n";
	/* 4 body bytes arrived with the head, then a smuggled request would follow */
	static const char pending[] = "0123";
	char buf[4096];
	size_t n;

	fx_open(&f);
	assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, head, sizeof(head) - 1,
	    pending, sizeof(pending) - 1, &o, on_done, &d));
	assert_int_equal(send(f.cpeer, "456789GET http://evil/ HTTP/1.1\r\n\r\n", 35, 0), 35);
	run_until(&f, &d, 200);
	/* the origin got exactly the head and the 10 body bytes, nothing after */
	n = (size_t)recv(f.upeer, buf, sizeof(buf), MSG_DONTWAIT);
	assert_int_equal(n, sizeof(head) - 1 + 10);
	assert_memory_equal(buf, head, sizeof(head) - 1);
	assert_memory_equal(buf + sizeof(head) - 1, "0123456789", 10);
	/* the response head is rebuilt: hop-by-hop headers out, Via, Connection: close */
	static const char resp[] = "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5\r\n"
	    "Connection: keep-alive\r\nContent-Length: 2\r\n\r\nok";
	assert_int_equal(send(f.upeer, resp, sizeof(resp) - 1, 0), (ssize_t)sizeof(resp) - 1);
	shutdown(f.upeer, SHUT_WR);
	run_until(&f, &d, 2000);
	assert_true(d.fired);
	assert_int_equal(d.why, REASON_CLOSE_UPSTREAM);
	n = read_all(f.cpeer, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	assert_string_equal(buf, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
	    "Via: 1.1 egressd\r\nConnection: close\r\n\r\nok");
	fx_close(&f);
}

static void
test_http_chunked_body(void **st)
{
	struct fixture f;
	struct done d = { 0 };
	struct tunnel_opts o = { .http = true, .idle_ms = 2000, .lifetime_ms = 60000,
		.req_body = 2 };
	static const char body[] = "5\r\nhello\r\n0\r\n\r\n";
	char buf[256];
	ssize_t n;

	fx_open(&f);
	struct tunnel *t = tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, "H\r\n\r\n", 5,
	    NULL, 0, &o, on_done, &d);
	assert_non_null(t);
	assert_int_equal(send(f.cpeer, "5\r\nhello\r\n0\r\n\r\nPIPELINED", 24, 0), 24);
	run_until(&f, &d, 200);
	n = recv(f.upeer, buf, sizeof(buf), MSG_DONTWAIT);
	assert_int_equal(n, 5 + sizeof(body) - 1);
	assert_memory_equal(buf + 5, body, sizeof(body) - 1);
	assert_false(d.fired);
	tunnel_close(t, REASON_CLOSE_REVOKED);
	assert_true(d.fired);
	assert_int_equal(d.up, 5 + sizeof(body) - 1);
	fx_close(&f);
}

static void
test_http_interim(void **st)
{
	struct fixture f;
	struct done d = { 0 };
	struct tunnel_opts o = { .http = true, .idle_ms = 2000, .lifetime_ms = 60000 };
	static const char resp[] = "HTTP/1.1 100 Continue\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\nok";
	char buf[1024];
	size_t n;

	fx_open(&f);
	assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, "GET / HTTP/1.1\r\n\r\n",
	    18, NULL, 0, &o, on_done, &d));
	/* interim and final head in one segment */
	assert_int_equal(send(f.upeer, resp, sizeof(resp) - 1, 0), (ssize_t)sizeof(resp) - 1);
	shutdown(f.upeer, SHUT_WR);
	run_until(&f, &d, 2000);
	assert_true(d.fired);
	n = read_all(f.cpeer, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	assert_string_equal(buf, "HTTP/1.1 100 Continue\r\nVia: 1.1 egressd\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nVia: 1.1 egressd\r\n"
	    "Connection: close\r\n\r\nok");
	fx_close(&f);

	/* a 101 nobody asked for is refused */
	memset(&d, 0, sizeof(d));
	fx_open(&f);
	assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, "GET / HTTP/1.1\r\n\r\n",
	    18, NULL, 0, &o, on_done, &d));
	static const char sw[] = "HTTP/1.1 101 Switching Protocols\r\n\r\n";
	assert_int_equal(send(f.upeer, sw, sizeof(sw) - 1, 0), (ssize_t)sizeof(sw) - 1);
	run_until(&f, &d, 2000);
	assert_true(d.fired);
	assert_int_equal(d.why, REASON_BAD_RESPONSE);
	fx_close(&f);
}

/* ---- docs/redirects.md: framed responses, keep-alive hand-back, response hook ---- */

static void
test_http_keep_client(void **st)
{
	struct fixture f;
	struct done d = { 0 };
	bool kept = false;
	struct tunnel_opts o = { .http = true, .idle_ms = 2000, .lifetime_ms = 60000,
		.keep_client = true, .client_kept = &kept };
	static const char resp[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "2\r\nok\r\n0\r\n\r\nGARBAGE";
	char buf[1024];
	ssize_t n;

	fx_open(&f);
	assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, "GET / HTTP/1.1\r\n\r\n",
	    18, NULL, 0, &o, on_done, &d));
	/* the next request, already sent: never read by the tunnel */
	assert_int_equal(send(f.cpeer, "GET /next", 9, 0), 9);
	/* no shutdown from the origin: the framing alone ends the response */
	assert_int_equal(send(f.upeer, resp, sizeof(resp) - 1, 0), (ssize_t)sizeof(resp) - 1);
	run_until(&f, &d, 2000);
	assert_true(d.fired);
	assert_true(kept);
	n = recv(f.cpeer, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	    "Via: 1.1 egressd\r\n\r\n2\r\nok\r\n0\r\n\r\n");
	/* the client socket is still open and still holds the unread next request */
	n = recv(f.cfd, buf, sizeof(buf), MSG_DONTWAIT);
	assert_int_equal(n, 9);
	close(f.cfd);
	fx_close(&f);
}

static void
test_http_close_delimited_not_kept(void **st)
{
	struct fixture f;
	struct done d = { 0 };
	bool kept = false;
	struct tunnel_opts o = { .http = true, .idle_ms = 2000, .lifetime_ms = 60000,
		.keep_client = true, .client_kept = &kept };
	static const char resp[] = "HTTP/1.1 200 OK\r\n\r\nuntil close";
	char buf[1024];
	size_t n;

	fx_open(&f);
	assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, "GET / HTTP/1.1\r\n\r\n",
	    18, NULL, 0, &o, on_done, &d));
	assert_int_equal(send(f.upeer, resp, sizeof(resp) - 1, 0), (ssize_t)sizeof(resp) - 1);
	shutdown(f.upeer, SHUT_WR);
	run_until(&f, &d, 2000);
	assert_true(d.fired);
	assert_false(kept);
	n = read_all(f.cpeer, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	assert_string_equal(buf, "HTTP/1.1 200 OK\r\nVia: 1.1 egressd\r\nConnection: close\r\n"
	    "\r\nuntil close");
	fx_close(&f);
}

static enum reason
refuse_redirects(const struct httpresp *r, char *refusal, size_t *nrefusal, void *arg)
{
	static const char no[] = "HTTP/1.1 403 Forbidden\r\nContent-Length: 3\r\n\r\nno\n";

	(void)arg;
	if (r->status < 300 || r->status > 399)
		return REASON_ALLOWED;
	memcpy(refusal, no, sizeof(no) - 1);
	*nrefusal = sizeof(no) - 1;
	return REASON_REDIRECT_DENIED;
}

static void
test_http_response_hook(void **st)
{
	static const char *const bad[] = {
		/* both framings: the smuggling shape */
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
	};
	struct fixture f;
	struct done d = { 0 };
	struct tunnel_opts o = { .http = true, .idle_ms = 2000, .lifetime_ms = 60000,
		.on_response = refuse_redirects };
	static const char resp[] = "HTTP/1.1 302 Found\r\nLocation: http://x/\r\n"
	    "Content-Length: 0\r\n\r\n";
	char buf[1024];
	size_t n;

	fx_open(&f);
	assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, "GET / HTTP/1.1\r\n\r\n",
	    18, NULL, 0, &o, on_done, &d));
	assert_int_equal(send(f.upeer, resp, sizeof(resp) - 1, 0), (ssize_t)sizeof(resp) - 1);
	run_until(&f, &d, 2000);
	assert_true(d.fired);
	assert_int_equal(d.why, REASON_REDIRECT_DENIED);
	n = read_all(f.cpeer, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	assert_string_equal(buf, "HTTP/1.1 403 Forbidden\r\nContent-Length: 3\r\n\r\nno\n");
	fx_close(&f);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&d, 0, sizeof(d));
		fx_open(&f);
		assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0,
		    "GET / HTTP/1.1\r\n\r\n", 18, NULL, 0, &o, on_done, &d));
		assert_int_equal(send(f.upeer, bad[i], strlen(bad[i]), 0), (ssize_t)strlen(bad[i]));
		run_until(&f, &d, 2000);
		assert_true(d.fired);
		assert_int_equal(d.why, REASON_BAD_RESPONSE);
		fx_close(&f);
	}
}

static void
test_http_bad_response(void **st)
{
	struct fixture f;
	struct done d = { 0 };
	struct tunnel_opts o = { .http = true, .idle_ms = 2000, .lifetime_ms = 60000 };
	char buf[1024];
	size_t n;

	fx_open(&f);
	assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, "GET / HTTP/1.1\r\n\r\n",
	    18, NULL, 0, &o, on_done, &d));
	assert_int_equal(send(f.upeer, "SSH-2.0-OpenSSH\r\n\r\n", 19, 0), 19);
	run_until(&f, &d, 2000);
	assert_true(d.fired);
	assert_int_equal(d.why, REASON_BAD_RESPONSE);
	n = read_all(f.cpeer, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "HTTP/1.1 502 "));
	assert_non_null(strstr(buf, "X-Egress-Reason: bad_response"));
	fx_close(&f);
}

static void
test_http_no_answer(void **st)
{
	struct fixture f;
	struct done d = { 0 };
	struct tunnel_opts o = { .http = true, .idle_ms = 150, .lifetime_ms = 60000 };
	char buf[1024];
	size_t n;

	fx_open(&f);
	assert_non_null(tunnel_new(f.base, f.pool, f.cfd, f.ufd, NULL, 0, "GET / HTTP/1.1\r\n\r\n",
	    18, NULL, 0, &o, on_done, &d));
	run_until(&f, &d, 2000);
	assert_true(d.fired);
	assert_int_equal(d.why, REASON_UPSTREAM_TIMEOUT);
	n = read_all(f.cpeer, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "HTTP/1.1 504 "));
	fx_close(&f);
}

/*
 * tunnel_new when an allocation fails, each one in turn (the tunnel, each direction's
 * pre-sent bytes, the pending bytes, the retry copy of the head): it returns NULL, the
 * caller still owns both sockets, no pipe left the pool, the callback never runs, and
 * nothing leaks (LeakSanitizer in the sanitizer build). A half-built tunnel used to be
 * freed with a direction not yet set up (a NULL dereference, or fd 0 handed to the pool).
 * Then, with no failure armed, the same call succeeds and relays.
 */
static void
oom_through(bool splice, bool http)
{
	struct fixture f;
	struct done d = { 0 };
	struct tunnel_opts o = { .splice = splice, .http = http, .idle_ms = 2000,
		.lifetime_ms = 60000, .retry = http, .retry_port = 1 };
	static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
	static const char head[] = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
	static const char early[] = "early bytes";
	struct tunnel *t = NULL;
	int k;

	fx_open(&f);
	for (k = 0; k < 64; k++) {
		alloc_failed = false;
		alloc_fail_in = k;
		t = tunnel_new(f.base, f.pool, f.cfd, f.ufd, http ? NULL : ok, http ? 0 : sizeof(ok) - 1,
		    head, sizeof(head) - 1, http ? NULL : early, http ? 0 : sizeof(early) - 1, &o,
		    on_done, &d);
		alloc_fail_in = -1;
		if (!alloc_failed)
			break;          /* every allocation of tunnel_new succeeded */
		assert_null(t);         /* a failed allocation never goes unnoticed */
		assert_false(d.fired);
		assert_int_not_equal(fcntl(f.cfd, F_GETFD), -1);   /* the caller's still */
		assert_int_not_equal(fcntl(f.ufd, F_GETFD), -1);
		assert_int_equal(pipe_pool_in_use(f.pool), 0);
		assert_int_equal(pipe_pool_idle(f.pool), 0);
	}
	/* the tunnel, two pre-sent buffers (http: one, and the retry copy), the pending bytes */
	assert_true(k >= 3 && k < 64);
	assert_non_null(t);
	char buf[256];
	size_t want = sizeof(head) - 1 + (http ? 0 : sizeof(early) - 1);
	run_until(&f, &d, 100);
	/* the origin got the head (and the early bytes) and nothing more, the client the 200 */
	assert_int_equal(read_all(f.upeer, buf, want), want);
	assert_int_equal(recv(f.upeer, buf + want, sizeof(buf) - want, MSG_DONTWAIT), -1);
	assert_memory_equal(buf, head, sizeof(head) - 1);
	if (!http) {
		assert_memory_equal(buf + sizeof(head) - 1, early, sizeof(early) - 1);
		assert_int_equal(read_all(f.cpeer, buf, sizeof(ok) - 1), sizeof(ok) - 1);
		assert_memory_equal(buf, ok, sizeof(ok) - 1);
	}
	tunnel_close(t, REASON_CLOSE_REVOKED);
	assert_true(d.fired);
	fx_close(&f);
}

static void test_oom_splice(void **st) { oom_through(true, false); }
static void test_oom_copy(void **st) { oom_through(false, false); }
static void test_oom_http(void **st) { oom_through(false, true); }

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bulk_splice),
		cmocka_unit_test(test_bulk_splice_one_big),
		cmocka_unit_test(test_bulk_splice_no_big),
		cmocka_unit_test(test_bulk_big_reused),
		cmocka_unit_test(test_bulk_big_refused),
		cmocka_unit_test(test_bulk_copy),
		cmocka_unit_test(test_idle_holds_no_pipe),
		cmocka_unit_test(test_half_close_splice),
		cmocka_unit_test(test_half_close_copy),
		cmocka_unit_test(test_idle),
		cmocka_unit_test(test_lifetime),
		cmocka_unit_test(test_kill),
		cmocka_unit_test(test_byte_budget),
		cmocka_unit_test(test_http_exchange),
		cmocka_unit_test(test_http_chunked_body),
		cmocka_unit_test(test_http_interim),
		cmocka_unit_test(test_http_keep_client),
		cmocka_unit_test(test_http_close_delimited_not_kept),
		cmocka_unit_test(test_http_response_hook),
		cmocka_unit_test(test_http_bad_response),
		cmocka_unit_test(test_http_no_answer),
		cmocka_unit_test(test_oom_splice),
		cmocka_unit_test(test_oom_copy),
		cmocka_unit_test(test_oom_http),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
