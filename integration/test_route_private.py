#!/usr/bin/env python3
"""The private egressd that `egress-exec run` starts takes the host's route and
authenticates as the person who ran it (executor/hostroute.h, docs/routing.md "A private
egressd").

In the lab's "host" namespace (the machine), egress-exec runs with a caller environment
like a person's on an enterprise host; the worker fetches http://origin.lab.test/ through
its egressd listener:

  basic      https_proxy=http://alice:PW@proxy.lab.test:3128 (squid demanding Basic):
             the fetch works through squid (its log shows alice), the decision record's
             route is the proxy (route_source system); the password is in no artifact and
             not in the worker's environment.
  negotiate  https_proxy=http://proxy2.lab.test:3128 (squid demanding Negotiate) and
             KRB5CCNAME=FILE:cache from kinit (lab KDC): egressd imports the cache before
             its privilege drop and the fetch works; the worker sees no Kerberos variable.
  no creds   the Negotiate proxy, no cache (KRB5CCNAME names a missing file): 502
             upstream_auth_required, and the body the worker gets names the fix (kinit,
             proxy_credentials); a deny record; the origin sees nothing.
  wpad       https_proxy=wpad:// and no WPAD server in the lab: pac_unavailable, never
             direct (the origin sees nothing); with one, the PAC's proxy is used, also for
             WPAD:// (any case: libproxy would run its own WPAD and go direct).
  notify     egress-exec run with NOTIFY_SOCKET set (as under a systemd unit): the private
             egressd tells the caller's service manager nothing (no datagram arrives; the
             socket itself receives, as a probe shows), and the run works.
Needs root (exit 77 otherwise).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results, check, require_root  # noqa: E402
from labtools import proxies  # noqa: E402
from labtools.checks import bounded_wait  # noqa: E402
from labtools.egressd import binary  # noqa: E402

import test_orchestrate_local as local  # noqa: E402

USER = "alice"
PASSWORD = "pw-%d-Qx9" % os.getpid()
ZONE = dict(lab.DEFAULT_ZONE)
ZONE.update({"proxy.lab.test": {"A": [proxies.PROXY_ADDR]},
             "proxy2.lab.test": {"A": [proxies.PROXY2_ADDR]}})
SETTINGS = ["dns_server=198.51.100.53", "allow_special_address=198.51.100.0/24",
            "allow_special_address=203.0.113.0/24", "dns_timeout=1s", "connect_timeout=3s",
            "upstream_timeout=5s"]

PRESET = """[preset]
name = fetcher
executable = /bin/sh
argv = sh
argv = -s
prompt_transport = stdin
network_policy = allowlisted
[ceilings]
wall_seconds = 60
cpu_millicores = 1000
memory_bytes = 256M
disk_bytes = 64M
processes = 64
output_bytes = 64K
diff_bytes = 1M
"""

SCRIPT = ("curl -s -m 15 -w '\\ncode %{http_code}\\n' http://origin.lab.test/ >> NOTES.md\n"
          "env | sort >> NOTES.md")


def workunit():
    return local.workunit(SCRIPT, network="allowlist", destinations=["http://origin.lab.test"],
                          allowed=["NOTES.md"], forbidden=["secrets"])


def run(L, c, env_extra, settings=(), preset=PRESET, wu_text=None):
    wu = os.path.join(c.dir, "wu.ini")
    with open(wu, "w") as f:
        f.write(wu_text or workunit())
    with open(c.preset, "w") as f:
        f.write(preset)
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
           and not k.startswith("KRB5")}
    env["EGRESS_PROXY_CREDENTIALS"] = "/nonexistent-egress-operator-file"
    env.update(env_extra)
    args = ["nsenter", "--net=/run/netns/" + L.ns_host, binary("egress-exec"), "run",
            "--workunit", wu, "--preset", c.preset, "--repo", c.repo, "--out", c.out]
    for kv in SETTINGS + list(settings):
        args += ["--egressd-setting", kv]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                       env=env)
    c.stderr = p.stderr.decode(errors="replace")
    with open(os.path.join(c.out, "manifest.json")) as f:
        c.manifest = json.load(f)
    diff = (c.artifact("candidate.diff") or b"").decode(errors="replace")
    recs = [json.loads(x) for x in (c.artifact("decisions.jsonl") or b"").decode().splitlines()
            if x.strip()]
    return p.returncode, diff, recs


def origin_record(recs):
    for r in recs:
        if (r.get("dest") or "").startswith("origin.lab.test") and r.get("verdict"):
            return r
    return None


def no_secret_anywhere(c):
    for name in os.listdir(c.out):
        p = os.path.join(c.out, name)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                check(PASSWORD.encode() not in f.read(), "%s carries the password" % name)


def t_basic(L, top, sq):
    c = local.Case(top, "basic")
    n = len(sq.access_log_lines())
    rc, diff, recs = run(L, c, {"https_proxy": "http://%s:%s@proxy.lab.test:3128" %
                                (USER, PASSWORD),
                                "http_proxy": "http://%s:%s@proxy.lab.test:3128" %
                                (USER, PASSWORD)})
    check(rc == 0, "exit %d\n%s" % (rc, c.stderr))
    check("+code 200" in diff and "hello from http80" in diff, diff)
    r = origin_record(recs)
    check(r and r.get("verdict") == "allow" and "proxy.lab.test:3128" in (r.get("route") or "")
          and r.get("route_source") == "system", "record %s" % r)
    lines = sq.access_log_lines()[n:]
    check(any(USER in x and "origin.lab.test" in x for x in lines), "squid log %s" % lines)
    no_secret_anywhere(c)
    envdump = diff.split("code 200")[1]
    check("proxy.lab.test" not in envdump, "the worker saw the host proxy")
    # every client family's proxy variable names the run's listener; nothing bypasses it;
    # no JAVA_TOOL_OPTIONS unless the preset opts in
    lines = {ln[1:].split("=", 1)[0]: ln[1:].split("=", 1)[1] for ln in envdump.splitlines()
             if ln.startswith("+") and "=" in ln}
    listener = lines.get("HTTPS_PROXY", "")
    check(listener.startswith("http://169.254."), lines)
    for name in ("HTTP_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy",
                 "GRPC_PROXY", "grpc_proxy", "npm_config_proxy", "npm_config_https_proxy"):
        check(lines.get(name) == listener, "%s=%r" % (name, lines.get(name)))
    for name in ("NO_PROXY", "no_proxy", "npm_config_noproxy"):
        check(lines.get(name) == "", "%s=%r" % (name, lines.get(name)))
    check("JAVA_TOOL_OPTIONS" not in lines, lines)


def t_negotiate(L, top, kdc, sq2):
    c = local.Case(top, "negotiate")
    cc = os.path.join(top, "krb5cc-person")
    env = dict(os.environ)
    env.update(kdc.env())
    subprocess.run(["nsenter", "--net=/run/netns/" + L.ns_host, "kinit", "-k", "-t",
                    kdc.client_keytab, "-c", "FILE:" + cc, kdc.client_principal],
                   check=True, env=env, timeout=30, capture_output=True)
    os.chmod(cc, 0o600)
    n = len(sq2.access_log_lines())
    extra = dict(kdc.env())
    extra.update({"https_proxy": "http://proxy2.lab.test:3128",
                  "http_proxy": "http://proxy2.lab.test:3128", "KRB5CCNAME": "FILE:" + cc})
    rc, diff, recs = run(L, c, extra)
    check(rc == 0, "exit %d\n%s" % (rc, c.stderr))
    check("+code 200" in diff, diff)
    r = origin_record(recs)
    check(r and r.get("verdict") == "allow" and "proxy2.lab.test" in (r.get("route") or ""),
          "record %s" % r)
    lines = sq2.access_log_lines()[n:]
    check(any(kdc.client_principal.split("@")[0] in x for x in lines), "squid log %s" % lines)
    check("KRB5" not in diff and "krb5cc" not in diff, "the worker saw Kerberos state")


def t_no_creds(L, top, kdc, sq2):
    c = local.Case(top, "nocreds")
    n80 = L.count("http80")
    extra = dict(kdc.env())
    extra.update({"https_proxy": "http://proxy2.lab.test:3128",
                  "http_proxy": "http://proxy2.lab.test:3128",
                  "KRB5CCNAME": "FILE:/nonexistent/krb5cc"})
    rc, diff, recs = run(L, c, extra)
    check(rc == 0, "exit %d\n%s" % (rc, c.stderr))
    check("+code 502" in diff and "upstream_auth_required" in diff and "kinit" in diff and
          "proxy_credentials" in diff, "the refusal does not name the fix: %s" % diff)
    # Plain HTTP through a proxy: the hop is allowed (and logged) before the request is
    # forwarded; the proxy's 407 then ends it with a record naming upstream_auth_required.
    why = [r for r in recs if r.get("reason") == "upstream_auth_required"]
    check(why, "no record names upstream_auth_required: %s" % recs)
    check(L.count("http80") == n80, "the origin saw a connection")


def t_wpad_unavailable(L, top):
    c = local.Case(top, "wpad")
    n80 = L.count("http80")
    L.zone.remove("wpad.lab.test")
    rc, diff, recs = run(L, c, {"https_proxy": "wpad://", "http_proxy": "wpad://"},
                         ["wpad_domain=sub.lab.test"])
    check(rc == 0, "exit %d\n%s" % (rc, c.stderr))
    check("+code 502" in diff and "pac_unavailable" in diff, diff)
    r = origin_record(recs)
    check(r and r.get("verdict") == "deny" and r.get("reason") == "pac_unavailable",
          "record %s" % r)
    check(L.count("http80") == n80, "went direct: the origin saw a connection")


def t_notify_socket_not_inherited(L, top):
    c = local.Case(top, "notify")
    path = os.path.join(top, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o777)
        sock.setblocking(False)
        rc, diff, recs = run(L, c, {"NOTIFY_SOCKET": path})
        check(rc == 0 and "+code 200" in diff, "exit %d\n%s\n%s" % (rc, c.stderr, diff))
        got = []
        while True:
            try:
                got.append(sock.recv(4096))
            except BlockingIOError:
                break
        check(not got, "the private egressd notified the caller's service manager: %s" % got)
        # The socket works: a datagram sent to it arrives (the absence above means something).
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            probe.sendto(b"READY=1", path)
        finally:
            probe.close()
        check(sock.recv(4096) == b"READY=1", "the notify socket does not receive")
    finally:
        sock.close()


def t_wpad_found(L, top, sq, value="wpad://"):
    """WPAD by DNS: sub.lab.test has no wpad host, lab.test has one (the walk goes up one
    label); its PAC sends origin.lab.test through the Basic squid, whose credential comes
    from the operator's root-only file ($EGRESS_PROXY_CREDENTIALS). value "WPAD://": any
    case is egressd's WPAD (libproxy, given it, ran its own and went direct)."""
    c = local.Case(top, "wpadfound-" + value.strip(":/").lower() +
                   ("-upper" if value != value.lower() else ""))
    L.zone.update({"wpad.lab.test": {"A": [lab.HTTP_ORIGIN]}})
    proxies.serve_pac(L, "/wpad.dat", proxies.pac_proxied("proxy.lab.test:3128",
                                                          domain="origin.lab.test"))
    opf = proxies.credentials_file(L, "operator.ini", {"proxy.lab.test:3128": {
        "scheme": "basic", "username": USER, "password": PASSWORD}})
    n = len(sq.access_log_lines())
    rc, diff, recs = run(L, c, {"https_proxy": value, "http_proxy": value,
                                "EGRESS_PROXY_CREDENTIALS": opf},
                         ["wpad_domain=sub.lab.test"])
    check(rc == 0, "exit %d\n%s" % (rc, c.stderr))
    check("+code 200" in diff, diff)
    r = origin_record(recs)
    check(r and r.get("verdict") == "allow" and "proxy.lab.test:3128" in (r.get("route") or ""),
          "record %s" % r)
    lines = sq.access_log_lines()[n:]
    check(any(USER in x and "origin.lab.test" in x for x in lines), "squid log %s" % lines)
    no_secret_anywhere(c)
    L.zone.remove("wpad.lab.test")


def t_doctor(L, top):
    """egress-exec doctor shows the route a run will take, how it authenticates and why;
    --route asks a private egressd with a run's configuration."""
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
           and not k.startswith("KRB5")}
    env.update({"https_proxy": "http://%s:%s@proxy.lab.test:3128" % (USER, PASSWORD),
                "http_proxy": "http://%s:%s@proxy.lab.test:3128" % (USER, PASSWORD),
                "EGRESS_PROXY_CREDENTIALS": "/nonexistent-egress-operator-file"})
    def doctor_dirs():   # the private egressd's folders doctor --route makes
        try:
            return {n for n in os.listdir("/run/egress-exec") if n.startswith("doctor-")}
        except OSError:
            return set()
    dirs0 = doctor_dirs()
    args = ["nsenter", "--net=/run/netns/" + L.ns_host, binary("egress-exec"), "doctor",
            "--json", "--route", "http://origin.lab.test/"]
    for kv in SETTINGS:
        args += ["--egressd-setting", kv]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
                       env=env)
    out = p.stdout.decode()
    check(PASSWORD not in out and PASSWORD not in p.stderr.decode(), "doctor shows the password")
    rows = {r["check"]: r for r in json.loads(out)["rows"]}
    r = rows.get("route.private_egressd", {})
    check("https_proxy=http://***@proxy.lab.test:3128" in r.get("detail", ""), r)
    a = rows.get("route.auth", {})
    check(a.get("state") == "ok" and a.get("detail", "").startswith("basic for proxy.lab.test"),
          a)
    lk = rows.get("route.lookup", {})
    check(lk.get("state") == "ok" and "http://proxy.lab.test:3128" in lk.get("detail", "") and
          "source system" in lk.get("detail", ""), lk)
    # negative twin: no credentials for the named proxy -> degraded, the fix named
    env["https_proxy"] = env["http_proxy"] = "http://proxy.lab.test:3128"
    env["KRB5CCNAME"] = "FILE:/nonexistent/krb5cc"
    p = subprocess.run(args[:5], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
                       env=env)
    rows = {r["check"]: r for r in json.loads(p.stdout.decode())["rows"]}
    a = rows.get("route.auth", {})
    check(a.get("state") == "degraded" and "kinit" in a.get("fix", "") and
          "upstream_auth_required" in a.get("detail", ""), a)
    # doctor removes its private egressd's folder (egressd.ini.state too); a folder of a
    # doctor running in parallel elsewhere goes when that one ends
    check(bounded_wait(lambda: not (doctor_dirs() - dirs0), 20, step=0.5),
          "doctor left %s" % sorted(doctor_dirs() - dirs0))


def t_java_opt_in(L, top):
    """A preset with java_proxy = yes: JAVA_TOOL_OPTIONS carries the listener for the JVM."""
    c = local.Case(top, "java")
    preset = PRESET.replace("network_policy = allowlisted\n",
                            "network_policy = allowlisted\njava_proxy = yes\n")
    rc, diff, recs = run(L, c, {}, preset=preset)
    check(rc == 0, "exit %d\n%s" % (rc, c.stderr))
    jl = [ln for ln in diff.splitlines() if ln.startswith("+JAVA_TOOL_OPTIONS=")]
    check(jl and "-Dhttps.proxyHost=169.254." in jl[0] and "-Dhttps.proxyPort=" in jl[0] and
          "-Dhttp.proxyHost=169.254." in jl[0], jl)


# git itself runs GIT_SSH_COMMAND (through sh, as git does); ssh's own settings from ~/.ssh
SSH_SCRIPT = "\n".join([
    "mkdir -p $HOME/.ssh",
    "printf 'BatchMode yes\\nStrictHostKeyChecking no\\nUserKnownHostsFile /dev/null\\n"
    "ConnectTimeout 10\\n' > $HOME/.ssh/config",
    "for h in echo.lab.test echo2.lab.test; do timeout -k 1 5 git ls-remote ssh://git@$h:7/r.git "
    "2>> NOTES.md; echo \"ssh $h exit $?\" >> NOTES.md; done"])


def t_git_ssh(L, top):
    """A tcp:// grant gives git over ssh a way through the listener (GIT_SSH_COMMAND with a
    CONNECT ProxyCommand): ssh reaches the granted echo service (it is no ssh server, so
    ssh then gives up), and the ungranted one is refused with egressd's reason."""
    c = local.Case(top, "ssh")
    n7, n2 = L.count("echo7"), L.count("echo2")
    wu = local.workunit(SSH_SCRIPT, network="allowlist", destinations=["tcp://echo.lab.test:7"],
                        allowed=["NOTES.md"], forbidden=["secrets"], wall_seconds="40")
    rc, diff, recs = run(L, c, {}, wu_text=wu)
    check(rc == 0, "exit %d\n%s" % (rc, c.stderr))
    check(L.count("echo7") == n7 + 1, "the granted service saw %d connections\n%s\n%s" %
          (L.count("echo7") - n7, diff, recs))
    check(L.count("echo2") == n2, "the ungranted service saw a connection")
    check("egress: CONNECT echo2.lab.test:7 refused: 403" in diff, diff)
    check("refused" not in diff.split("ssh echo.lab.test exit")[0], diff)
    ok = [r for r in recs if r.get("dest") == "echo.lab.test:7" and r.get("verdict")]
    no = [r for r in recs if r.get("dest") == "echo2.lab.test:7" and r.get("verdict")]
    check(ok and ok[0]["verdict"] == "allow", recs)
    check(no and no[0]["verdict"] == "deny" and no[0]["reason"] == "not_granted", recs)


def main():
    require_root()
    miss = proxies.missing_tools("squid")
    if miss:
        print("FAIL: not installed: %s (scripts/deps.sh)" % " ".join(miss))
        return 1
    top = tempfile.mkdtemp(prefix="egx-private-%d-" % os.getpid())
    os.chmod(top, 0o755)
    R = Results()
    try:
        with Lab(workers=0, zone=ZONE) as L:
            proxies.add_addresses(L, proxies.PROXY_ADDR, proxies.PROXY2_ADDR, proxies.KDC_ADDR)
            kdc = proxies.KDC(L, services=("proxy2.lab.test",)).start()
            sq = proxies.Squid(L, auth="basic", users={USER: PASSWORD}).start()
            sq2 = proxies.Squid(L, name="squid-neg", addr=proxies.PROXY2_ADDR,
                                auth="negotiate", kdc=kdc,
                                service_name="proxy2.lab.test").start()
            try:
                R.run("basic_from_caller_proxy_url", t_basic, L, top, sq)
                R.run("negotiate_from_person_ccache", t_negotiate, L, top, kdc, sq2)
                R.run("no_credentials_names_fix", t_no_creds, L, top, kdc, sq2)
                R.run("wpad_unavailable_never_direct", t_wpad_unavailable, L, top)
                R.run("wpad_found_operator_credentials", t_wpad_found, L, top, sq)
                R.run("wpad_any_case_is_egressds", t_wpad_found, L, top, sq, "WPAD://")
                R.run("notify_socket_not_inherited", t_notify_socket_not_inherited, L, top)
                R.run("doctor_shows_route_and_auth", t_doctor, L, top)
                R.run("java_proxy_opt_in", t_java_opt_in, L, top)
                R.run("git_ssh_through_listener", t_git_ssh, L, top)
            finally:
                sq.stop()
                sq2.stop()
                kdc.stop()
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return R.finish()


if __name__ == "__main__":
    sys.exit(main())
