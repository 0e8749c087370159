#!/usr/bin/env python3
"""Authority ending at awkward moments, and churn: revocation during a slow forwarded
exchange and during a pending connect; hundreds of grant create/revoke cycles on the same
listener address leave no descriptor behind; idle control clients do not block others;
SIGTERM with a DNS lookup in flight exits cleanly; a second SIGTERM while many sessions
are still answering a refusal exits 0 with every session freed (no LeakSanitizer report
under the sanitizer build); a reload that removes a static listener
stops it accepting."""

import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import netns, proxyclient  # noqa: E402
from labtools.checks import (allowed_tunnel, bounded_wait, check,  # noqa: E402
                             require_binaries, stop_clean)

BLACKHOLE = "198.51.100.99"
ZONE = {
    "ok.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "hole.lab.test": {"A": [BLACKHOLE]},
    "slowdns.lab.test": {"A": [lab.HTTP_ORIGIN], "delay": 3.0, "ttl": 0},
}
GRANT = ["http://ok.lab.test", "https://ok.lab.test", "https://hole.lab.test",
         "https://slowdns.lab.test"]


def _fds(d):
    return len(os.listdir("/proc/%d/fd" % d.proc.pid))


def t_revoke_during_slow_http(L, d, st):
    g = L.grant(d, 1, GRANT, principal="slow-http")
    s = L.connect_from(1, *L.proxy_of(1))
    try:
        s.sendall(b"GET http://ok.lab.test/slow?s=10 HTTP/1.1\r\nHost: ok.lab.test\r\n\r\n")
        time.sleep(0.5)
        t0 = time.monotonic()
        check(d.grant_revoke(g["grant_id"]).get("ok"), "revoke")
        w = proxyclient.wait_closed(s, 4)
        check(w is not None and time.monotonic() - t0 <= 1.5,
              "forwarded exchange outlived its grant by %s s" % w)
    finally:
        s.close()


def t_revoke_during_connect(L, d, st):
    g = L.grant(d, 1, GRANT, principal="pending-connect")
    out = []
    th = threading.Thread(target=lambda: out.append(L.connect(1, "hole.lab.test:443",
                                                              timeout=10)))
    th.start()
    time.sleep(0.5)   # egressd is now waiting for the blackholed SYN
    t0 = time.monotonic()
    check(d.grant_revoke(g["grant_id"]).get("ok"), "revoke")
    th.join(timeout=10)
    check(out and out[0].status != 200, "tunnel after revocation: %r" % out)
    check(time.monotonic() - t0 <= 1.5, "pending connect outlived its grant")
    out[0].close()


def t_grant_churn_no_leak(L, d, st):
    w = L.workers[0]
    g = L.grant(d, 0, GRANT, port=3160, principal="churn")
    d.grant_revoke(g["grant_id"])
    base = _fds(d)
    for i in range(150):
        g = d.grant_create("churn-%d" % i, ["https://ok.lab.test"], w.listen(3160),
                           w.host_if, lifetime_s=60)
        if i % 10 == 0:
            r = L.connect(0, "ok.lab.test:443", proxy=(w.host_addr, 3160))
            allowed_tunnel(r)
            r.close()
        rep = d.grant_revoke(g["grant_id"])
        check(rep.get("ok"), "revoke %d: %s" % (i, rep))
    check(bounded_wait(lambda: _fds(d) <= base + 2, 5, step=0.1),
          "descriptors grew from %d to %d over 150 grants" % (base, _fds(d)))
    check(bounded_wait(lambda: d.status().get("grants") == st["grants"], 3),
          "grant count %s" % d.status())


def t_idle_control_clients(L, d, st):
    idle = []
    try:
        for _ in range(8):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(d.control_path)
            idle.append(s)
        idle[0].sendall(b'{"op": "sta')   # half a request, never finished
        t0 = time.monotonic()
        r = d.control({"op": "status"}, timeout=3)
        check(r.get("ok") and time.monotonic() - t0 < 1, "status behind idle clients: %s" % r)
    finally:
        for s in idle:
            s.close()


def t_static_listener_removed(L, d, st):
    port = 3170
    d.listeners["svc"] = {"listen": "127.0.0.1:%d" % port, "grant": "svc"}
    d.grants["svc"] = {"allow": ["https://ok.lab.test"], "lifetime": "0"}
    d.write_config()
    d.reload()

    def up():
        try:
            L.connect_from("host", "127.0.0.1", port, timeout=1).close()
            return True
        except OSError:
            return False
    check(bounded_wait(up, 5, step=0.1), "static listener not started by reload")
    del d.listeners["svc"]
    del d.grants["svc"]
    d.write_config()
    d.reload()
    check(bounded_wait(lambda: not up(), 5, step=0.1), "removed listener still accepting")


def t_sigterm_with_dns_in_flight(L, d0, st):
    d = L.egressd(settings={"dns_timeout": "5s", "drain_timeout": "1s"})
    L.grant(d, 0, GRANT, port=3180)
    out = []
    th = threading.Thread(target=lambda: out.append(
        L.connect(0, "slowdns.lab.test:443", proxy=L.proxy_of(0, 3180), timeout=10)))
    th.start()
    check(bounded_wait(lambda: L.zone.query_log("slowdns.lab.test"), 3), "no lookup")
    t0 = time.monotonic()
    d.signal(15)
    try:
        d.proc.wait(timeout=8)
    except Exception:
        pass
    th.join(timeout=10)
    check(d.proc.returncode == 0, "exit status %s after %.1fs" % (d.proc.returncode,
                                                                time.monotonic() - t0))
    check(out and out[0].status != 200, "hop allowed during shutdown: %r" % out)
    stop_clean(d)


def t_second_sigterm_during_refusals(L, d0, st):
    """Refused sessions wait (half-closed, up to their refusal timer) for the client to
    close; a second SIGTERM ends the loop before that. Shutdown must free them."""
    d = L.egressd(settings={"drain_timeout": "20s"})
    L.grant(d, 0, GRANT, port=3190)
    socks = []
    try:
        for _ in range(40):
            s = L.connect_from(0, *L.proxy_of(0, 3190))
            s.sendall(b"CONNECT denied.lab.test:443 HTTP/1.1\r\nHost: denied.lab.test:443"
                      b"\r\n\r\n")
            socks.append(s)
        for s in socks:          # every refusal is out: the sessions are all refusing
            s.settimeout(5)
            buf = b""
            while b"\r\n\r\n" not in buf and len(buf) < 4096:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
            check(buf.startswith(b"HTTP/1.1 403"), "refusal %r" % buf[:80])
        d.signal(15)
        time.sleep(0.1)
        check(d.alive(), "exited on the first SIGTERM with refusals draining")
        d.signal(15)
        try:
            d.proc.wait(timeout=8)
        except Exception:
            pass
        check(d.proc.returncode == 0, "exit status %s:\n%s" % (d.proc.returncode,
                                                                d.stderr_tail()))
        check("second termination signal" in d.stderr_text(), d.stderr_tail())
    finally:
        for s in socks:
            s.close()
    stop_clean(d)


def main():
    lab.require_root()
    require_binaries("egressd")
    res = Results()
    with Lab() as L:
        netns.ip("-n", L.ns_inet, "route", "add", "blackhole", BLACKHOLE + "/32")
        L.set_zone(ZONE)
        d = L.egressd(settings={"connect_timeout": "8s"})
        st = {"grants": 0}
        for name, fn in (("revoke_during_slow_http", t_revoke_during_slow_http),
                         ("revoke_during_pending_connect", t_revoke_during_connect),
                         ("grant_churn_no_descriptor_leak", t_grant_churn_no_leak),
                         ("idle_control_clients_do_not_block", t_idle_control_clients),
                         ("reload_removes_static_listener", t_static_listener_removed),
                         ("sigterm_with_dns_in_flight", t_sigterm_with_dns_in_flight),
                         ("second_sigterm_during_refusals",
                          t_second_sigterm_during_refusals)):
            res.run(name, fn, L, d, st)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
