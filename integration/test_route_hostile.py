#!/usr/bin/env python3
"""A hostile or broken upstream HTTP proxy (docs/routing.md: every byte from an upstream proxy is
hostile; bounded time; distinct reasons).

A scripted proxy plays one answer per case. Checks: bytes the proxy sends right after its
200 (in the same segment) are tunnel data; a 200 split across segments works; a 200's
Content-Length is ignored (RFC 9110: its bytes are tunnel data); a proxy that never answers
or stalls mid-head is refused within upstream_timeout (504); an oversized head, a
malformed status line and a close mid-head are proxy_bad_response; a 403/502 from the proxy
is proxy_refused with proxy_status recorded; a 407 without Proxy-Authenticate is
upstream_auth_required; a policy answer (403) from the first PAC entry is never followed
by the next entry or DIRECT; egressd stays clean under the sanitizers."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxies, proxyclient  # noqa: E402
from labtools.checks import (allowed_tunnel, check, refused, require_binaries,  # noqa: E402
                             stop_clean)

BAD_ADDR = "203.0.113.35"
UPSTREAM_TIMEOUT_S = 2.0
ZONE = {
    "origin.lab.test": {"A": [lab.ECHO_ORIGIN]},
    "bad.lab.test": {"A": [BAD_ADDR]},
    "proxy.lab.test": {"A": [proxies.PROXY_ADDR]},
}
GRANT = ["tcp://origin.lab.test:7"]

OK_CASES = [
    ("bytes_after_200_are_tunnel_data", [b"HTTP/1.1 200 OK\r\n\r\nBANNER\n", "echo"],
     b"BANNER\n"),
    ("split_200", [b"HTTP/1.1 20", 0.2, b"0 OK\r\n", 0.2, b"\r\n", "echo"], b""),
    ("content_length_on_200_ignored",
     [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "echo"], b"hello"),
    ("http10_200", [b"HTTP/1.0 200 Connection established\r\n\r\n", "echo"], b""),
]
REFUSED_CASES = [
    ("never_answers", ["hold"], 504, "upstream_timeout", None),
    ("stalls_mid_head", [b"HTTP/1.1 200 OK\r\n", 5.0, b"\r\n", "echo"], 504,
     "upstream_timeout", None),
    ("oversized_head", [b"HTTP/1.1 200 OK\r\nX-Junk: " + b"a" * 200000 + b"\r\n\r\n"], 502,
     "proxy_bad_response", None),
    ("too_many_headers", [b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 5000 + b"\r\n"], 502,
     "proxy_bad_response", None),
    ("bad_status_code", [b"HTTP/1.1 2000 OK\r\n\r\n", "echo"], 502, "proxy_bad_response",
     None),
    ("nul_in_head", [b"HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n", "echo"], 502,
     "proxy_bad_response", None),
    ("closes_mid_head", [b"HTTP/1.1 200"], 502, "proxy_bad_response", None),
    ("forbidden", [b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"], 502,
     "proxy_refused", 403),
    ("bad_gateway", [b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad"], 502,
     "proxy_refused", 502),
    ("407_without_challenge", [b"HTTP/1.1 407 Auth\r\nContent-Length: 0\r\n\r\n"], 502,
     "upstream_auth_required", 407),
]


def t_ok_cases(L, d, sp):
    for name, script, early in OK_CASES:
        sp.script = script
        r = L.connect(0, "origin.lab.test:7")
        allowed_tunnel(r)
        try:
            got = r.body
            if len(got) < len(early):
                r.sock.settimeout(2)
                while len(got) < len(early):
                    c = r.sock.recv(4096)
                    if not c:
                        break
                    got += c
            check(got == early, "%s: early bytes %r" % (name, got))
            check(proxyclient.tunnel_echo(r.sock, b"ping", timeout=3) == b"ping",
                  "%s: tunnel does not carry data" % name)
        finally:
            r.close()


def t_refused_cases(L, d, sp):
    for name, script, status, reason, pstatus in REFUSED_CASES:
        sp.script = script
        start = len(d.decisions())
        t0 = time.monotonic()
        with L.no_origin_connection(settle=0.05):
            r = L.connect(0, "origin.lab.test:7", timeout=UPSTREAM_TIMEOUT_S + 6)
            el = time.monotonic() - t0
            try:
                refused(r, status, reason)
            except AssertionError as e:
                raise AssertionError("%s: %s" % (name, e))
        check(el <= UPSTREAM_TIMEOUT_S + 2, "%s: answered after %.2fs" % (name, el))
        # the proxy answered after the allow record (docs/decision-log.md): its answer ends
        # the hop in the close record
        dec = d.wait_record(lambda x: x.get("event") == "decision", start=start, timeout=3)
        check(dec and dec.get("verdict") == "allow" and dec.get("proxy_addr") == BAD_ADDR,
              "%s: decision %s" % (name, dec))
        rec = d.wait_record(lambda x: x.get("event") == "close" and
                            x.get("hop") == dec.get("hop"), start=start, timeout=3)
        check(rec and rec.get("reason") == reason and rec.get("proxy_status") == pstatus and
              rec.get("proxy_addr") == BAD_ADDR, "%s: record %s" % (name, rec))


def t_no_failover_after_policy_answer(L, d, sp):
    """A proxy's 403 is a policy answer: never try the next entry, never DIRECT."""
    sp.script = [b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"]
    pac = proxies.write_pac(L, "policy.pac", 'function FindProxyForURL(u, h) '
                            '{ return "PROXY bad.lab.test:3128; DIRECT"; }\n')
    d2 = L.egressd(settings={"route": "pac " + pac, "route_timeout": "3s"})
    L.grant(d2, 0, GRANT, port=3129)
    with L.no_origin_connection():
        refused(L.connect(0, "origin.lab.test:7", proxy=L.proxy_of(0, 3129)), 502,
                "proxy_refused")
    stop_clean(d2)


def main():
    lab.require_root()
    require_binaries("egressd", "egressd-route-helper")
    res = Results()
    with Lab(workers=1, zone=ZONE) as L:
        L.add_address(BAD_ADDR)
        proxies.traversable_workdir(L)
        sp = proxies.ScriptedProxy(L, BAD_ADDR, 3128).start()
        d = L.egressd(settings={"route": "proxy http://bad.lab.test:3128",
                                "upstream_timeout": "%ds" % UPSTREAM_TIMEOUT_S})
        L.grant(d, 0, GRANT)
        for name, fn in (("proxy_answers_accepted", t_ok_cases),
                         ("proxy_answers_refused", t_refused_cases),
                         ("no_failover_after_policy_answer", t_no_failover_after_policy_answer)):
            res.run(name, fn, L, d, sp)
        res.run("egressd_stops_clean", stop_clean, d)
        sp.stop()
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
