#!/usr/bin/env python3
"""The candidate is exact: a property test over random edits.

For each seed, a random base repository is committed; a random list of edits (text, binary
with NUL bytes, the executable bit, symlinks inside the repository, file <-> symlink <->
directory, renames, deletions, nested new directories, empty files, unicode, spaced and
quoted names, CRLF, no final newline, truncation) is rendered as one shell script. The
script runs as the worker of a real `egress-exec run --workunit` (the test preset's
worker is `sh -s`: the objective is the script, base64-wrapped so that no INI rule touches
it: a here-document of base64 lines), and the same script is replayed outside on a clone of the base. Then `git apply
--binary candidate.diff` on a fresh clone of the base must give exactly the replayed tree:
the same paths, types, bytes, executable bits and link targets (directories count only
through what they hold: git records no empty directory).

SEEDS (default 50) seeds from SEED_BASE (default 1) run in `make check`; `make
soak-candidate` runs more. A failing seed prints its script and the diff of the two trees;
re-run one with SEEDS=1 SEED_BASE=<seed>.

Needs root (exit 77 otherwise).
"""

import base64
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.environ.get("EGRESS_SOURCE_DIR",
                     os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("EGRESS_BINARY_DIR", os.path.join(SRC, "build"))
EXEC = os.path.join(BIN, "executor", "egress-exec")
WORKER_UID = 65534

PRESET = """[preset]
name = test-shell
executable = /bin/sh
argv = sh
argv = -s
prompt_transport = stdin
network_policy = disabled
env_allowlist = LANG
[ceilings]
wall_seconds = 60
cpu_millicores = 1000
memory_bytes = 256M
disk_bytes = 64M
processes = 64
output_bytes = 64K
diff_bytes = 8M
"""

WORKUNIT = """id = roundtrip-{seed}
objective = base64 -d <<'EOF' | sh -e
{b64}objective = EOF
[security]
sandbox_required = true
[permissions]
process_execution = true
secrets =
network = none
filesystem_write = *
[budget]
wall_seconds = 30
cpu_millicores = 1000
memory_bytes = 128M
disk_bytes = 32M
processes = 32
output_bytes = 16K
diff_bytes = 8M
[constraints]
allowed_paths = *
forbidden_paths =
"""

# Name pieces: plain, spaced, unicode (NFC and combining), quotes and other bytes git
# quotes in headers ('"', non-ASCII), never '/', '\\', control characters or a leading
# '-' (path_check and the shell decide those; they are not what this test is about).
NAME_PARTS = ["a", "b", "src", "doc", "x y", "caf\u00e9", "e\u0301t\u00e9", "\u65e5\u672c",
              "q\"uote", "it's", "$dollar", "star*", "br[ack]et", "semi;colon", "emoji\U0001f600",
              "UPPER", ".hidden", "dash-", "plus+", "eq=", "hash#", "tilde~", "comma,"]


def sq(s):
    """Shell single-quote."""
    return "'" + s.replace("'", "'\\''") + "'"


def printf_bytes(data):
    """printf %b writing exactly data (octal escapes for everything non-trivial; %b so
    that no byte of the data is ever a conversion)."""
    out = []
    for b in data:
        c = chr(b)
        if b < 128 and (c.isalnum() or c in " .,:_-=+"):
            out.append(c)
        else:
            out.append("\\0%03o" % b)
    return "printf '%b' " + sq("".join(out))


class Gen:
    """A model of the tree (path -> ('f', bytes, exec) | ('l', target)) and the script."""

    def __init__(self, rng):
        self.rng = rng
        self.tree = {}
        self.lines = []
        self.n = 0

    # ---- content
    def content(self):
        r = self.rng
        kind = r.choice(["text", "text", "crlf", "noeol", "binary", "empty", "long"])
        if kind == "text":
            return "".join("line %d %s\n" % (i, r.choice(NAME_PARTS))
                           for i in range(r.randint(1, 12))).encode()
        if kind == "crlf":
            return "".join("crlf %d\r\n" % i for i in range(r.randint(1, 6))).encode()
        if kind == "noeol":
            return ("no final newline %d" % r.randint(0, 999)).encode()
        if kind == "binary":
            return bytes(r.choice([0, 0, 1, 255, 10, 13, r.randint(0, 255)])
                         for _ in range(r.randint(1, 300)))
        if kind == "long":
            return "".join("%06d %s\n" % (i, "z" * r.randint(0, 90))
                           for i in range(r.randint(50, 400))).encode()
        return b""

    def fresh(self, parent=""):
        self.n += 1
        r = self.rng
        name = "%s%d" % (r.choice(NAME_PARTS), self.n)
        return parent + "/" + name if parent else name

    def dirs(self):
        ds = set()
        for p in self.tree:
            parts = p.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                ds.add("/".join(parts[:i]))
        return sorted(ds)

    def files(self, kind=None):
        return sorted(p for p, v in self.tree.items() if kind is None or v[0] == kind)

    def link_target(self, at):
        """A relative target inside the repository (existing or not), from at's directory."""
        r = self.rng
        depth = at.count("/")
        cands = self.files() + self.dirs()
        dest = r.choice(cands) if cands and r.random() < 0.85 else "missing%d" % self.n
        return "../" * depth + dest if depth else dest

    # ---- script primitives (each keeps the model exact)
    def write(self, p, data, exe=False):
        self.lines.append("%s > %s" % (printf_bytes(data), sq(p)))
        self.lines.append("chmod %s %s" % ("755" if exe else "644", sq(p)))
        self.tree[p] = ("f", data, exe)

    def mkparents(self, p):
        if "/" in p:
            self.lines.append("mkdir -p %s" % sq(p.rsplit("/", 1)[0]))

    def remove(self, p):
        self.lines.append("rm -rf %s" % sq(p))
        for k in list(self.tree):
            if k == p or k.startswith(p + "/"):
                del self.tree[k]

    def link(self, p, target):
        self.lines.append("ln -s %s %s" % (sq(target), sq(p)))
        self.tree[p] = ("l", target)

    # ---- the base
    def base(self):
        r = self.rng
        for _ in range(r.randint(4, 14)):
            parent = r.choice([""] + self.dirs()) if self.tree else ""
            if r.random() < 0.3:
                parent = self.fresh(parent)
            p = self.fresh(parent)
            self.tree[p] = ("f", self.content(), r.random() < 0.2)
        for _ in range(r.randint(0, 3)):
            p = self.fresh(r.choice([""] + self.dirs()))
            self.tree[p] = ("l", self.link_target(p))

    # ---- one random edit
    def edit(self):
        r = self.rng
        files, links, dirs = self.files("f"), self.files("l"), self.dirs()
        op = r.choice(["modify", "modify", "append", "binary", "exec", "truncate", "new",
                       "new_nested", "empty", "delete", "rename", "rename_nested",
                       "file2link", "link2file", "file2dir", "dir2file", "link2dir", "dir2link",
                       "newlink", "retarget", "crlf"])
        if op in ("modify", "binary", "exec", "truncate", "append", "delete", "rename",
                  "rename_nested", "file2link", "file2dir", "crlf") and not files:
            op = "new"
        if op in ("link2file", "link2dir", "retarget") and not links:
            op = "newlink"
        if op in ("dir2file", "dir2link") and not dirs:
            op = "new_nested"
        if op == "modify":
            p = r.choice(files)
            self.write(p, self.content(), self.tree[p][2])
        elif op == "append":
            p = r.choice(files)
            extra = self.content()
            self.lines.append("%s >> %s" % (printf_bytes(extra), sq(p)))
            self.tree[p] = ("f", self.tree[p][1] + extra, self.tree[p][2])
        elif op == "crlf":
            p = r.choice(files)
            self.write(p, self.tree[p][1].replace(b"\n", b"\r\n") + b"\r\n", self.tree[p][2])
        elif op == "binary":
            p = r.choice(files)
            self.write(p, bytes([0]) + self.tree[p][1] + bytes([0, 255]), self.tree[p][2])
        elif op == "exec":
            p = r.choice(files)
            t = self.tree[p]
            self.lines.append("chmod %s %s" % ("644" if t[2] else "755", sq(p)))
            self.tree[p] = ("f", t[1], not t[2])
        elif op == "truncate":
            p = r.choice(files)
            data = self.tree[p][1]
            n = r.randint(0, max(0, len(data) - 1)) if data else 0
            self.lines.append("truncate -s %d %s" % (n, sq(p)))
            self.tree[p] = ("f", data[:n], self.tree[p][2])
        elif op in ("new", "empty"):
            p = self.fresh(r.choice([""] + dirs))
            self.write(p, b"" if op == "empty" else self.content(), r.random() < 0.2)
        elif op == "new_nested":
            parent = r.choice([""] + dirs)
            for _ in range(r.randint(1, 4)):
                parent = self.fresh(parent)
            p = self.fresh(parent)
            self.mkparents(p)
            self.write(p, self.content(), r.random() < 0.2)
        elif op == "delete":
            self.remove(r.choice(files + links))
        elif op in ("rename", "rename_nested"):
            src = r.choice(files + links)
            parent = r.choice([""] + dirs)
            if op == "rename_nested":
                parent = self.fresh(parent)
            dst = self.fresh(parent)
            if dst.startswith(src + "/"):
                return
            self.mkparents(dst)
            self.lines.append("mv %s %s" % (sq(src), sq(dst)))
            v = self.tree.pop(src)
            if v[0] == "l":
                # the relative text moves with the link; re-point it from its new place
                self.lines.append("rm %s" % sq(dst))
                self.link(dst, self.link_target(dst))
            else:
                self.tree[dst] = v
        elif op == "file2link":
            p = r.choice(files)
            self.remove(p)
            self.link(p, self.link_target(p))
        elif op == "link2file":
            p = r.choice(links)
            self.remove(p)
            self.write(p, self.content())
        elif op in ("file2dir", "link2dir"):
            p = r.choice(files if op == "file2dir" else links)
            self.remove(p)
            self.lines.append("mkdir %s" % sq(p))
            self.write(self.fresh(p), self.content())
        elif op == "dir2file":
            d = r.choice(dirs)
            self.remove(d)
            self.write(d, self.content())
        elif op == "dir2link":
            d = r.choice(dirs)
            self.remove(d)
            self.link(d, self.link_target(d))
        elif op == "newlink":
            p = self.fresh(r.choice([""] + dirs))
            self.link(p, self.link_target(p))
        elif op == "retarget":
            p = r.choice(links)
            self.remove(p)
            self.link(p, self.link_target(p))


def make_base(seed, repo):
    g = Gen(random.Random(seed))
    g.base()
    os.makedirs(repo)
    for p, v in sorted(g.tree.items()):
        full = os.path.join(repo, p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if v[0] == "f":
            with open(full, "wb") as f:
                f.write(v[1])
            os.chmod(full, 0o755 if v[2] else 0o644)
        else:
            os.symlink(v[1], full)
    git = ["git", "-C", repo, "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(git[:3] + ["init", "-q", "."], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "base"], check=True)
    for root, dirs, fs in os.walk(repo):
        for n in dirs + fs:
            os.lchown(os.path.join(root, n), WORKER_UID, WORKER_UID)
    os.lchown(repo, WORKER_UID, WORKER_UID)
    for _ in range(g.rng.randint(3, 14)):
        g.edit()
    return "\n".join(g.lines) + "\n"


def snapshot(top):
    """path -> (type, executable bit, sha256 or link target), directories left out."""
    out = {}
    for root, dirs, files in os.walk(top):
        if root == top and ".git" in dirs:
            dirs.remove(".git")
        for n in dirs + files:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, top)
            st = os.lstat(p)
            if os.path.islink(p):
                out[rel] = ("link", 0, os.readlink(p))
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    out[rel] = ("file", st.st_mode & 0o100, hashlib.sha256(f.read()).hexdigest())
            elif not os.path.isdir(p):
                out[rel] = ("other", 0, "")
    return out


def clone(base, dst):
    subprocess.run(["git", "clone", "-q", base, dst], check=True)


def short(script):
    return script if len(script) < 6000 else script[:6000] + "\n... (%d bytes)" % len(script)


def one_seed(top, seed, preset):
    d = os.path.join(top, "s%d" % seed)
    repo, out = os.path.join(d, "repo"), os.path.join(d, "out")
    script = make_base(seed, repo)
    wu = os.path.join(d, "wu.ini")
    with open(wu, "w") as f:
        b64 = base64.b64encode(script.encode()).decode()
        f.write(WORKUNIT.format(seed=seed, b64="".join(
            "objective = %s\n" % b64[i:i + 2000] for i in range(0, len(b64), 2000))))
    p = subprocess.run([EXEC, "run", "--workunit", wu, "--preset", preset, "--repo", repo,
                        "--out", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=180)
    if p.returncode != 0:
        raise AssertionError("seed %d: egress-exec exited %d\n%s\nscript:\n%s" %
                             (seed, p.returncode, p.stderr.decode(errors="replace"), short(script)))
    # The same edits outside, on a clone of the base.
    replay = os.path.join(d, "replay")
    clone(repo, replay)
    with open(os.path.join(d, "edits.sh"), "w") as f:
        f.write(script)
    r = subprocess.run(["sh", "-e", os.path.join(d, "edits.sh")], cwd=replay,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise AssertionError("seed %d: the replay failed: %s" % (seed, r.stdout.decode()))
    # The candidate on a fresh clone.
    applied = os.path.join(d, "applied")
    clone(repo, applied)
    diff = os.path.join(out, "candidate.diff")
    a = subprocess.run(["git", "-C", applied, "apply", "--binary", diff],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if a.returncode != 0:
        raise AssertionError("seed %d: git apply refused candidate.diff: %s\nscript:\n%s" %
                             (seed, a.stdout.decode(errors="replace")[-3000:], short(script)))
    want, got = snapshot(replay), snapshot(applied)
    if want != got:
        diffs = sorted(set(want) ^ set(got)) + sorted(k for k in set(want) & set(got)
                                                      if want[k] != got[k])
        raise AssertionError("seed %d: applied tree differs from the replayed one at %s\n"
                             "replayed: %s\napplied: %s\nscript:\n%s" % (
                                 seed, diffs[:10], [want.get(k) for k in diffs[:5]],
                                 [got.get(k) for k in diffs[:5]], short(script)))
    shutil.rmtree(d, ignore_errors=True)


def main():
    if os.geteuid() != 0:
        print("skipped: needs root")
        print("0 passed, 0 failed")
        return 77
    if not os.access(EXEC, os.X_OK):
        print("egress-exec not built at %s" % EXEC)
        print("0 passed, 1 failed")
        return 1
    seeds = int(os.environ.get("SEEDS", "50"))
    first = int(os.environ.get("SEED_BASE", "1"))
    top = tempfile.mkdtemp(prefix="egx-rt-%d-" % os.getpid())
    os.chmod(top, 0o755)
    # The bases belong to the worker's uid; git as root refuses to clone them unless told
    # (the clone's upload-pack reads only the global and system configuration).
    gcfg = os.path.join(top, "gitconfig")
    with open(gcfg, "w") as f:
        f.write("[safe]\n\tdirectory = *\n")
    os.environ["GIT_CONFIG_GLOBAL"] = gcfg
    preset = os.path.join(top, "preset.ini")
    with open(preset, "w") as f:
        f.write(PRESET)
    passed = failed = 0
    t0 = time.monotonic()
    try:
        for seed in range(first, first + seeds):
            t = time.monotonic()
            try:
                one_seed(top, seed, preset)
            except Exception as e:  # report and go on
                failed += 1
                print("FAIL seed %d (%.1fs): %s" % (seed, time.monotonic() - t, e), flush=True)
            else:
                passed += 1
                print("PASS seed %d (%.1fs)" % (seed, time.monotonic() - t), flush=True)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print("%d passed, %d failed (%.0f s)" % (passed, failed, time.monotonic() - t0))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
