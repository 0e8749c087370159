#!/usr/bin/env python3
"""bench/exec_steps.py BUILD_DIR [RUNS] - where egress-exec's start-up and teardown time goes.

Runs `egress-exec run --repo R -- /bin/true` RUNS times (default 10) per variant under
`strace -f -ttt -T`, finds the system calls that begin each step (the table EVENTS below,
each the first match after the previous step's), and prints the mean duration of every
step over the runs, as milliseconds and as a share of the mean traced run (means, so that the
steps add up to the whole; the totals are also given as medians). strace slows every
system call, so absolute times are inflated (read the shares, and `make bench`'s untraced
start-up figures for the totals); a step whose marker is missing in a run (a variant without
network has no egressd) is left out of that run.

Variants: nonet (no network), net (--allow: a private egressd per run), netd (--allow with
--egressd-control: a running egressd). The network variants run in a network namespace of
their own (unshare -n), as in bench/run.sh. Root only. Output: a markdown table on stdout.
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# (event name, regex): the step from one event to the next is named after the first.
EVENTS = [
    ("exec + dynamic loading", r"execve\("),
    ("main: options, capability reads", r"prctl\(PR_CAPBSET_READ"),
    ("run id, state file", r'openat\(AT_FDCWD, "/run/egress-exec/state/'),
    ("private egressd: spawned (it starts while the steps below run)", r'execve\("[^"]*/egressd"'),
    ("namespace probe forked; seccomp: compile once (libseccomp, exported as BPF)",
     r"seccomp\(SECCOMP_SET_MODE_STRICT"),
    ("self-test forked; cgroup: create, limits, read back",
     r'mkdir\("/sys/fs/cgroup/[^"]*/egx-[0-9a-f]{8}"'),
    ("layer tmpfs, upper/work", r'mount\("tmpfs", "[^"]*/layer"'),
    ("clone into new namespaces; cgroup attach (overlaps the probes)",
     r"clone\(child_stack=NULL, flags=CLONE_NEWNS\|CLONE_NEWUTS"),
    ("attestation collected: namespace probe and self-test reaped",
     r"kill\(\d+, SIGKILL"),
    ("veth + listener, egressd ready (readiness pipe), grant (network); go",
     r'rmdir\("/run/egress-exec/probe-'),
    ("child: rtnetlink (lo, veth)", r"unshare\(CLONE_NEWCGROUP[) ]"),
    ("mounts: tmpfs root, read-only binds, /dev, /proc, overlay", r'mount\(NULL, "/", NULL, MS_REC\|MS_PRIVATE'),
    ("pivot_root + detach the old root", r"pivot_root\("),
    ("init (pid 1) set-up, fork of the worker", r'mount\(NULL, "/", NULL, MS_RDONLY'),
    ("worker: fds, rlimits, capabilities, ids", r"clone.*\) = 2 <"),
    ("seccomp: install the compiled filter, read back", r"seccomp\(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, \{"),
    ("the worker (/bin/true)", r'execve\("/bin/true"'),
    ("teardown: init exit, reap, cgroup read-back", r"exit_group\("),
    ("teardown: cgroup removed, grant revoked, veth (a merged view only with --out)",
     r'rmdir\("/sys/fs/cgroup/[^"]*/egx-[0-9a-f]+"\)'),
    ("teardown: unmount, egressd stop, state removal, exit", r'umount2\("[^"]*/(merged|layer)"'),
]
FIRST_INSTR = "the worker (/bin/true)"
TEARDOWN = "teardown:"


def parse(path):
    """[(t, text)] of a strace -f -ttt file."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            parts = line.split(None, 2)
            if len(parts) < 3:
                continue
            try:
                t = float(parts[1])
            except ValueError:
                continue
            out.append((t, parts[2]))
    return out


def steps(lines):
    """{step: ms}, total ms, ms to the worker's execve."""
    found = []
    pos = 0
    for name, rx in EVENTS:
        r = re.compile(rx)
        for i in range(pos, len(lines)):
            # (a call that strace split shows its result on the "<... resumed>" line)
            if r.search(lines[i][1]):
                found.append((name, i))
                pos = i + 1
                break
    res = {}
    for k, (name, i) in enumerate(found):
        end = found[k + 1][1] if k + 1 < len(found) else len(lines) - 1
        res[name] = (lines[end][0] - lines[i][0]) * 1000.0
    total = (lines[-1][0] - lines[0][0]) * 1000.0
    first = None
    for name, i in found:
        if name == FIRST_INSTR:
            first = (lines[i][0] - lines[0][0]) * 1000.0
    return res, total, first


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: exec_steps.py BUILD_DIR [RUNS]")
    if os.geteuid() != 0:
        sys.exit("exec_steps: needs root")
    build = os.path.abspath(sys.argv[1])
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    exe = os.path.join(build, "executor", "egress-exec")
    egressd = os.path.join(build, "egressd", "egressd")
    for b in (exe, egressd, shutil.which("strace") or "/nonexistent"):
        if not os.access(b, os.X_OK):
            sys.exit(f"exec_steps: {b} is missing")
    tmp = tempfile.mkdtemp(prefix="egress-steps.")
    os.chmod(tmp, 0o755)
    repo = os.path.join(tmp, "repo")
    os.mkdir(repo)
    os.chown(repo, 65534, 65534)
    ctl = os.path.join(tmp, "ctl")
    os.mkdir(ctl)
    with open(os.path.join(ctl, "egressd.ini"), "w") as f:
        f.write(f"[egressd]\ncontrol_socket = {ctl}/control.sock\ndecision_log = {ctl}/decisions.jsonl\n")
    variants = {
        "nonet": ("egress-exec run (no network)", []),
        "net": ("egress-exec run --allow (private egressd)", ["--allow", "https://bench.example.com"]),
        "netd": ("egress-exec run --allow --egressd-control (running egressd)",
                 ["--egressd-control", f"{ctl}/control.sock", "--allow", "https://bench.example.com"]),
    }
    results = {}
    try:
        for v, (label, extra) in variants.items():
            per = []
            for r in range(runs):
                trace = os.path.join(tmp, f"{v}.{r}.txt")
                cmd = ["strace", "-f", "-ttt", "-T", "-o", trace, exe, "run", "--repo", repo] + extra + \
                      ["--", "/bin/true"]
                if v == "nonet":
                    argv = cmd
                elif v == "net":
                    argv = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"] + cmd
                else:
                    # A running egressd inside the namespace, stopped by pid by the inner shell.
                    inner = ('ip link set lo up || exit 1; "$1" -f -c "$2" 2>>"$3" & e=$!; '
                             'trap "kill $e; wait $e" EXIT; i=0; '
                             'while [ ! -S "$4" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; '
                             'shift 4; "$@"')
                    argv = ["unshare", "-n", "sh", "-c", inner, "sh", egressd, f"{ctl}/egressd.ini",
                            f"{ctl}/egressd.log", f"{ctl}/control.sock"] + cmd
                p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
                if p.returncode != 0:
                    print(f"exec_steps: {v} run {r} failed: {p.stderr.decode()[-300:]}", file=sys.stderr)
                    continue
                per.append(steps(parse(trace)))
                os.unlink(trace)
                time.sleep(0.1)
            results[v] = (label, per)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"Per-step means over {runs} traced runs per variant (strace -f -ttt -T; ms, and share "
          f"of the mean traced run; a step absent from a run counts 0 there). Load average "
          f"{open('/proc/loadavg').read().split()[0]} at the end.")
    print()
    names = [n for n, _ in EVENTS]
    hdr = "| step |" + "".join(f" {results[v][0]} |" for v in results)
    print(hdr)
    print("|---|" + "---:|" * len(results))
    for n in names:
        cells = []
        any_ = False
        for v in results:
            per = results[v][1]
            vals = [s.get(n, 0.0) for s, _, _ in per]
            tots = [t for _, t, _ in per]
            if per and sum(1 for s, _, _ in per if n in s) * 2 >= len(per):
                any_ = True
                m = statistics.mean(vals)
                share = 100.0 * m / statistics.mean(tots)
                cells.append(f"{m:.1f} ({share:.0f}%)")
            else:
                cells.append("—")
        if any_:
            print(f"| {n} |" + "".join(f" {c} |" for c in cells))
    for lab, fn in (("to the worker's first instruction (traced), mean / median", lambda x: x[2]),
                    ("whole run (traced), mean / median", lambda x: x[1])):
        cells = []
        for v in results:
            vals = [fn(x) for x in results[v][1] if fn(x) is not None]
            cells.append(f"**{statistics.mean(vals):.1f}** / {statistics.median(vals):.1f}" if vals else "—")
        print(f"| {lab} |" + "".join(f" {c} |" for c in cells))
    cells = []
    for v in results:
        vals = [sum(ms for n, ms in s.items() if n.startswith(TEARDOWN)) for s, _, _ in results[v][1]]
        cells.append(f"{statistics.mean(vals):.1f}" if vals else "—")
    print("| teardown, all steps (traced), mean |" + "".join(f" {c} |" for c in cells))


if __name__ == "__main__":
    main()
