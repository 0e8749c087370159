"""Network-namespace helpers for the integration lab (stdlib only).

Sockets are created *inside* a lab namespace without running a process there: the calling
thread switches its network namespace with setns(2), creates the socket and switches back.
A socket keeps the namespace it was created in, so the rest of the process (threads serving
origins, the test's proxy client) can use it from the root namespace. Only the calling
thread is affected by setns(CLONE_NEWNET), so other threads are never disturbed.

Commands that must run in a namespace (egressd) are started with `ip netns exec`, which
execs the command in place: the Popen pid is the command's pid.
"""

import contextlib
import ctypes
import errno
import os
import socket
import subprocess

CLONE_NEWNET = 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]


class LabError(Exception):
    """A lab set-up or helper step failed; the message says which command and why."""


def run(args, check=True, timeout=30, input=None):
    """Run a command (bounded), return CompletedProcess; raise LabError on failure."""
    try:
        # errors="replace": a program may print bytes that are not UTF-8 (egressd -t quotes
        # a broken file's bytes); the test reads the text, it must not crash on it
        cp = subprocess.run(args, capture_output=True, text=True, errors="replace",
                            timeout=timeout, input=input)
    except subprocess.TimeoutExpired:
        raise LabError("timeout after %ss: %s" % (timeout, " ".join(args)))
    if check and cp.returncode != 0:
        raise LabError("%s: exit %d: %s" % (" ".join(args), cp.returncode,
                                           (cp.stderr or cp.stdout).strip()))
    return cp


def ip(*args, check=True):
    return run(["ip"] + list(args), check=check)


def nsexec(ns, args, check=True, timeout=30, input=None):
    """Run args inside namespace ns (ip netns exec), bounded."""
    return run(["ip", "netns", "exec", ns] + list(args), check=check, timeout=timeout,
               input=input)


def ns_exists(ns):
    return os.path.exists("/run/netns/" + ns)


def ns_list():
    cp = ip("netns", "list", check=False)
    out = []
    for line in cp.stdout.splitlines():
        if line.strip():
            out.append(line.split()[0])
    return out


def ns_pids(ns):
    cp = ip("netns", "pids", ns, check=False)
    return [int(x) for x in cp.stdout.split() if x.isdigit()]


def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "setns: " + os.strerror(e))


@contextlib.contextmanager
def entered(ns):
    """Run the with-block with this thread inside namespace ns (by name)."""
    orig = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open("/run/netns/" + ns, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        os.close(orig)
        raise
    try:
        _setns(target)
        try:
            yield
        finally:
            try:
                _setns(orig)
            except OSError:
                # A thread stuck in the wrong namespace would make every later socket lie
                # about where it is: stop the whole process rather than continue.
                os.write(2, b"lab: cannot return to the original network namespace\n")
                os._exit(70)
    finally:
        os.close(target)
        os.close(orig)


def socket_in(ns, family=socket.AF_INET, type=socket.SOCK_STREAM):
    """A new socket that lives in namespace ns."""
    with entered(ns):
        return socket.socket(family, type)


def connect_in(ns, addr, port, timeout=5.0, source=None):
    """A TCP connection made from namespace ns; raises OSError like socket.connect."""
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket_in(ns, fam)
    try:
        s.settimeout(timeout)
        if source:
            s.bind((source, 0))
        s.connect((addr, port))
    except BaseException:
        s.close()
        raise
    return s


def listen_in(ns, addr, port, backlog=128, type=socket.SOCK_STREAM):
    """A bound (and for TCP listening) socket in namespace ns."""
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket_in(ns, fam, type)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        if type == socket.SOCK_STREAM:
            s.listen(backlog)
    except BaseException:
        s.close()
        raise
    return s


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours is not running any more.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_pid(pid, timeout=3.0, sig_first=15):
    """SIGTERM (or sig_first), wait up to timeout, then SIGKILL and wait a little. Bounded."""
    import time
    try:
        os.kill(pid, sig_first)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            return
        time.sleep(0.02)
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            return
        time.sleep(0.02)


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    except OSError as e:
        if e.errno != errno.ECHILD:
            raise
