/*
 * egressd_client - newline-JSON control client and the embedded egressd.
 */
#define _GNU_SOURCE
#include "executor/egressd_client.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ctlclient.h"
#include "common/log.h"
#include "common/util.h"
#include "executor/hostroute.h"
#include "executor/procwait.h"

extern char **environ;

/* systemd's protocol variables (sd_notify, socket activation, watchdog): meant for the
 * process systemd started, never inherited by the private egressd. */
static const char *const service_manager_vars[] = {
	"NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC",
	"WATCHDOG_PID",
};

bool
egressd_grant_id_valid(const char *s)
{
	return s != NULL && strlen(s) == EGRESSD_GRANT_ID_LEN &&
	    hex_lower_is(s, EGRESSD_GRANT_ID_LEN);
}

bool
egressd_setting_valid(const char *kv)
{
	const char *eq = kv ? strchr(kv, '=') : NULL;

	if (eq == NULL || eq == kv)
		return false;
	for (const char *c = kv; c < eq; c++)
		if (!((*c >= 'a' && *c <= 'z') || *c == '_'))
			return false;
	for (const char *c = eq + 1; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return false;
	return strlen(kv) < EGRESS_CONF_LINE_MAX;
}

/* Turn an {"ok": false, "error": ..., "message": ...} reply into err. */
static int
ec_refused(json_t *reply, const char *what, char *err, size_t errlen)
{
	const char *code = json_string_value(json_object_get(reply, "error"));
	const char *msg = json_string_value(json_object_get(reply, "message"));

	return errbuf_set(err, errlen, 0, "egressd refused %s: %.64s%s%.200s", what,
	    code ? code : "unknown", msg ? ": " : "", msg ? msg : "");
}

static int ec_grant_create(const char *sock_path, const char *principal,
    const struct egressd_grant_model *model, const char *const *allow, const char *listen, int listen_fd, const char *ifname,
    uint32_t lifetime_s, char *grant_id, char *listen_out, char *err, size_t errlen);

int
egressd_grant_create(const char *sock_path, const char *principal,
    const char *const *allow, const char *listen, const char *ifname, uint32_t lifetime_s,
    char *grant_id, char *listen_out, char *err, size_t errlen)
{
	return ec_grant_create(sock_path, principal, NULL, allow, listen, -1, ifname, lifetime_s,
	    grant_id, listen_out, err, errlen);
}

int
egressd_grant_create_fd(const char *sock_path, const char *principal,
    const struct egressd_grant_model *model, const char *const *allow, int listen_fd,
    const char *ifname,
    uint32_t lifetime_s, char *grant_id, char *listen_out, char *err, size_t errlen)
{
	if (listen_fd < 0)
		return errbuf_set(err, errlen, 0, "no listening socket to pass");
	return ec_grant_create(sock_path, principal, model, allow, NULL, listen_fd, ifname,
	    lifetime_s, grant_id, listen_out, err, errlen);
}

/* grant.create with a listen address for egressd to bind, or a listening fd to pass. */
static int
ec_grant_create(const char *sock_path, const char *principal,
    const struct egressd_grant_model *model, const char *const *allow,
    const char *listen, int listen_fd, const char *ifname, uint32_t lifetime_s,
    char *grant_id, char *listen_out, char *err, size_t errlen)
{
	json_t *req = NULL, *reply = NULL, *grant, *list, *lim;
	const char *gid, *lis;
	int rc = -1;

	if (lifetime_s == 0)
		return errbuf_set(err, errlen, 0, "a dynamic grant needs a lifetime");
	list = json_array();
	for (size_t i = 0; allow && allow[i]; i++)
		json_array_append_new(list, json_string(allow[i]));
	lim = json_pack("{s:i, s:i, s:I}", "connections", 64, "bytes", 0,
	    "lifetime_s", (json_int_t)lifetime_s);
	grant = json_pack("{s:s, s:o, s:[], s:s, s:[], s:o}", "principal", principal,
	    "allow", list, "allow_address", "pinning", "preferred", "credential_origin",
	    "limits", lim);
	/* Only the connection's name: egressd holds the credential and resolves it. */
	if (grant != NULL && model != NULL && model->connection != NULL &&
	    json_object_set_new(grant, "connection", json_string(model->connection)) != 0) {
		json_decref(grant);
		grant = NULL;
	}
	if (listen_fd >= 0)
		req = json_pack("{s:s, s:i, s:o, s:b, s:s}", "op", "grant.create", "id", 1,
		    "grant", grant, "listen_fd", 1, "interface", ifname);
	else
		req = json_pack("{s:s, s:i, s:o, s:s, s:s}", "op", "grant.create", "id", 1,
		    "grant", grant, "listen", listen, "interface", ifname);
	/* The run CA's key travels only over the root-only control socket; the JSON copy is
	 * freed with the request (jansson cannot wipe it: the caller's copy is wiped). */
	if (req != NULL && model != NULL && model->ca_cert != NULL && model->ca_key != NULL &&
	    json_object_set_new(req, "intercept_ca", json_pack("{s:s, s:s}", "cert",
	    model->ca_cert, "key", model->ca_key)) != 0) {
		json_decref(req);
		req = NULL;
	}
	if (req != NULL && model != NULL && model->placeholder != NULL &&
	    json_object_set_new(req, "credential_placeholder",
	    json_string(model->placeholder)) != 0) {
		json_decref(req);
		req = NULL;
	}
	if (req == NULL)
		return errbuf_set(err, errlen, ENOMEM, "grant request");
	if (ctlclient_request(sock_path, req, listen_fd, &reply, 0, err, errlen) < 0)
		goto out;
	if (!json_is_true(json_object_get(reply, "ok"))) {
		ec_refused(reply, "grant.create", err, errlen);
		goto out;
	}
	gid = json_string_value(json_object_get(reply, "grant_id"));
	lis = json_string_value(json_object_get(reply, "listen"));
	if (!egressd_grant_id_valid(gid) || lis == NULL || strlen(lis) > EGRESS_HOSTPORT_MAX) {
		errbuf_set(err, errlen, 0, "egressd grant.create reply lacks a valid grant_id/listen");
		goto out;
	}
	memcpy(grant_id, gid, EGRESSD_GRANT_ID_LEN + 1);
	memcpy(listen_out, lis, strlen(lis) + 1);
	rc = 0;
out:
	json_decref(req);
	json_decref(reply);
	return rc;
}

int
egressd_grant_dns(const char *sock_path, const char *grant_id, int dns_fd, char *err,
    size_t errlen)
{
	json_t *req, *reply = NULL;
	int rc = -1;

	req = json_pack("{s:s, s:i, s:s, s:b}", "op", "grant.dns", "id", 1, "grant_id", grant_id,
	    "dns_fd", 1);
	if (req == NULL)
		return errbuf_set(err, errlen, ENOMEM, "grant.dns request");
	if (ctlclient_request(sock_path, req, dns_fd, &reply, 0, err, errlen) == 0) {
		if (json_is_true(json_object_get(reply, "ok")))
			rc = 0;
		else
			ec_refused(reply, "grant.dns", err, errlen);
	}
	json_decref(req);
	json_decref(reply);
	return rc;
}

int
egressd_grant_revoke(const char *sock_path, const char *grant_id, char *err, size_t errlen)
{
	json_t *req, *reply = NULL;
	int rc = -1;
	const char *code;

	req = json_pack("{s:s, s:s}", "op", "grant.revoke", "grant_id", grant_id);
	if (req == NULL)
		return errbuf_set(err, errlen, ENOMEM, "revoke request");
	if (ctlclient_request(sock_path, req, -1, &reply, 0, err, errlen) == 0) {
		code = json_string_value(json_object_get(reply, "error"));
		if (json_is_true(json_object_get(reply, "ok")) ||
		    (code && strcmp(code, "unknown_grant") == 0))
			rc = 0;
		else
			ec_refused(reply, "grant.revoke", err, errlen);
	}
	json_decref(req);
	json_decref(reply);
	return rc;
}

int
egressd_status(const char *sock_path, json_t **status, char *err, size_t errlen)
{
	json_t *req = json_pack("{s:s}", "op", "status");
	int rc;

	*status = NULL;
	if (req == NULL)
		return errbuf_set(err, errlen, ENOMEM, "status request");
	rc = ctlclient_request(sock_path, req, -1, status, 2000, err, errlen);
	json_decref(req);
	if (rc == 0 && !json_is_true(json_object_get(*status, "ok"))) {
		ec_refused(*status, "status", err, errlen);
		json_decref(*status);
		*status = NULL;
		rc = -1;
	}
	return rc;
}

static bool
ec_executable(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int
egressd_find_binary(char *out, size_t outlen)
{
	const char *env = getenv("EGRESS_EGRESSD");
	char self[PATH_MAX], cand[PATH_MAX + 32];
	ssize_t n;
	_cleanup_free_ char *path = NULL;
	char *save = NULL, *dir;

	if (env && *env) {
		if (!ec_executable(env))
			return -1;  /* an explicit choice that does not work is not replaced */
		snprintf(out, outlen, "%s", env);
		return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		char *slash;

		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			snprintf(cand, sizeof(cand), "%s/../egressd/egressd", self);
			if (ec_executable(cand) && snprintf(out, outlen, "%s", cand) < (int)outlen)
				return 0;
			snprintf(cand, sizeof(cand), "%s/egressd", self);
			if (ec_executable(cand) && snprintf(out, outlen, "%s", cand) < (int)outlen)
				return 0;
			/* installed: PREFIX/bin/egress-exec next to PREFIX/sbin/egressd */
			snprintf(cand, sizeof(cand), "%s/../sbin/egressd", self);
			if (ec_executable(cand) && snprintf(out, outlen, "%s", cand) < (int)outlen)
				return 0;
		}
	}
	env = getenv("PATH");
	path = strdup(env && *env ? env : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin");
	if (path == NULL)
		return -1;
	for (dir = path; dir != NULL; dir = save) {
		save = strchr(dir, ':');
		if (save != NULL)
			*save++ = '\0';
		if (dir[0] != '/')
			continue;   /* a relative (or empty) PATH entry is not a trusted place */
		snprintf(cand, sizeof(cand), "%s/egressd", dir);
		if (ec_executable(cand) && snprintf(out, outlen, "%s", cand) < (int)outlen)
			return 0;
	}
	return -1;
}

static int
ec_join(char *out, const char *dir, const char *name)
{
	int n = snprintf(out, EGRESS_PATH_MAX, "%s/%s", dir, name);
	return (n < 0 || n >= EGRESS_PATH_MAX) ? -1 : 0;
}

/* The last non-empty line of egressd's stderr log, for a start-up failure message (the
 * run folder and the log may be gone by the time a person reads it). Bounded. */
static void
ec_log_tail(const char *path, char *out, size_t outlen)
{
	char buf[512];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	off_t end;
	ssize_t n;
	char *line;

	out[0] = '\0';
	if (fd < 0)
		return;
	end = lseek(fd, 0, SEEK_END);
	if (end > (off_t)sizeof(buf) - 1)
		lseek(fd, end - (off_t)sizeof(buf) + 1, SEEK_SET);
	else
		lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	line = strrchr(buf, '\n');
	line = line ? line + 1 : buf;
	for (char *c = line; *c; c++)
		if ((unsigned char)*c < 0x20)
			*c = ' ';
	n = (ssize_t)strlen(line);
	if ((size_t)n >= outlen)
		n = (ssize_t)outlen - 1;
	memcpy(out, line, (size_t)n);
	out[n] = '\0';
}

/* Did the caller give `key=...` among settings? */
static bool
setting_given(const char *const *settings, const char *key)
{
	size_t n = strlen(key);

	for (size_t i = 0; settings && settings[i]; i++)
		if (strncmp(settings[i], key, n) == 0 && settings[i][n] == '=')
			return true;
	return false;
}

int
egressd_embedded_spawn(const char *dir, const char *const *settings,
    struct egressd_embedded *e, char *err, size_t errlen)
{
	char bin[PATH_MAX];
	FILE *f;
	int fd, logfd, ready[2];
	pid_t pid;

	memset(e, 0, sizeof(*e));
	e->ready_rd = -1;
	if (egressd_find_binary(bin, sizeof(bin)) < 0)
		return errbuf_set(err, errlen, 0, "no egressd binary found (set EGRESS_EGRESSD, or "
		    "pass --egressd-control for a running one)");
	if (ec_join(e->sock, dir, "egressd.sock") < 0 || ec_join(e->conf, dir, "egressd.ini") < 0 ||
	    ec_join(e->decisions, dir, "decisions.jsonl") < 0 ||
	    ec_join(e->log, dir, "egressd.log") < 0 ||
	    strlen(e->sock) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return errbuf_set(err, errlen, 0, "run folder path too long for a control socket");
	for (size_t i = 0; settings && settings[i]; i++)
		if (!egressd_setting_valid(settings[i]))
			return errbuf_set(err, errlen, 0, "invalid egressd setting (want key=value)");

	fd = open(e->conf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
		if (fd >= 0)
			close(fd);
		return errbuf_set(err, errlen, errno, "write %s", e->conf);
	}
	fprintf(f, "; generated by egress-exec for one run\n[egressd]\n"
	    "control_socket = %s\ndecision_log = %s\ndrain_timeout = 1s\n",
	    e->sock, e->decisions);
	for (size_t i = 0; settings && settings[i]; i++) {
		const char *eq = strchr(settings[i], '=');
		fprintf(f, "%.*s = %s\n", (int)(eq - settings[i]), settings[i], eq + 1);
	}
	/* The host route by default, authenticated as the person who ran egress-exec
	 * (executor/hostroute.h); a setting given by the caller wins. */
	if (!setting_given(settings, "route"))
		fprintf(f, "route = system\n");
	/* A PAC (pac+URL, WPAD) is written by egressd after its privilege drop and read by its
	 * route helper, both as the account egressd drops to: give them a directory of their
	 * own, reachable through the run folder (o+x only; the worker's mount namespace has
	 * no /run/egress-exec at all). Only egress-exec's own top directory is opened up, never
	 * an arbitrary parent. */
	if (!setting_given(settings, "pac_copy")) {
		char pdir[EGRESS_PATH_MAX], parent[EGRESS_PATH_MAX], *slash;
		struct passwd *pw = getpwnam("egressd");

		if (pw == NULL)
			pw = getpwnam("nobody");
		snprintf(parent, sizeof(parent), "%s", dir);
		slash = strrchr(parent, '/');
		if (slash != NULL && slash != parent)
			*slash = '\0';
		if (pw != NULL && !setting_given(settings, "user") &&
		    ec_join(pdir, dir, "pac") == 0 && mkdir(pdir, 0700) == 0 &&
		    chown(pdir, pw->pw_uid, pw->pw_gid) == 0 && chmod(dir, 0711) == 0 &&
		    (strcmp(parent, EGRESSD_RUN_TOP) != 0 || chmod(parent, 0711) == 0)) {
			fprintf(f, "pac_copy = %s/egressd-pac.js\n", pdir);
			snprintf(e->pacdir, sizeof(e->pacdir), "%s", pdir);
		}
	}
	if (!setting_given(settings, "proxy_credentials")) {
		struct hostroute h;
		char cpath[EGRESS_PATH_MAX], e2[256];
		int w;

		hostroute_plan(environ, &h);
		w = ec_join(cpath, dir, "proxy-credentials.ini") < 0 ? -1 :
		    hostroute_write_credentials(&h, cpath, e2, sizeof(e2));
		hostroute_clear(&h);
		if (w < 0) {
			fclose(f);
			return errbuf_set(err, errlen, 0, "proxy credentials for the private egressd: %s",
			    e2);
		}
		if (w > 0) {
			fprintf(f, "proxy_credentials = %s\n", cpath);
			snprintf(e->creds, sizeof(e->creds), "%s", cpath);
		}
	}
	if (fclose(f) != 0)
		return errbuf_set(err, errlen, errno, "write %s", e->conf);

	logfd = open(e->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (logfd < 0)
		return errbuf_set(err, errlen, errno, "open %s", e->log);
	/* Readiness: egressd writes one byte to this pipe when it serves (egressd/main.c,
	 * EGRESSD_READY_FD), so no status polling; EOF without the byte means it died. */
	if (pipe2(ready, O_CLOEXEC) < 0) {
		close(logfd);
		return errbuf_set(err, errlen, errno, "pipe");
	}
	pid = fork();
	if (pid < 0) {
		close(logfd);
		close(ready[0]);
		close(ready[1]);
		return errbuf_set(err, errlen, errno, "fork egressd");
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		char num[16];

		/* The write end alone crosses the exec (its close-on-exec flag cleared). */
		snprintf(num, sizeof(num), "%d", ready[1]);
		if (fcntl(ready[1], F_SETFD, 0) < 0 || setenv("EGRESSD_READY_FD", num, 1) < 0)
			_exit(127);
		/* The service manager's variables are the caller's, not this egressd's: with
		 * NOTIFY_SOCKET the private egressd would tell the caller's systemd unit that
		 * it is ready, reloading or stopping (egressd/notify.c). Its readiness goes to
		 * egress-exec alone, through the pipe above. */
		for (size_t i = 0; i < EGRESS_NELEM(service_manager_vars); i++)
			if (unsetenv(service_manager_vars[i]) != 0)
				_exit(127);

		/* If egress-exec dies, its private egressd goes too. egressd drops root after
		 * its start-up; the kernel clears this signal on that credential change and
		 * egressd arms it again (sandbox_egressd_drop). */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
		}
		dup2(logfd, 2);
		execl(bin, "egressd", "-c", e->conf, "-f", (char *)NULL);
		_exit(127);
	}
	close(logfd);
	close(ready[1]);
	e->pid = pid;
	e->ready_rd = ready[0];
	return 0;
}

int
egressd_embedded_ready(struct egressd_embedded *e, char *err, size_t errlen)
{
	uint64_t deadline = mono_msec() + EGRESSD_START_TIMEOUT_MS;
	json_t *st = NULL;
	char b = 0;
	ssize_t n = -1;

	/* Woken by the readiness byte, or by EOF when egressd ends before it serves. */
	while (e->ready_rd >= 0) {
		struct pollfd p = { e->ready_rd, POLLIN, 0 };
		uint64_t now = mono_msec();

		if (now >= deadline)
			break;
		if (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR)
			break;
		if (p.revents) {
			do {
				n = read(e->ready_rd, &b, 1);
			} while (n < 0 && errno == EINTR);
			break;
		}
	}
	if (e->ready_rd >= 0)
		close(e->ready_rd);
	e->ready_rd = -1;
	/* The byte says egressd serves; one status round trip proves its control socket
	 * answers, as before. */
	if (n == 1 && egressd_status(e->sock, &st, NULL, 0) == 0) {
		json_decref(st);
		return 0;
	}
	/* Not ready. EOF (or a status that failed): it is ending; say how, with its last
	 * log line. Otherwise the deadline passed: stop it. */
	if (n >= 0) {
		char tail[200];
		int wst = 0;

		if (procwait_deadline(e->pid, &wst, EGRESSD_EXIT_GRACE_MS) == 1) {
			e->pid = 0;
			ec_log_tail(e->log, tail, sizeof(tail));
			return errbuf_set(err, errlen, 0, "embedded egressd exited at start-up "
			    "(status %d): %s", WIFEXITED(wst) ? WEXITSTATUS(wst) : -1, tail);
		}
	}
	egressd_embedded_stop(e);
	return errbuf_set(err, errlen, 0, "embedded egressd did not become ready within %u ms; "
	    "see %s", EGRESSD_START_TIMEOUT_MS, e->log);
}


int
egressd_embedded_start(const char *dir, const char *const *settings,
    struct egressd_embedded *e, char *err, size_t errlen)
{
	if (egressd_embedded_spawn(dir, settings, e, err, errlen) < 0)
		return -1;
	return egressd_embedded_ready(e, err, errlen);
}

/* What egressd_embedded_start made besides egressd's own files: the credentials file (and
 * its password file) and the PAC directory with the copies egressd wrote there. */
static void
ec_remove_generated(struct egressd_embedded *e)
{
	if (e->creds[0] != '\0') {
		char pw[EGRESS_PATH_MAX + 16];

		snprintf(pw, sizeof(pw), "%s.password", e->creds);
		unlink(e->creds);
		unlink(pw);
		e->creds[0] = '\0';
	}
	if (e->pacdir[0] != '\0') {
		DIR *d = opendir(e->pacdir);
		struct dirent *de;

		while (d != NULL && (de = readdir(d)) != NULL) {
			char p[EGRESS_PATH_MAX + 256];

			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(p, sizeof(p), "%s/%s", e->pacdir, de->d_name);
			unlink(p);
		}
		if (d != NULL)
			closedir(d);
		rmdir(e->pacdir);
		e->pacdir[0] = '\0';
	}
}

void
egressd_embedded_stop(struct egressd_embedded *e)
{
	int wst;

	if (e == NULL)
		return;
	if (e->ready_rd >= 0)
		close(e->ready_rd);
	e->ready_rd = -1;
	if (e->pid <= 0) {
		ec_remove_generated(e);
		return;
	}
	kill(e->pid, SIGTERM);
	/* Woken at its exit (pidfd), not on a 20 ms tick. */
	if (procwait_deadline(e->pid, &wst, EGRESSD_STOP_TIMEOUT_MS) == 1) {
		e->pid = 0;
		unlink(e->sock);
		ec_remove_generated(e);
		return;
	}
	kill(e->pid, SIGKILL);
	waitpid(e->pid, &wst, 0);
	e->pid = 0;
	unlink(e->sock);
	ec_remove_generated(e);
}
