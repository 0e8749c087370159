#!/usr/bin/env python3
"""docs/redirects.md in the lab: redirects are re-authorized before the client sees them, credentials
do not follow a cross-origin redirect (unless the grant binds them), hop chains are in the
decision log, and plain-HTTP forwarding is complete enough for keep-alive clients (framed
bodies, HEAD, 1xx, pipelining where every request is its own hop).

Origins: the lab's HTTP origin (ok.lab.test -> 198.51.100.10:80 and :443) with its
/redirect?to=URL, /echo, /chunked and /bytes/N endpoints; a second origin 203.0.113.10
(other/ungranted/bound names); a scripted origin 198.51.100.20 that answers raw bytes
(interim 1xx heads, odd framing)."""

import hashlib
import os
import socket
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import origins, proxyclient  # noqa: E402
from labtools.checks import check, refused, require_binaries, stop_clean  # noqa: E402

RAW_ADDR = "198.51.100.20"
ZONE = {
    "ok.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "other.lab.test": {"A": [lab.ORIGIN2]},
    "ungranted.lab.test": {"A": [lab.ORIGIN2]},
    "bound.lab.test": {"A": [lab.ORIGIN2]},
    "private.lab.test": {"A": ["127.0.0.1"]},
    "raw.lab.test": {"A": [RAW_ADDR]},
}
GRANT = ["http://ok.lab.test", "https://ok.lab.test", "http://other.lab.test",
         "http://other.lab.test:443", "http://bound.lab.test", "http://private.lab.test",
         "http://raw.lab.test"]
CRED_ORIGIN = ["http://bound.lab.test"]
CREDS = [("Authorization", "Bearer s3cret-token"), ("Cookie", "session=abc123")]


def raw_handler(svc, c, peer):
    """Answer each request with the raw bytes of svc.routes[path] (then close)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            return
        buf += d
    target = buf.split(b" ", 2)[1].decode("latin-1")
    out = svc.routes.get(urllib.parse.urlsplit(target).path, b"HTTP/1.1 404 NF\r\n"
                         b"Content-Length: 0\r\n\r\n")
    c.sendall(out)
    try:
        c.shutdown(socket.SHUT_WR)
    except OSError:
        pass


origins.HANDLERS["h12raw"] = raw_handler


def q(url):
    return urllib.parse.quote(url, safe="")


def get(L, url, headers=(), method="GET", timeout=10):
    return L.http(0, method, url, headers=list(headers) + [("Connection", "close")],
                  timeout=timeout)


def decisions(d, pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = [r for r in d.decisions() if r.get("event") == "decision" and pred(r)]
        if out:
            return out
        time.sleep(0.05)
    return []


def redirect_record(d, location_substr, start=0):
    """The newest redirect record (after the first `start` records) whose target is
    location_substr, or failing that contains it."""
    def newer(r):
        return r.get("hop_kind") == "redirect" and r.get("seq", 0) > start

    recs = decisions(d, lambda r: newer(r) and r.get("target") == location_substr)
    if not recs:
        recs = decisions(d, lambda r: newer(r) and location_substr in str(r.get("target")))
    check(recs, "no redirect record for %s" % location_substr)
    return recs[-1]


def last_seq(d):
    recs = d.decisions()
    return recs[-1].get("seq", 0) if recs else 0


def redir(L, d, to, headers=()):
    """GET /redirect?to=<to> on ok.lab.test; returns (response, its redirect record)."""
    start = last_seq(d)
    r = get(L, "http://ok.lab.test/redirect?to=" + q(to), headers)
    return r, redirect_record(d, to, start)


def denied_redirect(L, d, to, detail_part=None, reason="redirect_denied", counted=None):
    before = L.count(counted) if counted else None
    r, rec = redir(L, d, to)
    refused(r, 403 if reason != "redirect_invalid" else 502, reason)
    check(r.header("Location") is None, "the refused redirect was delivered: %r" % r.head)
    check(rec["verdict"] == "deny" and rec["reason"] == reason, "record: %s" % rec)
    check(rec.get("parent_hop") and rec["hop"] != rec["parent_hop"], "hop chain: %s" % rec)
    if detail_part:
        check(detail_part in (rec.get("detail") or ""), "detail %r: %s" % (detail_part, rec))
    if counted:
        time.sleep(0.2)
        check(L.count(counted) == before, "%s was contacted" % counted)
    return r, rec


# ---- redirect re-authorization ----

def t_private_literal(L, d):
    r, rec = denied_redirect(L, d, "http://169.254.169.254/latest/meta-data",
                             "IP literal not named")
    body = r.body.decode()
    check("http://169.254.169.254/latest/meta-data" in body, "body names target: %r" % body)
    denied_redirect(L, d, "http://127.0.0.1/", "IP literal not named")
    denied_redirect(L, d, "http://[::1]:80/x", "IP literal not named")


def t_name_resolving_private(L, d):
    # The name is granted: the redirect passes (egressd checks a name's addresses when the
    # client follows, on that hop, with DNS); the follow-up is refused: private_address.
    r, rec = redir(L, d, "http://private.lab.test/")
    check(r.status == 302 and r.header("Location") == "http://private.lab.test/", "%r" % r)
    check(rec["verdict"] == "allow" and rec["cross_origin"] is True, "%s" % rec)
    with L.no_origin_connection():
        f = get(L, "http://private.lab.test/")
    refused(f, 403, "private_address")
    fr = decisions(d, lambda x: x.get("target") == "http://private.lab.test/" and
                   x.get("hop_kind") == "request")
    check(fr and fr[-1].get("parent_hop") == rec["hop"],
          "follow-up not linked to the redirect: %s" % (fr[-1:] or None))
    check(L.count("trap80") == 0, "trap80 reached")


def t_ungranted(L, d):
    r, rec = denied_redirect(L, d, "http://ungranted.lab.test/x", "not in the grant",
                             counted="http2")
    check("http://ungranted.lab.test/x" in r.body.decode(), "target named: %r" % r.body)
    check(rec["dest"] == "ungranted.lab.test:80", "dest: %s" % rec)
    # https Location: judged as the CONNECT the client will make
    denied_redirect(L, d, "https://ungranted.lab.test/", "not in the grant")
    r, red = redir(L, d, "https://ok.lab.test/")
    check(r.status == 302 and r.header("Location") == "https://ok.lab.test/", "%r" % r)
    # the client's next hop is a CONNECT, authorized on its own and linked to the redirect
    t = L.connect(0, "ok.lab.test:443")
    check(t.status == 200, "CONNECT after an https redirect: %r" % t)
    t.close()
    rec = decisions(d, lambda x: x.get("hop_kind") == "connect" and
                    x.get("target") == "ok.lab.test:443")
    check(rec and rec[-1]["parent_hop"] == red["hop"], "CONNECT not linked: %s" % rec[-1:])


def t_other_port(L, d):
    denied_redirect(L, d, "http://ok.lab.test:443/", "not in the grant")
    # twin: a host granted on that port
    r = get(L, "http://ok.lab.test/redirect?to=" + q("http://other.lab.test:443/"))
    check(r.status == 302, "granted port refused: %r" % r)
    f = get(L, "http://other.lab.test:443/")
    check(f.status == 200 and f.header("X-Origin") == "http2_443", "%r" % f)


def t_relative_forms(L, d):
    r, rec = redir(L, d, "/echo")
    check(r.status == 302 and r.header("Location") == "/echo", "%r" % r)
    check(rec["location"] == "http://ok.lab.test/echo" and rec["cross_origin"] is False,
          "%s" % rec)
    r, rec = redir(L, d, "../a/./b/../c")
    check(r.status == 302, "%r" % r)
    check(rec["location"] == "http://ok.lab.test/a/c", "dots: %s" % rec)
    r, rec = redir(L, d, "//other.lab.test/echo")
    check(r.status == 302, "protocol-relative to a granted host: %r" % r)
    check(rec["location"] == "http://other.lab.test/echo" and rec["cross_origin"] is True,
          "protocol-relative resolution: %s" % rec)
    denied_redirect(L, d, "//ungranted.lab.test/", "not in the grant", counted="http2")
    denied_redirect(L, d, "///ungranted.lab.test/", reason="redirect_invalid")
    denied_redirect(L, d, "http://%75ngranted.lab.test/", reason="redirect_invalid")


def t_userinfo(L, d):
    denied_redirect(L, d, "http://ok.lab.test@ungranted.lab.test/", "userinfo")
    denied_redirect(L, d, "http://user:pw@ok.lab.test/", "userinfo")


def t_loop(L, d):
    svc = L.services["http80"]
    svc.routes["/loop"] = (302, ["Location: /loop"], b"loop\n")
    statuses = []
    for _ in range(14):
        r = get(L, "http://ok.lab.test/loop")
        statuses.append(r.status)
        if r.status != 302:
            break
    check(statuses[:10] == [302] * 10, "first ten redirects pass: %s" % statuses)
    check(len(statuses) == 11 and statuses[10] == 403, "eleventh refused: %s" % statuses)
    check(r.egress_reason == "redirect_loop", "%r" % r)
    rec = decisions(d, lambda x: x.get("reason") == "redirect_loop")
    check(rec and rec[-1]["chain_depth"] == 11, "loop record: %s" % rec[-1:])


# ---- credentials ----

def echo_head(r):
    return r.body.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()


def t_credentials(L, d):
    # baseline: no redirect yet, credentials pass; Proxy-Authorization never does
    r = get(L, "http://other.lab.test/echo", CREDS + [("Proxy-Authorization", "Basic eA==")])
    h = echo_head(r)
    check(r.status == 200 and "authorization: bearer" in h and "cookie: session" in h,
          "baseline: %r" % h)
    check("proxy-authorization" not in h, "Proxy-Authorization forwarded: %r" % h)
    check("via: 1.1 egressd" in h, "no Via: %r" % h)
    # same-origin redirect: kept
    r = get(L, "http://ok.lab.test/redirect?to=" + q("/echo"), CREDS)
    check(r.status == 302, "%r" % r)
    r = get(L, "http://ok.lab.test/echo", CREDS)
    h = echo_head(r)
    check("authorization: bearer" in h and "cookie: session" in h, "same origin: %r" % h)
    rec = decisions(d, lambda x: x.get("target") == "http://ok.lab.test/echo" and
                    x.get("hop_kind") == "request")[-1]
    check(rec["credentials_stripped"] is False, "%s" % rec)
    # cross-origin: stripped
    r, red = redir(L, d, "http://other.lab.test/echo", CREDS)
    check(r.status == 302, "%r" % r)
    r = get(L, "http://other.lab.test/echo", CREDS)
    h = echo_head(r)
    check(r.status == 200 and "authorization" not in h and "cookie" not in h,
          "credentials followed a cross-origin redirect: %r" % h)
    rec = decisions(d, lambda x: x.get("target") == "http://other.lab.test/echo" and
                    x.get("credentials_stripped") is True)
    check(rec and rec[-1]["parent_hop"] == red["hop"], "record: %s" % rec[-1:])
    # bound origin: kept
    r = get(L, "http://ok.lab.test/redirect?to=" + q("http://bound.lab.test/echo"), CREDS)
    check(r.status == 302, "%r" % r)
    r = get(L, "http://bound.lab.test/echo", CREDS)
    h = echo_head(r)
    check("authorization: bearer" in h and "cookie: session" in h, "bound: %r" % h)


# ---- keep-alive, pipelining, framing ----

class Conn:
    """One client connection to egressd, reading framed responses one at a time."""

    def __init__(self, L):
        self.s = L.connect_from(0, *L.proxy_of(0))
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def _more(self, deadline):
        self.s.settimeout(max(0.01, deadline - time.monotonic()))
        d = self.s.recv(1 << 20)
        if not d:
            raise EOFError("eof")
        self.buf += d

    def response(self, method="GET", timeout=10):
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buf:
            self._more(deadline)
        i = self.buf.index(b"\r\n\r\n") + 4
        head, self.buf = self.buf[:i], self.buf[i:]
        r = proxyclient.Response()
        proxyclient._parse_head(r, head)
        if method == "HEAD" or r.status in (204, 304) or r.status < 200:
            return r
        if "chunked" in (r.header("Transfer-Encoding") or "").lower():
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    self._more(deadline)
                line, self.buf = self.buf.split(b"\r\n", 1)
                n = int(line.split(b";")[0], 16)
                if n == 0:
                    while not self.buf.startswith(b"\r\n"):
                        if b"\r\n\r\n" in self.buf:
                            self.buf = self.buf[self.buf.index(b"\r\n\r\n") + 2:]
                            break
                        self._more(deadline)
                    self.buf = self.buf[2:]
                    r.body = body
                    return r
                while len(self.buf) < n + 2:
                    self._more(deadline)
                body += self.buf[:n]
                self.buf = self.buf[n + 2:]
        n = int(r.header("Content-Length", "-1"))
        if n < 0:
            try:
                while True:
                    self._more(deadline)
            except EOFError:
                pass
            r.body, self.buf = self.buf, b""
            return r
        while len(self.buf) < n:
            self._more(deadline)
        r.body, self.buf = self.buf[:n], self.buf[n:]
        return r

    def closed(self, timeout=3):
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self._more(deadline)
        except EOFError:
            return True
        except OSError:
            return False
        return False

    def close(self):
        self.s.close()


def req(method, url, headers=(), body=None):
    host = url.split("://", 1)[1].split("/", 1)[0]
    lines = ["%s %s HTTP/1.1" % (method, url), "Host: " + host]
    lines += ["%s: %s" % kv for kv in headers]
    if body is not None and not any(k.lower() == "transfer-encoding" for k, _ in headers):
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


def second_refused(L, sends, first_ok):
    """Send sends on one connection (100 ms apart); the first response passes first_ok,
    the second request (to ungranted.lab.test) is its own 403 not_granted, the connection
    then closes, and the ungranted host is never contacted."""
    before = L.count("http2")
    c = Conn(L)
    try:
        for i, data in enumerate(sends):
            if i > 0:
                time.sleep(0.1)
            c.send(data)
        first_ok(c.response())
        r2 = c.response()
        check(r2.status == 403 and r2.egress_reason == "not_granted", "second: %r" % r2)
        check(c.closed(), "connection left open after the refusal")
    finally:
        c.close()
    time.sleep(0.2)
    check(L.count("http2") == before, "the ungranted host was contacted")


def t_pipelined(L, d):
    def first_ok(r1):
        check(r1.status == 200 and r1.body.startswith(b"hello from http80"), "first: %r" % r1)
        check(r1.header("Connection") is None, "first response closes: %r" % r1.head)

    second_refused(L, [req("GET", "http://ok.lab.test/") +
                       req("GET", "http://ungranted.lab.test/")], first_ok)
    recs = decisions(d, lambda x: x.get("target") == "http://ungranted.lab.test/")
    check(recs and recs[-1]["hop"].endswith("/2"), "second hop record: %s" % recs[-1:])
    first = [x for x in d.decisions() if x.get("conn") == recs[-1]["conn"] and
             x.get("event") == "decision"]
    check(len(first) == 2 and first[0]["verdict"] == "allow" and
          first[0]["hop"].endswith("/1"), "hops on one connection: %s" % first)


def t_keepalive_bodies(L, d):
    c = Conn(L)
    try:
        big = os.urandom(300000)
        # Content-Length body, echoed back
        c.send(req("POST", "http://ok.lab.test/echo", body=big))
        r = c.response()
        check(r.status == 200 and r.body.endswith(big), "CL echo differs")
        # chunked request body in odd chunk sizes
        chunks = b"".join(b"%x\r\n" % len(big[i:i + 7777]) + big[i:i + 7777] + b"\r\n"
                          for i in range(0, len(big), 7777)) + b"0\r\n\r\n"
        c.send(req("POST", "http://ok.lab.test/echo",
                   [("Transfer-Encoding", "chunked")], chunks))
        r = c.response()
        check(r.status == 200 and hashlib.sha256(r.body[-len(big):]).digest() ==
              hashlib.sha256(big).digest(), "chunked echo differs")
        # chunked response
        c.send(req("GET", "http://ok.lab.test/chunked"))
        r = c.response()
        check(r.body == b"".join(b"chunk-%d\n" % i for i in range(5)), "chunked: %r" % r.body)
        # a large Content-Length response, checksummed
        n = 3 * 1024 * 1024 + 17
        c.send(req("GET", "http://ok.lab.test/bytes/%d" % n))
        r = c.response(timeout=30)
        check(hashlib.sha256(r.body).digest() ==
              hashlib.sha256(origins.pattern_bytes(n)).digest(), "bytes/N differs")
        # HEAD then 204, both without a body, then one more request on the same connection
        c.send(req("HEAD", "http://ok.lab.test/"))
        r = c.response(method="HEAD")
        check(r.status == 200 and r.header("Content-Length") is not None, "HEAD: %r" % r)
        c.send(req("GET", "http://ok.lab.test/status/204"))
        r = c.response()
        check(r.status == 204, "204: %r" % r)
        c.send(req("GET", "http://other.lab.test/"))
        r = c.response()
        check(r.status == 200 and r.body.startswith(b"hello from http2"), "last: %r" % r)
    finally:
        c.close()


def t_pipelined_behind_bodies(L, d):
    """A request whose body comes after its head (while the hop is decided, or after the
    tunnel started), with the next request in the same write behind the body: the body
    goes to the origin and the next request is answered, for both framings."""
    body = b"pipelined-body"
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    for name, hdrs, data in (("chunked", [("Transfer-Encoding", "chunked")], chunked),
                             ("content-length", [("Content-Length", str(len(body)))], body)):
        for gap in (0.0, 0.1):
            c = Conn(L)
            try:
                head = req("POST", "http://ok.lab.test/echo", hdrs)
                c.send(head)
                if gap:
                    time.sleep(gap)
                c.send(data + req("GET", "http://other.lab.test/"))
                r = c.response()
                check(r.status == 200 and r.body.endswith(b"\r\n\r\n" + body),
                      "%s, gap %s: first %r" % (name, gap, r))
                r = c.response()
                check(r.status == 200 and r.body.startswith(b"hello from http2"),
                      "%s, gap %s: the pipelined request: %r" % (name, gap, r))
            finally:
                c.close()
    # The negative twin: behind a chunked body, a request to an ungranted host is a hop of
    # its own, refused, and that host is never contacted.
    second_refused(L, [req("POST", "http://ok.lab.test/echo", [("Transfer-Encoding", "chunked")]),
                       chunked + req("GET", "http://ungranted.lab.test/")],
                   lambda r: check(r.status == 200 and r.body.endswith(b"\r\n\r\n" + body),
                                   "first: %r" % r))


def t_interim_and_framing(L, d):
    svc = L.services["raw"]
    svc.routes["/continue"] = (b"HTTP/1.1 100 Continue\r\n\r\n"
                               b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
    svc.routes["/continue-redirect"] = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 302 Found\r\nLocation: http://ungranted.lab.test/\r\n"
        b"Content-Length: 0\r\n\r\n")
    svc.routes["/smuggle"] = (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    svc.routes["/two-locations"] = (b"HTTP/1.1 302 Found\r\nLocation: /a\r\n"
                                    b"Location: http://ungranted.lab.test/\r\n"
                                    b"Content-Length: 0\r\n\r\n")
    svc.routes["/close-delimited"] = b"HTTP/1.1 200 OK\r\n\r\nuntil-close"
    c = Conn(L)
    try:
        c.send(req("POST", "http://raw.lab.test/continue", [("Expect", "100-continue")],
                   b"abc"))
        r = c.response()
        check(r.status == 100, "interim not passed: %r" % r)
        r = c.response()
        check(r.status == 200 and r.body == b"hello", "final after 100: %r" % r)
        c.send(req("GET", "http://raw.lab.test/close-delimited"))
        r = c.response()
        check(r.body == b"until-close" and r.header("Connection") == "close", "%r" % r)
    finally:
        c.close()
    c = Conn(L)
    try:
        c.send(req("GET", "http://raw.lab.test/continue-redirect"))
        r = c.response()
        if r.status == 100:     # the interim head may or may not have gone out first
            r = c.response()
        check(r.status == 403 and r.egress_reason == "redirect_denied",
              "redirect after 100 not judged: %r" % r)
    finally:
        c.close()
    r = get(L, "http://raw.lab.test/smuggle")
    refused(r, 502, "bad_response")
    r = get(L, "http://raw.lab.test/two-locations")
    refused(r, 502, "redirect_invalid")


def t_upgrade_refused(L, d):
    r = get(L, "http://ok.lab.test/", [("Upgrade", "websocket"), ("Connection", "Upgrade")])
    refused(r, 501, "upgrade_refused")


def t_log_verifies(L, d):
    rc, out, err = d.egressctl("log", "verify", d.log_path)
    check(rc == 0, "log verify: %s %s" % (out, err))


def main():
    lab.require_root()
    require_binaries("egressd", "egressctl")
    res = Results()
    with Lab(workers=1) as L:
        L.add_address(RAW_ADDR)
        L.add_service("raw", RAW_ADDR, 80, kind="h12raw")
        L.set_zone(ZONE)
        d = L.egressd()
        L.grant(d, 0, GRANT, credential_origin=CRED_ORIGIN)
        # first: its baseline needs a memo without redirects to other.lab.test
        res.run("credentials_kept_same_origin_stripped_cross_origin", t_credentials, L, d)
        res.run("redirect_to_private_literal_denied", t_private_literal, L, d)
        res.run("redirect_to_name_resolving_private", t_name_resolving_private, L, d)
        res.run("redirect_to_ungranted_host_denied", t_ungranted, L, d)
        res.run("redirect_to_other_port", t_other_port, L, d)
        res.run("redirect_relative_and_protocol_relative", t_relative_forms, L, d)
        res.run("redirect_userinfo_denied", t_userinfo, L, d)
        res.run("redirect_loop_bounded", t_loop, L, d)
        res.run("pipelined_second_request_is_own_hop", t_pipelined, L, d)
        res.run("keepalive_bodies_intact", t_keepalive_bodies, L, d)
        res.run("pipelined_behind_bodies", t_pipelined_behind_bodies, L, d)
        res.run("interim_1xx_and_response_framing", t_interim_and_framing, L, d)
        res.run("upgrade_refused", t_upgrade_refused, L, d)
        res.run("decision_log_verifies", t_log_verifies, L, d)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
