/*
 * egrelay - the bare CONNECT relay of the benchmark (see docs/performance.md).
 *
 * The floor every real proxy costs more than: one thread, one epoll set, edge-triggered
 * events registered once per socket (no re-arming), splice(2) through pipes taken from a
 * pool only while bytes move, and *no checks at all*: no authorization, no address
 * classes, no name resolution (the CONNECT target must be an IPv4 literal), no log, no
 * limits beyond the fd limit. It exists only so that the benchmark can say how far each
 * proxy is from what the kernel makes possible on this machine. Never run it anywhere but
 * inside the benchmark: it relays to any address it is asked for.
 *
 * Usage: egrelay --listen 127.0.0.1:PORT [--listen ...] [--port-file F] [--work-us N]
 *               [--pipe-size BYTES] [--per-cpu]
 *   PORT 0 picks a free port; --port-file receives the first listener's port (written
 *   last, by rename, so a reader that sees the file can connect at once). --work-us N
 *   (0..1000, default 0) spins N microseconds of CPU on the relay's one thread for every
 *   connection it accepts: the benchmark's "work budget" rows (docs/performance.md) use it
 *   to measure what a given amount of per-transaction work costs a proxy on this machine.
 *   --pipe-size BYTES (4096..1048576; default: the kernel's 64 KiB) sets every pipe's size
 *   (F_SETPIPE_SZ) when it is made: what egressd's big pipes for bulk directions are
 *   worth to a relay that does nothing else (docs/performance.md).
 *   --per-cpu (one --listen only): a placement experiment, not the floor. One process per
 *   online CPU, each pinned to its CPU with its own epoll set and its own listening socket
 *   on the port (SO_REUSEPORT); a classic BPF program on the group (SKF_AD_CPU) hands
 *   each new connection to the process of the CPU its SYN was processed on - for a
 *   loopback client, the client's own CPU. So a connection is served where its client
 *   runs, and the wake-ups between them stay on one CPU (docs/performance.md, "The
 *   twenty-first round"). The parent only waits; SIGTERM to it ends every child.
 * A transaction: read the head (up to RELAY_HEAD_MAX bytes) until the blank line, parse
 * `CONNECT a.b.c.d:port HTTP/1.x`, connect, answer `200`, relay both directions until each
 * has seen EOF (half-close forwarded with shutdown(SHUT_WR)) or either side fails.
 * Anything else is answered with a 400 and closed. SIGTERM/SIGINT end it; it prints its
 * counters to stderr.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RELAY_LISTEN_MAX 32
#define RELAY_HEAD_MAX   4096
#define RELAY_SPLICE     (1u << 20)     /* bytes asked of one splice(2) */
#define RELAY_POOL_MAX   256            /* idle pipes kept for reuse */
#define RELAY_EVENTS     256
#define RELAY_CPU_MAX    64             /* --per-cpu: processes at most */

static const char ok200[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
static const char bad400[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";

enum tstate { T_HEAD, T_CONNECTING, T_RELAY };

struct tunnel;

/* What an epoll event points at: a listener (t == NULL) or one side of a tunnel. */
struct endpoint {
	struct tunnel *t;
	int side;               /* 0 client, 1 upstream */
	int lfd;                /* listener fd when t == NULL */
};

/* One direction: bytes from fd[src] to fd[1 - src] through a pipe while they move. */
struct dir {
	int pipe[2];            /* -1 when none is held */
	size_t inpipe;
	bool eof;               /* src said EOF and the pipe is flushed: dst was shut */
};

struct tunnel {
	int fd[2];
	enum tstate st;
	struct endpoint ep[2];
	struct dir d[2];        /* d[0]: client -> upstream, d[1]: upstream -> client */
	char *head;             /* only while reading the head; freed before the relay */
	size_t headlen;
	bool dead;              /* ended in this epoll batch: freed after the batch */
	struct tunnel *next_dead;
};

static int epfd = -1;
static int pool[RELAY_POOL_MAX][2];
static unsigned npool;
static volatile sig_atomic_t stop;
static struct tunnel *graveyard;
static unsigned long long n_accepted, n_tunnels, n_refused, n_bytes;
static long work_ns;    /* --work-us, in ns */
static int pipe_size;   /* --pipe-size; 0: the kernel's default */

/* --work-us: busy work standing in for what a real proxy does per transaction (checks,
 * records). A spin on the monotonic clock (vDSO: no system call), not a sleep. */
static void
busy_work(void)
{
	struct timespec a, b;

	if (work_ns <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < work_ns);
}

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int
parse_sin(const char *s, struct sockaddr_in *sin)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	char *end;

	if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);

	if (errno != 0 || *end != '\0' || end == colon + 1 || port > 65535)
		return -1;
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &sin->sin_addr) == 1 ? 0 : -1;
}

static int
pipe_get(int p[2])
{
	if (npool > 0) {
		npool--;
		p[0] = pool[npool][0];
		p[1] = pool[npool][1];
		return 0;
	}
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
		return -1;
	if (pipe_size > 0 && fcntl(p[1], F_SETPIPE_SZ, pipe_size) < pipe_size) {
		fprintf(stderr, "egrelay: F_SETPIPE_SZ %d: %s\n", pipe_size, strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	return 0;
}

static void
pipe_put(int p[2])
{
	if (p[0] < 0)
		return;
	if (npool < RELAY_POOL_MAX) {
		pool[npool][0] = p[0];
		pool[npool][1] = p[1];
		npool++;
	} else {
		close(p[0]);
		close(p[1]);
	}
	p[0] = p[1] = -1;
}

static void
tunnel_free(struct tunnel *t)
{
	for (int i = 0; i < 2; i++) {
		if (t->fd[i] >= 0)
			close(t->fd[i]);
		/* A pipe with bytes left in it cannot go back to the pool. */
		if (t->d[i].pipe[0] >= 0) {
			if (t->d[i].inpipe == 0) {
				pipe_put(t->d[i].pipe);
			} else {
				close(t->d[i].pipe[0]);
				close(t->d[i].pipe[1]);
			}
		}
	}
	free(t->head);
	t->head = NULL;
	/*
	 * Events for the other side may already have been copied out by this epoll_wait:
	 * keep the struct until the batch is done (close() removed both epoll entries).
	 */
	t->dead = true;
	t->next_dead = graveyard;
	graveyard = t;
}

static void
graveyard_empty(void)
{
	while (graveyard != NULL) {
		struct tunnel *t = graveyard;

		graveyard = t->next_dead;
		free(t);
	}
}

static int
watch(struct tunnel *t, int side)
{
	struct epoll_event ev = {
		.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
		.data.ptr = &t->ep[side],
	};

	t->ep[side].t = t;
	t->ep[side].side = side;
	return epoll_ctl(epfd, EPOLL_CTL_ADD, t->fd[side], &ev);
}

/* Move what can move in direction i. Returns -1 when the tunnel must end. */
static int
pump(struct tunnel *t, int i)
{
	struct dir *d = &t->d[i];
	int src = t->fd[i], dst = t->fd[1 - i];

	if (d->eof)
		return 0;
	for (;;) {
		if (d->inpipe > 0) {
			ssize_t n = splice(d->pipe[0], NULL, dst, NULL, d->inpipe,
			    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

			if (n < 0)
				return errno == EAGAIN ? 0 : -1;
			d->inpipe -= (size_t)n;
			n_bytes += (unsigned long long)n;
			continue;
		}
		if (d->pipe[0] < 0 && pipe_get(d->pipe) != 0)
			return -1;
		ssize_t n = splice(src, NULL, d->pipe[1], NULL, RELAY_SPLICE,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

		if (n > 0) {
			d->inpipe = (size_t)n;
			continue;
		}
		pipe_put(d->pipe);
		if (n == 0) {
			d->eof = true;
			shutdown(dst, SHUT_WR);
			return 0;
		}
		return errno == EAGAIN ? 0 : -1;
	}
}

static void
relay(struct tunnel *t)
{
	if (pump(t, 0) != 0 || pump(t, 1) != 0 || (t->d[0].eof && t->d[1].eof))
		tunnel_free(t);
}

static void
refuse(struct tunnel *t)
{
	n_refused++;
	(void)send(t->fd[0], bad400, sizeof(bad400) - 1, MSG_NOSIGNAL);
	tunnel_free(t);
}

/* The head is complete at t->head[0..end): parse it and start the upstream connect. */
static void
start_connect(struct tunnel *t)
{
	char target[64];
	struct sockaddr_in sin;
	const char *p = t->head, *sp;

	if (t->headlen < 8 || memcmp(p, "CONNECT ", 8) != 0)
		return refuse(t);
	p += 8;
	sp = memchr(p, ' ', t->headlen - 8);
	if (sp == NULL || (size_t)(sp - p) >= sizeof(target))
		return refuse(t);
	memcpy(target, p, (size_t)(sp - p));
	target[sp - p] = '\0';
	if (parse_sin(target, &sin) != 0)
		return refuse(t);
	t->fd[1] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (t->fd[1] < 0)
		return refuse(t);
	int one = 1;

	setsockopt(t->fd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(t->fd[1], (struct sockaddr *)&sin, sizeof(sin)) != 0 && errno != EINPROGRESS)
		return refuse(t);
	t->st = T_CONNECTING;
	if (watch(t, 1) != 0)
		return refuse(t);
}

static void
on_client_head(struct tunnel *t)
{
	for (;;) {
		if (t->headlen >= RELAY_HEAD_MAX)
			return refuse(t);
		ssize_t n = recv(t->fd[0], t->head + t->headlen, RELAY_HEAD_MAX - t->headlen, 0);

		if (n == 0)
			return tunnel_free(t);
		if (n < 0)
			return errno == EAGAIN ? (void)0 : tunnel_free(t);
		size_t from = t->headlen > 3 ? t->headlen - 3 : 0;

		t->headlen += (size_t)n;
		void *e = memmem(t->head + from, t->headlen - from, "\r\n\r\n", 4);

		if (e != NULL) {
			/* A client that sends bytes before the 200 is not one of ours. */
			if ((char *)e + 4 != t->head + t->headlen)
				return refuse(t);
			return start_connect(t);
		}
	}
}

static void
on_connected(struct tunnel *t)
{
	int err = 0;
	socklen_t el = sizeof(err);

	if (getsockopt(t->fd[1], SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0)
		return refuse(t);
	free(t->head);
	t->head = NULL;
	/* 39 bytes into a fresh socket's empty send buffer: a short write is a failure. */
	if (send(t->fd[0], ok200, sizeof(ok200) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(ok200) - 1))
		return tunnel_free(t);
	t->st = T_RELAY;
	n_tunnels++;
	relay(t);
}

static void
on_accept(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		n_accepted++;
		busy_work();
		struct tunnel *t = calloc(1, sizeof(*t));

		if (t == NULL || (t->head = malloc(RELAY_HEAD_MAX)) == NULL) {
			free(t);
			close(fd);
			continue;
		}
		t->fd[0] = fd;
		t->fd[1] = -1;
		t->d[0].pipe[0] = t->d[0].pipe[1] = -1;
		t->d[1].pipe[0] = t->d[1].pipe[1] = -1;
		t->st = T_HEAD;
		int one = 1;

		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (watch(t, 0) != 0) {
			tunnel_free(t);
			continue;
		}
		/* Edge-triggered: the head may already be there. */
		on_client_head(t);
	}
}

static void
on_event(struct endpoint *ep, uint32_t events)
{
	struct tunnel *t = ep->t;

	if (t == NULL)
		return on_accept(ep->lfd);
	if (t->dead)
		return;
	switch (t->st) {
	case T_HEAD:
		if (ep->side == 0 && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
			on_client_head(t);
		return;
	case T_CONNECTING:
		if (ep->side == 1 && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			on_connected(t);
		else if (ep->side == 0 && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
			tunnel_free(t);
		return;
	case T_RELAY:
		relay(t);
		return;
	}
}

static int relay_cpu = -1;      /* --per-cpu: the CPU this process serves */

/* The event loop of one process, until SIGTERM/SIGINT. The signals are blocked but while
 * it waits (epoll_pwait), so one that comes between the check and the wait is not lost. */
static int
run_loop(void)
{
	static struct epoll_event evs[RELAY_EVENTS];
	sigset_t block, waitmask;

	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGINT);
	while (!stop) {
		int n = epoll_pwait(epfd, evs, RELAY_EVENTS, -1, &waitmask);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		for (int i = 0; i < n; i++)
			on_event(evs[i].data.ptr, evs[i].events);
		graveyard_empty();
	}
	{
		/* one write: the processes of --per-cpu share stderr */
		char line[200], who[32] = "egrelay:";
		int n;

		if (relay_cpu >= 0)
			snprintf(who, sizeof(who), "egrelay cpu=%d:", relay_cpu);
		n = snprintf(line, sizeof(line), "%s accepted=%llu tunnels=%llu refused=%llu "
		    "bytes=%llu\n", who, n_accepted, n_tunnels, n_refused, n_bytes);
		if (n > 0 && (size_t)n < sizeof(line))
			(void)!write(2, line, (size_t)n);
	}
	return 0;
}

/* A listening socket on *sin (port 0: a free one, written back); -1 on failure. */
static int
listen_on(struct sockaddr_in *sin, bool reuseport)
{
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	socklen_t sl = sizeof(*sin);

	if (lfd < 0)
		return -1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if ((reuseport && setsockopt(lfd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) ||
	    bind(lfd, (struct sockaddr *)sin, sizeof(*sin)) != 0 || listen(lfd, 4096) != 0 ||
	    getsockname(lfd, (struct sockaddr *)sin, &sl) != 0) {
		fprintf(stderr, "egrelay: listen: %s\n", strerror(errno));
		close(lfd);
		return -1;
	}
	return lfd;
}

static int
watch_listener(struct endpoint *ep, int lfd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = ep };

	ep->t = NULL;
	ep->lfd = lfd;
	return epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
}

static int
write_port_file(const char *port_file, const struct sockaddr_in *sin)
{
	char tmp[4096];
	int n = snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
	FILE *f;

	if (n < 0 || (size_t)n >= sizeof(tmp) || (f = fopen(tmp, "w")) == NULL)
		return -1;
	fprintf(f, "%u\n", ntohs(sin->sin_port));
	if (fclose(f) != 0 || rename(tmp, port_file) != 0)
		return -1;
	return 0;
}

/* Reap what has ended of kid[] (without waiting): each reaped entry becomes 0. Returns
 * how many are left; 0 also when there are no children any more (ECHILD). */
static int
reap_children(pid_t *kid, int nkid)
{
	int left = 0;
	pid_t w;

	while ((w = waitpid(-1, NULL, WNOHANG)) > 0)
		for (int i = 0; i < nkid; i++)
			if (kid[i] == w)
				kid[i] = 0;
	if (w < 0 && errno == ECHILD)
		return 0;
	for (int i = 0; i < nkid; i++)
		left += kid[i] != 0;
	return left;
}

/* Stop the children: SIGTERM, up to 2 s for them to end, then SIGKILL to those still
 * there (never to a pid already reaped, which may be another process's now). */
static void
stop_children(pid_t *kid, int nkid)
{
	for (int i = 0; i < nkid; i++)
		if (kid[i] != 0)
			kill(kid[i], SIGTERM);
	for (int t = 0; t < 200 && reap_children(kid, nkid) > 0; t++)
		usleep(10000);
	if (reap_children(kid, nkid) > 0) {
		for (int i = 0; i < nkid; i++)
			if (kid[i] != 0)
				kill(kid[i], SIGKILL);
		while (wait(NULL) > 0)
			;
	}
}

/*
 * --per-cpu: a listening socket per CPU in one SO_REUSEPORT group, in CPU order, so that
 * the group's program (return the CPU number) picks socket i for a connection whose SYN
 * was processed on CPU i; then a child per CPU, pinned there, serving its socket. The
 * CPUs this process may use must be 0..n-1: a CPU number past the group's sockets would
 * fall back to the kernel's hash, and the steering would be gone.
 */
static int
run_per_cpu(struct sockaddr_in *sin, const char *port_file)
{
	static struct endpoint lep;
	struct sock_filter code[] = {
		{ BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)(SKF_AD_OFF + SKF_AD_CPU) },
		{ BPF_RET | BPF_A, 0, 0, 0 },
	};
	struct sock_fprog prog = { .len = 2, .filter = code };
	int lfd[RELAY_CPU_MAX], ncpu, nkid = 0, rc = 0;
	pid_t kid[RELAY_CPU_MAX], parent = getpid();
	sigset_t block, old;
	cpu_set_t allowed;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
		fprintf(stderr, "egrelay: sched_getaffinity: %s\n", strerror(errno));
		return 1;
	}
	ncpu = CPU_COUNT(&allowed);
	for (int c = 0; c < ncpu; c++) {
		if (c >= RELAY_CPU_MAX || !CPU_ISSET(c, &allowed)) {
			fprintf(stderr, "egrelay: --per-cpu needs the %d CPUs it may use to be "
			    "CPUs 0..%d (at most %d); CPU %d is not one of them\n", ncpu, ncpu - 1,
			    RELAY_CPU_MAX, c);
			return 1;
		}
	}
	for (int c = 0; c < ncpu; c++) {
		/* The first bind may pick the port; the others join it. */
		if ((lfd[c] = listen_on(sin, true)) < 0)
			return 1;
	}
	if (setsockopt(lfd[0], SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) != 0) {
		fprintf(stderr, "egrelay: SO_ATTACH_REUSEPORT_CBPF: %s\n", strerror(errno));
		return 1;
	}
	/* The parent waits for a signal or a child's end with sigwaitinfo: blocked from
	 * here, so none is lost; each child unblocks what its loop waits for. */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGCHLD);
	sigprocmask(SIG_BLOCK, &block, &old);
	if (stop)                       /* a signal before the block: nothing to start */
		return 0;
	for (int c = 0; c < ncpu; c++) {
		pid_t pid = fork();

		if (pid < 0) {
			rc = 1;
			break;
		}
		if (pid == 0) {
			cpu_set_t set;
			sigset_t chld;

			sigemptyset(&chld);
			sigaddset(&chld, SIGCHLD);
			sigprocmask(SIG_UNBLOCK, &chld, NULL);
			/* a parent killed without its cleanup takes the children with it */
			if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
				_exit(1);
			CPU_ZERO(&set);
			CPU_SET(c, &set);
			if (sched_setaffinity(0, sizeof(set), &set) != 0) {
				fprintf(stderr, "egrelay: CPU %d: %s\n", c, strerror(errno));
				_exit(1);
			}
			for (int o = 0; o < ncpu; o++)
				if (o != c)
					close(lfd[o]);
			relay_cpu = c;
			epfd = epoll_create1(EPOLL_CLOEXEC);
			if (epfd < 0 || watch_listener(&lep, lfd[c]) != 0)
				_exit(1);
			_exit(run_loop());
		}
		kid[nkid++] = pid;
	}
	/* Connections that arrive before a child polls wait in its socket's queue. */
	if (rc == 0 && port_file != NULL && write_port_file(port_file, sin) != 0)
		rc = 1;
	while (rc == 0) {
		siginfo_t si;

		if (sigwaitinfo(&block, &si) < 0)
			continue;
		if (si.si_signo != SIGCHLD)
			break;
		/* a child stopped or continued is not a child ended */
		if (si.si_code != CLD_EXITED && si.si_code != CLD_KILLED &&
		    si.si_code != CLD_DUMPED)
			continue;
		fprintf(stderr, "egrelay: child %d ended\n", (int)si.si_pid);
		rc = 1;
	}
	stop_children(kid, nkid);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int
main(int argc, char **argv)
{
	const char *port_file = NULL;
	static struct endpoint lep[RELAY_LISTEN_MAX];
	struct sockaddr_in lsin[RELAY_LISTEN_MAX];
	unsigned nlisten = 0;
	bool per_cpu = false;
	struct rlimit rl;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--per-cpu") == 0) {
			per_cpu = true;
			continue;
		}
		if (i + 1 >= argc)
			goto usage;
		const char *a = argv[i], *v = argv[++i];

		if (strcmp(a, "--listen") == 0) {
			if (nlisten >= RELAY_LISTEN_MAX || parse_sin(v, &lsin[nlisten]) != 0)
				goto usage;
			nlisten++;
		} else if (strcmp(a, "--port-file") == 0) {
			port_file = v;
		} else if (strcmp(a, "--work-us") == 0) {
			char *end;
			long us = strtol(v, &end, 10);

			if (*v == '\0' || *end != '\0' || us < 0 || us > 1000)
				goto usage;
			work_ns = us * 1000L;
		} else if (strcmp(a, "--pipe-size") == 0) {
			char *end;
			long b = strtol(v, &end, 10);

			if (*v == '\0' || *end != '\0' || b < 4096 || b > 1048576)
				goto usage;
			pipe_size = (int)b;
		} else {
			goto usage;
		}
	}
	if (nlisten == 0 || (per_cpu && nlisten != 1))
		goto usage;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (per_cpu)
		return run_per_cpu(&lsin[0], port_file);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return 1;
	for (unsigned i = 0; i < nlisten; i++) {
		int lfd = listen_on(&lsin[i], false);

		if (lfd < 0 || watch_listener(&lep[i], lfd) != 0)
			return 1;
	}
	if (port_file != NULL && write_port_file(port_file, &lsin[0]) != 0)
		return 1;
	return run_loop();
usage:
	fprintf(stderr, "usage: egrelay --listen 127.0.0.1:PORT [--listen ...] [--port-file F] [--work-us N]\n"
	    "               [--pipe-size BYTES] [--per-cpu]\n");
	return 2;
}
