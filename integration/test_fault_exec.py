#!/usr/bin/env python3
"""Fault test (docs/SECURITY.md, "What the fault tests prove"): kill -9 of egress-exec in the middle of a networked run.

egress-exec runs in the lab's host namespace (nsenter --net, not `ip netns exec`, which
would hide the cgroup hierarchy) against the lab's egressd (--egressd-control), with
--allow (a veth and a dynamic grant) and a worker that sleeps. SIGKILL goes to egress-exec.

Expectations:
- kill9_worker_tree_dies: the worker's whole process tree is gone within 5 s (it is in a
  pid namespace whose init dies with the supervisor).
- kill9_cleanup_removes_leftovers: `egress-exec cleanup` names the run and removes its
  cgroups, veth, mounts, run folder and state record (checked one by one).
- kill9_grant_expires: the dynamic grant egress-exec created is not revoked by anyone, and
  it expires on its own: grant.list stops listing it within wall + 60 s (its lifetime) +
  slack, and its listener refuses connections after that.
- next_run_works: a following run in the same namespace succeeds and leaves nothing.
- kill9_evidence_kept: with a private egressd and a root-owned (idmapped) repository,
  `egress-exec cleanup` moves the killed run's decision log (holding its request), egressd's
  config and the state record to /var/lib/egress-exec/killed/<run folder>/, says so, and
  removes everything else, lower/ included.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
import sandboxtest as st  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools.checks import bounded_wait, check, require_binaries  # noqa: E402

WALL_S = 5
GRANT_MARGIN_S = 60   # executor/sandbox.c SB_GRANT_MARGIN_S: grant lifetime = wall + this
STATE = "/run/egress-exec/state"


def exe_args(L, d, extra):
    return ["nsenter", "--net=/run/netns/" + L.ns_host, st.EXE, "run",
            "--egressd-control", d.control_path, "--allow", "http://origin.lab.test",
            "--wall", "%ds" % WALL_S] + extra


def grants(d):
    r = d.control({"op": "grant.list"})
    check(r.get("ok"), "grant.list: %s" % r)
    return r.get("grants", [])


def main():
    lab.require_root()
    require_binaries("egressd", "egress-exec")
    st.require_tools()
    res = Results()
    with Lab(workers=0) as L:
        d = L.egressd()
        ctx = {}

        def t_tree():
            marker = "h13k9%d" % os.getpid()
            spelled = "h13k9$((%d))" % os.getpid()
            before_state = set(os.listdir(STATE)) if os.path.isdir(STATE) else set()
            before_grants = {g["grant_id"] for g in grants(d)}
            p = subprocess.Popen(exe_args(L, d, ["--", "/bin/bash", "-c",
                                                 "(exec -a %sa sleep 300 &); exec -a %s sleep 300"
                                                 % (spelled, spelled)]),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            rid = None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and rid is None:
                now = (set(os.listdir(STATE)) if os.path.isdir(STATE) else set()) - before_state
                for cand in now:
                    if cand.endswith(".tmp"):
                        continue
                    try:
                        with open(os.path.join(STATE, cand)) as f:
                            if ("pid=%d\n" % p.pid) in f.read() and \
                                    len(st.host_processes_with(marker)) >= 2:
                                rid = cand
                    except OSError:
                        pass
                time.sleep(0.05)
            if rid is None:
                p.kill()
                p.wait(timeout=10)
            check(rid is not None, "the run did not start")
            with open(os.path.join(STATE, rid)) as f:
                ctx["rec"] = dict(ln.split("=", 1) for ln in f.read().splitlines() if "=" in ln)
            ctx["rid"] = rid
            new = [g for g in grants(d) if g["grant_id"] not in before_grants]
            check(len(new) == 1, "expected one new grant, got %s" % new)
            ctx["grant"] = new[0]
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
            ctx["killed_at"] = time.monotonic()
            gone = bounded_wait(lambda: not st.host_processes_with(marker), 5, step=0.05)
            check(gone, "worker processes outlived egress-exec: %s"
                  % st.host_processes_with(marker))

        def t_cleanup():
            check("rid" in ctx, "no killed run")
            rid = ctx["rid"]
            left = st.leftovers(L.ns_host, {"run_id": rid, "run_dir": ctx["rec"]["run_dir"]})
            print("  left behind by kill -9: %s" % left)
            cp = subprocess.run(["nsenter", "--net=/run/netns/" + L.ns_host, st.EXE, "cleanup"],
                                capture_output=True, timeout=60)
            st.forget_kept(cp.stdout)
            check(cp.returncode == 0, "cleanup rc=%d %r %r" % (cp.returncode, cp.stdout,
                                                               cp.stderr))
            if left:
                check(rid.encode() in cp.stdout, "cleanup did not name the run: %r" % cp.stdout)
            left = st.leftovers(L.ns_host, {"run_id": rid, "run_dir": ctx["rec"]["run_dir"]})
            check(not left, "leftovers after cleanup: %s" % left)

        def t_grant_expires():
            check("grant" in ctx, "no grant")
            gid = ctx["grant"]["grant_id"]
            limit = WALL_S + GRANT_MARGIN_S + 10
            ok = bounded_wait(lambda: gid not in {g["grant_id"] for g in grants(d)},
                              max(1.0, ctx["killed_at"] + limit - time.monotonic()), step=1.0)
            check(ok, "grant %s still listed %.0fs after the kill" % (gid, limit))
            took = time.monotonic() - ctx["killed_at"]
            print("  grant expired %.1fs after the kill (lifetime %ds)"
                  % (took, WALL_S + GRANT_MARGIN_S))

        def t_next_run():
            out = os.path.join(L.workdir, "next")
            os.makedirs(out, exist_ok=True)
            cp = subprocess.run(exe_args(L, d, ["--out", out, "--", "/bin/true"]),
                                capture_output=True, timeout=120)
            check(cp.returncode == 0, "next run rc=%d %s" % (cp.returncode, cp.stderr[-800:]))
            import json
            with open(os.path.join(out, "result.json")) as f:
                r = json.load(f)
            left = st.leftovers(L.ns_host, r)
            check(not left, "next run left: %s" % left)

        def t_evidence_kept():
            """kill -9 of a run with its own private egressd over a root-owned repository
            (idmapped lower/): cleanup moves the decision log (holding this run's
            record), egressd's log and config and the state record to the kept place,
            reports it, and removes the rest, lower/ included."""
            repo = os.path.join(L.workdir, "k9repo")
            os.makedirs(repo, exist_ok=True)
            with open(os.path.join(repo, "README"), "w") as f:
                f.write("root-owned\n")
            before = set(os.listdir(STATE)) if os.path.isdir(STATE) else set()
            args = ["nsenter", "--net=/run/netns/" + L.ns_host, st.EXE, "run",
                    "--allow", "http://origin.lab.test", "--wall", "60s",
                    "--egressd-setting", "dns_server=198.51.100.53",
                    "--egressd-setting", "allow_special_address=198.51.100.0/24",
                    "--repo", repo, "--", "/bin/sh", "-c",
                    "curl -s -o /dev/null http://origin.lab.test/k9evidence; exec sleep 300"]
            p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            rec = {}

            def recorded():
                now = (set(os.listdir(STATE)) if os.path.isdir(STATE) else set()) - before
                for cand in now:
                    if cand.endswith(".tmp"):
                        continue
                    try:
                        with open(os.path.join(STATE, cand)) as f:
                            r = dict(ln.split("=", 1) for ln in f.read().splitlines()
                                     if "=" in ln)
                    except OSError:
                        continue
                    if r.get("pid") != str(p.pid):
                        continue
                    dec = os.path.join(r["run_dir"], "decisions.jsonl")
                    try:
                        with open(dec) as f:
                            if "k9evidence" in f.read() and \
                                    os.path.isdir(os.path.join(r["run_dir"], "lower")):
                                rec.update(r, rid=cand)
                                return True
                    except OSError:
                        pass
                return p.poll() is not None

            bounded_wait(recorded, 40, step=0.1)
            if "rid" not in rec:
                p.kill()
                p.wait(timeout=10)
                check(False, "the run did not record its request (rc %s): %r" %
                      (p.poll(), p.stderr.read()[-600:]))
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
            p.stderr.close()
            time.sleep(0.5)
            rd = rec["run_dir"]
            check(os.path.isdir(os.path.join(rd, "lower")), "lower/ gone before cleanup")
            cp = subprocess.run(["nsenter", "--net=/run/netns/" + L.ns_host, st.EXE, "cleanup"],
                                capture_output=True, timeout=60, text=True)
            check(cp.returncode == 0, "cleanup rc=%d %r %r" % (cp.returncode, cp.stdout,
                                                               cp.stderr))
            kept = os.path.join("/var/lib/egress-exec/killed", os.path.basename(rd))
            try:
                check(("kept the evidence of %s in %s" % (rec["rid"], kept)) in cp.stdout,
                      "cleanup did not report the kept evidence: %r" % cp.stdout)
                with open(os.path.join(kept, "decisions.jsonl")) as f:
                    check("k9evidence" in f.read(), "the kept decision log lost the record")
                for n in ("egressd.ini", "state"):
                    check(os.path.isfile(os.path.join(kept, n)), "%s not kept" % n)
                left = st.leftovers(L.ns_host, {"run_id": rec["rid"], "run_dir": rd})
                check(not left, "leftovers after cleanup: %s" % left)
                check(not os.path.exists(os.path.join(rd, "lower")), "lower/ left")
            finally:
                shutil.rmtree(kept, ignore_errors=True)

        res.run("kill9_worker_tree_dies", t_tree)
        res.run("kill9_cleanup_removes_leftovers", t_cleanup)
        res.run("kill9_grant_expires", t_grant_expires)
        res.run("next_run_works", t_next_run)
        res.run("kill9_evidence_kept", t_evidence_kept)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
