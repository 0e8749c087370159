#!/usr/bin/env python3
"""egress-exec run --workunit/--preset without network: the refusal and rejection paths.

Each case builds a small git repository, runs one WorkUnit through the whole pipeline
(admission, sandbox, changed set, scope, artifacts, manifest) and checks the exit code, the
manifest's outcome and reason, the artifacts, and that the host repository is byte-for-byte
unchanged afterwards. The worker of these test presets is `sh -s`: it runs the objective as
a shell script - acceptable only because the test preset (maintainer-owned) says so.

No network: the sandbox gets an empty network namespace, so nothing is added anywhere.
Everything that reads what the worker produced (changed set, diff, manifest) runs in
egress-exec's unprivileged collector (executor/collector.h); `accepted` pins the output
folder to exactly what the privileged version wrote, `symlink_leak` checks that a planted
link to a host file never brings the file's content into candidate.diff, `opaque_ignored`
that an opaque directory (which the collector cannot see by xattr) still counts for scope,
and `collector_killed` that a collector killed mid-run ends as internal_error /
collector_failed with a manifest written by the parent.

Needs root (exit 77 otherwise).
"""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SRC = os.environ.get("EGRESS_SOURCE_DIR",
                     os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("EGRESS_BINARY_DIR", os.path.join(SRC, "build"))
EXEC = os.path.join(BIN, "executor", "egress-exec")
WORKER_UID = 65534   # owner of the test repositories: the worker runs as the owner
COLLECTOR_UID = 65001  # executor/collector.h

EX_OK, EX_REJECTED, EX_ADMISSION, EX_CAPABILITY, EX_WORKER, EX_INTERNAL = 0, 10, 11, 12, 13, 14

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
diff_bytes = 1M
"""

# Key -> value overrides make each WorkUnit; objective lines become the script.
BASE = {
    "sandbox_required": "true", "process_execution": "true", "secrets": [""],
    "network": "none", "destinations": [],
    "allowed": ["README.md", "docs", "sub"], "write": None, "forbidden": ["docs/secret"],
    "wall_seconds": "20", "cpu_millicores": "500", "memory_bytes": "128M",
    "disk_bytes": "32M", "processes": "32", "output_bytes": "16K", "diff_bytes": None,
    "extra_top": [],
}


def workunit(script, **kw):
    v = dict(BASE)
    v.update(kw)
    write = v["allowed"] if v["write"] is None else v["write"]
    out = ["id = t-%d" % (int(time.time() * 1000) % 100000)]
    for line in script.strip().split("\n"):
        out.append("objective = " + line)
    out += v["extra_top"]
    out.append("[security]")
    if v["sandbox_required"] is not None:
        out.append("sandbox_required = " + v["sandbox_required"])
    out.append("[permissions]")
    if v["process_execution"] is not None:
        out.append("process_execution = " + v["process_execution"])
    for s in v["secrets"] or []:
        out.append("secrets = " + s)
    if v["network"] is not None:
        out.append("network = " + v["network"])
    for d in v["destinations"]:
        out.append("destinations = " + d)
    for w in write:
        out.append("filesystem_write = " + w)
    out.append("[budget]")
    for k in ("wall_seconds", "cpu_millicores", "memory_bytes", "disk_bytes", "processes",
              "output_bytes", "diff_bytes"):
        if v[k] is not None:
            out.append("%s = %s" % (k, v[k]))
    out.append("[constraints]")
    for a in v["allowed"]:
        out.append("allowed_paths = " + a)
    if v["forbidden"] is not None:
        out.append("forbidden_paths =" if not v["forbidden"] else "")
        for f in v["forbidden"]:
            out.append("forbidden_paths = " + f)
    return "\n".join(out) + "\n"


def tree_digest(path):
    """Names, types, modes, owners, sizes, mtimes, link targets and contents of everything
    under path (the repository root's own entry included via its children's names)."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(dirs + files):
            p = os.path.join(root, name)
            st = os.lstat(p)
            h.update(("%s %o %d %d %d %d\n" % (os.path.relpath(p, path), st.st_mode,
                                               st.st_uid, st.st_gid, st.st_size,
                                               st.st_mtime_ns)).encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


class Case:
    def __init__(self, top, name, owner=WORKER_UID):
        self.dir = os.path.join(top, name)
        self.repo = os.path.join(self.dir, "repo")
        self.out = os.path.join(self.dir, "out")
        os.makedirs(self.repo)
        git = ["git", "-C", self.repo, "-c", "user.email=t@example.com", "-c", "user.name=t"]
        subprocess.run(git[:3] + ["init", "-q", "."], check=True)
        files = {"README.md": "hello\n", "Makefile": "all:\n", "docs/guide.md": "guide\n" * 5,
                 "docs/secret/key": "k\n", "src/a.c": "int a;\n", "LICENSE": "MIT\n" * 5,
                 ".gitignore": "*.log\n"}
        for rel, text in files.items():
            p = os.path.join(self.repo, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
        subprocess.run(git + ["add", "-A"], check=True)
        subprocess.run(git + ["commit", "-q", "-m", "base"], check=True)
        for root, dirs, fs in os.walk(self.repo):
            for n in dirs + fs:
                os.lchown(os.path.join(root, n), owner, owner)
        os.lchown(self.repo, owner, owner)
        self.preset = os.path.join(self.dir, "preset.ini")
        with open(self.preset, "w") as f:
            f.write(PRESET)

    def run(self, wu_text, preset_text=None, extra=(), preexec=None):
        wu = os.path.join(self.dir, "wu.ini")
        with open(wu, "w") as f:
            f.write(wu_text)
        if preset_text is not None:
            with open(self.preset, "w") as f:
                f.write(preset_text)
        before = tree_digest(self.repo)
        p = subprocess.run([EXEC, "run", "--workunit", wu, "--preset", self.preset,
                            "--repo", self.repo, "--out", self.out] + list(extra),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180,
                           preexec_fn=preexec)
        self.stderr = p.stderr.decode(errors="replace")
        after = tree_digest(self.repo)
        if before != after:
            raise AssertionError("the host repository changed during the run")
        with open(os.path.join(self.out, "manifest.json")) as f:
            self.manifest = json.load(f)
        return p.returncode

    def artifact(self, name):
        p = os.path.join(self.out, name)
        if not os.path.exists(p):
            return None
        with open(p, "rb") as f:
            return f.read()


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def expect(c, rc, want_rc, status, reason):
    m = c.manifest
    o = m["outcome"]
    check(rc == want_rc and o["exit_code"] == want_rc,
          "exit %d (manifest %s), want %d\n%s" % (rc, o, want_rc, c.stderr))
    check(o["status"] == status, "status %s, want %s" % (o["status"], status))
    check(o["reason"] == reason, "reason %s, want %s (%s)" % (o["reason"], reason,
                                                             o.get("message")))
    check(m["schema_version"] == 1 and m["run_id"].startswith("run-"), "manifest header")
    # Every listed artifact is there with the size and hash the manifest says.
    for a in m["artifacts"]:
        data = c.artifact(a["name"])
        check(data is not None, "artifact %s missing" % a["name"])
        check(len(data) == a["size"] and hashlib.sha256(data).hexdigest() == a["sha256"],
              "artifact %s size/sha256 mismatch" % a["name"])


def violations(c):
    return {(v["path"], v["reason"]) for v in c.manifest["scope"]["violations"]}


# ---------------------------------------------------------------------------- cases

# candidate.diff of t_accepted, byte for byte (libgit2's format; full blob ids of the fixed
# contents, as `git apply --binary` needs them for binary patches).
ACCEPTED_DIFF = """diff --git a/README.md b/README.md
index ce013625030ba8dba906f756967f9e9ca394464a..2227cddb7f6318ea735a1c4adb52f5cd36c5783c 100644
--- a/README.md
+++ b/README.md
@@ -1 +1,2 @@
 hello
+more
diff --git a/docs/new.md b/docs/new.md
new file mode 100644
index 0000000000000000000000000000000000000000..3e757656cf36eca53338e520d134963a44f793f8
--- /dev/null
+++ b/docs/new.md
@@ -0,0 +1 @@
+new
"""


def t_accepted(c):
    rc = c.run(workunit("echo more >> README.md\necho new > docs/new.md\necho hi"))
    expect(c, rc, EX_OK, "accepted", "allowed")
    d = c.artifact("candidate.diff").decode()
    check(d == ACCEPTED_DIFF, d)
    # The output folder holds exactly the artifacts (no temporary files, no extras); the
    # evidence (logs, decisions) is written by the privileged parent before the fork, the
    # candidate and the manifest by the collector (its uid owns them).
    names = sorted(os.listdir(c.out))
    check(names == ["candidate.diff", "decisions.jsonl", "manifest.json", "stderr.log",
                    "stdout.log"], names)
    check(sorted(a["name"] for a in c.manifest["artifacts"]) ==
          ["candidate.diff", "decisions.jsonl", "stderr.log", "stdout.log"],
          c.manifest["artifacts"])
    owners = {n: os.lstat(os.path.join(c.out, n)).st_uid for n in names}
    check(owners == {"candidate.diff": COLLECTOR_UID, "manifest.json": COLLECTOR_UID,
                     "decisions.jsonl": 0, "stderr.log": 0, "stdout.log": 0},
          "artifact owners: %s" % owners)
    check(c.artifact("stdout.log") == b"hi\n", c.artifact("stdout.log"))
    m = c.manifest
    check(m["scope"]["accepted"] and m["admission"]["admitted"], "verdicts")
    check(len(m["base_commit"]) == 40, "base commit")
    check(m["workunit"]["objective_sha256"] and m["preset"]["executable_sha256"], "hashes")
    check(m["exit"]["started"] and m["exit"]["exit_code"] == 0, m["exit"])
    check(all(m["attestation"][k]["attested"] for k in m["attestation"]), "attestation")
    check(len(m["attestation"]) == 9, "nine capabilities")
    check({p["path"] for p in m["changed_paths"]} == {"README.md", "docs/new.md"},
          m["changed_paths"])
    check(m["limits"]["requested"]["memory_bytes"] == 128 << 20, m["limits"])
    check(m["usage"]["wall_ms"] >= 0 and "peak_pids" in m["usage"], m["usage"])


def t_symlink_leak(c):
    """The worker plants links to host files: each is a symlink_escape, the candidate is
    rejected whole, and no host file's content reaches anything in the output folder."""
    secrets = [p for p in ("/etc/shadow", "/root/.bashrc", "/root/.profile", "/etc/gshadow")
               if os.path.isfile(p)]
    script = ["echo ok >> README.md"]
    for i, p in enumerate(secrets):
        script.append("ln -s %s docs/leak%d" % (p, i))
    script.append("ln -s /etc docs/leakdir")
    script.append("ln -s ../../../etc/passwd docs/up")
    script.append("ln -s ../.git/config docs/gitcfg")
    rc = c.run(workunit("\n".join(script)))
    expect(c, rc, EX_REJECTED, "rejected", "symlink_escape")
    want = {("docs/leak%d" % i, "symlink_escape") for i in range(len(secrets))}
    want |= {("docs/leakdir", "symlink_escape"), ("docs/up", "symlink_escape"),
             ("docs/gitcfg", "symlink_escape")}
    check(violations(c) == want, violations(c))
    check(c.artifact("candidate.diff") is None, "a rejected candidate has no diff")
    check(not c.manifest["scope"]["accepted"], "scope.accepted agrees with the outcome")
    check("symlink_escape docs/" in c.stderr, c.stderr[-600:])
    blob = b"".join(c.artifact(n) or b"" for n in os.listdir(c.out))
    for p in secrets:
        with open(p, "rb") as f:
            for line in f:
                line = line.strip()
                if len(line) > 8 and line != p.encode():
                    check(line not in blob, "content of %s leaked" % p)


def t_symlink_inside(c):
    """Negative twin of symlink_leak: links that stay inside the repository are kept and
    applied as links."""
    rc = c.run(workunit("ln -s ../README.md docs/readme\nln -s guide.md docs/g\n"
                        "mkdir -p sub && ln -s .. sub/top && ln -s ../docs sub/docs"))
    expect(c, rc, EX_OK, "accepted", "allowed")
    d = c.artifact("candidate.diff").decode()
    check("new file mode 120000" in d and "+../README.md" in d and "+.." in d, d)
    applied = apply_candidate(c)
    check(os.readlink(os.path.join(applied, "docs/readme")) == "../README.md", "link target")
    check(os.readlink(os.path.join(applied, "sub/top")) == "..", "link target")


def apply_candidate(c):
    """A fresh clone of the base with candidate.diff applied by git apply --binary."""
    dst = os.path.join(c.dir, "applied")
    env = dict(os.environ, GIT_CONFIG_GLOBAL=os.path.join(c.dir, "gitconfig"))
    with open(env["GIT_CONFIG_GLOBAL"], "w") as f:
        f.write("[safe]\n\tdirectory = *\n")
    subprocess.run(["git", "clone", "-q", c.repo, dst], check=True, env=env)
    a = subprocess.run(["git", "-C", dst, "apply", "--binary",
                        os.path.join(c.out, "candidate.diff")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, env=env)
    check(a.returncode == 0, "git apply: %s" % a.stdout.decode(errors="replace"))
    return dst


def t_glob_new_dirs(c):
    """A glob scope covers files in directories the worker creates; the directories are
    not paths of their own. The twin: a file outside the glob in the same new tree."""
    rc = c.run(workunit("mkdir -p src/deep/er && echo 'x = 1' > src/deep/er/z.py\n"
                        "echo 'y = 2' > src/y.py", allowed=["src/*.py"],
                        forbidden=[]))
    expect(c, rc, EX_OK, "accepted", "allowed")
    applied = apply_candidate(c)
    with open(os.path.join(applied, "src/deep/er/z.py")) as f:
        check(f.read() == "x = 1\n", "z.py")
    c2 = Case(os.path.dirname(c.dir), os.path.basename(c.dir) + "_twin")
    rc = c2.run(workunit("mkdir -p src/deep && echo 'x = 1' > src/deep/z.py\n"
                         "echo t > src/deep/notes.txt", allowed=["src/*.py"], forbidden=[]))
    expect(c2, rc, EX_REJECTED, "rejected", "scope_violation")
    check(violations(c2) == {("src/deep/notes.txt", "scope_violation")}, violations(c2))


def t_dir_over_ignored(c):
    """Negative twin of glob_new_dirs: a directory made over an ignored file (which git
    never reports deleted) is checked as a path: out of scope, rejected."""
    p = os.path.join(c.repo, "out.log")
    with open(p, "w") as f:
        f.write("ignored build output\n")
    os.lchown(p, WORKER_UID, WORKER_UID)
    rc = c.run(workunit("rm out.log && mkdir out.log && echo x > out.log/y.txt\n"
                        "echo ok >> README.md", allowed=["README.md", "*.txt"]))
    expect(c, rc, EX_REJECTED, "rejected", "scope_violation")
    check(violations(c) == {("out.log", "scope_violation")}, violations(c))


def t_special_file(c):
    """A FIFO (in scope by name) rejects the candidate with its own reason; the scope
    verdict and the summary say so too."""
    rc = c.run(workunit("mkfifo docs/pipe\necho ok >> README.md\n"
                        "python3 -c \"import socket; socket.socket(socket.AF_UNIX)"
                        ".bind('docs/sock')\""))
    expect(c, rc, EX_REJECTED, "rejected", "scope_special_file")
    check(violations(c) == {("docs/pipe", "scope_special_file"),
                            ("docs/sock", "scope_special_file")}, violations(c))
    check(not c.manifest["scope"]["accepted"], "scope.accepted agrees with the outcome")
    check("scope: rejected" in c.stderr and "scope_special_file docs/pipe" in c.stderr,
          c.stderr[-600:])
    check(c.artifact("candidate.diff") is None, "no diff")


def t_dotgit_names(c):
    """Names git takes for .git on NTFS or HFS+ are scope_git_dir; .gitmodules as a link
    is scope_git_link. The twin (a name git does not reserve) is accepted."""
    names = ["docs/.git./x", "docs/.git /x", "docs/GIT~1/x", "docs/.g\u200cit/x",
             "docs/.GIT\ufeff/x"]
    script = ["mkdir -p '%s' && echo x > '%s'" % (os.path.dirname(n), n) for n in names]
    script.append("ln -s README.md .gitmodules")
    rc = c.run(workunit("\n".join(script), allowed=["*"], forbidden=[]))
    # the outcome names the first violation by path order: .gitmodules
    expect(c, rc, EX_REJECTED, "rejected", "scope_git_link")
    v = violations(c)
    for n in names:
        check((n, "scope_git_dir") in v, "%s not refused: %s" % (n, v))
    check((".gitmodules", "scope_git_link") in v, v)
    c2 = Case(os.path.dirname(c.dir), os.path.basename(c.dir) + "_twin")
    rc = c2.run(workunit("mkdir -p docs/.gitx docs/git~2 && echo x > docs/.gitx/y && "
                         "echo y > docs/git~2/z && echo '[x]' > .gitmodules2",
                         allowed=["*"], forbidden=[]))
    expect(c2, rc, EX_OK, "accepted", "allowed")


def t_ignored_warning(c):
    """An in-scope ignored file is not in candidate.diff, never silently: in_diff false,
    a warning in the summary and in manifest.json."""
    rc = c.run(workunit("echo x > docs/build.log\necho ok >> README.md"))
    expect(c, rc, EX_OK, "accepted", "allowed")
    e = [p for p in c.manifest["changed_paths"] if p["path"] == "docs/build.log"]
    check(e and e[0]["git"] == "ignored" and e[0]["in_diff"] is False, e)
    check("docs/build.log" not in c.artifact("candidate.diff").decode(), "in the diff")
    check("warning: 1 changed path is ignored" in c.stderr and "docs/build.log" in c.stderr,
          c.stderr[-600:])
    check(any("docs/build.log" in w for w in c.manifest["warnings"]), c.manifest["warnings"])


def t_out_reused(c):
    """A rejected run into the folder of an accepted one leaves no candidate.diff beside
    its manifest; the accepted run's files are replaced at the start."""
    rc = c.run(workunit("echo more >> README.md"))
    expect(c, rc, EX_OK, "accepted", "allowed")
    check(c.artifact("candidate.diff") is not None, "first run has a candidate")
    rc = c.run(workunit("echo x >> Makefile"))
    expect(c, rc, EX_REJECTED, "rejected", "scope_violation")
    check(c.artifact("candidate.diff") is None, "the old candidate survived a rejected run")
    names = sorted(os.listdir(c.out))
    check(names == ["decisions.jsonl", "manifest.json", "stderr.log", "stdout.log"], names)


def t_out_foreign(c):
    """Negative twin of out_reused: a folder holding anything but egress-exec's artifacts
    is refused before anything runs, and nothing in it is touched."""
    os.makedirs(c.out)
    for n, data in (("notes.txt", "mine\n"), ("manifest.json", "{}\n")):
        with open(os.path.join(c.out, n), "w") as f:
            f.write(data)
    wu = os.path.join(c.dir, "wu.ini")
    with open(wu, "w") as f:
        f.write(workunit("echo ok >> README.md"))
    p = subprocess.run([EXEC, "run", "--workunit", wu, "--preset", c.preset, "--repo", c.repo,
                        "--out", c.out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    check(p.returncode == EX_INTERNAL, "rc %d %r" % (p.returncode, p.stderr[-300:]))
    check(b"notes.txt" in p.stderr and b"not an egress-exec artifact" in p.stderr,
          p.stderr[-300:])
    check(sorted(os.listdir(c.out)) == ["manifest.json", "notes.txt"], os.listdir(c.out))
    with open(os.path.join(c.out, "manifest.json")) as f:
        check(f.read() == "{}\n", "manifest.json touched")


def t_opaque_ignored(c):
    """An ignored file (untracked, git never reports it missing) hidden by an opaque
    directory: the directory itself is the only trace, and it is out of scope."""
    os.makedirs(os.path.join(c.repo, "build"))
    with open(os.path.join(c.repo, "build", "out.log"), "w") as f:
        f.write("x\n")
    for p in (os.path.join(c.repo, "build"), os.path.join(c.repo, "build", "out.log")):
        os.lchown(p, WORKER_UID, WORKER_UID)
    rc = c.run(workunit("rm -rf build\nmkdir build\necho ok >> README.md"))
    expect(c, rc, EX_REJECTED, "rejected", "scope_violation")
    check(violations(c) == {("build", "scope_violation")}, violations(c))
    b = [p for p in c.manifest["changed_paths"] if p["path"] == "build"]
    check(b and b[0]["upper"] == "opaque", c.manifest["changed_paths"])


def t_worktree(c):
    """A linked worktree (.git is a file naming a git dir elsewhere): the collector's root
    gets that git dir and the common one too, read-only."""
    wt = os.path.join(c.dir, "wt")
    subprocess.run(["git", "-c", "safe.directory=*", "-C", c.repo, "worktree", "add", "-q",
                    wt], check=True)
    for root, dirs, fs in os.walk(wt):
        for n in dirs + fs:
            os.lchown(os.path.join(root, n), WORKER_UID, WORKER_UID)
    os.lchown(wt, WORKER_UID, WORKER_UID)
    c.repo = wt
    rc = c.run(workunit("echo more >> README.md"))
    expect(c, rc, EX_OK, "accepted", "allowed")
    check("+more" in c.artifact("candidate.diff").decode(), "diff")


def t_alternates(c):
    """A repository whose objects live in another (git clone --shared): the collector's
    root gets the alternate object directory too, or HEAD would look unborn."""
    cl = os.path.join(c.dir, "clone")
    subprocess.run(["git", "clone", "-q", "--shared", c.repo, cl], check=True)
    for root, dirs, fs in os.walk(cl):
        for n in dirs + fs:
            os.lchown(os.path.join(root, n), WORKER_UID, WORKER_UID)
    os.lchown(cl, WORKER_UID, WORKER_UID)
    check(os.path.exists(os.path.join(cl, ".git", "objects", "info", "alternates")),
          "no alternates file")
    c.repo = cl
    rc = c.run(workunit("echo more >> README.md"))
    expect(c, rc, EX_OK, "accepted", "allowed")
    check(c.artifact("candidate.diff").decode() == ACCEPTED_DIFF.split("diff --git a/docs")[0],
          c.artifact("candidate.diff"))


def collector_pids(parent):
    """Children of parent running as the collector's uid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/status" % d) as f:
                st = f.read()
        except OSError:
            continue
        f = dict(l.split(":", 1) for l in st.splitlines() if ":" in l)
        if f.get("PPid", "").strip() == str(parent) and \
                f.get("Uid", "").split()[:1] == [str(COLLECTOR_UID)]:
            out.append(int(d))
    return out


def t_collector_killed(c):
    """SIGKILL of the collector mid-collection: exit 14, internal_error /
    collector_failed, and a manifest the parent wrote from its own memory."""
    wu = os.path.join(c.dir, "wu.ini")
    # Many files make the collection take long enough to be caught.
    with open(wu, "w") as f:
        f.write(workunit("mkdir -p docs/many\ni=0\nwhile [ $i -lt 9000 ]; do "
                         ": > docs/many/f$i; i=$((i+1)); done", disk_bytes="64M"))
    before = tree_digest(c.repo)
    p = subprocess.Popen([EXEC, "run", "--workunit", wu, "--preset", c.preset, "--repo",
                          c.repo, "--out", c.out], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    killed = False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None and not killed:
        for pid in collector_pids(p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
                killed = True
            except OSError:
                pass
        time.sleep(0.002)
    _, err = p.communicate(timeout=120)
    c.stderr = err.decode(errors="replace")
    check(tree_digest(c.repo) == before, "the host repository changed")
    check(killed, "never saw the collector (uid %d) running\n%s" % (COLLECTOR_UID, c.stderr))
    with open(os.path.join(c.out, "manifest.json")) as f:
        c.manifest = json.load(f)
    expect(c, p.returncode, EX_INTERNAL, "internal_error", "collector_failed")
    check("killed by signal 9" in c.manifest["outcome"]["message"], c.manifest["outcome"])
    check(c.manifest["changed_paths"] is None and c.manifest["scope"] is None,
          "the parent reported a changed set")
    check(c.manifest["exit"]["started"], "worker exit info kept")
    check(c.artifact("candidate.diff") is None, "a candidate beside collector_failed")


def t_root_owned(c):
    # A root-owned repository: the worker runs as a dedicated uid over an idmapped lower
    # layer; the host files keep their owner (checked by the digest in Case.run).
    rc = c.run(workunit("id -u\necho more >> README.md"))
    expect(c, rc, EX_OK, "accepted", "allowed")
    check(c.artifact("stdout.log").strip() != b"0", "the worker ran as root")
    check("+more" in c.artifact("candidate.diff").decode(), "diff")


def t_scope_modified(c):
    rc = c.run(workunit("echo x >> Makefile\necho ok >> README.md"))
    expect(c, rc, EX_REJECTED, "rejected", "scope_violation")
    check(violations(c) == {("Makefile", "scope_violation")}, violations(c))
    check(c.artifact("candidate.diff") is None, "a rejected candidate has no diff")


def t_sigchld_ignored(c):
    """egress-exec started with SIGCHLD ignored (inherited across exec) still gets every
    child's status: a rejected candidate stays rejected, never a lost status read as 0."""
    import signal
    rc = c.run(workunit("echo x >> Makefile\necho ok >> README.md"),
               preexec=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN))
    expect(c, rc, EX_REJECTED, "rejected", "scope_violation")
    check(violations(c) == {("Makefile", "scope_violation")}, violations(c))


def t_out_symlink_refused(c):
    """An output folder that is a symlink (planted where the caller meant to create it)
    is refused before anything runs; nothing is written where it points."""
    target = os.path.join(c.dir, "elsewhere")
    link = os.path.join(c.dir, "out-link")
    os.makedirs(target, exist_ok=True)
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(target, link)
    wu = os.path.join(c.dir, "wu.ini")
    with open(wu, "w") as f:
        f.write(workunit("echo ok >> README.md"))
    p = subprocess.run([EXEC, "run", "--workunit", wu, "--preset", c.preset, "--repo", c.repo,
                        "--out", link], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    check(p.returncode == EX_INTERNAL, "rc %d %r" % (p.returncode, p.stderr[-300:]))
    check(b"symlink" in p.stderr, p.stderr[-300:])
    check(os.listdir(target) == [], "written through the link: %s" % os.listdir(target))


def t_scope_untracked(c):
    rc = c.run(workunit("echo x > notes.txt"))
    expect(c, rc, EX_REJECTED, "rejected", "scope_violation")
    check(violations(c) == {("notes.txt", "scope_violation")}, violations(c))


def t_scope_deleted(c):
    rc = c.run(workunit("rm LICENSE"))
    expect(c, rc, EX_REJECTED, "rejected", "scope_violation")
    check(violations(c) == {("LICENSE", "scope_violation")}, violations(c))


def t_scope_ignored(c):
    # *.log is ignored by the committed .gitignore; the worker also ignores everything.
    rc = c.run(workunit("echo '*' > docs/.gitignore\necho x > build.log\n"
                        "echo y > docs/hidden.txt"))
    expect(c, rc, EX_REJECTED, "rejected", "scope_violation")
    check(("build.log", "scope_violation") in violations(c), violations(c))
    check(len(violations(c)) == 1, violations(c))


def t_scope_renamed(c):
    rc = c.run(workunit("mv LICENSE docs/LICENSE"))
    expect(c, rc, EX_REJECTED, "rejected", "scope_violation")
    check(("LICENSE", "scope_violation") in violations(c), violations(c))
    moved = [p for p in c.manifest["changed_paths"] if p["path"] == "docs/LICENSE"]
    check(moved and moved[0]["git"] == "renamed" and moved[0]["old_path"] == "LICENSE",
          c.manifest["changed_paths"])


def t_scope_forbidden(c):
    # A literal forbidden path is masked inside the sandbox: the write fails there. A glob
    # masks what exists when the run starts; a new file matching it is the scope check's.
    rc = c.run(workunit("echo leak > docs/secret/key2 || echo masked\n"
                        "echo leak > docs/x.key\necho ok >> README.md",
                        forbidden=["docs/secret", "docs/*.key"]))
    expect(c, rc, EX_REJECTED, "rejected", "scope_forbidden")
    check(violations(c) == {("docs/x.key", "scope_forbidden")}, violations(c))
    check(b"masked" in c.artifact("stdout.log"), c.artifact("stdout.log"))


def t_forbidden_glob_masked(c):
    """A glob forbidden path masks every existing file it matches, as a literal one does:
    unreadable and unwritable in the sandbox. The twin: a file it does not match stays
    readable. Committed content stays readable through the read-only .git (documented)."""
    git = ["git", "-C", c.repo, "-c", "user.email=t@example.com", "-c", "user.name=t",
           "-c", "safe.directory=*"]
    for rel in ("docs/api.key", "docs/deep/er/db.key"):
        p = os.path.join(c.repo, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write("SECRET-%s\n" % rel)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "keys"], check=True)
    for root, dirs, fs in os.walk(c.repo):
        for n in dirs + fs:
            os.lchown(os.path.join(root, n), WORKER_UID, WORKER_UID)
    rc = c.run(workunit("cat docs/api.key docs/deep/er/db.key 2>/dev/null || echo unreadable\n"
                        "echo x >> docs/api.key 2>/dev/null || echo unwritable\n"
                        "cat docs/guide.md | head -1\n"
                        "git show HEAD:docs/api.key 2>/dev/null | head -c 6; echo\n"
                        "echo ok >> README.md", forbidden=["*.key"]))
    expect(c, rc, EX_OK, "accepted", "allowed")
    out = c.artifact("stdout.log").decode()
    print("  worker saw: %r" % out)
    check("SECRET-docs/api" not in out and "SECRET-docs/deep" not in out, out)
    check("unreadable" in out and "unwritable" in out, out)
    check("guide" in out, "the twin (docs/guide.md) was not readable: %s" % out)
    # what stays readable, as docs/sandbox.md says: the committed blob through .git
    check(out.endswith("SECRET\n"), "git show HEAD:docs/api.key: %r" % out)


BIG_PRESET = PRESET.replace("memory_bytes = 256M", "memory_bytes = 1G").replace(
    "disk_bytes = 64M", "disk_bytes = 1G").replace("wall_seconds = 60", "wall_seconds = 300").replace(
    "diff_bytes = 1M", "diff_bytes = 64M")


def t_big_trees(c):
    """Deep and big trees end cleanly (accepted within bounds, or rejected with a reason),
    never internal_error: 100 directories deep (deeper than libgit2 reads: rejected, the
    message says why), 50,000 new files (accepted, every one in candidate.diff), a 200 MiB
    file (diff_too_large before it is read: over 64 x diff_bytes)."""
    big = dict(wall_seconds="240", memory_bytes="768M", disk_bytes="768M", allowed=["*"],
               forbidden=[])
    rc = c.run(workunit("d=.; i=0; while [ $i -lt 100 ]; do d=$d/n$i; i=$((i+1)); done; "
                        "mkdir -p $d && echo deep > $d/leaf.txt", **big), preset_text=BIG_PRESET)
    expect(c, rc, EX_REJECTED, "rejected", "artifact_too_large")
    check("nested deeper than 98" in c.manifest["outcome"]["message"], c.manifest["outcome"])
    # the twin: 90 deep is within what git reads, and round-trips
    c2 = Case(os.path.dirname(c.dir), os.path.basename(c.dir) + "_90")
    rc = c2.run(workunit("d=.; i=0; while [ $i -lt 90 ]; do d=$d/n$i; i=$((i+1)); done; "
                         "mkdir -p $d && echo deep > $d/leaf.txt", **big),
                preset_text=BIG_PRESET)
    expect(c2, rc, EX_OK, "accepted", "allowed")
    applied = apply_candidate(c2)
    check(os.path.isfile(os.path.join(applied, *["n%d" % i for i in range(90)], "leaf.txt")),
          "the deep file did not apply")
    c3 = Case(os.path.dirname(c.dir), os.path.basename(c.dir) + "_50k")
    t0 = time.monotonic()
    rc = c3.run(workunit("i=0; while [ $i -lt 500 ]; do mkdir -p gen/d$i; j=0; "
                         "while [ $j -lt 100 ]; do echo $i.$j > gen/d$i/f$j; j=$((j+1)); done; "
                         "i=$((i+1)); done", diff_bytes="64M", **big), preset_text=BIG_PRESET)
    expect(c3, rc, EX_OK, "accepted", "allowed")
    d = c3.artifact("candidate.diff")
    check(d.count(b"\ndiff --git ") + 1 == 50000, "files in the diff: %d" %
          (d.count(b"\ndiff --git ") + 1))
    print("  50,000 files: run %.1f s; %s" % (time.monotonic() - t0, [
        ln for ln in c3.stderr.splitlines() if "collector:" in ln]))
    c4 = Case(os.path.dirname(c.dir), os.path.basename(c.dir) + "_200m")
    rc = c4.run(workunit("head -c 209715200 /dev/zero > big.bin", diff_bytes="1M", **big),
                preset_text=BIG_PRESET)
    expect(c4, rc, EX_REJECTED, "rejected", "diff_too_large")
    check("big.bin is 209715200 bytes" in c4.manifest["outcome"]["message"],
          c4.manifest["outcome"])
    check(c4.artifact("candidate.diff") is None, "never a truncated diff")


def t_git_write(c):
    # The repository's .git is read-only in the sandbox; a nested .git is caught by scope.
    rc = c.run(workunit("echo x >> .git/config 2>/dev/null\n"
                        "mkdir -p sub/.git && echo '[core]' > sub/.git/config\ntrue"))
    expect(c, rc, EX_REJECTED, "rejected", "scope_git_dir")
    check(("sub/.git/config", "scope_git_dir") in violations(c), violations(c))
    check(all(not p["path"].startswith(".git/") or p["upper"] is not None
              for p in c.manifest["changed_paths"]), "top .git")


def t_diff_too_large(c):
    rc = c.run(workunit("head -c 20000 /dev/zero | tr '\\0' 'a' | fold -w 80 >> README.md",
                        diff_bytes="4K"))
    expect(c, rc, EX_REJECTED, "rejected", "diff_too_large")
    check(c.artifact("candidate.diff") is None, "never a truncated diff")
    check(c.manifest["scope"]["accepted"], "scope was fine")


def t_timeout(c):
    rc = c.run(workunit("echo start\nsleep 30", wall_seconds="2"))
    expect(c, rc, EX_WORKER, "worker_failed", "timeout")
    check(c.manifest["exit"]["timed_out"], c.manifest["exit"])
    check(c.manifest["usage"]["wall_ms"] < 15000, c.manifest["usage"])
    check(c.artifact("candidate.diff") is None, "no candidate from a failed worker")


def t_oom(c):
    rc = c.run(workunit("head -c 200000000 /dev/zero | tail -c 100000000 > /dev/null",
                        memory_bytes="48M"))
    expect(c, rc, EX_WORKER, "worker_failed", "oom")
    check(c.manifest["exit"]["oom_killed"] or c.manifest["usage"]["oom_kills"] > 0,
          c.manifest["exit"])


def t_worker_failed(c):
    rc = c.run(workunit("echo to-stderr >&2\nexit 3"))
    expect(c, rc, EX_WORKER, "worker_failed", "worker_failed")
    check(c.manifest["exit"]["exit_code"] == 3, c.manifest["exit"])
    check(c.artifact("stderr.log") == b"to-stderr\n", c.artifact("stderr.log"))


def t_output_truncated(c):
    rc = c.run(workunit("head -c 100000 /dev/zero | tr '\\0' 'x'"))
    expect(c, rc, EX_OK, "accepted", "allowed")
    out = c.artifact("stdout.log")
    check(out.endswith(b"\n[egress-exec: output truncated at 16384 bytes]\n"), out[-80:])
    check([a for a in c.manifest["artifacts"] if a["name"] == "stdout.log"][0]["truncated"],
          "truncated flag")


ADMISSION = [
    # (name, workunit kwargs or text, preset text or None, reason)
    ("sandbox_not_required", {"sandbox_required": "false"}, None, "sandbox_required"),
    ("process_execution", {"process_execution": None}, None, "process_execution_required"),
    ("secrets", {"secrets": ["GITHUB_TOKEN"]}, None, "secrets_not_empty"),
    ("unrestricted", {"network": "unrestricted"}, None, "network_unrestricted"),
    ("mismatch", {"network": "allowlist", "destinations": ["https://origin.lab.test"]}, None,
     "network_mismatch"),
    ("model_missing", {"network": "allowlist", "destinations": ["https://origin.lab.test"]},
     PRESET.replace("network_policy = disabled",
                    "network_policy = model_only\nmodel_connection = absent"),
     "model_destinations_missing"),
    ("budget", {"memory_bytes": "0"}, None, "budget_invalid"),
    ("budget_missing", {"processes": None}, None, "budget_invalid"),
    ("write_scope", {"write": ["README.md"]}, None, "write_scope_mismatch"),
    ("forbidden_missing", {"forbidden": None}, None, "scope_missing"),
    ("invalid_path", {"allowed": ["../x"]}, None, "invalid_path"),
    ("prompt_file", {}, PRESET.replace("prompt_transport = stdin", "prompt_transport = file"),
     "prompt_file_unsupported"),
    ("executable", {"extra_top": ["executable = /bin/bash"]}, None, "executable_in_workunit"),
    ("shell", {"extra_top": ["shell = bash"]}, None, "executable_in_workunit"),
    ("prompt_field", {"extra_top": ["prompt = do something else"]}, None, "invalid_file"),
    ("env_forbidden", {}, PRESET.replace("env_allowlist = LANG", "env_allowlist = AWS_SECRET_KEY"),
     "env_forbidden"),
    ("unknown_key", {"extra_top": ["colour = blue"]}, None, "invalid_file"),
    ("invalid_destination", {"network": "allowlist", "destinations": ["ftp://x.example"]},
     PRESET.replace("network_policy = disabled", "network_policy = allowlisted"),
     "invalid_destination"),
    ("dest_not_trusted", {"network": "allowlist", "destinations": ["https://evil.example"]},
     PRESET.replace("network_policy = disabled",
                    "network_policy = model_only\nmodel_connection = m"),
     "destination_not_trusted"),
]

TRUSTED = "[connection m]\ndestination = https://*.models.example\n"


def t_admission(c, kw, preset, reason):
    marker = "/tmp/egress-admission-ran-%d" % os.getpid()
    trusted = os.path.join(c.dir, "trusted.ini")
    with open(trusted, "w") as f:
        f.write(TRUSTED)
    rc = c.run(workunit("touch %s" % marker, **kw), preset_text=preset or PRESET,
               extra=["--trusted-models", trusted])
    expect(c, rc, EX_ADMISSION, "admission_refused", reason)
    check(c.manifest["exit"] is None and c.manifest["attestation"] is None, "nothing ran")
    check(not os.path.exists(marker), "the worker ran")
    check(c.artifact("candidate.diff") is None, "no candidate")


def t_env_socket(c):
    envf = os.path.join(c.dir, "env")
    with open(envf, "w") as f:
        f.write("LANG=C.UTF-8\nFOO=unix:///var/run/docker.sock\n")
    rc = c.run(workunit("true"), extra=["--env-file", envf])
    expect(c, rc, EX_ADMISSION, "admission_refused", "env_container_socket")


def t_env_file_bad_line(c):
    """`run` and `check` read --env-file with one parser: a bad line refuses both, naming
    file:line, where `run` used to skip it (and so ran with another environment than the
    one `check` judged)."""
    envf = os.path.join(c.dir, "env")
    with open(envf, "w") as f:
        f.write("LANG=C.UTF-8\nexport FOO\n")
    wu = os.path.join(c.dir, "wu.ini")
    marker = "/tmp/egress-envfile-ran-%d" % os.getpid()
    with open(wu, "w") as f:
        f.write(workunit("touch %s" % marker))
    for cmd in (["run", "--repo", c.repo, "--out", c.out], ["check"]):
        p = subprocess.run([EXEC] + cmd + ["--workunit", wu, "--preset", c.preset,
                                           "--env-file", envf],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        err = p.stderr.decode(errors="replace")
        check(p.returncode == 2, "%s: rc %d %s" % (cmd[0], p.returncode, err))
        check(("%s:2:" % envf) in err, "%s: no file:line in %r" % (cmd[0], err))
    check(not os.path.exists(marker), "the worker ran")


def t_sigterm(c):
    """SIGTERM to egress-exec mid-run: the outcome names the signal egress-exec received,
    not "the worker was killed by signal 9" (the worker's tree is killed by the teardown
    that SIGTERM starts)."""
    marker = "h19term%d" % os.getpid()
    wu = os.path.join(c.dir, "wu.ini")
    with open(wu, "w") as f:
        f.write(workunit("exec /usr/bin/python3 -c 'import time; time.sleep(300)' %s" % marker,
                         wall_seconds="60"))
    p = subprocess.Popen([EXEC, "run", "--workunit", wu, "--preset", c.preset, "--repo",
                          c.repo, "--out", c.out], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    seen = False
    while time.monotonic() < deadline and not seen and p.poll() is None:
        for d in os.listdir("/proc"):
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    seen = seen or marker.encode() in f.read()
            except OSError:
                pass
        time.sleep(0.05)
    check(seen, "the worker did not start")
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    c.stderr = err.decode(errors="replace")
    with open(os.path.join(c.out, "manifest.json")) as f:
        c.manifest = json.load(f)
    expect(c, p.returncode, EX_WORKER, "worker_failed", "worker_failed")
    msg = c.manifest["outcome"]["message"]
    check("received signal 15" in msg, msg)
    check("killed by signal 9" not in msg, msg)
    check(c.artifact("candidate.diff") is None, "no candidate from an interrupted run")


def t_check_cli(c):
    """egress-exec check: JSON on stdout, one human line on stderr, exit 0 / 11 / 2."""
    conf = os.path.join(SRC, "conf")
    wu = os.path.join(conf, "workunits", "demo.ini")

    def check_run(*args):
        p = subprocess.run([EXEC, "check"] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    rc, out, err = check_run("--workunit", wu, "--preset",
                             os.path.join(conf, "presets", "demo-agent.ini"))
    d = json.loads(out)
    check(rc == 0 and d["admitted"] and d["grant"] == ["http://origin.lab.test"], out)
    check(err.startswith("admission: admitted"), err)
    model = os.path.join(conf, "presets", "model-agent.ini")
    rc, out, err = check_run("--workunit", wu, "--preset", model)
    d = json.loads(out)
    check(rc == EX_ADMISSION and not d["admitted"] and
          d["reasons"][0]["reason"] == "model_destinations_missing", out)
    check("refused: model_destinations_missing" in err, err)
    rc, out, err = check_run("--workunit", wu, "--preset", model, "--trusted-models",
                             os.path.join(conf, "presets", "trusted-models.ini"))
    check(rc == 0 and json.loads(out)["admitted"], out)
    rc, out, err = check_run("--workunit", wu)
    check(rc == 2, "usage: %d" % rc)


def main():
    if os.geteuid() != 0:
        print("skipped: needs root")
        print("0 passed, 0 failed")
        return 77
    if not os.access(EXEC, os.X_OK):
        print("egress-exec not built at %s" % EXEC)
        print("0 passed, 1 failed")
        return 1
    top = tempfile.mkdtemp(prefix="egx-orch-%d-" % os.getpid())
    os.chmod(top, 0o755)
    passed = failed = 0
    cases = [(n, f, ()) for n, f in [
        ("accepted", t_accepted), ("symlink_leak", t_symlink_leak),
        ("symlink_inside", t_symlink_inside), ("glob_new_dirs", t_glob_new_dirs),
        ("special_file", t_special_file), ("dir_over_ignored", t_dir_over_ignored), ("dotgit_names", t_dotgit_names),
        ("ignored_warning", t_ignored_warning), ("out_reused", t_out_reused),
        ("out_foreign", t_out_foreign), ("forbidden_glob_masked", t_forbidden_glob_masked),
        ("big_trees", t_big_trees),
        ("opaque_ignored", t_opaque_ignored), ("collector_killed", t_collector_killed),
        ("worktree", t_worktree), ("alternates", t_alternates),
        ("root_owned", t_root_owned),
        ("scope_modified", t_scope_modified), ("sigchld_ignored", t_sigchld_ignored),
        ("out_symlink_refused", t_out_symlink_refused),
        ("scope_untracked", t_scope_untracked), ("scope_deleted", t_scope_deleted),
        ("scope_ignored", t_scope_ignored), ("scope_renamed", t_scope_renamed),
        ("scope_forbidden", t_scope_forbidden), ("git_write", t_git_write),
        ("diff_too_large", t_diff_too_large), ("timeout", t_timeout), ("oom", t_oom),
        ("worker_failed", t_worker_failed), ("output_truncated", t_output_truncated),
        ("env_socket", t_env_socket), ("env_file_bad_line", t_env_file_bad_line),
        ("sigterm", t_sigterm), ("check_cli", t_check_cli)]]
    cases += [("admission_" + n, t_admission, (kw, p, r)) for n, kw, p, r in ADMISSION]
    only = sys.argv[1:]
    try:
        for name, fn, args in cases:
            if only and name not in only:
                continue
            t0 = time.monotonic()
            try:
                # alternates: a root-owned source repository (git refuses to clone one
                # of another owner); the clone belongs to WORKER_UID
                fn(Case(top, name, owner=0 if name in ("root_owned", "alternates") else
                        WORKER_UID), *args)
            except Exception as e:  # report and go on
                failed += 1
                print("FAIL %s (%.1fs): %s" % (name, time.monotonic() - t0, e), flush=True)
            else:
                passed += 1
                print("PASS %s (%.1fs)" % (name, time.monotonic() - t0), flush=True)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
