"""The decision log under a full disk, for the lab (test_fault_log, test_model_connection).

logfs mounts a small tmpfs for the log under the lab workdir (never the real disk);
fail_log fills it and makes the log fail; held_close_at_stop stops egressd and checks what
became of a close record held through the failure (docs/decision-log.md: written at the
stop once the space is back, else named and counted as lost)."""

import calendar
import os
import subprocess
import time

import lab
from labtools.checks import check, stop_clean


def logfs(L, name):
    """A 512 KiB tmpfs for the decision log, mounted at L.workdir/name (the caller
    unmounts it with umount)."""
    mnt = os.path.join(L.workdir, name)
    os.makedirs(mnt, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k,mode=0755", "tmpfs", mnt],
                   check=True, timeout=10)
    return mnt


def umount(mnt):
    subprocess.run(["umount", "-l", mnt], timeout=10)


def fail_log(L, filler, target):
    """Fill the log's file system (filler: a new file on it) to the last byte, then
    CONNECT target (allowed while the log is writable) until a hop is refused: the last
    page of the log file may hold a few records first (bounded: 40 hops)."""
    lab.fill_fs(filler, 4096, 256)
    for _ in range(40):
        r = L.connect(0, target)
        r.close()
        if r.status == 503:
            return
    check(False, "the log never failed with its disk full")


def record_time(rec):
    """A record's time (RFC 3339, UTC, microseconds) as seconds since the epoch."""
    t = rec["time"]
    return calendar.timegm(time.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + t[19:-1])


def held_close_at_stop(d, hop, filler, freed, what):
    """The close record of hop is held (the log failed before it was written). freed:
    remove filler, then stop egressd; the close is written before the stop record and
    stamped after the space came back (held, not written before the failure), and
    returned. Else stop with the disk still full: no close, and the stop names it (its
    hop) and counts the lost closes; returns None. what(close) says what is wrong with
    the written close, or None."""
    freed_at = time.time()
    if freed:
        os.unlink(filler)
    stop_clean(d)
    err = d.stderr_text()
    recs = d.decisions()
    closes = [x for x in recs if x.get("event") == "close" and x.get("hop") == hop]
    # the stop's report of a held record it could not write (dlog_close), not the
    # refusal of a record at once
    named = [ln for ln in err.splitlines()
             if "decision log refused a close record" in ln and
             "the log was closed before it recovered" in ln and hop in ln]
    if not freed:
        check(not closes, "a close record on a full disk: %s" % closes)
        check(named, "the lost close of %s is not named in egressd's log:\n%s"
              % (hop, d.stderr_tail(8)))
        check("could not be written before the stop" in err,
              "no count of lost closes at the stop:\n%s" % d.stderr_tail(8))
        return None
    check(len(closes) == 1, "the held close of %s was not written at the stop: %s\n%s"
          % (hop, closes, d.stderr_tail(8)))
    bad = what(closes[0])
    check(bad is None, "the held close of %s: %s: %s" % (hop, bad, closes[0]))
    check(record_time(closes[0]) >= freed_at, "the close of %s was written before the "
          "space came back (%s): not held" % (hop, closes[0]["time"]))
    check(recs[-1].get("event") == "stop" and recs.index(closes[0]) < len(recs) - 1,
          "the close is not before the stop record: %s" % [x.get("event") for x in recs[-3:]])
    check(not named, "a written close reported lost: %s" % named)
    return closes[0]
