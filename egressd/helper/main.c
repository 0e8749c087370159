/*
 * egressd-route-helper - runs libproxy for egressd, one lookup at a time.
 *
 * Why a separate process: libproxy 0.4 can block forever (a stalled PAC server, a looping
 * script), serializes lookups behind one mutex, is unsafe from several threads, and runs
 * PAC JavaScript from the network. egressd talks to this helper over stdin/stdout with the
 * line protocol of common/routeproto.h, gives each lookup a deadline, and kills and
 * restarts the helper when one is missed. egressd fetches the PAC itself and hands it to
 * libproxy as pac+file:// (set in this process's environment by egressd), so libproxy
 * never fetches anything on its own. Where libproxy's configuration would have it discover
 * (WPAD) or fetch a PAC itself anyway (a desktop or system setting, a proxy variable egressd
 * did not recognise), the helper sees it in libproxy's debug output and answers
 * ROUTEPROTO_ERR_WPAD instead of libproxy's fail-open direct://.
 *
 * Confinement, in order: privileges dropped (to nobody when started as root), every fd but
 * 0, 1, 2 closed, no_new_privs, a Landlock read allow-list (egressd/helper/pacsandbox.h: the
 * libraries, the resolver's files, /proc, the PAC copy; nothing written anywhere), then the
 * seccomp filter: no network beyond what PAC evaluation needs (UDP for the stub resolver,
 * NETLINK_ROUTE), no server, no exec, ptrace, mounts, namespaces, modules, bpf, keyrings.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <fcntl.h>
#include <getopt.h>
#include <sys/stat.h>
#include <unistd.h>

#include <proxy.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/routeproto.h"
#include "common/util.h"
#include "egressd/helper/pacsandbox.h"

/* The PAC copy egressd wrote (from http_proxy=pac+file://PATH), or NULL. */
static const char *pac_path;
/* "pac+file://PATH" as libproxy prints it in its configuration, or NULL. */
static const char *own_pac;

/* At most this much of libproxy's debug output per lookup is read back. */
#define PX_DEBUG_MAX (64 * 1024)

/*
 * Run one libproxy lookup with its debug output (_PX_DEBUG, set before the factory is
 * made) captured in a fresh memfd instead of egressd's stderr, and tell whether libproxy
 * set out to discover (WPAD) or fetch a PAC itself (routeproto_libproxy_discovers):
 * libproxy's answer is then its fail-open direct://, never to be used. *discovers = -1
 * when the output could not be captured (the caller refuses: nothing is known).
 */
static char **
lookup(pxProxyFactory *pf, const char *url, int *discovers)
{
	static char out[PX_DEBUG_MAX];
	char **proxies;
	ssize_t n;
	int mfd = memfd_create("px-debug", MFD_CLOEXEC);
	/* egressd's stderr, kept aside for the call only (between lookups the helper holds
	 * fds 0-2 and nothing else) */
	int keep = mfd >= 0 ? fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3) : -1;

	*discovers = -1;
	if (mfd < 0 || keep < 0 || dup2(mfd, STDERR_FILENO) < 0) {
		if (mfd >= 0)
			close(mfd);
		if (keep >= 0)
			close(keep);
		return px_proxy_factory_get_proxies(pf, url);
	}
	proxies = px_proxy_factory_get_proxies(pf, url);
	fflush(stderr);
	if (dup2(keep, STDERR_FILENO) < 0)
		_exit(1);       /* stderr lost: egressd restarts the helper */
	close(keep);
	n = pread(mfd, out, sizeof(out), 0);
	close(mfd);
	if (n >= 0)
		*discovers = routeproto_libproxy_discovers(out, (size_t)n, own_pac);
	return proxies;
}

/*
 * libproxy fails open when it cannot read the PAC file (it answers direct:// for
 * everything), so before each lookup the helper checks that it can read the copy and that
 * the copy is one egressd wrote (it ends with egressd's wrapper). Returns 0 or -1.
 */
static int
pac_copy_usable(void)
{
	char tail[1024];
	struct stat st;
	off_t off;
	ssize_t n;
	int fd, ok;

	if (pac_path == NULL)
		return 0;
	fd = open(pac_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
		close(fd);
		return -1;
	}
	off = st.st_size > (off_t)sizeof(tail) ? st.st_size - (off_t)sizeof(tail) : 0;
	n = pread(fd, tail, sizeof(tail), off);
	close(fd);
	ok = n > 0 && memmem(tail, (size_t)n, PAC_WRAPPER_MARKER,
	    sizeof(PAC_WRAPPER_MARKER) - 1) != NULL;
	return ok ? 0 : -1;
}

/* The wrapper's answer for a PAC that threw or returned a non-string. */
static int
pac_error_answer(char **proxies)
{
	for (size_t i = 0; proxies != NULL && proxies[i] != NULL; i++)
		if (strstr(proxies[i], PAC_ERROR_HOST) != NULL)
			return 1;
	return 0;
}

static void
answer(pxProxyFactory *pf, const char *line, size_t len)
{
	char url[EGRESS_ROUTE_LINE_MAX];
	char out[EGRESS_ROUTE_LINE_MAX + 64];
	uint64_t id;
	size_t n;
	char **proxies;
	int discovers;

	if (routeproto_parse_request(line, len, &id, url, sizeof(url)) != 0) {
		/* no usable id: egressd times the lookup out; say so on stderr */
		log_warnx("malformed request ignored");
		return;
	}
	if (pac_copy_usable() != 0) {
		log_warnx("cannot use the PAC copy %s (unreadable by this helper's user, or not "
		    "written by egressd): make its directory traversable and the file readable",
		    pac_path);
		n = routeproto_format_error(id, "pac_unreadable", out, sizeof(out));
		if (write_all(STDOUT_FILENO, out, n) != 0)
			exit(1);
		return;
	}
	proxies = lookup(pf, url, &discovers);
	if (discovers != 0) {
		/* libproxy's own WPAD or PAC fetch (failed: no TCP here) answers direct://:
		 * never used. egressd discovers and fetches itself (egressd/wpad.h). */
		if (discovers > 0)
			log_warnx("libproxy's configuration asks for its own WPAD or PAC fetch "
			    "(desktop or system settings): refused; egressd runs WPAD itself");
		n = routeproto_format_error(id, discovers > 0 ? ROUTEPROTO_ERR_WPAD :
		    "debug_capture", out, sizeof(out));
	} else if (pac_error_answer(proxies))
		n = routeproto_format_error(id, "pac_error", out, sizeof(out));
	else
		n = routeproto_format_reply(id, proxies, out, sizeof(out));
	if (proxies != NULL)
		px_proxy_factory_free_proxies(proxies);
	if (n == 0)
		n = routeproto_format_error(id, "bad_answer", out, sizeof(out));
	if (write_all(STDOUT_FILENO, out, n) != 0)
		exit(1);
}

int
main(int argc, char **argv)
{
	static char buf[EGRESS_ROUTE_LINE_MAX + 2];
	size_t have = 0;
	int discarding = 0;
	pxProxyFactory *pf;
	char err[256];

	/* Only egressd starts it, with no arguments; a person may ask what it is. */
	if (argc > 1) {
		static const struct option longopts[] = {
			{ "help", no_argument, NULL, 'h' },
			{ "version", no_argument, NULL, 'V' },
			{ NULL, 0, NULL, 0 },
		};
		int ch = getopt_long(argc, argv, "hV", longopts, NULL);

		if (ch == 'V') {
			printf("egressd-route-helper %s\n", EGRESS_VERSION);
			return 0;
		}
		fprintf(ch == 'h' ? stdout : stderr, "usage: egressd-route-helper [--help | "
		    "--version]\nThe libproxy helper of egressd(8): egressd starts it and talks "
		    "to it over stdin/stdout;\nit is not run by hand. See docs/routing.md.\n");
		return ch == 'h' ? 0 : 2;
	}
	log_init("egressd-route-helper", 0);
	signal(SIGPIPE, SIG_IGN);
	closefrom(3);
	if (pacsandbox_drop(err, sizeof(err)) != 0)
		fatalx("%s", err);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		fatal("no_new_privs");
	{
		const char *hp = getenv("http_proxy");
		if (hp != NULL && strncmp(hp, "pac+file://", 11) == 0 && hp[11] == '/') {
			pac_path = hp + 11;
			own_pac = hp;
		}
	}
	/* libproxy says which configuration it acts on only in its debug output: each lookup
	 * captures it (lookup()) to catch libproxy's own WPAD and PAC fetches. */
	if (setenv("_PX_DEBUG", "1", 1) != 0)
		fatal("cannot set up libproxy's debug capture");
	pf = px_proxy_factory_new();
	if (pf == NULL)
		fatalx("libproxy: cannot create a proxy factory");
	/* Files first (Landlock needs its own system calls), then the system-call filter. */
	switch (pacsandbox_landlock(pac_path, err, sizeof(err))) {
	case 0:
		break;
	case 1:
		log_info("no Landlock in this kernel: the seccomp filter alone keeps files "
		    "read-only (other files of the egressd user stay readable)");
		break;
	default:
		fatalx("%s", err);
	}
	if (pacsandbox_filter(err, sizeof(err)) != 0)
		fatalx("%s", err);

	for (;;) {
		ssize_t r = read(STDIN_FILENO, buf + have, sizeof(buf) - 1 - have);
		char *nl;

		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		have += (size_t)r;
		while ((nl = memchr(buf, '\n', have)) != NULL) {
			size_t ll = (size_t)(nl - buf);
			if (!discarding)
				answer(pf, buf, ll);
			discarding = 0;
			memmove(buf, nl + 1, have - ll - 1);
			have -= ll + 1;
		}
		if (have >= sizeof(buf) - 1) {
			/* over-long line: drop it up to its newline */
			discarding = 1;
			have = 0;
		}
	}
	px_proxy_factory_free(pf);
	return 0;
}
