#!/usr/bin/env python3
"""egressd refuses every special-purpose address class answered by DNS (one address of each
class, A and AAAA), every IPv6 form that embeds a special IPv4 address, CNAMEs to private
names and DNS rebinding; mixed answers use only the public address; allow_address lifts
the block for one grant only. The origin (and the loopback traps that a 127.0.0.1 answer
would reach) sees no connection for any refusal."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxyclient  # noqa: E402
from labtools.checks import stop_clean, allowed_tunnel, check, refused, require_binaries  # noqa: E402

V4 = {  # class -> one address of it
    "this_network": "0.0.0.1",
    "private10": "10.0.0.1",
    "private172": "172.16.0.1",
    "private192": "192.168.1.1",
    "shared": "100.64.0.1",
    "loopback": "127.0.0.1",
    "link_local": "169.254.1.1",
    "ietf": "192.0.0.1",
    "dummy": "192.0.0.8",
    "documentation": "192.0.2.1",       # not lifted by the lab override (only 198.51.100/24,
                                         # 203.0.113/24 are)
    "benchmarking": "198.18.0.1",
    "relay6to4": "192.88.99.1",
    "as112": "192.31.196.1",
    "amt": "192.52.193.1",
    "multicast": "224.0.0.1",
    "reserved": "240.0.0.1",
    "broadcast": "255.255.255.255",
}
V6 = {
    "loopback6": "::1",
    "unspecified6": "::",
    "link_local6": "fe80::1",
    "ula": "fc00::1",
    "site_local": "fec0::1",
    "multicast6": "ff02::1",
    "documentation6": "2001:db8::1",
    "documentation6b": "3fff::1",
    "benchmarking6": "2001:2::1",
    "discard": "100::1",
    "orchid": "2001:10::1",
    "segment_routing": "5f00::1",
    "as112v6": "2620:4f:8000::1",
    "amt6": "2001:3::1",
}
EMBEDDED = {  # IPv6 forms that carry 127.0.0.1 or 10.0.0.1
    "v4mapped": "::ffff:127.0.0.1",
    "v4mapped_private": "::ffff:10.0.0.1",
    "v4compat": "::127.0.0.1",
    "nat64": "64:ff9b::7f00:1",
    "nat64_private": "64:ff9b::a00:1",
    "nat64_local": "64:ff9b:1::c633:640a",       # 64:ff9b:1::/48 is special itself
    "sixtofour": "2002:7f00:1::1",
    "sixtofour_private": "2002:a00:1::1",
    "teredo": "2001:0:4136:e378:8000:63bf:80ff:fffe",   # client = ~80ff:fffe = 127.0.0.1
}


def zone():
    z = {}
    for k, a in V4.items():
        z[k.replace("_", "-") + ".cls.lab.test"] = {"A": [a]}
    for k, a in list(V6.items()) + list(EMBEDDED.items()):
        z[k.replace("_", "-") + ".cls.lab.test"] = {"AAAA": [a]}
    z.update({
        "all-private.cls.lab.test": {"A": ["10.0.0.1", "127.0.0.1"],
                                     "AAAA": ["::1", "fc00::1"]},
        "mixed.cls.lab.test": {"A": ["127.0.0.1", "10.0.0.1", lab.HTTP_ORIGIN]},
        "mixed6.cls.lab.test": {"A": [lab.HTTP_ORIGIN], "AAAA": ["::1", "::ffff:127.0.0.1"]},
        "cname-private.cls.lab.test": {"CNAME": "inner-private.lab.test"},
        "inner-private.lab.test": {"A": ["127.0.0.1"]},
        "cname-public.cls.lab.test": {"CNAME": "inner-public.lab.test"},
        "inner-public.lab.test": {"A": [lab.HTTP_ORIGIN]},
        "cname-chain.cls.lab.test": {"CNAME": "hop1.lab.test"},
        "hop1.lab.test": {"CNAME": "hop2.lab.test"},
        "hop2.lab.test": {"A": ["192.168.0.1"]},
        "rb.cls.lab.test": {"sequence": [{"A": [lab.HTTP_ORIGIN], "ttl": 0},
                                         {"A": ["127.0.0.1"], "ttl": 0}]},
        "rb2.cls.lab.test": {"sequence": [{"A": ["127.0.0.1"], "ttl": 0},
                                          {"A": [lab.HTTP_ORIGIN], "ttl": 0}]},
        "ok.lab.test": {"A": [lab.HTTP_ORIGIN]},
        "origin2.lab.test": {"A": [lab.ORIGIN2]},
    })
    return z


def _each_refused(L, names, port=443):
    bad = []
    with L.no_origin_connection():
        for n in names:
            host = n.replace("_", "-") + ".cls.lab.test"
            r = L.connect(0, "%s:%d" % (host, port))
            if r.status != 403 or r.egress_reason != "private_address":
                bad.append("%s -> %s %s" % (host, r.status, r.egress_reason))
                r.close()
    check(not bad, "not refused with private_address: %s" % bad)


def t_v4_classes(L, d):
    _each_refused(L, V4)


def t_v6_classes(L, d):
    _each_refused(L, V6)


def t_embedded_v6(L, d):
    _each_refused(L, EMBEDDED)


def t_all_private_http(L, d):
    with L.no_origin_connection():
        refused(L.http(0, "GET", "http://all-private.cls.lab.test/"), 403, "private_address")
        refused(L.http(0, "GET", "http://loopback.cls.lab.test/"), 403, "private_address")
        refused(L.connect(0, "all-private.cls.lab.test:7"), 403, "private_address")


def t_private_record_names_classes(L, d):
    start = len(d.decisions())
    refused(L.connect(0, "all-private.cls.lab.test:443"), 403, "private_address")
    rec = d.wait_record(lambda r: "all-private" in str(r), start=start, timeout=3)
    check(rec is not None, "no decision record")
    txt = str(rec)
    for cls in ("private", "loopback"):
        check(cls in txt, "record does not name class %s: %s" % (cls, rec))


def t_mixed_uses_public_only(L, d):
    for host in ("mixed.cls.lab.test", "mixed6.cls.lab.test", "cname-public.cls.lab.test"):
        before = L.quiet_counts()
        r = L.connect(0, host + ":443")
        allowed_tunnel(r)
        try:
            g = proxyclient.tunnel_http_get(r.sock, host, "/")
            check(g.status == 200 and g.header("X-Origin") == "http443", "%s: %r" % (host, g))
        finally:
            r.close()
        after = L.quiet_counts()
        check(after["http443"] == before["http443"] + 1 and
              after["trap443"] == before["trap443"], "%s: %s -> %s" % (host, before, after))


def t_cname_to_private(L, d):
    with L.no_origin_connection():
        refused(L.connect(0, "cname-private.cls.lab.test:443"), 403, "private_address")
        refused(L.connect(0, "cname-chain.cls.lab.test:443"), 403, "private_address")


def t_rebinding(L, d):
    """TTL 0, answers alternating public/private: some hops are allowed (to the public
    address, which is what egressd checked and pinned) and the others refused; none ever
    reaches 127.0.0.1 (the traps)."""
    allowed = refused_n = 0
    before = L.quiet_counts()
    for host in ("rb.cls.lab.test", "rb2.cls.lab.test"):
        for i in range(6):
            r = L.connect(0, host + ":443")
            if r.status == 200:
                allowed += 1
                try:
                    g = proxyclient.tunnel_http_get(r.sock, host, "/")
                    check(g.header("X-Origin") == "http443", "rebinding reached %r" % g)
                finally:
                    r.close()
            else:
                refused(r, 403, "private_address")
                refused_n += 1
            h = L.http(0, "GET", "http://%s/" % host)
            if h.status == 200:
                check(h.header("X-Origin") == "http80", "rebinding reached %r" % h)
            else:
                refused(h, 403, "private_address")
    after = L.quiet_counts()
    for t in lab.TRAP_NAMES:
        check(after[t] == before[t], "rebinding reached the loopback trap %s" % t)
    # Both outcomes are expected with a resolver that honours TTL 0; a resolver with a TTL
    # floor may see only one answer, which is safe too. Only the traps decide.
    print("  rebinding: %d CONNECT allowed, %d refused" % (allowed, refused_n))


def t_allow_address_per_grant(L, d):
    """A second egressd without the lab override for 198.51.100.0/24: the documentation
    address is refused for a grant without allow_address, and allowed for a grant whose
    allow_address covers it."""
    d2 = L.egressd(settings={"allow_special_address": ["203.0.113.0/24"]})
    L.grant(d2, 0, ["https://ok.lab.test", "tcp://origin2.lab.test:80"], port=3129,
            principal="noallow")
    L.grant(d2, 1, ["https://ok.lab.test"], port=3129, principal="withallow",
            allow_address=["198.51.100.10/32"])
    p0, p1 = L.proxy_of(0, 3129), L.proxy_of(1, 3129)
    with L.no_origin_connection():
        r = L.connect(0, "ok.lab.test:443", proxy=p0)
        refused(r, 403, "private_address")
    r = L.connect(1, "ok.lab.test:443", proxy=p1)
    allowed_tunnel(r)
    r.close()
    # The operator override still covers 203.0.113.0/24 for every grant.
    r = L.connect(0, "origin2.lab.test:80", proxy=p0)
    allowed_tunnel(r)
    r.close()
    stop_clean(d2)


def main():
    lab.require_root()
    require_binaries("egressd")
    res = Results()
    with Lab() as L:
        L.set_zone(zone())
        d = L.egressd()
        L.grant(d, 0, ["https://*.cls.lab.test", "http://*.cls.lab.test",
                       "tcp://all-private.cls.lab.test:7"])
        for name, fn in (("v4_special_classes_refused", t_v4_classes),
                         ("v6_special_classes_refused", t_v6_classes),
                         ("embedded_ipv4_in_ipv6_refused", t_embedded_v6),
                         ("all_private_refused_http_and_tcp", t_all_private_http),
                         ("private_decision_names_classes", t_private_record_names_classes),
                         ("mixed_answers_use_public_only", t_mixed_uses_public_only),
                         ("cname_to_private_refused", t_cname_to_private),
                         ("rebinding_never_reaches_private", t_rebinding),
                         ("allow_address_lifts_for_one_grant", t_allow_address_per_grant)):
            res.run(name, fn, L, d)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
