/*
 * main.c - egressd: command line, signals (through libevent), the event loop.
 *
 *   egressd -c FILE [-t] [-d] [-f] [-u USER]    (long forms and --help, --version: egressd(8))
 *
 * -t checks the configuration and exits (file:line errors on stderr). Signals are libevent
 * events, so their handlers run on the loop thread like everything else: SIGHUP reloads
 * (all-or-nothing), SIGTERM/SIGINT drain, SIGUSR1 reopens the decision log.
 *
 * Started as root, egressd always drops to an unprivileged account after start-up: -u,
 * else [egressd] user, else egressd when that account exists, else nobody. An unknown
 * account or uid 0 is refused before start-up; there is no way to keep root. Started as
 * another user it keeps that uid and sheds capabilities; either way the seccomp
 * allow-list follows (sandbox_egressd.h, docs/SECURITY.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <libgen.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "egressd/dlog_syslog.h"
#include "egressd/config.h"
#include "egressd/route.h"
#include "egressd/daemon.h"
#include "egressd/dlog.h"
#include "egressd/grantstate.h"
#include "egressd/proxycreds.h"
#include "egressd/notify.h"
#include "egressd/sandbox_egressd.h"

static void
usage(FILE *f)
{
	fprintf(f, "usage: egressd -c FILE [-t] [-d] [-f] [-u USER]\n"
	    "       egressd --help | --version\n"
	    "  -c, --config FILE      configuration (egressd.ini(5))\n"
	    "  -t, --check            check the configuration and exit\n"
	    "  -d, --debug            debug logging\n"
	    "  -f, --foreground       stay in the foreground, log to stderr\n"
	    "  -u, --user USER        started as root, run as USER after start-up (default:\n"
	    "                         [egressd] user, else egressd if it exists, else nobody;\n"
	    "                         never root), with no capabilities and a seccomp\n"
	    "                         allow-list (docs/SECURITY.md)\n"
	    "  -h, --help             this text\n"
	    "  -V, --version          the version\n"
	    "See egressd(8).\n");
}

/*
 * A configuration or start-up refusal, as "file:line: message" on stderr. Under systemd
 * (ExecStartPre=egressd -t, or start-up) the journal gets it as an error ("<3>"), not as
 * info: `journalctl -p err -u egressd` shows why the unit did not start.
 */
static void start_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
start_error(const char *fmt, ...)
{
	va_list ap;

	if (log_stderr_is_journal())
		fputs("<3>", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

static void
on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;
	char err[1024];

	log_info("SIGHUP: reloading %s", d->cfg->path);
	notify_reloading();
	if (daemon_reload(d, err, sizeof(err)) != 0) {
		log_warnx("reload failed, running configuration kept: %s", err);
		notify_ready("reload failed, running configuration kept (see the log)");
		return;
	}
	notify_ready("running (configuration reloaded)");
}

static void
on_term(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	if (d->draining) {
		log_info("second termination signal: closing now");
		event_base_loopexit(d->base, NULL);
		return;
	}
	notify_stopping();
	daemon_drain(d);
}

static void
on_usr1(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	log_info("SIGUSR1: reopening the decision log");
	dlog_reopen(d->dlog);
}

/* Two sockets per tunnel plus pipes: ask for the hard limit, say so when it is low. */
static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			log_warn("setrlimit(RLIMIT_NOFILE)");
	}
}

static void
daemonize(void)
{
	pid_t pid = fork();
	int fd;

	if (pid < 0)
		fatal("fork");
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		fatal("setsid");
	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
}

/* The allow-list, or exit; the name of what is in force, for the log line. valgrind
 * (make valgrind) cannot emulate seccomp(2). */
static const char *
install_filter(void)
{
	char err[512];

	if (sandbox_egressd_under_valgrind()) {
		/* Two conditions, so that neither valgrind's CPU alone nor the variable alone
		 * (ignored natively) turns the filter off. */
		if (!sandbox_egressd_valgrind_optin())
			fatalx("running under valgrind, which cannot emulate seccomp(2), without "
			    "EGRESSD_VALGRIND=1: refusing to run without the seccomp allow-list "
			    "(scripts/valgrind.sh sets the variable)");
		log_warnx("running under valgrind with EGRESSD_VALGRIND=1: valgrind cannot "
		    "emulate seccomp(2), so the seccomp allow-list is NOT installed (the "
		    "privilege drop is)");
		return "NO seccomp filter (valgrind)";
	}
	if (sandbox_egressd_filter(err, sizeof(err)) != 0)
		fatalx("seccomp filter: %s", err);
	return "seccomp allow-list";
}

struct give_arg {
	const char *name;
	const struct sandbox_egressd_user *su;
	char *err;
	size_t errlen;
};

/* dlog_with_fd callback: the decision log's open file to the drop account. */
static int
give_log(int fd, void *arg)
{
	struct give_arg *ga = arg;

	errno = 0;
	return sandbox_egressd_give(fd, ga->name, ga->su, ga->err, ga->errlen);
}

/*
 * Who egressd will be after start-up (NSS lookups happen here, before the filter). As
 * root: the account to drop to, refused when unknown or uid 0. As another user: no drop;
 * a named account must then be that user (egressd cannot switch). Returns 0, or -1 with
 * the message printed on stderr (file:line for the config key).
 */
static int
plan_user(const char *run_as, const struct egressd_config *cfg, bool as_root,
    struct sandbox_egressd_user *su, bool *fell_back, char *err, size_t errlen)
{
	const char *name = run_as != NULL ? run_as : cfg->user;
	char where[EGRESS_PATH_MAX + 32];

	if (run_as != NULL)
		snprintf(where, sizeof(where), "egressd: -u");
	else
		snprintf(where, sizeof(where), "%s:%u: user", cfg->path, cfg->user_line);
	*fell_back = false;
	if (as_root) {
		if (sandbox_egressd_resolve(name, su, fell_back, err, errlen) != 0) {
			if (name != NULL)
				start_error("%s: %s\n", where, err);
			else
				start_error("egressd: %s\n", err);
			return -1;
		}
		return 0;
	}
	if (name == NULL)
		return 0;
	if (sandbox_egressd_lookup(name, su, err, errlen) != 0) {
		start_error("%s: %s\n", where, err);
		return -1;
	}
	if (su->uid != geteuid()) {
		start_error("%s: started as uid %u, egressd cannot switch to %s (uid %u): "
		    "start it as root or as that user\n", where, (unsigned)geteuid(), su->name,
		    (unsigned)su->uid);
		return -1;
	}
	return 0;
}

/*
 * -t: can the decision log be opened as start-up will open it? Without creating anything:
 * an existing log must be a regular file (never a symbolic link); a missing one needs an
 * existing directory. The same conditions make start-up exit 1 (daemon_start).
 */
static int
check_log_path(const char *path, char *err, size_t errlen)
{
	char dir[EGRESS_PATH_MAX];
	struct stat st;

	if (lstat(path, &st) == 0) {
		if (S_ISLNK(st.st_mode)) {
			snprintf(err, errlen, "decision log %s cannot be opened for writing: a "
			    "symbolic link (refused)", path);
			return -1;
		}
		if (!S_ISREG(st.st_mode)) {
			snprintf(err, errlen, "decision log %s cannot be opened for writing: not a "
			    "regular file", path);
			return -1;
		}
		if (access(path, W_OK) != 0) {
			snprintf(err, errlen, "decision log %s cannot be opened for writing: %s",
			    path, strerror(errno));
			return -1;
		}
		return 0;
	}
	if (errno != ENOENT) {
		snprintf(err, errlen, "decision log %s cannot be opened for writing: %s", path,
		    strerror(errno));
		return -1;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	if (stat(dirname(dir), &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(dir, sizeof(dir), "%s", path);
		snprintf(err, errlen, "decision log %s cannot be opened for writing: its directory "
		    "%s does not exist (create it, owned by the account egressd runs as, 0750)",
		    path, dirname(dir));
		return -1;
	}
	return 0;
}

/*
 * -t as root: can the account egressd drops to read the files a reload re-reads after the
 * drop (the configuration, a local PAC file)? Checked for real, in a child that takes
 * that account's ids exactly as the drop does (sandbox_egressd_drop): otherwise the check
 * passes and the next SIGHUP fails. Returns 0, or -1 with err naming the file.
 */
static int
check_readable_as(const struct sandbox_egressd_user *su, const char *const *paths,
    size_t n, char *err, size_t errlen)
{
	int pfd[2], status = 0;
	struct { int idx, err; } res = { -1, 0 };
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		gid_t g = su->gid;

		close(pfd[0]);
		if (setgroups(1, &g) != 0 || setresgid(su->gid, su->gid, su->gid) != 0 ||
		    setresuid(su->uid, su->uid, su->uid) != 0) {
			res.err = errno;
			(void)!write(pfd[1], &res, sizeof(res));
			_exit(2);
		}
		for (size_t i = 0; i < n; i++) {
			int fd = open(paths[i], O_RDONLY | O_CLOEXEC | O_NOCTTY);
			if (fd < 0) {
				res.idx = (int)i;
				res.err = errno;
				(void)!write(pfd[1], &res, sizeof(res));
				_exit(1);
			}
			close(fd);
		}
		_exit(0);
	}
	close(pfd[1]);
	if (read(pfd[0], &res, sizeof(res)) != (ssize_t)sizeof(res))
		res.idx = -1, res.err = 0;
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (res.idx >= 0 && (size_t)res.idx < n)
		snprintf(err, errlen, "%s cannot be read by %s (uid %u), the account egressd runs "
		    "as after start-up, so a reload (SIGHUP) would fail: %s (make it and its "
		    "directories readable by that account)", paths[res.idx], su->name,
		    (unsigned)su->uid, strerror(res.err));
	else
		snprintf(err, errlen, "cannot take the ids of %s to check what it can read: %s",
		    su->name, res.err ? strerror(res.err) : "child failed");
	return -1;
}

/*
 * Readiness for a parent that started this egressd (egress-exec's private egressd): when
 * EGRESSD_READY_FD names an open descriptor, egressd writes one byte to it once it serves
 * (listeners, control socket, privilege drop, filter all done) and closes it, so the parent
 * wakes then instead of polling `status`. At start-up the descriptor is made close-on-exec
 * (no helper inherits it) and the variable removed; an unusable value is ignored (the
 * parent then times out and says so). Returns the descriptor or -1.
 */
static int
ready_fd_take(void)
{
	const char *v = getenv("EGRESSD_READY_FD"), *es;
	long long fd = -1;

	if (v == NULL || num_parse(v, 3, 65535, &fd, &es) != 0 ||
	    fcntl((int)fd, F_SETFD, FD_CLOEXEC) < 0)
		fd = -1;
	unsetenv("EGRESSD_READY_FD");
	return (int)fd;
}

int
main(int argc, char **argv)
{
	const char *path = NULL, *run_as = NULL;
	struct sandbox_egressd_user su;
	bool check = false, debug = false, fg = false, fell_back = false, as_root;
	const char *filter;
	struct egressd_config *cfg;
	struct event_base *base;
	struct event *ev_hup, *ev_term, *ev_int, *ev_usr1;
	struct daemon d;
	char err[2048];
	int ch, ready_fd;
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 't' },
		{ "debug", no_argument, NULL, 'd' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "user", required_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};

	/* First of all: a closed 0, 1 or 2 must not become a socket or a file (util.h). */
	if (stdio_ensure(true) != 0) {
		fprintf(stderr, "egressd: standard input, output or error is closed and /dev/null "
		    "cannot be opened: %s\n", strerror(errno));
		return 1;
	}
	/* Before anything else, above all before the first thread: the bounding set and
	 * no_new_privs are per thread (sandbox_egressd_early). */
	if (sandbox_egressd_early(err, sizeof(err)) != 0) {
		fprintf(stderr, "egressd: %s\n", err);
		return 1;
	}
	ready_fd = ready_fd_take();
	while ((ch = getopt_long(argc, argv, "c:tdfu:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 't':
			check = true;
			break;
		case 'd':
			debug = true;
			break;
		case 'f':
			fg = true;
			break;
		case 'u':
			run_as = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("egressd %s\n", EGRESS_VERSION);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (path == NULL || optind != argc) {
		if (path == NULL)
			fprintf(stderr, "egressd: -c FILE is required\n");
		else
			fprintf(stderr, "egressd: unexpected argument: %s\n", argv[optind]);
		usage(stderr);
		return 1;
	}
	log_init("egressd", !(fg || check));
	log_set_level(debug ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO);

	if (run_as != NULL && !config_user_valid(run_as)) {
		start_error("egressd: -u: %s: not an account name or decimal uid\n", run_as);
		return 1;
	}
	cfg = config_load(path, err, sizeof(err));
	if (cfg == NULL) {
		start_error("%s\n", err);
		return 1;
	}
	/* The password database (NSS) is read here, never under the filter. -t checks the
	 * account as root would use it, whoever runs the check. */
	as_root = geteuid() == 0;
	if (plan_user(run_as, cfg, as_root || check, &su, &fell_back, err, sizeof(err)) != 0) {
		config_free(cfg);
		return 1;
	}
	if (check) {
		char rerr[512];
		if (route_config_check(&cfg->route, rerr, sizeof(rerr)) != 0) {
			start_error("%s: route: %s\n", path, rerr);
			config_free(cfg);
			return 1;
		}
		if (check_log_path(cfg->decision_log, rerr, sizeof(rerr)) != 0) {
			fprintf(stderr, "%s: %s\n", path, rerr);
			config_free(cfg);
			return 1;
		}
		if (cfg->log_syslog != NULL) {
			/* the TLS files load and match, as start-up will load them */
			struct dlog_syslog_config sc = { .target = cfg->log_syslog,
				.ca = cfg->log_syslog_ca, .name = cfg->log_syslog_name,
				.cert = cfg->log_syslog_cert, .key = cfg->log_syslog_key,
				.spool_max = cfg->log_syslog_spool };

			if (dlog_syslog_check(&sc, true, rerr, sizeof(rerr)) != 0) {
				fprintf(stderr, "%s:%u: %s\n", path, cfg->log_syslog_line, rerr);
				config_free(cfg);
				return 1;
			}
		}
		if (as_root) {
			/* What the drop account reads later: the configuration and a local PAC
			 * file at every reload, Negotiate keytabs at every GSSAPI call. (The
			 * credentials file itself stays root-only: read once at start-up.) */
			const char *paths[3 + 16];
			size_t np = 0;
			struct proxycreds *pc = NULL;
			int rc;

			paths[np++] = cfg->path;
			if (cfg->connections_path != NULL)   /* re-read at every reload */
				paths[np++] = cfg->connections_path;
			if (cfg->route.kind == ROUTE_KIND_PAC && cfg->route.pac != NULL &&
			    cfg->route.pac[0] == '/')
				paths[np++] = cfg->route.pac;
			if (cfg->route.credentials != NULL)
				pc = proxycreds_load(cfg->route.credentials, 1, rerr, sizeof(rerr));
			for (size_t i = 0; pc != NULL && i < pc->n && np < EGRESS_NELEM(paths); i++)
				if (pc->v[i].keytab != NULL)
					paths[np++] = pc->v[i].keytab;
			rc = check_readable_as(&su, paths, np, rerr, sizeof(rerr));
			proxycreds_free(pc);
			if (rc != 0) {
				fprintf(stderr, "%s: %s\n", path, rerr);
				config_free(cfg);
				return 1;
			}
		}
		/* The static-grant state start-up would replay (revocations, first issues). */
		if (grantstate_check(cfg->state_file, geteuid(), rerr, sizeof(rerr)) != 0) {
			fprintf(stderr, "%s: state_file: %s\n", path, rerr);
			config_free(cfg);
			return 1;
		}
		printf("%s: ok (%zu listener(s), %zu grant(s))\n", path, cfg->nlisteners,
		    cfg->ngrants);
		config_free(cfg);
		return 0;
	}
	/* Writes to a closed peer must be errors, not a process-killing signal. */
	signal(SIGPIPE, SIG_IGN);
	/* A decision-log write past RLIMIT_FSIZE must fail with EFBIG (the log then refuses
	 * hops with audit_unavailable), not kill the daemon. */
	signal(SIGXFSZ, SIG_IGN);
	raise_nofile();
	if (!fg)
		daemonize();
	/* Under systemd Type=notify: the socket is opened now, as root and before the seccomp
	 * filter; READY=1 follows once egressd serves. Not fatal: without it systemd times
	 * the start out and says so. */
	if (notify_open(err, sizeof(err)) != 0)
		log_warnx("systemd notification unavailable: %s", err);

	base = event_base_new();
	if (base == NULL)
		fatalx("event_base_new failed");
	/* Root opens the decision log in a directory the drop account owns: refuse links
	 * and files of others there, now and at every reopen (dlog.h). */
	if (as_root)
		dlog_set_root_checks(true, su.uid);
	if (daemon_start(&d, base, cfg, err, sizeof(err)) != 0) {
		log_warnx("start-up failed: %s", err);
		daemon_stop(&d);
		event_base_free(base);
		return 1;
	}
	ev_hup = evsignal_new(base, SIGHUP, on_hup, &d);
	ev_term = evsignal_new(base, SIGTERM, on_term, &d);
	ev_int = evsignal_new(base, SIGINT, on_term, &d);
	ev_usr1 = evsignal_new(base, SIGUSR1, on_usr1, &d);
	if (ev_hup == NULL || ev_term == NULL || ev_int == NULL || ev_usr1 == NULL)
		fatalx("evsignal_new failed");
	evsignal_add(ev_hup, NULL);
	evsignal_add(ev_term, NULL);
	evsignal_add(ev_int, NULL);
	evsignal_add(ev_usr1, NULL);
	/* Start-up is done (listeners, control socket, decision log, credentials): drop to
	 * the unprivileged user (always, as root) and install the allow-list
	 * (sandbox_egressd.h). Any failure ends egressd: it never serves as root. */
	if (as_root) {
		/* The decision log is reopened by name after a failed write (a full disk):
		 * after the drop that must still be possible. The fd dlog holds is handed
		 * over, never a name looked up again. */
		if (d.dlog != NULL) {
			struct give_arg ga = { cfg->decision_log, &su, err, sizeof(err) };

			if (dlog_with_fd(d.dlog, give_log, &ga) != 0)
				log_warnx("decision log not handed to %s (a failed write cannot be "
				    "recovered without a restart): %s", su.name, errno == EBADF ?
				    "it is not open" : err);
		}
		if (sandbox_egressd_drop(&su, err, sizeof(err)) != 0)
			fatalx("privilege drop to %s: %s", su.name, err);
		filter = install_filter();
		log_info("running as %s (uid %u, gid %u): no capabilities, no_new_privs, %s",
		    su.name, (unsigned)su.uid, (unsigned)su.gid, filter);
		if (fell_back)
			log_info("there is no %s account, so egressd runs as %s, which other "
			    "daemons may share: create a dedicated %s system user (make install "
			    "does; docs/SECURITY.md)", SANDBOX_EGRESSD_DEFAULT_USER, su.name,
			    SANDBOX_EGRESSD_DEFAULT_USER);
	} else {
		if (sandbox_egressd_confine(err, sizeof(err)) != 0)
			fatalx("confining egressd: %s", err);
		filter = install_filter();
		log_info("started as uid %u (not root), no user change: no capabilities, "
		    "no_new_privs, %s", (unsigned)geteuid(), filter);
	}

	/* Listeners, control socket and decision log exist, privileges are dropped and the
	 * filter is in force: only now may `systemctl start` return. */
	notify_ready("running");
	if (ready_fd >= 0) {
		if (write(ready_fd, "R", 1) != 1)
			log_warn("readiness descriptor");
		close(ready_fd);
	}
	event_base_dispatch(base);

	log_info("egressd exiting");
	event_free(ev_hup);
	event_free(ev_term);
	event_free(ev_int);
	event_free(ev_usr1);
	daemon_stop(&d);
	event_base_free(base);
	notify_close();
	return 0;
}
