#!/usr/bin/env python3
"""Containment: a worker trying forbidden things from inside `egress-exec run --net none`
(docs/sandbox.md, docs/SECURITY.md "Sandbox"): host secrets, writes outside the writable paths / into .git / into system
directories, namespace and kernel-attack syscalls, raw/packet/netlink sockets, TIOCSTI, host
processes. The host repository is byte-for-byte unchanged after every test, and nothing of
the run is left behind."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sandboxtest as st  # noqa: E402
from sandboxtest import check  # noqa: E402

PROBE_SECRETS = r'''
import json, os, sys
paths = sys.argv[1:] + ["/etc/shadow", "/etc/gshadow", "/root", "/home", "/root/.ssh",
    "/root/.gnupg", "/root/.aws/credentials", "/root/.config/gcloud", "/root/.azure",
    "/root/.docker/config.json", "/root/.kube/config", "/var/run/docker.sock",
    "/run/docker.sock", "/run/containerd/containerd.sock", "/sys/fs/cgroup", "/boot",
    "/proc/1/environ", "/proc/1/mem", "/proc/1/root/etc"]
res = {}
for p in paths:
    try:
        if os.path.isdir(p):
            res[p] = "listed:%d" % len(os.listdir(p))
        else:
            with open(p, "rb") as f:
                res[p] = "read:%d" % len(f.read())
    except OSError as e:
        res[p] = "denied:%d" % e.errno
res["env"] = sorted(os.environ)
res["env_values"] = "\n".join(os.environ.values())
res["uid"] = os.getuid()
res["hostname"] = os.uname().nodename
with open("/etc/passwd") as f:
    res["passwd_lines"] = len(f.read().splitlines())
res["resolv"] = os.path.exists("/etc/resolv.conf")
print(json.dumps(res))
'''


def t_secrets(ns, repo, planted):
    # the planted value is also in egress-exec's own environment: it must not reach the
    # worker, not even through init's /proc/1/environ
    os.environ["H7_PLANTED_SECRET"] = planted.value
    try:
        r = st.run(ns, ["--repo", repo.path, "--wall", "30s"], st.py(PROBE_SECRETS) +
                   planted.paths)
    finally:
        del os.environ["H7_PLANTED_SECRET"]
    check(r.rc == 0, r.describe())
    check(planted.value.encode() not in r.stdout, "the planted value reached the worker")
    res = r.json_line()
    for p in ["/proc/1/environ", "/proc/1/mem", "/proc/1/root/etc"]:
        check(res[p].startswith("denied:13"), "%s: %s (want EACCES)" % (p, res[p]))
    for p in planted.paths + ["/etc/shadow", "/root", "/home", "/var/run/docker.sock",
                              "/run/containerd/containerd.sock", "/root/.ssh",
                              "/sys/fs/cgroup"]:
        check(res[p].startswith("denied:2"), "%s: %s (want ENOENT)" % (p, res[p]))
    check(res["uid"] == st.REPO_UID, "uid %s" % res["uid"])
    check(res["hostname"] == "sandbox", "hostname %s" % res["hostname"])
    check(not res["resolv"], "resolv.conf present")
    check(set(res["env"]) <= {"PATH", "HOME", "LANG"}, "environment: %s" % res["env"])
    check(repo.unchanged(), "host repository changed")
    check(not st.leftovers(ns, r.result), "leftovers: %s" % st.leftovers(ns, r.result))


def t_env_credentials_refused(ns, repo, planted):
    # An allowed name that looks like a credential is refused, the run never starts.
    env = dict(os.environ, GITHUB_TOKEN="ghp_x", MY_SECRET="x")
    cmd = ["nsenter", "--net=/run/netns/%s" % ns, st.EXE, "run", "--env", "GITHUB_TOKEN",
           "--", "/bin/true"]
    import subprocess
    cp = subprocess.run(cmd, capture_output=True, timeout=60, env=env)
    check(cp.returncode == 11, "GITHUB_TOKEN allowed: rc=%d %r" % (cp.returncode, cp.stderr))
    check(b"ghp_x" not in cp.stderr, "the value leaked into the message")
    # A harmless allowed name passes, a name not allowed does not appear.
    env["HARMLESS"] = "yes"
    cmd = ["nsenter", "--net=/run/netns/%s" % ns, st.EXE, "run", "--env", "HARMLESS",
           "--", st.PY, "-c", "import os; print(sorted(os.environ))"]
    cp = subprocess.run(cmd, capture_output=True, timeout=60, env=env)
    check(cp.returncode == 0 and b"HARMLESS" in cp.stdout and b"MY_SECRET" not in cp.stdout
          and b"GITHUB_TOKEN" not in cp.stdout, "env: %r %r" % (cp.stdout, cp.stderr))


WRITES = r'''
import json, os
res = {}
def w(p):
    try:
        with open(p, "w") as f:
            f.write("x")
        return "ok"
    except OSError as e:
        return "denied:%d" % e.errno
for p in ["/usr/egress-x", "/etc/egress-x", "/bin/egress-x", "/egress-x", "/lib/egress-x",
          "/proc/sys/kernel/hostname", "/dev/egress-x", "/work/.git/config",
          "/work/.git/egress-x", "/work/.git/hooks/pre-commit", "/work/new.txt",
          "/work/src/main.c", "/tmp/t.txt", "/work/secrets/key"]:
    res[p] = w(p)
try:
    os.unlink("/work/README"); res["unlink"] = "ok"
except OSError as e:
    res["unlink"] = "denied:%d" % e.errno
try:
    os.mkdir("/work/newdir"); res["mkdir"] = "ok"
except OSError as e:
    res["mkdir"] = "denied:%d" % e.errno
try:
    with open("/work/secrets/key") as f:
        res["masked_read"] = f.read()
except OSError as e:
    res["masked_read"] = "denied:%d" % e.errno
print(json.dumps(res))
'''


def t_writes(ns, repo, planted):
    r = st.run(ns, ["--repo", repo.path, "--forbid", "secrets/key", "--wall", "30s"],
               st.py(WRITES))
    check(r.rc == 0, r.describe())
    res = r.json_line()
    for p in ["/usr/egress-x", "/etc/egress-x", "/bin/egress-x", "/egress-x", "/lib/egress-x",
              "/dev/egress-x", "/proc/sys/kernel/hostname", "/work/secrets/key"]:
        check(res[p].startswith("denied"), "%s was writable: %s" % (p, res[p]))
    # .git is writable inside (git add/commit work) through a sandbox-private layer: the
    # writes reach neither the upper layer nor the host (both checked below)
    for p in ["/work/new.txt", "/work/src/main.c", "/tmp/t.txt", "/work/.git/config",
              "/work/.git/egress-x", "/work/.git/hooks/pre-commit"]:
        check(res[p] == "ok", "%s not writable: %s" % (p, res[p]))
    check(res["unlink"] == "ok" and res["mkdir"] == "ok", str(res))
    check(res["masked_read"] == "" or res["masked_read"].startswith("denied"),
          "forbidden path readable: %r" % res["masked_read"])
    ups = {u["path"]: u["change"] for u in r.result.get("upper_paths", [])}
    check(ups.get("new.txt") == "written" and ups.get("src/main.c") == "written" and
          ups.get("README") == "deleted", "upper layer: %s" % ups)
    check(not any(p.startswith(".git") for p in ups), "a .git write reached the upper layer")
    check(repo.unchanged(), "host repository changed")
    check(not st.leftovers(ns, r.result), "leftovers: %s" % st.leftovers(ns, r.result))


SYSCALLS = r'''
import ctypes, errno, fcntl, json, os, socket, termios
libc = ctypes.CDLL(None, use_errno=True)
res = {}
def sc(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    res[name] = "ok" if r >= 0 else "denied:%s" % errno.errorcode.get(ctypes.get_errno(), "?")
# x86_64 numbers
sc("unshare_user", 272, 0x10000000)
sc("unshare_ns", 272, 0x00020000)
sc("unshare_net", 272, 0x40000000)
fd = os.open("/proc/self/ns/net", os.O_RDONLY)
sc("setns", 308, fd, 0)
sc("mount", 165, 0, 0, 0, 0, 0)
sc("umount2", 166, 0, 0)
sc("pivot_root", 155, 0, 0)
sc("chroot", 161, 0)
sc("ptrace_attach_1", 101, 16, 1, 0, 0)
sc("ptrace_traceme", 101, 0, 0, 0, 0)
sc("process_vm_readv", 310, 1, 0, 0, 0, 0, 0)
sc("io_uring_setup", 425, 1, 0)
sc("io_uring_enter", 426, 0, 0, 0, 0, 0)
sc("bpf", 321, 0, 0, 0)
sc("keyctl", 250, 0, 0, 0, 0, 0)
sc("add_key", 248, 0, 0, 0, 0, 0)
sc("perf_event_open", 298, 0, 0, -1, -1, 0)
sc("userfaultfd", 323, 0)
sc("init_module", 175, 0, 0, 0)
sc("reboot", 169, 0, 0, 0, 0)
sc("clone3", 435, 0, 0)
sc("clone_newuser", 56, 0x10000000 | 17, 0, 0, 0, 0)
for name, fam, typ in [("raw", socket.AF_INET, socket.SOCK_RAW), ("packet", 17, socket.SOCK_RAW),
                       ("netlink", 16, socket.SOCK_RAW), ("inet6_raw", socket.AF_INET6, socket.SOCK_RAW)]:
    try:
        socket.socket(fam, typ, 0 if name != "raw" else socket.IPPROTO_ICMP).close(); res["sock_" + name] = "ok"
    except OSError as e:
        res["sock_" + name] = "denied:%s" % errno.errorcode.get(e.errno, "?")
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close(); res["sock_tcp"] = "ok"
except OSError as e:
    res["sock_tcp"] = "denied:%d" % e.errno
for fdn in (0, 1, 2):
    try:
        fcntl.ioctl(fdn, termios.TIOCSTI, b"x"); res["tiocsti_%d" % fdn] = "ok"
    except OSError as e:
        res["tiocsti_%d" % fdn] = "denied:%s" % errno.errorcode.get(e.errno, "?")
try:
    os.open("/dev/tty", os.O_RDWR); res["dev_tty"] = "ok"
except OSError as e:
    res["dev_tty"] = "denied:%s" % errno.errorcode.get(e.errno, "?")
res["sid_is_self"] = os.getsid(0) == os.getpid()
with open("/proc/self/status") as f:
    st = dict(l.split(":\t", 1) for l in f.read().splitlines() if ":\t" in l)
res["seccomp"] = st.get("Seccomp", "").strip()
res["nnp"] = st.get("NoNewPrivs", "").strip()
res["capeff"] = st.get("CapEff", "").strip()
res["capbnd"] = st.get("CapBnd", "").strip()
print(json.dumps(res))
'''


def t_syscalls(ns, repo, planted):
    r = st.run(ns, ["--repo", repo.path, "--wall", "30s"], st.py(SYSCALLS))
    check(r.rc == 0, r.describe())
    res = r.json_line()
    for k, v in res.items():
        if k in ("sock_tcp", "sid_is_self", "seccomp", "nnp", "capeff", "capbnd"):
            continue
        check(v.startswith("denied"), "%s succeeded: %s" % (k, v))
    # io_uring must be refused by the filter itself, not by a missing kernel feature later
    check(res["io_uring_setup"] in ("denied:EPERM", "denied:ENOSYS"), res["io_uring_setup"])
    check(res["bpf"] == "denied:EPERM" and res["keyctl"] == "denied:EPERM",
          "%s %s" % (res["bpf"], res["keyctl"]))
    check(res["sock_tcp"] == "ok", "plain TCP sockets must work")
    check(res["sid_is_self"], "the worker is not a session leader")
    check(res["seccomp"] == "2" and res["nnp"] == "1", "seccomp %s nnp %s" % (res["seccomp"],
                                                                              res["nnp"]))
    check(int(res["capeff"], 16) == 0 and int(res["capbnd"], 16) == 0,
          "capabilities left: eff %s bnd %s" % (res["capeff"], res["capbnd"]))
    check(repo.unchanged(), "host repository changed")


HOSTPROC = r'''
import json, os, signal, sys
host_pid = int(sys.argv[1])
res = {"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
try:
    os.kill(host_pid, signal.SIGTERM); res["kill"] = "ok"
except OSError as e:
    res["kill"] = "denied:%d" % e.errno
try:
    os.kill(1, signal.SIGKILL); res["kill1"] = "sent"
except OSError as e:
    res["kill1"] = "denied:%d" % e.errno
with open("/proc/1/cmdline", "rb") as f:
    res["init"] = f.read().split(b"\0")[0].decode()
print(json.dumps(res))
'''


def t_host_processes(ns, repo, planted):
    import subprocess
    victim = subprocess.Popen(["sleep", "60"])
    try:
        r = st.run(ns, ["--repo", repo.path, "--wall", "30s"], st.py(HOSTPROC) +
                   [str(victim.pid)])
        check(r.rc == 0, r.describe())
        res = r.json_line()
        check(max(res["pids"]) < 50 and 1 in res["pids"], "pids seen: %s" % res["pids"])
        check(res["kill"].startswith("denied:3"), "host pid signalled: %s" % res["kill"])
        check(victim.poll() is None, "the host process died")
        check(res["init"] != "" , "init cmdline")
    finally:
        victim.kill()
        victim.wait()


IDMAP = r'''
import json, os, subprocess
res = {"uid": os.getuid()}
st = os.stat("/work/README")
res["readme_owner"] = st.st_uid
def w(p, mode="a"):
    try:
        with open(p, mode) as f:
            f.write("x\n")
        return "ok"
    except OSError as e:
        return "denied:%d" % e.errno
res["modify"] = w("/work/README")
res["create"] = w("/work/src/new.c", "w")
res["foreign"] = w("/work/foreign.txt")
res["git_dir"] = w("/work/.git/config")
cp = subprocess.run(["/usr/bin/git", "-C", "/work", "status", "--porcelain"],
                    capture_output=True, text=True)
res["git_rc"] = cp.returncode
res["git"] = sorted(cp.stdout.splitlines())
print(json.dumps(res))
'''


def t_idmapped_root_repo(ns, repo, planted):
    """A root-owned repository: the worker runs as a dedicated uid and sees the repository
    through an idmapped lower layer (root -> worker), so it can change root's files in the
    overlay; a file of a third owner stays unmodifiable; .git is writable only inside (its
    own private layer); git works."""
    rr = st.Repo()
    try:
        for dirpath, dirnames, filenames in os.walk(rr.path):
            for n in dirnames + filenames:
                os.lchown(os.path.join(dirpath, n), 0, 0)
        os.lchown(rr.path, 0, 0)
        foreign = os.path.join(rr.path, "foreign.txt")
        with open(foreign, "w") as f:
            f.write("third owner\n")
        os.chown(foreign, 1234, 1234)
        os.chmod(foreign, 0o666)
        rr.hash = st.tree_hash(rr.path)
        r = st.run(ns, ["--repo", rr.path, "--wall", "30s"], st.py(IDMAP))
        check(r.rc == 0, r.describe())
        res = r.json_line()
        check(res["uid"] != 0 and res["readme_owner"] == res["uid"], str(res))
        check(res["modify"] == "ok" and res["create"] == "ok", str(res))
        # mode 0666 but an owner outside the mapping: the idmapped mount refuses changes
        check(res["foreign"].startswith("denied"), "third owner's file: %s" % res["foreign"])
        # writable inside through the private layer; rr.unchanged() below: not on the host
        check(res["git_dir"] == "ok", ".git: %s" % res["git_dir"])
        check(res["git_rc"] == 0 and " M README" in res["git"], "git: %s" % res)
        check(r.result["limits_applied"].get("repo_idmap", "").startswith("0:0->"),
              r.describe())
        check(rr.unchanged(), "host repository changed")
        check(not st.leftovers(ns, r.result), "leftovers: %s" % st.leftovers(ns, r.result))
    finally:
        rr.remove()


NOREPO = r'''
import json, os, pwd
res = {"uid": os.getuid(), "gid": os.getgid()}
try:
    res["name"] = pwd.getpwuid(os.getuid()).pw_name
except KeyError:
    res["name"] = None
with open("/work/made-here", "w") as f:
    f.write("x\n")
res["work_owner"] = os.stat("/work").st_uid
print(json.dumps(res))
'''


def t_no_repo_uid(ns, repo, planted):
    """Without --repo the worker runs as the dedicated worker uid 65000 (docs/sandbox.md),
    never as 65534: that is `nobody`, and the uid egressd falls back to when no `egressd`
    account exists, so a worker sharing it could signal or ptrace a private egressd."""
    r = st.run(ns, ["--wall", "30s"], st.py(NOREPO))
    check(r.rc == 0, r.describe())
    res = r.json_line()
    check(res["uid"] == 65000 and res["gid"] == 65000, "worker ids: %s" % res)
    check(res["uid"] != 65534, "the worker runs as nobody / egressd's fallback uid")
    check(res["work_owner"] == 65000, "the empty /work is not the worker's: %s" % res)
    check(not st.leftovers(ns, r.result), "leftovers: %s" % st.leftovers(ns, r.result))


def main():
    st.require_root()
    st.require_tools()
    results = st.Results()
    repo = st.Repo()
    planted = st.Planted()
    try:
        with st.NetNS("c") as ns:
            for name, fn in [("secrets", t_secrets), ("env_credentials", t_env_credentials_refused),
                             ("writes", t_writes), ("syscalls", t_syscalls),
                             ("host_processes", t_host_processes),
                             ("idmapped_root_repo", t_idmapped_root_repo),
                             ("no_repo_uid", t_no_repo_uid)]:
                results.run(name, fn, ns.name, repo, planted)
    finally:
        planted.remove()
        repo.remove()
    return results.finish()


if __name__ == "__main__":
    sys.exit(main())
