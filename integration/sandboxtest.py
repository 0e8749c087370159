"""Shared helpers for integration/test_sandbox_*.py: run egress-exec inside a network
namespace the test owns, a throwaway host repository, tree hashing, planted secrets.

egress-exec is started with `nsenter --net=/run/netns/NAME` rather than `ip netns exec`:
the latter remounts /sys for the namespace, which hides the cgroup mounts under
/sys/fs/cgroup that the sandbox needs.
"""

import atexit
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lab import Results, check, require_root  # noqa: E402,F401

BUILD = os.environ.get("EGRESS_BINARY_DIR") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build")
EXE = os.path.join(BUILD, "executor", "egress-exec")
PY = "/usr/bin/python3"       # the Debian python in /usr (a pyenv one is not visible inside)
REPO_UID = 1000               # the host repository's owner; the worker runs as this uid


def require_tools():
    if not os.path.exists(EXE):
        print("egress-exec is not built: %s" % EXE)
        print("0 passed, 1 failed")
        sys.exit(1)
    if not os.path.exists(PY):
        print("skipped: %s missing" % PY)
        print("0 passed, 0 failed")
        sys.exit(77)


class NetNS:
    """A plain, uniquely named network namespace (no addresses at all)."""

    def __init__(self, tag):
        self.name = "h7%s%d" % (tag, os.getpid() % 100000)

    def __enter__(self):
        subprocess.run(["ip", "netns", "add", self.name], check=True, timeout=10)
        return self

    def __exit__(self, *exc):
        subprocess.run(["ip", "netns", "del", self.name], timeout=10)
        return False


def tree_hash(root):
    """sha256 over every path, its type, mode, owner and content (symlinks not followed)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            h.update(("%s\0%o\0%d\0%d\0" % (os.path.relpath(p, root), st.st_mode, st.st_uid,
                                             st.st_gid)).encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


class Repo:
    """A git repository owned by REPO_UID, hashed at creation; `unchanged()` rechecks."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="h7repo-", dir="/tmp")
        os.chmod(self.path, 0o755)
        with open(os.path.join(self.path, "README"), "w") as f:
            f.write("hello\n")
        os.makedirs(os.path.join(self.path, "src"))
        with open(os.path.join(self.path, "src", "main.c"), "w") as f:
            f.write("int main(void) { return 0; }\n")
        os.makedirs(os.path.join(self.path, "secrets"))
        with open(os.path.join(self.path, "secrets", "key"), "w") as f:
            f.write("repo-level secret\n")
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
            subprocess.run(["git", "-C", self.path] + args, check=True, env=env, timeout=30,
                           stdout=subprocess.DEVNULL)
        for dirpath, dirnames, filenames in os.walk(self.path):
            for n in dirnames + filenames:
                os.lchown(os.path.join(dirpath, n), REPO_UID, REPO_UID)
        os.lchown(self.path, REPO_UID, REPO_UID)
        self.hash = tree_hash(self.path)

    def unchanged(self):
        return tree_hash(self.path) == self.hash

    def remove(self):
        shutil.rmtree(self.path, ignore_errors=True)


class Planted:
    """Secrets planted on the host, where a worker must never read them."""

    def __init__(self):
        tag = "%d" % os.getpid()
        self.value = "planted-secret-%s" % tag
        self.paths = ["/root/.egress-h7-planted-%s" % tag, "/tmp/egress-h7-planted-%s" % tag,
                      "/etc/egress-h7-planted-%s" % tag]
        for p in self.paths:
            with open(p, "w") as f:
                f.write(self.value)
            os.chmod(p, 0o644)

    def remove(self):
        for p in self.paths:
            try:
                os.unlink(p)
            except OSError:
                pass


class Run:
    def __init__(self, cp, out_dir, elapsed):
        self.rc = cp.returncode
        self.stdout = cp.stdout
        self.stderr = cp.stderr
        self.elapsed = elapsed
        self.result = {}
        rp = os.path.join(out_dir, "result.json")
        if os.path.exists(rp):
            with open(rp) as f:
                self.result = json.load(f)
        self.out_dir = out_dir

    def lines(self):
        return self.stdout.decode(errors="replace").splitlines()

    def json_line(self):
        """The last stdout line of the worker, parsed as JSON."""
        for line in reversed(self.lines()):
            line = line.strip()
            if line.startswith("{"):
                return json.loads(line)
        raise AssertionError("no JSON line from the worker; rc=%d stdout=%r stderr=%r" %
                             (self.rc, self.stdout[-500:], self.stderr[-1500:]))

    def describe(self):
        r = dict(self.result)
        r.pop("attestation", None)
        return "rc=%d result=%s stderr=%r" % (self.rc, r, self.stderr[-800:])


_OUT_DIRS = []


@atexit.register
def _remove_out_dirs():
    for d in _OUT_DIRS:
        shutil.rmtree(d, ignore_errors=True)


def _out_dir():
    d = tempfile.mkdtemp(prefix="h7out-", dir="/tmp")
    _OUT_DIRS.append(d)
    return d


def run(ns, args, cmd, timeout=120, stdin=None):
    """egress-exec run ARGS -- CMD inside namespace ns; returns Run."""
    out_dir = _out_dir()
    full = ["nsenter", "--net=/run/netns/%s" % ns, EXE, "run", "--out", out_dir] + \
        list(args) + ["--"] + list(cmd)
    t0 = time.monotonic()
    cp = subprocess.run(full, capture_output=True, timeout=timeout, input=stdin)
    return Run(cp, out_dir, time.monotonic() - t0)


def start(ns, args, cmd):
    """Start egress-exec in the background; finish with collect()."""
    out_dir = _out_dir()
    full = ["nsenter", "--net=/run/netns/%s" % ns, EXE, "run", "--out", out_dir] + \
        list(args) + ["--"] + list(cmd)
    p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p, out_dir, time.monotonic()


def collect(started, timeout=120):
    p, out_dir, t0 = started
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate(timeout=10)
    cp = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    return Run(cp, out_dir, time.monotonic() - t0)


def py(code):
    """A worker command: the Debian python3 with a snippet."""
    return [PY, "-c", code]


def host_processes_with(marker):
    """pids on the whole machine whose command line contains marker."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(d))
        except OSError:
            pass
    return found


def _self_cgroup(ctl):
    """This process's cgroup in v1 hierarchy ctl ("" at the top)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            if ctl in ctls.split(","):
                return "" if path == "/" else path
    return ""


def leftovers(ns, result):
    """What a finished run must not leave behind: its cgroups, its veth, its state record,
    its run folder mounts."""
    left = []
    rid = result.get("run_id", "")
    if not rid:
        return ["result has no run_id"]
    for ctl in ("memory", "pids", "cpu", "cpuacct", "freezer"):
        # egress-exec nests under its caller's cgroup (ours: it inherits it), and the
        # top-level egress/ is checked too
        for base in {"", _self_cgroup(ctl)}:
            d = "/sys/fs/cgroup/%s%s/egress/%s" % (ctl, base, rid)
            if os.path.exists(d):
                left.append("cgroup " + d)
    if os.path.exists("/run/egress-exec/state/%s" % rid):
        left.append("state record %s" % rid)
    veth = "egx%sh" % rid[4:]
    cp = subprocess.run(["ip", "-n", ns, "-o", "link", "show"], capture_output=True,
                        text=True, timeout=10)
    if veth in cp.stdout:
        left.append("veth " + veth)
    rd = result.get("run_dir") or "/nonexistent"
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if line.split()[4].startswith(rd):
                left.append("mount " + line.split()[4])
    if os.path.exists(rd):
        left.append("run folder " + rd)
    return left


KEEP_DIR = "/var/lib/egress-exec/killed"


def forget_kept(cleanup_stdout):
    """`egress-exec cleanup` keeps a killed run's evidence (decision log, egressd files,
    state record) under KEEP_DIR and says "kept the evidence of RUN in DIR: ...". A test
    that killed a run on purpose removes what was kept for it; returns the directories."""
    if isinstance(cleanup_stdout, bytes):
        cleanup_stdout = cleanup_stdout.decode(errors="replace")
    dirs = []
    for line in cleanup_stdout.splitlines():
        if line.startswith("kept the evidence of ") and " in " + KEEP_DIR + "/" in line:
            d = line.split(" in ", 1)[1].split(":", 1)[0]
            if os.path.dirname(d) == KEEP_DIR and os.path.isdir(d):
                shutil.rmtree(d, ignore_errors=True)
                dirs.append(d)
    return dirs

