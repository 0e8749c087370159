#!/usr/bin/env python3
"""Limits answer with their reasons: the global connection limit and a principal's
connection limit (503), pending DNS lookups per principal (503), the grant's byte budget
(403 for new hops); slots are given back when connections end."""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxyclient  # noqa: E402
from labtools.checks import stop_clean, allowed_tunnel, bounded_wait, check, refused, require_binaries  # noqa: E402,E501

ZONE = {
    "echo.lab.test": {"A": [lab.ECHO_ORIGIN]},
    "web.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "slow.lab.test": {"A": [lab.HTTP_ORIGIN], "delay": 1.5, "ttl": 0},
    "slow2.lab.test": {"A": [lab.HTTP_ORIGIN], "delay": 1.5, "ttl": 0},
}
GRANT = ["tcp://echo.lab.test:7", "https://web.lab.test", "https://slow.lab.test",
         "https://slow2.lab.test"]
MAX_CONN = 4
PRINCIPAL_CONN = 2


def _close_all(ts):
    for t in ts:
        t.close()


def _idle(d):
    """Bounded wait until egressd has noticed every earlier close (its connection count is
    0), so one limit test does not inherit the previous one's slots."""
    check(bounded_wait(lambda: d.status().get("connections") == 0, 5, step=0.05),
          "connections still open: %s" % d.status())


def t_principal_limit(L, d, st):
    _idle(d)
    ts = []
    try:
        for _ in range(PRINCIPAL_CONN):
            t = L.connect(1, "echo.lab.test:7")
            allowed_tunnel(t)
            ts.append(t)
        with L.no_origin_connection():
            refused(L.connect(1, "echo.lab.test:7"), 503, "limit_principal")
        # The other principal is not limited by it.
        t = L.connect(0, "echo.lab.test:7")
        allowed_tunnel(t)
        ts.append(t)
    finally:
        _close_all(ts)
    # Slots come back when tunnels end.
    def again():
        r = L.connect(1, "echo.lab.test:7")
        r.close()
        return r.status == 200
    check(bounded_wait(again, 3, step=0.1), "principal slot not returned")


def t_global_limit(L, d, st):
    _idle(d)
    ts = []
    try:
        for who in (0, 0, 1, 1):
            t = L.connect(who, "echo.lab.test:7")
            allowed_tunnel(t)
            ts.append(t)
        with L.no_origin_connection():
            r = L.connect(0, "echo.lab.test:7")
            check(r.status == 503 and r.egress_reason in ("limit_connections",),
                  "over the global limit: %r" % r)
            refused(r, 503, "limit_connections")
    finally:
        _close_all(ts)
    def again():
        r = L.connect(0, "echo.lab.test:7")
        r.close()
        return r.status == 200
    check(bounded_wait(again, 3, step=0.1), "global slot not returned")


def t_bytes_budget(L, d, st):
    """bytes = 100000: a download past the budget is cut inside the tunnel (close reason
    limit_bytes) and every later hop is refused with 403 limit_bytes."""
    _idle(d)
    start = len(d.decisions())
    t = L.connect(2, "web.lab.test:443")
    allowed_tunnel(t)
    try:
        g = proxyclient.tunnel_http_get(t.sock, "web.lab.test", "/bytes/3000000", timeout=10)
        check(g.status is None or len(g.body) < 3000000, "budget not enforced in the tunnel")
    finally:
        t.close()
    rec = d.wait_record(lambda x: x.get("event") == "close" and
                        x.get("principal") == "p-bytes", start=start, timeout=3)
    check(rec and rec.get("reason") == "limit_bytes", "close record %s" % rec)
    check(rec["bytes_up"] + rec["bytes_down"] <= 100000 + 65536 * 4,
          "far past the budget: %s" % rec)

    def over():
        r = L.connect(2, "web.lab.test:443")
        r.close()
        return r if r.status == 403 else None
    with L.no_origin_connection():
        r = bounded_wait(over, 3, step=0.1)
    check(r is not None, "new hop allowed past the byte budget")
    refused(r, 403, "limit_bytes")


def t_dns_pending(L, d, st):
    """max_dns_pending = 1 counts distinct lookups: while one slow lookup is in flight for
    the principal, a lookup of another name is refused with 503 limit_dns_pending, and a
    hop for the same name joins the running lookup (single flight: no second query, not
    refused)."""
    _idle(d)
    results = []

    def one():
        results.append(L.connect(0, "slow.lab.test:443", timeout=10))

    th = threading.Thread(target=one)
    th.start()
    # Wait (bounded) until the first lookup reached the DNS server.
    check(bounded_wait(lambda: L.zone.query_log("slow.lab.test"), 3), "no first lookup")
    time.sleep(0.1)
    before = L.count("http443")
    r = L.connect(0, "slow2.lab.test:443", timeout=10)
    refused(r, 503, "limit_dns_pending")
    # the same name: joins the running lookup
    same = L.connect(0, "slow.lab.test:443", timeout=10)
    th.join(timeout=10)
    for x in results:
        x.close()
    check(same.status == 200, "a hop joining the running lookup: %r" % same)
    same.close()
    check(results and results[0].status == 200, "first lookup: %r" % results)
    check(len(L.zone.query_log("slow.lab.test")) == 2, "one A and one AAAA query: %s"
          % L.zone.query_log("slow.lab.test"))
    check(not L.zone.query_log("slow2.lab.test"), "the refused lookup reached the DNS")
    # The two hops of slow.lab.test reached the origin; the refused one never connected.
    check(L.quiet_counts()["http443"] == before + 2, "origin connections")


def main():
    lab.require_root()
    require_binaries("egressd")
    res = Results()
    with Lab(workers=3) as L:
        L.set_zone(ZONE)
        d = L.egressd(settings={"max_connections": MAX_CONN, "max_dns_pending": 1,
                                "dns_timeout": "3s"})
        st = {}
        L.grant(d, 0, GRANT, principal="p-zero")
        L.grant(d, 1, GRANT, principal="p-one", connections=PRINCIPAL_CONN)
        L.grant(d, 2, GRANT, principal="p-bytes", bytes_=100000)
        for name, fn in (("principal_connection_limit", t_principal_limit),
                         ("global_connection_limit", t_global_limit),
                         ("byte_budget", t_bytes_budget),
                         ("dns_pending_limit", t_dns_pending)):
            res.run(name, fn, L, d, st)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
