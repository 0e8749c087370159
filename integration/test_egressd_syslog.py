#!/usr/bin/env python3
"""The decision log's syslog mirror over a stream (docs/audit.md), against a real rsyslog
from Debian started by the test (integration/labtools/rsyslog.py), on loopback inside
the lab's host namespace:

- tcp://: every record arrives exactly once, in seq order, octet-counted, carrying the
  file's exact line; a collector that stops reading (SIGSTOP) does not slow hops down;
- the collector is killed mid-run: hops go on (nothing waits for it), their records are
  held, and after rsyslog is back they arrive in order, none twice, none missing;
- tls://: the same over TLS with the collector verified against the test CA and name and
  egressd presenting a client certificate; a wrong name is refused with the reason and the
  setting to change, and hops are served all the same;
- a collector that stops reading (small TCP buffers, SIGSTOP): writes block part-way,
  the spool fills, hops are not slowed, the rest arrives in order once it reads again;
- a tiny spool while the collector is away: the newest records are dropped, counted in
  the metrics, recorded as one syslog_loss record (count and seq range) that the
  collector receives too, everything else arrives in order, and the chain still verifies
  (egressctl log verify);
- a reload with changed mirror settings warns and keeps the running mirror;
- egressd -t checks the mirror's settings (file:line)."""

import json
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import rsyslog  # noqa: E402
from labtools.checks import (bounded_wait, stop_clean, check, refused,  # noqa: E402
                             require_binaries)

ZONE = {"ok.lab.test": {"A": [lab.HTTP_ORIGIN]}, "no.lab.test": {"A": [lab.HTTP_ORIGIN]}}
GRANT = ["http://ok.lab.test"]
METRICS = [9464]                       # each egressd its own port (one may outlive a failure)
SPOOL_MIN = 2 * 16384 + 4096          # EGRESS_SYSLOG_SPOOL_MIN (common/limits.h)
# Bound on a wait for something that must happen (a record reaching rsyslog's file, a
# reconnect after up to EGRESS_SYSLOG_BACKOFF_MAX_MS, a warning line). Each wait ends as
# soon as its condition holds, so this only costs time on a failure; it is generous
# because the suite runs these tests in parallel on a loaded machine.
PATIENCE = 60
BACKOFF_MIN_MS, BACKOFF_MAX_MS = 250, 8000     # EGRESS_SYSLOG_BACKOFF_* (common/limits.h)
HEAD = re.compile(r'^<1(09|10)>1 \d{4}-\d\d-\d\dT\S+Z \S+ egressd \d+ [a-z_]+ '
                  r'\[egress@32473 seq="(\d+)"')


def hops(L, n):
    """n denied hops (each one decision record), then one allowed GET."""
    for _ in range(n):
        refused(L.connect(0, "no.lab.test:443"), 403, "not_granted")
    h = L.http(0, "GET", "http://ok.lab.test/")
    check(h.status == 200, "%r" % h)


def file_lines(d):
    with open(d.log_path) as f:
        return [ln.rstrip("\n") for ln in f if ln.strip()]


def received(path):
    """The record lines inside the messages rsyslog wrote, each message checked."""
    out = []
    for m in rsyslog.Rsyslog.messages(path):
        h = HEAD.match(m)
        check(h is not None, "not an egressd RFC 5424 message: %r" % m[:200])
        i = m.find('"] {"v":')
        check(i > 0, "no record line in %r" % m[:200])
        line = m[i + 3:]
        check(json.loads(line)["seq"] == int(h.group(2)), "seq mismatch in %r" % m[:200])
        out.append(line)
    return out


def wait_for(pred, timeout):
    return bounded_wait(pred, timeout, step=0.1)


def received_since(d, path, start_seq):
    """The collector's copies of d's records from start_seq on, in arrival order."""
    mine = set(file_lines(d))
    return [ln for ln in received(path) if ln in mine and json.loads(ln)["seq"] >= start_seq]


def metrics(L):
    txt = L.metrics_text(METRICS[0])
    out = {}
    for ln in txt.splitlines():
        m = re.match(r"^(egressd_syslog_[a-z_]+)(\{[^}]*\})? (\d+)$", ln)
        if m:
            out[m.group(1)] = int(m.group(3))
    return out


def settled(d):
    """Wait until every allowed hop's close record is in d's log: egressd writes it when
    it sees the connection end, which can be after the client has its answer. A
    snapshot of the log taken before that misses a record that is then still on its
    way to the collector (and is lost if the collector is killed next)."""
    def done():
        recs = d.decisions()
        closes = {r.get("hop") for r in recs if r.get("event") == "close"}
        return all(r.get("hop") in closes for r in recs
                   if r.get("event") == "decision" and r.get("verdict") == "allow")
    check(wait_for(done, PATIENCE), "an allowed hop without its close record in %s"
          % d.log_path)


def exactly_once_in_order(d, path, what):
    """The collector has every record of d's log, once each, in file order."""
    settled(d)
    want = file_lines(d)
    wset = set(want)

    def mine():
        return [ln for ln in received(path) if ln in wset]
    got = wait_for(lambda: (lambda g: g if len(g) >= len(want) else None)(mine()),
                   PATIENCE) \
        or mine()
    if got != want:
        dup = len(got) - len(set(got))
        missing = [json.loads(x)["seq"] for x in want if x not in set(got)]
        check(False, "%s: %d records in the log, %d received (%d duplicates, missing seqs "
              "%s, in order: %s)\n%s" % (what, len(want), len(got), dup, missing[:20],
                                         got == sorted(got, key=lambda x: json.loads(x)["seq"]),
                                         diagnose(d, path)))
    return want


def diagnose(d, path):
    """What egressd and rsyslog said, for a failure message."""
    try:
        sy = d.status()["log"].get("syslog") if d.alive() else "(egressd exited)"
    except Exception as e:     # noqa: BLE001 - a diagnosis must not mask the failure
        sy = "(status: %s)" % e
    rs_err = os.path.join(os.path.dirname(path), "rsyslogd.stderr")
    try:
        with open(rs_err, "rb") as f:
            rs_tail = "\n".join(f.read().decode("utf-8", "replace").splitlines()[-15:])
    except OSError:
        rs_tail = "(none)"
    return "egressd status: %r\negressd stderr:\n%s\nrsyslogd stderr:\n%s" % (
        sy, d.stderr_tail(), rs_tail)


def mirror_settings(st, kind, **extra):
    METRICS[0] += 1
    s = {"metrics_listen": "127.0.0.1:%d" % METRICS[0]}
    if kind == "tcp":
        s["log_syslog"] = "tcp://127.0.0.1:%d" % st["rs"].plain_port
    else:
        s["log_syslog"] = "tls://127.0.0.1:%d" % st["rs"].tls_port
        s["log_syslog_ca"] = st["pki"]["ca"]
        s["log_syslog_name"] = rsyslog.SERVER_NAME
        s["log_syslog_cert"] = st["pki"]["client_cert"]
        s["log_syslog_key"] = st["pki"]["client_key"]
    s.update(extra)
    return s


def say_warning(d, needle):
    """Print egressd's warning line containing needle (what an operator reads)."""
    for ln in d.stderr_text().splitlines():
        if needle in ln:
            print("  egressd said: %s" % ln[:400])
            return


def start_egressd(L, settings):
    d = L.egressd(settings=settings)
    L.grant(d, 0, GRANT, principal="mirrored")
    return d


def t_tcp_in_order_and_restart(L, st):
    rs = st["rs"]
    d = start_egressd(L, mirror_settings(st, "tcp"))
    hops(L, 40)
    n1 = len(exactly_once_in_order(d, rs.plain_out, "tcp"))
    print("  tcp: %d records, each once, in order" % n1)
    # A collector that stops reading (SIGSTOP): hops are not slowed by it.
    os.kill(rs.proc.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        hops(L, 30)
        took = time.monotonic() - t0
    finally:
        os.kill(rs.proc.pid, signal.SIGCONT)
    check(took < 15, "30 hops took %.1f s with a stopped collector" % took)
    exactly_once_in_order(d, rs.plain_out, "tcp after the collector resumed")
    # The collector dies (everything so far was delivered and written): hops go on.
    rs.kill()
    t0 = time.monotonic()
    hops(L, 30)
    check(time.monotonic() - t0 < 20, "hops waited for the dead collector")
    m = wait_for(lambda: (lambda x: x if x.get("egressd_syslog_connected") == 0 else None)(
        metrics(L)), PATIENCE)
    check(m and m["egressd_syslog_spool_records"] > 0, "records held while down: %r" % m)
    sy = d.status()["log"].get("syslog", {})
    check(sy.get("transport") == "tcp" and sy.get("connected") is False and sy.get("error"),
          "status while the collector is down: %r" % sy)
    rc, out, err = d.egressctl("-s", d.control_path, "status")
    check(rc == 0 and re.search(r"syslog mirror: tcp://127\.0\.0\.1:\d+, NOT CONNECTED, "
                                r"sent \d+, lost 0, holding [1-9]\d* record", out),
          "egressctl status while the collector is down: %s %s" % (out, err))
    time.sleep(1.0)
    rs.start()
    hops(L, 5)
    n2 = len(exactly_once_in_order(d, rs.plain_out, "tcp after the collector's restart"))
    m = metrics(L)
    print("  after restart: %d records; metrics %r" % (n2, m))
    check(m["egressd_syslog_connected"] == 1, "reconnected: %r" % m)
    check(m["egressd_syslog_dropped_total"] == 0, "nothing dropped: %r" % m)
    check(m["egressd_syslog_connect_failures_total"] >= 1, "the outage counted: %r" % m)
    # A reload with changed mirror settings keeps the running mirror (start-up only).
    d.settings["log_syslog"] = "tcp://127.0.0.1:9"
    d.write_config()
    d.reload()
    check(wait_for(lambda: "log_syslog_* changes take effect only after a restart"
                   in d.stderr_text(), PATIENCE), "no reload warning:\n%s" % d.stderr_tail())
    hops(L, 3)
    exactly_once_in_order(d, rs.plain_out, "tcp after a reload")
    err = d.stderr_text()
    check("syslog mirror tcp://127.0.0.1:%d: the collector closed the connection"
          % rs.plain_port in err or "syslog mirror tcp://127.0.0.1:%d: connect:"
          % rs.plain_port in err, "the outage warned about:\n%s" % d.stderr_tail())
    check("the collector takes records again" in err, "the recovery said:\n%s"
          % d.stderr_tail())
    stop_clean(d)
    check(not [r for r in d.decisions() if r.get("event") == "syslog_loss"],
          "a syslog_loss record without a loss")
    # the stop record too, delivered before egressd exited
    exactly_once_in_order(d, rs.plain_out, "tcp after stop")


def t_tls(L, st):
    rs = st["rs"]
    d = start_egressd(L, mirror_settings(st, "tls"))
    hops(L, 30)
    n = len(exactly_once_in_order(d, rs.tls_out, "tls"))
    # every record leaves the spool once acknowledged: the TLS byte count (ciphertext,
    # handshake included) matches the kernel's acknowledged count
    check(wait_for(lambda: metrics(L).get("egressd_syslog_spool_records") == 0,
                   PATIENCE),
          "records never acknowledged over TLS: %r" % metrics(L))
    m = metrics(L)
    check(m.get("egressd_syslog_connected") == 1 and m.get("egressd_syslog_dropped_total") == 0,
          "tls metrics %r" % m)
    stop_clean(d)
    exactly_once_in_order(d, rs.tls_out, "tls after stop")
    print("  tls: %d records, each once, in order (client certificate, name verified)" % n)
    # without log_syslog_name the collector's address must be in its certificate (an IP
    # SAN: 127.0.0.1 is)
    s = mirror_settings(st, "tls")
    del s["log_syslog_name"]
    d = start_egressd(L, s)
    hops(L, 5)
    exactly_once_in_order(d, rs.tls_out, "tls verified by address")
    stop_clean(d)


def t_tls_refused(L, st):
    """A wrong name: the handshake is refused with the reason and the fix; hops are
    served all the same and the loss is counted at stop."""
    rs = st["rs"]
    before = len(rsyslog.Rsyslog.messages(rs.tls_out))
    d = start_egressd(L, mirror_settings(st, "tls", log_syslog_name="wrong.lab.test"))
    hops(L, 5)
    err = wait_for(lambda: (lambda e: e if "certificate is refused" in e else None)(
        d.stderr_text()), PATIENCE) or d.stderr_text()
    check("certificate is refused" in err and "log_syslog_name" in err,
          "no reason naming log_syslog_name:\n%s" % d.stderr_tail())
    say_warning(d, "certificate is refused")
    m = metrics(L)
    check(m.get("egressd_syslog_connected") == 0, "connected with a wrong name: %r" % m)
    stop_clean(d)
    check(len(rsyslog.Rsyslog.messages(rs.tls_out)) == before, "a refused peer got messages")
    loss = [r for r in d.decisions() if r.get("event") == "syslog_loss"]
    check(len(loss) == 1 and loss[0]["dropped"] == len(d.decisions()) - 1,
          "undelivered records at stop recorded: %r" % loss)
    # a CA that did not issue the collector's certificate
    other = rsyslog.make_pki(os.path.join(L.workdir, "pki-other"))
    d = start_egressd(L, mirror_settings(st, "tls", log_syslog_ca=other["ca"]))
    hops(L, 1)
    err = wait_for(lambda: (lambda e: e if "certificate is refused" in e else None)(
        d.stderr_text()), PATIENCE) or d.stderr_text()
    check("log_syslog_ca does not hold the CA that issued it" in err,
          "no reason naming log_syslog_ca:\n%s" % d.stderr_tail())
    say_warning(d, "certificate is refused")
    stop_clean(d)
    # no client certificate: rsyslog (x509/certvalid) refuses, egressd says what to try
    s = mirror_settings(st, "tls")
    del s["log_syslog_cert"], s["log_syslog_key"]
    t0 = time.monotonic()
    d = start_egressd(L, s)
    hops(L, 2)
    err = wait_for(lambda: (lambda e: e if "client certificate" in e else None)(
        d.stderr_text()), PATIENCE) or d.stderr_text()
    check("log_syslog_cert" in err, "no hint at the client certificate:\n%s"
          % d.stderr_tail())
    say_warning(d, "client certificate")
    time.sleep(3)
    m = metrics(L)
    took = time.monotonic() - t0
    # Doubling from 250 ms: at most backoff_attempts(took) failures since egressd
    # started (4 in 3 s; a loaded machine only makes them later, never earlier); a
    # backoff reset by each accepted connection would make a dozen in 3 s.
    most = backoff_attempts(took)
    check(m["egressd_syslog_connect_failures_total"] <= most,
          "reconnected without backoff: %r in %.1f s (at most %d)" % (m, took, most))
    stop_clean(d)


def backoff_attempts(secs):
    """How many connection attempts the mirror's backoff allows in secs from its start
    (the first at once, then after 250 ms, 500 ms, 1 s, ... up to 8 s apart), plus one
    for an attempt in flight when the metrics were read."""
    n, at, step = 1, 0, BACKOFF_MIN_MS
    while at + step <= secs * 1000:
        at += step
        n += 1
        step = min(step * 2, BACKOFF_MAX_MS)
    return n + 1


def t_tiny_spool_loss(L, st):
    rs = st["rs"]
    rs.stop()
    d = start_egressd(L, mirror_settings(st, "tcp", log_syslog_spool=str(SPOOL_MIN)))
    # the start record: egressd writes its log from the event loop, so it may land a
    # moment after the control socket answers
    first = d.wait_record(lambda r: True, timeout=PATIENCE)
    check(first is not None, "no record in %s" % d.log_path)
    start_seq = first["seq"]
    hops(L, 250)                     # ~100 KiB of records: more than the spool holds
    m = metrics(L)
    dropped = m["egressd_syslog_dropped_total"]
    check(dropped > 0, "nothing dropped with a tiny spool: %r" % m)
    check(m["egressd_syslog_spool_bytes"] <= SPOOL_MIN, "spool over its bound: %r" % m)
    check("spool full" in d.stderr_text(), "no warning:\n%s" % d.stderr_tail())
    say_warning(d, "spool full")
    rs.start()
    check(wait_for(lambda: metrics(L).get("egressd_syslog_spool_records") == 0,
                   PATIENCE),
          "spool not delivered: %r" % metrics(L))
    hops(L, 1)                        # a record goes through: the episode ends
    rec, delivered = loss_recorded(L, d, rs, start_seq)
    stop_clean(d)
    rc, out, err = d.egressctl("log", "verify", d.log_path)
    check(rc == 0, "log verify: %s %s" % (out, err))
    print("  tiny spool: %d dropped (seq %d..%d), recorded and counted; %d delivered"
          % (rec["dropped"], rec["first_seq"], rec["last_seq"], delivered))


def loss_recorded(L, d, rs, start_seq):
    """After a loss episode and one more hop: the syslog_loss record matches the metrics
    (one contiguous range), and the collector got every other record from start_seq on,
    in order, the loss record included. Returns (record, delivered count)."""
    settled(d)
    rec = d.wait_record(lambda r: r.get("event") == "syslog_loss",
                        timeout=PATIENCE)
    check(rec is not None, "no syslog_loss record")
    dropped = metrics(L)["egressd_syslog_dropped_total"]   # the last close record too
    check(rec["dropped"] == dropped, "loss record %r, metrics %d" % (rec, dropped))
    check(rec["last_seq"] - rec["first_seq"] + 1 == dropped, "range %r" % rec)
    check(rec["collector"] == "tcp://127.0.0.1:%d" % rs.plain_port, "collector %r" % rec)
    lines = [ln for ln in file_lines(d) if json.loads(ln)["seq"] >= start_seq]
    want = [ln for ln in lines
            if not rec["first_seq"] <= json.loads(ln)["seq"] <= rec["last_seq"]]
    got = wait_for(lambda: (lambda g: g if len(g) >= len(want) else None)(
        received_since(d, rs.plain_out, start_seq)), PATIENCE) or \
        received_since(d, rs.plain_out, start_seq)
    check(got == want, "received %d, expected %d (all but the dropped range, in order)"
          % (len(got), len(want)))
    check(any('"event":"syslog_loss"' in g for g in got), "the loss record was mirrored too")
    return rec, len(got)


def read_sysctl(L, key):
    cp = L.run_in(L.ns_host, ["cat", "/proc/sys/" + key.replace(".", "/")], check=True)
    return cp.stdout.decode().strip() if isinstance(cp.stdout, bytes) else cp.stdout.strip()


def t_stuck_collector(L, st):
    """A collector that stays connected but stops reading (SIGSTOP), with small TCP
    buffers in the lab's host namespace so that the backpressure reaches egressd at once:
    writes block part-way through frames, the spool fills and drops the newest records;
    hops are not slowed; once the collector reads again everything held arrives in
    order, complete frames only, and the loss is recorded."""
    rs = st["rs"]
    keys = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
    saved = {k: read_sysctl(L, k) for k in keys}
    rs.stop()
    try:
        for k in keys:
            L._sysctl(L.ns_host, k, "4096 4096 4096")
        rs.start()
        d = start_egressd(L, mirror_settings(st, "tcp", log_syslog_spool=str(SPOOL_MIN)))
        hops(L, 10)
        exactly_once_in_order(d, rs.plain_out, "small buffers")
        start_seq = d.decisions()[-1]["seq"] + 1
        os.kill(rs.proc.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            hops(L, 250)
            took = time.monotonic() - t0
            m = metrics(L)
        finally:
            os.kill(rs.proc.pid, signal.SIGCONT)
        check(took < 30, "250 hops took %.1f s with a collector that does not read" % took)
        check(m["egressd_syslog_connected"] == 1, "backpressure is not a failure: %r" % m)
        check(m["egressd_syslog_dropped_total"] > 0, "nothing dropped: %r" % m)
        check(m["egressd_syslog_spool_bytes"] <= SPOOL_MIN, "spool over its bound: %r" % m)
        check(wait_for(lambda: metrics(L).get("egressd_syslog_spool_records") == 0,
                   PATIENCE),
              "spool not delivered: %r" % metrics(L))
        hops(L, 1)
        rec, delivered = loss_recorded(L, d, rs, start_seq)
        stop_clean(d)
        rc, out, err = d.egressctl("log", "verify", d.log_path)
        check(rc == 0, "log verify: %s %s" % (out, err))
        print("  stuck collector: 250 hops in %.1f s; %d dropped (seq %d..%d), %d delivered "
              "in order" % (took, rec["dropped"], rec["first_seq"], rec["last_seq"],
                            delivered))
    finally:
        rs.stop()
        for k in keys:
            L._sysctl(L.ns_host, k, saved[k])
        rs.start()


def t_check_config(L, st):
    d = L.egressd(settings=mirror_settings(st, "tls"), start=False)
    rc, out, err = d.check_config()
    check(rc == 0, "egressd -t on a good TLS mirror: %s %s" % (out, err))
    bad = mirror_settings(st, "tls")
    bad["log_syslog_ca"] = st["pki"]["client_key"]          # not a certificate
    d = L.egressd(settings=bad, start=False)
    rc, out, err = d.check_config()
    check(rc == 1 and "log_syslog_ca" in err and re.search(r"egressd\.ini:\d+:", err),
          "egressd -t on a bad CA: %s %s" % (rc, err))
    bad = mirror_settings(st, "tls")
    del bad["log_syslog_key"]
    d = L.egressd(settings=bad, start=False)
    rc, out, err = d.check_config()
    check(rc == 1 and "log_syslog_key" in err, "cert without key: %s %s" % (rc, err))
    d = L.egressd(settings={"log_syslog": "tcp://127.0.0.1:514", "log_syslog_spool": "1k"},
                  start=False)
    rc, out, err = d.check_config()
    check(rc == 1 and "log_syslog_spool" in err, "spool too small: %s %s" % (rc, err))


def main():
    lab.require_root()
    require_binaries("egressd", "egressctl")
    miss = rsyslog.missing()
    if miss:
        print("FAIL: rsyslog is not installed (%s): scripts/deps.sh test installs rsyslog "
              "and rsyslog-openssl" % ", ".join(miss))
        return 1
    res = Results()
    with Lab() as L:
        L.set_zone(ZONE)
        st = {"pki": rsyslog.make_pki(os.path.join(L.workdir, "pki"))}
        st["rs"] = rsyslog.Rsyslog(L, os.path.join(L.workdir, "rsyslog"), st["pki"])
        st["rs"].start()
        try:
            for name, fn in (("check_config", t_check_config),
                             ("tcp_in_order_and_restart", t_tcp_in_order_and_restart),
                             ("tls_in_order", t_tls),
                             ("tls_refused_with_reason", t_tls_refused),
                             ("stuck_collector_backpressure", t_stuck_collector),
                             ("tiny_spool_loss_recorded", t_tiny_spool_loss)):
                res.run(name, fn, L, st)
                for d in L.egressds:      # a failed check leaves its egressd running
                    if d.alive():
                        d.stop()
        finally:
            st["rs"].stop()
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
