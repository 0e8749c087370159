#!/usr/bin/env python3
"""A PAC whose evaluation fails denies within the deadline (docs/routing.md).

Checks: a PAC whose evaluation never ends (`while(true){}`) denies with route_timeout
within route_timeout, and egressd keeps serving another principal meanwhile (control
socket, a cached route, a new lookup after the helper restart); the next looping lookup is
bounded too (the helper was restarted, not left hung); another principal's uncached lookup
made during the loop is answered (fails today: refused with route_unavailable — reported);
a PAC with a syntax error denies (route_unavailable); a PAC that throws or returns a
non-string denies (fails today: libproxy answers DIRECT — reported)."""

import os
import sys
import threading
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


def t_pac_loops(L):
    pac = proxies.write_pac(L, "loop.pac", PAC_LOOP_SOME)
    d = fresh(L, {"route": "pac " + pac, "route_timeout": "%ds" % ROUTE_TIMEOUT_S})
    L.grant(d, 0, GRANT)
    L.grant(d, 0, GRANT, port=3129, principal="other-" + L.prefix)
    other = L.proxy_of(0, 3129)
    # the other principal's route to origin.lab.test is looked up (and cached) first
    r = L.connect(0, "origin.lab.test:443", proxy=other, timeout=10)
    allowed_tunnel(r)
    r.close()
    out = {}

    def looping():
        t0 = time.monotonic()
        out["resp"] = L.connect(0, "a.loop.test:443", timeout=15)
        out["el"] = time.monotonic() - t0

    th = threading.Thread(target=looping, daemon=True)
    loop_origin = L.count("http2_443")
    if True:
        th.start()
        time.sleep(0.3)
        # meanwhile: egressd's loop answers, the other principal is served
        t0 = time.monotonic()
        check(d.status().get("ok"), "control socket while the PAC loops")
        r = L.connect(0, "origin.lab.test:443", proxy=other, timeout=10)
        el = time.monotonic() - t0
        check(r.status == 200, "other principal during the loop: %r" % r)
        r.close()
        check(el < ROUTE_TIMEOUT_S * 0.75, "other principal waited %.2fs for a cached route"
              % el)
    th.join(timeout=15)
    check(not th.is_alive(), "looping lookup never answered")
    check(L.count("http2_443") == loop_origin, "the looping destination was connected")
    refused(out["resp"], 504, "route_timeout")
    check(ROUTE_TIMEOUT_S * 0.8 <= out["el"] <= ROUTE_TIMEOUT_S + 2.5,
          "route_timeout after %.2fs" % out["el"])
    rec = wait_decision(d, lambda x: x.get("dest") == "a.loop.test:443")
    check(rec.get("reason") == "route_timeout", "record %s" % rec)
    # a new, uncached lookup after the helper was killed: answered (helper restarted)
    r = L.connect(0, "origin2.lab.test:443", proxy=other, timeout=10)
    allowed_tunnel(r)
    r.close()
    # and the next loop is bounded again
    t0 = time.monotonic()
    refused(L.connect(0, "b.loop.test:443", timeout=15), 504, "route_timeout")
    check(time.monotonic() - t0 <= ROUTE_TIMEOUT_S + 2.5, "second loop took %.2fs"
          % (time.monotonic() - t0))
    stop_clean(d)


def t_pac_loop_other_principal_uncached(L):
    """While one principal's lookup loops in the helper, another principal's NEW (uncached)
    lookup must still be answered (after the helper restart), not refused. Today egressd
    fails every lookup queued behind the stuck one with route_unavailable (routehelper.c
    on_deadline -> fail_all): one principal's looping destination denies the others."""
    pac = proxies.write_pac(L, "loop2.pac", PAC_LOOP_SOME)
    d = fresh(L, {"route": "pac " + pac, "route_timeout": "%ds" % ROUTE_TIMEOUT_S})
    L.grant(d, 0, GRANT)
    L.grant(d, 0, GRANT, port=3129, principal="other-" + L.prefix)
    out = {}
    th = threading.Thread(target=lambda: out.setdefault(
        "r", L.connect(0, "a.loop.test:443", timeout=15)), daemon=True)
    th.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    r = L.connect(0, "origin.lab.test:443", proxy=L.proxy_of(0, 3129), timeout=15)
    el = time.monotonic() - t0
    r.close()
    th.join(timeout=15)
    if "r" in out:
        out["r"].close()
    check(r.status == 200, "another principal's uncached lookup during the loop: %r after "
          "%.2fs" % (r, el))
    stop_clean(d)


def t_pac_syntax_error(L):
    pac = proxies.write_pac(L, "syntax.pac", proxies.PAC_SYNTAX)
    d = fresh(L, {"route": "pac " + pac, "route_timeout": "%ds" % ROUTE_TIMEOUT_S})
    L.grant(d, 0, GRANT)
    with L.no_origin_connection():
        t0 = time.monotonic()
        refused(L.connect(0, "origin.lab.test:443", timeout=10), 502, "route_unavailable")
        check(time.monotonic() - t0 < ROUTE_TIMEOUT_S, "took %.2fs" % (time.monotonic() - t0))
    stop_clean(d)


PAC_RUNTIME_ERRORS = [
    "return undefinedFunction(host);",
    "throw \"broken\";",
    "return 42;",
]


def t_pac_runtime_error(L):
    """A PAC that throws or returns a non-string gives libproxy nothing to use: libproxy
    answers direct:// (fails open, like a 404 PAC URL). egressd must deny instead, as it
    does for a syntax error. Fails today: the hop goes DIRECT (reported)."""
    bad = []
    for body in PAC_RUNTIME_ERRORS:
        pac = proxies.write_pac(L, "rt.pac", "function FindProxyForURL(url, host) {\n  "
                                "if (dnsDomainIs(host, \".lab.test\")) { %s }\n"
                                "  return \"DIRECT\";\n}\n" % body)
        d = fresh(L, {"route": "pac " + pac, "route_timeout": "%ds" % ROUTE_TIMEOUT_S})
        r = proxies.route_query(d, "https://origin.lab.test/")
        if r.get("status") == "allowed":
            bad.append("%s -> %s" % (body, r.get("entries")))
        stop_clean(d)
    check(not bad, "a PAC runtime error was routed: %s" % "; ".join(bad))


def main():
    lab.require_root()
    require_binaries("egressd", "egressd-route-helper")
    res = Results()
    with Lab(workers=1, zone=ZONE) as L:
        proxies.traversable_workdir(L)
        for name, fn in (("pac_loops_route_timeout", t_pac_loops),
                         ("pac_loop_other_principal_uncached",
                          t_pac_loop_other_principal_uncached),
                         ("pac_syntax_error", t_pac_syntax_error),
                         ("pac_runtime_error_denies", t_pac_runtime_error)):
            res.run(name, fn, L)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
