#!/usr/bin/env python3
"""egressd's own PAC fetch: bounds and refresh (docs/routing.md).

Checks: the fetch refuses a captive-portal HTML page, a body over the size bound and too
many redirects (pac_unavailable, never direct), and follows a redirect within the bound; a
refreshed copy replaces cached answers (DIRECT before, the new proxy after)."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxies  # noqa: E402
from labtools.checks import (allowed_tunnel, check, refused, require_binaries,  # noqa: E402
                             stop_clean)

ZONE = {
    "origin.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "origin2.lab.test": {"A": [lab.ORIGIN2]},
    "pac.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "stall.lab.test": {"A": [proxies.STALL_ADDR]},
    "a.loop.test": {"A": [lab.ORIGIN2]},
    "b.loop.test": {"A": [lab.ORIGIN2]},
}
GRANT = ["https://origin.lab.test", "https://origin2.lab.test", "https://a.loop.test",
         "https://b.loop.test"]
ROUTE_TIMEOUT_S = 2.0
PAC_LOOP_SOME = ("function FindProxyForURL(url, host) {\n"
                 "  if (dnsDomainIs(host, \".loop.test\")) { while (true) {} }\n"
                 "  return \"DIRECT\";\n}\n")


def fresh(L, settings):
    """A new egressd; earlier ones (left running by a failed check) are stopped first so
    their listeners do not collide."""
    for old in L.egressds:
        if old.alive():
            old.stop(timeout=5)
    return L.egressd(settings=settings)


def t_pac_refresh_applies(L):
    """A refreshed PAC copy replaces cached answers: DIRECT before, the proxy after."""
    path = "/changing.pac"
    url = proxies.serve_pac(L, path, 'function FindProxyForURL(u, h) { return "DIRECT"; }\n')
    d = fresh(L, {"route": "pac " + url, "pac_timeout": "2s", "pac_refresh": "1s",
                  "route_cache_ttl": "1h"})
    L.grant(d, 0, GRANT)
    proxies.wait_pac_ready(d)
    r = proxies.route_query(d, "https://origin.lab.test/")
    check(r.get("entries") == ["direct"], "before: %s" % r)
    proxies.serve_pac(L, path, proxies.pac_proxied("PROXY new.lab.test:3128",
                                                  domain=".lab.test"))
    # (a lookup in flight when a fetched copy is installed is answered route_unavailable:
    # every successful fetch restarts the helper — tolerated here, reported)
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        r = proxies.route_query(d, "https://origin.lab.test/")
        if r.get("entries") == ["http://new.lab.test:3128"]:
            break
        time.sleep(0.1)
    check(r.get("entries") == ["http://new.lab.test:3128"], "after refresh: %s" % r)
    stop_clean(d)


def t_pac_fetch_bounds(L):
    """What egressd's PAC fetch refuses (pac_unavailable, never direct): a captive-portal
    HTML page, a body over the size bound, too many redirects; a redirect within the bound
    to a good PAC is followed."""
    svc = L.services["http80"]
    svc.routes["/portal.pac"] = (200, ["Content-Type: text/html"],
                                 b"<html><body>please log in</body></html>\n")
    big = proxies.pac_proxied() + "// " + "x" * (1024 * 1024 + 10) + "\n"
    svc.routes["/big.pac"] = (200, [], big.encode())
    svc.routes["/good.pac"] = (200, [], proxies.pac_proxied().encode())
    hop = "/good.pac"
    for i in range(6):
        svc.routes["/r%d.pac" % i] = (302, ["Location: http://pac.lab.test" + hop], b"")
        hop = "/r%d.pac" % i
    for path, ok in (("/portal.pac", False), ("/big.pac", False), ("/r5.pac", False),
                     ("/r1.pac", True)):
        d = fresh(L, {"route": "pac http://pac.lab.test" + path, "pac_timeout": "3s"})
        L.grant(d, 0, GRANT)
        if ok:
            proxies.wait_pac_ready(d)
            r = L.connect(0, "origin.lab.test:443")
            allowed_tunnel(r)
            r.close()
        else:
            # bounded wait until the fetch has failed ("... (no good copy)")
            st = {}
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                st = proxies.route_query(d, "https://origin.lab.test/")
                if "no good copy" in st.get("pac", ""):
                    break
                time.sleep(0.05)
            check("no good copy" in st.get("pac", ""), "%s: %s" % (path, st))
            with L.no_origin_connection():
                refused(L.connect(0, "origin.lab.test:443"), 502, "pac_unavailable")
        stop_clean(d)


def main():
    lab.require_root()
    require_binaries("egressd", "egressd-route-helper")
    res = Results()
    with Lab(workers=1, zone=ZONE) as L:
        proxies.traversable_workdir(L)
        for name, fn in (("pac_fetch_bounds", t_pac_fetch_bounds),
                         ("pac_refresh_applies_new_copy", t_pac_refresh_applies)):
            res.run(name, fn, L)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
