#!/usr/bin/env python3
"""egressd's host route through a PAC file and a real squid (docs/routing.md).

A PAC routes *.proxied.test through squid (proxy.lab.test:3128) and the rest DIRECT.
Checks: both routes appear in the decision log (route = proxy URL, attested false, vs
direct, attested true); squid's access log shows the CONNECT by name by default and by the
checked IP literal under `pinning = required`; a name egressd cannot resolve under
pinning=required is pinning_unavailable (squid sees nothing); the PAC works served over
HTTP and as a file; the injection URL cannot choose a proxy (invalid_host before routing,
no origin, proxy or "evil" listener sees anything; a junk path never reaches the PAC);
failover to the next PAC entry when the first proxy is down (and proxy_unreachable when
none is up); allow_direct = no refuses a DIRECT answer with direct_not_permitted and drops
DIRECT from a list."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import checks, proxies, proxyclient  # noqa: E402
from labtools.checks import (allowed_tunnel, check, refused, require_binaries,  # noqa: E402
                             stop_clean, wait_decision)

EVIL_ADDR = "203.0.113.66"
PROXY_URL = "http://proxy.lab.test:3128"
ZONE = {
    "origin.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "pac.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "proxy.lab.test": {"A": [proxies.PROXY_ADDR]},
    "dead.lab.test": {"A": [proxies.DEAD_ADDR]},
    "evil.test": {"A": [EVIL_ADDR]},
    "x.test": {"A": [lab.HTTP_ORIGIN]},
    "nx.proxied.test": {"rcode": "NXDOMAIN"},
    "priv.proxied.test": {"A": ["10.0.0.5"]},
    "*.proxied.test": {"A": [lab.HTTP_ORIGIN]},
}
GRANT = ["https://origin.lab.test", "https://a.proxied.test", "https://b.proxied.test",
         "https://nx.proxied.test", "https://priv.proxied.test", "https://x.test",
         "http://x.test", "http://origin.lab.test", "http://c.proxied.test"]


def dec_for(d, dest, start):
    return wait_decision(d, lambda r: r.get("dest") == dest, start=start)


def get_through(r, host="x"):
    allowed_tunnel(r)
    try:
        g = proxyclient.tunnel_http_get(r.sock, host, "/")
        check(g.status == 200 and g.header("X-Origin") == "http443", "through tunnel: %r" % g)
    finally:
        r.close()


def t_both_routes_logged(L, d, sq):
    start = len(d.decisions())
    n0 = len(sq.access_log_lines())
    get_through(L.connect(0, "origin.lab.test:443"))
    rec = dec_for(d, "origin.lab.test:443", start)
    check(rec.get("verdict") == "allow" and rec.get("route") == "direct" and
          rec.get("route_source") == "pac" and rec.get("attested") is True and
          rec.get("pinned") == lab.HTTP_ORIGIN, "direct record %s" % rec)
    get_through(L.connect(0, "a.proxied.test:443"))
    rec = dec_for(d, "a.proxied.test:443", start)
    check(rec.get("verdict") == "allow" and rec.get("route") == PROXY_URL and
          rec.get("route_source") == "pac" and rec.get("attested") is False and
          rec.get("pinned") is None and rec.get("proxy_addr") == proxies.PROXY_ADDR and
          rec.get("proxy_status") is None, "proxied record %s" % rec)
    cl = checks.wait_close(d, lambda x: x.get("hop") == rec.get("hop"), start=start)
    check(cl.get("proxy_status") == 200, "proxied close %s" % cl)
    # the direct hop never went through squid; the proxied one did, by name
    ln = sq.wait_log(lambda x: " CONNECT a.proxied.test:443 " in x)
    check(ln is not None and "TCP_TUNNEL/200" in ln, "squid log: %s" % sq.access_log_lines())
    check(not any("origin.lab.test" in x for x in sq.access_log_lines()[n0:]),
          "the direct hop reached squid")


def t_close_record_proxied(L, d, sq):
    """docs/decision-log.md: the close record's pinned is "as in the decision" — null for
    a hop the proxy resolved, the literal under pinning=required."""
    start = len(d.decisions())
    get_through(L.connect(0, "a.proxied.test:443"))
    dec = dec_for(d, "a.proxied.test:443", start)
    cl = d.wait_record(lambda r: r.get("event") == "close" and
                       r.get("conn") == dec.get("conn"), start=start, timeout=5)
    check(cl is not None, "no close record")
    check(cl.get("pinned") == dec.get("pinned"), "close pinned %r, decision pinned %r"
          % (cl.get("pinned"), dec.get("pinned")))


def t_pinning_required_sends_literal(L, d, sq):
    L.grant(d, 0, GRANT, port=3129, principal="pin-" + L.prefix, pinning="required")
    start = len(d.decisions())
    get_through(L.connect(0, "b.proxied.test:443", proxy=L.proxy_of(0, 3129)))
    rec = dec_for(d, "b.proxied.test:443", start)
    check(rec.get("route") == PROXY_URL and rec.get("attested") is True and
          rec.get("pinned") == lab.HTTP_ORIGIN and rec.get("resolved") == [lab.HTTP_ORIGIN],
          "pinned proxied record %s" % rec)
    ln = sq.wait_log(lambda x: " CONNECT %s:443 " % lab.HTTP_ORIGIN in x)
    check(ln is not None, "squid did not see the IP literal: %s" % sq.access_log_lines())
    check(not any("b.proxied.test" in x for x in sq.access_log_lines()),
          "the name reached squid under pinning=required")
    # negative twin: egressd cannot resolve it -> refused, never handed to the proxy by name
    n0 = len(sq.access_log_lines())
    refused(L.connect(0, "nx.proxied.test:443", proxy=L.proxy_of(0, 3129)), 403,
            "pinning_unavailable")
    time.sleep(0.3)
    check(len(sq.access_log_lines()) == n0, "squid saw a request: %s"
          % sq.access_log_lines()[n0:])
    # pinning=required applies the address classes before the proxy sees anything
    refused(L.connect(0, "priv.proxied.test:443", proxy=L.proxy_of(0, 3129)), 403,
            "private_address")
    time.sleep(0.3)
    check(len(sq.access_log_lines()) == n0, "squid saw a request: %s"
          % sq.access_log_lines()[n0:])
    # without pinning the same name goes to the proxy (which resolves, and fails)
    r = L.connect(0, "nx.proxied.test:443")
    check(r.status != 200 or r.sock is None, "nx tunnel %r" % r)
    r.close()


def t_pinning_required_plain_http(L, d, sq):
    """Plain HTTP through the proxy under pinning = required: the absolute-form URL sent to
    the proxy names the checked address (Host names the destination), so the proxy cannot
    resolve the name to something else; the record's pinned address is what was sent."""
    L.grant(d, 0, GRANT, port=3137, principal="pinh-" + L.prefix, pinning="required")
    start = len(d.decisions())
    r = L.http(0, "GET", "http://c.proxied.test/", proxy=L.proxy_of(0, 3137))
    check(r.status == 200, "plain HTTP through the proxy: %r" % r)
    rec = dec_for(d, "c.proxied.test:80", start)
    check(rec.get("attested") is True and rec.get("pinned") == lab.HTTP_ORIGIN,
          "record %s" % rec)
    ln = sq.wait_log(lambda x: " GET http://%s/" % lab.HTTP_ORIGIN in x)
    check(ln is not None, "squid did not get the literal URL: %s" % sq.access_log_lines())
    check(not any("c.proxied.test" in x for x in sq.access_log_lines()),
          "the name reached squid under pinning=required")


def t_pac_file(L, d, sq):
    pac = proxies.write_pac(L, "file.pac", proxies.pac_proxied())
    d2 = L.egressd(settings={"route": "pac " + pac, "route_timeout": "3s"})
    L.grant(d2, 0, GRANT, port=3130)
    get_through(L.connect(0, "a.proxied.test:443", proxy=L.proxy_of(0, 3130)))
    get_through(L.connect(0, "origin.lab.test:443", proxy=L.proxy_of(0, 3130)))
    recs = [r for r in d2.decisions() if r.get("event") == "decision"]
    routes = {r.get("dest"): (r.get("route"), r.get("attested"), r.get("route_source"))
              for r in recs}
    check(routes.get("a.proxied.test:443") == (PROXY_URL, False, "pac") and
          routes.get("origin.lab.test:443") == ("direct", True, "pac"), "routes %s" % routes)
    stop_clean(d2)


INJECTIONS = [
    b'CONNECT x.test/","x")&&"PROXY%20evil.test:1";//:443 HTTP/1.1\r\nHost: x.test\r\n\r\n',
    b'CONNECT x.test/%22,%22x%22)%20%26%26%20%22PROXY%20evil.test:1%22;%20%2F%2F:443 '
    b'HTTP/1.1\r\nHost: x.test\r\n\r\n',
    b'CONNECT x.test%2F%22%2C%22x%22%29:443 HTTP/1.1\r\nHost: x.test\r\n\r\n',
    b'CONNECT x.test",PROXY:443 HTTP/1.1\r\nHost: x.test\r\n\r\n',
    b'CONNECT x.test/:443 HTTP/1.1\r\nHost: x.test\r\n\r\n',
    b'GET http://x.test%2F%22,%22x%22)/ HTTP/1.1\r\nHost: x.test\r\n\r\n',
]


def t_injection(L, d, sq):
    n0 = len(sq.access_log_lines())
    start = len(d.decisions())
    with L.no_origin_connection():
        for raw in INJECTIONS:
            r = L.raw(0, raw, method=raw.split(b" ")[0].decode())
            check(r.status == 400 and r.egress_reason == "invalid_host",
                  "%r -> %r" % (raw, r))
    recs = [x for x in d.decisions()[start:] if x.get("event") == "decision"]
    check(len(recs) == len(INJECTIONS) and
          all(x.get("reason") == "invalid_host" and x.get("route") is None for x in recs),
          "records %s" % recs)
    check(len(sq.access_log_lines()) == n0, "squid saw %s" % sq.access_log_lines()[n0:])
    # A valid host with the junk in the PATH: the query URL is built from scheme, host and
    # port only, so the PAC sees http://x.test/ and says DIRECT.
    start = len(d.decisions())
    r = L.http(0, "GET", 'http://x.test/%22,%22x%22)%20%26%26%20%22PROXY%20evil.test:1%22;'
               '%20//')
    check(r.status == 404 and r.header("X-Origin") == "http80", "path junk: %r" % r)
    rec = dec_for(d, "x.test:80", start)
    check(rec.get("route") == "direct", "route for the junk path %s" % rec)
    r = L.raw(0, b'GET http://x.test/","x")&&"PROXY%20evil.test:1";//:80/ HTTP/1.1\r\n'
              b'Host: x.test\r\nConnection: close\r\n\r\n')
    check(r.status == 404 and r.header("X-Origin") == "http80", "raw path junk: %r" % r)
    recs = [x for x in d.decisions()[start:] if x.get("event") == "decision"]
    check(all(x.get("route") == "direct" for x in recs), "routes %s" % recs)
    check(L.count("evil") == 0, "the evil proxy was contacted")


def t_failover(L, d, sq):
    pac = proxies.write_pac(L, "failover.pac", proxies.pac_proxied(
        "PROXY dead.lab.test:3128; PROXY proxy.lab.test:3128"))
    d3 = L.egressd(settings={"route": "pac " + pac, "route_timeout": "3s"})
    L.grant(d3, 0, GRANT, port=3131)
    t0 = time.monotonic()
    get_through(L.connect(0, "a.proxied.test:443", proxy=L.proxy_of(0, 3131)))
    check(time.monotonic() - t0 < 5, "failover took %.1fs" % (time.monotonic() - t0))
    rec = wait_decision(d3, lambda r: r.get("dest") == "a.proxied.test:443")
    check(rec.get("verdict") == "allow" and rec.get("route") == PROXY_URL,
          "failover record %s" % rec)
    stop_clean(d3)
    # negative twin: only the dead proxy -> proxy_unreachable, never direct
    pac = proxies.write_pac(L, "deadonly.pac", proxies.pac_proxied("PROXY dead.lab.test:3128"))
    d4 = L.egressd(settings={"route": "pac " + pac, "route_timeout": "3s"})
    L.grant(d4, 0, GRANT, port=3132)
    with L.no_origin_connection():
        refused(L.connect(0, "a.proxied.test:443", proxy=L.proxy_of(0, 3132)), 502,
                "proxy_unreachable")
    rec = wait_decision(d4, lambda r: r.get("dest") == "a.proxied.test:443")
    check(rec.get("route") == "http://dead.lab.test:3128", "dead record %s" % rec)
    stop_clean(d4)


def t_allow_direct_off(L, d, sq):
    pac = proxies.write_pac(L, "nodirect.pac", proxies.pac_proxied(
        "PROXY proxy.lab.test:3128; DIRECT"))
    d5 = L.egressd(settings={"route": "pac " + pac, "route_timeout": "3s",
                             "allow_direct": False})
    L.grant(d5, 0, GRANT, port=3133)
    with L.no_origin_connection():
        refused(L.connect(0, "origin.lab.test:443", proxy=L.proxy_of(0, 3133)), 403,
                "direct_not_permitted")
    get_through(L.connect(0, "a.proxied.test:443", proxy=L.proxy_of(0, 3133)))
    rec = wait_decision(d5, lambda r: r.get("dest") == "a.proxied.test:443" and
                        r.get("verdict") == "allow")
    check(rec.get("route") == PROXY_URL, "record %s" % rec)
    stop_clean(d5)
    # "PROXY dead; DIRECT" with allow_direct off: DIRECT is dropped, no fallback to it
    pac = proxies.write_pac(L, "deaddirect.pac", proxies.pac_proxied(
        "PROXY dead.lab.test:3128; DIRECT"))
    d6 = L.egressd(settings={"route": "pac " + pac, "route_timeout": "3s",
                             "allow_direct": False})
    L.grant(d6, 0, GRANT, port=3134)
    with L.no_origin_connection():
        refused(L.connect(0, "a.proxied.test:443", proxy=L.proxy_of(0, 3134)), 502,
                "proxy_unreachable")
    stop_clean(d6)


def t_route_control(L, d, sq):
    """{"op": "route"} (egressctl route URL) says what egressd would do, and why."""
    r = proxies.route_query(d, "https://a.proxied.test/")
    check(r.get("ok") and r.get("status") == "allowed" and r.get("source") == "pac" and
          r.get("entries") == [PROXY_URL] and "good copy" in r.get("pac", ""), "%s" % r)
    r = proxies.route_query(d, "https://origin.lab.test/")
    check(r.get("entries") == ["direct"], "%s" % r)
    # the injection string in a path never reaches the PAC; in a host it is malformed
    r = proxies.route_query(d, 'https://x.test/","x") && "PROXY evil.test:1"; //')
    check(r.get("entries") == ["direct"], "%s" % r)
    r = proxies.route_query(d, 'https://x.test%2F%22,%22x%22)/')
    check(not r.get("ok"), "%s" % r)
    rc, out, err = d.egressctl("-s", d.control_path, "route", "https://a.proxied.test/")
    check(rc == 0 and PROXY_URL in out, "egressctl route: %s %s %s" % (rc, out, err))


def main():
    lab.require_root()
    require_binaries("egressd", "egressd-route-helper")
    miss = proxies.missing_tools("squid")
    if miss:
        print("FAIL: not installed: %s (scripts/deps.sh)" % " ".join(miss))
        print("0 passed, 1 failed")
        return 1
    res = Results()
    with Lab(workers=1, zone=ZONE) as L:
        proxies.add_addresses(L, proxies.PROXY_ADDR, proxies.DEAD_ADDR, EVIL_ADDR)
        L.add_service("evil", EVIL_ADDR, 1, kind="trap")
        sq = proxies.Squid(L).start()
        url = proxies.serve_pac(L, "/proxy.pac", proxies.pac_proxied())
        url = url.replace(lab.HTTP_ORIGIN, "pac.lab.test").replace(":80/", "/")
        d = L.egressd(settings={"route": "pac " + url, "route_timeout": "3s",
                                "pac_timeout": "3s"})
        L.grant(d, 0, GRANT)
        proxies.wait_pac_ready(d)   # the first fetch runs in the background
        for name, fn in (("both_routes_logged", t_both_routes_logged),
                         ("close_record_proxied", t_close_record_proxied),
                         ("pinning_required_sends_literal", t_pinning_required_sends_literal),
                         ("pinning_required_plain_http", t_pinning_required_plain_http),
                         ("pac_file", t_pac_file),
                         ("injection_cannot_choose_proxy", t_injection),
                         ("failover_next_pac_entry", t_failover),
                         ("allow_direct_off", t_allow_direct_off),
                         ("route_control_request", t_route_control)):
            res.run(name, fn, L, d, sq)
        res.run("egressd_stops_clean", stop_clean, d)
        sq.stop()
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
