#!/usr/bin/env python3
"""Keep-alive on the upstream side (docs/redirects.md, "HTTP/1.1 forwarding"):
plain-HTTP requests of one grant to the same
pinned address and port reuse one idle upstream connection; another principal never
does; a connection is not reused after "Connection: close", after the idle limit, or
after its grant is revoked; an origin that closes the idle connection just as it is
reused does not cost the client a 502 (a bodiless request is retried once on a fresh
connection to the same address), while a request with a body is not retried.

Origins (inet namespace): 203.0.113.31:80 a keep-alive HTTP/1.1 origin ("ka") that
records every connection's end; 203.0.113.32:80 ("once") that answers the first request
of a connection and then closes it when the next request arrives, without answering."""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lab import Lab, Results  # noqa: E402
from labtools import origins  # noqa: E402
from labtools.checks import check, require_binaries, stop_clean  # noqa: E402

import lab  # noqa: E402

KA_ADDR = "203.0.113.31"
ONCE_ADDR = "203.0.113.32"
ZONE = {"ka.lab.test": {"A": [KA_ADDR]}, "once.lab.test": {"A": [ONCE_ADDR]}}
GRANT = ["http://ka.lab.test", "http://once.lab.test"]
CLOSED = {}          # service name -> number of connections that ended
CLOSED_LOCK = threading.Lock()


def read_head(c, buf):
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            return None, buf
        buf += d
    i = buf.index(b"\r\n\r\n") + 4
    return buf[:i], buf[i:]


def content_length(head):
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return int(v.strip())
    return 0


def ka_handler(svc, c, peer, answer_only_first=False):
    """HTTP/1.1 keep-alive: every request answered with Content-Length on the same
    connection (path /bye answers with Connection: close and closes)."""
    buf = b""
    n = 0
    try:
        while True:
            head, buf = read_head(c, buf)
            if head is None:
                return
            n += 1
            if answer_only_first and n > 1:
                return          # the origin closed its idle connection as it was reused
            cl = content_length(head)
            while len(buf) < cl:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            buf = buf[cl:]
            path = head.split(b" ", 2)[1]
            body = b"%s request %d on this connection\n" % (svc.name.encode(), n)
            extra = b""
            if path.endswith(b"/bye"):
                extra = b"Connection: close\r\n"
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n" % (len(body), extra)
                      + body)
            if extra:
                return
    finally:
        with CLOSED_LOCK:
            CLOSED[svc.name] = CLOSED.get(svc.name, 0) + 1


def once_handler(svc, c, peer):
    ka_handler(svc, c, peer, answer_only_first=True)


origins.HANDLERS["upool_ka"] = ka_handler
origins.HANDLERS["upool_once"] = once_handler


def closed(name):
    with CLOSED_LOCK:
        return CLOSED.get(name, 0)


def wait_closed(name, at_least, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and closed(name) < at_least:
        time.sleep(0.05)
    return closed(name)


class Conn:
    """One kept client connection to egressd from a worker."""

    def __init__(self, L, worker=0):
        self.s = L.connect_from(worker, *L.proxy_of(worker))
        self.buf = b""

    def get(self, url, method="GET", body=None, timeout=10):
        host = url.split("://", 1)[1].split("/", 1)[0]
        h = "%s %s HTTP/1.1\r\nHost: %s\r\n" % (method, url, host)
        if body is not None:
            h += "Content-Length: %d\r\n" % len(body)
        self.s.sendall((h + "\r\n").encode() + (body or b""))
        self.s.settimeout(timeout)
        head, self.buf = read_head(self.s, self.buf)
        check(head is not None, "egressd closed the client connection")
        cl = content_length(head)
        while len(self.buf) < cl:
            d = self.s.recv(65536)
            check(d, "body cut short")
            self.buf += d
        b, self.buf = self.buf[:cl], self.buf[cl:]
        status = int(head.split(b" ", 2)[1])
        reason = None
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"x-egress-reason:"):
                reason = line.split(b":", 1)[1].strip().decode()
        return status, b, reason

    def close(self):
        self.s.close()


def records(d, target):
    return [r for r in d.decisions() if r.get("event") == "decision" and
            r.get("target") == target]


def settle():
    time.sleep(0.3)      # the response is out before the socket is parked: let it park


def t_reuse_same_principal(L, d):
    before = L.count("ka")
    c = Conn(L, 0)
    try:
        for i in range(3):
            st, body, _ = c.get("http://ka.lab.test/r%d" % i)
            check(st == 200 and body.startswith(b"ka request %d" % (i + 1)),
                  "request %d: %s %r" % (i, st, body))
    finally:
        c.close()
    check(L.count("ka") - before == 1, "3 requests opened %d upstream connections"
          % (L.count("ka") - before))
    recs = [records(d, "http://ka.lab.test/r%d" % i)[-1] for i in range(3)]
    check([r["upstream_reused"] for r in recs] == [False, True, True],
          "upstream_reused: %s" % [r["upstream_reused"] for r in recs])
    check(len({r["pinned"] for r in recs}) == 1 and recs[0]["pinned"] == KA_ADDR,
          "pinned: %s" % [r["pinned"] for r in recs])
    # another client connection of the same principal: the same idle upstream connection
    settle()
    c = Conn(L, 0)
    try:
        st, body, _ = c.get("http://ka.lab.test/again")
        check(st == 200 and body.startswith(b"ka request 4"), "%s %r" % (st, body))
    finally:
        c.close()
    check(L.count("ka") - before == 1, "second client connection did not reuse")


def t_other_principal_never_reuses(L, d):
    settle()
    before = L.count("ka")
    c = Conn(L, 1)
    try:
        st, body, _ = c.get("http://ka.lab.test/w2")
        check(st == 200 and body.startswith(b"ka request 1 "),
              "another principal reused a connection: %s %r" % (st, body))
    finally:
        c.close()
    check(L.count("ka") == before + 1, "accepts %d -> %d" % (before, L.count("ka")))
    rec = records(d, "http://ka.lab.test/w2")[-1]
    check(rec["upstream_reused"] is False, "record: %s" % rec)
    # and principal 1 still gets its own one back (principal 2's is not handed out)
    settle()
    c = Conn(L, 0)
    try:
        st, body, _ = c.get("http://ka.lab.test/w1")
        check(st == 200 and not body.startswith(b"ka request 1 "), "%s %r" % (st, body))
    finally:
        c.close()
    check(L.count("ka") == before + 1, "principal 1 opened a new connection")


def t_connection_close_not_reused(L, d):
    settle()
    c = Conn(L, 0)
    try:
        st, _, _ = c.get("http://ka.lab.test/bye")
        check(st == 200, "bye: %s" % st)
        n = L.count("ka")
        st, body, _ = c.get("http://ka.lab.test/after-bye")
        check(st == 200 and body.startswith(b"ka request 1 "), "%s %r" % (st, body))
        check(L.count("ka") == n + 1, "a Connection: close connection was reused")
    finally:
        c.close()


def t_retry_when_origin_closes_on_reuse(L, d):
    before = L.count("once")
    c = Conn(L, 0)
    try:
        st, body, _ = c.get("http://once.lab.test/first")
        check(st == 200 and body.startswith(b"once request 1"), "%s %r" % (st, body))
        settle()
        st, body, reason = c.get("http://once.lab.test/second")
        check(st == 200 and body.startswith(b"once request 1"),
              "reused then closed by the origin: %s %s %r" % (st, reason, body))
    finally:
        c.close()
    check(L.count("once") == before + 2, "accepts: %d" % (L.count("once") - before))
    rec = records(d, "http://once.lab.test/second")[-1]
    check(rec["upstream_reused"] is True and rec["pinned"] == ONCE_ADDR, "record: %s" % rec)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and "retried once" not in d.stderr_text():
        time.sleep(0.05)
    check("retried once on a fresh connection" in d.stderr_text(),
          "no retry in the operator log:\n%s" % d.stderr_tail())


def t_body_not_retried(L, d):
    settle()
    before = L.count("once")
    c = Conn(L, 0)
    try:
        st, _, _ = c.get("http://once.lab.test/p1")
        check(st == 200, "first: %s" % st)
        settle()
        st, _, reason = c.get("http://once.lab.test/p2", method="POST", body=b"x" * 10)
        check(st == 502 and reason == "upstream_reset", "POST on a dead reused "
              "connection: %s %s" % (st, reason))
    except EOFError:
        pass
    finally:
        c.close()
    time.sleep(0.2)
    check(L.count("once") == before + 1, "a request with a body was retried")


def t_idle_limit(L, d):
    settle()
    c = Conn(L, 0)
    try:
        st, _, _ = c.get("http://ka.lab.test/idle")
        check(st == 200, "%s" % st)
    finally:
        c.close()
    # egressd closes parked connections after the idle limit (EGRESS_UPOOL_IDLE_S, 4 s)
    time.sleep(5.0)
    before = L.count("ka")
    c = Conn(L, 0)
    try:
        st, body, _ = c.get("http://ka.lab.test/after-idle")
        check(st == 200 and body.startswith(b"ka request 1 "), "%s %r" % (st, body))
    finally:
        c.close()
    check(L.count("ka") == before + 1, "an expired idle connection was reused")


def t_revoke_drops_pool(L, d, gid):
    settle()
    c = Conn(L, 1)
    try:
        st, _, _ = c.get("http://ka.lab.test/before-revoke")
        check(st == 200, "%s" % st)
    finally:
        c.close()
    settle()
    n = closed("ka")
    t0 = time.monotonic()
    r = d.grant_revoke(gid)
    check(r.get("ok"), "revoke: %s" % r)
    check(wait_closed("ka", n + 1, 2.0) > n and time.monotonic() - t0 < 2.0,
          "revoking the grant left its idle upstream connection open")


def main():
    lab.require_root()
    require_binaries("egressd", "egressctl")
    res = Results()
    with Lab(workers=2) as L:
        L.add_address(KA_ADDR)
        L.add_address(ONCE_ADDR)
        L.add_service("ka", KA_ADDR, 80, kind="upool_ka")
        L.add_service("once", ONCE_ADDR, 80, kind="upool_once")
        L.set_zone(ZONE)
        d = L.egressd()
        L.grant(d, 0, GRANT)
        g2 = L.grant(d, 1, GRANT)
        res.run("upstream_reused_by_same_principal_and_address", t_reuse_same_principal, L, d)
        res.run("another_principal_never_reuses", t_other_principal_never_reuses, L, d)
        res.run("connection_close_not_reused", t_connection_close_not_reused, L, d)
        res.run("origin_closing_on_reuse_is_retried_not_502",
                t_retry_when_origin_closes_on_reuse, L, d)
        res.run("request_with_body_not_retried", t_body_not_retried, L, d)
        res.run("idle_limit_closes_pooled", t_idle_limit, L, d)
        res.run("revoke_drops_pooled", t_revoke_drops_pool, L, d, g2["grant_id"])
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_stops_clean", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
