#!/usr/bin/env python3
"""egressd DNS failures are denials with their own reasons, never a fallback: NXDOMAIN,
SERVFAIL/REFUSED, no address, timeout (no answer at all), and a CNAME leaving the zone.
Positive twins: a slow-but-in-time answer, an answer truncated over UDP (TCP retry), and
TTL caching."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools.checks import stop_clean, allowed_tunnel, check, refused, require_binaries  # noqa: E402

O = lab.HTTP_ORIGIN
ZONE = {
    "nx.dns.lab.test": {"rcode": "NXDOMAIN"},
    "sf.dns.lab.test": {"rcode": "SERVFAIL"},
    "refused.dns.lab.test": {"rcode": "REFUSED"},
    "nodata.dns.lab.test": {},
    "drop.dns.lab.test": {"drop": True},
    "slow.dns.lab.test": {"A": [O], "delay": 0.4},
    "tc.dns.lab.test": {"A": [O], "tc": True},
    "cache.dns.lab.test": {"A": [O], "ttl": 60},
    "ttl0.dns.lab.test": {"A": [O], "ttl": 0},
    "ok.dns.lab.test": {"A": [O]},
    "broken.dns.lab.test": {"broken": True},
    "loop1.dns.lab.test": {"CNAME": "loop2.dns.lab.test"},
    "loop2.dns.lab.test": {"CNAME": "loop1.dns.lab.test"},
    "dangling.dns.lab.test": {"CNAME": "gone.elsewhere.test"},
    "many.dns.lab.test": {"A": [O] * 100},
    "many-private.dns.lab.test": {"A": ["10.0.0.%d" % i for i in range(1, 61)] + [O]},
}
DNS_TIMEOUT_S = 1.0   # lab default dns_timeout 1s, dns_attempts 1


def t_nxdomain(L, d):
    with L.no_origin_connection():
        refused(L.connect(0, "nx.dns.lab.test:443"), 502, "dns_nxdomain")
        refused(L.http(0, "GET", "http://nx.dns.lab.test/"), 502, "dns_nxdomain")
        refused(L.connect(0, "unknown.dns.lab.test:443"), 502, "dns_nxdomain")


def t_servfail(L, d):
    with L.no_origin_connection():
        refused(L.connect(0, "sf.dns.lab.test:443"), 502, "dns_servfail")
        refused(L.connect(0, "refused.dns.lab.test:443"), 502, "dns_servfail")


def t_no_address(L, d):
    with L.no_origin_connection():
        refused(L.connect(0, "nodata.dns.lab.test:443"), 502, "dns_no_address")


def t_timeout(L, d):
    with L.no_origin_connection():
        t0 = time.monotonic()
        r = L.connect(0, "drop.dns.lab.test:443", timeout=15)
        el = time.monotonic() - t0
        refused(r, 504, "dns_timeout")
    check(DNS_TIMEOUT_S * 0.8 <= el <= DNS_TIMEOUT_S * 2 + 3, "timeout took %.2fs" % el)


def t_slow_in_time(L, d):
    r = L.connect(0, "slow.dns.lab.test:443")
    allowed_tunnel(r)
    r.close()


def t_truncated_retries_tcp(L, d):
    L.zone.clear_log()
    r = L.connect(0, "tc.dns.lab.test:443")
    allowed_tunnel(r)
    r.close()
    tr = [q["transport"] for q in L.zone.query_log("tc.dns.lab.test") if q["type"] == "A"]
    check("tcp" in tr, "no TCP retry: %s" % tr)


def t_cache(L, d):
    L.zone.clear_log()
    for _ in range(3):
        r = L.connect(0, "cache.dns.lab.test:443")
        allowed_tunnel(r)
        r.close()
    n = len([q for q in L.zone.query_log("cache.dns.lab.test") if q["type"] == "A"])
    check(n == 1, "TTL 60 answer asked %d times for 3 hops" % n)
    for _ in range(3):
        r = L.connect(0, "ttl0.dns.lab.test:443")
        allowed_tunnel(r)
        r.close()
    n = len([q for q in L.zone.query_log("ttl0.dns.lab.test") if q["type"] == "A"])
    check(n == 3, "TTL 0 answer asked %d times for 3 hops" % n)


def t_nxdomain_not_cached_as_allow(L, d):
    # A name that starts failing must not be served from a stale positive answer beyond
    # its TTL, and a name that starts working is used (negative answers are not pinned
    # forever).
    L.update_zone({"flip.dns.lab.test": {"rcode": "NXDOMAIN"}})
    refused(L.connect(0, "flip.dns.lab.test:443"), 502, "dns_nxdomain")
    L.update_zone({"flip.dns.lab.test": {"A": [O], "ttl": 0}})
    deadline = time.monotonic() + 8
    r = L.connect(0, "flip.dns.lab.test:443")
    while r.status != 200 and time.monotonic() < deadline:
        time.sleep(0.5)
        r = L.connect(0, "flip.dns.lab.test:443")
    allowed_tunnel(r)
    r.close()


def t_unusable_answers(L, d):
    with L.no_origin_connection():
        for host in ("broken.dns.lab.test", "loop1.dns.lab.test", "dangling.dns.lab.test"):
            r = L.connect(0, host + ":443")
            check(r.status in (502, 504) and (r.egress_reason or "").startswith("dns_"),
                  "%s: %r" % (host, r))
            r.close()


def t_large_answers(L, d):
    # 100 records (only over TCP): bounded, still usable.
    r = L.connect(0, "many.dns.lab.test:443")
    allowed_tunnel(r)
    r.close()
    # 60 private addresses before the public one: whatever the cap on kept addresses, the
    # result is the public address or a refusal, never a private connect.
    before = L.quiet_counts()
    r = L.connect(0, "many-private.dns.lab.test:443")
    if r.status == 200:
        r.close()
        check(L.quiet_counts()["http443"] == before["http443"] + 1, "public address used")
    else:
        check(r.status in (403, 502) and r.egress_reason in ("private_address", "dns_error"),
              "%r" % r)


def t_denials_logged(L, d):
    recs = [r for r in d.decisions() if r.get("event") == "decision"]
    for reason in ("dns_nxdomain", "dns_servfail", "dns_no_address", "dns_timeout"):
        check([r for r in recs if r.get("reason") == reason],
              "no decision record with reason %s" % reason)


def main():
    lab.require_root()
    require_binaries("egressd")
    res = Results()
    with Lab() as L:
        L.set_zone(ZONE)
        d = L.egressd()
        L.grant(d, 0, ["https://*.dns.lab.test", "http://*.dns.lab.test"])
        for name, fn in (("nxdomain", t_nxdomain), ("servfail_and_refused", t_servfail),
                         ("no_address", t_no_address), ("timeout", t_timeout),
                         ("slow_answer_in_time", t_slow_in_time),
                         ("truncated_udp_retries_tcp", t_truncated_retries_tcp),
                         ("ttl_cache", t_cache),
                         ("negative_answer_expires", t_nxdomain_not_cached_as_allow),
                         ("unusable_answers_refused", t_unusable_answers),
                         ("large_answers_bounded", t_large_answers),
                         ("dns_denials_logged", t_denials_logged)):
            res.run(name, fn, L, d)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
