#!/usr/bin/env python3
"""Authorization cannot be side-stepped by the shape of a request: userinfo and fragment
tricks in the absolute URL, a Host header naming another host, pipelined requests after
an allowed one (plain and after a chunked body), bytes sent with CONNECT before the 200,
case and trailing-dot variants of a granted name, and a revocation that lands while the
DNS answer is still pending. Each is checked at the origin: which requests it parsed and
which Host it was told."""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools.checks import (allowed_tunnel, bounded_wait, check,  # noqa: E402
                             require_binaries, stop_clean)

ZONE = {
    "ok.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "other.lab.test": {"A": [lab.ORIGIN2]},
    "slowdns.lab.test": {"A": [lab.HTTP_ORIGIN], "delay": 1.5, "ttl": 0},
}
GRANT = ["http://ok.lab.test", "https://ok.lab.test", "https://slowdns.lab.test"]


def _reqs(L, name):
    return list(L.services[name].requests)


def t_url_confusion(L, d):
    with L.no_origin_connection():
        for url in ("http://ok.lab.test@other.lab.test/",
                    "http://ok.lab.test:80@other.lab.test/",
                    "http://user:pw@ok.lab.test/",
                    "http://other.lab.test#@ok.lab.test/",
                    "http://other.lab.test?@ok.lab.test/",
                    "http://other.lab.test\\@ok.lab.test/",
                    "http://ok.lab.test.other.lab.test/",
                    "http://other.lab.test%2f@ok.lab.test/",
                    "http://ok.lab.test%00.other.lab.test/"):
            r = L.http(0, "GET", url)
            check(r.status in (400, 403) and r.egress_reason, "%s -> %r" % (url, r))
        for tgt in ("ok.lab.test@other.lab.test:443", "other.lab.test:443@ok.lab.test",
                    "ok.lab.test:443/x", "ok.lab.test:443 other.lab.test:443"):
            r = L.raw(0, ("CONNECT %s HTTP/1.1\r\n\r\n" % tgt).encode(), method="CONNECT")
            check(r.status in (400, 403) and r.egress_reason, "CONNECT %s -> %r" % (tgt, r))
            r.close()


def t_host_header_replaced(L, d):
    n = len(_reqs(L, "http80"))
    r = L.http(0, "GET", "http://ok.lab.test/echo", headers=[("Host", "other.lab.test")],
               )
    if r.status == 200:
        seen = _reqs(L, "http80")[n:]
        check(len(seen) == 1, "origin parsed %s" % seen)
        check(seen[0][2] == "ok.lab.test", "origin was told Host %r for a hop to ok.lab.test"
              % seen[0][2])
    else:
        check(r.status == 400 and r.egress_reason, "conflicting Host: %r" % r)
    # Without any Host header (HTTP/1.0) the origin still hears the granted host.
    n = len(_reqs(L, "http80"))
    r = L.raw(0, b"GET http://ok.lab.test/echo HTTP/1.0\r\n\r\n")
    check(r.status == 200, "%r" % r)
    seen = _reqs(L, "http80")[n:]
    check(len(seen) == 1 and seen[0][2] in (None, "ok.lab.test"), "Host %s" % seen)


def t_pipelined_after_allowed(L, d):
    n80, n2 = len(_reqs(L, "http80")), L.count("http2")
    second = b"GET http://other.lab.test/ HTTP/1.1\r\nHost: other.lab.test\r\n\r\n"
    smuggle_origin = b"GET /smuggled HTTP/1.1\r\nHost: other.lab.test\r\n\r\n"
    for first in (b"GET http://ok.lab.test/ HTTP/1.1\r\nHost: ok.lab.test\r\n\r\n",
                  b"POST http://ok.lab.test/echo HTTP/1.1\r\nHost: ok.lab.test\r\n"
                  b"Content-Length: 3\r\n\r\nabc",
                  b"POST http://ok.lab.test/echo HTTP/1.1\r\nHost: ok.lab.test\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"):
        for tail in (second, smuggle_origin):
            s = L.connect_from(0, *L.proxy_of(0))
            try:
                s.sendall(first + tail)
                s.settimeout(5)
                data = b""
                while True:
                    try:
                        c = s.recv(65536)
                    except OSError:
                        break
                    if not c:
                        break
                    data += c
            finally:
                s.close()
            check(data.startswith(b"HTTP/1.1 200"), "first request: %r" % data[:100])
    time.sleep(0.2)
    seen = _reqs(L, "http80")[n80:]
    check(all(t in ("/", "/echo") for _m, t, _h in seen) and len(seen) == 6,
          "the origin parsed pipelined requests: %s" % seen)
    check(L.count("http2") == n2, "other.lab.test reached by a pipelined request")


def t_connect_early_data(L, d):
    # Bytes sent right behind the CONNECT head are tunnel bytes (after the 200), never a
    # second proxy request.
    s = L.connect_from(0, *L.proxy_of(0))
    try:
        s.sendall(b"CONNECT ok.lab.test:443 HTTP/1.1\r\n\r\n"
                  b"GET /early HTTP/1.1\r\nHost: ok.lab.test\r\nConnection: close\r\n\r\n")
        s.settimeout(5)
        data = b""
        while True:
            try:
                c = s.recv(65536)
            except OSError:
                break
            if not c:
                break
            data += c
    finally:
        s.close()
    check(data.startswith(b"HTTP/1.1 200"), "CONNECT: %r" % data[:80])
    # Either egressd forwards the early bytes into the tunnel (the origin answers 404 for
    # /early) or drops the connection; it never interprets them itself.
    check(b"X-Egress-Reason" not in data.split(b"\r\n\r\n", 1)[1], "early bytes parsed by "
          "egressd: %r" % data[:300])


def t_name_variants(L, d):
    for tgt in ("OK.LAB.TEST:443", "ok.lab.test.:443", "Ok.Lab.Test.:443"):
        r = L.connect(0, tgt)
        allowed_tunnel(r)
        r.close()
    with L.no_origin_connection():
        for tgt in ("ok.lab.test..:443", ".ok.lab.test:443", "ok.lab.test:0443",
                    "ok.lab.test:+443", "ok.lab.tes:443", "ok.lab.test\t:443"):
            r = L.raw(0, ("CONNECT %s HTTP/1.1\r\n\r\n" % tgt).encode(), method="CONNECT")
            check(r.status in (400, 403) and r.egress_reason, "%r -> %r" % (tgt, r))
            r.close()


def t_revoke_during_dns(L, d):
    g = L.grant(d, 1, GRANT, principal="revoked-mid-dns")
    out = []
    th = threading.Thread(target=lambda: out.append(L.connect(1, "slowdns.lab.test:443",
                                                              timeout=10)))
    before = L.quiet_counts()
    th.start()
    check(bounded_wait(lambda: L.zone.query_log("slowdns.lab.test"), 3), "no lookup")
    rep = d.grant_revoke(g["grant_id"])
    check(rep.get("ok"), "revoke %s" % rep)
    th.join(timeout=10)
    time.sleep(2.0)   # the DNS answer arrives 1.5 s after the question
    after = L.quiet_counts()
    check(after["http443"] == before["http443"], "revoked grant connected after DNS")
    check(out, "no response")
    r = out[0]
    check(r.status != 200, "revoked grant got a tunnel: %r" % r)
    r.close()


def main():
    lab.require_root()
    require_binaries("egressd")
    res = Results()
    with Lab() as L:
        L.set_zone(ZONE)
        d = L.egressd()
        L.grant(d, 0, GRANT)
        for name, fn in (("url_confusion_refused", t_url_confusion),
                         ("host_header_cannot_redirect_hop", t_host_header_replaced),
                         ("pipelined_requests_not_forwarded", t_pipelined_after_allowed),
                         ("connect_early_data_is_tunnel_data", t_connect_early_data),
                         ("name_variants", t_name_variants),
                         ("revoke_while_dns_pending", t_revoke_during_dns)):
            res.run(name, fn, L, d)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
