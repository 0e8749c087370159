/*
 * hostroute - the private egressd's route and proxy authentication (see hostroute.h).
 */
#define _GNU_SOURCE 1
#include "executor/hostroute.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/host.h"
#include "common/proxyurl.h"
#include "common/util.h"

static const char *
env_lookup(char *const *env, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; env != NULL && env[i] != NULL; i++)
		if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
			return env[i] + n + 1;
	return NULL;
}

/* Percent-decode s[0..len) into out (outlen with NUL); -1 on bad escapes, control
 * characters or overflow. */
static int
pct_decode(const char *s, size_t len, char *out, size_t outlen)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			int h, l;
			if (i + 2 >= len)
				return -1;
			h = hex_digit(s[i + 1]);
			l = hex_digit(s[i + 2]);
			if (h < 0 || l < 0)
				return -1;
			c = h * 16 + l;
			i += 2;
		}
		if (c < 0x20 || c == 0x7f || o + 1 >= outlen)
			return -1;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return 0;
}

int
hostroute_parse_proxy(const char *value, struct hostroute *h)
{
	const char *p = value, *auth, *end, *at;
	unsigned default_port;
	struct host hp;
	char hostport[EGRESS_HOSTPORT_MAX + 8];
	size_t hl;

	h->proxy[0] = h->user[0] = h->pass[0] = '\0';
	h->pac = h->by_address = false;
	/* any case, as libproxy and egressd read them (egressd/route.c) */
	if (strncasecmp(value, "pac+", 4) == 0 || strncasecmp(value, "wpad:", 5) == 0) {
		h->pac = true;
		snprintf(h->shown, sizeof(h->shown), "%s", value);
		return 0;
	}
	if (strncmp(p, "http://", 7) == 0) {
		auth = p + 7;
		default_port = 80;
	} else if (strncmp(p, "https://", 8) == 0) {
		auth = p + 8;
		default_port = 443;
	} else if (strstr(p, "://") == NULL) {
		auth = p;          /* "proxy:3128", as curl accepts it */
		default_port = 1080;
	} else {
		return -1;         /* socks and others: egressd's route, but no auth from here */
	}
	end = auth + strcspn(auth, "/?#");
	at = NULL;
	for (const char *c = auth; c < end; c++)
		if (*c == '@')
			at = c;
	if (at != NULL) {
		const char *colon = memchr(auth, ':', (size_t)(at - auth));

		if (colon == NULL ||
		    pct_decode(auth, (size_t)(colon - auth), h->user, sizeof(h->user)) != 0 ||
		    pct_decode(colon + 1, (size_t)(at - colon - 1), h->pass, sizeof(h->pass)) != 0 ||
		    h->user[0] == '\0' || strpbrk(h->user, ":;#[]= \t") != NULL) {
			secret_wipe(h->pass, sizeof(h->pass));
			h->user[0] = '\0';
			return -1;
		}
		auth = at + 1;
	}
	hl = (size_t)(end - auth);
	if (hl == 0 || hl >= sizeof(hostport) - 7)
		goto bad;
	memcpy(hostport, auth, hl);
	hostport[hl] = '\0';
	if (host_parse(hostport, hl, HOST_REQUIRE_PORT, &hp) != HOST_OK) {
		/* no port: the scheme's default */
		snprintf(hostport + hl, sizeof(hostport) - hl, ":%u", default_port);
		if (host_parse(hostport, strlen(hostport), HOST_REQUIRE_PORT, &hp) != HOST_OK)
			goto bad;
	}
	if (host_to_str(&hp, h->proxy, sizeof(h->proxy)) == NULL)
		goto bad;
	h->by_address = hp.kind != HOST_NAME;
	snprintf(h->shown, sizeof(h->shown), "%.*s%s%s", (int)(strstr(value, "://") ?
	    strstr(value, "://") + 3 - value : 0), value, at ? "***@" : "", h->proxy);
	return 0;
bad:
	secret_wipe(h->pass, sizeof(h->pass));
	h->user[0] = '\0';
	return -1;
}

/* The person's Kerberos cache file, if any (see hostroute.h). */
static void
find_ccache(char *const *env, struct hostroute *h)
{
	const char *v = env_lookup(env, "KRB5CCNAME");
	const char *sudo = env_lookup(env, "SUDO_UID");
	char path[EGRESS_PATH_MAX];
	long uid = -1;
	struct stat st;

	if (v != NULL && v[0] != '\0') {
		if (strncmp(v, "FILE:", 5) == 0)
			v += 5;
		if (v[0] != '/') {
			snprintf(h->ccache_why, sizeof(h->ccache_why), "KRB5CCNAME=%.40s is not a "
			    "FILE: cache; only a file can be handed to egressd (kinit -c FILE:...)", v);
			return;
		}
		snprintf(path, sizeof(path), "%s", v);
		snprintf(h->ccache_from, sizeof(h->ccache_from), "KRB5CCNAME");
	} else {
		if (sudo != NULL) {
			char *e;
			errno = 0;
			uid = strtol(sudo, &e, 10);
			if (errno != 0 || *e != '\0' || uid < 0 || uid > 0x7fffffff) {
				snprintf(h->ccache_why, sizeof(h->ccache_why), "SUDO_UID is not a uid");
				return;
			}
			snprintf(h->ccache_from, sizeof(h->ccache_from), "SUDO_UID %ld", uid);
		} else {
			uid = (long)getuid();
			snprintf(h->ccache_from, sizeof(h->ccache_from), "uid %ld", uid);
		}
		snprintf(path, sizeof(path), "/tmp/krb5cc_%ld", uid);
	}
	if (lstat(path, &st) != 0) {
		snprintf(h->ccache_why, sizeof(h->ccache_why), "no Kerberos cache at %.60s "
		    "(%s): run kinit as that person", path, h->ccache_from);
		return;
	}
	if (!S_ISREG(st.st_mode) || (uid >= 0 && (long)st.st_uid != uid)) {
		snprintf(h->ccache_why, sizeof(h->ccache_why), "%.60s is not a regular file "
		    "owned by the invoking user", path);
		return;
	}
	snprintf(h->ccache, sizeof(h->ccache), "%s", path);
}

/* Does the operator's file text have a [proxy HOSTPORT] section? */
static bool
text_has_section(const char *text, const char *hostport)
{
	char want[EGRESS_HOSTPORT_MAX + 16];
	const char *line = text;

	snprintf(want, sizeof(want), "[proxy %s]", hostport);
	while (line != NULL && *line) {
		const char *s = line + strspn(line, " \t");

		if (strncmp(s, want, strlen(want)) == 0)
			return true;
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return false;
}

/* Read the operator's file if it is root-only; NULL with h->operator_why otherwise. */
static char *
read_operator(struct hostroute *h)
{
	int fd = open(h->operator_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	char *buf = NULL;
	ssize_t n;

	if (fd < 0) {
		snprintf(h->operator_why, sizeof(h->operator_why), "%s", strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 077) != 0 || st.st_size > EGRESS_CONF_FILE_MAX) {
		snprintf(h->operator_why, sizeof(h->operator_why), "not a root-owned file with "
		    "mode 0600 or stricter (or too large): ignored");
		close(fd);
		return NULL;
	}
	buf = calloc(1, (size_t)st.st_size + 1);
	if (buf == NULL) {
		close(fd);
		return NULL;
	}
	n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n != st.st_size) {
		snprintf(h->operator_why, sizeof(h->operator_why), "short read");
		free(buf);
		return NULL;
	}
	return buf;
}

void
hostroute_plan(char *const *env, struct hostroute *h)
{
	static const char *const vars[] = { "https_proxy", "HTTPS_PROXY", "http_proxy",
		"HTTP_PROXY", "all_proxy", "ALL_PROXY" };
	const char *opf = env_lookup(env, "EGRESS_PROXY_CREDENTIALS");
	const char *mode = env_lookup(env, "EGRESS_PROXY_AUTH");
	char *text;

	memset(h, 0, sizeof(*h));
	h->auth_off = mode != NULL && strcmp(mode, "none") == 0;
	/* As egressd's route = system checks them (egressd/route.c): any set variable that
	 * libproxy could not read stops the route, whichever one libproxy would consult. */
	for (size_t i = 0; i < EGRESS_NELEM(vars) && h->bad[0] == '\0'; i++) {
		const char *v = env_lookup(env, vars[i]), *why;
		enum proxyenv_kind k;
		char norm[EGRESS_HOST_INPUT_MAX + 16];

		if (v == NULL || v[0] == '\0' ||
		    proxyenv_check(v, &k, norm, sizeof(norm), &why) == 0)
			continue;
		snprintf(h->bad, sizeof(h->bad), "%s is set but cannot be read as a proxy (%s)%s",
		    vars[i], why, strchr(v, '@') ? "" : "; fix or unset it");
	}
	for (size_t i = 0; i < EGRESS_NELEM(vars); i++) {
		const char *v = env_lookup(env, vars[i]);

		if (v == NULL || v[0] == '\0')
			continue;
		snprintf(h->var, sizeof(h->var), "%s", vars[i]);
		if (hostroute_parse_proxy(v, h) != 0) {
			snprintf(h->shown, sizeof(h->shown), "(a value this plan cannot read; "
			    "libproxy decides)");
			h->proxy[0] = '\0';
		}
		break;
	}
	find_ccache(env, h);

	if (opf != NULL && opf[0] != '\0')
		snprintf(h->operator_file, sizeof(h->operator_file), "%s", opf);
	else if (access(HOSTROUTE_OPERATOR_CREDENTIALS, F_OK) == 0)
		snprintf(h->operator_file, sizeof(h->operator_file), "%s",
		    HOSTROUTE_OPERATOR_CREDENTIALS);
	if (h->operator_file[0] != '\0') {
		text = read_operator(h);
		if (text == NULL) {
			h->operator_file[0] = '\0';
		} else {
			h->operator_has_proxy = h->proxy[0] && text_has_section(text, h->proxy);
			secret_wipe(text, strlen(text));
			free(text);
		}
	}
	if (h->proxy[0] == '\0')
		return;
	if (h->operator_has_proxy)
		snprintf(h->scheme, sizeof(h->scheme), "operator file");
	else if (h->auth_off)
		h->scheme[0] = '\0';
	else if (h->user[0] != '\0')
		snprintf(h->scheme, sizeof(h->scheme), "basic");
	else if (h->ccache[0] != '\0' && !h->by_address)
		snprintf(h->scheme, sizeof(h->scheme), "negotiate");
}

int
hostroute_write_credentials(const struct hostroute *h, const char *path, char *err,
    size_t errlen)
{
	bool own = strcmp(h->scheme, "basic") == 0 || strcmp(h->scheme, "negotiate") == 0;
	struct hostroute tmp;
	char *text = NULL;
	FILE *f;
	int fd;

	if (h->operator_file[0] == '\0' && !own)
		return 0;
	if (h->operator_file[0] != '\0') {
		memset(&tmp, 0, sizeof(tmp));
		snprintf(tmp.operator_file, sizeof(tmp.operator_file), "%s", h->operator_file);
		if ((text = read_operator(&tmp)) == NULL) {
			snprintf(err, errlen, "%s: %s", h->operator_file, tmp.operator_why);
			return -1;
		}
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
		snprintf(err, errlen, "create %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		if (text) {
			secret_wipe(text, strlen(text));
			free(text);
		}
		return -1;
	}
	fprintf(f, "; generated by egress-exec for one run (docs/routing.md)\n");
	if (text != NULL) {
		fprintf(f, "; from %s\n%s\n", h->operator_file, text);
		secret_wipe(text, strlen(text));
		free(text);
	}
	if (own && strcmp(h->scheme, "basic") == 0) {
		/* The password goes to its own root-only file: any byte of it survives, none
		 * of it is parsed as INI. */
		char pwpath[EGRESS_PATH_MAX];
		int pfd;

		if ((size_t)snprintf(pwpath, sizeof(pwpath), "%s.password", path) >= sizeof(pwpath)) {
			fclose(f);
			snprintf(err, errlen, "path too long");
			return -1;
		}
		pfd = open(pwpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (pfd < 0 || write(pfd, h->pass, strlen(h->pass)) != (ssize_t)strlen(h->pass)) {
			snprintf(err, errlen, "write %s: %s", pwpath, strerror(errno));
			if (pfd >= 0)
				close(pfd);
			fclose(f);
			return -1;
		}
		close(pfd);
		fprintf(f, "; from %s of the person who ran egress-exec\n[proxy %s]\n"
		    "scheme = basic\nusername = %s\npassword_file = %s\n", h->var, h->proxy,
		    h->user, pwpath);
	} else if (own)
		fprintf(f, "; Kerberos cache of the person who ran egress-exec (%s)\n[proxy %s]\n"
		    "scheme = negotiate\nccache_import = FILE:%s\n", h->ccache_from, h->proxy,
		    h->ccache);
	if (fclose(f) != 0) {
		snprintf(err, errlen, "write %s: %s", path, strerror(errno));
		return -1;
	}
	return 1;
}

void
hostroute_clear(struct hostroute *h)
{
	secret_wipe(h->pass, sizeof(h->pass));
	secret_wipe(h->user, sizeof(h->user));
}
