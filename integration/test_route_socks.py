#!/usr/bin/env python3
"""`route = proxy URL`: one static upstream, SOCKS5 through a real dante and HTTP through a
real squid (docs/routing.md).

Checks: socks5:// through dante works for tunnels and plain HTTP (decision: route
socks5://..., attested false, dante logs the name); under pinning = required egressd sends
the checked IPv4 address type (dante logs the literal, the record is attested); dante's
"connection refused" reply maps to socks_conn_refused (never a fallback to direct); a dead
SOCKS proxy is proxy_unreachable; `route = proxy http://...` through squid works, and an
IP-literal destination is sent as itself; RFC 1929 username/password against a scripted
SOCKS5 server (danted's username method needs system users: not used), a refused login is
socks_auth_failed, and each SOCKS5 reply code maps to its own reason.
check_without_pinning (docs/routing.md): through squid with the default pinning =
preferred, a granted name that resolves (for egressd) only to a private address is refused
private_address and never reaches squid (its access log); the positive twin is allowed with
checked: local and attested: false; a name egressd cannot resolve goes to squid by name
with checked: none, and under pinning = required the same name is refused
pinning_unavailable without reaching squid."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import checks, proxies, proxyclient  # noqa: E402
from labtools.checks import (allowed_tunnel, check, refused, require_binaries,  # noqa: E402
                             stop_clean, wait_decision)

FAKE_ADDR = "203.0.113.41"
ZONE = {
    "origin.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "origin2.lab.test": {"A": [lab.ORIGIN2]},
    "proxy.lab.test": {"A": [proxies.PROXY_ADDR]},
    "socks.lab.test": {"A": [proxies.SOCKS_ADDR]},
    "dead.lab.test": {"A": [proxies.DEAD_ADDR]},
    "socks2.lab.test": {"A": [FAKE_ADDR]},
    "private.lab.test": {"A": ["10.1.2.3"]},
}
GRANT = ["https://origin.lab.test", "http://origin.lab.test", "https://origin2.lab.test",
         "tcp://origin.lab.test:81", "https://%s" % lab.ORIGIN2, "https://private.lab.test",
         "https://nowhere.lab.test"]
SOCKS = "socks5://socks.lab.test:1080"


def fresh(L, settings, pinning="preferred"):
    for old in L.egressds:
        if old.alive():
            old.stop(timeout=5)
    d = L.egressd(settings=settings)
    L.grant(d, 0, GRANT, pinning=pinning)
    return d


def get_through(r, origin="http443"):
    allowed_tunnel(r)
    try:
        g = proxyclient.tunnel_http_get(r.sock, "x", "/")
        check(g.status == 200 and g.header("X-Origin") == origin, "through tunnel: %r" % g)
    finally:
        r.close()


def wait_text(fn, needle, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in fn():
            return True
        time.sleep(0.05)
    return needle in fn()


def t_socks_by_name(L, dn, sq):
    d = fresh(L, {"route": "proxy " + SOCKS})
    L.zone.clear_log()
    get_through(L.connect(0, "origin.lab.test:443"))
    rec = wait_decision(d, lambda x: x.get("dest") == "origin.lab.test:443")
    check(rec.get("verdict") == "allow" and rec.get("route") == SOCKS and
          rec.get("route_source") == "proxy" and rec.get("attested") is False and
          rec.get("pinned") is None and rec.get("resolved") == [lab.HTTP_ORIGIN] and
          rec.get("checked") == "local" and
          rec.get("proxy_addr") == proxies.SOCKS_ADDR, "record %s" % rec)
    # egressd resolved the name only to check its classes (check without pinning); the
    # name went in the SOCKS5 request (domain-name address type) and dante resolved it
    check(L.zone.query_log("origin.lab.test"), "nobody resolved origin.lab.test")
    check(wait_text(dn.log_text, "-> %s" % proxies.SOCKS_ADDR) and
          "%s.443" % lab.HTTP_ORIGIN in dn.log_text(), "dante log: %s" % dn.log_text()[-800:])
    r = L.http(0, "GET", "http://origin.lab.test/")
    check(r.status == 200 and r.header("X-Origin") == "http80", "plain http %r" % r)
    stop_clean(d)


def t_socks_pinned(L, dn, sq):
    d = fresh(L, {"route": "proxy " + SOCKS}, pinning="required")
    get_through(L.connect(0, "origin2.lab.test:443"), origin="http2_443")
    rec = wait_decision(d, lambda x: x.get("dest") == "origin2.lab.test:443")
    check(rec.get("route") == SOCKS and rec.get("attested") is True and
          rec.get("pinned") == lab.ORIGIN2, "record %s" % rec)
    check(wait_text(dn.log_text, "%s.443" % lab.ORIGIN2), "dante log: %s"
          % dn.log_text()[-800:])
    check("origin2.lab.test" not in dn.log_text(), "the name reached dante")
    stop_clean(d)


def t_socks_refused(L, dn, sq):
    d = fresh(L, {"route": "proxy " + SOCKS})
    with L.no_origin_connection():
        refused(L.connect(0, "origin.lab.test:81"), 502, "socks_conn_refused")
    rec = wait_decision(d, lambda x: x.get("dest") == "origin.lab.test:81")
    check(rec.get("verdict") == "allow" and rec.get("route") == SOCKS, "record %s" % rec)
    rec = checks.wait_close(d, lambda x: x.get("dest") == "origin.lab.test:81")
    check(rec.get("reason") == "socks_conn_refused", "close %s" % rec)
    stop_clean(d)
    d = fresh(L, {"route": "proxy socks5://dead.lab.test:1080"})
    with L.no_origin_connection():
        refused(L.connect(0, "origin.lab.test:443"), 502, "proxy_unreachable")
    stop_clean(d)


def t_static_http_proxy(L, dn, sq):
    d = fresh(L, {"route": "proxy http://proxy.lab.test:3128"})
    get_through(L.connect(0, "origin.lab.test:443"))
    get_through(L.connect(0, "%s:443" % lab.ORIGIN2), origin="http2_443")
    r = L.http(0, "GET", "http://origin.lab.test/echo")
    check(r.status == 200 and r.header("X-Origin") == "http80", "plain http %r" % r)
    check(sq.wait_log(lambda x: " CONNECT origin.lab.test:443 " in x) is not None and
          sq.wait_log(lambda x: " CONNECT %s:443 " % lab.ORIGIN2 in x) is not None and
          sq.wait_log(lambda x: " GET http://origin.lab.test/echo " in x) is not None,
          "squid log %s" % sq.access_log_lines())
    recs = [x for x in d.decisions() if x.get("event") == "decision"]
    check(len(recs) == 3 and all(x.get("route") == "http://proxy.lab.test:3128" and
                                 x.get("route_source") == "proxy" for x in recs),
          "records %s" % recs)
    lit = [x for x in recs if x.get("dest") == "%s:443" % lab.ORIGIN2]
    check(lit and lit[0].get("attested") is True, "literal record %s" % lit)
    stop_clean(d)


def t_check_without_pinning(L, dn, sq):
    d = fresh(L, {"route": "proxy http://proxy.lab.test:3128"})
    n0 = len(sq.access_log_lines())
    # negative: the proxy would have resolved it; egressd resolves and checks it first
    r = L.connect(0, "private.lab.test:443")
    r.close()
    refused(r, 403, "private_address")
    rec = wait_decision(d, lambda x: x.get("dest") == "private.lab.test:443")
    check(rec.get("verdict") == "deny" and rec.get("checked") == "local" and
          rec.get("route") == "http://proxy.lab.test:3128" and
          rec.get("classes_dropped") == ["private"] and rec.get("resolved") == ["10.1.2.3"],
          "record %s" % rec)
    # positive twin: checked locally, still sent by name (the proxy resolves: not attested)
    get_through(L.connect(0, "origin.lab.test:443"))
    rec = wait_decision(d, lambda x: x.get("dest") == "origin.lab.test:443")
    check(rec.get("verdict") == "allow" and rec.get("checked") == "local" and
          rec.get("attested") is False and rec.get("pinned") is None and
          rec.get("resolved") == [lab.HTTP_ORIGIN], "record %s" % rec)
    check(sq.wait_log(lambda x: " CONNECT origin.lab.test:443 " in x) is not None,
          "squid log %s" % sq.access_log_lines()[n0:])
    # no local answer: the name goes to the proxy unchecked, and the record says so
    start = len(d.decisions())
    r = L.connect(0, "nowhere.lab.test:443")
    r.close()
    rec = wait_decision(d, lambda x: x.get("dest") == "nowhere.lab.test:443", start=start)
    check(rec.get("verdict") == "allow" and rec.get("checked") == "none" and
          rec.get("attested") is False and rec.get("resolved") == [], "record %s" % rec)
    check(sq.wait_log(lambda x: "nowhere.lab.test:443" in x) is not None,
          "the unchecked name did not reach squid: %s" % sq.access_log_lines()[n0:])
    check(not any("private.lab.test" in x for x in sq.access_log_lines()[n0:]),
          "the refused name reached squid: %s" % sq.access_log_lines()[n0:])
    stop_clean(d)
    # pinning = required: no local answer is a refusal, the proxy never sees the name
    d = fresh(L, {"route": "proxy http://proxy.lab.test:3128"}, pinning="required")
    n1 = len(sq.access_log_lines())
    r = L.connect(0, "nowhere.lab.test:443")
    r.close()
    refused(r, 403, "pinning_unavailable")
    rec = wait_decision(d, lambda x: x.get("dest") == "nowhere.lab.test:443")
    check(rec.get("verdict") == "deny" and rec.get("checked") == "none", "record %s" % rec)
    time.sleep(0.5)
    check(not any("nowhere.lab.test" in x for x in sq.access_log_lines()[n1:]),
          "the name reached squid under pinning = required: %s" % sq.access_log_lines()[n1:])
    stop_clean(d)


def t_pac_socks(L, dn, sq):
    """PAC answers "SOCKS5 host:port" and "SOCKS host:port" both mean SOCKS5 through
    dante."""
    for ret in ("SOCKS5 socks.lab.test:1080", "SOCKS socks.lab.test:1080"):
        pac = proxies.write_pac(L, "socks.pac", 'function FindProxyForURL(u, h) '
                                '{ return "%s"; }\n' % ret)
        d = fresh(L, {"route": "pac " + pac, "route_timeout": "3s"})
        get_through(L.connect(0, "origin.lab.test:443"))
        rec = wait_decision(d, lambda x: x.get("dest") == "origin.lab.test:443")
        check(rec.get("route") == SOCKS and rec.get("route_source") == "pac",
              "%s: record %s" % (ret, rec))
        stop_clean(d)


def t_loopback_proxy(L, dn, sq):
    """The proxy's address is route infrastructure: a proxy on 127.0.0.1 (a class the lab
    does not lift) is used; the same address as a DESTINATION stays refused."""
    lo = proxies.Squid(L, name="squid-lo", addr="127.0.0.1", port=3140, ns=L.ns_host).start()
    try:
        d = fresh(L, {"route": "proxy http://127.0.0.1:3140"})
        L.grant(d, 0, ["tcp://127.0.0.1:3140"], port=3129)
        get_through(L.connect(0, "origin.lab.test:443"))
        rec = wait_decision(d, lambda x: x.get("dest") == "origin.lab.test:443")
        check(rec.get("verdict") == "allow" and rec.get("proxy_addr") == "127.0.0.1" and
              rec.get("route") == "http://127.0.0.1:3140", "record %s" % rec)
        check(lo.wait_log(lambda x: " CONNECT origin.lab.test:443 " in x) is not None,
              "loopback squid log %s" % lo.access_log_lines())
        n0 = len(lo.access_log_lines())
        r = L.connect(0, "127.0.0.1:3140", proxy=L.proxy_of(0, 3129))
        check(r.status == 403 and r.egress_reason == "private_address",
              "loopback destination through the proxy: %r" % r)
        r.close()
        time.sleep(0.3)
        check(len(lo.access_log_lines()) == n0, "the proxy saw the refused hop")
        stop_clean(d)
    finally:
        lo.stop()


def t_socks_userpass(L, dn, sq):
    """RFC 1929 against a scripted SOCKS5 server (danted's username method checks system
    users, which the lab does not create)."""
    fk = proxies.FakeSocks5(L, FAKE_ADDR, 1080, users={"sox": "pw-sox-1"}).start()
    try:
        good = proxies.credentials_file(L, "socks.ini", {"socks2.lab.test:1080": {
            "scheme": "basic", "username": "sox", "password": "pw-sox-1"}})
        d = fresh(L, {"route": "proxy socks5://socks2.lab.test:1080",
                      "proxy_credentials": good})
        r = L.connect(0, "origin.lab.test:443")
        allowed_tunnel(r)
        try:
            check(proxyclient.tunnel_echo(r.sock, b"ping") == b"ping", "echo")
        finally:
            r.close()
        check(fk.methods and 2 in fk.methods[-1] and fk.auths[-1] == ("sox", "pw-sox-1") and
              fk.requests[-1] == (3, "origin.lab.test", 443),
              "methods %s auths %s requests %s" % (fk.methods, fk.auths, fk.requests))
        stop_clean(d)
        bad = proxies.credentials_file(L, "socks-bad.ini", {"socks2.lab.test:1080": {
            "scheme": "basic", "username": "sox", "password": "wrong"}})
        d = fresh(L, {"route": "proxy socks5://socks2.lab.test:1080",
                      "proxy_credentials": bad})
        n = len(fk.requests)
        refused(L.connect(0, "origin.lab.test:443"), 502, "socks_auth_failed")
        check(len(fk.requests) == n, "CONNECT sent after a refused login")
        stop_clean(d)
        d = fresh(L, {"route": "proxy socks5://socks2.lab.test:1080"})
        refused(L.connect(0, "origin.lab.test:443"), 502, "upstream_auth_required")
        check(fk.methods[-1] == [0], "offered without credentials: %s" % fk.methods[-1])
        stop_clean(d)
    finally:
        fk.stop()


def t_socks_reply_codes(L, dn, sq):
    fk = proxies.FakeSocks5(L, FAKE_ADDR, 1080).start()
    try:
        d = fresh(L, {"route": "proxy socks5://socks2.lab.test:1080"})
        for code, reason in ((1, "socks_general_failure"), (2, "socks_not_allowed"),
                             (3, "socks_net_unreachable"), (4, "socks_host_unreachable"),
                             (5, "socks_conn_refused"), (6, "socks_ttl_expired"),
                             (7, "socks_cmd_unsupported"), (8, "socks_atyp_unsupported")):
            fk.reply = code
            refused(L.connect(0, "origin.lab.test:443"), 502, reason)
        stop_clean(d)
    finally:
        fk.stop()


def main():
    lab.require_root()
    require_binaries("egressd")
    miss = proxies.missing_tools("squid", "danted")
    if miss:
        print("FAIL: not installed: %s (scripts/deps.sh)" % " ".join(miss))
        print("0 passed, 1 failed")
        return 1
    res = Results()
    with Lab(workers=1, zone=ZONE) as L:
        proxies.add_addresses(L, proxies.PROXY_ADDR, proxies.SOCKS_ADDR, proxies.DEAD_ADDR,
                              FAKE_ADDR)
        dn = proxies.Dante(L).start()
        sq = proxies.Squid(L).start()
        for name, fn in (("socks5_by_name", t_socks_by_name),
                         ("socks5_pinned_ipv4", t_socks_pinned),
                         ("socks5_refused_and_unreachable", t_socks_refused),
                         ("static_http_proxy", t_static_http_proxy),
                         ("check_without_pinning", t_check_without_pinning),
                         ("pac_socks_entries", t_pac_socks),
                         ("loopback_proxy_is_infrastructure", t_loopback_proxy),
                         ("socks5_username_password", t_socks_userpass),
                         ("socks5_reply_codes", t_socks_reply_codes)):
            res.run(name, fn, L, dn, sq)
        dn.stop()
        sq.stop()
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
