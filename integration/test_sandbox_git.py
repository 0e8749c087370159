#!/usr/bin/env python3
"""git inside the sandbox (executor/mounts.c mounts_git_writable, executor/gitconfig.h).

The repository's .git/config carries what a CI checkout leaves behind: a token in the
remote URL, an http.extraheader with an Authorization header, a credential helper, an
include of a host file, a url.insteadOf with a password, commit signing. The worker (a
shell, as an agent would) runs `git add`, `git commit`, `git checkout -b`, `git stash`:
all work. Checks:
  - the config the worker sees has none of the credentials (and still its remote, by URL
    without user information) and a [user] for commits;
  - the candidate is the base commit against the worker's final work tree, whatever it
    committed (README.md edited and committed, NOTES.md written);
  - nothing leaves the sandbox: the host repository (its .git included) is byte-for-byte
    unchanged, and the run's changed set holds no .git path;
  - negative twin: with both worktree and index restored to the base by the worker itself
    (a commit, then a hard reset to the base), the candidate is empty — committed work
    that was undone does not leak into the candidate.
Also with the idmapped path (repository owned by another uid than the worker's). Needs root.
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import test_orchestrate_local as local  # noqa: E402
from lab import Results, check  # noqa: E402

TOKEN = "ghs_%dSecretToken" % os.getpid()
PASSWORD = "pw%dMirror" % os.getpid()
CONFIG_EXTRA = """[remote "origin"]
	url = https://x-access-token:%s@github.com/org/repo.git
	fetch = +refs/heads/*:refs/remotes/origin/*
[http "https://github.com/"]
	extraheader = AUTHORIZATION: basic %s
[credential]
	helper = store --file /root/.git-credentials
[include]
	path = /root/.gitconfig-secret
[url "https://mirror:%s@mirror.example.com/"]
	insteadOf = https://github.com/
[commit]
	gpgsign = true
""" % (TOKEN, TOKEN, PASSWORD)

SCRIPT = "\n".join([
    "set -e",
    "cat .git/config > /tmp/cfg",
    "echo worker edit >> README.md",
    "git add README.md",
    "git commit -q -m 'worker commit'",
    "git checkout -q -b feature",
    "echo stash me >> README.md",
    "git stash -q",
    "git stash pop -q",
    "{ echo branch $(git rev-parse --abbrev-ref HEAD); git log --format=%s -1;"
    "  git config --get remote.origin.url; git config --get user.email;"
    "  git status --short; echo ---; cat /tmp/cfg; } > NOTES.md",
])


def prepare(c):
    with open(os.path.join(c.repo, ".git", "config"), "a") as f:
        f.write(CONFIG_EXTRA)


def t_git(c):
    prepare(c)
    head_before = subprocess.run(["git", "-c", "safe.directory=*", "-C", c.repo, "rev-parse", "HEAD"],
                                 capture_output=True, text=True).stdout.strip()
    rc = c.run(local.workunit(SCRIPT, allowed=["README.md", "NOTES.md"], forbidden=["secrets"]))
    local.expect(c, rc, local.EX_OK, "accepted", "allowed")
    diff = c.artifact("candidate.diff").decode()
    check("+worker edit" in diff and "+stash me" in diff, diff)
    notes = diff.split("+++ b/NOTES.md", 1)[1]
    check("+branch feature" in notes and "+worker commit" in notes, notes)
    check("+https://github.com/org/repo.git" in notes, "remote URL: %s" % notes)
    check("+worker@egress.invalid" in notes, notes)
    for secret in (TOKEN, PASSWORD, "extraheader", "AUTHORIZATION", "[credential",
                   "helper", "[include", "gpgsign"):
        check(secret not in notes, "the worker saw %r:\n%s" % (secret, notes))
    check(all(not p["path"].startswith(".git") for p in c.manifest["changed_paths"]),
          c.manifest["changed_paths"])
    head_after = subprocess.run(["git", "-c", "safe.directory=*", "-C", c.repo, "rev-parse", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    check(len(head_before) == 40 and head_before == head_after, "the host HEAD moved: %r %r"
          % (head_before, head_after))
    check(find_key(c.manifest, "base_commit") == head_before, "manifest base_commit")


def find_key(obj, key):
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for v in obj:
            r = find_key(v, key)
            if r is not None:
                return r
    return None


def t_undone(c):
    prepare(c)
    script = "\n".join(["set -e", "base=$(git rev-parse HEAD)", "echo x >> README.md",
                        "git commit -q -am tmp", "git reset -q --hard $base"])
    rc = c.run(local.workunit(script, allowed=["README.md"], forbidden=["secrets"]))
    local.expect(c, rc, local.EX_OK, "accepted", "allowed")
    diff = c.artifact("candidate.diff")
    check(not diff, "an undone commit reached the candidate: %r" % diff)


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    top = tempfile.mkdtemp(prefix="egx-git-%d-" % os.getpid())
    os.chmod(top, 0o755)
    R = Results()
    try:
        R.run("git_inside_sanitized", t_git, local.Case(top, "git"))
        R.run("git_inside_undone", t_undone, local.Case(top, "undone"))
        # the repository owned by another uid: the worker gets an idmapped view
        R.run("git_inside_idmapped", t_git, local.Case(top, "idmap", owner=1234))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return R.finish()


if __name__ == "__main__":
    sys.exit(main())
