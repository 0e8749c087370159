#!/usr/bin/env python3
"""egressd least privilege (docs/SECURITY.md, "Privilege design: egressd"): the drop is egressd's default and only mode as root.
Expectations:

- default_drop_without_u: egressd started as root WITHOUT -u or [egressd] user (this lab's
  machine has no `egressd` account) ends as uid/gid 65534 on every thread, with no
  capability, NoNewPrivs 1, Seccomp 2, and logs the account it fell back to and the
  recommendation of a dedicated `egressd` user (when there is an egressd account, it must
  run as that one instead).
- planted_log_links_refused: a symlink, then a hard link, planted as decisions.jsonl in
  the nobody-owned log directory, pointing to a root-only 0600 file with a torn last line:
  egressd as root refuses to start (non-zero exit, "symbolic link" / "more than one
  link"), and the file keeps its bytes, owner and mode.
- pac_copy_link_not_followed: with route = pac FILE (copied as root at start-up into the
  nobody-owned directory), a hard link to a root-only 0600 file planted as the copy's
  temporary name: the file keeps its bytes, mode and single link; the copy is installed.
- refused_root_and_unknown: `-u root`, `-u 0`, `-u no-such-user-<pid>`, `user = root` and
  `user = <unknown>` in the config are refused before start-up: non-zero exit within a
  bounded time, a message naming the problem (`uid/gid 0`, `does not exist`; the config
  key as file:line), and nothing was started (no control socket, no decision log). `-t`
  reports the same for the config key.
- pdeathsig_survives_drop: like egress-exec's private egressd, a parent process starts
  egressd with PR_SET_PDEATHSIG(SIGTERM); after egressd has dropped (uid 65534) the parent
  gets SIGKILL: egressd still receives SIGTERM (the drop re-armed the signal the kernel
  clears on a credential change), drains and exits 0 within drain_timeout + 3 s.
- private_egressd_dies_with_egress_exec: the real thing: `egress-exec run` without a
  running egressd starts its private egressd (executor/egressd_client.c arms
  PR_SET_PDEATHSIG), which drops to 65534; SIGKILL of egress-exec ends that egressd within
  5 s; `egress-exec cleanup` then exits 0.

With `-u nobody` (the explicit form):

- dropped_everywhere: every thread of egressd runs as uid/gid 65534 with no capability
  (CapPrm/CapEff/CapInh/CapAmb 0; the main thread's bounding set 0), NoNewPrivs 1,
  Seccomp 2 (the filter is synchronised to all threads), and egressd is not dumpable (no
  core with credentials in it; the route helper, same uid, cannot ptrace it).
- unprivileged_dynamic_grant: grant.create after the drop binds the worker's listener to
  its veth (SO_BINDTODEVICE once, no CAP_NET_RAW); an allowed CONNECT echoes, its allow
  record is on disk; the negative twin (a name not granted) is 403 with no origin
  connection; the log verifies.
- log_reopen_unprivileged: the decision log is rotated (renamed) and SIGUSR1 makes egressd
  open a new file in its directory (owned by the egressd user), which receives the next
  record.
- reload_unprivileged: a reload with a readable configuration succeeds after the drop.
- pac_helper_under_filter: route = pac FILE: the route helper started by the dropped
  egressd runs as 65534 under a seccomp filter, evaluates the PAC (DIRECT), the hop works.
- clean_exit: SIGTERM drains and exits 0 with no sanitizer report.
- credentials_loaded_before_drop: with route = proxy and a root-only (0600) Basic
  credentials file, the dropped egressd (which can no longer read the file) still
  authenticates to a squid that demands Basic: the secret was loaded before the drop.

egressd is started through a wrapper that adds `-u nobody` for the explicit checks (the
lab's Egressd class knows nothing of -u); the default checks use the real binary. Its files live in a world-traversable directory whose log directory is
owned by nobody, as docs/SECURITY.md tells an operator to set up /var/log/egressd.
"""

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
import sandboxtest  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import egressd as ed  # noqa: E402
from labtools import proxies, proxyclient  # noqa: E402
from labtools.checks import (SANITIZER_MARKERS, allowed_tunnel, bounded_wait,  # noqa: E402
                             check, refused, require_binaries, stop_clean)

NOBODY = 65534
ZONE = {"echo.lab.test": {"A": [lab.ECHO_ORIGIN]}, "origin.lab.test": {"A": [lab.HTTP_ORIGIN]},
        "other.lab.test": {"A": [lab.ORIGIN2]}, "proxy.lab.test": {"A": [proxies.PROXY_ADDR]}}
ALLOW = ["tcp://echo.lab.test:7", "https://origin.lab.test"]


def status(pid, task=None):
    path = "/proc/%d/status" % pid if task is None else "/proc/%d/task/%d/status" % (pid, task)
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def children(pid):
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                st = f.read()
        except OSError:
            continue
        if int(st[st.rindex(")") + 2:].split()[1]) == pid:
            out.append(int(p))
    return out


def make_wrapper(top, real):
    """A binary dir whose egressd adds -u nobody; the rest are the real binaries."""
    bdir = os.path.join(top, "bin")
    os.makedirs(os.path.join(bdir, "egressd"))
    w = os.path.join(bdir, "egressd", "egressd")
    with open(w, "w") as f:
        f.write("#!/bin/sh\nexec %s -u nobody \"$@\"\n" % real)
    os.chmod(w, 0o755)
    os.symlink(ed.binary("egressctl"), os.path.join(bdir, "egressd", "egressctl"))
    return bdir


def fresh_dir(top, name):
    d = os.path.join(top, name)
    os.makedirs(d, mode=0o755)
    os.chown(d, NOBODY, NOBODY)
    return d


def start(L, top, logdir, settings):
    """egressd with its files where the egressd user may read (config) and write (log
    directory), as docs/SECURITY.md sets them up. LeakSanitizer works in the dropped
    process (the sanitizer build's filter allows its getdents and ptrace), so stop_clean
    also checks for leaks here."""
    s = {"decision_log": os.path.join(logdir, "decisions.jsonl"),
         "control_socket": os.path.join(logdir, "control.sock")}
    s.update(settings)
    d = L.egressd(settings=s, start=False)
    d.conf_path = os.path.join(logdir, "egressd.ini")
    d.write_config()
    os.chmod(d.conf_path, 0o644)
    d.start()
    return d


def t_dropped(L, d):
    pid = d.proc.pid
    st = status(pid)
    check(st["Uid"].split() == [str(NOBODY)] * 4, "Uid %s" % st["Uid"])
    check(st["Gid"].split() == [str(NOBODY)] * 4, "Gid %s" % st["Gid"])
    check(int(st["CapBnd"], 16) == 0, "CapBnd %s" % st["CapBnd"])
    tasks = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
    check(len(tasks) >= 2, "expected the decision-log writer thread too: %s" % tasks)
    for t in tasks:
        s = status(pid, t)
        # every thread, also those started before the drop (sandbox_egressd_early)
        for k in ("CapPrm", "CapEff", "CapInh", "CapAmb", "CapBnd"):
            check(int(s.get(k, "0"), 16) == 0, "task %d %s %s" % (t, k, s.get(k)))
        check(s["NoNewPrivs"] == "1", "task %d NoNewPrivs %s" % (t, s["NoNewPrivs"]))
        check(s["Seccomp"] == "2", "task %d Seccomp %s" % (t, s["Seccomp"]))
        check(s["Uid"].split() == [str(NOBODY)] * 4, "task %d Uid %s" % (t, s["Uid"]))
    # not dumpable: /proc/<pid>/ files are root-owned then
    check(os.stat("/proc/%d/mem" % pid).st_uid == 0, "egressd is dumpable")
    check("running as nobody" in d.stderr_text(), "no drop line: %s" % d.stderr_tail(5))


def t_dynamic_grant(L, d):
    start = len(d.decisions())
    L.grant(d, 0, ALLOW, principal="pd-" + L.prefix)
    t = L.connect(0, "echo.lab.test:7")
    allowed_tunnel(t)
    try:
        check(proxyclient.tunnel_echo(t.sock, b"unprivileged") == b"unprivileged", "echo")
        client = "%s:%d" % t.sock.getsockname()[:2]
    finally:
        t.close()
    rec = d.wait_record(lambda r: r.get("verdict") == "allow" and r.get("client") == client,
                        timeout=5, start=start)
    check(rec is not None, "no allow record for %s" % client)
    with L.no_origin_connection():
        refused(L.connect(0, "other.lab.test:443"), 403, "not_granted")
    rc, out, err = d.egressctl("log", "verify", d.log_path)
    check(rc == 0, "log verify (%d): %s %s" % (rc, out, err))


def t_log_reopen(L, d):
    rotated = d.log_path + ".1"
    os.rename(d.log_path, rotated)
    d.signal(signal.SIGUSR1)
    check(bounded_wait(lambda: os.path.exists(d.log_path), 5), "no new log after SIGUSR1:\n%s"
          % d.stderr_tail(5))
    t = L.connect(0, "echo.lab.test:7")
    allowed_tunnel(t)
    t.close()
    check(bounded_wait(lambda: os.path.getsize(d.log_path) > 0, 5),
          "the reopened log got no record")
    check(os.stat(d.log_path).st_uid == NOBODY, "new log owned by %d"
          % os.stat(d.log_path).st_uid)


def t_reload(L, d):
    r = d.control({"op": "reload"}, timeout=10)
    check(r.get("ok"), "reload after the drop: %s" % r)
    check(d.alive(), "egressd died on reload")
    t = L.connect(0, "echo.lab.test:7")
    allowed_tunnel(t)
    t.close()
    # Negative twin (documented cost of the drop): a configuration only root can read
    # cannot be reloaded; the running configuration is kept and still serves.
    os.chmod(d.conf_path, 0o600)
    try:
        r = d.control({"op": "reload"}, timeout=10)
        check(not r.get("ok") and "Permission denied" in r.get("message", ""),
              "reload of a root-only config after the drop: %s" % r)
        t = L.connect(0, "echo.lab.test:7")
        allowed_tunnel(t)
        t.close()
    finally:
        os.chmod(d.conf_path, 0o644)


def t_pac_helper(L, top):
    pac = os.path.join(top, "direct.pac")
    with open(pac, "w") as f:
        f.write('function FindProxyForURL(url, host) { return "DIRECT"; }\n')
    os.chmod(pac, 0o644)
    logdir = fresh_dir(top, "pac-log")
    d = start(L, top, logdir, {"route": "pac " + pac, "route_cache_ttl": "1s"})
    try:
        L.grant(d, 1, ALLOW, principal="pdpac-" + L.prefix)
        ok = bounded_wait(lambda: L.connect(1, "origin.lab.test:443").status == 200, 10,
                          step=0.3)
        check(ok, "no hop through the PAC route:\n%s" % d.stderr_tail(10))
        helpers = [p for p in children(d.proc.pid)]
        check(helpers, "no route helper child")
        for h in helpers:
            s = status(h)
            check(s["Uid"].split()[0] == str(NOBODY), "helper uid %s" % s["Uid"])
            check(s["Seccomp"] == "2" and s["NoNewPrivs"] == "1", "helper %s" % s)
    finally:
        stop_clean(d)


def t_credentials(L, top):
    """proxy_credentials is root-only (0600, root) and stays so: egressd reads it as root
    before the drop; after the drop the egressd user cannot read the file, yet the Basic
    credential it holds in memory still authenticates to the upstream squid."""
    user, password = "alice", "pw-%d-Xy" % os.getpid()
    sq = proxies.Squid(L, auth="basic", users={user: password}).start()
    try:
        cf = proxies.credentials_file(L, "pd-creds.ini", {"proxy.lab.test:3128": {
            "scheme": "basic", "username": user, "password": password}}, mode=0o600)
        st = os.stat(cf)
        check(st.st_uid == 0 and (st.st_mode & 0o777) == 0o600, "creds file mode")
        d = start(L, top, fresh_dir(top, "creds-log"),
                  {"route": "proxy http://proxy.lab.test:3128", "proxy_credentials": cf})
        try:
            check(status(d.proc.pid)["Uid"].split()[0] == str(NOBODY), "not dropped")
            L.grant(d, 0, ["https://origin.lab.test"], principal="pdcr-" + L.prefix, port=3129)
            r = L.connect(0, "origin.lab.test:443", proxy=L.proxy_of(0, 3129))
            allowed_tunnel(r)
            r.close()
        finally:
            stop_clean(d)
    finally:
        sq.stop()


def with_binary_dir(bdir, fn, *args):
    """Run fn with EGRESS_BINARY_DIR = bdir (the lab resolves binaries at start)."""
    saved = os.environ.get("EGRESS_BINARY_DIR")
    os.environ["EGRESS_BINARY_DIR"] = bdir
    try:
        return fn(*args)
    finally:
        if saved is None:
            os.environ.pop("EGRESS_BINARY_DIR", None)
        else:
            os.environ["EGRESS_BINARY_DIR"] = saved


def t_default_drop(L, top, real_bdir):
    """No -u, no user key: the default account (egressd if it exists, else nobody)."""
    d = with_binary_dir(real_bdir, start, L, top, fresh_dir(top, "default-log"), {})
    try:
        pid = d.proc.pid
        err = d.stderr_text()
        try:
            import pwd
            pwd.getpwnam("egressd")
            want, fell_back = "egressd", False
        except KeyError:
            want, fell_back = "nobody", True
        uid = ed.run_user()[1]
        check("running as %s (uid %d" % (want, uid) in err, "no drop line for %s:\n%s"
              % (want, d.stderr_tail(5)))
        if fell_back:
            check("create a dedicated egressd system user" in err,
                  "no recommendation of a dedicated user:\n%s" % d.stderr_tail(5))
        tasks = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
        for t in tasks:
            st = status(pid, t)
            check(st["Uid"].split() == [str(uid)] * 4, "task %d Uid %s" % (t, st["Uid"]))
            for k in ("CapPrm", "CapEff", "CapInh", "CapAmb"):
                check(int(st.get(k, "0"), 16) == 0, "task %d %s %s" % (t, k, st.get(k)))
            check(st["NoNewPrivs"] == "1", "task %d NoNewPrivs %s" % (t, st["NoNewPrivs"]))
            check(st["Seccomp"] == "2", "task %d Seccomp %s" % (t, st["Seccomp"]))
        check(int(status(pid)["CapBnd"], 16) == 0, "CapBnd %s" % status(pid)["CapBnd"])
        # and it serves: a dynamic grant's listener on the veth, an allowed CONNECT
        L.grant(d, 1, ALLOW, principal="pddef-" + L.prefix, port=3131)
        r = L.connect(1, "echo.lab.test:7", proxy=L.proxy_of(1, 3131))
        allowed_tunnel(r)
        r.close()
    finally:
        stop_clean(d)


def t_refused(L, top, real):
    """Root and unknown accounts are refused before anything starts."""
    cdir = fresh_dir(top, "refused")
    sock = os.path.join(cdir, "control.sock")
    dlog = os.path.join(cdir, "decisions.jsonl")
    base = "[egressd]\ncontrol_socket = %s\ndecision_log = %s\n" % (sock, dlog)
    plain = os.path.join(cdir, "plain.ini")
    with open(plain, "w") as f:
        f.write(base)
    unknown = "no-such-user-%d" % os.getpid()
    cases = [(["-u", "root"], plain, "uid/gid 0"),
             (["-u", "0"], plain, "uid/gid 0"),
             (["-u", unknown], plain, "does not exist")]
    for name, needle in (("root", "uid/gid 0"), (unknown, "does not exist")):
        path = os.path.join(cdir, "user-%s.ini" % name)
        with open(path, "w") as f:
            f.write(base + "user = %s\n" % name)
        cases.append(([], path, "%s:4: user: " % path))
        cases.append(([], path, needle))
        cases.append((["-t"], path, needle))
    for extra, conf, needle in cases:
        t0 = time.monotonic()
        cp = subprocess.run(["ip", "netns", "exec", L.ns_host, real, "-f", "-c", conf]
                            + extra, capture_output=True, text=True, timeout=20,
                            env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
        took = time.monotonic() - t0
        what = "%s %s" % (" ".join(extra), os.path.basename(conf))
        check(cp.returncode != 0, "%s: exit 0:\n%s" % (what, cp.stderr))
        check(needle in cp.stderr, "%s: no '%s' in:\n%s" % (what, needle, cp.stderr))
        check(took < 10, "%s took %.1f s" % (what, took))
        check(not os.path.exists(sock) and not os.path.exists(dlog),
              "%s: egressd started before refusing" % what)
    # the positive twin of the -t check: a valid account passes
    ok = os.path.join(cdir, "user-nobody.ini")
    with open(ok, "w") as f:
        f.write(base + "user = nobody\n")
    cp = subprocess.run([real, "-t", "-c", ok], capture_output=True, text=True, timeout=20,
                        env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
    check(cp.returncode == 0, "-t with user = nobody: %s" % cp.stderr)
    print("  refused: %d cases, each before start-up" % len(cases))


def t_planted_links(L, top, real):
    """A link planted as the decision log's name in the directory the egressd user owns
    (a symlink, a hard link to a root-only file with a torn tail) makes root egressd refuse
    to start, and the target is untouched (the positive twin: every other test here)."""
    cdir = fresh_dir(top, "planted")
    rootonly = os.path.join(top, "rootonly-%d" % os.getpid())
    os.makedirs(rootonly, mode=0o700)
    victim = os.path.join(rootonly, "secret")
    content = b"root-only\npartial line, no newline"
    with open(victim, "wb") as f:
        f.write(content)
    os.chmod(victim, 0o600)
    sock = os.path.join(cdir, "control.sock")
    dlog = os.path.join(cdir, "decisions.jsonl")
    conf = os.path.join(cdir, "planted.ini")
    with open(conf, "w") as f:
        f.write("[egressd]\ncontrol_socket = %s\ndecision_log = %s\n" % (sock, dlog))
    os.chmod(conf, 0o644)
    for kind, plant, needle in (("symlink", os.symlink, "symbolic link"),
                                ("hard link", os.link, "more than one link")):
        plant(victim, dlog)
        cp = subprocess.run(["ip", "netns", "exec", L.ns_host, real, "-f", "-c", conf,
                             "-u", "nobody"], capture_output=True, text=True, timeout=20,
                            env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
        check(cp.returncode != 0, "%s: egressd started:\n%s" % (kind, cp.stderr))
        check(needle in cp.stderr, "%s: no '%s' in:\n%s" % (kind, needle, cp.stderr))
        with open(victim, "rb") as f:
            check(f.read() == content, "%s: the target was changed" % kind)
        st = os.stat(victim)
        check(st.st_uid == 0 and st.st_mode & 0o7777 == 0o600,
              "%s: target owner/mode changed: %d %o" % (kind, st.st_uid, st.st_mode))
        os.unlink(dlog)
        if os.path.exists(sock):
            os.unlink(sock)
    print("  planted symlink and hard link refused, target untouched")


def t_pac_copy_link(L, top, real):
    """route = pac FILE is copied as root at start-up into the nobody-owned directory: a
    hard link planted as the copy's temporary name must not make root overwrite (or chmod)
    the root-only file it names; the copy is still installed."""
    cdir = fresh_dir(top, "paccopy")
    rootonly = os.path.join(top, "rootonly-pac-%d" % os.getpid())
    os.makedirs(rootonly, mode=0o700)
    victim = os.path.join(rootonly, "secret")
    content = b"root-only secret\n"
    with open(victim, "wb") as f:
        f.write(content)
    os.chmod(victim, 0o600)
    pac = os.path.join(cdir, "local.pac")
    with open(pac, "w") as f:
        f.write('function FindProxyForURL(url, host) { return "DIRECT"; }\n')
    os.chmod(pac, 0o644)
    copy = os.path.join(cdir, "pac.js")
    conf = os.path.join(cdir, "paccopy.ini")
    with open(conf, "w") as f:
        f.write("[egressd]\ncontrol_socket = %s\ndecision_log = %s\nroute = pac %s\n"
                "pac_copy = %s\n" % (os.path.join(cdir, "control.sock"),
                                      os.path.join(cdir, "decisions.jsonl"), pac, copy))
    os.chmod(conf, 0o644)
    os.link(victim, copy + ".tmp")
    p = subprocess.Popen(["ip", "netns", "exec", L.ns_host, real, "-f", "-c", conf,
                          "-u", "nobody"], stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
    try:
        check(bounded_wait(lambda: os.path.exists(os.path.join(cdir, "control.sock")) and
                           os.path.exists(copy), 15), "egressd did not start")
        time.sleep(0.3)   # past the drop: the start-up copy is done
    finally:
        p.terminate()
        try:
            _, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
    with open(victim, "rb") as f:
        check(f.read() == content, "the root-only file was overwritten:\n%s" % err)
    st = os.stat(victim)
    check(st.st_mode & 0o7777 == 0o600 and st.st_nlink == 1,
          "root-only file mode %o links %d" % (st.st_mode & 0o7777, st.st_nlink))
    with open(copy) as f:
        check("FindProxyForURL" in f.read(), "the PAC copy was not installed")
    print("  planted PAC copy temp link: target untouched, copy installed")


PARENT = r"""
import ctypes, os, signal, subprocess, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def arm():
    # what executor/egressd_client.c does for its private egressd
    if libc.prctl(1, int(signal.SIGTERM), 0, 0, 0) != 0:   # PR_SET_PDEATHSIG
        os._exit(126)
ns, exe, conf, errp = sys.argv[1:5]
err = open(errp, "ab")
p = subprocess.Popen(["ip", "netns", "exec", ns, exe, "-f", "-c", conf], preexec_fn=arm,
                     stdin=subprocess.DEVNULL, stdout=err, stderr=err)
print(p.pid, flush=True)
time.sleep(120)
"""


def t_pdeathsig(L, top, real_bdir):
    """SIGKILL of the starting parent still ends the dropped egressd (re-armed signal)."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    logdir = fresh_dir(top, "pdeath-log")
    d = with_binary_dir(real_bdir, L.egressd,
                        {"decision_log": os.path.join(logdir, "decisions.jsonl"),
                         "control_socket": os.path.join(logdir, "control.sock")},
                        None, None, False)
    d.conf_path = os.path.join(logdir, "egressd.ini")
    d.write_config()
    os.chmod(d.conf_path, 0o644)
    exe = os.path.join(real_bdir, "egressd", "egressd")
    # The orphaned egressd is reparented to this process, which can then reap it and
    # read its exit status (bounded).
    check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0, "PR_SET_CHILD_SUBREAPER")
    parent = subprocess.Popen([sys.executable, "-c", PARENT, L.ns_host, exe, d.conf_path,
                               d.stderr_path], stdout=subprocess.PIPE, text=True)
    epid = None
    try:
        epid = int(parent.stdout.readline().strip() or "0")
        check(epid > 0, "the parent did not start egressd")
        d.proc = None
        check(bounded_wait(lambda: os.path.exists(d.control_path), 20, step=0.05),
              "egressd not ready:\n%s" % d.stderr_tail())
        check(bounded_wait(lambda: d.control({"op": "status"}).get("ok"), 10, step=0.1),
              "no status")
        st = status(epid)
        check(st["Uid"].split()[0] == str(ed.run_user()[1]), "not dropped: %s" % st["Uid"])
        check(int(st["PPid"]) == parent.pid, "egressd's parent is %s, not %d"
              % (st["PPid"], parent.pid))
        t0 = time.monotonic()
        parent.kill()
        parent.wait(timeout=10)
        deadline = t0 + 2 + 3   # lab drain_timeout 2 s + slack
        wst = None
        while time.monotonic() < deadline:
            pid, w = os.waitpid(epid, os.WNOHANG)
            if pid == epid:
                wst = w
                break
            time.sleep(0.02)
        took = time.monotonic() - t0
        check(wst is not None, "egressd still runs %.1f s after its parent's SIGKILL:\n%s"
              % (took, d.stderr_tail(5)))
        epid = None
        check(os.WIFEXITED(wst) and os.WEXITSTATUS(wst) == 0,
              "egressd ended with wait status %#x:\n%s" % (wst, d.stderr_tail(10)))
        bad = [m for m in SANITIZER_MARKERS if m in d.stderr_text()]
        check(not bad, "sanitizer report:\n%s" % d.stderr_tail(40))
        check("draining" in d.stderr_text(), "no SIGTERM drain:\n%s" % d.stderr_tail(5))
        print("  pdeathsig: dropped egressd exited 0 %.2f s after its parent's SIGKILL"
              % took)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        if epid:
            try:
                os.kill(epid, signal.SIGKILL)
                os.waitpid(epid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def proc_children_named(ppid, comm):
    out = []
    for pid in children(ppid):
        try:
            with open("/proc/%d/comm" % pid) as f:
                if f.read().strip() == comm:
                    out.append(pid)
        except OSError:
            pass
    return out


def gone(pid):
    """True when pid no longer runs (missing, or a zombie not yet reaped by its reaper)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return True
    return st[st.rindex(")") + 2:].split()[0] in ("Z", "X")


def t_private_egressd(L, real_bdir):
    """egress-exec's own private egressd (dropped) dies with a SIGKILLed egress-exec."""
    exe = os.path.join(real_bdir, "executor", "egress-exec")
    args = ["nsenter", "--net=/run/netns/" + L.ns_host, exe, "run",
            "--allow", "http://origin.lab.test", "--wall", "30s",
            "--egressd-setting", "dns_server=198.51.100.53",
            "--egressd-setting", "allow_special_address=198.51.100.0/24",
            "--principal", "pd-private", "--", "/bin/sleep", "300"]
    env = dict(os.environ, EGRESS_EGRESSD=os.path.join(real_bdir, "egressd", "egressd"))
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    epid = None
    try:
        def dropped_child():
            nonlocal epid
            for c in proc_children_named(p.pid, "egressd"):
                try:
                    if status(c)["Uid"].split()[0] == str(ed.run_user()[1]):
                        epid = c
                        return True
                except (OSError, KeyError):
                    pass
            return p.poll() is not None
        bounded_wait(dropped_child, 30, step=0.05)
        check(epid is not None, "no dropped private egressd under egress-exec (rc %s): %s"
              % (p.poll(), (p.stderr.read() if p.poll() is not None else b"")[-600:]))
        time.sleep(0.3)   # the run is under way (egressd answered status)
        t0 = time.monotonic()
        p.kill()
        p.wait(timeout=10)
        ok = bounded_wait(lambda: gone(epid), 5, step=0.02)
        took = time.monotonic() - t0
        check(ok, "the private egressd %d outlived egress-exec by %.1f s" % (epid, took))
        epid = None
        print("  private egressd gone %.2f s after egress-exec's SIGKILL" % took)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
        p.stderr.close()
        if epid is not None and not gone(epid):
            os.kill(epid, signal.SIGKILL)
        cp = subprocess.run(["nsenter", "--net=/run/netns/" + L.ns_host, exe, "cleanup"],
                            capture_output=True, timeout=60)
        sandboxtest.forget_kept(cp.stdout)   # the evidence cleanup kept of this run
    check(cp.returncode == 0, "cleanup rc=%d %r" % (cp.returncode, cp.stderr[-400:]))


def main():
    lab.require_root()
    require_binaries("egressd", "egressctl", "egressd-route-helper", "egress-exec")
    real = os.environ.get("H13_EGRESSD") or ed.binary("egressd")
    real_bdir = os.path.dirname(os.path.dirname(os.path.abspath(real)))
    cp = subprocess.run([real, "-h"], capture_output=True, text=True, timeout=10)
    if "-u USER" not in cp.stdout + cp.stderr:      # --help: usage on stdout, exit 0
        print("FAIL: %s has no -u option" % real)
        print("0 passed, 1 failed")
        return 1
    top = tempfile.mkdtemp(prefix="egpd-", dir="/tmp")
    os.chmod(top, 0o755)
    saved = os.environ.get("EGRESS_BINARY_DIR")
    res = Results()
    try:
        bdir = make_wrapper(top, real)
        os.environ["EGRESS_BINARY_DIR"] = bdir
        with Lab(workers=2) as L:
            L.set_zone(ZONE)
            d = start(L, top, fresh_dir(top, "log"), {})
            res.run("dropped_everywhere", t_dropped, L, d)
            res.run("unprivileged_dynamic_grant", t_dynamic_grant, L, d)
            res.run("log_reopen_unprivileged", t_log_reopen, L, d)
            res.run("reload_unprivileged", t_reload, L, d)
            res.run("clean_exit", stop_clean, d)
            res.run("pac_helper_under_filter", t_pac_helper, L, top)
            proxies.add_addresses(L, proxies.PROXY_ADDR)
            res.run("credentials_loaded_before_drop", t_credentials, L, top)
            res.run("default_drop_without_u", t_default_drop, L, top, real_bdir)
            res.run("refused_root_and_unknown", t_refused, L, top, real)
            res.run("planted_log_links_refused", t_planted_links, L, top, real)
            res.run("pac_copy_link_not_followed", t_pac_copy_link, L, top, real)
            res.run("pdeathsig_survives_drop", t_pdeathsig, L, top, real_bdir)
            res.run("private_egressd_dies_with_egress_exec", t_private_egressd, L, real_bdir)
    finally:
        if saved is None:
            os.environ.pop("EGRESS_BINARY_DIR", None)
        else:
            os.environ["EGRESS_BINARY_DIR"] = saved
        shutil.rmtree(top, ignore_errors=True)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
