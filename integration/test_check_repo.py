#!/usr/bin/env python3
"""The repository before the run (executor/repocheck.h): `egress-exec check --repo` and
`egress-exec run`.

check: a clean work tree root with a commit is admitted and reported clean; a dirty one is
admitted and the uncommitted paths are named (they would show up as the worker's); a plain
directory and a subdirectory of a checkout are refused with repo_not_worktree, a repository
without a commit (unborn HEAD) with repo_no_commit and a message naming the fix. run: a plain
directory and an unborn HEAD are refused the same way before anything runs (the worker's
marker file never appears; its negative twin, the same repository after a first commit,
runs), and a dirty repository runs with a warning naming the paths. Needs root (exit 77
otherwise).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import test_orchestrate_local as local  # noqa: E402
from lab import Results, check  # noqa: E402

CONF = os.path.join(local.SRC, "conf")
WU = os.path.join(CONF, "workunits", "offline.ini")
PRESET = os.path.join(CONF, "presets", "offline-agent.ini")


def run_check(repo):
    p = subprocess.run([local.EXEC, "check", "--workunit", WU, "--preset", PRESET, "--repo",
                        repo], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    return p.returncode, json.loads(p.stdout.decode() or "{}"), p.stderr.decode()


def t_clean(c):
    rc, out, err = run_check(c.repo)
    check(rc == 0 and out["admitted"], "%d %s %s" % (rc, out, err))
    check(out["repository"]["dirty"] == 0 and len(out["repository"]["head"]) == 40, out)
    check("repository: clean at" in err, err)


def t_dirty(c):
    with open(os.path.join(c.repo, "README.md"), "a") as f:
        f.write("uncommitted\n")
    with open(os.path.join(c.repo, "scratch.txt"), "w") as f:
        f.write("untracked\n")
    rc, out, err = run_check(c.repo)
    check(rc == 0 and out["admitted"], "%d %s %s" % (rc, out, err))
    check(out["repository"]["dirty"] == 2, out)
    check("README.md" in err and "scratch.txt" in err and "uncommitted" in err, err)


def t_refused(c, which):
    if which == "plain":
        target = os.path.join(c.dir, "plain")
        os.makedirs(target)
    elif which == "subdir":
        target = os.path.join(c.repo, "docs")
    else:
        target = os.path.join(c.dir, "unborn")
        os.makedirs(target)
        subprocess.run(["git", "init", "-q", target], check=True)
    rc, out, err = run_check(target)
    check(rc == local.EX_ADMISSION and not out["admitted"], "%d %s" % (rc, out))
    want = "repo_no_commit" if which == "unborn" else "repo_not_worktree"
    check(any(r["reason"] == want for r in out["reasons"]), out)
    if which == "unborn":
        check("make a first commit" in err and "git commit" in err, err)


def t_run_plain(c):
    plain = os.path.join(c.dir, "plain")
    os.makedirs(plain)
    os.chown(plain, local.WORKER_UID, local.WORKER_UID)
    marker = "/tmp/egx-repocheck-ran-%d" % os.getpid()
    c.repo = plain
    rc = c.run(local.workunit("touch %s" % marker))
    local.expect(c, rc, local.EX_ADMISSION, "admission_refused", "repo_not_worktree")
    check(not os.path.exists(marker), "the worker ran")


def t_run_dirty(c):
    with open(os.path.join(c.repo, "LICENSE"), "a") as f:
        f.write("host edit\n")
    os.chown(os.path.join(c.repo, "LICENSE"), local.WORKER_UID, local.WORKER_UID)
    rc = c.run(local.workunit("echo more >> README.md"))
    local.expect(c, rc, local.EX_REJECTED, "rejected", "scope_violation")
    check("uncommitted change" in c.stderr and "LICENSE" in c.stderr, c.stderr)


def chown_tree(top):
    for root, dirs, files in os.walk(top):
        for n in dirs + files:
            os.lchown(os.path.join(root, n), local.WORKER_UID, local.WORKER_UID)
    os.lchown(top, local.WORKER_UID, local.WORKER_UID)


def t_run_unborn(c):
    # c.repo's files in a repository without a commit (git init, nothing committed).
    shutil.rmtree(os.path.join(c.repo, ".git"))
    subprocess.run(["git", "init", "-q", c.repo], check=True)
    chown_tree(c.repo)
    rc = c.run(local.workunit("echo more >> README.md"))
    local.expect(c, rc, local.EX_ADMISSION, "admission_refused", "repo_no_commit")
    check(c.manifest["exit"] is None and c.manifest["attestation"] is None, "the worker ran")
    check(c.artifact("candidate.diff") is None, "a candidate from an unborn HEAD")
    msg = c.manifest["outcome"].get("message") or ""
    check("make a first commit" in msg and "make a first commit" in c.stderr,
          "%s / %s" % (msg, c.stderr))
    # Negative twin: the same repository after its first commit runs the worker.
    git = ["git", "-C", c.repo, "-c", "user.email=t@example.com", "-c", "user.name=t",
           "-c", "safe.directory=*"]
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "base"], check=True)
    chown_tree(c.repo)
    rc = c.run(local.workunit("echo more >> README.md"))
    local.expect(c, rc, local.EX_OK, "accepted", "allowed")
    check("+more" in (c.artifact("candidate.diff") or b"").decode(), "no edit in the candidate")


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    top = tempfile.mkdtemp(prefix="egx-repocheck-%d-" % os.getpid())
    os.chmod(top, 0o755)
    R = Results()
    try:
        R.run("check_clean", t_clean, local.Case(top, "clean"))
        R.run("check_dirty_reported", t_dirty, local.Case(top, "dirty"))
        R.run("check_plain_refused", t_refused, local.Case(top, "plain"), "plain")
        R.run("check_subdir_refused", t_refused, local.Case(top, "subdir"), "subdir")
        R.run("check_unborn_refused", t_refused, local.Case(top, "unborn"), "unborn")
        R.run("run_plain_refused_before_running", t_run_plain, local.Case(top, "runplain"))
        R.run("run_unborn_refused_before_running", t_run_unborn, local.Case(top, "rununborn"))
        R.run("run_dirty_warned", t_run_dirty, local.Case(top, "rundirty"))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return R.finish()


if __name__ == "__main__":
    sys.exit(main())
