#!/usr/bin/env python3
"""`route = system`: libproxy with egressd's own environment (docs/routing.md).

Checks: https_proxy / http_proxy with no_proxy route through squid and direct as libproxy
says (route_source "system"); a `pac+http://` value is fetched by egressd itself (the PAC
server sees egressd's GET) and applied; a `pac+http://` URL that 404s denies with
pac_unavailable instead of going direct (libproxy alone would fail open); with no proxy
variables at all the route is direct; SIGHUP applies a new route and a bad reload keeps
the old one; a proxy variable that is set but unreadable (" wpad://", "htp:/x", ":3128")
refuses every hop with route_unavailable and names the variable (libproxy alone would
ignore it and go direct), in egressd -t too; the libproxy helper runs as nobody with no_new_privs, seccomp, no
capabilities, only fds 0-2 and only the proxy variables of egressd's environment."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxies, proxyclient  # noqa: E402
from labtools.checks import (allowed_tunnel, check, refused, require_binaries,  # noqa: E402
                             stop_clean, wait_decision)

PROXY_URL = "http://proxy.lab.test:3128"
ZONE = {
    "origin.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "origin2.lab.test": {"A": [lab.ORIGIN2]},
    "pac.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "proxy.lab.test": {"A": [proxies.PROXY_ADDR]},
    "*.proxied.test": {"A": [lab.HTTP_ORIGIN]},
}
GRANT = ["https://origin.lab.test", "https://origin2.lab.test", "https://a.proxied.test",
         "http://origin2.lab.test"]


def fresh(L, env, settings=None):
    for old in L.egressds:
        if old.alive():
            old.stop(timeout=5)
    st = {"route": "system", "route_timeout": "3s"}
    st.update(settings or {})
    d = L.egressd(settings=st, extra_env=env)
    L.grant(d, 0, GRANT)
    return d


def routes_of(d):
    return {r.get("dest"): (r.get("verdict"), r.get("route"), r.get("route_source"),
                            r.get("reason"))
            for r in d.decisions() if r.get("event") == "decision"}


def tunnel_ok(L, target, origin):
    r = L.connect(0, target, timeout=10)
    allowed_tunnel(r)
    try:
        g = proxyclient.tunnel_http_get(r.sock, "x", "/")
        check(g.status == 200 and g.header("X-Origin") == origin, "%s: %r" % (target, g))
    finally:
        r.close()


def t_env_proxy_and_no_proxy(L, sq):
    d = fresh(L, {"https_proxy": PROXY_URL, "http_proxy": PROXY_URL,
                  "no_proxy": "origin.lab.test"})
    tunnel_ok(L, "a.proxied.test:443", "http443")
    tunnel_ok(L, "origin.lab.test:443", "http443")
    tunnel_ok(L, "origin2.lab.test:443", "http2_443")
    rt = routes_of(d)
    check(rt.get("a.proxied.test:443") == ("allow", PROXY_URL, "system", "allowed") and
          rt.get("origin2.lab.test:443") == ("allow", PROXY_URL, "system", "allowed") and
          rt.get("origin.lab.test:443") == ("allow", "direct", "system", "allowed"),
          "routes %s" % rt)
    check(sq.wait_log(lambda x: " CONNECT origin2.lab.test:443 " in x) is not None,
          "squid log %s" % sq.access_log_lines())
    # plain HTTP (http_proxy) goes through squid too
    r = L.http(0, "GET", "http://origin2.lab.test/echo")
    check(r.status == 200 and r.header("X-Origin") == "http2", "%r" % r)
    check(sq.wait_log(lambda x: " GET http://origin2.lab.test/echo " in x) is not None,
          "squid log %s" % sq.access_log_lines())
    stop_clean(d)


def t_env_pac(L, sq):
    url = proxies.serve_pac(L, "/sys.pac", proxies.pac_proxied()).replace(
        lab.HTTP_ORIGIN + ":80", "pac.lab.test")
    n0 = sum(1 for m, t, _h in L.services["http80"].requests if t == "/sys.pac")
    d = fresh(L, {"http_proxy": "pac+" + url})
    proxies.wait_pac_ready(d)
    check(sum(1 for m, t, _h in L.services["http80"].requests if t == "/sys.pac") > n0,
          "egressd did not fetch the PAC itself")
    tunnel_ok(L, "a.proxied.test:443", "http443")
    tunnel_ok(L, "origin.lab.test:443", "http443")
    rt = routes_of(d)
    check(rt.get("a.proxied.test:443") == ("allow", PROXY_URL, "system", "allowed") and
          rt.get("origin.lab.test:443") == ("allow", "direct", "system", "allowed"),
          "routes %s" % rt)
    stop_clean(d)


def t_env_pac_404(L, sq):
    d = fresh(L, {"http_proxy": "pac+http://pac.lab.test/nothing-here.pac"},
              {"pac_timeout": "2s"})
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(
            t == "/nothing-here.pac" for m, t, _h in L.services["http80"].requests):
        time.sleep(0.05)
    time.sleep(0.2)
    with L.no_origin_connection():
        refused(L.connect(0, "origin.lab.test:443"), 502, "pac_unavailable")
        refused(L.connect(0, "a.proxied.test:443"), 502, "pac_unavailable")
    stop_clean(d)


def t_no_env_direct(L, sq):
    n0 = len(sq.access_log_lines())
    d = fresh(L, {})
    tunnel_ok(L, "a.proxied.test:443", "http443")
    rec = wait_decision(d, lambda x: x.get("dest") == "a.proxied.test:443")
    check(rec.get("route") == "direct" and rec.get("route_source") == "system" and
          rec.get("attested") is True, "record %s" % rec)
    time.sleep(0.2)
    check(len(sq.access_log_lines()) == n0, "squid was used without any proxy variable")
    stop_clean(d)


def t_reload_changes_route(L, sq):
    """SIGHUP applies a new route; a reload with an invalid route keeps the old one."""
    for old in L.egressds:
        if old.alive():
            old.stop(timeout=5)
    d = L.egressd(settings={"route": "direct"})
    L.grant(d, 0, GRANT)
    check(proxies.route_query(d, "https://origin2.lab.test/").get("entries") == ["direct"],
          "before reload")
    d.settings["route"] = "proxy " + PROXY_URL
    d.write_config()
    d.reload()
    deadline = time.monotonic() + 5
    r = {}
    while time.monotonic() < deadline:
        r = proxies.route_query(d, "https://origin2.lab.test/")
        if r.get("entries") == [PROXY_URL]:
            break
        time.sleep(0.05)
    check(r.get("entries") == [PROXY_URL] and r.get("source") == "proxy", "after: %s" % r)
    tunnel_ok(L, "origin2.lab.test:443", "http2_443")
    check(sq.wait_log(lambda x: " CONNECT origin2.lab.test:443 " in x) is not None,
          "squid log")
    d.settings["route"] = "proxy ftp://proxy.lab.test:21"
    d.write_config()
    d.reload()
    time.sleep(1.0)
    check(d.alive(), "egressd died on a bad reload")
    r = proxies.route_query(d, "https://origin2.lab.test/")
    check(r.get("entries") == [PROXY_URL], "a bad reload changed the route: %s" % r)
    stop_clean(d)


def t_env_garbage_refuses(L, sq):
    """A set-but-unreadable proxy variable: every hop refused (never direct), the
    variable named in the route reply, the log and egressd -t."""
    cases = (("https_proxy", " wpad://", "whitespace"),
             ("https_proxy", "htp:/x", "not HOST:PORT"),
             ("HTTPS_PROXY", ":3128", "not HOST:PORT"),
             ("all_proxy", "wpad:// ", "whitespace"),
             ("http_proxy", "ftp://proxy.lab.test:21", "unsupported proxy scheme"))
    for var, val, why in cases:
        n0 = len(sq.access_log_lines())
        d = fresh(L, {var: val})
        with L.no_origin_connection():
            refused(L.connect(0, "origin.lab.test:443"), 502, "route_unavailable")
            refused(L.connect(0, "a.proxied.test:443"), 502, "route_unavailable")
            r = L.http(0, "GET", "http://origin2.lab.test/echo")
            check(r.status == 502, "plain HTTP with %s=%r: %r" % (var, val, r))
        rec = wait_decision(d, lambda x: x.get("dest") == "origin.lab.test:443")
        check(rec.get("verdict") == "deny" and rec.get("reason") == "route_unavailable",
              "%s=%r: record %s" % (var, val, rec))
        q = proxies.route_query(d, "https://origin.lab.test/")
        check(q.get("status") == "route_unavailable" and var in (q.get("pac") or "") and
              why in (q.get("pac") or ""), "%s=%r: route reply %s" % (var, val, q))
        check(var in d.stderr_text() and "route_unavailable" in d.stderr_text(),
              "%s=%r: no warning naming it:\n%s" % (var, val, d.stderr_tail()))
        time.sleep(0.2)
        check(len(sq.access_log_lines()) == n0, "squid was used with %s=%r" % (var, val))
        env = dict(os.environ)
        env[var] = val
        cp = subprocess.run(["ip", "netns", "exec", d.ns, lab.binary("egressd"), "-t",
                             "-c", d.conf_path], env=env, capture_output=True, text=True,
                            timeout=30)
        check(cp.returncode != 0 and var in cp.stderr and why in cp.stderr,
              "egressd -t with %s=%r: rc %s, %s" % (var, val, cp.returncode, cp.stderr))
        stop_clean(d)
    # the negative twin: the same lab with a readable variable goes through squid
    d = fresh(L, {"https_proxy": "proxy.lab.test:3128"})
    tunnel_ok(L, "origin2.lab.test:443", "http2_443")
    rec = wait_decision(d, lambda x: x.get("dest") == "origin2.lab.test:443")
    check(rec.get("route") == PROXY_URL, "HOST:PORT without a scheme: %s" % rec)
    stop_clean(d)


def helper_pids(d):
    """Children of egressd whose command is egressd-route-helper."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                st = f.read()
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        ppid = int(st.rsplit(")", 1)[1].split()[1])
        if ppid == d.proc.pid and b"egressd-route-helper" in cmd:
            out.append(int(pid))
    return out


def t_helper_confined(L, sq):
    """The libproxy helper: unprivileged, no_new_privs, seccomp, only fds 0-2, and an
    environment with the proxy variables only (nothing else of egressd's)."""
    d = fresh(L, {"https_proxy": PROXY_URL, "no_proxy": "origin.lab.test",
                  "EGRESS_TEST_MARKER": "must-not-reach-the-helper"})
    r = proxies.route_query(d, "https://a.proxied.test/")
    check(r.get("entries") == [PROXY_URL], "%s" % r)
    pids = helper_pids(d)
    check(len(pids) == 1, "route helpers: %s" % pids)
    pid = pids[0]
    with open("/proc/%d/status" % pid) as f:
        status = dict(ln.split(":", 1) for ln in f.read().splitlines() if ":" in ln)
    uids = status["Uid"].split()
    gids = status["Gid"].split()
    check(all(u == "65534" for u in uids) and all(g == "65534" for g in gids),
          "helper uid %s gid %s" % (uids, gids))
    check(status["NoNewPrivs"].strip() == "1", "NoNewPrivs %s" % status["NoNewPrivs"])
    check(status["Seccomp"].strip() == "2", "Seccomp %s" % status["Seccomp"])
    check(status["CapEff"].strip() == "0000000000000000", "CapEff %s" % status["CapEff"])
    fds = sorted(int(x) for x in os.listdir("/proc/%d/fd" % pid))
    check(fds == [0, 1, 2], "helper fds %s" % fds)
    with open("/proc/%d/environ" % pid, "rb") as f:
        env = dict(x.split(b"=", 1) for x in f.read().split(b"\0") if b"=" in x)
    check(b"EGRESS_TEST_MARKER" not in env, "egressd's environment leaked: %s" % sorted(env))
    check(set(env) <= {b"https_proxy", b"http_proxy", b"no_proxy", b"HTTPS_PROXY",
                       b"HTTP_PROXY", b"NO_PROXY", b"all_proxy", b"ALL_PROXY", b"PATH",
                       b"LANG", b"HOME", b"LC_ALL"},
          "helper environment: %s" % sorted(env))
    stop_clean(d)


def main():
    lab.require_root()
    require_binaries("egressd", "egressd-route-helper")
    miss = proxies.missing_tools("squid")
    if miss:
        print("FAIL: not installed: %s (scripts/deps.sh)" % " ".join(miss))
        print("0 passed, 1 failed")
        return 1
    res = Results()
    with Lab(workers=1, zone=ZONE) as L:
        proxies.add_addresses(L, proxies.PROXY_ADDR)
        sq = proxies.Squid(L).start()
        for name, fn in (("env_proxy_and_no_proxy", t_env_proxy_and_no_proxy),
                         ("env_pac_fetched_by_egressd", t_env_pac),
                         ("env_pac_404_denies", t_env_pac_404),
                         ("no_proxy_variables_direct", t_no_env_direct),
                         ("garbage_variable_refuses", t_env_garbage_refuses),
                         ("reload_changes_route", t_reload_changes_route),
                         ("route_helper_confined", t_helper_confined)):
            res.run(name, fn, L, sq)
        sq.stop()
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
