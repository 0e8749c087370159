#!/usr/bin/env python3
"""Fault tests (docs/SECURITY.md, "What the fault tests prove"): network faults around egressd. Each check states its expectation.

- origin_dies_mid_tunnel: an origin resets its connection in the middle of a tunnel; that
  tunnel closes, its close record names a reason (upstream_closed or io_error), and another
  principal's tunnel opened before the fault still echoes (others unaffected).
- proxy_dies_mid_tunnel: with route = proxy (squid), the proxy gets SIGKILL during a
  tunnel's download: the tunnel closes with a close record naming a reason, egressd answers
  the next hop at once with a 5xx reason (no direct fallback, no origin connection), and
  hops work again once the proxy is back.
- dns_stops_answering: a name answered a moment ago (TTL 0) stops being answered; the next
  hop is refused 504 dns_timeout within dns_timeout x dns_attempts (+ slack), with a deny
  record, and no origin or trap sees a connection (no fallback resolver, no direct try).
- slowloris: a client trickling its request head one byte every 300 ms gets 408
  header_timeout when header_timeout (2 s) expires, measured from accept, not per byte;
  another principal is served meanwhile.
- slow_reader_bounded_memory: a client that stops reading a 1 GiB download: egressd's RSS
  does not grow by more than SLOW_READER_RSS_MAX while the origin has far more to send
  (backpressure; nothing is buffered without bound); the tunnel still works afterwards.
  slow_reader_bounded_memory_copy_mode: the same with splice = off, through a tunnel and
  as a forwarded plain-HTTP GET.
- idle_flood_one_principal: IDLE_CONNS idle connections from one principal whose grant
  allows PRINCIPAL_CONNS: the connections past the limit get 503 limit_principal at once,
  and meanwhile another principal's CONNECT succeeds within NORMAL_LATENCY_S.
- fd_exhaustion: an egressd of its own is started under `prlimit --nofile=N:N`, N a few
  fds (FD_SPARE) above what a probe egressd with the same settings uses after start-up, a
  grant and one CONNECT (egressd drops to an unprivileged uid after start-up, and the
  kernel refuses `prlimit --pid` on a process of another uid even to root, so the limit is
  set from the beginning). 40 idle clients exhaust it: connections past it are not
  accepted (the listener pauses, logs the back-off), egressd does not crash and its control
  socket answers, and once the clients go away a new CONNECT succeeds (accept recovers);
  it drains and exits 0.

The number of idle connections: 10,000 are attempted. This machine session has a hard limit
of 20,000 fds per process; the test process holds at most PRINCIPAL_CONNS + a few at once
(refused sockets are closed as soon as their 503 arrives), egressd at most PRINCIPAL_CONNS.
"""

import os
import resource
import select
import signal
import socket
import subprocess
import sys
import struct
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import netns, proxies, proxyclient  # noqa: E402
from labtools.checks import (allowed_tunnel, bounded_wait, check, refused,  # noqa: E402
                             require_binaries, stop_clean, wait_decision)

DIE_ADDR = "198.51.100.20"
ZONE = {
    "echo.lab.test": {"A": [lab.ECHO_ORIGIN]},
    "web.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "die.lab.test": {"A": [DIE_ADDR]},
    "flip.lab.test": {"A": [lab.HTTP_ORIGIN], "ttl": 0},
}
GRANT = ["tcp://echo.lab.test:7", "tcp://die.lab.test:7", "https://web.lab.test",
         "https://flip.lab.test"]
DNS_TIMEOUT_S = 1.0
DNS_ATTEMPTS = 2
HEADER_TIMEOUT_S = 2.0
IDLE_CONNS = 10000
PRINCIPAL_CONNS = 1500
NORMAL_LATENCY_S = 1.0
SLOW_READER_RSS_MAX = 48 << 20


DIE = threading.Event()


def dying_echo(svc, c, peer):
    """An echo origin that dies abruptly (RST) when DIE is set."""
    c.settimeout(0.05)
    while not svc._stop.is_set():
        if DIE.is_set():
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
            return
        try:
            d = c.recv(65536)
        except socket.timeout:
            continue
        if not d:
            return
        c.sendall(d)


def rss_of(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def timed_connect(L, who, target):
    t0 = time.monotonic()
    r = L.connect(who, target, timeout=10)
    return r, time.monotonic() - t0


def t_origin_dies(L, d):
    start = len(d.decisions())
    a = L.connect(0, "die.lab.test:7")
    allowed_tunnel(a)
    b = L.connect(1, "echo.lab.test:7")
    allowed_tunnel(b)
    try:
        check(proxyclient.tunnel_echo(a.sock, b"before") == b"before", "die tunnel echo")
        check(proxyclient.tunnel_echo(b.sock, b"before") == b"before", "other tunnel echo")
        svc = L.services["die7"]
        with svc._lock:
            n = len(svc._conns)
        check(n == 1, "the dying origin holds %d connections" % n)
        DIE.set()  # the handler resets its connection (RST, not FIN)
        check(proxyclient.wait_closed(a.sock, 5), "the dead origin's tunnel stayed open")
        rec = d.wait_record(lambda r: r.get("event") == "close"
                            and r.get("dest") == "die.lab.test:7", timeout=5, start=start)
        check(rec is not None, "no close record for the dead origin's tunnel")
        check(rec.get("reason") in ("upstream_closed", "io_error"),
              "close reason %r" % rec.get("reason"))
        # The other principal's tunnel is unaffected.
        check(proxyclient.tunnel_echo(b.sock, b"after") == b"after",
              "the other tunnel stopped echoing")
        c = L.connect(0, "echo.lab.test:7")
        allowed_tunnel(c)
        c.close()
    finally:
        a.close()
        b.close()


def t_proxy_dies(L, top_d):
    """route = proxy (a real squid): the proxy is killed (SIGKILL) in the middle of a
    tunnel's download; that tunnel closes with a close record naming a reason; egressd is
    still alive and answers the next hop at once with a 5xx reason (the proxy is gone, never
    a direct fallback, no origin connection); once the proxy is back, hops work again."""
    sq = proxies.Squid(L).start()
    d = L.egressd(settings={"route": "proxy " + sq.url})
    try:
        L.grant(d, 0, ["https://web.lab.test"], principal="p-viaproxy", port=3130)
        start = len(d.decisions())
        t = L.connect(0, "web.lab.test:443", proxy=L.proxy_of(0, 3130))
        allowed_tunnel(t)
        try:
            t.sock.sendall(b"GET /bytes/1073741824 HTTP/1.1\r\nHost: web.lab.test\r\n\r\n")
            t.sock.settimeout(5)
            check(t.sock.recv(65536), "no bytes through the proxy")
            os.kill(sq.proc.pid, signal.SIGKILL)
            sq.proc.wait(timeout=10)

            def closed():
                try:
                    while True:
                        b = t.sock.recv(1 << 20)
                        if not b:
                            return True
                except socket.timeout:
                    return False
                except OSError:
                    return True
            check(bounded_wait(closed, 10, step=0.1), "the tunnel outlived its proxy")
        finally:
            t.close()
        rec = d.wait_record(lambda r: r.get("event") == "close"
                            and r.get("dest") == "web.lab.test:443", timeout=5, start=start)
        check(rec is not None and rec.get("reason") in ("upstream_closed", "io_error"),
              "close record %s" % rec)
        with L.no_origin_connection():
            t0 = time.monotonic()
            r = L.connect(0, "web.lab.test:443", proxy=L.proxy_of(0, 3130))
            r.close()
        check(r.status in (502, 503, 504) and r.egress_reason, "with the proxy dead: %r" % r)
        check(time.monotonic() - t0 < 12, "answer took %.1fs" % (time.monotonic() - t0))
        print("  proxy dead: %d %s" % (r.status, r.egress_reason))
        check(d.alive() and d.status().get("ok"), "egressd not serving")
        sq.start()
        r = L.connect(0, "web.lab.test:443", proxy=L.proxy_of(0, 3130))
        allowed_tunnel(r)
        r.close()
    finally:
        stop_clean(d)
        sq.stop()


def t_dns_stops(L, d):
    r = L.connect(0, "flip.lab.test:443")
    allowed_tunnel(r)
    r.close()
    L.update_zone({"flip.lab.test": {"drop": True}})
    start = len(d.decisions())
    with L.no_origin_connection():
        r, took = timed_connect(L, 0, "flip.lab.test:443")
    refused(r, 504, "dns_timeout")
    bound = DNS_TIMEOUT_S * DNS_ATTEMPTS + 1.5
    check(took <= bound, "dns_timeout after %.2fs (bound %.1fs)" % (took, bound))
    rec = wait_decision(d, lambda x: x.get("dest") == "flip.lab.test:443", start=start)
    check(rec.get("verdict") == "deny" and rec.get("reason") == "dns_timeout", "record %s" % rec)
    L.update_zone({"flip.lab.test": {"A": [lab.HTTP_ORIGIN], "ttl": 0}})


def t_slowloris(L, d):
    s = L.connect_from(0, *L.proxy_of(0))
    head = b"CONNECT echo.lab.test:7 HTTP/1.1\r\nHost: echo.lab.test:7\r\n"
    t0 = time.monotonic()
    got = b""
    try:
        s.setblocking(False)
        i = 0
        while time.monotonic() - t0 < HEADER_TIMEOUT_S + 5:
            if i < len(head):
                try:
                    s.send(head[i:i + 1])
                except OSError:
                    break
                i += 1
            r, _, _ = select.select([s], [], [], 0.3)
            if r:
                try:
                    chunk = s.recv(4096)
                except OSError:
                    break
                if not chunk:
                    break
                got += chunk
                if b"\r\n\r\n" in got:
                    break
        took = time.monotonic() - t0
    finally:
        s.close()
    check(got.startswith(b"HTTP/1.1 408"), "slowloris answer %r" % got[:200])
    check(b"header_timeout" in got, "no header_timeout reason in %r" % got[:300])
    check(HEADER_TIMEOUT_S - 0.2 <= took <= HEADER_TIMEOUT_S + 1.5,
          "408 after %.2fs (header_timeout %.1fs)" % (took, HEADER_TIMEOUT_S))
    r, lat = timed_connect(L, 1, "echo.lab.test:7")
    allowed_tunnel(r)
    r.close()
    check(lat < NORMAL_LATENCY_S, "other principal latency %.2fs" % lat)


def t_slow_reader(L, d):
    pid = d.proc.pid
    t = L.connect(0, "web.lab.test:443")
    allowed_tunnel(t)
    try:
        s = t.sock
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.sendall(b"GET /bytes/1073741824 HTTP/1.1\r\nHost: web.lab.test\r\n\r\n")
        # Let the pipes fill, then sample RSS while the client reads nothing.
        time.sleep(1.0)
        base = rss_of(pid)
        peak = base
        for _ in range(20):
            time.sleep(0.2)
            peak = max(peak, rss_of(pid))
        check(peak - base <= SLOW_READER_RSS_MAX,
              "egressd RSS grew %d KiB while the client did not read"
              % ((peak - base) // 1024))
        # The tunnel is stalled, not broken: reading resumes the flow.
        s.settimeout(5)
        n = 0
        deadline = time.monotonic() + 5
        while n < (4 << 20) and time.monotonic() < deadline:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            n += len(chunk)
        check(n >= (4 << 20), "read only %d bytes after the stall" % n)
        print("  slow reader: RSS base %d KiB, peak %d KiB" % (base // 1024, peak // 1024))
    finally:
        t.close()
    check(d.alive(), "egressd died")


def t_slow_reader_copy(L, d):
    """The same with splice off (bytes pass through user-space buffers), once as a tunnel
    and once as a forwarded plain-HTTP GET (egressd parses the response head)."""
    pid = d.proc.pid
    for mode in ("tunnel", "forward"):
        if mode == "tunnel":
            t = L.connect(1, "web.lab.test:443")
            allowed_tunnel(t)
            s = t.sock
            s.sendall(b"GET /bytes/1073741824 HTTP/1.1\r\nHost: web.lab.test\r\n\r\n")
        else:
            t = None
            s = L.connect_from(1, *L.proxy_of(1))
            s.sendall(b"GET http://web.lab.test/bytes/1073741824 HTTP/1.1\r\n"
                      b"Host: web.lab.test\r\n\r\n")
        try:
            time.sleep(1.0)
            base = rss_of(pid)
            peak = base
            for _ in range(15):
                time.sleep(0.2)
                peak = max(peak, rss_of(pid))
            print("  slow reader (%s, splice off): RSS base %d KiB, peak %d KiB"
                  % (mode, base // 1024, peak // 1024))
            check(peak - base <= SLOW_READER_RSS_MAX, "%s: RSS grew %d KiB"
                  % (mode, (peak - base) // 1024))
            s.settimeout(5)
            got = s.recv(65536)
            check(got, "%s: nothing to read after the stall" % mode)
        finally:
            if t is not None:
                t.close()
            else:
                s.close()
    check(d.alive(), "egressd died")


def _open_idle(ns, addr, port, n, out):
    """Create n connections to addr:port from inside ns (one setns for all) and read their
    answers: refused ones (a 503 arrives) are closed at once, the rest are kept idle."""
    kept, refused_n, other = [], 0, []
    pending = []
    with netns.entered(ns):
        for i in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect((addr, port))
            except BlockingIOError:
                pass
            except OSError as e:
                other.append("connect %d: %s" % (i, e))
                s.close()
                continue
            pending.append(s)
            if len(pending) >= 200:
                refused_n += _settle(pending, kept, other)
                pending = []
        refused_n += _settle(pending, kept, other)
        # Late answers (egressd was busy): re-classify the silent ones once more.
        late = kept[:]
        del kept[:]
        refused_n += _settle(late, kept, other, wait=5.0, grace=2.0)
    out["kept"] = kept
    out["refused"] = refused_n
    out["other"] = other


def _settle(socks, kept, other, wait=2.0, grace=0.5):
    """Classify fresh sockets: a 503 limit_principal answer (counted, closed) or silence
    (kept, idle)."""
    refused_n = 0
    deadline = time.monotonic() + wait
    left = list(socks)
    answers = {}
    t0 = time.monotonic()
    while left and time.monotonic() < deadline:
        p = select.poll()
        byfd = {}
        for s in left:
            p.register(s.fileno(), select.POLLIN)
            byfd[s.fileno()] = s
        ev = p.poll(50)
        if not ev:
            # silence so far: after a short grace the rest are idle accepted connections
            if time.monotonic() > t0 + grace:
                break
            continue
        for fd, _e in ev:
            s = byfd[fd]
            try:
                data = s.recv(4096)
            except OSError as e:
                data = b""
                other.append(str(e))
            answers[s] = answers.get(s, b"") + data
            if not data or b"\r\n\r\n" in answers[s]:
                left.remove(s)
    for s in socks:
        a = answers.get(s)
        if a is None and s in left:
            kept.append(s)
        elif a and a.startswith(b"HTTP/1.1 503") and b"limit_principal" in a:
            refused_n += 1
            s.close()
        else:
            other.append((a or b"")[:80])
            s.close()
    return refused_n


def t_idle_flood(L, d):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    check(hard >= PRINCIPAL_CONNS + 1000, "fd hard limit %d too low" % hard)
    host, port = L.proxy_of(2)
    out = {}
    th = threading.Thread(target=_open_idle, args=(L.workers[2].ns, host, port, IDLE_CONNS, out))
    th.start()
    lats = []
    try:
        # While the flood runs, the other principal is served within normal latency.
        while th.is_alive():
            r, lat = timed_connect(L, 1, "echo.lab.test:7")
            allowed_tunnel(r)
            r.close()
            lats.append(lat)
            time.sleep(0.1)
        th.join(timeout=300)
        kept = out.get("kept", [])
        print("  idle flood: %d attempted, %d kept idle, %d refused 503 limit_principal, "
              "%d other; other principal: %d CONNECTs, max latency %.3fs"
              % (IDLE_CONNS, len(kept), out.get("refused", 0), len(out.get("other", [])),
                 len(lats), max(lats or [0])))
        check(len(kept) <= PRINCIPAL_CONNS + 1, "%d idle connections kept (limit %d)"
              % (len(kept), PRINCIPAL_CONNS))
        check(len(kept) >= PRINCIPAL_CONNS - 5, "only %d idle connections were accepted"
              % len(kept))
        check(out.get("refused", 0) >= IDLE_CONNS - PRINCIPAL_CONNS - 50,
              "only %d refused with limit_principal; other: %s"
              % (out.get("refused", 0), out.get("other", [])[:5]))
        # With all of them still open, the other principal still gets normal latency.
        for _ in range(5):
            r, lat = timed_connect(L, 1, "echo.lab.test:7")
            allowed_tunnel(r)
            r.close()
            lats.append(lat)
        check(max(lats) < NORMAL_LATENCY_S, "other principal latency up to %.2fs"
              % max(lats))
    finally:
        th.join(timeout=300)
        for s in out.get("kept", []):
            s.close()
    check(d.alive(), "egressd died")


FD_PORT = 3130
FD_SPARE = 12


def fd_egressd(L, limit=None):
    """An egressd with one grant on worker 0 (FD_PORT) that has made one CONNECT (DNS and
    upstream sockets opened once), under prlimit --nofile=limit:limit when limit is set."""
    d = L.egressd(settings={"header_timeout": "%ds" % HEADER_TIMEOUT_S}, start=False)
    if limit is not None:
        d.wrapper = ["prlimit", "--nofile=%d:%d" % (limit, limit)]
    d.start()
    L.grant(d, 0, GRANT, principal="p-fd%s" % ("" if limit is None else "l"), port=FD_PORT)
    r = L.connect(0, "echo.lab.test:7", proxy=L.proxy_of(0, FD_PORT))
    allowed_tunnel(r)
    r.close()
    return d


def t_fd_exhaustion(L, _shared):
    probe = fd_egressd(L)
    try:
        time.sleep(0.5)   # the closed tunnel's fds are gone
        used = nfds(probe.proc.pid)
    finally:
        stop_clean(probe)
    limit = used + FD_SPARE
    d = fd_egressd(L, limit)
    pid = d.proc.pid
    with open("/proc/%d/limits" % pid) as f:
        lim = [ln for ln in f if ln.startswith("Max open files")]
    check(lim and lim[0].split()[3:5] == [str(limit)] * 2, "limit not in effect: %s" % lim)
    with open("/proc/%d/status" % pid) as f:
        uids = [ln.split()[1:] for ln in f if ln.startswith("Uid:")][0]
    check("0" not in uids, "egressd kept root: Uid %s" % uids)
    print("  fd_exhaustion: probe used %d fds; RLIMIT_NOFILE %d from the start" % (used, limit))
    before_log = len(d.stderr_text())
    socks = []
    try:
        host, port = L.proxy_of(0, FD_PORT)
        with netns.entered(L.workers[0].ns):
            for _ in range(40):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.settimeout(2)
                s.connect((host, port))  # completes in the kernel backlog
                socks.append(s)
        paused = bounded_wait(lambda: "pausing this listener" in d.stderr_text()[before_log:],
                              5, step=0.1)
        check(paused, "no accept back-off logged: %s" % d.stderr_tail(10))
        check(d.alive(), "egressd died at the fd limit:\n%s" % d.stderr_tail())
        st = d.status()
        check(st.get("ok"), "control socket at the fd limit: %s" % st)
    finally:
        for s in socks:
            s.close()
    # Recovery: the clients went away, their sessions end, accept resumes.
    def served():
        r = L.connect(0, "echo.lab.test:7", proxy=L.proxy_of(0, FD_PORT), timeout=5)
        ok = r.status == 200
        r.close()
        return ok
    check(bounded_wait(served, HEADER_TIMEOUT_S + 8, step=0.3),
          "accept did not recover:\n%s" % d.stderr_tail(10))
    check(d.alive(), "egressd died")
    stop_clean(d)


def main():
    lab.require_root()
    require_binaries("egressd")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    res = Results()
    with Lab(workers=3) as L:
        L.set_zone(ZONE)
        L.add_address(DIE_ADDR)
        L.add_service("die7", DIE_ADDR, 7, kind="echo").handler = dying_echo
        proxies.add_addresses(L, proxies.PROXY_ADDR)
        d = L.egressd(settings={"dns_timeout": "%ds" % DNS_TIMEOUT_S,
                                "dns_attempts": str(DNS_ATTEMPTS),
                                "header_timeout": "%ds" % HEADER_TIMEOUT_S,
                                "max_connections": 8192})
        L.grant(d, 0, GRANT, principal="p-zero", connections=200)
        L.grant(d, 1, GRANT, principal="p-one")
        L.grant(d, 2, GRANT, principal="p-flood", connections=PRINCIPAL_CONNS)
        for name, fn in (("origin_dies_mid_tunnel", t_origin_dies),
                         ("dns_stops_answering", t_dns_stops),
                         ("slowloris", t_slowloris),
                         ("slow_reader_bounded_memory", t_slow_reader),
                         ("fd_exhaustion", t_fd_exhaustion),
                         ("proxy_dies_mid_tunnel", t_proxy_dies)):
            res.run(name, fn, L, d)
        # The idle flood needs idle connections to outlive header_timeout: its own egressd.
        d.stop()
        d2 = L.egressd(settings={"header_timeout": "60s", "max_connections": 8192})
        L.grant(d2, 1, GRANT, principal="p-one")
        L.grant(d2, 2, GRANT, principal="p-flood", connections=PRINCIPAL_CONNS)
        res.run("idle_flood_one_principal", t_idle_flood, L, d2)
        res.run("egressd_clean_exit", stop_clean, d2)
        d3 = L.egressd(settings={"splice": "off"})
        L.grant(d3, 1, GRANT + ["http://web.lab.test"], principal="p-copy")
        res.run("slow_reader_bounded_memory_copy_mode", t_slow_reader_copy, L, d3)
        res.run("egressd_clean_exit_copy_mode", stop_clean, d3)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
