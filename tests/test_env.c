/*
 * test_env - the worker environment: only allowed names from the explicit source, credential
 * names and container sockets refused (each allow path has its negative twin), proxy and
 * minimal variables added.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>
#include <cmocka.h>

#include "common/limits.h"
#include "executor/env.h"

static void
test_name_check_forbidden(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"GITHUB_TOKEN", "GH_TOKEN", "github_token", "GITLAB_TOKEN", "GITLAB_URL",
		"SSH_AUTH_SOCK", "SSH_AGENT_PID", "AWS_ACCESS_KEY_ID", "AWS_PROFILE",
		"AZURE_CLIENT_SECRET", "GOOGLE_APPLICATION_CREDENTIALS", "GCP_PROJECT",
		"CLOUDSDK_CONFIG", "DOCKER_HOST", "DOCKER_CONFIG", "KUBECONFIG", "KUBE_TOKEN",
		"NPM_TOKEN", "NPM_CONFIG__AUTH", "NPM_CONFIG__AUTHTOKEN", "NODE_AUTH_TOKEN",
		"PYPI_PASSWORD", "TWINE_USERNAME", "MY_TOKEN", "SOME_SECRET", "DB_PASSWORD",
		"LDAP_PASSWD", "SIGNING_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
		"SERVICE_CREDENTIALS", "HF_TOKEN", "CI_JOB_TOKEN", "GHTOKEN", "MYSECRET",
		"TOKEN", "SECRET_VALUE", "API_KEY", "VAULT_ADDR", "GIT_ASKPASS",
		"GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "DBUS_SESSION_BUS_ADDRESS",
		"XDG_RUNTIME_DIR", "CONTAINER_HOST", "BASIC_AUTH", "HTTP_PROXY", "https_proxy",
		"ALL_PROXY", "no_proxy", "Http_Proxy",
	};
	char msg[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		msg[0] = '\0';
		if (env_name_check(bad[i], msg, sizeof(msg)) != REASON_ADM_ENV_FORBIDDEN)
			fail_msg("%s was not refused", bad[i]);
		/* the message names the variable */
		assert_non_null(strstr(msg, bad[i]));
	}
}

static void
test_name_check_allowed(void **state)
{
	(void)state;
	/* Negative twins of the rules above: near names that are not credentials. */
	static const char *const ok[] = {
		"PATH", "LANG", "TERM", "CI", "GITHUB_SHA", "GIT_AUTHOR_NAME", "GIT_COMMITTER_EMAIL",
		"TOKENIZERS_PARALLELISM", "KEYBOARD_LAYOUT", "PYTHONHASHSEED", "CARGO_HOME",
		"RUST_LOG", "NODE_ENV", "MAVEN_OPTS", "_", "x1", "PASSTHROUGH_MODE", "HOME",
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (env_name_check(ok[i], NULL, 0) != REASON_ALLOWED)
			fail_msg("%s was refused", ok[i]);
}

static void
test_name_check_invalid(void **state)
{
	(void)state;
	char msg[256];
	char longname[ENV_NAME_MAX + 2];

	assert_int_equal(env_name_check("", msg, sizeof(msg)), REASON_ADM_ENV_FORBIDDEN);
	assert_int_equal(env_name_check(NULL, msg, sizeof(msg)), REASON_ADM_ENV_FORBIDDEN);
	assert_int_equal(env_name_check("1ABC", msg, sizeof(msg)), REASON_ADM_ENV_FORBIDDEN);
	assert_int_equal(env_name_check("A=B", msg, sizeof(msg)), REASON_ADM_ENV_FORBIDDEN);
	assert_int_equal(env_name_check("A-B", msg, sizeof(msg)), REASON_ADM_ENV_FORBIDDEN);
	assert_int_equal(env_name_check("A B", msg, sizeof(msg)), REASON_ADM_ENV_FORBIDDEN);
	/* hostile name text is not echoed */
	assert_int_equal(env_name_check("X\n\x1b[31m", msg, sizeof(msg)), REASON_ADM_ENV_FORBIDDEN);
	assert_null(strchr(msg, '\x1b'));
	memset(longname, 'A', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(env_name_check(longname, msg, sizeof(msg)), REASON_ADM_ENV_FORBIDDEN);
	longname[ENV_NAME_MAX] = '\0';
	assert_int_equal(env_name_check(longname, msg, sizeof(msg)), REASON_ALLOWED);
}

static void
test_value_check(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"/var/run/docker.sock", "unix:///var/run/docker.sock", "/run/containerd/containerd.sock",
		"/run/user/1000/podman/podman.sock", "UNIX:///tmp/x", "unix:path=/run/dbus/socket",
		"tcp://10.0.0.1:2375", "tcp://[::1]:2376/", "http://docker:2375", "/run/containerd",
		"npipe:////./pipe/docker_engine", "/var/run/crio/crio.sock", "x:/run/docker/foo",
		"/RUN/DOCKER.SOCK",
		/* a docker endpoint without a scheme is one too */
		"a:2375", "dockerhost:2376", "10.0.0.1:2375", "[::1]:2376", "h.example:2375/v1",
		"x,docker.internal:2375",
	};
	static const char *const ok[] = {
		"", "/usr/bin", "hello world", "tcp://10.0.0.1:23750", "http://h:8080",
		"docker", "containerd", "2375", "unixish", "/run/other.sock", ":2375", "a: 2375",
		"h:23756", "a:12375",
	};
	char msg[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		msg[0] = '\0';
		if (env_value_check("SOMEVAR", bad[i], msg, sizeof(msg)) != REASON_ADM_ENV_SOCKET)
			fail_msg("value %s was not refused", bad[i]);
		assert_non_null(strstr(msg, "SOMEVAR"));
		/* never the value */
		assert_null(strstr(msg, bad[i]));
	}
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (env_value_check("SOMEVAR", ok[i], NULL, 0) != REASON_ALLOWED)
			fail_msg("value %s was refused", ok[i]);
}

/* Token-shaped values are refused under any name (neutral names passed them before). */
static void
test_value_tokens(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"ghp_0123456789abcdefghijABCDEFGHIJ012345", "gho_0123456789abcdefghijklmn",
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
		"sk-proj-abcdefghijklmnopqrstuvwxyz0123", "sk-ant-api03-abcdefghijklmnopqrstuvwx",
		"AKIAIOSFODNN7EXAMPLE", "ASIAIOSFODNN7EXAMPL3", "xoxb-1234567890-abcdefghij",
		"xoxp-0123456789-abc", "glpat-abcdefghij0123456789",
		/* inside a longer value, after a separator */
		"Bearer ghp_0123456789abcdefghijABCDEFGHIJ012345",
		"https://x:ghp_0123456789abcdefghijABCDEF@github.com/o/r",
		"key=sk-abcdefghijklmnopqrstuvwxyz",
	};
	static const char *const ok[] = {
		"ghp_short", "sk-", "sk-abc", "task-abcdefghijklmnopqrstuvwxyz0123",
		"AKIAlowercase0123456789", "akiaiosfodnn7example", "xoxb-", "xoxz-1234567890abcd",
		"my-ghp_0123456789abcdefghijABCDEFGHIJ", "risk-assessment-for-the-next-quarter",
		"AKIA0123", "desk-0123456789012345678901234",
	};
	char msg[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		msg[0] = '\0';
		if (env_value_check("NEUTRAL_SETTING", bad[i], msg, sizeof(msg)) !=
		    REASON_ADM_ENV_FORBIDDEN)
			fail_msg("token-shaped value %s was not refused", bad[i]);
		assert_non_null(strstr(msg, "NEUTRAL_SETTING"));
		assert_null(strstr(msg, bad[i]));
	}
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (env_value_check("NEUTRAL_SETTING", ok[i], NULL, 0) != REASON_ALLOWED)
			fail_msg("value %s was refused", ok[i]);

	/* and env_build refuses the whole environment for it */
	const char *allow[] = { "NEUTRAL_SETTING", NULL };
	const char *source[] = { "NEUTRAL_SETTING=ghp_0123456789abcdefghijABCDEFGHIJ012345",
		NULL };
	char **envp = NULL;
	enum reason why;
	assert_int_equal(env_build(allow, source, NULL, &envp, &why, msg, sizeof(msg)), -1);
	assert_int_equal(why, REASON_ADM_ENV_FORBIDDEN);
	assert_null(envp);
}

static void
test_build_from_nothing(void **state)
{
	(void)state;
	static const char *const allow[] = { "TERM", "FOO", "MISSING", "FOO", NULL };
	static const char *const source[] = {
		"TERM=xterm", "FOO=first", "FOO=second", "BAR=not-allowed", "noequals",
		"GITHUB_TOKEN=ghp_x", NULL,
	};
	char **envp = NULL;
	enum reason why = REASON_INTERNAL_ERROR;
	char msg[256] = "";

	assert_int_equal(env_build(allow, source, NULL, &envp, &why, msg, sizeof(msg)), 0);
	assert_int_equal(why, REASON_ALLOWED);
	assert_string_equal(env_get(envp, "TERM"), "xterm");
	assert_string_equal(env_get(envp, "FOO"), "first");
	assert_null(env_get(envp, "MISSING"));
	assert_null(env_get(envp, "BAR"));
	assert_null(env_get(envp, "GITHUB_TOKEN"));
	assert_string_equal(env_get(envp, "PATH"), ENV_DEFAULT_PATH);
	assert_string_equal(env_get(envp, "HOME"), ENV_DEFAULT_HOME);
	assert_string_equal(env_get(envp, "LANG"), ENV_DEFAULT_LANG);
	/* no network: no proxy variables */
	assert_null(env_get(envp, "HTTP_PROXY"));
	assert_null(env_get(envp, "https_proxy"));
	size_t n = 0;
	while (envp[n] != NULL)
		n++;
	assert_int_equal(n, 5); /* TERM FOO PATH HOME LANG */
	env_free(envp);

	/* nothing allowed, nothing given: only the minimal variables */
	assert_int_equal(env_build(NULL, NULL, NULL, &envp, &why, msg, sizeof(msg)), 0);
	assert_non_null(env_get(envp, "PATH"));
	assert_null(envp[3]);
	env_free(envp);
}

static void
test_build_proxy(void **state)
{
	(void)state;
	static const char *const allow[] = { "PATH", "LANG", "HOME", NULL };
	static const char *const source[] = { "PATH=/opt/bin", "LANG=de_DE.UTF-8", "HOME=/root", NULL };
	struct env_opts opts = { .proxy_url = "http://169.254.10.1:3128", .home = "/home/worker" };
	char **envp = NULL;
	enum reason why;

	assert_int_equal(env_build(allow, source, &opts, &envp, &why, NULL, 0), 0);
	assert_string_equal(env_get(envp, "PATH"), "/opt/bin");
	assert_string_equal(env_get(envp, "LANG"), "de_DE.UTF-8");
	/* the host's HOME is never copied */
	assert_string_equal(env_get(envp, "HOME"), "/home/worker");
	assert_string_equal(env_get(envp, "HTTP_PROXY"), "http://169.254.10.1:3128");
	assert_string_equal(env_get(envp, "HTTPS_PROXY"), "http://169.254.10.1:3128");
	assert_string_equal(env_get(envp, "http_proxy"), "http://169.254.10.1:3128");
	assert_string_equal(env_get(envp, "https_proxy"), "http://169.254.10.1:3128");
	assert_string_equal(env_get(envp, "NO_PROXY"), "");
	assert_string_equal(env_get(envp, "no_proxy"), "");
	env_free(envp);
}

static void
test_build_refusals(void **state)
{
	(void)state;
	char **envp = (char **)0x1;
	enum reason why = REASON_ALLOWED;
	char msg[256] = "";
	static const char *const source[] = {
		"GITHUB_TOKEN=ghp_secretvalue", "DOCKER_SOCK_PATH=/var/run/docker.sock",
		"HTTP_PROXY=http://user:pw@corp:8080", "OK=1", NULL,
	};

	/* credential name allowed by the caller: refused anyway, message names it */
	static const char *const a1[] = { "OK", "GITHUB_TOKEN", NULL };
	assert_int_equal(env_build(a1, source, NULL, &envp, &why, msg, sizeof(msg)), -1);
	assert_null(envp);
	assert_int_equal(why, REASON_ADM_ENV_FORBIDDEN);
	assert_non_null(strstr(msg, "GITHUB_TOKEN"));
	assert_null(strstr(msg, "ghp_"));

	/* refused even when the source does not hold it (preset allowlist check) */
	static const char *const a2[] = { "AWS_SECRET_ACCESS_KEY", NULL };
	assert_int_equal(env_build(a2, NULL, NULL, &envp, &why, msg, sizeof(msg)), -1);
	assert_int_equal(why, REASON_ADM_ENV_FORBIDDEN);

	/* socket value under a harmless-looking name */
	static const char *const a3[] = { "DOCKER_SOCK_PATH", NULL };
	assert_int_equal(env_build(a3, source, NULL, &envp, &why, msg, sizeof(msg)), -1);
	assert_int_equal(why, REASON_ADM_ENV_FORBIDDEN); /* DOCKER_ prefix first */
	static const char *const src4[] = { "SOCKPATH=unix:///run/podman/podman.sock", NULL };
	static const char *const a4[] = { "SOCKPATH", NULL };
	assert_int_equal(env_build(a4, src4, NULL, &envp, &why, msg, sizeof(msg)), -1);
	assert_int_equal(why, REASON_ADM_ENV_SOCKET);
	assert_non_null(strstr(msg, "SOCKPATH"));
	assert_null(strstr(msg, "podman.sock"));

	/* proxy variables are reserved */
	static const char *const a5[] = { "HTTP_PROXY", NULL };
	assert_int_equal(env_build(a5, source, NULL, &envp, &why, msg, sizeof(msg)), -1);
	assert_int_equal(why, REASON_ADM_ENV_FORBIDDEN);
	assert_null(strstr(msg, "pw@"));
}

static void
test_build_bounds(void **state)
{
	(void)state;
	char **envp = NULL;
	enum reason why;
	char msg[256];
	/* too many variables */
	static char names[EGRESS_ENV_VARS_MAX + 1][16];
	static char entries[EGRESS_ENV_VARS_MAX + 1][24];
	static const char *allow[EGRESS_ENV_VARS_MAX + 2];
	static const char *source[EGRESS_ENV_VARS_MAX + 2];
	for (int i = 0; i <= EGRESS_ENV_VARS_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "V%d", i);
		snprintf(entries[i], sizeof(entries[i]), "V%d=x", i);
		allow[i] = names[i];
		source[i] = entries[i];
	}
	assert_int_equal(env_build(allow, source, NULL, &envp, &why, msg, sizeof(msg)), -1);
	assert_int_equal(why, REASON_INTERNAL_ERROR);
	assert_null(envp);

	/* a value over ENV_VALUE_MAX */
	char *big = malloc(ENV_VALUE_MAX + 16);
	assert_non_null(big);
	memcpy(big, "BIG=", 4);
	memset(big + 4, 'x', ENV_VALUE_MAX + 1);
	big[ENV_VALUE_MAX + 5] = '\0';
	const char *src2[] = { big, NULL };
	const char *al2[] = { "BIG", NULL };
	assert_int_equal(env_build(al2, src2, NULL, &envp, &why, msg, sizeof(msg)), -1);
	assert_int_equal(why, REASON_INTERNAL_ERROR);
	free(big);
	env_free(NULL);
}

/* The --env-file parser `run` and `check` share. Before it was one parser, `run` skipped
 * the lines `check` refused, split long lines and dropped variables past the bound. */
static void
test_env_file(void **state)
{
	(void)state;
	char **v = NULL, err[256];
	static const char good[] = "LANG=C.UTF-8\n# a comment\n\nFOO=a b = c\nEMPTY=\nLAST=x";

	assert_int_equal(env_file_parse("e", good, strlen(good), &v, err, sizeof(err)), 0);
	assert_non_null(v);
	assert_string_equal(v[0], "LANG=C.UTF-8");
	assert_string_equal(v[1], "FOO=a b = c");
	assert_string_equal(v[2], "EMPTY=");
	assert_string_equal(v[3], "LAST=x");
	assert_null(v[4]);
	env_free(v);
	assert_int_equal(env_file_parse("e", "", 0, &v, err, sizeof(err)), 0);
	assert_null(v[0]);
	env_free(v);

	static const struct { const char *text; const char *where; } bad[] = {
		{ "A=1\nnot a pair\n", "e:2:" },
		{ "A=1\n\n=value\n", "e:3:" },
		{ " # indented comment\n", "e:1:" },
		{ "A=1\r\nB=2\r\n", "e:1:" },
		{ "A=1\nB=2\nghp_0123456789abcdefghij\n", "e:3:" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = (char **)1;
		assert_int_equal(env_file_parse("e", bad[i].text, strlen(bad[i].text), &v, err,
		    sizeof(err)), -1);
		assert_null(v);
		if (strncmp(err, bad[i].where, strlen(bad[i].where)) != 0)
			fail_msg("case %zu: %s", i, err);
		/* a refused line is never echoed: it may be a pasted secret */
		assert_null(strstr(err, "ghp_"));
	}
	/* a NUL byte would cut a value */
	static const char nul[] = "A=1\nB=x\0y\n";
	assert_int_equal(env_file_parse("e", nul, sizeof(nul) - 1, &v, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "e:2:"));

	/* a line over the bound is refused, not split into two variables */
	size_t big = ENV_NAME_MAX + 1 + ENV_VALUE_MAX + 1;
	char *t = malloc(big + 16);
	assert_non_null(t);
	memcpy(t, "A=1\nBIG=", 8);
	memset(t + 8, 'x', big - 4);
	t[big + 4] = '\n';
	assert_int_equal(env_file_parse("e", t, big + 5, &v, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "e:2:"));
	/* exactly at the bound: accepted whole */
	assert_int_equal(env_file_parse("e", t, 4 + ENV_NAME_MAX + 1 + ENV_VALUE_MAX, &v, err,
	    sizeof(err)), 0);
	assert_int_equal(strlen(v[1]), ENV_NAME_MAX + 1 + ENV_VALUE_MAX);
	env_free(v);
	free(t);

	/* more variables than the bound: refused at the first one too many, not dropped */
	size_t cap = (EGRESS_ENV_VARS_MAX + 1) * 16;
	char *many = malloc(cap);
	size_t off = 0;
	assert_non_null(many);
	for (int i = 0; i <= EGRESS_ENV_VARS_MAX; i++)
		off += (size_t)snprintf(many + off, cap - off, "V%d=x\n", i);
	assert_int_equal(env_file_parse("e", many, off, &v, err, sizeof(err)), -1);
	char want[32];
	snprintf(want, sizeof(want), "e:%d:", EGRESS_ENV_VARS_MAX + 1);
	assert_non_null(strstr(err, want));
	free(many);

	/* env_file_load: a missing file, and a real one */
	assert_int_equal(env_file_load("/nonexistent-envfile", &v, err, sizeof(err)), -1);
	char path[] = "/tmp/egress-envfile-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "A=1\nB\n", 6), 6);
	close(fd);
	assert_int_equal(env_file_load(path, &v, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s:2:", path);
	assert_non_null(strstr(err, want));
	unlink(path);
}

/* Proxy conventions beyond HTTP(S)_PROXY: all at the listener; reserved in allowlists. */
static void
test_proxy_conventions(void **state)
{
	char *out[ENV_PROXY_CONVENTIONS_MAX + 1];
	char msg[256];
	int n;

	(void)state;
	n = env_proxy_conventions("http://169.254.10.1:3128", false, false, out,
	    ENV_PROXY_CONVENTIONS_MAX + 1);
	assert_true(n > 0 && n <= ENV_PROXY_CONVENTIONS_MAX);
	assert_null(out[n]);
	assert_non_null(env_get(out, "ALL_PROXY"));
	assert_string_equal(env_get(out, "grpc_proxy"), "http://169.254.10.1:3128");
	assert_string_equal(env_get(out, "npm_config_https_proxy"), "http://169.254.10.1:3128");
	assert_string_equal(env_get(out, "npm_config_noproxy"), "");
	assert_null(env_get(out, "JAVA_TOOL_OPTIONS"));
	assert_null(env_get(out, "GIT_SSH_COMMAND"));
	for (int i = 0; i < n; i++)
		assert_true(env_is_proxy_convention(out[i], false));
	for (int i = 0; i < n; i++)
		free(out[i]);
	n = env_proxy_conventions("http://169.254.10.1:3128", true, true, out,
	    ENV_PROXY_CONVENTIONS_MAX + 1);
	assert_true(n > 0);
	assert_non_null(strstr(env_get(out, "JAVA_TOOL_OPTIONS"),
	    "-Dhttps.proxyHost=169.254.10.1 -Dhttps.proxyPort=3128"));
	assert_non_null(strstr(env_get(out, "GIT_SSH_COMMAND"), "ProxyCommand="));
	assert_non_null(strstr(env_get(out, "EGRESS_SSH_CONNECT"), "CONNECT %s:%s"));
	for (int i = 0; i < n; i++)
		free(out[i]);
	/* a caller's JAVA_TOOL_OPTIONS is replaced only when the preset opts in */
	assert_false(env_is_proxy_convention("JAVA_TOOL_OPTIONS=-Xmx1g", false));
	assert_true(env_is_proxy_convention("JAVA_TOOL_OPTIONS=-Xmx1g", true));
	assert_false(env_is_proxy_convention("GRPC_PROXYX=1", false));
	/* bad input, short output array */
	assert_int_equal(env_proxy_conventions("169.254.10.1", false, false, out, 20), -1);
	assert_int_equal(env_proxy_conventions("http://169.254.10.1:3128", false, false, out, 3), -1);
	/* never allowlistable */
	assert_int_equal(env_name_check("grpc_proxy", msg, sizeof(msg)), REASON_ADM_ENV_FORBIDDEN);
	assert_int_equal(env_name_check("npm_config_https_proxy", msg, sizeof(msg)),
	    REASON_ADM_ENV_FORBIDDEN);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_name_check_forbidden),
		cmocka_unit_test(test_name_check_allowed),
		cmocka_unit_test(test_name_check_invalid),
		cmocka_unit_test(test_value_check),
		cmocka_unit_test(test_value_tokens),
		cmocka_unit_test(test_build_from_nothing),
		cmocka_unit_test(test_build_proxy),
		cmocka_unit_test(test_build_refusals),
		cmocka_unit_test(test_build_bounds),
		cmocka_unit_test(test_env_file),
		cmocka_unit_test(test_proxy_conventions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
