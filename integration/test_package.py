#!/usr/bin/env python3
"""The Debian package: `dpkg-buildpackage -us -uc -b` builds egress_*.deb from this tree,
lintian has nothing to say that debian/egress.lintian-overrides does not justify, and the
package installs into a fresh root with its real maintainer scripts, where `egressd -t`
accepts the shipped configuration as the account the package created.

The fresh root (no network here, so no debootstrap): a private mount namespace (unshare)
with a new root directory whose /usr is an overlay over this machine's /usr (the package's
dependencies are installed here: deps.sh test set) with an empty upper layer, and whose
/etc, /var and /run start empty but for the dynamic loader's cache and a passwd/group
holding only root and nobody. `dpkg --root` installs the .deb there (--force-depends: the
root's dpkg database is empty; the libraries it depends on are in the lower /usr), running
postinst in a chroot: systemd-sysusers creates the egressd account, systemd-tmpfiles its
directories. Nothing of it touches the machine: the namespace takes its mounts with it and
the directory is removed.

Building the package compiles the tree once (minutes); the result is kept in
$EGRESS_BINARY_DIR/package and reused while the sources are unchanged (a hash over every
source file). EGRESS_DEB=/path/to/egress_*.deb tests a given package instead. ctest label:
package (and integration)."""

import glob
import hashlib
import os
import re
import shutil
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
CACHE = os.path.join(BIN, "package")
BUILD_TIMEOUT = 3600        # one compile of the tree on a loaded 2-core machine
STEP_TIMEOUT = 300          # any other single command

# Directories that are build products, not sources (never copied into the package build).
SKIP_DIRS = {".git", "__pycache__", "findings", ".debhelper"}


def run(cmd, timeout=STEP_TIMEOUT, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, **kw)


def source_files():
    """Every source file of the tree, relative, sorted (build directories excluded)."""
    out = []
    for top, dirs, files in os.walk(SRC):
        rel = os.path.relpath(top, SRC)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not (
            rel == "." and (d.startswith("build") or d.startswith("obj-"))) and not (
            rel == "debian" and d in ("egress", "tmp")))
        for f in sorted(files):
            p = os.path.normpath(os.path.join(rel, f))
            if p.startswith("debian/") and (f.endswith(".log") or f.endswith(".substvars")
                                            or f in ("files", "debhelper-build-stamp")):
                continue
            if f.endswith(".pyc"):
                continue
            out.append(p)
    return out


def source_key(files):
    h = hashlib.sha256()
    for p in files:
        full = os.path.join(SRC, p)
        if os.path.islink(full):
            data = ("link:" + os.readlink(full)).encode()
        else:
            with open(full, "rb") as f:
                data = f.read()
        h.update(p.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


def package():
    """The .deb to test: EGRESS_DEB, the cached one for these sources, or a fresh build."""
    given = os.environ.get("EGRESS_DEB")
    if given:
        check(os.path.isfile(given), "EGRESS_DEB=%s: no such file" % given)
        return given, "given"
    for tool in ("dpkg-buildpackage", "dh", "scdoc", "lintian"):
        check(shutil.which(tool) is not None,
              "%s is missing: install the test set (sh scripts/deps.sh test)" % tool)
    files = source_files()
    key = source_key(files)
    keyfile = os.path.join(CACHE, "source.sha256")
    debs = glob.glob(os.path.join(CACHE, "egress_*.deb"))
    if debs and os.path.exists(keyfile) and open(keyfile).read().strip() == key:
        return debs[0], "reused (sources unchanged)"
    shutil.rmtree(CACHE, ignore_errors=True)
    work = os.path.join(CACHE, "src")
    os.makedirs(work)
    for p in files:
        dst = os.path.join(work, p)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(os.path.join(SRC, p), dst, follow_symlinks=False)
    env = dict(os.environ)
    env["DEB_BUILD_OPTIONS"] = "parallel=%d nocheck" % min(os.cpu_count() or 1, 2)
    env.pop("CI", None)         # the package build is not -Werror CI (dpkg flags differ)
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
        env.pop(k, None)
    t0 = time.monotonic()
    r = subprocess.run(["nice", "-n", "10", "dpkg-buildpackage", "-us", "-uc", "-b"],
                       cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=BUILD_TIMEOUT)
    with open(os.path.join(CACHE, "build.log"), "w") as f:
        f.write(r.stdout)
    check(r.returncode == 0, "dpkg-buildpackage failed (%s/build.log):\n%s" % (
        CACHE, r.stdout[-3000:]))
    debs = glob.glob(os.path.join(CACHE, "egress_*.deb"))
    check(len(debs) == 1, "expected one egress_*.deb in %s, got %s" % (CACHE, debs))
    shutil.rmtree(work, ignore_errors=True)
    with open(keyfile, "w") as f:
        f.write(key + "\n")
    return debs[0], "built in %.0f s" % (time.monotonic() - t0)


# --- checks on the .deb itself ---------------------------------------------------------

def t_layout(deb):
    r = run(["dpkg-deb", "-c", deb])
    check(r.returncode == 0, r.stdout)
    paths = {line.split()[-1].lstrip(".") if "->" not in line else
             line.split()[-3].lstrip(".") for line in r.stdout.splitlines()}
    want = ["/usr/sbin/egressd", "/usr/bin/egressctl", "/usr/bin/egress-exec",
            "/usr/libexec/egress/egressd-route-helper", "/etc/egressd/egressd.ini",
            "/lib/systemd/system/egressd.service", "/usr/lib/sysusers.d/egressd.conf",
            "/usr/lib/tmpfiles.d/egressd.conf", "/etc/logrotate.d/egressd",
            "/usr/share/man/man8/egressd.8.gz", "/usr/share/man/man8/egressctl.8.gz",
            "/usr/share/man/man1/egress-exec.1.gz", "/usr/share/man/man5/egressd.ini.5.gz",
            "/usr/share/man/man5/egress-workunit.5.gz", "/usr/share/doc/egress/egressd.md",
            "/usr/share/doc/egress/copyright"]
    missing = [p for p in want if p not in paths]
    check(not missing, "missing from the package: %s" % missing)
    stray = sorted(p for p in paths if p.startswith("/usr/local") or "/build" in p or
                   "bench" in p or "test_" in p)
    check(not stray, "files that do not belong in the package: %s" % stray)
    r = run(["dpkg-deb", "--ctrl-tarfile", deb])
    check(r.returncode == 0, "control tarball")
    with tempfile.TemporaryDirectory() as t:
        subprocess.run(["dpkg-deb", "-e", deb, t], check=True, timeout=STEP_TIMEOUT)
        conff = open(os.path.join(t, "conffiles")).read().split()
        check("/etc/egressd/egressd.ini" in conff, "egressd.ini is not a conffile: %s" % conff)
        check("/etc/logrotate.d/egressd" in conff, "logrotate file not a conffile")
        post = open(os.path.join(t, "postinst")).read()
        check("systemd-sysusers" in post and "egressd.conf" in post,
              "postinst does not create the account (sysusers)")
        check("systemd-tmpfiles" in post, "postinst does not create the directories")
        check(post.index("systemd-sysusers") < post.index("systemd-tmpfiles"),
              "postinst creates the directories before their owner")


def t_unit_paths(deb):
    with tempfile.TemporaryDirectory() as t:
        subprocess.run(["dpkg-deb", "-x", deb, t], check=True, timeout=STEP_TIMEOUT)
        unit = open(os.path.join(t, "lib/systemd/system/egressd.service")).read()
        check("/usr/local" not in unit, "the unit names /usr/local paths")
        check("Type=notify" in unit, "the unit is not Type=notify")
        check("ExecReload=/usr/bin/egressctl reload" in unit, "ExecReload is not egressctl")
        for line in unit.splitlines():
            if line.startswith(("ExecStart=", "ExecStartPre=", "ExecReload=")):
                exe = line.split("=", 1)[1].lstrip("+-@!").split()[0]
                check(exe.startswith("/"), "relative command in %s" % line)
                inside = os.path.join(t, exe.lstrip("/"))
                check(os.path.exists(inside) or os.path.exists(exe),
                      "%s: %s exists neither in the package nor on the system" % (line, exe))
            if line.startswith("Documentation=file:"):
                doc = line.split("file:", 1)[1]
                check(os.path.exists(os.path.join(t, doc.lstrip("/"))),
                      "Documentation= names %s, not installed" % doc)
        if shutil.which("systemd-analyze"):
            ud = os.path.join(t, "unitcheck")
            os.makedirs(ud)
            shutil.copy(os.path.join(t, "lib/systemd/system/egressd.service"), ud)
            r = run(["systemd-analyze", "security", "--offline=true",
                     os.path.join(ud, "egressd.service")])
            last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
            print("  %s" % last)
            score = float(last.split(":")[1].split()[0]) if ":" in last else 99.0
            # 4.3 before the notify/hardening change; must not regress past it.
            check(score <= 4.3, "systemd-analyze security: %s" % last)


def t_lintian(deb):
    t0 = time.monotonic()
    r = run(["lintian", "--fail-on", "error,warning", "--no-tag-display-limit", deb])
    print("  lintian %.0f s; overridden tags are listed in debian/egress.lintian-overrides"
          % (time.monotonic() - t0))
    check(r.returncode == 0, "lintian:\n%s" % r.stdout)


# --- install into a fresh root (run inside a private mount namespace) -------------------

def make_root(root):
    """Directories and the few /etc files a root needs before dpkg can install there."""
    for d in ("usr", "etc", "var/lib/dpkg/info", "var/lib/dpkg/updates",
              "var/lib/dpkg/triggers", "var/log", "var/cache", "run", "tmp", "proc", "dev",
              "up"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
    open(os.path.join(root, "var/lib/dpkg/available"), "w").close()
    for link in ("bin", "sbin", "lib", "lib64", "lib32"):
        target = os.readlink("/" + link) if os.path.islink("/" + link) else None
        if target is not None:
            os.symlink(target, os.path.join(root, link))
    with open(os.path.join(root, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n"
                "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    with open(os.path.join(root, "etc/group"), "w") as f:
        f.write("root:x:0:\nnogroup:x:65534:\n")
    for name in ("shadow", "gshadow"):
        p = os.path.join(root, "etc", name)
        with open(p, "w") as f:
            f.write("root:*::\n" if name == "gshadow" else "root:*:19000:0:99999:7:::\n")
        os.chmod(p, 0o640)
    for name in ("ld.so.cache", "ld.so.conf", "nsswitch.conf"):
        if os.path.exists("/etc/" + name):
            shutil.copy("/etc/" + name, os.path.join(root, "etc", name))
    if os.path.isdir("/etc/ld.so.conf.d"):
        shutil.copytree("/etc/ld.so.conf.d", os.path.join(root, "etc/ld.so.conf.d"))
    if os.path.isdir("/etc/alternatives"):
        shutil.copytree("/etc/alternatives", os.path.join(root, "etc/alternatives"),
                        symlinks=True)


def mount_root(root):
    lab_run = lambda *a: subprocess.run(a, check=True, timeout=STEP_TIMEOUT)  # noqa: E731
    # The upper layer on a tmpfs: overlayfs refuses an upper directory on another overlay
    # (this machine's root may be one, in a container).
    lab_run("mount", "-t", "tmpfs", "-o", "mode=0755,size=512m", "egress-pkgroot",
            os.path.join(root, "up"))
    os.makedirs(os.path.join(root, "up/usr"))
    os.makedirs(os.path.join(root, "up/work"))
    lab_run("mount", "-t", "overlay", "overlay", "-o",
            "lowerdir=/usr,upperdir=%s/up/usr,workdir=%s/up/work" % (root, root),
            os.path.join(root, "usr"))
    lab_run("mount", "-t", "proc", "proc", os.path.join(root, "proc"))
    lab_run("mount", "--rbind", "/dev", os.path.join(root, "dev"))


def chroot(root, *cmd):
    return run(["chroot", root] + list(cmd))


def inside(root, deb):
    """Runs in the private mount namespace: install, check, remove, purge."""
    res = Results()
    mount_root(root)
    res.run("root_has_no_egressd_account",
            lambda: check(chroot(root, "getent", "passwd", "egressd").returncode != 0,
                          "the fresh root already has an egressd account"))

    def install():
        r = run(["dpkg", "--root=" + root, "--force-depends", "-i", deb])
        check(r.returncode == 0, "dpkg -i:\n%s" % r.stdout)
        check("Failed to resolve user" not in r.stdout, "postinst:\n%s" % r.stdout)
        print("\n".join("  " + x for x in r.stdout.splitlines()[-6:]))
    res.run("dpkg_install", install)

    def account():
        r = chroot(root, "getent", "passwd", "egressd")
        check(r.returncode == 0, "postinst did not create the egressd account")
        f = r.stdout.strip().split(":")
        check(f[0] == "egressd" and f[2] != "0" and int(f[2]) < 1000 and
              f[6] == "/usr/sbin/nologin", "egressd account: %s" % r.stdout)
        st = os.stat(os.path.join(root, "var/log/egressd"))
        check(st.st_uid == int(f[2]) and (st.st_mode & 0o777) == 0o750,
              "/var/log/egressd: uid %d mode %o" % (st.st_uid, st.st_mode & 0o777))
    res.run("postinst_creates_account_and_dirs", account)

    def check_config():
        r = chroot(root, "/usr/sbin/egressd", "-t", "-c", "/etc/egressd/egressd.ini")
        check(r.returncode == 0 and "/etc/egressd/egressd.ini: ok" in r.stdout,
              "egressd -t in the fresh root: rc %d\n%s" % (r.returncode, r.stdout))
        print("  " + r.stdout.strip())
    res.run("egressd_t_in_fresh_root", check_config)

    def bad_config():
        # negative twin: a broken configuration is refused with file:line, status 1
        p = os.path.join(root, "etc/egressd/broken.ini")
        with open(p, "w") as f:
            f.write("[egressd]\nno_such_key = 1\n")
        r = chroot(root, "/usr/sbin/egressd", "-t", "-c", "/etc/egressd/broken.ini")
        check(r.returncode == 1 and "/etc/egressd/broken.ini:2" in r.stdout,
              "broken config: rc %d %s" % (r.returncode, r.stdout))
        os.unlink(p)
    res.run("egressd_t_refuses_broken_config", bad_config)

    def versions():
        ver = run(["dpkg-deb", "-f", deb, "Version"]).stdout.strip()
        for exe, name in (("/usr/sbin/egressd", "egressd"), ("/usr/bin/egressctl", "egressctl"),
                          ("/usr/bin/egress-exec", "egress-exec"),
                          ("/usr/libexec/egress/egressd-route-helper", "egressd-route-helper")):
            r = chroot(root, exe, "--version")
            check(r.returncode == 0 and r.stdout.strip() == "%s %s" % (name, ver),
                  "%s --version: rc %d %r (package %s)" % (exe, r.returncode, r.stdout, ver))
            r = chroot(root, exe, "--help")
            check(r.returncode == 0 and "usage" in r.stdout, "%s --help" % exe)
    res.run("binaries_help_version", versions)

    def unit_verifies():
        # the unit as systemd would load it from the installed root: every command exists,
        # every directive is known; every man page Documentation= names is installed
        if shutil.which("systemd-analyze") is None:
            return
        r = run(["systemd-analyze", "verify", "--man=no", "--root=" + root, "egressd.service"])
        check(r.returncode == 0 and r.stdout.strip() == "",
              "systemd-analyze verify: rc %d\n%s" % (r.returncode, r.stdout))
        unit = open(os.path.join(root, "lib/systemd/system/egressd.service")).read()
        pages = re.findall(r"man:([\w.-]+)\((\d)\)", unit)
        check(pages, "no man: in Documentation=")
        for name, sec in pages:
            p = os.path.join(root, "usr/share/man/man%s/%s.%s.gz" % (sec, name, sec))
            check(os.path.exists(p), "Documentation= man:%s(%s): %s missing" % (name, sec, p))
    res.run("unit_verifies_in_root", unit_verifies)

    def remove_keeps_conffile():
        with open(os.path.join(root, "etc/egressd/egressd.ini"), "a") as f:
            f.write("; edited by the operator\n")
        r = run(["dpkg", "--root=" + root, "--force-depends", "-r", "egress"])
        check(r.returncode == 0, "dpkg -r:\n%s" % r.stdout)
        check(not os.path.exists(os.path.join(root, "usr/sbin/egressd")), "egressd left")
        check(os.path.exists(os.path.join(root, "etc/egressd/egressd.ini")),
              "remove deleted the edited conffile")
        r = run(["dpkg", "--root=" + root, "--force-depends", "-P", "egress"])
        check(r.returncode == 0, "dpkg -P:\n%s" % r.stdout)
        check(not os.path.exists(os.path.join(root, "etc/egressd/egressd.ini")),
              "purge left the conffile")
    res.run("remove_keeps_conffile_purge_removes", remove_keeps_conffile)
    return res.finish()


def main():
    lab.require_root()
    if len(sys.argv) == 4 and sys.argv[1] == "--inside":
        return inside(sys.argv[2], sys.argv[3])
    res = Results()
    box = {}

    def build():
        deb, how = package()
        box["deb"] = deb
        print("  %s: %s" % (os.path.basename(deb), how))
    res.run("package_built", build)
    if "deb" not in box:
        return res.finish()
    deb = box["deb"]
    res.run("package_layout", t_layout, deb)
    res.run("unit_paths_and_security", t_unit_paths, deb)
    res.run("lintian_clean", t_lintian, deb)
    root = tempfile.mkdtemp(prefix="egress-pkgroot.")
    # a root file system's / is 0755: mkdtemp's 0700 would keep the drop account that
    # `egressd -t` checks the configuration as from reaching /etc/egressd
    os.chmod(root, 0o755)
    try:
        make_root(root)
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                            os.path.abspath(__file__), "--inside", root, deb],
                           timeout=STEP_TIMEOUT * 3)
        res.run("fresh_root_install", lambda: check(r.returncode == 0,
                                                    "install checks failed (above)"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
