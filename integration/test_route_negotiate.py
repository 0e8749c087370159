#!/usr/bin/env python3
"""Negotiate (SPNEGO/Kerberos) to an upstream squid against a local MIT KDC (docs/routing.md).

The lab builds a throw-away realm LAB.TEST (kdb5_util, kadmin.local, krb5kdc inside the
inet namespace, every file in the lab workdir; KRB5_CONFIG / KRB5_KDC_PROFILE point at
them). squid authenticates with negotiate_kerberos_auth and the HTTP/proxy.lab.test keytab;
egressd holds a client keytab for egressd@LAB.TEST in its root-only credentials file.
Checks: the tunnel works and squid logs the Kerberos principal (a fresh token per tunnel:
two tunnels in a row both succeed while squid keeps a replay cache); the record says
proxy_auth negotiate; a keytab that does not exist gives upstream_auth_failed; no
Negotiate entry gives upstream_auth_required; the worker never sees a token."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import egressd as ed  # noqa: E402
from labtools import checks, proxies, proxyclient  # noqa: E402
from labtools.checks import (allowed_tunnel, check, refused, require_binaries,  # noqa: E402
                             stop_clean, wait_decision)

ZONE = {
    "origin.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "proxy.lab.test": {"A": [proxies.PROXY_ADDR]},
}
GRANT = ["https://origin.lab.test", "http://origin.lab.test"]
PROXY = "http://proxy.lab.test:3128"


def fresh(L, kdc, settings):
    for old in L.egressds:
        if old.alive():
            old.stop(timeout=5)
    # Each egressd gets its own default credential cache: gss_acquire_cred_from with only a
    # client keytab stores the TGT in the process default ccache, which would otherwise
    # carry one test's TGT into the next (see note_default_ccache).
    n = len(L.egressds) + 1
    # egressd drops to an unprivileged account after start-up and its GSS thread works
    # as that account: the client keytab must be readable by it (docs/SECURITY.md: the
    # keytab belongs to the egressd user or group) and the ccache directory writable.
    ccdir = os.path.join(kdc.dir, "cc-egressd-%d" % n)
    os.makedirs(ccdir, exist_ok=True)
    ed.give_to_run_user(ccdir, 0o700)
    ed.give_to_run_user(kdc.client_keytab, 0o600)
    env = dict(kdc.env(), KRB5CCNAME="FILE:%s/krb5cc" % ccdir)
    d = L.egressd(settings=settings, extra_env=env)
    d.default_ccache = env["KRB5CCNAME"][5:]
    L.grant(d, 0, GRANT)
    return d


def creds(L, kdc, name, keytab):
    return proxies.credentials_file(L, name, {"proxy.lab.test:3128": {
        "scheme": "negotiate", "keytab": keytab, "principal": kdc.client_principal}})


def t_negotiate_ok(L, kdc, sq):
    d = fresh(L, kdc, {"route": "proxy " + PROXY, "upstream_timeout": "10s",
                       "proxy_credentials": creds(L, kdc, "krb.ini", kdc.client_keytab)})
    for i in range(2):
        r = L.connect(0, "origin.lab.test:443", timeout=15)
        allowed_tunnel(r)
        check(b"negotiate" not in (r.head + r.body).lower(), "token shown to the worker")
        try:
            g = proxyclient.tunnel_http_get(r.sock, "origin.lab.test", "/echo")
            check(g.status == 200 and b"negotiate" not in g.body.lower(), "%r" % g)
        finally:
            r.close()
    recs = [x for x in d.decisions() if x.get("event") == "decision"]
    check(len(recs) == 2 and all(x.get("verdict") == "allow" and
                                 x.get("proxy_auth") == "negotiate" and
                                 x.get("route") == PROXY for x in recs), "records %s" % recs)
    # squid's replay cache was in use, so the second tunnel's success means a fresh token
    check(any(n.endswith(".rcache2") for n in os.listdir(sq.dir)),
          "squid kept no replay cache: %s" % os.listdir(sq.dir))
    ln = sq.wait_log(lambda x: " CONNECT origin.lab.test:443 %s " % kdc.client_principal in x)
    check(ln is not None and "TCP_TUNNEL/200" in ln, "squid log %s" % sq.access_log_lines())
    r = L.http(0, "GET", "http://origin.lab.test/echo", timeout=15)
    check(r.status == 200 and b"negotiate" not in (r.head + r.body).lower(), "plain %r" % r)
    note_default_ccache(d)
    stop_clean(d)


def note_default_ccache(d):
    """Known behaviour (reported): a keytab without a ccache entry leaves the TGT in the
    process default ccache (on a real host /tmp/krb5cc_0, shared with root's other
    processes). Printed, not failed, so the lead can decide."""
    if os.path.exists(d.default_ccache):
        print("note: egressd left its TGT in the default ccache %s" % d.default_ccache)


def t_negotiate_missing_keytab(L, kdc, sq):
    d = fresh(L, kdc, {"route": "proxy " + PROXY, "upstream_timeout": "10s",
                       "proxy_credentials": creds(L, kdc, "nokt.ini",
                                                  os.path.join(kdc.dir, "missing.keytab"))})
    with L.no_origin_connection():
        refused(L.connect(0, "origin.lab.test:443", timeout=15), 502, "upstream_auth_failed")
    rec = checks.wait_close(d, lambda x: x.get("dest") == "origin.lab.test:443")
    check(rec.get("reason") == "upstream_auth_failed", "record %s" % rec)
    stop_clean(d)


def t_negotiate_no_entry(L, kdc, sq):
    d = fresh(L, kdc, {"route": "proxy " + PROXY})
    with L.no_origin_connection():
        refused(L.connect(0, "origin.lab.test:443", timeout=15), 502,
                "upstream_auth_required")
    check("negotiate" in d.stderr_text().lower(), "offered scheme not named: %s"
          % d.stderr_tail(10))
    stop_clean(d)


def main():
    lab.require_root()
    require_binaries("egressd")
    miss = proxies.missing_tools("squid", "kdc")
    if miss:
        print("FAIL: not installed: %s (scripts/deps.sh)" % " ".join(miss))
        print("0 passed, 1 failed")
        return 1
    res = Results()
    with Lab(workers=1, zone=ZONE) as L:
        proxies.add_addresses(L, proxies.PROXY_ADDR, proxies.KDC_ADDR)
        kdc = proxies.KDC(L).start()
        sq = proxies.Squid(L, auth="negotiate", kdc=kdc).start()
        for name, fn in (("negotiate_ok", t_negotiate_ok),
                         ("negotiate_missing_keytab_auth_failed", t_negotiate_missing_keytab),
                         ("negotiate_no_entry_auth_required", t_negotiate_no_entry)):
            res.run(name, fn, L, kdc, sq)
        sq.stop()
        kdc.stop()
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
