#!/usr/bin/env python3
"""egressd under systemd's protocols, with this test standing in for systemd (no systemd
runs here): the sd_notify datagrams on $NOTIFY_SOCKET and the journal's priority prefixes on
a $JOURNAL_STREAM stderr.

- READY=1 arrives only when egressd serves: a connection to its listener made right after
  READY=1 is answered (so `systemctl start` cannot return before the listeners exist).
- `egressctl reload` of a broken configuration: exit 1 with the file:line error (what
  ExecReload reports), RELOADING=1 then READY=1 with a STATUS saying it failed, and the
  journal line is a warning (<4>); a good reload: RELOADING=1, READY=1, exit 0; SIGHUP the
  same.
- SIGTERM: STOPPING=1, then a clean exit.
- Negative twin: with stderr redirected elsewhere than the stream $JOURNAL_STREAM names,
  no priority prefixes.
- Started with standard input, output and error closed, egressd opens them on /dev/null
  first: a refusal reaches the client clean (no log line in it) and the decision log
  verifies (no log line in the chain).
Runs in a network namespace of its own (only loopback)."""

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Results, check  # noqa: E402

SRC = os.environ.get("EGRESS_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("EGRESS_BINARY_DIR") or os.path.join(SRC, "build-san")
EGRESSD = os.path.join(BIN, "egressd/egressd")
EGRESSCTL = os.path.join(BIN, "egressd/egressctl")
WAIT = 15.0
PORT = 3128

CONF = """[egressd]
user = nobody
control_socket = {d}/control.sock
decision_log = {d}/log/decisions.jsonl
route = direct

[listener local]
listen = 127.0.0.1:{port}
grant = local

[grant local]
allow = https://api.example.com
"""


class Notify:
    """The socket systemd would own: every datagram egressd sends, in order."""

    def __init__(self, path):
        self.path = path
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(path)
        os.chmod(path, 0o666)       # egressd sends after dropping to nobody
        self.got = []

    def next(self, timeout=WAIT):
        self.s.settimeout(timeout)
        try:
            m = self.s.recv(4096).decode()
        except socket.timeout:
            raise AssertionError("no notification within %.0f s (got so far: %r)"
                                 % (timeout, self.got))
        self.got.append(m)
        return m


def inside(d):
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=WAIT)
    res = Results()
    conf = os.path.join(d, "egressd.ini")
    with open(conf, "w") as f:
        f.write(CONF.format(d=d, port=PORT))
    os.makedirs(os.path.join(d, "log"))
    os.chown(os.path.join(d, "log"), 65534, 65534)
    n = Notify(os.path.join(d, "notify"))
    errpath = os.path.join(d, "stderr")
    err = open(errpath, "w")
    st = os.fstat(err.fileno())
    env = dict(os.environ, NOTIFY_SOCKET=n.path,
               JOURNAL_STREAM="%d:%d" % (st.st_dev, st.st_ino))
    p = subprocess.Popen([EGRESSD, "-f", "-c", conf], stdout=subprocess.DEVNULL, stderr=err,
                         env=env)
    ctl = [EGRESSCTL, "-s", os.path.join(d, "control.sock")]

    def ready():
        m = n.next()
        check(m.startswith("READY=1"), "first notification %r" % m)
        # at READY=1 the listener must already answer
        with socket.create_connection(("127.0.0.1", PORT), timeout=WAIT) as c:
            c.sendall(b"CONNECT other.example.net:443 HTTP/1.1\r\nHost: x\r\n\r\n")
            head = c.recv(4096)
        check(head.startswith(b"HTTP/1.1 403"), "listener after READY: %r" % head[:100])
        check("STATUS=running" in m, "status %r" % m)
    res.run("ready_only_when_serving", ready)

    def reload_broken():
        good = open(conf).read()
        with open(conf, "a") as f:
            f.write("no_such_key = 1\n")
        try:
            r = subprocess.run(ctl + ["reload"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=WAIT)
        finally:
            with open(conf, "w") as f:
                f.write(good)
        check(r.returncode == 1, "egressctl reload of a broken config: exit %d" % r.returncode)
        check(re.search(r"egressd\.ini:\d+", r.stdout), "no file:line in %r" % r.stdout)
        check(n.next() == "RELOADING=1", "expected RELOADING=1: %r" % n.got)
        m = n.next()
        check(m.startswith("READY=1\nSTATUS=reload failed"), "after a failed reload: %r" % m)
        err.flush()
        time.sleep(0.1)
        log = open(errpath).read()
        check(re.search(r"^<4>egressd: reload failed", log, re.M),
              "the failed reload is not a journal warning:\n" + log[-1500:])
    res.run("reload_broken_reports_file_line", reload_broken)

    def reload_good():
        r = subprocess.run(ctl + ["reload"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=WAIT)
        check(r.returncode == 0, "egressctl reload: %d %s" % (r.returncode, r.stdout))
        check(n.next() == "RELOADING=1", "expected RELOADING=1: %r" % n.got)
        check(n.next().startswith("READY=1\nSTATUS=running"), "after reload: %r" % n.got)
        os.kill(p.pid, signal.SIGHUP)
        check(n.next() == "RELOADING=1", "SIGHUP: %r" % n.got)
        check(n.next().startswith("READY=1"), "SIGHUP: %r" % n.got)
    res.run("reload_good_and_sighup", reload_good)

    def priorities():
        log = open(errpath).read().splitlines()
        check(log and all(re.match(r"^<[0-7]>egressd: ", x) for x in log),
              "lines without a priority:\n" + "\n".join(log[:20]))
        check(any(x.startswith("<6>") for x in log), "no info line")
    res.run("journal_priorities", priorities)

    def stop():
        p.send_signal(signal.SIGTERM)
        check(n.next() == "STOPPING=1", "expected STOPPING=1: %r" % n.got)
        rc = p.wait(timeout=WAIT * 2)
        check(rc == 0, "exit %d" % rc)
    try:
        res.run("stopping_then_clean_exit", stop)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=WAIT)
        err.close()

    def not_journal():
        # negative twin: JOURNAL_STREAM names another file than stderr: plain lines
        other = os.path.join(d, "other")
        open(other, "w").close()
        so = os.stat(other)
        e2 = dict(os.environ, JOURNAL_STREAM="%d:%d" % (so.st_dev, so.st_ino))
        e2.pop("NOTIFY_SOCKET", None)
        bad = os.path.join(d, "bad.ini")
        with open(bad, "w") as f:
            f.write("[egressd]\nno_such_key = 1\n")
        r = subprocess.run([EGRESSD, "-t", "-c", bad], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=e2, timeout=WAIT)
        check(r.returncode == 1 and "bad.ini:2" in r.stderr, "egressd -t: %r" % r.stderr)
        check(not r.stderr.startswith("<"), "prefix without the journal: %r" % r.stderr)
        # its twin: ExecStartPre=egressd -t with stderr the journal: an error (<3>)
        ej = os.path.join(d, "ej")
        with open(ej, "w") as f:
            sj = os.fstat(f.fileno())
            e3 = dict(e2, JOURNAL_STREAM="%d:%d" % (sj.st_dev, sj.st_ino))
            r = subprocess.run([EGRESSD, "-t", "-c", bad], stdout=subprocess.PIPE, stderr=f,
                               text=True, env=e3, timeout=WAIT)
        out = open(ej).read()
        check(r.returncode == 1 and out.startswith("<3>") and "bad.ini:2" in out,
              "egressd -t under the journal: %r" % out)
    res.run("config_error_priority_only_in_the_journal", not_journal)

    def closed_stdio():
        # Started with 0, 1 and 2 closed (a careless supervisor, "2>&-"): they are opened on
        # /dev/null before anything else, so neither a socket nor the decision log takes
        # their numbers and no log line lands in a client's connection or in the chain.
        d2 = os.path.join(d, "closed")
        os.makedirs(os.path.join(d2, "log"))
        os.chown(os.path.join(d2, "log"), 65534, 65534)
        os.chmod(d2, 0o755)
        conf2 = os.path.join(d2, "egressd.ini")
        with open(conf2, "w") as f:
            f.write(CONF.format(d=d2, port=PORT + 1))

        def close_stdio():
            for fd in (0, 1, 2):
                os.close(fd)
        q = subprocess.Popen([EGRESSD, "-f", "-d", "-c", conf2], preexec_fn=close_stdio,
                             close_fds=True)
        try:
            deadline = time.monotonic() + WAIT
            head = b""
            while time.monotonic() < deadline:
                try:
                    with socket.create_connection(("127.0.0.1", PORT + 1), timeout=WAIT) as c:
                        c.sendall(b"CONNECT other.example.net:443 HTTP/1.1\r\nHost: x\r\n\r\n")
                        c.settimeout(WAIT)
                        while b"\r\n\r\n" not in head:
                            b = c.recv(4096)
                            if not b:
                                break
                            head += b
                    break
                except ConnectionRefusedError:
                    time.sleep(0.05)
            check(head.startswith(b"HTTP/1.1 403 "), "refusal with stdio closed: %r" % head[:200])
            check(b"egressd:" not in head, "a log line reached the client: %r" % head[:300])
            for fd in (0, 1, 2):
                t = os.readlink("/proc/%d/fd/%d" % (q.pid, fd))
                check(t == "/dev/null", "fd %d is %s, not /dev/null" % (fd, t))
            q.send_signal(signal.SIGTERM)
            check(q.wait(timeout=WAIT * 2) == 0, "exit with stdio closed")
        finally:
            if q.poll() is None:
                q.kill()
                q.wait(timeout=WAIT)
        r = subprocess.run([EGRESSCTL, "log", "verify", os.path.join(d2, "log", "decisions.jsonl")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=WAIT)
        check(r.returncode == 0, "the decision log does not verify: %s" % r.stdout[-800:])
    res.run("closed_stdio_opened_on_dev_null", closed_stdio)
    return res.finish()


def main():
    lab.require_root()
    if len(sys.argv) == 3 and sys.argv[1] == "--inside":
        return inside(sys.argv[2])
    for b in (EGRESSD, EGRESSCTL):
        if not os.access(b, os.X_OK):
            print("FAIL: %s is not built" % b)
            return 1
    d = tempfile.mkdtemp(prefix="egress-sd.")
    os.chmod(d, 0o755)
    try:
        r = subprocess.run(["unshare", "--net", sys.executable, os.path.abspath(__file__),
                            "--inside", d], timeout=WAIT * 12)
        return r.returncode
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
