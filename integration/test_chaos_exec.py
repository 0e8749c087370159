#!/usr/bin/env python3
"""The chaos test, egress-exec half (issue 19; docs/SECURITY.md, "What the fault tests prove").

EGRESS_CHAOS_EXEC_RUNS networked runs (default 6, three at a time) against the lab's
egressd, each worker fetching http://origin.lab.test through its listener in a loop; each
egress-exec gets SIGKILL at a random point between its start and 4 s later (some before
the sandbox is up, some while the worker is talking). Then `egress-exec cleanup`.

Invariants:
- nothing is left on the host: no state record, cgroup, veth or run-folder mount of any
  of this test's runs (st.leftovers for each), no state record of them at all (also of
  a run killed before the watcher saw its record; a run is ours when its record's pid and
  start time are an egress-exec this test started: parallel tests' live runs keep
  theirs), and no new egx* veth in this lab's namespace or empty egress/ cgroup at all
  (also of runs killed before their state record existed);
- every killed run's records are kept: egressd's decision log still holds every record of
  the runs' grants seen before the cleanup, every allow of them has its close (the worker's
  connections die with its pid namespace), and the chain verifies;
- egressd never died and stops cleanly (exit 0, no sanitizer report).
The evidence cleanup kept of this test's runs is removed at the end.
"""

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
import sandboxtest as st  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools.checks import bounded_wait, check, require_binaries, stop_clean  # noqa: E402

RUNS = int(os.environ.get("EGRESS_CHAOS_EXEC_RUNS", "6"))
STATE = "/run/egress-exec/state"
WORKER = ("import os, socket, time\n"
          "p = os.environ['HTTP_PROXY'][7:]\n"
          "h, port = p.rsplit(':', 1)\n"
          "for _ in range(400):\n"
          "    try:\n"
          "        s = socket.create_connection((h, int(port)), timeout=5)\n"
          "        s.sendall(b'GET http://origin.lab.test/ HTTP/1.0\\r\\n\\r\\n')\n"
          "        s.recv(64)\n"
          "        s.close()\n"
          "    except OSError:\n"
          "        pass\n"
          "    time.sleep(0.02)\n")


def state_ids():
    try:
        return {n for n in os.listdir(STATE) if not n.endswith(".tmp")}
    except OSError:
        return set()


def read_state(rid):
    try:
        with open(os.path.join(STATE, rid)) as f:
            return dict(ln.split("=", 1) for ln in f.read().splitlines() if "=" in ln)
    except OSError:
        return None


def pid_start(pid):
    """/proc/<pid>/stat starttime, as egress-exec writes it in its state record ("start=")."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def is_ours(rec, ours):
    """A state record of one of this test's runs: its pid and start time are those of an
    egress-exec this test started. /run/egress-exec/state is the machine's: runs of tests
    running in parallel (ctest -j, other checkouts) have their records there too, and a
    live run's record rightly survives `egress-exec cleanup`."""
    return rec is not None and (rec.get("pid"), rec.get("start")) in ours


def empty_cgroup(path):
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return not f.read().strip()
    except OSError:
        return False


def host_snapshot(ns):
    """What runs leave if nobody cleans up, whether or not their state record exists:
    veths in this lab's egressd namespace, and run cgroups with no process in them (a
    live run of another test running in parallel always has its worker in its cgroup)."""
    out = set()
    cp = subprocess.run(["ip", "-n", ns, "-o", "link", "show"], capture_output=True,
                        text=True, timeout=10)
    out |= {"veth " + ln.split(":")[1].strip().split("@")[0]
            for ln in cp.stdout.splitlines() if ": egx" in ln}
    for root, dirs, _files in os.walk("/sys/fs/cgroup"):
        if os.path.basename(root) == "egress":
            out |= {"cgroup " + os.path.join(root, x) for x in dirs
                    if empty_cgroup(os.path.join(root, x))}
            dirs[:] = []
        elif root.count("/") > 6:
            dirs[:] = []   # bounded walk
    return out


def forget_ours(cleanup_stdout, ours):
    """Remove the evidence cleanup kept (st.KEEP_DIR) of this test's runs only: the copy
    of the state record there names the run's pid and start time."""
    for line in cleanup_stdout.decode(errors="replace").splitlines():
        if not line.startswith("kept the evidence of ") or " in " + st.KEEP_DIR + "/" not in line:
            continue
        d = line.split(" in ", 1)[1].split(":", 1)[0]
        if os.path.dirname(d) != st.KEEP_DIR:
            continue
        try:
            with open(os.path.join(d, "state")) as f:
                rec = dict(ln.split("=", 1) for ln in f.read().splitlines() if "=" in ln)
        except OSError:
            continue
        if is_ours(rec, ours):
            shutil.rmtree(d, ignore_errors=True)


def grant_ids(d):
    try:
        r = d.control({"op": "grant.list"})
    except OSError:
        return set()
    return {g["grant_id"] for g in r.get("grants", [])}


def t_runs_killed(L, d):
    rnd = random.Random(os.getpid())
    before = state_ids()
    host0 = host_snapshot(L.ns_host)
    seen_runs = {}
    ours = set()        # (pid, start) of every egress-exec this test started
    seen_grants = set()
    lock = threading.Lock()
    stop = threading.Event()

    def watch():  # bounded by stop: the runs' state records and grants as they appear
        while not stop.is_set():
            for rid in state_ids() - before:
                rec = read_state(rid)
                with lock:
                    if is_ours(rec, ours):
                        seen_runs.setdefault(rid, rec)
            g = grant_ids(d)
            with lock:
                seen_grants.update(g)
            time.sleep(0.05)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    kills = []
    for batch in range(0, RUNS, 3):
        procs = []
        for _ in range(min(3, RUNS - batch)):
            p = subprocess.Popen(["nsenter", "--net=/run/netns/" + L.ns_host, st.EXE, "run",
                                  "--egressd-control", d.control_path, "--allow",
                                  "http://origin.lab.test", "--wall", "30s", "--"] +
                                 st.py(WORKER), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            # nsenter execs egress-exec: same pid, same start time (the pid stays ours,
            # a zombie at worst, until p.wait below).
            start = pid_start(p.pid)
            with lock:
                ours.add((str(p.pid), start))
            procs.append((p, time.monotonic() + rnd.uniform(0.05, 4.0)))
        for p, at in sorted(procs, key=lambda x: x[1]):
            time.sleep(max(0.0, at - time.monotonic()))
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                kills.append(round(at, 2))
            p.wait(timeout=30)
    time.sleep(0.5)
    stop.set()
    w.join(timeout=5)
    check(d.alive(), "egressd died:\n%s" % d.stderr_tail())
    ours_g = {g for g in seen_grants}
    recs_before = [r for r in d.decisions() if r.get("grant_id") in ours_g]
    cp = subprocess.run(["nsenter", "--net=/run/netns/" + L.ns_host, st.EXE, "cleanup"],
                        capture_output=True, timeout=120)
    check(cp.returncode == 0, "cleanup rc=%d %r" % (cp.returncode, cp.stderr[-400:]))
    forget_ours(cp.stdout, ours)
    left = []
    for rid, rec in seen_runs.items():
        left += st.leftovers(L.ns_host, {"run_id": rid, "run_dir": rec.get("run_dir")})
    check(not left, "left on the host after cleanup: %s" % left)
    # Every record of ours is gone (also of a run killed before the watcher saw it); a
    # record that cannot be read is a defect whoever wrote it (records are complete or
    # absent); other runs' records are theirs.
    left_recs = {}
    for rid in state_ids() - before:
        rec = read_state(rid)
        gone = rec is None and not os.path.exists(os.path.join(STATE, rid))
        complete = rec is not None and "pid" in rec and "start" in rec
        if is_ours(rec, ours) or not (gone or complete):
            left_recs[rid] = rec
    check(not left_recs, "state records left: %s" % left_recs)
    extra = host_snapshot(L.ns_host) - host0
    if extra:   # a parallel test's run may be between mkdir and its first process
        time.sleep(2)
        extra &= host_snapshot(L.ns_host) - host0
    check(not extra, "left on the host (any run, with or without a state record): %s"
          % sorted(extra))
    # the killed runs' records: nothing lost, every allow closed, the chain intact
    recs_after = [r for r in d.decisions() if r.get("grant_id") in ours_g]
    check(recs_after[:len(recs_before)] == recs_before, "records of killed runs changed")
    allows = {r.get("hop") for r in recs_after
              if r.get("event") == "decision" and r.get("verdict") == "allow"}

    def closed():
        closes = {r.get("hop") for r in d.decisions() if r.get("event") == "close"}
        return allows <= closes
    check(bounded_wait(closed, 10, step=0.2), "allows of killed runs without a close: %s"
          % sorted(allows - {r.get("hop") for r in d.decisions()
                             if r.get("event") == "close"})[:10])
    rc, out, err = d.egressctl("log", "verify", d.log_path)
    check(rc == 0, "chain does not verify: %s" % (out + err)[-400:])
    print("  %d runs, %d killed, %d reached a state record, %d grants, %d records of "
          "theirs kept" % (RUNS, len(kills), len(seen_runs), len(ours_g), len(recs_after)))


def main():
    lab.require_root()
    require_binaries("egressd", "egressctl", "egress-exec")
    st.require_tools()
    res = Results()
    with Lab(workers=0) as L:
        d = L.egressd()
        res.run("runs_killed_then_cleanup", t_runs_killed, L, d)
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
