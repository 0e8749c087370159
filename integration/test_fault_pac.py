#!/usr/bin/env python3
"""Fault tests (docs/SECURITY.md, "What the fault tests prove"): the PAC route helper hangs or crashes. route = pac FILE whose
FindProxyForURL loops forever for *.loop.test and answers DIRECT for the rest.

- helper_hangs: a hop to a.loop.test is refused (504 route_timeout) within route_timeout +
  slack, no origin sees a connection (never a fallback to direct); a later hop to
  origin.lab.test succeeds, and a fresh lookup (past the route cache TTL) runs in a new
  egressd-route-helper process (egressd restarts the helper on demand).
- helper_crashes: while a lookup for b.loop.test is in flight, the helper gets SIGKILL;
  the in-flight hop is refused (route_unavailable, route_timeout or internal_error, a 5xx
  with a reason), no origin sees a connection; later hops succeed and run in a new helper.
  Repeated three times (restart is not one-shot).
"""

import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools.checks import (allowed_tunnel, bounded_wait, check, require_binaries,  # noqa: E402
                             stop_clean)

ZONE = {
    "origin.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "a.loop.test": {"A": [lab.ORIGIN2]},
    "b.loop.test": {"A": [lab.ORIGIN2]},
}
GRANT = ["https://origin.lab.test", "https://a.loop.test", "https://b.loop.test"]
ROUTE_TIMEOUT_S = 2.0
CACHE_TTL_S = 1.0
PAC = ("function FindProxyForURL(url, host) {\n"
       "  if (dnsDomainIs(host, \".loop.test\")) { while (true) {} }\n"
       "  return \"DIRECT\";\n}\n")
DENY_REASONS = ("route_unavailable", "route_timeout", "internal_error")


def helper_pids(d):
    """Children of egressd that are the route helper (comm is cut to 15 characters)."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        if ppid == d.proc.pid and comm.startswith("egressd-route"):
            out.append(int(p))
    return out


def ok_hop(L):
    r = L.connect(0, "origin.lab.test:443", timeout=10)
    r.close()
    return r.status == 200


def t_hangs(L, d):
    check(bounded_wait(lambda: helper_pids(d), 5), "no route helper running")
    before = helper_pids(d)
    with L.no_origin_connection():
        t0 = time.monotonic()
        r = L.connect(0, "a.loop.test:443", timeout=15)
        took = time.monotonic() - t0
        r.close()
    check(r.status == 504 and r.egress_reason == "route_timeout", "looping PAC: %r" % r)
    check(took <= ROUTE_TIMEOUT_S + 1.5, "route_timeout after %.2fs" % took)
    check(bounded_wait(lambda: ok_hop(L), 5, step=0.2), "no hop succeeds after the hang")
    replaced(L, d, before, "hang")


def replaced(L, d, before, what):
    """The helper is restarted on demand: past the route cache TTL a new lookup runs in a
    new helper process."""
    time.sleep(CACHE_TTL_S + 0.3)
    check(ok_hop(L), "%s: a fresh lookup after the cache expired failed" % what)
    now = helper_pids(d)
    check(now and not set(now) & set(before),
          "%s: the helper was not replaced (before %s, now %s)" % (what, before, now))


def t_crashes(L, d):
    for round_ in range(3):
        check(bounded_wait(lambda: helper_pids(d), 5), "no route helper running")
        before = helper_pids(d)
        res = []
        th = threading.Thread(target=lambda: res.append(
            L.connect(0, "b.loop.test:443", timeout=15)))
        with L.no_origin_connection():
            th.start()
            time.sleep(0.5)  # the lookup is in the helper now, looping
            for pid in before:
                os.kill(pid, 9)
            th.join(timeout=15)
        check(res, "round %d: the in-flight hop got no answer" % round_)
        r = res[0]
        r.close()
        check(r.status in (502, 503, 504) and r.egress_reason in DENY_REASONS,
              "round %d: in-flight hop after the helper crash: %r" % (round_, r))
        check(bounded_wait(lambda: ok_hop(L), 5, step=0.2),
              "round %d: no hop succeeds after the crash" % round_)
        replaced(L, d, before, "round %d" % round_)
    check(d.alive(), "egressd died:\n%s" % d.stderr_tail())


def main():
    lab.require_root()
    require_binaries("egressd", "egressd-route-helper")
    res = Results()
    # The route helper runs as nobody and must be able to read egressd's PAC copy: keep
    # it in a world-traversable directory (the lab workdir is 0700). An unreadable copy
    # makes libproxy answer DIRECT (see test_route_pacfail pac_copy_unreadable_by_helper).
    pubdir = tempfile.mkdtemp(prefix="h13pac-", dir="/tmp")
    os.chmod(pubdir, 0o755)
    try:
        return run(res, pubdir)
    finally:
        shutil.rmtree(pubdir, ignore_errors=True)


def run(res, pubdir):
    with Lab(workers=1) as L:
        L.set_zone(ZONE)
        pac = os.path.join(pubdir, "loop.pac")
        with open(pac, "w") as f:
            f.write(PAC)
        os.chmod(pac, 0o644)
        d = L.egressd(settings={"route": "pac " + pac,
                                "pac_copy": os.path.join(pubdir, "copy.js"),
                                "route_timeout": "%ds" % ROUTE_TIMEOUT_S,
                                "route_cache_ttl": "%ds" % CACHE_TTL_S})
        L.grant(d, 0, GRANT)
        check(bounded_wait(lambda: ok_hop(L), 10, step=0.2), "no hop before the faults")
        res.run("helper_hangs", t_hangs, L, d)
        res.run("helper_crashes", t_crashes, L, d)
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
