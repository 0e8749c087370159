/*
 * doctor - `egress-exec doctor [--egressd-control SOCK] [--json]`: one row per capability
 * and per dependency, each ok / degraded / missing, required or warning, with a fix hint.
 * Exit 0 when every required row is ok, EXEC_EXIT_CAPABILITY otherwise. Degraded never
 * means unconfined: a run refuses whatever doctor says, unless the nine capabilities are
 * attested at run time.
 */
#define _GNU_SOURCE
#include "executor/commands.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/ctlclient.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "executor/attest.h"
#include "executor/cgroup.h"
#include "executor/egressd_client.h"
#include "executor/hostroute.h"
#include "executor/netcapture.h"
#include "executor/sandbox.h"
#include "executor/seccomp.h"

#define DOCTOR_SETTINGS_MAX    32

extern char **environ;

enum doctor_state { DOC_OK, DOC_DEGRADED, DOC_MISSING };

struct doctor {
	json_t *rows;
	bool required_failed;
	bool json;
};

static const char *
doctor_state_str(enum doctor_state s)
{
	return s == DOC_OK ? "ok" : s == DOC_DEGRADED ? "degraded" : "missing";
}

static void doctor_row(struct doctor *d, const char *name, enum doctor_state s,
    bool required, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static void
doctor_row(struct doctor *d, const char *name, enum doctor_state s, bool required,
    const char *hint, const char *fmt, ...)
{
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (required && s != DOC_OK)
		d->required_failed = true;
	json_array_append_new(d->rows, json_pack("{s:s, s:s, s:s, s:s, s:s}", "check", name,
	    "state", doctor_state_str(s), "level", required ? "required" : "warning",
	    "detail", detail, "fix", s == DOC_OK ? "" : hint));
}

static int
doctor_read_int(const char *path, long long *out)
{
	char buf[64];
	const char *es;

	if (file_read_text(path, 0, buf, sizeof(buf)) <= 0)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return num_parse(buf, -1, INT64_MAX, out, &es);
}

static bool
doctor_fs_has(const char *fs)
{
	FILE *f = fopen("/proc/filesystems", "re");
	char line[128];
	bool found = false;

	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *t = strrchr(line, '\t');
		t = t ? t + 1 : line;
		t[strcspn(t, "\n")] = '\0';
		found = strcmp(t, fs) == 0;
	}
	fclose(f);
	return found;
}

static void
doctor_kernel(struct doctor *d)
{
	static const char *const ns[] = { "mnt", "pid", "net", "ipc", "uts", "cgroup" };
	struct utsname u;
	char missing[128] = "";
	long long major = 0, minor = 0;
	const char *es;
	char *dot;

	uname(&u);
	for (size_t i = 0; i < EGRESS_NELEM(ns); i++) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/self/ns/%s", ns[i]);
		if (access(p, F_OK) < 0) {
			size_t used = strlen(missing);
			snprintf(missing + used, sizeof(missing) - used, "%s ", ns[i]);
		}
	}
	doctor_row(d, "kernel.namespaces", missing[0] ? DOC_MISSING : DOC_OK, true,
	    "use a kernel built with CONFIG_NAMESPACES, PID_NS, NET_NS, IPC_NS, UTS_NS, CGROUPS",
	    "kernel %s; %s%s", u.release, missing[0] ? "missing: " : "mnt pid net ipc uts cgroup",
	    missing);
	doctor_row(d, "kernel.overlayfs", doctor_fs_has("overlay") ? DOC_OK : DOC_MISSING, true,
	    "modprobe overlay (CONFIG_OVERLAY_FS)", "overlay %s in /proc/filesystems",
	    doctor_fs_has("overlay") ? "listed" : "not listed");
	doctor_row(d, "kernel.tmpfs", doctor_fs_has("tmpfs") ? DOC_OK : DOC_MISSING, true,
	    "CONFIG_TMPFS", "tmpfs %s", doctor_fs_has("tmpfs") ? "listed" : "not listed");
	/* idmapped lower layers for root-owned repositories need >= 5.19 */
	dot = strchr(u.release, '.');
	if (dot) {
		char maj[16];
		size_t n = (size_t)(dot - u.release);
		if (n < sizeof(maj)) {
			memcpy(maj, u.release, n);
			maj[n] = '\0';
			num_parse(maj, 0, 1000, &major, &es);
			char mi[16];
			size_t m = strspn(dot + 1, "0123456789");
			if (m < sizeof(mi)) {
				memcpy(mi, dot + 1, m);
				mi[m] = '\0';
				num_parse(mi, 0, 1000, &minor, &es);
			}
		}
	}
	doctor_row(d, "kernel.idmapped_overlay", major > 5 || (major == 5 && minor >= 19) ?
	    DOC_OK : DOC_DEGRADED, false, "kernel >= 5.19 for overlay over idmapped layers",
	    "kernel %lld.%lld (needed when the worker is not the repository owner, e.g. a "
	    "root-owned repository: such runs are refused without it)", major, minor);
}

static void
doctor_userns(struct doctor *d)
{
	long long v;

	if (doctor_read_int("/proc/sys/user/max_user_namespaces", &v) == 0)
		doctor_row(d, "sysctl.user.max_user_namespaces", v > 0 ? DOC_OK : DOC_DEGRADED,
		    false, "sysctl -w user.max_user_namespaces=15000 (idmapped repositories need "
		    "one user namespace per run)", "%lld", v);
	if (doctor_read_int("/proc/sys/kernel/unprivileged_userns_clone", &v) == 0)
		doctor_row(d, "sysctl.kernel.unprivileged_userns_clone", DOC_OK, false, "",
		    "%lld (egress-exec runs as root and does not need unprivileged user "
		    "namespaces)", v);
	if (doctor_read_int("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", &v) == 0)
		doctor_row(d, "apparmor.restrict_unprivileged_userns", DOC_OK, false, "",
		    "%lld (not relevant: egress-exec creates namespaces as root)", v);
	else
		doctor_row(d, "apparmor.restrict_unprivileged_userns", DOC_OK, false, "",
		    "not present on this kernel");
}

static void
doctor_cgroup(struct doctor *d)
{
	struct cgroup_probe p;
	bool ok = cgroup_probe(NULL, &p) == 0;

	doctor_row(d, "cgroup", ok ? DOC_OK : DOC_MISSING, true,
	    "mount cgroup v2 with cpu, memory and pids enabled in cgroup.subtree_control, or "
	    "the v1 cpu, cpuacct, memory, pids and freezer controllers",
	    "version %d; cpu=%d memory=%d pids=%d freezer=%d kill=%d; %s", (int)p.version,
	    p.cpu, p.memory, p.pids, p.freezer, p.kill, p.detail);
	{
		char base[4096], err[512] = "";
		bool nest = cgroup_nest_check(NULL, base, sizeof(base), err, sizeof(err)) == 0;

		/* where the runs nest: every limit on that cgroup still applies (docs/sandbox.md
		 * "cgroups"); on v2 it must be delegated to egress-exec alone */
		doctor_row(d, "cgroup.nesting", nest ? DOC_OK : DOC_MISSING, true,
		    "run egress-exec in a cgroup of its own with cpu, memory and pids delegated "
		    "(a service with Delegate=yes, or systemd-run --scope -p Delegate=yes)",
		    "%s%s%s", nest ? "runs nest under " : "", nest ? base : err,
		    nest ? "/" CGROUP_PARENT : "");
	}
	doctor_row(d, "cgroup.swap_control", p.swap_control ? DOC_OK : DOC_DEGRADED, false,
	    "boot with swapaccount=1 (v1) or enable memory.swap.max (v2); without it the run "
	    "needs no active swap device", "%s", p.swap_control ? "present" : "absent");
	doctor_row(d, "cgroup.peak_memory", p.peak_memory ? DOC_OK : DOC_DEGRADED, false,
	    "kernel >= 5.19 for memory.peak (v2)", "%s", p.peak_memory ? "present" : "absent");
}

static void
doctor_egressd(struct doctor *d, const char *control)
{
	char err[256], bin[4096];
	json_t *st = NULL;
	bool have_bin = egressd_find_binary(bin, sizeof(bin)) == 0;
	bool up = egressd_status(control, &st, err, sizeof(err)) == 0;

	if (up) {
		const char *v = json_string_value(json_object_get(st, "version"));
		doctor_row(d, "egressd.control", DOC_OK, false, "", "%s answers status (version %s)",
		    control, v ? v : "?");
	} else {
		doctor_row(d, "egressd.control", DOC_DEGRADED, false,
		    "start egressd (systemctl start egressd) or let egress-exec run start a private "
		    "one", "%s: %s", control, err);
	}
	json_decref(st);
	/* Without a running egressd, networked runs need the binary for an embedded one. */
	doctor_row(d, "egressd.binary", have_bin ? DOC_OK : DOC_MISSING, !up,
	    "install egressd or set EGRESS_EGRESSD=/path/to/egressd", "%s",
	    have_bin ? bin : "not found next to egress-exec, in EGRESS_EGRESSD or PATH");
}

/* Transparent capture (docs/transparent.md): the ruleset a run installs in its link
 * namespace, tried in a throwaway network namespace of a child. A warning: runs with
 * transparent = no (or --transparent=off) do not need it; the others are refused. */
static void
doctor_transparent(struct doctor *d)
{
	char err[256] = "";
	int p[2];
	pid_t c;
	ssize_t n = -1;
	int st;

	if (geteuid() != 0 || pipe2(p, O_CLOEXEC) != 0)
		return;
	c = fork();
	if (c == 0) {
		char e[256] = "";
		int rc = unshare(CLONE_NEWNET) != 0 ? errbuf_set(e, sizeof(e), errno,
		    "unshare(CLONE_NEWNET)") : netcapture_probe(e, sizeof(e));
		if (rc == 0)
			e[0] = '\0';
		(void)write_all(p[1], e, strlen(e) + 1);
		_exit(rc == 0 ? 0 : 1);
	}
	close(p[1]);
	if (c > 0) {
		n = read(p[0], err, sizeof(err) - 1);
		while (waitpid(c, &st, 0) < 0 && errno == EINTR)
			;
	}
	close(p[0]);
	err[n > 0 ? (size_t)n : 0] = '\0';
	bool ok = c > 0 && n > 0 && err[0] == '\0' && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	doctor_row(d, "network.transparent_capture", ok ? DOC_OK : DOC_MISSING, false,
	    "a kernel with nf_tables, nat (redirect) and conntrack, and libnftables1; or turn "
	    "capture off (preset transparent = no, egress-exec run --transparent=off)",
	    "%s", ok ? "stub resolver and redirect of 198.18.0.0/15 in each run's link "
	    "namespace: on by default for networked runs (proxy-unaware clients reach granted "
	    "names); off with transparent = no or --transparent=off" : err[0] != '\0' ? err :
	    "the probe child failed");
}

static void
doctor_libproxy(struct doctor *d)
{
	glob_t g;
	bool found = glob("/usr/lib/*/libproxy/*/modules/pacrunner_webkit.so", 0, NULL, &g) == 0 ||
	    glob("/usr/lib/libproxy/*/modules/pacrunner_webkit.so", 0, NULL, &g) == 0;

	doctor_row(d, "libproxy.pac_plugin", found ? DOC_OK : DOC_MISSING, false,
	    "apt-get install libproxy1-plugin-webkit (without it PAC files are silently ignored)",
	    "%s", found ? g.gl_pathv[0] : "pacrunner_webkit.so not found");
	globfree(&g);
}

/*
 * The route a private egressd (egress-exec run without --egressd-control) will take, how it
 * authenticates, and why (executor/hostroute.h). With url, a private egressd is started
 * with exactly a run's configuration and asked, through its control socket, which route
 * it takes for url: the same lookup a hop makes.
 */
static void
doctor_route(struct doctor *d, const char *url, const char *const *settings)
{
	struct hostroute h;
	const char *auth_hint = "run kinit as yourself (Negotiate), put user:password in your "
	    "https_proxy, or ask the operator for " HOSTROUTE_OPERATOR_CREDENTIALS;

	hostroute_plan(environ, &h);
	if (h.bad[0] != '\0')
		doctor_row(d, "route.private_egressd", DOC_MISSING, false, "fix or unset the "
		    "proxy variable (docs/routing.md, \"Proxy variables\")", "route = system: %s: "
		    "libproxy would ignore it and go direct, so every hop is refused with "
		    "route_unavailable", h.bad);
	else if (h.var[0] == '\0')
		doctor_row(d, "route.private_egressd", DOC_OK, false, "", "route = system: no proxy "
		    "variable in this environment, so libproxy's system settings (none without a "
		    "desktop session): allowed hops go direct");
	else
		doctor_row(d, "route.private_egressd", DOC_OK, false, "", "route = system: %s=%s "
		    "(from this environment; egressd %s)", h.var, h.shown, h.pac ?
		    "fetches the PAC itself, WPAD by DNS for wpad://" : "asks libproxy per destination");
	if (h.scheme[0] != '\0')
		doctor_row(d, "route.auth", DOC_OK, false, "", "%s for %s%s%s", h.scheme, h.proxy,
		    strcmp(h.scheme, "negotiate") == 0 ? ", Kerberos cache " : "",
		    strcmp(h.scheme, "negotiate") == 0 ? h.ccache : "");
	else if (h.proxy[0] != '\0')
		doctor_row(d, "route.auth", DOC_DEGRADED, false, auth_hint, "none for %s (%s%s%s): "
		    "if it demands authentication, hops are refused with upstream_auth_required",
		    h.proxy, h.auth_off ? "EGRESS_PROXY_AUTH=none" : h.by_address ?
		    "named by address: no Negotiate" : h.ccache_why[0] ? h.ccache_why :
		    "no credentials", h.operator_why[0] ? "; operator file: " : "", h.operator_why);
	if (h.operator_file[0] != '\0' || h.operator_why[0] != '\0')
		doctor_row(d, "route.operator_credentials", h.operator_file[0] ? DOC_OK :
		    DOC_DEGRADED, false, "chown root and chmod 0600 the credentials file",
		    "%s%s%s", h.operator_file[0] ? h.operator_file : "ignored: ", h.operator_why,
		    h.operator_file[0] ? " (proxies a PAC or WPAD chooses authenticate from it)" :
		    "");
	hostroute_clear(&h);

	if (url != NULL) {
		char dir[] = EGRESSD_RUN_TOP "/doctor-XXXXXX", err[512];
		struct egressd_embedded e;
		json_t *req, *rep = NULL;

		mkdir(EGRESSD_RUN_TOP, 0700);
		if (mkdtemp(dir) == NULL) {
			doctor_row(d, "route.lookup", DOC_MISSING, false, "run as root", "mkdtemp %s: %s",
			    dir, strerror(errno));
			return;
		}
		if (egressd_embedded_start(dir, settings, &e, err, sizeof(err)) != 0) {
			doctor_row(d, "route.lookup", DOC_MISSING, false, "see the detail",
			    "private egressd: %s", err);
		} else {
			req = json_pack("{s:s, s:s}", "op", "route", "url", url);
			if (req != NULL && ctlclient_request(e.sock, req, -1, &rep, 15000, err,
			    sizeof(err)) == 0) {
				const char *st = json_string_value(json_object_get(rep, "status"));
				const char *pac = json_string_value(json_object_get(rep, "pac"));
				const char *src = json_string_value(json_object_get(rep, "source"));
				char *ent = json_dumps(json_object_get(rep, "entries"), JSON_COMPACT);
				bool ok = st != NULL && strcmp(st, "allowed") == 0;

				doctor_row(d, "route.lookup", ok ? DOC_OK : DOC_DEGRADED, false,
				    "hops to this destination are refused with the status shown; see "
				    "docs/routing.md", "%s: %s via %s (source %s)%s%s", url,
				    st ? st : "?", ent ? ent : "[]", src ? src : "?",
				    pac && *pac ? "; " : "", pac ? pac : "");
				free(ent);
			} else {
				doctor_row(d, "route.lookup", DOC_MISSING, false, "see the detail",
				    "route query: %s", err);
			}
			json_decref(req);
			json_decref(rep);
		}
		/* stop also removes what start generated; then egressd's own files */
		egressd_embedded_stop(&e);
		{
			static const char *const names[] = { "egressd.ini", "egressd.ini.state",
				"egressd.log", "decisions.jsonl", "egressd.sock" };
			char p[EGRESS_PATH_MAX + 32];

			for (size_t i = 0; i < EGRESS_NELEM(names); i++) {
				snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
				unlink(p);
			}
			if (rmdir(dir) != 0)
				log_warn("doctor: rmdir %s", dir);
		}
	}
}

static void
doctor_print(struct doctor *d)
{
	size_t i;
	json_t *r;

	if (d->json) {
		json_t *o = json_pack("{s:O, s:b}", "rows", d->rows, "ok", !d->required_failed);
		json_dumpf(o, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
		json_decref(o);
		return;
	}
	printf("%-40s %-9s %-9s %s\n", "CHECK", "STATE", "LEVEL", "DETAIL / FIX");
	json_array_foreach(d->rows, i, r) {
		const char *fix = json_string_value(json_object_get(r, "fix"));
		printf("%-40s %-9s %-9s %s\n", json_string_value(json_object_get(r, "check")),
		    json_string_value(json_object_get(r, "state")),
		    json_string_value(json_object_get(r, "level")),
		    json_string_value(json_object_get(r, "detail")));
		if (fix && *fix)
			printf("%-40s %-9s %-9s fix: %s\n", "", "", "", fix);
	}
	printf("\n%s\n", d->required_failed ? "doctor: a required check is not ok: runs will be "
	    "refused" : "doctor: every required check is ok");
}

int
cmd_doctor(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "egressd-control", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "route", required_argument, NULL, 'r' },
		{ "egressd-setting", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct doctor d = { 0 };
	struct attest_row rows[ATTEST__COUNT];
	const char *control = EGRESS_CONTROL_SOCKET_DEFAULT, *route_url = NULL;
	const char *settings[DOCTOR_SETTINGS_MAX + 1] = { 0 };
	size_t nset = 0;
	int ch;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': control = optarg; break;
		case 'j': d.json = true; break;
		case 'r': route_url = optarg; break;
		case 's':
			if (nset >= DOCTOR_SETTINGS_MAX || !egressd_setting_valid(optarg)) {
				fprintf(stderr, "doctor: bad or too many --egressd-setting\n");
				return EXEC_EXIT_USAGE;
			}
			settings[nset++] = optarg;
			break;
		case 'h':
			printf("usage: egress-exec doctor [--egressd-control SOCK] [--json]\n"
			    "                          [--route URL [--egressd-setting K=V ...]]\n"
			    "One row per capability and dependency: ok, degraded or missing; required or\n"
			    "warning; with a fix hint. Exit 0 when every required row is ok, %d "
			    "otherwise.\n"
			    "The route rows say how a private egressd reaches destinations and\n"
			    "authenticates; --route URL starts one and asks it (docs/routing.md).\n",
			    EXEC_EXIT_CAPABILITY);
			return EXEC_EXIT_OK;
		default:
			return EXEC_EXIT_USAGE;
		}
	}
	d.rows = json_array();
	doctor_row(&d, "privileges", geteuid() == 0 ? DOC_OK : DOC_MISSING, true,
	    "run egress-exec as root (it drops the worker to an unprivileged uid)",
	    "euid %d", (int)geteuid());
	if (geteuid() == 0) {
		struct attest_row net[ATTEST__COUNT];

		/* The nine as a --net none run needs them (required) ... */
		attest_probe_all(false, rows);
		for (int i = 0; i < ATTEST__COUNT; i++) {
			char name[64];
			snprintf(name, sizeof(name), "capability.%s", attest_cap_name(i));
			doctor_row(&d, name, rows[i].attested ? DOC_OK : DOC_MISSING, true,
			    "see the detail; `egress-exec doctor` rows below name the missing piece",
			    "%s: %s", rows[i].mechanism, rows[i].detail);
		}
		/* ... and what a networked (--allow) run adds: a veth pair across namespaces.
		 * A warning: --net none runs do not need it. */
		attest_probe_all(true, net);
		doctor_row(&d, "network.allowlist_runs", net[ATTEST_NETWORK_ENFORCEMENT].attested ?
		    DOC_OK : DOC_MISSING, false, "networked runs are refused until this is fixed; "
		    "see the detail", "%s", net[ATTEST_NETWORK_ENFORCEMENT].detail);
	}
	doctor_kernel(&d);
	doctor_cgroup(&d);
	{
		char err[256];
		bool ok = geteuid() == 0 && seccomp_profile_selftest(err, sizeof(err)) == 0;
		doctor_row(&d, "seccomp", ok ? DOC_OK : DOC_MISSING, true,
		    "kernel with CONFIG_SECCOMP_FILTER and libseccomp2", "%s",
		    ok ? "profile installed and self-tested in a child" : err);
	}
	doctor_userns(&d);
	doctor_transparent(&d);
	doctor_egressd(&d, control);
	doctor_libproxy(&d);
	doctor_route(&d, route_url, settings);
	doctor_print(&d);
	json_decref(d.rows);
	return d.required_failed ? EXEC_EXIT_CAPABILITY : EXEC_EXIT_OK;
}
