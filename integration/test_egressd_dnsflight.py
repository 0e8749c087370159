#!/usr/bin/env python3
"""DNS lookups are single-flight per name (docs/egressd.md "DNS"): many simultaneous
CONNECTs to one uncached name from one principal cost the DNS server one A and one AAAA
query, and none of them is refused with limit_dns_pending (max_dns_pending counts distinct
lookups, not the hops waiting for one). Before single-flight, 61 of 200 such CONNECTs
(653 of 1,500) were refused 503 limit_dns_pending.

Negative twin: max_dns_pending still bounds distinct lookups: more distinct slow names
than the limit at once are refused with limit_dns_pending beyond it.

And the time bound: dns_timeout = 1s with dns_attempts = 2 gives up after 2 s in total
(c-ares alone would wait 1 s + 2 s)."""

import os
import resource
import selectors
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools.checks import stop_clean, check, refused, require_binaries  # noqa: E402

O = lab.HTTP_ORIGIN
ZONE = {
    "flight200.lab.test": {"A": [O], "ttl": 30, "delay": 0.7},
    "flight1500.lab.test": {"A": [O], "ttl": 30, "delay": 0.7},
    "*.distinct.lab.test": {"A": [O], "ttl": 0, "delay": 0.8},
    "drop.lab.test": {"drop": True},
}


def burst(L, worker, targets, deadline_s=30.0):
    """CONNECT every target at once from worker (non-blocking sockets, one thread);
    returns a list of (status, reason) in the order of targets (None: no answer)."""
    mk = L.socket_factory(worker)
    proxy = L.proxy_of(worker)
    sel = selectors.DefaultSelector()
    out = [None] * len(targets)
    socks = []
    try:
        for i, t in enumerate(targets):
            s = mk(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex(proxy)
            socks.append(s)
            st = {"i": i, "req": ("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (t, t)).encode(),
                  "buf": b""}
            sel.register(s, selectors.EVENT_WRITE, st)
        left = len(targets)
        end = time.monotonic() + deadline_s
        while left and time.monotonic() < end:
            for key, ev in sel.select(timeout=0.5):
                s, st = key.fileobj, key.data
                if ev & selectors.EVENT_WRITE:
                    try:
                        s.send(st["req"])
                    except OSError:
                        out[st["i"]] = (0, "send_failed")
                        sel.unregister(s)
                        left -= 1
                        continue
                    sel.modify(s, selectors.EVENT_READ, st)
                    continue
                try:
                    d = s.recv(4096)
                except OSError:
                    d = b""
                st["buf"] += d
                if b"\r\n\r\n" in st["buf"] or not d or len(st["buf"]) > 65536:
                    head = st["buf"].split(b"\r\n\r\n", 1)[0].decode("latin-1")
                    lines = head.split("\r\n")
                    try:
                        status = int(lines[0].split()[1])
                    except (IndexError, ValueError):
                        status = 0
                    reason = ""
                    for ln in lines[1:]:
                        if ln.lower().startswith("x-egress-reason:"):
                            reason = ln.split(":", 1)[1].strip()
                    out[st["i"]] = (status, reason)
                    sel.unregister(s)
                    left -= 1
    finally:
        for s in socks:
            s.close()
        sel.close()
    return out


def _flight(L, d, name, n):
    L.zone.clear_log()
    res = burst(L, 0, ["%s:443" % name] * n)
    statuses = {}
    for r in res:
        statuses[r] = statuses.get(r, 0) + 1
    dns_refused = sum(1 for r in res if r is not None and r[1] == "limit_dns_pending")
    check(dns_refused == 0, "%d of %d refused limit_dns_pending: %s" % (dns_refused, n,
                                                                     statuses))
    check(statuses.get((200, ""), 0) == n, "not all allowed: %s" % statuses)
    q = L.zone.query_log(name)
    types = sorted(x["type"] for x in q)
    check(types == ["A", "AAAA"], "the DNS server got %d queries for %s: %s"
          % (len(q), name, types))


def t_200(L, d):
    _flight(L, d, "flight200.lab.test", 200)


def t_1500(L, d):
    _flight(L, d, "flight1500.lab.test", 1500)


def t_distinct_still_limited(L, d):
    # max_dns_pending = 64 (default): 100 distinct slow names at once
    L.zone.clear_log()
    res = burst(L, 0, ["n%d.distinct.lab.test:443" % i for i in range(100)])
    lim = sum(1 for r in res if r and r[1] == "limit_dns_pending")
    ok = sum(1 for r in res if r == (200, ""))
    # (64 at once; a few more may get in if some answers come back before the last arrive)
    check(lim >= 1 and ok >= 64 and lim + ok == 100,
          "distinct lookups: %d refused, %d allowed: %s" % (lim, ok, res[:5]))


def t_total_timeout(L, d):
    t0 = time.monotonic()
    r = L.connect(1, "drop.lab.test:443", timeout=15)
    took = time.monotonic() - t0
    refused(r, 504, "dns_timeout")
    check(1.8 <= took < 2.8, "dns_timeout 1s x 2 attempts took %.2fs (c-ares alone: 3s)"
          % took)


def main():
    lab.require_root()
    require_binaries("egressd")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    res = Results()
    with Lab(workers=2) as L:
        L.set_zone(ZONE)
        d = L.egressd(settings={"dns_attempts": "2", "max_connections": "4000"})
        L.grant(d, 0, ["https://*.lab.test"], connections=2000)
        L.grant(d, 1, ["https://drop.lab.test"])
        for name, fn in (("connect_200_one_name_one_query", t_200),
                         ("connect_1500_one_name_one_query", t_1500),
                         ("distinct_lookups_still_limited", t_distinct_still_limited),
                         ("dns_timeout_is_total_bound", t_total_timeout)):
            res.run(name, fn, L, d)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
