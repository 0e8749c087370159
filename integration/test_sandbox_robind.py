#!/usr/bin/env python3
"""Preset read-only binds (`ro_bind`, executor/robind.h), end to end.

A toolchain directory outside the system directories (/var/lib/egress-robind-test-PID, not
under /tmp, /home or any refused location) holds an executable. Without a ro_bind the run
is refused at admission (executable_not_visible) and nothing runs; with one the worker runs
it from the same path, reads the toolchain's files, cannot write there (read-only, EROFS),
and still sees none of the mandatory denials. Negative twins: a ro_bind of /root, of the
run folder /run/egress-exec and of a symbolic link are refused (bind_refused) before
anything runs. Needs root (exit 77 otherwise).
"""

import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import test_orchestrate_local as local  # noqa: E402
from lab import Results, check  # noqa: E402

TOOL = "/var/lib/egress-robind-test-%d" % os.getpid()


def preset(executable, binds):
    text = local.PRESET.replace("executable = /bin/sh\nargv = sh\nargv = -s\n",
                                "executable = %s\n" % executable)
    lines = "".join("ro_bind = %s\n" % b for b in binds)
    return text.replace("[ceilings]\n", lines + "[ceilings]\n")


# The "toolchain": a shell script that runs its stdin with /bin/sh (the objective).
TOOL_SCRIPT = "#!/bin/sh\nexec /bin/sh -s\n"


def t_hidden(c):
    marker = "/tmp/egx-robind-ran-%d" % os.getpid()
    rc = c.run(local.workunit("touch %s" % marker), preset_text=preset(TOOL + "/bin/tool", []))
    local.expect(c, rc, local.EX_ADMISSION, "admission_refused", "executable_not_visible")
    check(not os.path.exists(marker), "the worker ran")


def t_bound(c):
    script = "\n".join([
        "cat %s/share/version >> README.md" % TOOL,
        "if touch %s/share/x 2>/dev/null; then echo bind-writable >> README.md; fi" % TOOL,
        "if [ -e /root ] || [ -e /etc/shadow ]; then echo denial-visible >> README.md; fi",
    ])
    rc = c.run(local.workunit(script), preset_text=preset(TOOL + "/bin/tool", [TOOL]))
    local.expect(c, rc, local.EX_OK, "accepted", "allowed")
    diff = c.artifact("candidate.diff").decode()
    check("+toolchain 1.2.3" in diff, diff)
    check("bind-writable" not in diff and "denial-visible" not in diff, diff)
    check(not os.path.exists(TOOL + "/share/x"), "the worker wrote into the host toolchain")


def t_refused(c, bind, word):
    rc = c.run(local.workunit("true"), preset_text=preset(TOOL + "/bin/tool", [TOOL, bind]))
    local.expect(c, rc, local.EX_ADMISSION, "admission_refused", "bind_refused")
    check(word in c.stderr, "message lacks %r: %s" % (word, c.stderr))


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    top = tempfile.mkdtemp(prefix="egx-robind-%d-" % os.getpid())
    os.chmod(top, 0o755)
    link = TOOL + "-link"
    R = Results()
    try:
        os.makedirs(TOOL + "/bin")
        os.makedirs(TOOL + "/share")
        with open(TOOL + "/bin/tool", "w") as f:
            f.write(TOOL_SCRIPT)
        os.chmod(TOOL + "/bin/tool", 0o755)
        with open(TOOL + "/share/version", "w") as f:
            f.write("toolchain 1.2.3\n")
        for d in (TOOL, TOOL + "/bin", TOOL + "/share"):
            os.chmod(d, 0o755)
        os.symlink(TOOL, link)
        R.run("hidden_without_bind", t_hidden, local.Case(top, "hidden"))
        R.run("bound_read_only", t_bound, local.Case(top, "bound"))
        R.run("refused_root", t_refused, local.Case(top, "root"), "/root", "/root")
        R.run("refused_run_folder", t_refused, local.Case(top, "run"), "/run/egress-exec",
              "/run/egress-exec")
        R.run("refused_symlink", t_refused, local.Case(top, "link"), link, "symbolic link")
    finally:
        shutil.rmtree(top, ignore_errors=True)
        shutil.rmtree(TOOL, ignore_errors=True)
        if os.path.islink(link):
            os.unlink(link)
    return R.finish()


if __name__ == "__main__":
    sys.exit(main())
