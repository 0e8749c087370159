/*
 * env - the worker's environment, built from nothing. See env.h for the contract and
 * docs/sandbox.md ("Environment") for the table of refused names.
 *
 * Why names and not values: a credential's value has no recognisable shape, its name
 * usually does. The name rules are deliberately broad (word matches, not just suffixes):
 * refusing a harmless variable costs the preset author one rename, passing a token costs
 * the credential.
 */
#define _GNU_SOURCE 1
#include "executor/env.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/util.h"

/* Exact names (compared upper-cased). */
static const char *const FORBIDDEN_EXACT[] = {
	"GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN",
	"SSH_AUTH_SOCK", "KUBECONFIG", "GOOGLE_APPLICATION_CREDENTIALS", "NPM_TOKEN",
	"NODE_AUTH_TOKEN", "NETRC", "GNUPGHOME", "GPG_AGENT_INFO",
	"DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS", "XDG_RUNTIME_DIR",
	"GIT_ASKPASS", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_CREDENTIAL_HELPER",
	"CONTAINER_HOST", "CONTAINER_SSHKEY", "CONTAINERD_ADDRESS", "BUILDKIT_HOST",
};

/* Reserved: egress-exec sets the proxy variables itself; a host proxy URL may also carry
 * user:password. Compared upper-cased, so http_proxy etc. are covered. */
static const char *const RESERVED_EXACT[] = {
	"HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "ALL_PROXY", "NO_PROXY", "RSYNC_PROXY",
	"SOCKS_PROXY", "SOCKS5_PROXY", "GIT_PROXY_COMMAND", "WSS_PROXY", "WS_PROXY",
	"GRPC_PROXY", "NPM_CONFIG_PROXY", "NPM_CONFIG_HTTPS_PROXY", "NPM_CONFIG_NOPROXY",
};

/* Prefixes: whole families of credential-bearing variables. */
static const char *const FORBIDDEN_PREFIX[] = {
	"GITLAB_", "SSH_", "AWS_", "AZURE_", "GCP_", "GCLOUD_", "CLOUDSDK_", "DOCKER_", "KUBE_",
	"PYPI_", "TWINE_", "NPM_CONFIG__AUTH", "VAULT_", "GIT_CONFIG_", "GPG_", "PODMAN_",
};

/* Words: any '_'-separated word of the name (covers *_TOKEN, *_SECRET, *_PASSWORD,
 * *_PASSWD, *_KEY, *_API_KEY, *_CREDENTIALS and the same words mid-name). */
static const char *const FORBIDDEN_WORD[] = {
	"TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASS",
	"PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "CREDS", "APIKEY", "KEY", "KEYS", "AUTH",
	"AUTHTOKEN", "COOKIE", "COOKIES", "PRIVATE", "SESSION", "NETRC", "KUBECONFIG",
};

/* Suffixes without a separator (GHTOKEN, NPM_CONFIG__AUTHTOKEN, DBPASSWORD). */
static const char *const FORBIDDEN_SUFFIX[] = {
	"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIALS", "APIKEY",
};

/* Value fragments naming a container-runtime socket (compared case-insensitively). */
static const char *const SOCKET_FRAGMENTS[] = {
	"docker.sock", "containerd.sock", "podman.sock", "crio.sock", "cri-dockerd.sock",
	"buildkitd.sock", "dockershim.sock", "/run/docker", "/run/containerd", "/run/podman",
	"/run/crio", "/run/buildkit", "unix:", "npipe:",
};

static bool
in_list(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return true;
	return false;
}

static bool
has_suffix(const char *s, size_t len, const char *suf)
{
	size_t sl = strlen(suf);
	return len >= sl && memcmp(s + len - sl, suf, sl) == 0;
}

/* Does the upper-cased name contain word as a whole '_'-separated word? */
static bool
has_word(const char *up, const char *word)
{
	size_t wl = strlen(word);
	const char *p = up;

	while (*p != '\0') {
		const char *end = strchr(p, '_');
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
		if (len == wl && memcmp(p, word, wl) == 0)
			return true;
		if (end == NULL)
			break;
		p = end + 1;
	}
	return false;
}

enum reason
env_name_check(const char *name, char *msg, size_t msglen)
{
	char up[ENV_NAME_MAX + 1];
	size_t len;

	if (name == NULL || name[0] == '\0') {
		errbuf_set(msg, msglen, 0, "an empty environment variable name is not valid");
		return REASON_ADM_ENV_FORBIDDEN;
	}
	len = strnlen(name, ENV_NAME_MAX + 1);
	if (len > ENV_NAME_MAX) {
		errbuf_set(msg, msglen, 0, "an environment variable name is longer than %d bytes",
		    ENV_NAME_MAX);
		return REASON_ADM_ENV_FORBIDDEN;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (i > 0 && c >= '0' && c <= '9');
		if (!ok) {
			/* The name itself may be hostile text: do not echo it. */
			errbuf_set(msg, msglen, 0, "an environment variable name is not [A-Za-z_][A-Za-z0-9_]*");
			return REASON_ADM_ENV_FORBIDDEN;
		}
		up[i] = (char)toupper(c);
	}
	up[len] = '\0';

	if (in_list(up, RESERVED_EXACT, EGRESS_NELEM(RESERVED_EXACT))) {
		errbuf_set(msg, msglen, 0, "%s is set by egress-exec (proxy variables point at the run's "
		    "listener; a host proxy URL may carry credentials)", name);
		return REASON_ADM_ENV_FORBIDDEN;
	}
	if (in_list(up, FORBIDDEN_EXACT, EGRESS_NELEM(FORBIDDEN_EXACT)))
		goto forbidden;
	for (size_t i = 0; i < EGRESS_NELEM(FORBIDDEN_PREFIX); i++)
		if (strncmp(up, FORBIDDEN_PREFIX[i], strlen(FORBIDDEN_PREFIX[i])) == 0)
			goto forbidden;
	for (size_t i = 0; i < EGRESS_NELEM(FORBIDDEN_WORD); i++)
		if (has_word(up, FORBIDDEN_WORD[i]))
			goto forbidden;
	for (size_t i = 0; i < EGRESS_NELEM(FORBIDDEN_SUFFIX); i++)
		if (has_suffix(up, len, FORBIDDEN_SUFFIX[i]))
			goto forbidden;
	return REASON_ALLOWED;
forbidden:
	errbuf_set(msg, msglen, 0, "%s looks like a credential variable and is never passed to a worker",
	    name);
	return REASON_ADM_ENV_FORBIDDEN;
}

/* A host name or address character, the last one before ":port". */
static bool
host_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_' || c == ']';
}

/* A Docker daemon TCP port (2375 plain, 2376 TLS) after a host, with or without a scheme
 * ("tcp://h:2375", "h:2376", "[::1]:2375"): ":2375" after a host character and not
 * followed by another digit. Docker clients accept the bare host:port form too. */
static bool
names_docker_port(const char *v)
{
	for (const char *p = strchr(v, ':'); p != NULL; p = strchr(p + 1, ':')) {
		if (p == v || !host_char(p[-1]))
			continue;
		if ((strncmp(p + 1, "2375", 4) == 0 || strncmp(p + 1, "2376", 4) == 0) &&
		    !isdigit((unsigned char)p[5]))
			return true;
	}
	return false;
}

/*
 * Token-shaped values: the published prefixes of credentials whose value does have a
 * shape, so a neutral name (MY_SETTING=ghp_...) cannot carry one past the name rules.
 * Case-sensitive, at the start of a word (not after a letter, digit, '_' or '-'), followed
 * by at least `min` characters of the token's alphabet.
 */
enum token_alpha { TA_ALNUM, TA_ALNUM_US, TA_ALNUM_US_DASH, TA_UPPER_DIGIT, TA_ALNUM_DASH };

static const struct {
	const char *prefix;
	enum token_alpha alpha;
	size_t min;
	const char *what;
} TOKEN_SHAPES[] = {
	{ "ghp_", TA_ALNUM, 20, "a GitHub token" },
	{ "gho_", TA_ALNUM, 20, "a GitHub token" },
	{ "ghu_", TA_ALNUM, 20, "a GitHub token" },
	{ "ghs_", TA_ALNUM, 20, "a GitHub token" },
	{ "ghr_", TA_ALNUM, 20, "a GitHub token" },
	{ "github_pat_", TA_ALNUM_US, 20, "a GitHub token" },
	{ "glpat-", TA_ALNUM_US_DASH, 20, "a GitLab token" },
	{ "sk-", TA_ALNUM_US_DASH, 20, "an API secret key" },
	{ "AKIA", TA_UPPER_DIGIT, 16, "an AWS access key id" },
	{ "ASIA", TA_UPPER_DIGIT, 16, "an AWS access key id" },
	{ "xoxa-", TA_ALNUM_DASH, 10, "a Slack token" },
	{ "xoxb-", TA_ALNUM_DASH, 10, "a Slack token" },
	{ "xoxp-", TA_ALNUM_DASH, 10, "a Slack token" },
	{ "xoxo-", TA_ALNUM_DASH, 10, "a Slack token" },
	{ "xoxr-", TA_ALNUM_DASH, 10, "a Slack token" },
	{ "xoxs-", TA_ALNUM_DASH, 10, "a Slack token" },
};

static bool
token_char(char c, enum token_alpha a)
{
	unsigned char u = (unsigned char)c;

	switch (a) {
	case TA_ALNUM: return isalnum(u);
	case TA_ALNUM_US: return isalnum(u) || c == '_';
	case TA_ALNUM_US_DASH: return isalnum(u) || c == '_' || c == '-';
	case TA_UPPER_DIGIT: return isupper(u) || isdigit(u);
	case TA_ALNUM_DASH: return isalnum(u) || c == '-';
	}
	return false;
}

/* The kind of token value holds (a static string), or NULL. */
static const char *
names_token(const char *v)
{
	for (const char *p = v; *p != '\0'; p++) {
		if (p > v && (isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '-'))
			continue;
		for (size_t i = 0; i < EGRESS_NELEM(TOKEN_SHAPES); i++) {
			size_t pl = strlen(TOKEN_SHAPES[i].prefix), n = 0;

			if (strncmp(p, TOKEN_SHAPES[i].prefix, pl) != 0)
				continue;
			while (p[pl + n] != '\0' && token_char(p[pl + n], TOKEN_SHAPES[i].alpha))
				n++;
			if (n >= TOKEN_SHAPES[i].min)
				return TOKEN_SHAPES[i].what;
		}
	}
	return NULL;
}

enum reason
env_value_check(const char *name, const char *value, char *msg, size_t msglen)
{
	const char *who = name != NULL ? name : "an environment variable";
	const char *kind;

	if (value == NULL)
		return REASON_ALLOWED;
	for (size_t i = 0; i < EGRESS_NELEM(SOCKET_FRAGMENTS); i++) {
		if (strcasestr(value, SOCKET_FRAGMENTS[i]) != NULL) {
			errbuf_set(msg, msglen, 0, "the value of %s names a container-runtime or unix socket "
			    "(Docker, containerd, podman); it is never passed to a worker", who);
			return REASON_ADM_ENV_SOCKET;
		}
	}
	if (names_docker_port(value)) {
		errbuf_set(msg, msglen, 0, "the value of %s names a Docker daemon TCP port (2375/2376); it "
		    "is never passed to a worker", who);
		return REASON_ADM_ENV_SOCKET;
	}
	if ((kind = names_token(value)) != NULL) {
		errbuf_set(msg, msglen, 0, "the value of %s has the shape of %s; a credential is never "
		    "passed to a worker, whatever the variable is called", who, kind);
		return REASON_ADM_ENV_FORBIDDEN;
	}
	return REASON_ALLOWED;
}

/* Growing, bounded NAME=VALUE array. */
struct envv {
	char **v;
	size_t n;
};

static int
envv_add(struct envv *e, const char *name, const char *value)
{
	size_t nl = strlen(name), vl = strlen(value), total;
	char *s;

	if (e->n >= EGRESS_ENV_VARS_MAX)
		return -1;
	if (ckd_add_sz(&total, nl, vl) || ckd_add_sz(&total, total, (size_t)2))
		return -1;
	s = malloc(total);
	if (s == NULL)
		return -1;
	memcpy(s, name, nl);
	s[nl] = '=';
	memcpy(s + nl + 1, value, vl + 1);
	e->v[e->n++] = s;
	e->v[e->n] = NULL;
	return 0;
}

static bool
envv_has(const struct envv *e, const char *name)
{
	return env_get(e->v, name) != NULL;
}

/* First source entry NAME=...; returns the value or NULL. */
static const char *
source_lookup(const char *const *source, const char *name)
{
	size_t nl = strlen(name);

	if (source == NULL)
		return NULL;
	for (size_t i = 0; source[i] != NULL; i++) {
		const char *eq = strchr(source[i], '=');
		if (eq == NULL)
			continue;
		if ((size_t)(eq - source[i]) == nl && memcmp(source[i], name, nl) == 0)
			return eq + 1;
	}
	return NULL;
}

int
env_build(const char *const *allow, const char *const *source, const struct env_opts *opts,
    char ***out, enum reason *why, char *msg, size_t msglen)
{
	static const struct env_opts defaults = { 0 };
	struct envv e = { 0 };
	enum reason r = REASON_INTERNAL_ERROR;

	*out = NULL;
	if (opts == NULL)
		opts = &defaults;
	e.v = calloc(EGRESS_ENV_VARS_MAX + 1, sizeof(char *));
	if (e.v == NULL) {
		errbuf_set(msg, msglen, 0, "out of memory building the worker environment");
		goto fail;
	}
	for (size_t i = 0; allow != NULL && allow[i] != NULL; i++) {
		const char *name = allow[i];
		const char *value;

		r = env_name_check(name, msg, msglen);
		if (r != REASON_ALLOWED)
			goto fail;
		/* HOME is always the sandbox home: the host's would name a directory the
		 * sandbox masks. */
		if (strcmp(name, "HOME") == 0 || envv_has(&e, name))
			continue;
		value = source_lookup(source, name);
		if (value == NULL)
			continue;
		r = env_value_check(name, value, msg, msglen);
		if (r != REASON_ALLOWED)
			goto fail;
		if (strnlen(value, ENV_VALUE_MAX + 1) > ENV_VALUE_MAX) {
			r = REASON_INTERNAL_ERROR;
			errbuf_set(msg, msglen, 0, "the value of %s is longer than %d bytes", name,
			    ENV_VALUE_MAX);
			goto fail;
		}
		if (envv_add(&e, name, value) != 0) {
			r = REASON_INTERNAL_ERROR;
			errbuf_set(msg, msglen, 0, "too many environment variables (at most %d) or out of "
			    "memory at %s", EGRESS_ENV_VARS_MAX, name);
			goto fail;
		}
	}
	r = REASON_INTERNAL_ERROR;
	if (!envv_has(&e, "PATH") &&
	    envv_add(&e, "PATH", opts->path != NULL ? opts->path : ENV_DEFAULT_PATH) != 0)
		goto full;
	if (envv_add(&e, "HOME", opts->home != NULL ? opts->home : ENV_DEFAULT_HOME) != 0)
		goto full;
	if (!envv_has(&e, "LANG") &&
	    envv_add(&e, "LANG", opts->lang != NULL ? opts->lang : ENV_DEFAULT_LANG) != 0)
		goto full;
	if (opts->proxy_url != NULL) {
		static const char *const proxy_names[] = {
			"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
		};
		for (size_t i = 0; i < EGRESS_NELEM(proxy_names); i++)
			if (envv_add(&e, proxy_names[i], opts->proxy_url) != 0)
				goto full;
		/* Empty NO_PROXY: nothing bypasses the listener (there is no other route). */
		if (envv_add(&e, "NO_PROXY", "") != 0 || envv_add(&e, "no_proxy", "") != 0)
			goto full;
	}
	*out = e.v;
	if (why != NULL)
		*why = REASON_ALLOWED;
	return 0;
full:
	errbuf_set(msg, msglen, 0, "too many environment variables (at most %d) or out of memory",
	    EGRESS_ENV_VARS_MAX);
fail:
	if (why != NULL)
		*why = r;
	env_free(e.v);
	return -1;
}

int
env_file_parse(const char *name, const char *text, size_t len, char ***out, char *err,
    size_t errlen)
{
	struct envv e = { 0 };
	unsigned lineno = 0;

	*out = NULL;
	if (name == NULL)
		name = "(environment file)";
	if (len > EGRESS_ENV_FILE_MAX) {
		errbuf_set(err, errlen, 0, "%s: larger than %d bytes", name, EGRESS_ENV_FILE_MAX);
		return -1;
	}
	e.v = calloc(EGRESS_ENV_VARS_MAX + 1, sizeof(char *));
	if (e.v == NULL) {
		errbuf_set(err, errlen, 0, "%s: out of memory", name);
		return -1;
	}
	for (size_t off = 0; off < len;) {
		const char *line = text + off, *nl = memchr(line, '\n', len - off), *eq;
		size_t ll = nl != NULL ? (size_t)(nl - line) : len - off;
		char *s;

		lineno++;
		off += ll + 1;
		if (memchr(line, '\0', ll) != NULL) {
			errbuf_set(err, errlen, 0, "%s:%u: a NUL byte (an environment value cannot hold one)",
			    name, lineno);
			goto fail;
		}
		if (memchr(line, '\r', ll) != NULL) {
			/* `run` used to strip it and `check` to keep it in the value */
			errbuf_set(err, errlen, 0, "%s:%u: a carriage return (a file with CRLF line ends?)",
			    name, lineno);
			goto fail;
		}
		if (ll > (size_t)ENV_NAME_MAX + 1 + ENV_VALUE_MAX) {
			errbuf_set(err, errlen, 0, "%s:%u: line longer than %d bytes", name, lineno,
			    ENV_NAME_MAX + 1 + ENV_VALUE_MAX);
			goto fail;
		}
		if (ll == 0 || line[0] == '#')
			continue;
		eq = memchr(line, '=', ll);
		if (eq == NULL || eq == line) {
			/* the line may be a secret pasted by mistake: never echo it */
			errbuf_set(err, errlen, 0, "%s:%u: not NAME=VALUE (comments start with '#' at the "
			    "start of a line)", name, lineno);
			goto fail;
		}
		if (e.n >= EGRESS_ENV_VARS_MAX) {
			errbuf_set(err, errlen, 0, "%s:%u: more than %d variables", name, lineno,
			    EGRESS_ENV_VARS_MAX);
			goto fail;
		}
		if ((s = strndup(line, ll)) == NULL) {
			errbuf_set(err, errlen, 0, "%s: out of memory", name);
			goto fail;
		}
		e.v[e.n++] = s;
	}
	*out = e.v;
	return 0;
fail:
	env_free(e.v);
	return -1;
}

int
env_file_load(const char *path, char ***out, char *err, size_t errlen)
{
	char *buf;
	size_t len = 0;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		errbuf_set(err, errlen, 0, "%s: %s", path, strerror(errno));
		return -1;
	}
	/* One byte past the limit tells "too big" from "exactly the limit". */
	buf = malloc((size_t)EGRESS_ENV_FILE_MAX + 1);
	if (buf == NULL) {
		close(fd);
		errbuf_set(err, errlen, 0, "%s: out of memory", path);
		return -1;
	}
	while (len < (size_t)EGRESS_ENV_FILE_MAX + 1) {
		ssize_t r = read(fd, buf + len, (size_t)EGRESS_ENV_FILE_MAX + 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			errbuf_set(err, errlen, 0, "%s: %s", path, strerror(errno));
			close(fd);
			secret_wipe(buf, len);
			free(buf);
			return -1;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	rc = env_file_parse(path, buf, len, out, err, errlen);
	secret_wipe(buf, len);
	free(buf);
	return rc;
}

void
env_free(char **envp)
{
	if (envp == NULL)
		return;
	for (size_t i = 0; envp[i] != NULL; i++) {
		/* Values may be credentials the caller was careless with: wipe them. */
		secret_wipe(envp[i], strlen(envp[i]));
		free(envp[i]);
	}
	free(envp);
}

const char *
env_get(char *const *envp, const char *name)
{
	size_t nl = strlen(name);

	if (envp == NULL)
		return NULL;
	for (size_t i = 0; envp[i] != NULL; i++)
		if (strncmp(envp[i], name, nl) == 0 && envp[i][nl] == '=')
			return envp[i] + nl + 1;
	return NULL;
}

/* The variables the sandbox sets for a networked worker (and removes from the preset's
 * environment first): each client family's own spelling of "use this proxy". */
static const char *const PROXY_URL_VARS[] = {
	"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy",
	"GRPC_PROXY", "grpc_proxy", "npm_config_proxy", "npm_config_https_proxy",
};
static const char *const PROXY_EMPTY_VARS[] = {
	"NO_PROXY", "no_proxy", "npm_config_noproxy",
};

bool
env_is_proxy_convention(const char *kv, bool java)
{
	size_t n = strcspn(kv, "=");

	if (kv[n] != '=')
		return false;
	for (size_t i = 0; i < EGRESS_NELEM(PROXY_URL_VARS); i++)
		if (strlen(PROXY_URL_VARS[i]) == n && strncmp(kv, PROXY_URL_VARS[i], n) == 0)
			return true;
	for (size_t i = 0; i < EGRESS_NELEM(PROXY_EMPTY_VARS); i++)
		if (strlen(PROXY_EMPTY_VARS[i]) == n && strncmp(kv, PROXY_EMPTY_VARS[i], n) == 0)
			return true;
	if (n == strlen("EGRESS_SSH_CONNECT") && strncmp(kv, "EGRESS_SSH_CONNECT", n) == 0)
		return true;
	return java && n == strlen("JAVA_TOOL_OPTIONS") &&
	    strncmp(kv, "JAVA_TOOL_OPTIONS", n) == 0;
}

/*
 * ssh has no HTTP proxy support of its own: its ProxyCommand runs this bash script, which
 * opens a CONNECT tunnel through the listener named in HTTPS_PROXY and then relays stdin
 * and stdout. bash's read takes one byte at a time from a socket, so nothing past the
 * answer's head is consumed before the relay starts. A refusal prints egressd's reason.
 */
static const char SSH_CONNECT_SCRIPT[] =
    "hp=${HTTPS_PROXY#*://}; hp=${hp%%/*}\n"
    "exec 3<>\"/dev/tcp/${hp%:*}/${hp##*:}\" || exit 1\n"
    "printf 'CONNECT %s:%s HTTP/1.1\\r\\nHost: %s:%s\\r\\n\\r\\n' \"$1\" \"$2\" \"$1\" \"$2\" >&3\n"
    "read -r v c r <&3\n"
    "if [ \"$c\" != 200 ]; then echo \"egress: CONNECT $1:$2 refused: $c ${r%$'\\r'}\" >&2; "
    "exit 1; fi\n"
    "while read -r l <&3; do [ -n \"${l%$'\\r'}\" ] || break; done\n"
    "cat <&3 & exec cat >&3\n";

int
env_proxy_conventions(const char *proxy_url, bool java, bool ssh, char **out, size_t max)
{
	const char *hp = strstr(proxy_url, "://");
	char host[EGRESS_HOSTPORT_MAX + 1];
	const char *colon;
	size_t k = 0;

	if (hp == NULL || max < ENV_PROXY_CONVENTIONS_MAX + 1)
		return -1;
	hp += 3;
	if (strlen(hp) >= sizeof(host))
		return -1;
	snprintf(host, sizeof(host), "%s", hp);
	host[strcspn(host, "/")] = '\0';
	colon = strrchr(host, ':');
	if (colon == NULL)
		return -1;
	for (size_t i = 0; i < EGRESS_NELEM(PROXY_URL_VARS); i++)
		if (asprintf(&out[k++], "%s=%s", PROXY_URL_VARS[i], proxy_url) < 0)
			goto fail;
	for (size_t i = 0; i < EGRESS_NELEM(PROXY_EMPTY_VARS); i++)
		if (asprintf(&out[k++], "%s=", PROXY_EMPTY_VARS[i]) < 0)
			goto fail;
	/* tcp:// grants: git over ssh through the listener (the script is expanded by the
	 * shell ssh runs the ProxyCommand with, never by git's) */
	if (ssh && (asprintf(&out[k++], "EGRESS_SSH_CONNECT=%s", SSH_CONNECT_SCRIPT) < 0 ||
	    asprintf(&out[k++], "GIT_SSH_COMMAND=ssh -o ProxyCommand=\"/bin/bash -c "
	    "\\\"\\$EGRESS_SSH_CONNECT\\\" egress-ssh %%h %%p\"") < 0))
		goto fail;
	if (java && asprintf(&out[k++], "JAVA_TOOL_OPTIONS=-Dhttp.proxyHost=%.*s "
	    "-Dhttp.proxyPort=%s -Dhttps.proxyHost=%.*s -Dhttps.proxyPort=%s "
	    "-Dhttp.nonProxyHosts=", (int)(colon - host), host, colon + 1,
	    (int)(colon - host), host, colon + 1) < 0)
		goto fail;
	out[k] = NULL;
	return (int)k;
fail:
	out[k - 1] = NULL;
	for (size_t i = 0; i + 1 < k; i++) {
		free(out[i]);
		out[i] = NULL;
	}
	return -1;
}
