#!/usr/bin/env python3
"""The decision log: every hop has a decision record (allow written before 200), tunnels a
close record, the SHA-256 chain checks (independently recomputed here, and by `egressctl
log verify`), the verifier detects an edited and a deleted record, and when the log cannot
be written egressd refuses hops with 503 audit_unavailable (never an allow without its
record) and recovers when space returns."""

import errno
import hashlib
import json
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import egressd as ed  # noqa: E402
from labtools import netns, proxyclient  # noqa: E402
from labtools.checks import stop_clean, allowed_tunnel, check, refused, require_binaries  # noqa: E402

ZONE = {
    "ok.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "echo.lab.test": {"A": [lab.ECHO_ORIGIN]},
    "no.lab.test": {"A": [lab.HTTP_ORIGIN]},
}
GRANT = ["https://ok.lab.test", "http://ok.lab.test", "tcp://echo.lab.test:7"]
TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
HASH_RE = re.compile(r"^[0-9a-f]{64}$")


def chain_check(path):
    """Recompute the chain (docs: hash = hex(sha256(prev_hex "\\n" body)), body = the line
    without ',"hash":"<64 hex>"'). Returns the list of records."""
    prev = "0" * 64
    recs = []
    with open(path, "rb") as f:
        data = f.read()
    check(data.endswith(b"\n") or not data, "log does not end with a newline")
    for i, raw in enumerate(data.split(b"\n")[:-1], 1):
        line = raw.decode("utf-8")
        m = re.search(r',"hash":"([0-9a-f]{64})"\}$', line)
        check(m is not None, "line %d: no trailing hash member: %r" % (i, line[-90:]))
        body = line[:m.start()] + "}"
        rec = json.loads(line)
        check(rec.get("prev") == prev, "line %d: prev does not chain" % i)
        h = hashlib.sha256((prev + "\n" + body).encode()).hexdigest()
        check(h == m.group(1), "line %d: hash mismatch" % i)
        prev = h
        recs.append(rec)
    for a, b in zip(recs, recs[1:]):
        check(b["seq"] == a["seq"] + 1, "seq %s follows %s" % (b["seq"], a["seq"]))
    return recs


def verify(d, *args):
    """egressctl log verify ARGS... (several files are read in chain order)."""
    return d.egressctl("log", "verify", *args)


def t_records(L, d, st):
    start = len(d.decisions())
    r = L.connect(0, "echo.lab.test:7")
    allowed_tunnel(r)
    # The allow record is on disk before the client heard 200 (log_sync = always).
    recs = d.decisions()[start:]
    allow = [x for x in recs if x.get("event") == "decision" and x.get("verdict") == "allow"]
    check(allow, "no allow record on disk when 200 arrived: %s" % recs)
    data = os.urandom(3000)
    check(proxyclient.tunnel_echo(r.sock, data) == data, "echo")
    r.close()
    refused(L.connect(0, "no.lab.test:443"), 403, "not_granted")
    h = L.http(0, "GET", "http://ok.lab.test/")
    check(h.status == 200, "%r" % h)
    close = d.wait_record(lambda x: x.get("event") == "close", start=start, timeout=5)
    check(close is not None, "no close record")
    recs = d.decisions()[start:]
    for x in recs:
        for k in ("v", "time", "seq", "event", "prev", "hash"):
            check(k in x, "record lacks %s: %s" % (k, x))
        check(TIME_RE.match(x["time"]), "time %r is not RFC 3339 UTC with microseconds"
              % x["time"])
        check(HASH_RE.match(x["hash"]) and HASH_RE.match(x["prev"]), "hash format")
    dec = [x for x in recs if x.get("event") == "decision"]
    check(len(dec) >= 3, "expected 3 decision records, got %d" % len(dec))
    deny = [x for x in dec if x.get("verdict") == "deny"]
    check(deny and deny[0].get("reason") == "not_granted", "deny record: %s" % deny)
    a = allow[0]
    for k in ("conn", "principal", "grant_id", "client", "method", "target", "dest",
              "verdict", "reason", "route", "resolved", "pinned", "classes_dropped", "attested",
              "resolve_us", "connect_us"):
        check(k in a, "allow record lacks %s: %s" % (k, a))
    check(a["principal"] == st["principal"], "principal %s" % a["principal"])
    check(a["grant_id"] == st["g"]["grant_id"], "grant_id %s" % a["grant_id"])
    check(a["pinned"] == lab.ECHO_ORIGIN, "pinned %s" % a["pinned"])
    check(a["dest"] == "echo.lab.test:7", "dest %s" % a["dest"])
    check(a["resolved"] == [lab.ECHO_ORIGIN] and a["classes_dropped"] == [], "resolved %s" % a)
    check(isinstance(a["conn"], str) and a["route"] == "direct", "conn/route %s" % a)
    check(isinstance(a["resolve_us"], int) and isinstance(a["connect_us"], int),
          "durations %s" % a)
    check(a["method"] == "CONNECT" and a["reason"] == "allowed", "method/reason %s" % a)
    check(str(a["client"]).startswith(L.workers[0].worker_addr), "client %s" % a["client"])
    check(a["attested"] is True, "attested must be true for a direct route: %s" % a)
    # The close record links to its decision and counts the bytes both ways.
    check(close.get("conn") == a["conn"], "close not linked by conn: %s / %s" % (a, close))
    for k in ("principal", "grant_id", "dest", "pinned"):
        check(close.get(k) == a[k], "close %s %s != %s" % (k, close.get(k), a[k]))
    check(close.get("bytes_up", 0) >= 3000 and close.get("bytes_down", 0) >= 3000,
          "close record bytes: %s" % close)
    check("duration_us" in close and close.get("reason") in ("client_closed", "upstream_closed"),
          "close record: %s" % close)


def t_hostile_targets_logged_safely(L, d, st):
    """Hostile request lines (quotes, backslashes, control bytes, invalid UTF-8, a huge
    target) are refused, and their records stay valid JSON in an intact chain, with the
    raw target truncated."""
    start = len(d.decisions())
    bad = [b'CONNECT "a\\b"\x01:443 HTTP/1.1\r\n\r\n',
           b"GET http://ok.lab.test/\xff\xfe\xc0\xaf HTTP/1.1\r\n\r\n",
           b'GET http://no.lab.test/","verdict":"allow HTTP/1.1\r\n\r\n',
           b"GET http://no.lab.test/" + b"a" * 6000 + b" HTTP/1.1\r\n\r\n",
           b"\x00\x01\x02\r\n\r\n"]
    with L.no_origin_connection():
        for raw in bad:
            r = L.raw(0, raw)
            check(r.status in (400, 403, 431) and r.egress_reason, "%r -> %r" % (raw[:40], r))
    time.sleep(0.3)
    recs = chain_check(d.log_path)[start:]
    dec = [x for x in recs if x.get("event") == "decision"]
    check(len(dec) == len(bad), "%d refusals, %d decision records" % (len(bad), len(dec)))
    check(all(x.get("verdict") == "deny" for x in dec), "hostile request allowed: %s" % dec)
    longest = max(len(str(x.get("target") or "")) for x in dec) if dec else 0
    check(longest <= 1100, "raw target not truncated (%d chars)" % longest)
    rc, out, err = verify(d, d.log_path)
    check(rc == 0, "verify after hostile targets: %s %s" % (out, err))


def t_sync_modes(L, d0, st):
    """With every log_sync mode the allow record is in the file (written; synced for
    always/batch) by the time the client hears 200."""
    for i, mode in enumerate(("batch", "none")):
        d = L.egressd(settings={"log_sync": mode})
        port = 3150 + i
        L.grant(d, 1, GRANT, port=port, principal="sync-" + mode)
        for _ in range(5):
            n = len(d.decisions())
            r = L.connect(1, "ok.lab.test:443", proxy=L.proxy_of(1, port))
            allowed_tunnel(r)
            recs = d.decisions()[n:]
            r.close()
            check([x for x in recs if x.get("verdict") == "allow"],
                  "%s: 200 before the allow record was written" % mode)
        stop_clean(d)
        chain_check(d.log_path)


def t_chain_intact(L, d, st):
    recs = chain_check(d.log_path)
    # The status seq anchors the chain outside the file (detects a cut tail).
    stt = d.status()
    check(stt.get("ok") and stt.get("log", {}).get("seq") == recs[-1]["seq"] and
          stt["log"].get("writable") is True and stt["log"].get("path") == d.log_path,
          "status log %s vs last seq %s" % (stt.get("log"), recs[-1]["seq"]))
    for k in ("version", "pid", "uptime_s", "grants", "connections"):
        check(k in stt, "status lacks %s: %s" % (k, stt))
    check(stt["pid"] == d.proc.pid, "status pid %s, process %s" % (stt["pid"], d.proc.pid))
    rc, out, err = verify(d, d.log_path)
    check(rc == 0, "verify of an intact log: rc=%s %s %s" % (rc, out, err))


def _copy(d, name):
    p = os.path.join(d.dir, name)
    shutil.copyfile(d.log_path, p)
    with open(p, "rb") as f:
        return p, f.read().split(b"\n")[:-1]


def t_verify_edited(L, d, st):
    p, lines = _copy(d, "edited.jsonl")
    check(len(lines) >= 3, "need 3 records")
    i = next(n for n, ln in enumerate(lines) if b'"verdict":"deny"' in ln)
    lines[i] = lines[i].replace(b'"verdict":"deny"', b'"verdict":"allow"', 1)
    with open(p, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    rc, out, err = verify(d, p)
    check(rc != 0, "edited record not detected: %s" % out)
    check("%s:%d: edited" % (p, i + 1) in out + err,
          "verifier does not say FILE:%d: edited: %r" % (i + 1, out + err))


def t_verify_deleted(L, d, st):
    p, lines = _copy(d, "deleted.jsonl")
    del lines[1]
    with open(p, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    rc, out, err = verify(d, p)
    check(rc != 0, "deleted record not detected: %s" % out)
    check("%s:2: deleted" % p in out + err, "verifier does not say FILE:2: deleted: %r"
          % (out + err))
    # Deleting the last record cannot be seen from the chain alone, but the first can.
    p, lines = _copy(d, "deleted-first.jsonl")
    with open(p, "wb") as f:
        f.write(b"\n".join(lines[1:]) + b"\n")
    rc, out, err = verify(d, p)
    check(rc != 0, "deleted first record not detected: %s" % out)


def t_verify_reordered(L, d, st):
    p, lines = _copy(d, "reordered.jsonl")
    lines[1], lines[2] = lines[2], lines[1]
    with open(p, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    rc, out, err = verify(d, p)
    check(rc == 1 and "reordered" in out + err, "reorder: rc=%s %r" % (rc, out + err))


def t_verify_truncated_and_garbage(L, d, st):
    p, lines = _copy(d, "torn.jsonl")
    with open(p, "wb") as f:
        f.write(b"\n".join(lines) + b"\n" + lines[-1][:40])
    rc, out, err = verify(d, p)
    check(rc == 1 and "truncated" in out + err, "torn tail: %r" % (out + err))
    with open(p, "wb") as f:
        f.write(b"\n".join(lines[:2]) + b"\nnot json at all\n" + b"\n".join(lines[2:]) + b"\n")
    rc, out, err = verify(d, p)
    check(rc == 1 and "%s:3: malformed" % p in out + err, "garbage line: %r" % (out + err))


def t_restart_and_rotation(L, d0, st):
    """A restarted egressd continues the chain of its existing file; SIGUSR1 after a rename
    starts a new file that continues the chain (verified together, or alone with
    --continued); a second egressd on the same file never forks the chain."""
    import signal as _signal
    d = L.egressd()
    L.grant(d, 1, GRANT, port=3133, principal="rot")
    p1 = L.proxy_of(1, 3133)
    refused(L.connect(1, "no.lab.test:443", proxy=p1), 403, "not_granted")
    stop_clean(d)
    n1 = len(chain_check(d.log_path))
    d.start()
    L.grant(d, 1, GRANT, port=3133, principal="rot")
    refused(L.connect(1, "no.lab.test:443", proxy=p1), 403, "not_granted")
    # A deny record is written asynchronously (nothing waits on it): poll, bounded.
    deadline = time.monotonic() + 5.0
    recs = chain_check(d.log_path)
    def denied_after_restart(rs):
        return any(x.get("reason") == "not_granted" for x in rs[n1:])
    while not denied_after_restart(recs) and time.monotonic() < deadline:
        time.sleep(0.05)
        recs = chain_check(d.log_path)
    # the restarted run's first record is its start record, at the next seq
    check(denied_after_restart(recs) and recs[n1]["seq"] == n1 + 1 and
          recs[n1]["event"] == "start" and recs[n1 - 1]["event"] == "stop",
          "restart did not continue seq: %r" % recs[n1 - 1:n1 + 1])
    # Rotation.
    rotated = d.log_path + ".1"
    os.rename(d.log_path, rotated)
    d.signal(_signal.SIGUSR1)
    time.sleep(0.3)
    refused(L.connect(1, "no.lab.test:443", proxy=p1), 403, "not_granted")
    check(d.wait_record(lambda x: x.get("reason") == "not_granted", timeout=3) is not None,
          "no record in the new file")
    rc, out, err = verify(d, rotated, d.log_path)
    check(rc == 0, "rotated pair: %s %s" % (out, err))
    rc, out, err = verify(d, "--continued", d.log_path)
    check(rc == 0, "new file --continued: %s %s" % (out, err))
    rc, out, err = verify(d, d.log_path)
    check(rc == 1 and "deleted" in out + err, "new file alone: %r" % (out + err))
    # A second daemon on the same log.
    d2 = L.egressd(settings={"decision_log": d.log_path}, start=False)
    try:
        d2.start()
        started = True
    except netns.LabError:
        started = False
    if started:
        L.grant(d2, 1, GRANT, port=3134, principal="second")
        r = L.connect(1, "ok.lab.test:443", proxy=L.proxy_of(1, 3134))
        r.close()
        check(r.status == 503 and r.egress_reason == "audit_unavailable",
              "second daemon on a locked log: %r" % r)
        stop_clean(d2)
    refused(L.connect(1, "no.lab.test:443", proxy=p1), 403, "not_granted")
    rc, out, err = verify(d, rotated, d.log_path)
    check(rc == 0, "chain after a second daemon: %s %s" % (out, err))
    stop_clean(d)


def t_audit_unavailable(L, d0, st):
    mnt = os.path.join(L.workdir, "small")
    os.makedirs(mnt)
    netns.run(["mount", "-t", "tmpfs", "-o", "size=128k,mode=0700", "egress-lab", mnt])
    d = None
    try:
        # The log directory belongs to the account egressd drops to (docs/SECURITY.md):
        # after a failed write it reopens the log there.
        ed.give_to_run_user(mnt, 0o700)
        d = L.egressd(settings={"decision_log": os.path.join(mnt, "decisions.jsonl")})
        L.grant(d, 1, GRANT)
        r = L.connect(1, "ok.lab.test:443")
        allowed_tunnel(r)
        r.close()
        filler = os.path.join(mnt, "filler")
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for size in (65536, 4096, 1):
                for _ in range(100000):
                    try:
                        os.write(fd, b"\0" * size)
                    except OSError as e:
                        check(e.errno == errno.ENOSPC, "fill: %s" % e)
                        break
        finally:
            os.close(fd)
        # The log's last page may still hold a few records; within a few hops the log
        # fails, and from then on every hop is refused.
        ok = 0
        refusals = 0
        for _ in range(40):
            r = L.connect(1, "ok.lab.test:443")
            if r.status == 200:
                check(refusals == 0, "allowed after audit_unavailable")
                ok += 1
                r.close()
                continue
            refused(r, 503, "audit_unavailable")
            refusals += 1
            if refusals >= 3:
                break
        check(refusals, "never refused with audit_unavailable on a full disk")
        with L.no_origin_connection():
            refused(L.http(1, "GET", "http://ok.lab.test/"), 503, "audit_unavailable")
            refused(L.connect(1, "ok.lab.test:443"), 503, "audit_unavailable")
        s = d.status()
        check(s.get("log", {}).get("writable") is False, "status says writable: %s" % s)
        # Every allow that the client heard has its record.
        allows = [x for x in d.decisions() if x.get("event") == "decision"
                  and x.get("verdict") == "allow"]
        check(len(allows) >= 1 + ok, "%d allows heard, %d allow records" % (1 + ok, len(allows)))
        os.unlink(filler)
        deadline = time.monotonic() + 8
        r = L.connect(1, "ok.lab.test:443")
        while r.status != 200 and time.monotonic() < deadline:
            time.sleep(0.3)
            r = L.connect(1, "ok.lab.test:443")
        allowed_tunnel(r)
        r.close()
        chain_check(d.log_path)
        rc, out, err = verify(d, d.log_path)
        check(rc == 0, "chain after recovery: %s %s" % (out, err))
    finally:
        if d is not None:
            d.stop()
        netns.run(["umount", mnt], check=False)
        if os.path.ismount(mnt):
            netns.run(["umount", "-l", mnt], check=False)


def t_unwritable_at_start(L, d0, st):
    # A decision log in a directory that does not exist: egressd exits 1 at start-up with
    # the reason (docs/egressd.md), and `egressd -t` reports the same problem. It never
    # serves: neither allowing nor a run that can only refuse.
    bad = os.path.join(L.workdir, "no-such-dir", "x", "decisions.jsonl")
    d = L.egressd(settings={"decision_log": bad}, start=False)
    rc, out, err = d.check_config()
    check(rc == 1 and "decision log %s cannot be opened for writing" % bad in err,
          "-t accepted an unopenable decision log: rc %s %r %r" % (rc, out, err))
    try:
        d.start()
    except netns.LabError:
        check(d.proc.returncode == 1, "exit status %s" % d.proc.returncode)
        check("decision log %s cannot be opened for writing" % bad in d.stderr_text(),
              "start-up failure does not say why:\n%s" % d.stderr_tail(5))
        return
    d.stop()
    check(False, "egressd started with a decision log it cannot open")


def t_check_unreadable_config(L, d0, st):
    # -t as root checks the configuration as the account egressd drops to will read it at
    # the next SIGHUP: a root-only file passes start-up but would fail every reload.
    d = L.egressd(start=False)
    rc, out, err = d.check_config()
    check(rc == 0, "-t of the good file: %s %r" % (rc, err))
    os.chmod(d.conf_path, 0o600)
    try:
        rc, out, err = d.check_config()
        check(rc == 1 and "cannot be read by" in err and d.conf_path in err,
              "-t accepted a config the drop account cannot read: %s %r" % (rc, err))
    finally:
        os.chmod(d.conf_path, 0o644)


def main():
    lab.require_root()
    require_binaries("egressd", "egressctl")
    res = Results()
    with Lab() as L:
        L.set_zone(ZONE)
        d = L.egressd()
        st = {"principal": "logged"}
        st["g"] = L.grant(d, 0, GRANT, principal="logged")
        for name, fn in (("records_fields_and_close", t_records),
                         ("hostile_targets_logged_safely", t_hostile_targets_logged_safely),
                         ("chain_intact", t_chain_intact),
                         ("allow_record_before_200_every_sync_mode", t_sync_modes),
                         ("verify_detects_edited", t_verify_edited),
                         ("verify_detects_deleted", t_verify_deleted),
                         ("verify_detects_reordered", t_verify_reordered),
                         ("verify_detects_torn_and_garbage", t_verify_truncated_and_garbage),
                         ("restart_and_rotation_continue_chain", t_restart_and_rotation),
                         ("audit_unavailable_on_full_disk", t_audit_unavailable),
                         ("unwritable_log_at_start", t_unwritable_at_start),
                         ("check_refuses_unreadable_config", t_check_unreadable_config)):
            res.run(name, fn, L, d, st)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
