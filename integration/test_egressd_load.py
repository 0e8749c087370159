#!/usr/bin/env python3
"""Many concurrent tunnels from two principals at once: every byte arrives intact, every
tunnel has its decision and close record with the right principal and byte counts, the
connection counters return to zero, and slow clients holding half a request head do not
stop others from being served."""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxyclient  # noqa: E402
from labtools.checks import bounded_wait, check, require_binaries, stop_clean  # noqa: E402

ZONE = {"echo.lab.test": {"A": [lab.ECHO_ORIGIN]}, "echo2.lab.test": {"A": [lab.ECHO2]},
        "ok.lab.test": {"A": [lab.HTTP_ORIGIN]}}
PER_WORKER = 60
PAYLOAD = 64 * 1024


def _one(L, who, target, errors, sizes):
    try:
        r = L.connect(who, target, timeout=20)
        if r.status != 200:
            errors.append("%s %s: %r" % (who, target, r))
            return
        try:
            data = os.urandom(PAYLOAD)
            got = proxyclient.tunnel_echo(r.sock, data, timeout=20)
            if got != data:
                errors.append("%s: %d of %d bytes back" % (target, len(got), len(data)))
            sizes.append(len(data))
        finally:
            r.close()
    except Exception as e:  # collected and reported by the check below
        errors.append("%s: %s" % (target, e))


def t_concurrent_tunnels(L, d, st):
    start = len(d.decisions())
    errors, sizes = [], []
    threads = []
    for i in range(PER_WORKER):
        for who, tgt in ((0, "echo.lab.test:7"), (1, "echo2.lab.test:7")):
            t = threading.Thread(target=_one, args=(L, who, tgt, errors, sizes))
            t.start()
            threads.append(t)
    deadline = time.monotonic() + 60
    for t in threads:
        t.join(timeout=max(0.1, deadline - time.monotonic()))
    check(not [t for t in threads if t.is_alive()], "clients still running after 60 s")
    check(not errors, "%d failures, first: %s" % (len(errors), errors[:3]))
    n = 2 * PER_WORKER

    def closes():
        c = [r for r in d.decisions()[start:] if r.get("event") == "close"]
        return c if len(c) >= n else None
    cl = bounded_wait(closes, 10, step=0.1)
    check(cl, "close records: %d of %d" % (len([r for r in d.decisions()[start:]
                                                  if r.get("event") == "close"]), n))
    dec = [r for r in d.decisions()[start:] if r.get("event") == "decision"]
    check(len(dec) == n and all(r["verdict"] == "allow" for r in dec), "decisions")
    for r in dec:
        want = "w-one" if r["dest"] == "echo.lab.test:7" else "w-two"
        check(r["principal"] == want, "principal bleed: %s" % r)
    for r in cl:
        check(r["bytes_up"] == PAYLOAD and r["bytes_down"] == PAYLOAD,
              "byte counts %s/%s (bytes from the destination only)"
              % (r["bytes_up"], r["bytes_down"]))
    check(bounded_wait(lambda: d.status().get("connections") == 0, 5, step=0.1),
          "connections not back to 0: %s" % d.status())


def t_slow_clients_do_not_block(L, d, st):
    slow = []
    try:
        for _ in range(40):
            s = L.connect_from(0, *L.proxy_of(0))
            s.sendall(b"CONNECT echo.lab.test:7 HTTP/1.1\r\nHo")
            slow.append(s)
        t0 = time.monotonic()
        r = L.connect(1, "echo2.lab.test:7", timeout=5)
        check(r.status == 200, "served while slow clients wait: %r" % r)
        r.close()
        r = L.http(1, "GET", "http://ok.lab.test/", timeout=5)
        check(r.status == 200 and time.monotonic() - t0 < 3, "%r" % r)
    finally:
        for s in slow:
            s.close()


def main():
    lab.require_root()
    require_binaries("egressd")
    res = Results()
    with Lab() as L:
        L.set_zone(ZONE)
        d = L.egressd(settings={"log_sync": "batch"})
        st = {}
        L.grant(d, 0, ["tcp://echo.lab.test:7"], principal="w-one", connections=200)
        L.grant(d, 1, ["tcp://echo2.lab.test:7", "http://ok.lab.test"], principal="w-two",
                connections=200)
        res.run("concurrent_tunnels_two_principals", t_concurrent_tunnels, L, d, st)
        res.run("slow_clients_do_not_block", t_slow_clients_do_not_block, L, d, st)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
