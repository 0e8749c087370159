#!/usr/bin/env python3
"""Every malformed-request path of egressd answers its status and X-Egress-Reason, and the
origin sees no connection: origin-form, https:// absolute-form, bad and lowercase methods,
bad framing, bare CR, obs-fold, bad versions, oversized heads, invalid ports and hosts,
Upgrade, slowloris (header timeout). The positive twin of each shape is served."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxyclient  # noqa: E402
from labtools.checks import stop_clean, allowed_tunnel, check, require_binaries  # noqa: E402

ZONE = {"ok.lab.test": {"A": [lab.HTTP_ORIGIN]}}
GRANT = ["https://ok.lab.test", "http://ok.lab.test"]
HOST = b"Host: ok.lab.test\r\n"

CASES = [  # (name, raw request, status, reason)
    ("origin_form", b"GET / HTTP/1.1\r\n" + HOST + b"\r\n", 400, "origin_form"),
    ("https_absolute", b"GET https://ok.lab.test/ HTTP/1.1\r\n" + HOST + b"\r\n", 400,
     "https_absolute_form"),
    ("lowercase_method", b"get http://ok.lab.test/ HTTP/1.1\r\n" + HOST + b"\r\n", 400,
     "bad_method"),
    ("unknown_method", b"BREW http://ok.lab.test/ HTTP/1.1\r\n" + HOST + b"\r\n", 400,
     "bad_method"),
    ("trace_method", b"TRACE http://ok.lab.test/ HTTP/1.1\r\n" + HOST + b"\r\n", 400,
     "bad_method"),
    ("cl_and_te", b"POST http://ok.lab.test/echo HTTP/1.1\r\n" + HOST +
     b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "bad_framing"),
    ("duplicate_cl", b"POST http://ok.lab.test/echo HTTP/1.1\r\n" + HOST +
     b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400, "bad_framing"),
    ("te_not_chunked_last", b"POST http://ok.lab.test/echo HTTP/1.1\r\n" + HOST +
     b"Transfer-Encoding: chunked, gzip\r\n\r\n", 400, "bad_framing"),
    ("bad_cl", b"POST http://ok.lab.test/echo HTTP/1.1\r\n" + HOST +
     b"Content-Length: -1\r\n\r\n", 400, "bad_framing"),
    ("bare_cr", b"GET http://ok.lab.test/ HTTP/1.1\r\nX-A: a\rX-B: b\r\n" + HOST + b"\r\n",
     400, "malformed_request"),
    ("obs_fold", b"GET http://ok.lab.test/ HTTP/1.1\r\n" + HOST + b"X-A: a\r\n  folded\r\n\r\n",
     400, "malformed_request"),
    ("bad_header_name", b"GET http://ok.lab.test/ HTTP/1.1\r\n" + HOST +
     b"X A: b\r\n\r\n", 400, "malformed_request"),
    ("http2_version", b"GET http://ok.lab.test/ HTTP/2.0\r\n" + HOST + b"\r\n", 400,
     "malformed_request"),
    ("no_version", b"GET http://ok.lab.test/\r\n\r\n", 400, "malformed_request"),
    ("connect_port_zero", b"CONNECT ok.lab.test:0 HTTP/1.1\r\n\r\n", 400, "invalid_port"),
    ("connect_port_big", b"CONNECT ok.lab.test:65536 HTTP/1.1\r\n\r\n", 400, "invalid_port"),
    ("connect_no_port", b"CONNECT ok.lab.test HTTP/1.1\r\n\r\n", 400, None),
    ("connect_bad_host", b"CONNECT ok..lab.test:443 HTTP/1.1\r\n\r\n", 400, "invalid_host"),
    ("connect_userinfo", b"CONNECT user@ok.lab.test:443 HTTP/1.1\r\n\r\n", 400, None),
    ("head_line_too_large", b"GET http://ok.lab.test/ HTTP/1.1\r\n" + HOST +
     b"X-Big: " + b"a" * 9000 + b"\r\n\r\n", 431, "head_too_large"),
    ("too_many_headers", b"GET http://ok.lab.test/ HTTP/1.1\r\n" + HOST +
     b"".join(b"X-H%d: v\r\n" % i for i in range(150)) + b"\r\n", 431, "head_too_large"),
    ("http11_no_host", b"GET http://ok.lab.test/ HTTP/1.1\r\nX-A: a\r\n\r\n", 400,
     "missing_host"),
    ("upgrade", b"GET http://ok.lab.test/ HTTP/1.1\r\n" + HOST +
     b"Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 501, "upgrade_refused"),
]


def t_cases(L, d):
    bad = []
    with L.no_origin_connection():
        for name, raw, status, reason in CASES:
            r = L.raw(0, raw, timeout=5)
            if reason is None:
                ok = r.status == 400 and r.egress_reason is not None
            else:
                ok = r.status == status and r.egress_reason == reason and \
                    r.body.decode("latin-1").startswith(reason + ":")
            if not ok:
                bad.append("%s: %s %s %r" % (name, r.status, r.egress_reason, r.error))
    check(not bad, "wrong refusals:\n  " + "\n  ".join(bad))


def t_positive_twins(L, d):
    r = L.raw(0, b"GET http://ok.lab.test/ HTTP/1.1\r\n" + HOST + b"\r\n")
    check(r.status == 200, "GET: %r" % r)
    r = L.raw(0, b"GET http://ok.lab.test/ HTTP/1.0\r\n\r\n")
    check(r.status == 200, "HTTP/1.0 GET: %r" % r)
    r = L.raw(0, b"POST http://ok.lab.test/echo HTTP/1.1\r\n" + HOST +
              b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    check(r.status == 200 and r.body.endswith(b"hello"), "chunked POST: %r" % r)
    for m in (b"PUT", b"PATCH", b"DELETE", b"OPTIONS"):
        r = L.raw(0, m + b" http://ok.lab.test/echo HTTP/1.1\r\n" + HOST +
                  b"Content-Length: 2\r\n\r\nhi", method=m.decode())
        check(r.status == 200 and r.body.startswith(m + b" /echo "), "%s: %r" % (m, r))
    t = proxyclient.connect_request(L.connector(0), L.proxy_of(0), "ok.lab.test:443",
                                    version="HTTP/1.0")
    allowed_tunnel(t)
    t.close()
    big = b"GET http://ok.lab.test/ HTTP/1.1\r\n" + HOST + b"X-Big: " + b"a" * 7000 + b"\r\n\r\n"
    r = L.raw(0, big)
    check(r.status == 200, "7000-byte header within limits: %r" % r)


def t_header_timeout(L, d):
    with L.no_origin_connection():
        s = L.connect_from(0, *L.proxy_of(0))
        try:
            s.sendall(b"GET http://ok.lab.test/ HTTP/1.1\r\nHost: ok")   # never finished
            t0 = time.monotonic()
            s.settimeout(8)
            data = b""
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            el = time.monotonic() - t0
        finally:
            s.close()
    check(data.startswith(b"HTTP/1.1 408") and b"X-Egress-Reason: header_timeout" in data,
          "slowloris answer: %r" % data[:200])
    check(el < 5, "header timeout took %.1fs (configured 2s)" % el)


def t_tunnel_not_a_second_request(L, d):
    # Bytes after CONNECT belong to the tunnel, never parsed as a second proxy request.
    r = L.connect(0, "ok.lab.test:443")
    allowed_tunnel(r)
    try:
        r.sock.sendall(b"GET http://other.lab.test/ HTTP/1.1\r\nHost: other.lab.test\r\n"
                       b"Connection: close\r\n\r\n")
        data = b""
        r.sock.settimeout(5)
        while True:
            c = r.sock.recv(65536)
            if not c:
                break
            data += c
        check(b"X-Origin: http443" in data, "tunnel bytes did not reach the origin: %r"
              % data[:200])
    finally:
        r.close()


def main():
    lab.require_root()
    require_binaries("egressd")
    res = Results()
    with Lab(workers=1) as L:
        L.set_zone(ZONE)
        d = L.egressd(settings={"header_timeout": "2s"})
        L.grant(d, 0, GRANT)
        res.run("malformed_requests_refused_with_reason", t_cases, L, d)
        res.run("positive_twins_served", t_positive_twins, L, d)
        res.run("header_timeout_slowloris", t_header_timeout, L, d)
        res.run("tunnel_bytes_not_parsed", t_tunnel_not_a_second_request, L, d)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
