#!/usr/bin/env python3
"""https:// upstream proxies: TLS to the proxy, verified (docs/routing.md).

The lab puts a TLS front (python ssl, certificate from a throw-away lab CA for
tls.lab.test) before a real squid. Checks: with proxy_ca_file = the lab CA the tunnel
works, SNI is the proxy's name and the record's route is the https:// URL; with the system
trust store (no proxy_ca_file) the handshake fails with proxy_tls_failed; a proxy name that
is not in the certificate (alias.lab.test, same address) fails with proxy_tls_failed; a TLS
failure is not a fallback to direct, and no byte reaches the origin."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxies, proxyclient  # noqa: E402
from labtools.checks import (allowed_tunnel, check, refused, require_binaries,  # noqa: E402
                             stop_clean, wait_decision)

TLS_ADDR = "203.0.113.34"
TLS_PORT = 3129
ZONE = {
    "origin.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "proxy.lab.test": {"A": [proxies.PROXY_ADDR]},
    "tls.lab.test": {"A": [TLS_ADDR]},
    "alias.lab.test": {"A": [TLS_ADDR]},
}
GRANT = ["https://origin.lab.test", "http://origin.lab.test"]
HTTPS_URL = "https://tls.lab.test:%d" % TLS_PORT


def fresh(L, settings):
    for old in L.egressds:
        if old.alive():
            old.stop(timeout=5)
    st = {"upstream_timeout": "5s"}
    st.update(settings)
    d = L.egressd(settings=st)
    L.grant(d, 0, GRANT)
    return d


def t_https_proxy_ok(L, ca, front, sq):
    d = fresh(L, {"route": "proxy " + HTTPS_URL, "proxy_ca_file": ca.cert})
    n = front.handshakes
    r = L.connect(0, "origin.lab.test:443")
    allowed_tunnel(r)
    try:
        g = proxyclient.tunnel_http_get(r.sock, "origin.lab.test", "/")
        check(g.status == 200 and g.header("X-Origin") == "http443", "%r" % g)
    finally:
        r.close()
    check(front.handshakes == n + 1 and front.sni and front.sni[-1] == "tls.lab.test",
          "handshakes %d, sni %s" % (front.handshakes - n, front.sni))
    rec = wait_decision(d, lambda x: x.get("dest") == "origin.lab.test:443")
    check(rec.get("verdict") == "allow" and rec.get("route") == HTTPS_URL and
          rec.get("proxy_addr") == TLS_ADDR and rec.get("attested") is False,
          "record %s" % rec)
    check(sq.wait_log(lambda x: " CONNECT origin.lab.test:443 " in x) is not None,
          "squid log %s" % sq.access_log_lines())
    r = L.http(0, "GET", "http://origin.lab.test/echo")
    check(r.status == 200 and r.header("X-Origin") == "http80", "plain http %r" % r)
    stop_clean(d)


def t_untrusted_ca(L, ca, front, sq):
    d = fresh(L, {"route": "proxy " + HTTPS_URL})
    with L.no_origin_connection():
        refused(L.connect(0, "origin.lab.test:443"), 502, "proxy_tls_failed")
    rec = wait_decision(d, lambda x: x.get("dest") == "origin.lab.test:443")
    check(rec.get("reason") == "proxy_tls_failed" and rec.get("route") == HTTPS_URL,
          "record %s" % rec)
    stop_clean(d)


def t_name_mismatch(L, ca, front, sq):
    d = fresh(L, {"route": "proxy https://alias.lab.test:%d" % TLS_PORT,
                  "proxy_ca_file": ca.cert})
    n0 = len(sq.access_log_lines())
    with L.no_origin_connection():
        refused(L.connect(0, "origin.lab.test:443"), 502, "proxy_tls_failed")
    check(len(sq.access_log_lines()) == n0, "squid saw the request")
    stop_clean(d)


def main():
    lab.require_root()
    require_binaries("egressd")
    miss = proxies.missing_tools("squid")
    if miss:
        print("FAIL: not installed: %s (scripts/deps.sh)" % " ".join(miss))
        print("0 passed, 1 failed")
        return 1
    res = Results()
    with Lab(workers=1, zone=ZONE) as L:
        proxies.add_addresses(L, proxies.PROXY_ADDR, TLS_ADDR)
        sq = proxies.Squid(L).start()
        ca = proxies.LabCA(L)
        cert, key = ca.server_cert("tls.lab.test", ["tls.lab.test"])
        front = proxies.TLSFront(L, TLS_ADDR, TLS_PORT, (proxies.PROXY_ADDR, 3128), cert,
                                 key).start()
        for name, fn in (("https_proxy_verified", t_https_proxy_ok),
                         ("https_proxy_untrusted_ca", t_untrusted_ca),
                         ("https_proxy_name_mismatch", t_name_mismatch)):
            res.run(name, fn, L, ca, front, sq)
        front.stop()
        sq.stop()
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
