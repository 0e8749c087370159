#!/usr/bin/env python3
"""egressd end to end: allowed CONNECT (https:// and tcp://) and absolute-form HTTP work, and
each allow has its negative twin (other host, other port, other scheme, IP literal, own
listener address) that is refused with its reason while the origin sees no connection."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import origins, proxyclient  # noqa: E402
from labtools.checks import (allowed_tunnel, check, field, refused, require_binaries,  # noqa: E402
                             stop_clean,
                             wait_decision)

ZONE = {
    "ok.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "other.lab.test": {"A": [lab.HTTP_ORIGIN]},        # same address, not granted
    "echo.lab.test": {"A": [lab.ECHO_ORIGIN]},
    "tls-only.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "plain-only.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "*.w.lab.test": {"A": [lab.ORIGIN2]},
    "w.lab.test": {"A": [lab.ORIGIN2]},
    "self.lab.test": {"A": ["169.254.10.1"]},
    "mixed-self.lab.test": {"A": ["169.254.10.1", lab.ECHO_ORIGIN]},
}

GRANT1 = ["https://ok.lab.test", "http://ok.lab.test", "tcp://echo.lab.test:7",
          "https://tls-only.lab.test", "http://plain-only.lab.test", "https://*.w.lab.test",
          "tcp://198.51.100.11:7", "tcp://169.254.10.1:3128"]
# Worker 2: may name its own listener's subnet through allow_address, and still never reach
# egressd itself.
GRANT2 = ["tcp://self.lab.test:3128", "tcp://169.254.10.1:3128", "tcp://169.254.11.1:3128",
          "tcp://mixed-self.lab.test:7"]


def t_connect_allowed(L, d):
    start = len(d.decisions())
    before = L.count("http443")
    r = L.connect(0, "ok.lab.test:443")
    allowed_tunnel(r)
    try:
        g = proxyclient.tunnel_http_get(r.sock, "ok.lab.test", "/")
        check(g.status == 200 and g.body == b"hello from http443\n", "through tunnel: %r" % g)
    finally:
        r.close()
    check(L.count("http443") == before + 1, "origin saw exactly one connection")
    rec = wait_decision(d, lambda x: "ok.lab.test" in str(x), start=start)
    check(field(rec, "verdict") == "allow", "verdict %s" % rec)
    check(field(rec, "pinned") == lab.HTTP_ORIGIN, "pinned %s" % rec)
    # The documentation range is reachable only through the explicit, logged override.
    check(field(rec, "override") is True, "override not logged: %s" % rec)


def t_connect_twins(L, d):
    with L.no_origin_connection():
        refused(L.connect(0, "other.lab.test:443"), 403, "not_granted")
        refused(L.connect(0, "ok.lab.test:80"), 403, "not_granted")     # https:// is :443
        refused(L.connect(0, "ok.lab.test:8443"), 403, "not_granted")
        refused(L.connect(0, "plain-only.lab.test:443"), 403, "not_granted")  # http:// entry
        refused(L.connect(0, "plain-only.lab.test:80"), 403, "not_granted")
        refused(L.connect(0, "echo.lab.test:8"), 403, "not_granted")
        refused(L.connect(0, "ok.lab.test:7"), 403, "not_granted")
        refused(L.connect(0, "sub.ok.lab.test:443"), 403, "not_granted")
        refused(L.connect(0, "w.lab.test:443"), 403, "not_granted")     # wildcard: no apex
        refused(L.connect(0, "xw.lab.test:443"), 403, "not_granted")    # label boundary
    # Authorization precedes resolution: a refused name is never even looked up.
    for name in ("other.lab.test", "sub.ok.lab.test", "w.lab.test", "xw.lab.test"):
        check(not L.zone.query_log(name), "%s was resolved before being refused" % name)


def t_connect_tcp_echo(L, d):
    r = L.connect(0, "echo.lab.test:7")
    allowed_tunnel(r)
    try:
        data = os.urandom(200000)
        check(proxyclient.tunnel_echo(r.sock, data, timeout=10) == data, "echo mismatch")
    finally:
        r.close()


def _send_parts(L, parts, gap):
    """Connect worker 0 to its listener, send parts with gap seconds between them, read
    the response head; returns (socket, head, bytes after the head)."""
    sock = L.connector(0)(*L.proxy_of(0), 5.0)
    try:
        for i, part in enumerate(parts):
            if i > 0:
                time.sleep(gap)
            sock.sendall(part)
        head, rest = proxyclient.read_head(sock, time.monotonic() + 10)
    except BaseException:
        sock.close()
        raise
    return sock, head, rest


def t_head_arrivals(L, d):
    """However the head arrives (whole in the first read, in pieces, with the first tunnel
    bytes in the same write, or followed by bytes sent before the 200 was read), the hop is
    decided once and every byte behind the head reaches the origin, in order."""
    head = b"CONNECT echo.lab.test:7 HTTP/1.1\r\nHost: echo.lab.test:7\r\n\r\n"
    for name, parts, gap in (
            ("head and bytes in one write", [head + b"early-1|"], 0),
            ("head, then bytes at once", [head, b"early-2|"], 0),
            ("head, then bytes later", [head, b"early-3|"], 0.05),
            ("head in two pieces", [head[:17], head[17:] + b"early-4|"], 0.05),
            ("head in three pieces", [head[:3], head[3:40], head[40:]], 0.05)):
        start = len(d.decisions())
        sock, h, rest = _send_parts(L, parts, gap)
        try:
            check(h is not None and h.startswith(b"HTTP/1.1 200"), "%s: %r" % (name, h))
            early = b"".join(parts)[len(head):]
            got = proxyclient.recv_upto(sock, rest, len(early), time.monotonic() + 10)
            check(got == early, "%s: echoed %r, sent %r" % (name, got, early))
            data = os.urandom(5000)
            check(proxyclient.tunnel_echo(sock, data, timeout=10) == data,
                  "%s: echo after the early bytes" % name)
        finally:
            sock.close()
        rec = wait_decision(d, lambda x: "echo.lab.test" in str(x), start=start)
        check(field(rec, "verdict") == "allow", "%s: %s" % (name, rec))
    # An absolute-form request whose body follows its head later: the body is forwarded.
    req = (b"POST http://ok.lab.test/echo HTTP/1.1\r\nHost: ok.lab.test\r\n"
           b"Connection: close\r\nContent-Length: 8\r\n\r\n")
    sock, h, rest = _send_parts(L, [req, b"the body"], 0.05)
    try:
        check(h is not None and h.startswith(b"HTTP/1.1 200"), "body later: %r" % h)
        got = proxyclient._recv_until_close(sock, rest, time.monotonic() + 10)
        check(got.endswith(b"\r\n\r\nthe body"), "body later, origin saw %r" % got)
    finally:
        sock.close()
    # A refused whole head is answered (the refusal needs the socket's buffer first).
    sock, h, rest = _send_parts(L, [b"CONNECT other.lab.test:443 HTTP/1.1\r\n"
                                    b"Host: other.lab.test:443\r\n\r\n"], 0)
    sock.close()
    check(h is not None and h.startswith(b"HTTP/1.1 403"), "refusal: %r" % h)


def t_connect_wildcard(L, d):
    before = L.count("http2_443")
    r = L.connect(0, "a.b.w.lab.test:443")
    allowed_tunnel(r)
    try:
        g = proxyclient.tunnel_http_get(r.sock, "a.b.w.lab.test", "/")
        check(g.status == 200 and g.header("X-Origin") == "http2_443", "%r" % g)
    finally:
        r.close()
    check(L.count("http2_443") == before + 1, "one connection")


def t_connect_big_download(L, d):
    r = L.connect(0, "ok.lab.test:443")
    allowed_tunnel(r)
    try:
        g = proxyclient.tunnel_http_get(r.sock, "ok.lab.test", "/bytes/4000000", timeout=30)
        check(g.status == 200 and g.body == origins.pattern_bytes(4000000), "bytes differ")
    finally:
        r.close()


def t_http_allowed(L, d):
    start = len(d.decisions())
    before = L.count("http80")
    r = L.http(0, "GET", "http://ok.lab.test/")
    check(r.status == 200 and r.body == b"hello from http80\n", "%r" % r)
    check(L.count("http80") == before + 1, "origin saw one connection")
    rec = wait_decision(d, lambda x: "ok.lab.test" in str(x), start=start)
    check(field(rec, "verdict") == "allow", "verdict %s" % rec)
    r = L.http(0, "GET", "http://plain-only.lab.test/chunked")
    check(r.status == 200 and r.body.count(b"chunk-") == 5, "chunked: %r" % r)
    r = L.http(0, "HEAD", "http://ok.lab.test/")
    check(r.status == 200 and r.body == b"", "HEAD: %r" % r)


def t_http_twins(L, d):
    with L.no_origin_connection():
        refused(L.http(0, "GET", "http://other.lab.test/"), 403, "not_granted")
        refused(L.http(0, "GET", "http://ok.lab.test:8080/"), 403, "not_granted")
        refused(L.http(0, "GET", "http://tls-only.lab.test/"), 403, "not_granted")
        refused(L.http(0, "GET", "http://echo.lab.test:7/"), 403, "not_granted")
        refused(L.http(0, "GET", "http://a.w.lab.test/"), 403, "not_granted")
        refused(L.http(0, "POST", "http://other.lab.test/echo", body=b"x" * 100), 403,
                "not_granted")


def t_http_forwarding(L, d):
    hdrs = [("Proxy-Authorization", "Basic c2VjcmV0OnNlY3JldA=="),
            ("Proxy-Connection", "keep-alive"), ("Connection", "X-Hop"), ("X-Hop", "1"),
            ("Keep-Alive", "timeout=5"), ("TE", "trailers"), ("X-Keep", "yes")]
    r = L.http(0, "POST", "http://ok.lab.test/echo", headers=hdrs, body=b"the body")
    check(r.status == 200, "%r" % r)
    head, _, body = r.body.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    check(lines[0] == b"POST /echo HTTP/1.1", "origin-form request line: %r" % lines[0])
    low = head.lower()
    for h in (b"proxy-authorization", b"proxy-connection", b"x-hop", b"keep-alive",
              b"\r\nte:"):
        check(h not in low, "%s forwarded: %r" % (h, head))
    check(b"x-keep: yes" in low, "end-to-end header dropped")
    check(body == b"the body", "body %r" % body)


def t_ip_literal(L, d):
    r = L.connect(0, "198.51.100.11:7")   # the grant names this literal
    allowed_tunnel(r)
    try:
        check(proxyclient.tunnel_echo(r.sock, b"lit") == b"lit", "echo")
    finally:
        r.close()
    with L.no_origin_connection():
        refused(L.connect(0, "198.51.100.10:443"), 403, "ip_literal_not_granted")
        refused(L.connect(0, "198.51.100.11:8"), 403, "ip_literal_not_granted")
        refused(L.connect(0, "203.0.113.10:443"), 403, "ip_literal_not_granted")
        refused(L.http(0, "GET", "http://198.51.100.10/"), 403, "ip_literal_not_granted")
        refused(L.connect(0, "[::ffff:198.51.100.11]:7"), 403, "ip_literal_not_granted")
        refused(L.connect(0, "[2001:db8::1]:443"), 403, "ip_literal_not_granted")
        refused(L.connect(0, "[::1]:443"), 403, "ip_literal_not_granted")
        refused(L.connect(0, "127.0.0.1:443"), 403, "ip_literal_not_granted")
        refused(L.http(0, "GET", "http://[::1]/"), 403, "ip_literal_not_granted")
        r = L.connect(0, "[fe80::1%25eth0]:443")
        check(r.status == 400 and r.egress_reason == "invalid_host", "zone id: %r" % r)
        # Numeric tricks are neither addresses nor names.
        for t in ("3325256715:7", "0306.0063.0144.0013:7", "198.51.100.011:7", "0xc6336410:443",
                  "198.51.25611:7"):
            r = L.connect(0, t)
            check(r.status in (400, 403) and r.egress_reason in (
                "invalid_host", "ip_literal_not_granted", "not_granted"), "%s: %r" % (t, r))


def t_self_address(L, d):
    with L.no_origin_connection():
        # Named by literal in the grant: still never egressd's own listener (checked before
        # the address classes, so the reason is self_address, not private_address).
        refused(L.connect(0, "169.254.10.1:3128"), 403, "self_address")
        # With the link-local block lifted for worker 2, the literal and a name are still
        # never egressd's own listeners (its own or the other worker's).
        refused(L.connect(1, "169.254.10.1:3128"), 403, "self_address")
        refused(L.connect(1, "169.254.11.1:3128"), 403, "self_address")
        # Reached by name with the link-local block lifted for this grant.
        refused(L.connect(1, "self.lab.test:3128"), 403, "self_address")
    rec = wait_decision(d, lambda x: x.get("dest") == "self.lab.test:3128")
    check(rec["classes_dropped"] == ["self"], "self_address record: %s" % rec)
    # A mixed answer: egressd's own address is dropped, the origin kept, and the record
    # says what was dropped (docs/decision-log.md, classes_dropped; the self address was
    # once missing from the list).
    start = len(d.decisions())
    r = L.connect(1, "mixed-self.lab.test:7")
    allowed_tunnel(r)
    r.close()
    rec = wait_decision(d, lambda x: x.get("dest") == "mixed-self.lab.test:7", start=start)
    check(rec["pinned"] == lab.ECHO_ORIGIN and rec["classes_dropped"] == ["self"],
          "mixed answer record: %s" % rec)


def t_pinning_required_direct(L, d):
    # A grant that requires pinning works over the direct route (egressd resolves and pins
    # itself), and the record says attested.
    g = d.grant_create("pinned", ["https://ok.lab.test"], L.workers[1].listen(3129),
                       L.workers[1].host_if, pinning="required", lifetime_s=60)
    start = len(d.decisions())
    r = L.connect(1, "ok.lab.test:443", proxy=L.proxy_of(1, 3129))
    allowed_tunnel(r)
    r.close()
    rec = wait_decision(d, lambda x: x.get("principal") == "pinned", start=start)
    check(rec["attested"] is True and rec["pinned"] == lab.HTTP_ORIGIN, "%s" % rec)
    d.grant_revoke(g["grant_id"])


def t_wrong_listener_address(L, d):
    # A worker can reach only its own link: a connection to the other worker's listener
    # fails at the network level (there is no route), so principals cannot be borrowed.
    try:
        L.connect_from(0, L.workers[1].host_addr, lab.PROXY_PORT, timeout=1).close()
        raise AssertionError("worker 1 reached worker 2's listener")
    except OSError:
        pass


def main():
    lab.require_root()
    require_binaries("egressd")
    res = Results()
    with Lab() as L:
        L.set_zone(ZONE)
        d = L.egressd()
        L.grant(d, 0, GRANT1)
        L.grant(d, 1, GRANT2, allow_address=["169.254.0.0/16"])
        for name, fn in (("connect_allowed", t_connect_allowed),
                         ("connect_negative_twins", t_connect_twins),
                         ("connect_tcp_echo", t_connect_tcp_echo),
                         ("connect_wildcard", t_connect_wildcard),
                         ("connect_big_download", t_connect_big_download),
                         ("http_allowed", t_http_allowed),
                         # after http_allowed: its upstream connection is pooled
                         ("head_arrivals", t_head_arrivals),
                         ("http_negative_twins", t_http_twins),
                         ("http_forwarding_strips_hop_by_hop", t_http_forwarding),
                         ("ip_literal_only_when_granted", t_ip_literal),
                         ("self_address_refused", t_self_address),
                         ("pinning_required_direct", t_pinning_required_direct),
                         ("listener_unreachable_from_other_worker", t_wrong_listener_address)):
            res.run(name, fn, L, d)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    t0 = time.monotonic()
    rc = main()
    sys.exit(rc)
