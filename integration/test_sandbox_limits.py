#!/usr/bin/env python3
"""Resource bounds of `egress-exec run` (docs/sandbox.md, the cgroup step): fork bomb, memory balloon, disk
fill, CPU spin on more CPUs than granted, sleeping past the wall budget, a setsid daemon
that outlives its parent, a stdout flood. Each run ends bounded, says why, leaves nothing
behind, and the host repository is unchanged."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sandboxtest as st  # noqa: E402
from sandboxtest import check  # noqa: E402


def no_leftovers(ns, r):
    left = st.leftovers(ns, r.result)
    check(not left, "leftovers: %s" % left)


FORKBOMB = r'''
import json, os, time
n = 0
err = ""
kids = []
for i in range(2000):
    try:
        p = os.fork()
    except OSError as e:
        err = str(e.errno)
        break
    if p == 0:
        time.sleep(30)
        os._exit(0)
    kids.append(p)
    n += 1
print(json.dumps({"forked": n, "err": err}), flush=True)
os._exit(0)
'''


def t_fork_bomb(ns, repo):
    r = st.run(ns, ["--repo", repo.path, "--pids", "32", "--wall", "20s"], st.py(FORKBOMB))
    res = r.json_line()
    check(res["forked"] < 32 and res["err"] == "11", "fork bomb not bounded: %s" % res)
    check(r.result.get("peak_pids", 0) <= 32, r.describe())
    check(r.elapsed < 15, "took %.1fs" % r.elapsed)
    check(not st.host_processes_with("time.sleep(30)"), "forked children survived")
    check(repo.unchanged(), "host repository changed")
    no_leftovers(ns, r)


BALLOON = r'''
import sys
chunks = []
for i in range(64):
    chunks.append(bytearray(16 * 1024 * 1024))
    for j in range(0, len(chunks[-1]), 4096):
        chunks[-1][j] = 1
print("survived", flush=True)
'''


def t_memory_balloon(ns, repo):
    r = st.run(ns, ["--repo", repo.path, "--memory", "64M", "--wall", "30s"], st.py(BALLOON))
    check(r.rc == 13, r.describe())
    check(b"survived" not in r.stdout, "the balloon was not stopped")
    check(r.result.get("reason") == "oom" and r.result.get("oom_killed"), r.describe())
    check(r.result.get("peak_memory_bytes", 0) <= 64 * 1024 * 1024 + 65536, r.describe())
    no_leftovers(ns, r)


DISKFILL = r'''
import json, os
res = {}
for p in ["/work/big", "/tmp/big", "/dev/shm/big"]:
    n = 0
    try:
        with open(p, "wb") as f:
            for i in range(64):
                f.write(b"x" * (1024 * 1024))
                f.flush()
                n += 1
        res[p] = "wrote:%d" % n
    except OSError as e:
        res[p] = "stopped:%d:%d" % (n, e.errno)
    try:
        os.unlink(p)
    except OSError:
        pass
for d in ["/work/many", "/tmp/many"]:
    n = 0
    try:
        os.mkdir(d)
        for i in range(200000):
            os.mkdir("%s/%d" % (d, i))
            n += 1
        res[d] = "made:%d" % n
    except OSError as e:
        res[d] = "stopped:%d:%d" % (n, e.errno)
print(json.dumps(res))
'''


TMPFILL = r'''
import json, os
n = 0
res = {}
try:
    with open("/tmp/fill", "wb") as f:
        for i in range(160):
            f.write(b"x" * (1024 * 1024))
            f.flush()
            n += 1
    res["tmp"] = "wrote:%d" % n
except OSError as e:
    res["tmp"] = "stopped:%d:%d" % (n, e.errno)
print(json.dumps(res), flush=True)
'''


def t_tmp_counts_against_memory(ns, repo):
    """Files in the worker's /tmp are tmpfs pages charged to the run's memory cgroup
    (docs/sandbox.md): under --memory 48M with --disk 256M, 160 MiB in /tmp never fits;
    the worker is OOM-killed or its write fails with ENOMEM, never ENOSPC."""
    r = st.run(ns, ["--repo", repo.path, "--memory", "48M", "--disk", "256M", "--wall", "60s"],
               st.py(TMPFILL))
    if r.result.get("reason") == "oom":
        check(r.rc == 13, r.describe())
    else:
        v = r.json_line()["tmp"]
        check(v.startswith("stopped:") and v.endswith(":12"), "/tmp not bounded by memory: %s"
              % v)
    no_leftovers(ns, r)


def t_disk_fill(ns, repo):
    import signal
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        r = st.run(ns, ["--repo", repo.path, "--disk", "8M", "--wall", "30s"],
                   st.py(DISKFILL))
    finally:
        signal.signal(signal.SIGXFSZ, old)
    res = r.json_line() if r.rc == 0 else None
    check(res is not None, r.describe())
    for p, v in res.items():
        check(v.startswith("stopped:"), "%s not bounded: %s" % (p, v))
        if p.endswith("/many"):
            # inodes are bounded too (directories take no blocks)
            check(int(v.split(":")[1]) <= 8 * 1024 * 1024 // 2048, "%s: %s" % (p, v))
        else:
            check(int(v.split(":")[1]) <= 8, "%s wrote too much: %s" % (p, v))
    check(repo.unchanged(), "host repository changed")
    no_leftovers(ns, r)


SPIN = r'''
import os, time
def spin(sec):
    end = time.time() + sec
    while time.time() < end:
        pass
kids = []
for i in range(4):
    p = os.fork()
    if p == 0:
        spin(3)
        os._exit(0)
    kids.append(p)
for p in kids:
    os.waitpid(p, 0)
print("done", flush=True)
'''


def t_cpu_spin(ns, repo):
    r = st.run(ns, ["--repo", repo.path, "--cpu", "500m", "--wall", "30s"], st.py(SPIN))
    check(r.rc == 0, r.describe())
    wall_s = r.result["wall_ms"] / 1000.0
    cpu_s = r.result["cpu_usec"] / 1e6
    # 4 spinners for 3 s would use 6+ CPU-seconds on 2 cores; half a CPU allows ~1.5.
    check(cpu_s <= 0.5 * wall_s * 1.25 + 0.3, "cpu %.2fs over %.2fs wall with 500m" %
          (cpu_s, wall_s))
    check(r.result["limits_applied"]["cpu_quota_us"] == 50000, r.describe())
    no_leftovers(ns, r)


def t_timeout(ns, repo):
    t0 = time.monotonic()
    r = st.run(ns, ["--repo", repo.path, "--wall", "2s"], ["/bin/sh", "-c",
                                                            "sleep 300; echo late"])
    check(r.rc == 13 and r.result.get("reason") == "timeout" and r.result.get("timed_out"),
          r.describe())
    check(time.monotonic() - t0 < 10, "the wall budget was not enforced promptly")
    check(b"late" not in r.stdout, "the worker continued")
    no_leftovers(ns, r)


def t_setsid_daemon(ns, repo):
    marker = "h7daemon%d" % os.getpid()
    script = ("(setsid sh -c 'exec -a %s sleep 300' </dev/null >/dev/null 2>&1 &); "
              "(nohup sh -c 'trap \"\" HUP TERM; exec -a %sb sleep 300' >/dev/null 2>&1 &); "
              "sleep 0.5; echo parent-done" % (marker, marker))
    r = st.run(ns, ["--repo", repo.path, "--wall", "20s"], ["/bin/bash", "-c", script])
    check(r.rc == 0 and b"parent-done" in r.stdout, r.describe())
    check(r.elapsed < 15, "the run waited for the daemon: %.1fs" % r.elapsed)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and st.host_processes_with(marker):
        time.sleep(0.1)
    check(not st.host_processes_with(marker), "daemon survived: %s" %
          st.host_processes_with(marker))
    no_leftovers(ns, r)


def t_background_at_timeout(ns, repo):
    marker = "h7bg%d" % os.getpid()
    script = "(setsid sh -c 'exec -a %s sleep 300' &) ; sleep 300" % marker
    r = st.run(ns, ["--repo", repo.path, "--wall", "2s"], ["/bin/bash", "-c", script])
    check(r.result.get("reason") == "timeout", r.describe())
    check(not st.host_processes_with(marker), "background process survived the timeout")
    no_leftovers(ns, r)


def t_stdout_flood(ns, repo):
    r = st.run(ns, ["--repo", repo.path, "--output", "64K", "--wall", "20s"],
               ["/bin/sh", "-c", "head -c 20000000 /dev/zero | tr '\\0' x; "
                "head -c 300000 /dev/zero >&2; echo end"])
    check(r.rc == 0, r.describe())
    check(len(r.stdout) == 65536, "stdout %d bytes" % len(r.stdout))
    check(r.result["out_truncated"] and r.result["out_len"] == 65536, r.describe())
    check(r.result["err_truncated"] and r.result["err_len"] == 65536, r.describe())
    no_leftovers(ns, r)


def t_small_output_not_truncated(ns, repo):
    r = st.run(ns, ["--repo", repo.path, "--output", "64K"], ["/bin/echo", "hi"])
    check(r.rc == 0 and r.stdout == b"hi\n" and not r.result["out_truncated"], r.describe())


def t_exit_status(ns, repo):
    r = st.run(ns, ["--repo", repo.path], ["/bin/sh", "-c", "exit 7"])
    check(r.rc == 13 and r.result["exit_code"] == 7 and
          r.result["reason"] == "worker_failed", r.describe())
    r = st.run(ns, ["--repo", repo.path], ["/bin/sh", "-c", "kill -TERM $$"])
    check(r.rc == 13 and r.result["term_signal"] == 15, r.describe())
    r = st.run(ns, ["--repo", repo.path], ["/nonexistent/binary"])
    check(r.rc == 13 and not r.result["started"], r.describe())


def t_stdin_prompt(ns, repo):
    import tempfile
    with tempfile.NamedTemporaryFile("w", delete=False, dir="/tmp", prefix="h7prompt-") as f:
        f.write("prompt line 1\nline 2\n")
    try:
        r = st.run(ns, ["--repo", repo.path, "--stdin", f.name], ["/bin/cat"])
        check(r.rc == 0 and r.stdout == b"prompt line 1\nline 2\n", r.describe())
        r = st.run(ns, ["--repo", repo.path], ["/bin/cat"])
        check(r.rc == 0 and r.stdout == b"", "stdin is not /dev/null: %r" % r.stdout)
    finally:
        os.unlink(f.name)


def t_stdin_unread(ns, repo):
    """A worker that never reads a large prompt: the supervisor must not die of SIGPIPE."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", delete=False, dir="/tmp", prefix="h7prompt-") as f:
        f.write("p" * 200000)
    try:
        r = st.run(ns, ["--repo", repo.path, "--stdin", f.name], ["/bin/true"])
        check(r.rc == 0 and r.result.get("reason") == "allowed", r.describe())
        check(not st.leftovers(ns, r.result), "leftovers: %s" % st.leftovers(ns, r.result))
    finally:
        os.unlink(f.name)


def t_sigterm_tears_down(ns, repo):
    """SIGTERM to egress-exec mid-run: the whole tree is killed, everything is torn down and
    the result says why."""
    import signal
    marker = "h7term%d" % os.getpid()
    # the marker is assembled by the shell, so egress-exec's own argv does not match it
    spelled = "h7term$((%d))" % os.getpid()
    started = st.start(ns, ["--repo", repo.path, "--wall", "60s"],
                       ["/bin/bash", "-c", "(setsid bash -c \"exec -a %s sleep 300\" &); "
                        "exec -a %sb sleep 300" % (spelled, spelled)])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(st.host_processes_with(marker)) < 2:
        time.sleep(0.05)
    check(len(st.host_processes_with(marker)) >= 2, "the worker did not start")
    started[0].send_signal(signal.SIGTERM)
    r = st.collect(started, timeout=30)
    check(r.rc == 13 and "signal 15" in r.result.get("message", ""), r.describe())
    check(not st.host_processes_with(marker), "processes survived SIGTERM")
    check(not st.leftovers(ns, r.result), "leftovers: %s" % st.leftovers(ns, r.result))


def t_kill9_cleanup(ns, repo):
    """egress-exec killed with SIGKILL mid-run: the worker dies with it, and `egress-exec
    cleanup` removes the cgroup, mounts, run folder and state record it left."""
    import signal
    import subprocess
    marker = "h7k9%d" % os.getpid()
    before = set(os.listdir("/run/egress-exec/state")) if os.path.isdir(
        "/run/egress-exec/state") else set()
    spelled = "h7k9$((%d))" % os.getpid()
    p = subprocess.Popen(["nsenter", "--net=/run/netns/%s" % ns, st.EXE, "run", "--repo",
                          repo.path, "--wall", "60s", "--", "/bin/bash", "-c",
                          "exec -a %s sleep 300" % spelled],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rid = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and rid is None:
        now = set(os.listdir("/run/egress-exec/state")) - before
        for cand in now:
            if cand.endswith(".tmp"):
                continue
            try:
                with open("/run/egress-exec/state/" + cand) as f:
                    if ("pid=%d\n" % p.pid) in f.read() and st.host_processes_with(marker):
                        rid = cand
            except OSError:
                pass
        time.sleep(0.05)
    check(rid is not None, "the run did not start")
    with open("/run/egress-exec/state/" + rid) as f:
        rec = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and st.host_processes_with(marker):
        time.sleep(0.05)
    check(not st.host_processes_with(marker), "the worker outlived egress-exec")
    check(os.path.exists("/sys/fs/cgroup/pids%s/egress/%s" % (st._self_cgroup("pids"), rid)),
          "no leftover to clean?")
    cp = subprocess.run(["nsenter", "--net=/run/netns/%s" % ns, st.EXE, "cleanup"],
                        capture_output=True, timeout=60)
    check(cp.returncode == 0, "cleanup rc=%d %r %r" % (cp.returncode, cp.stdout, cp.stderr))
    check(rid.encode() in cp.stdout, "cleanup did not name the stale run: %r" % cp.stdout)
    check(st.forget_kept(cp.stdout), "cleanup kept no evidence (state record) of the run")
    left = st.leftovers(ns, {"run_id": rid, "run_dir": rec["run_dir"]})
    check(not left, "leftovers after cleanup: %s" % left)
    check(repo.unchanged(), "host repository changed")


def main():
    st.require_root()
    st.require_tools()
    results = st.Results()
    repo = st.Repo()
    try:
        with st.NetNS("l") as ns:
            for name, fn in [("fork_bomb", t_fork_bomb), ("memory_balloon", t_memory_balloon),
                             ("disk_fill", t_disk_fill), ("cpu_spin", t_cpu_spin),
                             ("tmp_counts_against_memory", t_tmp_counts_against_memory),
                             ("timeout", t_timeout), ("setsid_daemon", t_setsid_daemon),
                             ("background_at_timeout", t_background_at_timeout),
                             ("stdout_flood", t_stdout_flood),
                             ("small_output", t_small_output_not_truncated),
                             ("exit_status", t_exit_status),
                             ("stdin_prompt", t_stdin_prompt),
                             ("stdin_unread", t_stdin_unread),
                             ("sigterm_tears_down", t_sigterm_tears_down),
                             ("kill9_cleanup", t_kill9_cleanup)]:
                results.run(name, fn, ns.name, repo)
        check_final = repo.unchanged()
        if not check_final:
            print("FAIL host repository changed over the suite")
            results.failed += 1
    finally:
        repo.remove()
    return results.finish()


if __name__ == "__main__":
    sys.exit(main())
