#!/usr/bin/env python3
"""Every command the documentation shows as an example runs as written, so the docs cannot
drift from the programs.

The marker: a fenced code block whose info string is `sh example` (in README.md and
docs/*.md). Each non-comment line of such a block is one command (a trailing backslash
joins lines; `# ...` after a command is a comment); in a transcript-style block the
commands are the lines starting with `$ ` and the other lines are their output. Every
command must exit 0 and print something (or fill the file it writes: `> FILE`, `-o FILE`). Blocks without
the marker (placeholders, commands that need systemd or an agent) are not run.

The context, built afresh and private to this test (CONTRIBUTING.md "Documentation
examples"): a mount and network namespace of its own (only loopback), where
  - /etc/egressd/egressd.ini is the shipped sample conf/egressd.ini plus one listener and
    grant for the principal `run-1` (an overlay over /etc: the machine's /etc is untouched),
  - egressd runs from the build tree with it (control socket /run/egressd/control.sock,
    /run and /var/log are fresh tmpfs mounts),
  - /var/log/egressd/decisions.jsonl holds real records of run-1's denied hops and has been
    rotated twice by rename + SIGUSR1 into decisions.jsonl.<last seq> files whose names do
    not sort in chain order (the glob in `log verify .../decisions.jsonl*`),
  - PATH starts with the build tree's egressd, egressctl and egress-exec, and the working
    directory is an empty directory with `conf` linked to the source tree's conf/.
"""

import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Results, check  # noqa: E402

SRC = os.environ.get("EGRESS_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("EGRESS_BINARY_DIR") or os.path.join(SRC, "build-san")
BINARIES = {"egressd": "egressd/egressd", "egressctl": "egressd/egressctl",
            "egress-exec": "executor/egress-exec"}
CMD_TIMEOUT = 60
WAIT = 10.0                 # seconds for egressd to start, answer, write, reopen
LOGDIR = "/var/log/egressd"
LOG = LOGDIR + "/decisions.jsonl"
RUN1_PORT = 3129

RUN1 = """
; --- added by integration/test_doc_examples.py: the principal the README's examples query
[listener run-1]
listen = 127.0.0.1:%d
grant = run-1

[grant run-1]
allow = https://api.example.com
""" % RUN1_PORT

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*(.*)$")


def examples():
    """(file:line, command) for every command of every `sh example` block."""
    out = []
    files = [os.path.join(SRC, "README.md")] + sorted(glob.glob(os.path.join(SRC, "docs",
                                                                             "*.md")))
    for path in files:
        rel = os.path.relpath(path, SRC)
        lines = open(path, encoding="utf-8").read().splitlines()
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            fence, info = m.group(2), m.group(3).split()
            j = i + 1
            block = []
            while j < len(lines) and not lines[j].strip().startswith(fence):
                block.append((j + 1, lines[j]))
                j += 1
            if info[:2] == ["sh", "example"]:
                out.extend(("%s:%d" % (rel, n), c) for n, c in commands(block))
            i = j + 1
    return out


def commands(block):
    transcript = any(line.lstrip().startswith("$ ") for _, line in block)
    cmds, cur, start = [], "", 0
    for n, line in block:
        s = line.strip()
        if transcript:
            if not s.startswith("$ "):
                continue
            s = s[2:]
        if not cur and (not s or s.startswith("#")):
            continue
        if not cur:
            start = n
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cmds.append((start, cur + s))
        cur = ""
    return cmds


def redirect_target(cmd):
    """The file a command writes instead of stdout: `> FILE`, or `-o FILE`/`--output FILE`."""
    m = re.search(r"(?<![0-9&])>\s*([^\s;|&#]+)", cmd) or \
        re.search(r"\s(?:-o|--output)[\s=]+([^\s;|&#]+)", cmd)
    return m.group(1) if m else None


# --- inside the private namespaces -------------------------------------------------------

def sh(*a):
    subprocess.run(a, check=True, timeout=CMD_TIMEOUT)


def last_seq(path):
    with open(path, "rb") as f:
        lines = f.read().splitlines()
    m = re.search(rb'"seq":(\d+)', lines[-1]) if lines else None
    return int(m.group(1)) if m else 0


def wait_for(cond, what):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def denied_hop(i):
    """One CONNECT run-1's grant does not allow: 403, and its deny record in the log."""
    before = last_seq(LOG) if os.path.exists(LOG) else 0
    with socket.create_connection(("127.0.0.1", RUN1_PORT), timeout=WAIT) as s:
        s.sendall(b"CONNECT denied-%d.example.net:443 HTTP/1.1\r\n"
                  b"Host: denied-%d.example.net:443\r\n\r\n" % (i, i))
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            b = s.recv(4096)
            if not b:
                break
            head += b
    check(head.startswith(b"HTTP/1.1 403"), "expected 403, got %r" % head[:200])
    wait_for(lambda: os.path.exists(LOG) and last_seq(LOG) > before, "the deny record")


def rotate(pid):
    """What logrotate or an operator does: rename to .<last seq>, then SIGUSR1."""
    seq = last_seq(LOG)
    os.rename(LOG, "%s.%d" % (LOG, seq))
    os.kill(pid, signal.SIGUSR1)
    # egressd creates the new file at once; its first record (rotate) comes with the next
    # decision (docs/decision-log.md "Rotation")
    wait_for(lambda: os.path.exists(LOG), "the reopened log")


def setup(tmp):
    sh("ip", "link", "set", "lo", "up")
    for d in ("/run", "/var/log"):
        sh("mount", "-t", "tmpfs", "-o", "mode=0755", "egress-doc", d)
    # /etc: an overlay whose upper layer lives on a tmpfs (never an overlay over overlay)
    up = os.path.join(tmp, "etc-layers")
    os.makedirs(up)
    sh("mount", "-t", "tmpfs", "-o", "mode=0755", "egress-doc", up)
    os.makedirs(up + "/upper")
    os.makedirs(up + "/work")
    sh("mount", "-t", "overlay", "overlay", "-o",
       "lowerdir=/etc,upperdir=%s/upper,workdir=%s/work" % (up, up), "/etc")
    # /var/lib likewise, for state_file's directory (/var/lib/egressd, root-only)
    os.makedirs(up + "/lib-upper")
    os.makedirs(up + "/lib-work")
    sh("mount", "-t", "overlay", "overlay", "-o",
       "lowerdir=/var/lib,upperdir=%s/lib-upper,workdir=%s/lib-work" % (up, up), "/var/lib")
    os.makedirs("/var/lib/egressd", mode=0o700, exist_ok=True)
    os.makedirs("/etc/egressd", exist_ok=True)
    with open(os.path.join(SRC, "conf/egressd.ini")) as f:
        conf = f.read()
    with open("/etc/egressd/egressd.ini", "w") as f:
        f.write(conf + RUN1)
    # the account egressd drops to owns the log directory (egressd(8) "Privileges")
    r = subprocess.run(["getent", "passwd", "egressd"], stdout=subprocess.PIPE, text=True)
    ent = (r.stdout if r.returncode == 0 else subprocess.run(
        ["getent", "passwd", "nobody"], stdout=subprocess.PIPE, text=True).stdout).split(":")
    os.makedirs(LOGDIR, mode=0o750)
    os.chown(LOGDIR, int(ent[2]), int(ent[3]))
    os.makedirs("/run/egressd", mode=0o755)
    bindir = os.path.join(tmp, "bin")
    os.makedirs(bindir)
    for name, rel in BINARIES.items():
        os.symlink(os.path.join(BIN, rel), os.path.join(bindir, name))
    cwd = os.path.join(tmp, "cwd")
    os.makedirs(cwd)
    os.symlink(os.path.join(SRC, "conf"), os.path.join(cwd, "conf"))
    return bindir, cwd


def inside(tmp):
    res = Results()
    bindir, cwd = setup(tmp)
    env = dict(os.environ, PATH=bindir + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
    errlog = open(os.path.join(tmp, "egressd.stderr"), "w")
    d = subprocess.Popen([os.path.join(bindir, "egressd"), "-f", "-c",
                          "/etc/egressd/egressd.ini"], stdout=errlog, stderr=errlog, env=env)
    try:
        def start():
            wait_for(lambda: os.path.exists("/run/egressd/control.sock") or
                     d.poll() is not None, "the control socket")
            check(d.poll() is None, "egressd exited: " + open(errlog.name).read()[-2000:])
            n = 0
            for target in (5, 12):
                while last_seq(LOG) < target if os.path.exists(LOG) else True:
                    n += 1
                    denied_hop(n)
                rotate(d.pid)
            denied_hop(n + 1)
            names = sorted(os.listdir(LOGDIR))
            print("  %s: %s" % (LOGDIR, " ".join(names)))
            check(len([x for x in names if re.fullmatch(r"decisions\.jsonl\.\d+", x)]) == 2,
                  "two rotated files: %s" % names)
        res.run("context_egressd_with_rotated_log", start)
        if res.failed:
            return res.finish()
        for where, cmd in examples():
            res.run("%s: %s" % (where, re.sub(r"\s+#.*$", "", cmd)), run_example, cmd, cwd,
                    env)
    finally:
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(timeout=WAIT * 4)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait(timeout=WAIT)
        errlog.close()
    return res.finish()


def run_example(cmd, cwd, env):
    target = redirect_target(cmd)
    r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=cwd, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=CMD_TIMEOUT)
    check(r.returncode == 0, "exit %d\nstdout: %s\nstderr: %s" % (
        r.returncode, r.stdout[-1500:], r.stderr[-1500:]))
    if target is not None:
        p = os.path.join(cwd, target)
        check(os.path.isfile(p) and os.path.getsize(p) > 0, "%s is empty or missing" % target)
    else:
        check(r.stdout.strip() != "", "printed nothing (stderr: %s)" % r.stderr[-500:])


def main():
    lab.require_root()
    if len(sys.argv) == 3 and sys.argv[1] == "--inside":
        return inside(sys.argv[2])
    for rel in BINARIES.values():
        if not os.access(os.path.join(BIN, rel), os.X_OK):
            print("FAIL: %s/%s is not built" % (BIN, rel))
            return 1
    ex = examples()
    print("%d example command(s) in README.md and docs/*.md" % len(ex))
    if not ex:
        print("FAIL: no ```sh example block found (README.md has them)")
        return 1
    tmp = tempfile.mkdtemp(prefix="egress-docex.")
    os.chmod(tmp, 0o755)
    try:
        r = subprocess.run(["unshare", "--mount", "--net", "--propagation", "private",
                            sys.executable, os.path.abspath(__file__), "--inside", tmp],
                           timeout=CMD_TIMEOUT * (len(ex) + 5))
        return r.returncode
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
