#!/usr/bin/env python3
"""bench/egressd_ready.py EGRESSD [ROUTE] [N] [EGRESSD2 ...] - egressd's own start-up.

The time from spawning egressd to its readiness byte (EGRESSD_READY_FD, the descriptor
egress-exec's private egressd writes to once it serves: listeners, control socket,
decision log, privilege drop and filter done), N starts per binary (default 15), the
binaries interleaved start by start, with the configuration egress-exec writes for a
private egressd (route = system unless ROUTE is given, a pac_copy folder, drain_timeout
1s; its config, control socket and decision log in a fresh folder each time). Prints the
p50, min and max per binary and the load average. Root (egressd drops to its account).
Each egressd is stopped (SIGTERM, then waited for) before the next starts; every wait is
bounded.

Example: sudo python3 bench/egressd_ready.py build/egressd/egressd system 15 OLD/egressd
"""
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def one(binp, route):
    d = tempfile.mkdtemp(prefix="egress-ready.")
    try:
        os.chmod(d, 0o711)
        pac = os.path.join(d, "pac")
        os.mkdir(pac)
        try:
            pw = pwd.getpwnam("egressd")
        except KeyError:
            pw = pwd.getpwnam("nobody")
        os.chown(pac, pw.pw_uid, pw.pw_gid)
        with open(os.path.join(d, "egressd.ini"), "w") as f:
            f.write("[egressd]\ncontrol_socket = %s/egressd.sock\ndecision_log = %s/"
                    "decisions.jsonl\ndrain_timeout = 1s\nroute = %s\n" % (d, d, route))
            if route == "system":
                f.write("pac_copy = %s/egressd-pac.js\n" % pac)
        r, w = os.pipe()
        env = dict(os.environ, EGRESSD_READY_FD=str(w))
        t0 = time.monotonic()
        p = subprocess.Popen([binp, "-c", os.path.join(d, "egressd.ini"), "-f"], env=env,
                             pass_fds=(w,), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(w)
        try:
            got = os.read(r, 1)     # the byte, or EOF when egressd ended first
            t1 = time.monotonic()
        finally:
            os.close(r)
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        return (t1 - t0) * 1000 if got == b"R" else None
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    if len(sys.argv) < 2 or os.geteuid() != 0:
        sys.exit(__doc__)
    bins = [sys.argv[1]]
    route = sys.argv[2] if len(sys.argv) > 2 else "system"
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    bins += sys.argv[4:]
    times = {b: [] for b in bins}
    failed = {b: 0 for b in bins}
    for _ in range(n):
        for b in bins:
            t = one(b, route)
            if t is None:
                failed[b] += 1
            else:
                times[b].append(t)
    for b in bins:
        ts = sorted(times[b])
        if ts:
            print("%s route=%s p50 %.1f min %.1f max %.1f ms (%d starts, %d failed)" % (
                b, route, statistics.median(ts), ts[0], ts[-1], len(ts), failed[b]))
        else:
            print("%s route=%s: no start reached readiness (%d failed)" % (b, route, failed[b]))
    print("load:", " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
