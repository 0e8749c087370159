#!/usr/bin/env python3
"""A PAC that cannot be fetched denies — never direct (docs/routing.md).

Checks: a PAC URL answering 404 with no good copy denies with pac_unavailable (the origin
sees nothing) instead of going direct; a good copy survives a later 404 of the same URL
(last good copy); a PAC server that accepts and never answers denies at once (no good copy)
and still after pac_timeout, without blocking egressd (control socket answers); a PAC copy
the route helper cannot read denies (today it goes DIRECT: libproxy fails open —
reported). Fetch bounds and refresh: test_route_pacfetch.py; PAC evaluation failures:
test_route_pacloop.py."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxies  # noqa: E402
from labtools.checks import (allowed_tunnel, check, refused, require_binaries,  # noqa: E402
                             stop_clean, wait_decision)

ZONE = {
    "origin.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "origin2.lab.test": {"A": [lab.ORIGIN2]},
    "pac.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "stall.lab.test": {"A": [proxies.STALL_ADDR]},
    "a.loop.test": {"A": [lab.ORIGIN2]},
    "b.loop.test": {"A": [lab.ORIGIN2]},
}
GRANT = ["https://origin.lab.test", "https://origin2.lab.test", "https://a.loop.test",
         "https://b.loop.test"]
ROUTE_TIMEOUT_S = 2.0
PAC_LOOP_SOME = ("function FindProxyForURL(url, host) {\n"
                 "  if (dnsDomainIs(host, \".loop.test\")) { while (true) {} }\n"
                 "  return \"DIRECT\";\n}\n")


def fresh(L, settings):
    """A new egressd; earlier ones (left running by a failed check) are stopped first so
    their listeners do not collide."""
    for old in L.egressds:
        if old.alive():
            old.stop(timeout=5)
    return L.egressd(settings=settings)


def t_pac_404(L):
    url = "http://pac.lab.test/missing.pac"
    d = fresh(L, {"route": "pac " + url, "pac_timeout": "2s"})
    L.grant(d, 0, GRANT)
    # the first fetch answers quickly: wait until egressd has tried it
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if any(m == "GET" and t == "/missing.pac" for m, t, _h in L.services["http80"].requests):
            break
        time.sleep(0.05)
    time.sleep(0.2)
    with L.no_origin_connection():
        for _ in range(2):
            refused(L.connect(0, "origin.lab.test:443"), 502, "pac_unavailable")
    rec = wait_decision(d, lambda r: r.get("dest") == "origin.lab.test:443")
    check(rec.get("reason") == "pac_unavailable" and rec.get("route") is None,
          "record %s" % rec)
    st = d.status()
    check(st.get("ok"), "status %s" % st)
    stop_clean(d)


def t_last_good_copy(L):
    path = "/flaky.pac"
    url = proxies.serve_pac(L, path, proxies.pac_proxied())
    d = fresh(L, {"route": "pac " + url, "pac_timeout": "2s", "pac_refresh": "1s"})
    L.grant(d, 0, GRANT)
    proxies.wait_pac_ready(d)
    r = L.connect(0, "origin.lab.test:443", timeout=10)
    allowed_tunnel(r)
    r.close()
    # the PAC now 404s; the refresh fails and the good copy stays
    L.services["http80"].routes[path] = (404, [], b"gone\n")
    n = sum(1 for m, t, _h in L.services["http80"].requests if t == path)
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        if sum(1 for m, t, _h in L.services["http80"].requests if t == path) > n:
            break
        time.sleep(0.05)
    check(sum(1 for m, t, _h in L.services["http80"].requests if t == path) > n,
          "no refresh within 6s")
    time.sleep(0.2)
    r = L.connect(0, "origin2.lab.test:443", timeout=10)
    allowed_tunnel(r)
    r.close()
    stop_clean(d)


def t_pac_stalls(L):
    stall = proxies.StallServer(L).start()
    try:
        d = fresh(L, {"route": "pac http://stall.lab.test/x.pac",
                                "pac_timeout": "2s",
                                "route_timeout": "%ds" % ROUTE_TIMEOUT_S})
        L.grant(d, 0, GRANT)
        L.grant(d, 0, GRANT, port=3129, principal="other-" + L.prefix)
        with L.no_origin_connection():
            t0 = time.monotonic()
            refused(L.connect(0, "origin.lab.test:443"), 502, "pac_unavailable")
            check(time.monotonic() - t0 < ROUTE_TIMEOUT_S + 1, "took %.1fs"
                  % (time.monotonic() - t0))
            check(d.status().get("ok"), "control socket during the stalled fetch")
            time.sleep(2.2)   # past pac_timeout: the fetch failed, still no copy
            t0 = time.monotonic()
            refused(L.connect(0, "origin2.lab.test:443", proxy=L.proxy_of(0, 3129)), 502,
                    "pac_unavailable")
            check(time.monotonic() - t0 < ROUTE_TIMEOUT_S + 1, "took %.1fs"
                  % (time.monotonic() - t0))
        check(stall.accepted >= 1, "egressd never tried the stalled PAC server")
        stop_clean(d)
    finally:
        stall.stop()


def t_pac_copy_unreadable(L):
    """The route helper runs as nobody: when it cannot read the PAC copy, libproxy answers
    DIRECT for everything (it fails open). egressd must deny instead."""
    private = os.path.join(L.workdir, "private")
    os.makedirs(private, mode=0o700, exist_ok=True)
    os.chmod(private, 0o700)
    pac = proxies.write_pac(L, "copy.pac", proxies.pac_proxied())
    d = fresh(L, {"route": "pac " + pac, "route_timeout": "%ds" % ROUTE_TIMEOUT_S,
                  "pac_copy": os.path.join(private, "egressd-pac.js")})
    L.grant(d, 0, GRANT)
    with L.no_origin_connection():
        r = L.connect(0, "origin2.lab.test:443", timeout=10)
        r.close()
        check(r.status in (502, 504) and r.egress_reason in
              ("route_unavailable", "pac_unavailable", "route_timeout"),
              "an unreadable PAC copy routed the hop: %r (egressd went DIRECT)" % r)
    stop_clean(d)


def main():
    lab.require_root()
    require_binaries("egressd", "egressd-route-helper")
    res = Results()
    with Lab(workers=1, zone=ZONE) as L:
        proxies.add_addresses(L, proxies.STALL_ADDR)
        proxies.traversable_workdir(L)
        for name, fn in (("pac_404_denies", t_pac_404),
                         ("pac_last_good_copy", t_last_good_copy),
                         ("pac_server_stalls", t_pac_stalls),
                         ("pac_copy_unreadable_by_helper", t_pac_copy_unreadable)):
            res.run(name, fn, L)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
