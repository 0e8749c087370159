#!/usr/bin/env python3
"""egressd towards origins: connect failures answer their reasons (refused, timeout),
egressd falls back across the addresses it checked without re-resolving, the idle timeout
closes a quiet tunnel, tunnels work with splice on and off, metrics are served on loopback,
and SIGTERM drains (stops accepting, lets a tunnel finish within drain_timeout, exit 0)."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import netns, origins, proxyclient  # noqa: E402
from labtools.checks import (allowed_tunnel, check, refused, require_binaries,  # noqa: E402
                             stop_clean)

BLACKHOLE = "198.51.100.99"    # routed to a blackhole inside the inet namespace
ZONE = {
    "ok.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "closed.lab.test": {"A": [lab.HTTP_ORIGIN]},         # nothing listens on :81
    "hole.lab.test": {"A": [BLACKHOLE]},
    "fallback.lab.test": {"A": [BLACKHOLE, lab.HTTP_ORIGIN], "ttl": 60},
    "refused-first.lab.test": {"A": [lab.ECHO_ORIGIN, lab.HTTP_ORIGIN], "ttl": 60},
    "echo.lab.test": {"A": [lab.ECHO_ORIGIN]},
}
GRANT = ["https://ok.lab.test", "tcp://closed.lab.test:81", "https://hole.lab.test",
         "https://fallback.lab.test", "https://refused-first.lab.test",
         "tcp://echo.lab.test:7", "http://ok.lab.test"]
CONNECT_TIMEOUT_S = 3.0   # lab default


def t_connect_refused(L, d):
    refused(L.connect(0, "closed.lab.test:81"), 502, "connect_refused")


def t_connect_timeout(L, d):
    t0 = time.monotonic()
    r = L.connect(0, "hole.lab.test:443", timeout=15)
    el = time.monotonic() - t0
    refused(r, 504, "connect_timeout")
    check(CONNECT_TIMEOUT_S * 0.8 <= el <= CONNECT_TIMEOUT_S + 3, "took %.2fs" % el)


def t_fallback_without_reresolve(L, d):
    # 198.51.100.11 refuses :443 (only the echo listens there, on :7), then .10 answers.
    L.zone.clear_log()
    before = L.count("http443")
    r = L.connect(0, "refused-first.lab.test:443", timeout=15)
    allowed_tunnel(r)
    try:
        g = proxyclient.tunnel_http_get(r.sock, "x", "/")
        check(g.header("X-Origin") == "http443", "%r" % g)
    finally:
        r.close()
    check(L.count("http443") == before + 1, "one connection to the second address")
    n = [q for q in L.zone.query_log("refused-first.lab.test") if q["type"] == "A"]
    check(len(n) == 1, "re-resolved during fallback: %s" % n)
    rec = d.wait_record(lambda x: x.get("event") == "decision" and
                        "refused-first" in str(x.get("dest")), timeout=3)
    check(rec and rec.get("pinned") == lab.HTTP_ORIGIN, "pinned %s" % rec)


def t_fallback_after_timeout(L, d):
    # The first address never answers: the connect deadline covers all pinned addresses
    # together, so egressd either reaches the second one or answers connect_timeout; it
    # never connects anywhere it did not check.
    before = L.quiet_counts()
    r = L.connect(0, "fallback.lab.test:443", timeout=15)
    if r.status == 200:
        r.close()
        check(L.quiet_counts()["http443"] == before["http443"] + 1, "fallback target")
    else:
        refused(r, 504, "connect_timeout")


def _big(L, proxy, n):
    r = L.connect(0, "ok.lab.test:443", proxy=proxy)
    allowed_tunnel(r)
    try:
        g = proxyclient.tunnel_http_get(r.sock, "ok.lab.test", "/bytes/%d" % n, timeout=30)
        check(g.status == 200 and g.body == origins.pattern_bytes(n), "download differs")
    finally:
        r.close()
    r = L.connect(0, "echo.lab.test:7", proxy=proxy)
    allowed_tunnel(r)
    try:
        data = os.urandom(1 << 20)
        check(proxyclient.tunnel_echo(r.sock, data, timeout=20) == data, "echo differs")
    finally:
        r.close()


def t_splice_on_and_off(L, d):
    _big(L, None, 8 << 20)
    d2 = L.egressd(settings={"splice": False})
    L.grant(d2, 0, GRANT, port=3129)
    _big(L, L.proxy_of(0, 3129), 8 << 20)
    stop_clean(d2)


def t_idle_timeout(L, d):
    d3 = L.egressd(settings={"idle_timeout": "1s"})
    L.grant(d3, 0, GRANT, port=3130)
    start = len(d3.decisions())
    r = L.connect(0, "echo.lab.test:7", proxy=L.proxy_of(0, 3130))
    allowed_tunnel(r)
    try:
        check(proxyclient.tunnel_echo(r.sock, b"x") == b"x", "echo")
        w = proxyclient.wait_closed(r.sock, 5)
        check(w is not None and 0.7 <= w <= 3.5, "idle tunnel closed after %s s" % w)
    finally:
        r.close()
    rec = d3.wait_record(lambda x: x.get("event") == "close", start=start, timeout=3)
    check(rec and rec.get("reason") == "idle_timeout", "close record %s" % rec)
    stop_clean(d3)


def t_half_close(L, d):
    """Client half-closes: the echo origin sees EOF, sends back what it had and closes;
    the client reads everything and then EOF."""
    import socket as _s
    r = L.connect(0, "echo.lab.test:7")
    allowed_tunnel(r)
    try:
        data = os.urandom(300000)
        r.sock.sendall(data)
        r.sock.shutdown(_s.SHUT_WR)
        got = b""
        r.sock.settimeout(10)
        while True:
            c = r.sock.recv(65536)
            if not c:
                break
            got += c
        check(got == data, "half-close lost data: %d of %d bytes" % (len(got), len(data)))
    finally:
        r.close()


def t_large_bodies(L, d):
    body = os.urandom(3 << 20)
    r = L.http(0, "POST", "http://ok.lab.test/echo", body=body, timeout=30)
    check(r.status == 200 and r.body.endswith(body), "3 MiB POST: %r" % r)
    chunks = b"".join(b"%x\r\n" % len(c) + c + b"\r\n"
                      for c in (body[i:i + 100000] for i in range(0, len(body), 100000)))
    r = L.raw(0, b"POST http://ok.lab.test/echo HTTP/1.1\r\nHost: ok.lab.test\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n", timeout=30)
    check(r.status == 200 and r.body.endswith(body), "chunked 3 MiB POST: %r" % r)
    r = L.http(0, "GET", "http://ok.lab.test/bytes/5000000", timeout=30)
    check(r.status == 200 and r.body == origins.pattern_bytes(5000000), "5 MB GET")


def t_lifetime_exceeded(L, d):
    d7 = L.egressd(settings={"tunnel_max_lifetime": "1s"})
    L.grant(d7, 0, GRANT, port=3135)
    start = len(d7.decisions())
    r = L.connect(0, "echo.lab.test:7", proxy=L.proxy_of(0, 3135))
    allowed_tunnel(r)
    t0 = time.monotonic()
    closed = None
    try:
        # Keep the tunnel busy: the lifetime cap applies however active it is.
        while time.monotonic() - t0 < 5:
            try:
                if proxyclient.tunnel_echo(r.sock, b"tick", timeout=1) != b"tick":
                    closed = time.monotonic() - t0
                    break
            except OSError:
                closed = time.monotonic() - t0
                break
            time.sleep(0.1)
    finally:
        r.close()
    check(closed is not None and closed <= 2.5, "busy tunnel outlived its lifetime (%s)"
          % closed)
    rec = d7.wait_record(lambda x: x.get("event") == "close", start=start, timeout=3)
    check(rec and rec.get("reason") == "lifetime_exceeded", "close record %s" % rec)
    stop_clean(d7)


def t_metrics(L, d):
    d4 = L.egressd(settings={"metrics_listen": "127.0.0.1:9464"})
    L.grant(d4, 0, GRANT, port=3131)
    r = L.connect(0, "ok.lab.test:443", proxy=L.proxy_of(0, 3131))
    allowed_tunnel(r)
    r.close()
    refused(L.connect(0, "nope.lab.test:443", proxy=L.proxy_of(0, 3131)), 403, "not_granted")
    held = L.connect(0, "echo.lab.test:7", proxy=L.proxy_of(0, 3131))
    allowed_tunnel(held)
    try:
        check(proxyclient.tunnel_echo(held.sock, b"m" * 1000) == b"m" * 1000, "echo")
        txt = L.metrics_text(9464)
    finally:
        held.close()
    check(txt.startswith("HTTP/1.") and " 200 " in txt.split("\r\n")[0], txt[:200])
    for name in ("egressd_decisions_total", "egressd_grants_active",
                 "egressd_connections_active", "egressd_tunnels_active",
                 "egressd_bytes_total", "egressd_dns_seconds_bucket",
                 "egressd_connect_seconds_bucket"):
        check(name in txt, "metric %s missing" % name)
    check('reason="not_granted"' in txt, "not_granted decision not counted")
    lines = [ln for ln in txt.splitlines() if ln.startswith("egressd_tunnels_active{")]
    check(any('principal="w1-%s"' % L.prefix in ln and ln.rstrip().endswith(" 1")
              for ln in lines), "open tunnel not in tunnels_active: %s" % lines)
    stop_clean(d4)
    # A non-loopback metrics address is a configuration error.
    d5 = L.egressd(settings={"metrics_listen": lab.HOST_LINK + ":9464"}, start=False)
    rc, out, err = d5.check_config()
    check(rc == 1, "metrics_listen on a non-loopback address accepted: %s %s" % (out, err))


def t_drain(L, d):
    d6 = L.egressd(settings={"drain_timeout": "2s"})
    L.grant(d6, 0, GRANT, port=3132)
    start = len(d6.decisions())
    r = L.connect(0, "echo.lab.test:7", proxy=L.proxy_of(0, 3132))
    allowed_tunnel(r)
    try:
        t0 = time.monotonic()
        d6.signal(signal.SIGTERM)
        time.sleep(0.3)
        # Still relaying during the drain ...
        check(proxyclient.tunnel_echo(r.sock, b"drain") == b"drain", "tunnel cut at once")
        # ... but no longer accepting.
        try:
            L.connect_from(0, L.workers[0].host_addr, 3132, timeout=1).close()
            accepted = True
        except OSError:
            accepted = False
        check(not accepted, "listener still accepting during drain")
        w = proxyclient.wait_closed(r.sock, 6)
        check(w is not None, "tunnel not closed by the end of the drain")
        el = time.monotonic() - t0
        check(el <= 2 + 2.5, "drain took %.1fs" % el)
    finally:
        r.close()
    try:
        d6.proc.wait(timeout=10)
    except Exception:
        pass
    check(d6.proc.returncode == 0, "exit status %s" % d6.proc.returncode)
    rec = d6.wait_record(lambda x: x.get("event") == "close", start=start, timeout=1)
    check(rec and rec.get("reason") == "shutdown", "close record %s" % rec)
    stop_clean(d6)


def main():
    lab.require_root()
    require_binaries("egressd")
    res = Results()
    with Lab(workers=1) as L:
        netns.ip("-n", L.ns_inet, "route", "add", "blackhole", BLACKHOLE + "/32")
        L.set_zone(ZONE)
        d = L.egressd()
        L.grant(d, 0, GRANT)
        for name, fn in (("connect_refused", t_connect_refused),
                         ("connect_timeout", t_connect_timeout),
                         ("fallback_without_reresolve", t_fallback_without_reresolve),
                         ("fallback_after_timeout", t_fallback_after_timeout),
                         ("splice_on_and_off", t_splice_on_and_off),
                         ("idle_timeout", t_idle_timeout),
                         ("half_close", t_half_close),
                         ("large_bodies", t_large_bodies),
                         ("lifetime_exceeded", t_lifetime_exceeded),
                         ("metrics_on_loopback", t_metrics),
                         ("sigterm_drain", t_drain)):
            res.run(name, fn, L, d)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
