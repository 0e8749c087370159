/*
 * env - the worker's environment, built from nothing.
 *
 * Owns: the rules for which variables may reach a worker (the credential-name table and the
 * container-socket value check, below; docs/sandbox.md links here).
 * Callers: admission (env_name_check on a preset's allowlist, before anything runs),
 * executor/sandbox.c / cmd_run (env_build, whose result goes to sandbox_spec.envp),
 * cmd_run and cmd_check (env_file_load: the caller's --env-file).
 *
 * Rules:
 *  - Only names in the caller's allowlist, and only with the value from the caller's explicit
 *    source mapping (NAME=VALUE strings; never the process's own environ implicitly). An
 *    allowed name absent from the source is simply not set.
 *  - A name that looks like a credential (GITHUB_TOKEN, SSH_*, AWS_*, *_TOKEN, *_SECRET, ...)
 *    is refused even when allowed: REASON_ADM_ENV_FORBIDDEN. So is a proxy variable
 *    (HTTP_PROXY, ALL_PROXY, NO_PROXY, ... any case): egress-exec sets those itself, and a
 *    host proxy URL may carry user:password.
 *  - A value naming a Docker, containerd, podman (or CRI-O, buildkit) socket, any unix://
 *    URL, or a host on the Docker daemon ports 2375/2376 (`tcp://h:2375`, `h:2376`) is
 *    refused: REASON_ADM_ENV_SOCKET.
 *  - A value holding a token-shaped word is refused under any name: REASON_ADM_ENV_FORBIDDEN.
 *    Shapes (case-sensitive, at a word start, then at least N characters of the token's
 *    alphabet): ghp_ gho_ ghu_ ghs_ ghr_ github_pat_ (GitHub, 20), glpat- (GitLab, 20),
 *    sk- (API secret keys: OpenAI, Anthropic, ..., 20), AKIA ASIA (AWS key ids, 16 of
 *    A-Z0-9), xoxa- xoxb- xoxp- xoxo- xoxr- xoxs- (Slack, 10).
 *  - Messages name the variable, never its value.
 *
 * The name table (case-insensitive; the source is the arrays at the top of env.c):
 *
 *   kind       entries                                          why
 *   exact      GITHUB_TOKEN GH_TOKEN GH_ENTERPRISE_TOKEN        forge tokens
 *              GITHUB_ENTERPRISE_TOKEN NPM_TOKEN NODE_AUTH_TOKEN  package registry tokens
 *              SSH_AUTH_SOCK                                    host SSH agent
 *              KUBECONFIG GOOGLE_APPLICATION_CREDENTIALS        cluster / cloud credential files
 *              NETRC GNUPGHOME GPG_AGENT_INFO                   password / key stores
 *              DBUS_SESSION_BUS_ADDRESS DBUS_SYSTEM_BUS_ADDRESS host IPC buses (unix sockets)
 *              XDG_RUNTIME_DIR                                  holds the user's sockets (podman...)
 *              GIT_ASKPASS GIT_SSH GIT_SSH_COMMAND              git credential paths
 *              GIT_CREDENTIAL_HELPER
 *              CONTAINER_HOST CONTAINER_SSHKEY                  podman remote
 *              CONTAINERD_ADDRESS BUILDKIT_HOST                 container runtimes
 *   reserved   HTTP_PROXY HTTPS_PROXY FTP_PROXY ALL_PROXY       set by egress-exec; host proxy
 *              NO_PROXY RSYNC_PROXY SOCKS_PROXY SOCKS5_PROXY     URLs may carry user:password
 *              GIT_PROXY_COMMAND WS_PROXY WSS_PROXY
 *   prefix     GITLAB_ SSH_ AWS_ AZURE_ GCP_ GCLOUD_ CLOUDSDK_   credential-bearing families
 *              DOCKER_ KUBE_ PYPI_ TWINE_ NPM_CONFIG__AUTH
 *              VAULT_ GIT_CONFIG_ GPG_ PODMAN_
 *   word       TOKEN(S) SECRET(S) PASSWORD(S) PASSWD PASS      any '_'-separated word: covers
 *              PASSPHRASE CREDENTIAL(S) CREDS APIKEY KEY(S)     *_TOKEN *_SECRET *_PASSWORD
 *              AUTH AUTHTOKEN COOKIE(S) PRIVATE SESSION         *_PASSWD *_KEY *_API_KEY
 *              NETRC KUBECONFIG                                 *_CREDENTIALS and mid-name uses
 *   suffix     TOKEN SECRET PASSWORD PASSWD CREDENTIALS APIKEY  glued names (GHTOKEN, DBPASSWORD)
 *
 * Value fragments refused (case-insensitive substring): docker.sock containerd.sock
 * podman.sock crio.sock cri-dockerd.sock buildkitd.sock dockershim.sock /run/docker
 * /run/containerd /run/podman /run/crio /run/buildkit unix: npipe: ; and any URL
 * with port :2375 or :2376 after a host, with or without a scheme (Docker daemon TCP).
 *  - Then: HTTP_PROXY, HTTPS_PROXY, http_proxy, https_proxy = proxy_url and NO_PROXY,
 *    no_proxy = "" when networked; PATH, HOME, LANG from env_opts (defaults below) unless
 *    the allowlist copied PATH or LANG (HOME is always the sandbox home).
 */
#ifndef EGRESS_ENV_H
#define EGRESS_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include "common/limits.h"
#include "common/reasons.h"

#define ENV_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
#define ENV_DEFAULT_HOME "/tmp"
#define ENV_DEFAULT_LANG "C.UTF-8"
#define ENV_NAME_MAX     EGRESS_ENV_NAME_MAX   /* longest variable name accepted */
#define ENV_VALUE_MAX    EGRESS_ENV_VALUE_MAX  /* longest value copied */

struct env_opts {
	const char *proxy_url;  /* "http://169.254.x.y:3128" when networked; NULL = no network */
	const char *path;       /* NULL = ENV_DEFAULT_PATH */
	const char *home;       /* NULL = ENV_DEFAULT_HOME */
	const char *lang;       /* NULL = ENV_DEFAULT_LANG */
};

/*
 * May this name be allowlisted? REASON_ALLOWED, or REASON_ADM_ENV_FORBIDDEN for a
 * credential-looking or reserved (proxy) name, or a name that is not [A-Za-z_][A-Za-z0-9_]*
 * of at most ENV_NAME_MAX bytes. Case-insensitive. When msg is non-NULL a one-line reason
 * naming the variable is written (msglen bytes, NUL-terminated).
 */
enum reason env_name_check(const char *name, char *msg, size_t msglen);

/* May this value be passed? REASON_ALLOWED, REASON_ADM_ENV_SOCKET or (token-shaped)
 * REASON_ADM_ENV_FORBIDDEN (see the rules). The message, when msg is non-NULL, names `name`
 * (may be NULL) and never the value. */
enum reason env_value_check(const char *name, const char *value, char *msg, size_t msglen);

/*
 * Build the environment. allow: NULL-terminated names (may be NULL = none). source:
 * NULL-terminated "NAME=VALUE" strings (may be NULL); an entry without '=' is ignored; the
 * first entry for a name wins. At most EGRESS_ENV_VARS_MAX variables in the result.
 * On success returns 0 and *out is a new NULL-terminated "NAME=VALUE" array (free with
 * env_free). On refusal returns -1, *why is the reason (ADM_ENV_FORBIDDEN, ADM_ENV_SOCKET,
 * or INTERNAL_ERROR for OOM / too many / too long), msg says which variable, *out is NULL.
 * The whole build is refused on the first bad entry: nothing half-built is returned.
 */
int env_build(const char *const *allow, const char *const *source,
    const struct env_opts *opts, char ***out, enum reason *why, char *msg, size_t msglen);

/*
 * The caller's environment file (`--env-file` of `run` and `check`): the one parser, so
 * `check` judges exactly the environment `run` uses. The format:
 *  - one NAME=VALUE per line, the value running to the end of the line ('\n'; nothing is
 *    unquoted or trimmed); a last line without '\n' counts;
 *  - empty lines and lines starting with '#' are skipped;
 *  - anything else refuses the whole file with "name:line: why": a line without '=' or
 *    with an empty name, a line longer than ENV_NAME_MAX + 1 + ENV_VALUE_MAX bytes, a NUL
 *    byte or a carriage return (CRLF files), more than EGRESS_ENV_VARS_MAX variables, a file over EGRESS_ENV_FILE_MAX bytes.
 *    Nothing is skipped, split or cut silently.
 * The entries are kept in file order (env_build takes the first entry of a name). Which
 * names and values may reach a worker is env_build's and admission's business, not this.
 * On success 0 and *out is a new NULL-terminated array (free with env_free); on refusal -1,
 * *out NULL and err filled (errlen bytes). `name` labels messages (the path).
 */
int env_file_parse(const char *name, const char *text, size_t len, char ***out, char *err,
    size_t errlen);

/* Read path (a file or a pipe such as <(printenv), at most EGRESS_ENV_FILE_MAX bytes) and
 * env_file_parse it. The same contract. */
int env_file_load(const char *path, char ***out, char *err, size_t errlen);

/*
 * Proxy conventions (docs/sandbox.md "Environment"): for a networked worker the sandbox sets,
 * all pointing at proxy_url ("http://IP:PORT", the run's listener): HTTP_PROXY, HTTPS_PROXY,
 * ALL_PROXY, GRPC_PROXY (each also lower-case), npm_config_proxy, npm_config_https_proxy;
 * empty NO_PROXY, no_proxy, npm_config_noproxy (nothing bypasses the listener); and with
 * java (the preset's `java_proxy = yes`) JAVA_TOOL_OPTIONS with -Dhttp(s).proxyHost/Port;
 * with ssh (the grant has a tcp:// entry) GIT_SSH_COMMAND, an ssh whose ProxyCommand opens
 * a CONNECT tunnel through the listener with the bash script in EGRESS_SSH_CONNECT.
 * env_proxy_conventions writes heap "NAME=VALUE" strings to out (NULL-terminated; max must
 * be > ENV_PROXY_CONVENTIONS_MAX) and returns how many, or -1 (nothing left allocated).
 * env_is_proxy_convention: does kv set one of those names (removed from the preset's
 * environment first, so the worker's value is always the sandbox's)?
 */
#define ENV_PROXY_CONVENTIONS_MAX 16
int env_proxy_conventions(const char *proxy_url, bool java, bool ssh, char **out, size_t max);
bool env_is_proxy_convention(const char *kv, bool java);

/* Free an array from env_build or env_file_parse (values are wiped). Accepts NULL. */
void env_free(char **envp);

/* Lookup in a NAME=VALUE array: the value, or NULL. For tests and the manifest. */
const char *env_get(char *const *envp, const char *name);

#endif
