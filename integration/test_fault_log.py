#!/usr/bin/env python3
"""Fault tests (docs/SECURITY.md, "What the fault tests prove"): the decision log under faults. Each check states its expectation.

- log_disk_full: the decision log lives on a 512 KiB tmpfs mounted under the lab workdir
  (never the real disk), owned by the account egressd drops to (as docs/SECURITY.md sets up
  /var/log/egressd); a filler file takes the rest of the space mid-run. Expect: new hops
  are refused 503 audit_unavailable and no origin sees a connection (never an allow without
  its record); `egressctl log verify` still accepts the chain; after the filler is removed
  hops are allowed again (within the retry interval) and the whole chain verifies.
- log_fails_at_proxy_gate: the same tmpfs, the route an upstream proxy (the lab's
  RecordingProxy, whose own accept log counts connections and request heads) whose name
  answers slowly. A hop is authorized and waits for the proxy's address; meanwhile the
  disk fills and denied hops make the log fail. The hop then connects to the proxy and
  must write its allow record before the CONNECT line: it cannot, so the hop is refused
  503 audit_unavailable and the proxy saw a connection that sent nothing (no request head,
  no host name). Every CONNECT head the proxy did receive has an allow record on disk.
- close_held_at_stop_*: a tunnel allowed before the disk filled closes while the log is
  failed (its close record is held). With the space back just before SIGTERM (no hop
  probes the log in between), the stop writes that close before its stop record, stamped
  after the space came back; with the disk still full, egressd's log names the lost close
  (its hop) and counts it (labtools/logfault.py, shared with test_model_connection).
- revoked_with_allow_in_flight: log_sync = always, egressd started with the lab's sync gate
  (integration/syncgate.c, LD_PRELOAD: fdatasync waits while a file exists). A CONNECT's
  allow record is written, its sync held (its callback due, no 200 yet), and the grant is
  revoked. Expect: no 200; the hop ends with its close record
  (grant_revoked) after the allow, never a second decision; and the metrics count what the
  log holds: that allow (one per decision record, though its callback never ran) and its
  close.
- kill9_under_load: log_sync = always, four clients open tunnels in a loop; egressd gets
  SIGKILL in the middle. Expect: every tunnel that received 200 has its allow record on disk
  (matched by the client's address:port); `egressctl log verify` accepts the file, or
  reports only a torn last line (a torn tail is appended when the kill left none, so the
  path is always exercised: `egressctl log verify` reports `truncated`); a restart on the
  same log reports the torn tail, cuts it away, continues the chain, and the log verifies
  again with the new records; the service works.
"""

import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import egressd as ed  # noqa: E402
from labtools import logfault, proxies  # noqa: E402
from labtools.checks import (allowed_tunnel, bounded_wait, check, refused,  # noqa: E402
                             require_binaries, stop_clean)

ZONE = {"echo.lab.test": {"A": [lab.ECHO_ORIGIN]}, "web.lab.test": {"A": [lab.HTTP_ORIGIN]}}
ALLOW = ["tcp://echo.lab.test:7", "https://web.lab.test"]


def verify(d, path=None):
    rc, out, err = d.egressctl("log", "verify", path or d.log_path)
    return rc, (out + err).strip()


def static(L, n=1):
    """Static listeners (they survive a restart, unlike control-socket grants)."""
    listeners, grants = {}, {}
    for i in range(n):
        w = L.workers[i]
        listeners["w%d" % i] = {"listen": w.listen(), "grant": "g%d" % i}
        grants["g%d" % i] = {"allow": ALLOW, "connections": 256}
    return listeners, grants


def t_disk_full(L):
    mnt = logfault.logfs(L, "logfs")
    d = None
    try:
        # egressd writes here after its drop (the log directory of an operator's setup).
        ed.give_to_run_user(mnt, 0o750)
        listeners, grants = static(L)
        d = L.egressd(settings={"decision_log": os.path.join(mnt, "decisions.jsonl")},
                      listeners=listeners, grants=grants)
        for _ in range(3):
            r = L.connect(0, "echo.lab.test:7")
            allowed_tunnel(r)
            r.close()
        # Fill the file system (bounded: it is 512 KiB).
        filler = os.path.join(mnt, "filler")
        fill(filler)
        time.sleep(0.3)
        # The log file's last tmpfs page may still hold a few records: hops may be allowed
        # until it is full, each with its record on disk. After the first refusal, every
        # hop is refused audit_unavailable and no origin sees a connection.
        allowed_clients = []
        first = None
        for _ in range(40):
            r = L.connect(0, "echo.lab.test:7")
            if r.status == 200:
                allowed_clients.append("%s:%d" % r.sock.getsockname()[:2])
            r.close()
            if r.status != 200:
                first = r
                break
        check(first is not None, "40 hops allowed with the log's disk full")
        refused(first, 503, "audit_unavailable")
        with L.no_origin_connection():
            for _ in range(3):
                r = L.connect(0, "echo.lab.test:7")
                r.close()
                refused(r, 503, "audit_unavailable")
        on_disk = {x.get("client") for x in d.decisions() if x.get("verdict") == "allow"}
        lost = [c for c in allowed_clients if c not in on_disk]
        check(not lost, "allowed with the disk full but no record on disk: %s" % lost)
        print("  disk full: %d hops allowed into the last page, then audit_unavailable"
              % len(allowed_clients))
        rc, msg = verify(d)
        check(rc == 0, "chain not verifiable while the disk is full (%d): %s" % (rc, msg))
        check(d.alive(), "egressd died on ENOSPC:\n%s" % d.stderr_tail())
        os.unlink(filler)
        # More than the retry interval (1 s) after the space returned, the very first hop
        # is the log's probe: it is allowed once its record is on disk, not refused for a
        # failure that is over.
        time.sleep(1.3)
        r = L.connect(0, "echo.lab.test:7")
        r.close()
        check(r.status == 200, "first hop after the disk recovered: %s %s\n%s"
              % (r.status, getattr(r, "egress_reason", None), d.stderr_tail(10)))

        def resumed():
            r = L.connect(0, "echo.lab.test:7")
            r.close()
            return r.status == 200
        check(bounded_wait(resumed, 10, step=0.3), "service did not resume after space "
              "returned:\n%s" % d.stderr_tail(10))
        stop_clean(d)
        rc, msg = verify(d)
        check(rc == 0, "chain not verifiable after recovery (%d): %s" % (rc, msg))
        print("  disk full: %s" % msg.splitlines()[-1] if msg else "")
    finally:
        if d is not None and d.alive():
            d.stop()
        logfault.umount(mnt)


REC_ADDR = "203.0.113.33"


def log_writable(d):
    """The decision log's state as egressd reports it (control socket status)."""
    st = d.status()
    for k in ("decision_log", "log", "dlog"):
        if isinstance(st.get(k), dict) and "writable" in st[k]:
            return st[k]["writable"]
    raise AssertionError("no decision-log state in status: %s" % st)


def fill(path):
    """Take the rest of a (small, bounded) tmpfs."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(1024):  # bounded: 512 KiB / 512 bytes
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)


def t_log_fails_at_proxy_gate(L):
    mnt = logfault.logfs(L, "logfs2")
    d = None
    rp = proxies.RecordingProxy(L, REC_ADDR).start()
    try:
        ed.give_to_run_user(mnt, 0o750)
        listeners, grants = static(L)
        # The proxy's name answers slowly (no caching): a hop waits there, after its
        # authorization and before the gate, while the test breaks the log.
        L.update_zone({"rec.lab.test": {"A": [REC_ADDR], "ttl": 0, "delay": 2.5}})
        d = L.egressd(settings={"decision_log": os.path.join(mnt, "decisions.jsonl"),
                                "route": "proxy http://rec.lab.test:3128",
                                "dns_timeout": "6s", "upstream_timeout": "10s"},
                      listeners=listeners, grants=grants)
        r = L.connect(0, "web.lab.test:443", timeout=15)
        allowed_tunnel(r)
        r.close()
        check(len(rp.heads) == 1 and rp.heads[0].startswith(b"CONNECT web.lab.test:443 "),
              "proxy heads %r" % rp.heads)
        acc0, heads0, silent0 = rp.accepted, len(rp.heads), rp.silent
        got = []
        t = threading.Thread(target=lambda: got.append(
            L.connect(0, "web.lab.test:443", timeout=20)), daemon=True)
        t.start()
        time.sleep(0.5)   # the hop is authorized and waits for the proxy's address
        filler = os.path.join(mnt, "filler")
        fill(filler)
        # denied hops write deny records until the log fails (the last page's slack used)
        failed = False
        for _ in range(60):
            r = L.connect(0, "denied.lab.test:443")
            r.close()
            refused(r, 403, "not_granted")
            if not log_writable(d):
                failed = True
                break
        check(failed, "the log never failed with its disk full")
        t.join(timeout=20)
        check(got, "the waiting hop never finished")
        r = got[0]
        r.close()
        # it reached the proxy gate, its allow record could not be written: refused, and
        # the proxy saw a connection that sent nothing
        refused(r, 503, "audit_unavailable")
        check(bounded_wait(lambda: rp.silent > silent0, 3, step=0.1),
              "the hop never reached the proxy gate (accepted %d -> %d, silent %d -> %d)"
              % (acc0, rp.accepted, silent0, rp.silent))
        check(len(rp.heads) == heads0, "the proxy received a request without an allow "
              "record: %r" % rp.heads[heads0:])
        # the proxy's own log against the decision log: every CONNECT it received belongs
        # to an allow record on disk
        allows = [x for x in d.decisions() if x.get("event") == "decision" and
                  x.get("verdict") == "allow" and x.get("dest") == "web.lab.test:443"]
        check(len(rp.heads) <= len(allows), "%d CONNECT heads at the proxy, %d allow records"
              % (len(rp.heads), len(allows)))
        os.unlink(filler)
        check(d.alive(), "egressd died:\n%s" % d.stderr_tail())
        stop_clean(d)
        rc, msg = verify(d)
        check(rc == 0, "chain not verifiable (%d): %s" % (rc, msg))
    finally:
        rp.stop()
        if d is not None and d.alive():
            d.stop()
        logfault.umount(mnt)


def _load(L, who, stop, got, errors):
    while not stop.is_set():
        try:
            r = L.connect(who, "echo.lab.test:7", timeout=5)
        except OSError:
            continue
        if r.status == 200:
            try:
                got.append("%s:%d" % r.sock.getsockname()[:2])
            except OSError as e:
                errors.append(str(e))
        r.close()


def t_kill9_under_load(L):
    listeners, grants = static(L, 2)
    d = L.egressd(settings={"log_sync": "always"}, listeners=listeners, grants=grants)
    stop = threading.Event()
    got, errors = [], []
    ths = [threading.Thread(target=_load, args=(L, who, stop, got, errors))
           for who in (0, 0, 1, 1)]
    for t in ths:
        t.start()
    try:
        check(bounded_wait(lambda: len(got) >= 40, 20, step=0.05), "no load: %d" % len(got))
        d.signal(9)
        d.proc.wait(timeout=10)
    finally:
        stop.set()
        for t in ths:
            t.join(timeout=20)
    allowed = set()
    torn = None
    with open(d.log_path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] != b"":
        torn = lines[-1]
    import json
    for ln in lines:
        try:
            rec = json.loads(ln)
        except ValueError:
            continue
        if rec.get("event") == "decision" and rec.get("verdict") == "allow":
            allowed.add(rec.get("client"))
    missing = [c for c in got if c not in allowed]
    print("  kill -9: %d tunnels got 200, %d allow records, torn tail: %s"
          % (len(got), len(allowed), "yes" if torn else "no"))
    check(not missing, "%d tunnels got 200 without an allow record on disk: %s"
          % (len(missing), missing[:5]))
    rc, msg = verify(d)
    if torn is None:
        check(rc == 0, "log after kill -9 does not verify (%d): %s" % (rc, msg))
    else:
        check(rc != 0 and ("torn" in msg or "truncat" in msg or "incomplete" in msg),
              "torn tail not reported (%d): %s" % (rc, msg))
    # The torn tail a crash inside write() leaves (never acknowledged to any client):
    # make one if the kill did not, so that detection and repair are always exercised.
    if torn is None:
        with open(d.log_path, "ab") as f:
            f.write(b'{"v":1,"time":"2026-11-30T00:00:00.000000Z","seq":')
        rc, msg = verify(d)
        check(rc != 0 and "truncated" in msg, "torn tail not reported (%d): %s" % (rc, msg))
    # Restart on the same log: the torn tail is cut away with a warning, the chain goes on.
    err_before = len(d.stderr_text())
    n_before = len([x for x in d.decisions() if "_unparsed" not in x])
    d.start()
    check("torn last line" in d.stderr_text()[err_before:],
          "restart did not report the torn tail:\n%s" % d.stderr_tail(5))
    r = L.connect(0, "echo.lab.test:7")
    allowed_tunnel(r)
    r.close()
    # The allow record of that hop (its close record may already follow it).
    check(d.wait_record(lambda x: x.get("verdict") == "allow", timeout=5, start=n_before),
          "no record after restart: %s\n%s" % (d.decisions()[-2:], d.stderr_tail(10)))
    stop_clean(d)
    rc, msg = verify(d)
    check(rc == 0, "log after restart does not verify (%d): %s" % (rc, msg))


METRICS_PORT = 9466


def metric(txt, name):
    """The value of the metric line that starts with name (0 when absent)."""
    for ln in txt.splitlines():
        if ln.startswith(name + " "):
            return int(ln.rsplit(" ", 1)[1])
    return 0


def t_revoked_with_allow_in_flight(L):
    """A hop revoked while its allow record is on its way: written, its sync held by the
    sync gate, so its callback (which counted the allow before) never runs. The hop ends
    with its close; the metrics count the allow that is on disk and its close."""
    gatelib = os.path.join(ed.binary_dir(), "integration", "libegress_syncgate.so")
    check(os.path.exists(gatelib), "the sync gate is not built: %s" % gatelib)
    gate = os.path.join(L.workdir, "syncgate-held")
    asan = os.environ.get("ASAN_OPTIONS", "")
    # LD_PRELOAD puts the gate before the sanitizer runtime (ASan builds): allowed here
    env = {"LD_PRELOAD": gatelib, "EGRESS_SYNCGATE": gate,
           "ASAN_OPTIONS": (asan + ":" if asan else "") + "verify_asan_link_order=0"}
    d = L.egressd(settings={"log_sync": "always",
                            "metrics_listen": "127.0.0.1:%d" % METRICS_PORT},
                  extra_env=env)
    s = first = None
    try:
        g = L.grant(d, 0, ALLOW)
        L.grant(d, 1, ALLOW)
        # A first tunnel, on the other grant, held open: its 200 comes once its allow
        # record is synced, so every record before it is synced too and nothing is on
        # its way when the gate closes (the grants' records are answered before their
        # sync). Kept open, it appends nothing until the end.
        first = L.connect(1, "echo.lab.test:7")
        allowed_tunnel(first)
        start = len(d.decisions())
        with open(gate, "w"):
            pass
        s = L.connect_from(0, *L.proxy_of(0))
        s.sendall(b"CONNECT echo.lab.test:7 HTTP/1.1\r\nHost: echo.lab.test:7\r\n\r\n")
        allow = d.wait_record(lambda x: x.get("event") == "decision" and
                              x.get("verdict") == "allow", timeout=5, start=start)
        check(allow is not None, "no allow record while the sync is held:\n%s"
              % d.stderr_tail(5))
        # the record is written, its sync (and so the hop's next step) held: no 200
        s.settimeout(0.3)
        try:
            early = s.recv(4096)
        except socket.timeout:
            early = None
        check(early is None, "an answer before the allow record was synced: %r" % early)
        r = d.grant_revoke(g["grant_id"])
        check(r.get("ok"), "grant.revoke failed: %s" % r)
        os.unlink(gate)
        s.settimeout(5)
        answer = b""
        while len(answer) < 65536:
            c = s.recv(4096)
            if not c:
                break
            answer += c
        check(not answer.startswith(b"HTTP/1.1 200"), "a 200 after the revoke: %r" % answer[:80])
        hop = allow["hop"]
        close = d.wait_record(lambda x: x.get("event") == "close" and x.get("hop") == hop,
                              timeout=5, start=start)
        check(close is not None, "no close record for %s:\n%s" % (hop, d.decisions()[-3:]))
        check(close.get("reason") == "grant_revoked", "close reason: %s" % close)
        mine = [x for x in d.decisions()[start:] if x.get("hop") == hop]
        check([x["event"] for x in mine] == ["decision", "close"],
              "the hop's records: %s" % [(x["event"], x.get("reason")) for x in mine])
        allows = len([x for x in d.decisions() if x.get("event") == "decision" and
                      x.get("verdict") == "allow"])
        # the in-flight allow is counted once it is written (its completion reaches the
        # loop after the gate opened): bounded wait for the metrics to catch up
        bounded_wait(lambda: metric(L.metrics_text(METRICS_PORT), 'egressd_decisions_total'
                                    '{verdict="allow",reason="allowed"}') >= allows, 5, step=0.1)
        txt = L.metrics_text(METRICS_PORT)
        got = metric(txt, 'egressd_decisions_total{verdict="allow",reason="allowed"}')
        check(allows == 2 and got == allows, "allow decisions: the log holds %d, the metrics "
              "count %d" % (allows, got))
        got = metric(txt, 'egressd_closes_total{reason="grant_revoked"}')
        check(got == 1, "revoked closes counted: %d" % got)
        first.close()
    finally:
        for c in (s, first):
            if c is not None:
                c.close()
        if os.path.exists(gate):
            os.unlink(gate)
        if d.alive():
            d.stop()


def t_close_held_at_stop(L, freed):
    """A tunnel allowed before the log's disk filled closes while the log is failed: its
    close record is held. freed: the space returns just before the stop (within the retry
    interval, with no hop to probe the log): the stop writes the held close, before its
    stop record. Not freed: the close cannot be written; egressd names it at the stop
    (never a silent loss: issue 19, the chaos test's lost closes)."""
    mnt = logfault.logfs(L, "logfs-held-%d" % freed)
    d = None
    try:
        ed.give_to_run_user(mnt, 0o750)
        listeners, grants = static(L)
        d = L.egressd(settings={"decision_log": os.path.join(mnt, "decisions.jsonl"),
                                "drain_timeout": "2s"},
                      listeners=listeners, grants=grants)
        t = L.connect(0, "echo.lab.test:7")
        allowed_tunnel(t)
        client = "%s:%d" % t.sock.getsockname()[:2]
        hop = [x["hop"] for x in d.decisions() if x.get("verdict") == "allow" and
               x.get("client") == client]
        check(len(hop) == 1, "no allow record for the tunnel: %s" % hop)
        hop = hop[0]
        filler = os.path.join(mnt, "filler")
        logfault.fail_log(L, filler, "echo.lab.test:7")
        t.close()
        # egressd saw the client's close (its close record is held now)
        check(bounded_wait(lambda: d.control({"op": "status"}).get("connections") == 0, 5,
                           step=0.1), "the tunnel did not end:\n%s" % d.stderr_tail(5))
        logfault.held_close_at_stop(
            d, hop, filler, freed,
            lambda c: None if c.get("reason") == "client_closed" else "not client_closed")
        rc, msg = verify(d)
        check(rc == 0, "chain does not verify (%d): %s" % (rc, msg))
    finally:
        if d is not None and d.alive():
            d.stop()
        logfault.umount(mnt)


def main():
    lab.require_root()
    require_binaries("egressd", "egressctl")
    res = Results()
    with Lab(workers=2) as L:
        L.set_zone(ZONE)
        proxies.add_addresses(L, REC_ADDR)
        res.run("log_disk_full", t_disk_full, L)
        for old in L.egressds:
            if old.alive():
                old.stop()
        res.run("log_fails_at_proxy_gate", t_log_fails_at_proxy_gate, L)
        for old in L.egressds:
            if old.alive():
                old.stop()
        res.run("revoked_with_allow_in_flight", t_revoked_with_allow_in_flight, L)
        for old in L.egressds:
            if old.alive():
                old.stop()
        res.run("kill9_under_load", t_kill9_under_load, L)
        for freed in (True, False):
            for old in L.egressds:
                if old.alive():
                    old.stop()
            res.run("close_held_at_stop_%s" % ("space_back" if freed else "disk_full"),
                    t_close_held_at_stop, L, freed)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
