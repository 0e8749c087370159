#!/usr/bin/env python3
"""The integration lab: network namespaces, origins, a controllable DNS server, egressd.

Per run (unique prefix, default f"eg{pid % 100000}") it builds, touching nothing outside
its own namespaces:

  <p>-inet   the "internet": origins on documentation addresses, on its loopback
               198.51.100.10:80 and :443  HTTP origin "http80" / "http443" (plain HTTP on 443:
                                          egressd tunnels bytes and never does TLS itself)
               198.51.100.11:7            TCP echo "echo7"
               203.0.113.10:80 and :443   second HTTP origin "http2" / "http2_443"
               203.0.113.11:7             second echo "echo2"
               198.51.100.53:53 udp+tcp   DNS server whose zone each test controls
             link to host: inet 203.0.113.254/24 <-> host 203.0.113.1/24 (veth <p>-ih/<p>-hi)
  <p>-host   where egressd (and egress-exec) run; default route via inet; forwarding off.
             Trap listeners on its loopback 127.0.0.1:80/443/7 ("trap80"/"trap443"/"trap7")
             count any connection that a "private" DNS answer (127.0.0.1) attracted.
  <p>-w1..N  workers: veth <p>-wN (worker side, 169.254.(9+N).2/30) <-> <p>-hN (host side,
             169.254.(9+N).1/30), no default route, IPv6 off: a worker reaches only its
             host-side link address (where its egressd listener is bound).

Every origin counts the connections it accepted (Lab.count(name)), so "the origin saw no
connection" is checkable. Sockets are created inside the namespaces by this process
(setns on one thread, see labtools/netns.py); egressd runs under `ip netns exec`.

Use as a library:

    with Lab() as lab:
        lab.set_zone({"ok.lab.test": {"A": ["198.51.100.10"]}})
        d = lab.egressd()
        g = lab.grant(d, 0, ["https://ok.lab.test"])
        r = lab.connect(0, "ok.lab.test:443")

or as a CLI (make demo, benchmarks):

    python3 integration/lab.py up --prefix NAME --state FILE [--zone ZONE.json] [--egressd]
    python3 integration/lab.py ctl --state FILE '{"op": "counts"}'
    python3 integration/lab.py down --state FILE
    python3 integration/lab.py purge --prefix NAME     (after a crash: namespaces + pids)

`up` starts a detached lab process that holds the servers and writes FILE (JSON: names,
addresses, pid, egressd paths) when ready; `down` stops it, which tears everything down.
"""

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from labtools import dns, netns, origins, proxyclient  # noqa: E402
from labtools.egressd import Egressd, binary, binary_dir, render_ini  # noqa: E402,F401
from labtools.netns import LabError  # noqa: E402

__all__ = ["Lab", "Worker", "Results", "LabError", "Egressd", "binary", "binary_dir",
           "render_ini", "require_root", "check", "is_root", "main"]

HOST_LINK = "203.0.113.1"
INET_LINK = "203.0.113.254"
HTTP_ORIGIN = "198.51.100.10"
ECHO_ORIGIN = "198.51.100.11"
ORIGIN2 = "203.0.113.10"
ECHO2 = "203.0.113.11"
DNS_SERVER = "198.51.100.53"
INET_ADDRS = [HTTP_ORIGIN, ECHO_ORIGIN, DNS_SERVER, ORIGIN2, ECHO2]
PROXY_PORT = 3128
METRICS_MAX = 1 << 20          # bytes read from one /metrics scrape, at most

SERVICES = [  # (name, kind, namespace role, address, port)
    ("http80", "http", "inet", HTTP_ORIGIN, 80),
    ("http443", "http", "inet", HTTP_ORIGIN, 443),
    ("echo7", "echo", "inet", ECHO_ORIGIN, 7),
    ("http2", "http", "inet", ORIGIN2, 80),
    ("http2_443", "http", "inet", ORIGIN2, 443),
    ("echo2", "echo", "inet", ECHO2, 7),
    ("trap80", "trap", "host", "127.0.0.1", 80),
    ("trap443", "trap", "host", "127.0.0.1", 443),
    ("trap7", "trap", "host", "127.0.0.1", 7),
]
ORIGIN_NAMES = [s[0] for s in SERVICES if s[1] != "trap"]
TRAP_NAMES = [s[0] for s in SERVICES if s[1] == "trap"]

DEFAULT_ZONE = {
    "origin.lab.test": {"A": [HTTP_ORIGIN]},
    "echo.lab.test": {"A": [ECHO_ORIGIN]},
    "origin2.lab.test": {"A": [ORIGIN2]},
    "echo2.lab.test": {"A": [ECHO2]},
}


def is_root():
    return os.geteuid() == 0


def default_prefix():
    return "eg%d" % (os.getpid() % 100000)


def fill_fs(path, chunk, tail):
    """Create path and write zeros into it until its file system is full to the last byte:
    the free space in chunk-byte writes, then the last chunk bytes in tail-byte writes.
    Bounded by the free space at the start (chunk // tail writes of slack each way)."""
    st = os.statvfs(os.path.dirname(path))
    slack = chunk // tail
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size, n in ((chunk, st.f_bavail * st.f_frsize // chunk + slack), (tail, slack)):
            for _ in range(n):
                try:
                    os.write(fd, b"\0" * size)
                except OSError:
                    break
    finally:
        os.close(fd)


class Worker:
    def __init__(self, lab, index):
        n = index + 1
        self.index = index
        self.ns = "%s-w%d" % (lab.prefix, n)
        self.worker_if = "%s-w%d" % (lab.prefix, n)
        self.host_if = "%s-h%d" % (lab.prefix, n)
        self.host_addr = "169.254.%d.1" % (9 + n)
        self.worker_addr = "169.254.%d.2" % (9 + n)
        self.proxy = (self.host_addr, PROXY_PORT)

    def listen(self, port=PROXY_PORT):
        return "%s:%d" % (self.host_addr, port)

    def as_dict(self):
        return {"ns": self.ns, "worker_if": self.worker_if, "host_if": self.host_if,
                "host_addr": self.host_addr, "worker_addr": self.worker_addr,
                "proxy": "%s:%d" % self.proxy}


class Lab:
    def __init__(self, prefix=None, workers=2, zone=None, workdir=None, keep_workdir=False,
                 verbose=False):
        self.prefix = prefix or default_prefix()
        if len(self.prefix) > 10 or not self.prefix.replace("-", "").isalnum():
            raise LabError("prefix must be <= 10 alphanumeric characters: %r" % self.prefix)
        self.ns_inet = self.prefix + "-inet"
        self.ns_host = self.prefix + "-host"
        self.inet_if = self.prefix + "-ih"
        self.host_inet_if = self.prefix + "-hi"
        if not 0 <= workers <= 100:  # 169.254.(9+n).0/30: stays below 169.254.169.0/24
            raise LabError("workers must be 0..100")
        self.workers = [Worker(self, i) for i in range(workers)]
        self.zone = dns.Zone(DEFAULT_ZONE if zone is None else zone)
        self.counters = origins.Counters()
        self.services = {}
        self.dns_server = None
        self.extra_dns = []
        self.egressds = []
        self.procs = []
        self.created_ns = []
        self.keep_workdir = keep_workdir
        self.verbose = verbose
        self._own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix=self.prefix + "-", dir="/tmp")
        self._torn_down = False
        self._ed_seq = 0

    # --- life cycle -------------------------------------------------------------------

    def _catch_signals(self):
        """SIGTERM/SIGHUP (a ctest timeout, a killed CI job) become SystemExit, so the
        with-block unwinds and teardown runs. Only when nobody else handles them."""
        self._old_signals = {}
        if threading.current_thread() is not threading.main_thread():
            return

        def stop(signum, frame):
            raise SystemExit(128 + signum)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            old = signal.getsignal(sig)
            if old in (signal.SIG_DFL, None):
                self._old_signals[sig] = old
                signal.signal(sig, stop)

    def _release_signals(self, during_teardown):
        for sig, old in getattr(self, "_old_signals", {}).items():
            # While tearing down, a second signal must not interrupt the cleanup.
            signal.signal(sig, signal.SIG_IGN if during_teardown else old)
        if not during_teardown:
            self._old_signals = {}

    def __enter__(self):
        self._catch_signals()
        try:
            self.setup()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc):
        self.teardown()
        return False

    @property
    def namespaces(self):
        return [self.ns_inet, self.ns_host] + [w.ns for w in self.workers]

    def setup(self):
        if not is_root():
            raise LabError("the lab needs root")
        for ns in self.namespaces:
            if netns.ns_exists(ns):
                raise LabError("namespace %s already exists (another run with the same "
                               "prefix?)" % ns)
        for ns in self.namespaces:
            netns.ip("netns", "add", ns)
            self.created_ns.append(ns)
            netns.ip("-n", ns, "link", "set", "lo", "up")
        self._sysctl(self.ns_host, "net.ipv4.ip_forward", "0")
        self._sysctl(self.ns_inet, "net.ipv4.ip_forward", "0")
        # inet <-> host, created directly inside the namespaces (never in the root one).
        netns.ip("-n", self.ns_host, "link", "add", self.host_inet_if, "type", "veth",
                 "peer", "name", self.inet_if, "netns", self.ns_inet)
        netns.ip("-n", self.ns_host, "addr", "add", HOST_LINK + "/24", "dev",
                 self.host_inet_if)
        netns.ip("-n", self.ns_inet, "addr", "add", INET_LINK + "/24", "dev", self.inet_if)
        netns.ip("-n", self.ns_host, "link", "set", self.host_inet_if, "up")
        netns.ip("-n", self.ns_inet, "link", "set", self.inet_if, "up")
        for a in INET_ADDRS:
            netns.ip("-n", self.ns_inet, "addr", "add", a + "/32", "dev", "lo")
        netns.ip("-n", self.ns_host, "route", "add", "default", "via", INET_LINK)
        for w in self.workers:
            self._sysctl(w.ns, "net.ipv6.conf.all.disable_ipv6", "1")
            self._sysctl(w.ns, "net.ipv6.conf.default.disable_ipv6", "1")
            netns.ip("-n", self.ns_host, "link", "add", w.host_if, "type", "veth", "peer",
                     "name", w.worker_if, "netns", w.ns)
            self._sysctl(w.ns, "net.ipv6.conf.%s.disable_ipv6" % w.worker_if, "1")
            self._sysctl(self.ns_host, "net.ipv6.conf.%s.disable_ipv6" % w.host_if, "1")
            netns.ip("-n", self.ns_host, "addr", "add", w.host_addr + "/30", "dev", w.host_if)
            netns.ip("-n", w.ns, "addr", "add", w.worker_addr + "/30", "dev", w.worker_if)
            netns.ip("-n", self.ns_host, "link", "set", w.host_if, "up")
            netns.ip("-n", w.ns, "link", "set", w.worker_if, "up")
        self._wait_link_up()
        self._start_servers()

    def _sysctl(self, ns, key, value):
        path = "/proc/sys/" + key.replace(".", "/")
        with netns.entered(ns):
            try:
                with open(path, "w") as f:
                    f.write(value)
            except OSError as e:
                raise LabError("sysctl %s=%s in %s: %s" % (key, value, ns, e))

    def _wait_link_up(self, timeout=5.0):
        # veth carriers come up asynchronously; wait (bounded) until host can reach inet.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cp = netns.ip("-n", self.ns_host, "-o", "link", "show", "up", check=False)
            ups = cp.stdout.count("LOWER_UP")
            if ups >= 2 + len(self.workers):
                return
            time.sleep(0.02)
        raise LabError("lab links did not come up within %ss" % timeout)

    def _start_servers(self):
        udp = netns.listen_in(self.ns_inet, DNS_SERVER, 53, type=socket.SOCK_DGRAM)
        try:
            tcp = netns.listen_in(self.ns_inet, DNS_SERVER, 53)
        except BaseException:
            udp.close()
            raise
        self.dns_server = dns.DNSServer(self.zone, udp, tcp)
        self.dns_server.start()
        for name, kind, role, addr, port in SERVICES:
            ns = self.ns_inet if role == "inet" else self.ns_host
            s = netns.listen_in(ns, addr, port)
            svc = origins.TCPService(name, s, self.counters, origins.HANDLERS[kind])
            svc.ns_role = role
            self.services[name] = svc
            svc.start()

    def add_address(self, addr):
        """Another origin address on inet's loopback (documentation ranges only)."""
        if not (addr.startswith("198.51.100.") or addr.startswith("203.0.113.")):
            raise LabError("lab origins use 198.51.100.0/24 or 203.0.113.0/24 only: %s" % addr)
        if addr in (HOST_LINK, INET_LINK):
            raise LabError("%s is a link address" % addr)
        netns.ip("-n", self.ns_inet, "addr", "replace", addr + "/32", "dev", "lo")

    def add_service(self, name, addr, port, kind="http", role="inet", routes=None):
        """Another counting service ("http", "echo" or "trap") in inet (or "host"); its
        address must exist there (add_address). routes: {path: (status, [hdr lines], body)}
        for an http service. Returns the TCPService; count(name) counts its accepts."""
        if name in self.services:
            raise LabError("service %s exists" % name)
        ns = self.ns_inet if role == "inet" else self.ns_host
        s = netns.listen_in(ns, addr, port)
        svc = origins.TCPService(name, s, self.counters, origins.HANDLERS[kind])
        svc.routes = dict(routes or {})
        svc.ns_role = role
        self.services[name] = svc
        svc.start()
        return svc

    def add_dns_server(self, addr, zone):
        """Another DNS server (UDP+TCP port 53) on addr in inet with its own zone; returns
        the Zone (update it at run time like lab.zone). The address must exist
        (add_address)."""
        z = dns.Zone(zone)
        udp = netns.listen_in(self.ns_inet, addr, 53, type=socket.SOCK_DGRAM)
        try:
            tcp = netns.listen_in(self.ns_inet, addr, 53)
        except BaseException:
            udp.close()
            raise
        srv = dns.DNSServer(z, udp, tcp)
        srv.start()
        self.extra_dns.append(srv)
        return z

    def teardown(self):
        if self._torn_down:
            return
        self._torn_down = True
        self._release_signals(during_teardown=True)
        try:
            self._teardown()
        finally:
            self._release_signals(during_teardown=False)

    def _teardown(self):
        errors = []
        for d in self.egressds:
            try:
                d.stop(timeout=5)
            except Exception as e:  # keep tearing down whatever happens
                errors.append("egressd stop: %s" % e)
        for p in self.procs:
            try:
                if p.poll() is None:
                    p.terminate()
                    try:
                        p.wait(timeout=3)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait(timeout=3)
            except Exception as e:
                errors.append("process %s: %s" % (p.pid, e))
        for svc in self.services.values():
            try:
                svc.stop()
            except Exception as e:
                errors.append("service %s: %s" % (svc.name, e))
        for srv in [self.dns_server] + self.extra_dns:
            if srv is None:
                continue
            try:
                srv.stop()
            except Exception as e:
                errors.append("dns: %s" % e)
        # Anything still running inside our namespaces was started by this lab (directly or
        # by egressd/egress-exec): kill it by pid, bounded.
        for ns in self.created_ns:
            for pid in netns.ns_pids(ns):
                if pid != os.getpid():
                    netns.kill_pid(pid, timeout=2)
        for ns in reversed(self.created_ns):
            if not netns.ns_exists(ns):
                continue
            try:
                netns.ip("netns", "del", ns)
            except LabError as e:
                errors.append(str(e))
        self.created_ns = []
        if self._own_workdir and not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if errors:
            sys.stderr.write("lab teardown: %s\n" % "; ".join(errors))

    # --- processes --------------------------------------------------------------------

    def spawn(self, ns, args, **kw):
        """Start args inside ns (ip netns exec); killed at teardown."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen(["ip", "netns", "exec", ns] + list(args), **kw)
        self.procs.append(p)
        return p

    def run_in(self, ns, args, check=False, timeout=30, input=None):
        """Run a command inside ns (bounded); CompletedProcess."""
        return netns.nsexec(ns, args, check=check, timeout=timeout, input=input)

    # --- sockets from inside namespaces ------------------------------------------------

    def ns_of(self, who):
        """A namespace name from a worker index, a Worker, "host", "inet" or a name."""
        if isinstance(who, int):
            return self.workers[who].ns
        if isinstance(who, Worker):
            return who.ns
        if who == "host":
            return self.ns_host
        if who == "inet":
            return self.ns_inet
        return who

    def connect_from(self, who, addr, port, timeout=5.0):
        return netns.connect_in(self.ns_of(who), addr, port, timeout=timeout)

    def metrics_text(self, port, addr="127.0.0.1", who="host"):
        """One GET /metrics to egressd's metrics listener: the whole HTTP response
        (status line, headers, body) as text, read until the server closes (at most
        METRICS_MAX bytes)."""
        s = self.connect_from(who, addr, port)
        try:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            s.settimeout(5)
            while len(data) < METRICS_MAX:
                c = s.recv(65536)
                if not c:
                    break
                data += c
        finally:
            s.close()
        return data.decode("utf-8", "replace")

    def connector(self, who):
        ns = self.ns_of(who)
        return lambda addr, port, timeout: netns.connect_in(ns, addr, port, timeout=timeout)

    def socket_factory(self, who):
        ns = self.ns_of(who)
        return lambda family, type: netns.socket_in(ns, family, type)

    # --- origins and DNS ---------------------------------------------------------------

    def count(self, name):
        return self.counters.get(name)

    def counts(self):
        snap = self.counters.snapshot()
        return {n: snap.get(n, 0) for n in ORIGIN_NAMES + TRAP_NAMES + list(self.services)}

    def set_zone(self, zone):
        self.zone.set(zone)

    def update_zone(self, zone):
        self.zone.update(zone)

    def dns_query(self, name, qtype="A", tcp=False, who="host", timeout=2.0):
        return dns.query(self.socket_factory(who), (DNS_SERVER, 53), name, qtype, tcp=tcp,
                         timeout=timeout)

    def pending_accepts(self):
        """Connections waiting in the listen queues of the lab's services (from the
        kernel: rx_queue of LISTEN sockets in /proc/thread-self/net/tcp)."""
        total = 0
        for role in ("inet", "host"):
            ports = {tuple(svc.address) for svc in self.services.values()
                     if svc.ns_role == role}
            with netns.entered(self.ns_of(role)):
                with open("/proc/thread-self/net/tcp") as f:
                    lines = f.read().splitlines()[1:]
            for ln in lines:
                fields = ln.split()
                if len(fields) < 5 or fields[3] != "0A":
                    continue
                hexip, hexport = fields[1].split(":")
                ip_ = socket.inet_ntoa(bytes.fromhex(hexip)[::-1])
                if (ip_, int(hexport, 16)) in ports:
                    total += int(fields[4].split(":")[1], 16)
        return total

    def quiet_counts(self, timeout=3.0):
        """Counts once no listen queue holds a connection and two snapshots agree."""
        deadline = time.monotonic() + timeout
        prev = None
        while True:
            pending = self.pending_accepts()
            now = self.counts()
            if pending == 0 and now == prev:
                return now
            if time.monotonic() > deadline:
                return now
            prev = now if pending == 0 else None
            time.sleep(0.03)

    @contextlib.contextmanager
    def no_origin_connection(self, settle=0.2):
        """Asserts (AssertionError) that no origin or trap accepted a connection during the
        with-block. settle: seconds to let a late connection land before comparing."""
        # Connections the kernel accepted just before the block may still wait in a listen
        # queue or be on their way to the counting thread: start from a quiet state.
        before = self.quiet_counts()
        yield
        time.sleep(settle)
        after = self.quiet_counts()
        diff = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
        if diff:
            raise AssertionError("origins accepted connections: %s" % diff)

    # --- egressd ------------------------------------------------------------------------

    def egressd(self, settings=None, listeners=None, grants=None, start=True, debug=False,
                extra_env=None):
        """A new egressd in the host namespace (its own directory under the workdir)."""
        self._ed_seq += 1
        d = Egressd(self.ns_host, os.path.join(self.workdir, "egressd-%d" % self._ed_seq),
                    settings=settings, listeners=listeners, grants=grants, debug=debug,
                    extra_env=extra_env)
        self.egressds.append(d)
        if start:
            d.start()
        return d

    def grant(self, d, worker, allow, port=PROXY_PORT, principal=None, **kw):
        """grant.create for worker (index) bound to its host-side link address."""
        w = self.workers[worker]
        return d.grant_create(principal or "w%d-%s" % (w.index + 1, self.prefix), allow,
                              w.listen(port), w.host_if, **kw)

    def proxy_of(self, worker, port=PROXY_PORT):
        return (self.workers[worker].host_addr, port)

    def connect(self, worker, target, proxy=None, headers=(), timeout=10.0):
        """CONNECT target from worker (index) through its listener; 200 leaves resp.sock."""
        return proxyclient.connect_request(self.connector(worker),
                                           proxy or self.proxy_of(worker), target,
                                           headers=headers, timeout=timeout)

    def http(self, worker, method, url, headers=(), body=None, proxy=None, timeout=10.0,
             version="HTTP/1.1"):
        return proxyclient.http_request(self.connector(worker),
                                        proxy or self.proxy_of(worker), method, url,
                                        headers=headers, body=body, timeout=timeout,
                                        version=version)

    def raw(self, worker, data, proxy=None, timeout=10.0, method="GET"):
        return proxyclient.exchange(self.connector(worker), proxy or self.proxy_of(worker),
                                    data, timeout=timeout, method=method)

    def state(self):
        return {"prefix": self.prefix, "pid": os.getpid(), "workdir": self.workdir,
                "namespaces": {"inet": self.ns_inet, "host": self.ns_host,
                               "workers": [w.ns for w in self.workers]},
                "links": {"host_inet_if": self.host_inet_if, "inet_if": self.inet_if,
                          "host": HOST_LINK, "inet": INET_LINK},
                "workers": [w.as_dict() for w in self.workers],
                "origins": {name: "%s:%d" % (addr, port)
                            for name, _k, _r, addr, port in SERVICES},
                "dns_server": DNS_SERVER,
                "zone": self.zone.snapshot()}


# --- the test-harness helpers the test files share ------------------------------------

class Results:
    """Minimal runner: each check is a function; prints PASS/FAIL lines and the summary."""

    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.names = []

    def run(self, name, fn, *args):
        t0 = time.monotonic()
        try:
            fn(*args)
        except Exception as e:  # report and continue with the next check
            import traceback
            self.failed += 1
            self.names.append(name)
            print("FAIL %s (%.2fs): %s" % (name, time.monotonic() - t0, e), flush=True)
            traceback.print_exc(limit=4, file=sys.stdout)
        else:
            self.passed += 1
            print("PASS %s (%.2fs)" % (name, time.monotonic() - t0), flush=True)

    def finish(self):
        print("%d passed, %d failed" % (self.passed, self.failed), flush=True)
        return 0 if self.failed == 0 else 1


def require_root():
    if not is_root():
        print("skipped: needs root")
        print("0 passed, 0 failed")
        sys.exit(77)


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


# --- CLI ------------------------------------------------------------------------------

def _write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def _ctl_server(lab, path, stop):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o600)
    s.listen(8)
    s.settimeout(0.2)
    while not stop.is_set():
        try:
            c, _ = s.accept()
        except socket.timeout:
            continue
        except OSError:
            break
        try:
            c.settimeout(5)
            buf = b""
            while b"\n" not in buf and len(buf) < (1 << 20):
                d = c.recv(65536)
                if not d:
                    break
                buf += d
            try:
                req = json.loads(buf.split(b"\n", 1)[0])
                op = req.get("op")
                if op == "counts":
                    rep = {"ok": True, "counts": lab.counts()}
                elif op == "zone.set":
                    lab.set_zone(req["zone"])
                    rep = {"ok": True}
                elif op == "zone.update":
                    lab.update_zone(req["zone"])
                    rep = {"ok": True}
                elif op == "zone.get":
                    rep = {"ok": True, "zone": lab.zone.snapshot()}
                elif op == "queries":
                    rep = {"ok": True, "queries": lab.zone.query_log(req.get("name"))}
                else:
                    rep = {"ok": False, "error": "unknown op"}
            except (ValueError, KeyError, AttributeError, TypeError) as e:
                rep = {"ok": False, "error": str(e)}
            c.sendall(json.dumps(rep).encode() + b"\n")
        except OSError:
            pass
        finally:
            c.close()
    s.close()


def cmd_serve(a):
    zone = None
    if a.zone:
        with open(a.zone) as f:
            zone = json.load(f)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    state_dir = os.path.dirname(os.path.abspath(a.state))
    workdir = os.path.join(state_dir, a.prefix + ".lab")
    os.makedirs(workdir, exist_ok=True)
    lab = Lab(prefix=a.prefix, workers=a.workers, zone=zone, workdir=workdir)
    try:
        with lab:
            st = lab.state()
            ctl = os.path.join(workdir, "lab.ctl")
            st["ctl"] = ctl
            t = threading.Thread(target=_ctl_server, args=(lab, ctl, stop), daemon=True)
            t.start()
            if a.egressd:
                d = lab.egressd(settings=json.loads(a.egressd_settings or "{}"))
                st["egressd"] = {"pid": d.proc.pid, "conf": d.conf_path,
                                 "control_socket": d.control_path,
                                 "decision_log": d.log_path, "stderr": d.stderr_path}
            st["ready"] = True
            _write_json(a.state, st)
            while not stop.wait(0.5):
                if a.egressd and not lab.egressds[0].alive():
                    sys.stderr.write("lab: egressd exited:\n%s\n"
                                     % lab.egressds[0].stderr_tail())
                    break
            t.join(timeout=2)
    except Exception as e:
        _write_json(a.state, {"ready": False, "error": str(e), "pid": os.getpid()})
        raise
    return 0


def cmd_up(a):
    if not is_root():
        sys.stderr.write("lab up: needs root\n")
        return 77
    if os.path.exists(a.state):
        sys.stderr.write("lab up: %s exists (run down first)\n" % a.state)
        return 1
    state_dir = os.path.dirname(os.path.abspath(a.state))
    os.makedirs(state_dir, exist_ok=True)
    logp = os.path.join(state_dir, a.prefix + ".lab.log")
    args = [sys.executable, os.path.abspath(__file__), "serve", "--prefix", a.prefix,
            "--state", a.state, "--workers", str(a.workers)]
    if a.zone:
        args += ["--zone", os.path.abspath(a.zone)]
    if a.egressd:
        args += ["--egressd"]
        if a.egressd_settings:
            args += ["--egressd-settings", a.egressd_settings]
    with open(logp, "ab") as logf:
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                             start_new_session=True, close_fds=True)
    deadline = time.monotonic() + a.timeout
    while time.monotonic() < deadline:
        if os.path.exists(a.state):
            with open(a.state) as f:
                st = json.load(f)
            if st.get("ready"):
                print(json.dumps(st, indent=1, sort_keys=True))
                return 0
            sys.stderr.write("lab up failed: %s (log: %s)\n" % (st.get("error"), logp))
            netns.kill_pid(p.pid, timeout=10)
            os.unlink(a.state)
            return 1
        if p.poll() is not None:
            sys.stderr.write("lab up: lab process exited %s (log: %s)\n" % (p.returncode, logp))
            return 1
        time.sleep(0.05)
    sys.stderr.write("lab up: not ready after %ss (log: %s)\n" % (a.timeout, logp))
    netns.kill_pid(p.pid, timeout=10)
    return 1


def cmd_down(a):
    try:
        with open(a.state) as f:
            st = json.load(f)
    except (OSError, ValueError) as e:
        sys.stderr.write("lab down: cannot read %s: %s\n" % (a.state, e))
        return 1
    pid = st.get("pid")
    if pid and netns.pid_alive(pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmd = f.read()
        except OSError:
            cmd = b""
        if b"lab.py" in cmd:  # never signal an unrelated process that reused the pid
            netns.kill_pid(pid, timeout=20)
    # Belt and braces: whatever the lab process could not remove.
    nss = st.get("namespaces", {})
    names = [nss.get("inet"), nss.get("host")] + list(nss.get("workers", []))
    for ns in [n for n in names if n]:
        if netns.ns_exists(ns):
            for p in netns.ns_pids(ns):
                netns.kill_pid(p, timeout=2)
            netns.ip("netns", "del", ns, check=False)
    wd = st.get("workdir")
    if wd and wd.endswith(".lab") and os.path.isdir(wd):
        shutil.rmtree(wd, ignore_errors=True)
    os.unlink(a.state)
    return 0


def cmd_purge(a):
    """Remove what a crashed run left behind: namespaces named PREFIX-inet, -host, -wN (and
    the processes inside them, by pid). Only exact lab names are touched."""
    if not is_root():
        sys.stderr.write("lab purge: needs root\n")
        return 77
    import re
    pat = re.compile(r"^%s-(inet|host|w\d+)$" % re.escape(a.prefix))
    gone = []
    for ns in netns.ns_list():
        if not pat.match(ns):
            continue
        for pid in netns.ns_pids(ns):
            netns.kill_pid(pid, timeout=2)
        netns.ip("netns", "del", ns, check=False)
        gone.append(ns)
    print(" ".join(gone) if gone else "nothing to remove")
    return 0


def cmd_ctl(a):
    with open(a.state) as f:
        st = json.load(f)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(st["ctl"])
    s.sendall(a.request.encode() + b"\n")
    buf = b""
    while b"\n" not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    sys.stdout.write(buf.decode())
    try:
        return 0 if json.loads(buf).get("ok") else 1
    except ValueError:
        return 1


def main(argv=None):
    ap = argparse.ArgumentParser(prog="lab.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("up", "serve"):
        p = sub.add_parser(name)
        p.add_argument("--prefix", default=default_prefix())
        p.add_argument("--state", required=True)
        p.add_argument("--workers", type=int, default=2)
        p.add_argument("--zone", help="JSON file with the DNS zone (default: lab names)")
        p.add_argument("--egressd", action="store_true",
                       help="also start egressd in the host namespace")
        p.add_argument("--egressd-settings", help="JSON object of [egressd] overrides")
        if name == "up":
            p.add_argument("--timeout", type=float, default=30.0)
    p = sub.add_parser("down")
    p.add_argument("--state", required=True)
    p = sub.add_parser("purge")
    p.add_argument("--prefix", required=True)
    p = sub.add_parser("ctl")
    p.add_argument("--state", required=True)
    p.add_argument("request", help='JSON request, e.g. {"op": "counts"}')
    a = ap.parse_args(argv)
    return {"up": cmd_up, "serve": cmd_serve, "down": cmd_down, "ctl": cmd_ctl,
            "purge": cmd_purge}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
