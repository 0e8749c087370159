#!/usr/bin/env python3
"""Self-test of the integration lab: DNS answers as configured, origins reachable from the
host namespace, workers isolated, accept counters exact, teardown complete, CLI up/down."""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results, check  # noqa: E402
from labtools import netns, origins, proxyclient  # noqa: E402


def t_names(L):
    for ns in L.namespaces:
        check(netns.ns_exists(ns), "namespace %s missing" % ns)
        check(ns.startswith(L.prefix), ns)
    for ifn in [L.inet_if, L.host_inet_if] + [w.host_if for w in L.workers] + \
            [w.worker_if for w in L.workers]:
        check(len(ifn) <= 15, "interface name too long: " + ifn)
    # Nothing of ours in the root namespace.
    out = netns.ip("-o", "link").stdout
    check(L.prefix + "-" not in out, "lab interface in the root namespace")
    check(len(L.workers) >= 2, "at least two workers")


def t_dns(L):
    L.set_zone({
        "a.lab.test": {"A": ["198.51.100.10", "10.1.2.3"], "AAAA": ["fd00::1"], "ttl": 42},
        "c.lab.test": {"CNAME": "inner.lab.test"},
        "inner.lab.test": {"A": ["127.0.0.1"]},
        "nx.lab.test": {"rcode": "NXDOMAIN"},
        "sf.lab.test": {"rcode": "SERVFAIL"},
        "nodata.lab.test": {},
        "drop.lab.test": {"drop": True},
        "slow.lab.test": {"A": ["198.51.100.10"], "delay": 0.4},
        "tc.lab.test": {"A": ["198.51.100.10"], "tc": True},
        "rb.lab.test": {"sequence": [{"A": ["198.51.100.10"], "ttl": 0},
                                     {"A": ["127.0.0.1"], "ttl": 0}]},
        "*.wild.lab.test": {"A": ["203.0.113.10"]},
    })
    r = L.dns_query("a.lab.test")
    check(r["rcode"] == 0 and [a[3] for a in r["answers"]] == ["198.51.100.10", "10.1.2.3"]
          and r["answers"][0][2] == 42, r)
    r = L.dns_query("A.LAB.TEST.", "AAAA", tcp=True)
    check(r["rcode"] == 0 and [a[3] for a in r["answers"]] == ["fd00::1"], r)
    r = L.dns_query("c.lab.test")
    check([(a[1], a[3]) for a in r["answers"]] ==
          [("CNAME", "inner.lab.test"), ("A", "127.0.0.1")], r)
    check(L.dns_query("nx.lab.test")["rcode"] == 3, "NXDOMAIN")
    check(L.dns_query("unknown.lab.test")["rcode"] == 3, "unknown name is NXDOMAIN")
    check(L.dns_query("sf.lab.test")["rcode"] == 2, "SERVFAIL")
    r = L.dns_query("nodata.lab.test")
    check(r["rcode"] == 0 and r["answers"] == [], r)
    t0 = time.monotonic()
    check(L.dns_query("drop.lab.test", timeout=0.5) is None, "drop answers nothing")
    check(L.dns_query("drop.lab.test", tcp=True, timeout=0.5) is None, "drop over tcp")
    check(time.monotonic() - t0 < 3, "drop waits are bounded")
    t0 = time.monotonic()
    r = L.dns_query("slow.lab.test", timeout=2)
    check(r is not None and time.monotonic() - t0 >= 0.35, "delay")
    r = L.dns_query("tc.lab.test")
    check(r["tc"] and r["answers"] == [], "tc over udp: %s" % r)
    r = L.dns_query("tc.lab.test", tcp=True)
    check(not r["tc"] and r["answers"][0][3] == "198.51.100.10", "tc over tcp: %s" % r)
    seq = [L.dns_query("rb.lab.test")["answers"][0][3] for _ in range(4)]
    check(seq == ["198.51.100.10", "127.0.0.1"] * 2, "rebinding sequence %s" % seq)
    check(L.dns_query("rb.lab.test")["answers"][0][2] == 0, "ttl 0")
    check(L.dns_query("x.y.wild.lab.test")["answers"][0][3] == "203.0.113.10", "wildcard")
    L.update_zone({"nx.lab.test": {"A": ["198.51.100.11"]}})
    check(L.dns_query("nx.lab.test")["answers"][0][3] == "198.51.100.11", "update")
    q = L.zone.query_log("tc.lab.test")
    check([x["transport"] for x in q] == ["udp", "tcp"], q)


def _get(L, who, addr, port, path, method="GET", body=None):
    s = L.connect_from(who, addr, port)
    try:
        if method == "GET" and body is None:
            return proxyclient.tunnel_http_get(s, addr, path)
        req = ("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %d\r\n"
               "X-Test: 1\r\n\r\n" % (method, path, addr, len(body or b""))).encode()
        req += body or b""
        s.sendall(req)
        r = proxyclient.Response()
        head, rest = proxyclient.read_head(s, time.monotonic() + 5)
        proxyclient._parse_head(r, head)
        r.body = proxyclient._read_body(s, r, rest, time.monotonic() + 5, method)
        return r
    finally:
        s.close()


def t_origins(L):
    for name, addr, port in (("http80", lab.HTTP_ORIGIN, 80), ("http443", lab.HTTP_ORIGIN, 443),
                             ("http2", lab.ORIGIN2, 80), ("http2_443", lab.ORIGIN2, 443)):
        r = _get(L, "host", addr, port, "/")
        check(r.status == 200 and r.body == ("hello from %s\n" % name).encode()
              and r.header("X-Origin") == name, "%s: %r" % (name, r))
    r = _get(L, "host", lab.HTTP_ORIGIN, 80, "/echo", method="POST", body=b"payload")
    check(r.status == 200 and r.body.startswith(b"POST /echo HTTP/1.1\r\n")
          and b"X-Test: 1\r\n" in r.body and r.body.endswith(b"\r\n\r\npayload"), r)
    r = _get(L, "host", lab.HTTP_ORIGIN, 80, "/bytes/300000")
    check(r.status == 200 and r.body == origins.pattern_bytes(300000), "bytes")
    r = _get(L, "host", lab.HTTP_ORIGIN, 80, "/redirect?to=http://origin2.lab.test/&code=307")
    check(r.status == 307 and r.header("Location") == "http://origin2.lab.test/", r)
    r = _get(L, "host", lab.HTTP_ORIGIN, 80, "/chunked")
    check(r.header("Transfer-Encoding") == "chunked" and r.body.count(b"chunk-") == 5, r)
    t0 = time.monotonic()
    r = _get(L, "host", lab.HTTP_ORIGIN, 80, "/slow?s=0.3")
    check(r.status == 200 and time.monotonic() - t0 >= 0.3, "slow")
    r = _get(L, "host", lab.HTTP_ORIGIN, 80, "/nothing")
    check(r.status == 404, r)
    for addr in (lab.ECHO_ORIGIN, lab.ECHO2):
        s = L.connect_from("host", addr, 7)
        try:
            check(proxyclient.tunnel_echo(s, b"ping\n" * 1000) == b"ping\n" * 1000, "echo")
        finally:
            s.close()


def t_counters(L):
    before = L.counts()
    for _ in range(3):
        L.connect_from("host", lab.HTTP_ORIGIN, 80).close()
    L.connect_from("host", lab.ECHO_ORIGIN, 7).close()
    L.connect_from("host", "127.0.0.1", 443).close()
    origins.wait_count(L.counters, "http80", before["http80"] + 3)
    origins.wait_count(L.counters, "trap443", before["trap443"] + 1)
    time.sleep(0.1)
    after = L.counts()
    diff = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    check(diff == {"http80": 3, "echo7": 1, "trap443": 1}, "diff %s" % diff)
    check(L.counters.peers("http80")[-1] == lab.HOST_LINK, "peer is the host link address")
    # The helper notices a connection ...
    try:
        with L.no_origin_connection(settle=0.1):
            L.connect_from("host", lab.ORIGIN2, 80).close()
        raise RuntimeError("no_origin_connection missed a connection")
    except AssertionError:
        pass
    # ... and stays quiet without one.
    with L.no_origin_connection(settle=0.1):
        pass


def t_isolation(L):
    w0, w1 = L.workers[0], L.workers[1]
    ls = netns.listen_in(L.ns_host, w0.host_addr, 3999)
    try:
        L.connect_from(0, w0.host_addr, 3999, timeout=2).close()
        for who, addr, port in ((0, lab.HTTP_ORIGIN, 80), (0, lab.DNS_SERVER, 53),
                                (0, lab.HOST_LINK, 80), (0, w1.host_addr, 3999),
                                (1, w0.host_addr, 3999), (0, "127.0.0.1", 80)):
            try:
                s = L.connect_from(who, addr, port, timeout=1)
            except OSError:
                continue
            s.close()
            raise AssertionError("worker %d reached %s:%d" % (who, addr, port))
        # No default route, no IPv6 in the worker.
        out = netns.ip("-n", w0.ns, "route", "show").stdout
        check("default" not in out, "worker has a default route: %s" % out)
        try:
            r = L.dns_query("origin.lab.test", who=0, timeout=0.5)
        except OSError:
            r = None  # ENETUNREACH on sendto
        check(r is None, "worker can query DNS: %s" % r)
        # inet cannot reach a worker either.
        try:
            L.connect_from("inet", w0.worker_addr, 22, timeout=1).close()
            raise AssertionError("inet reached a worker")
        except OSError:
            pass
    finally:
        ls.close()


def t_extra_service(L):
    L.add_address("198.51.100.80")
    L.add_service("pac", "198.51.100.80", 8080, routes={
        "/proxy.pac": (200, ["Content-Type: application/x-ns-proxy-autoconfig"],
                       b"function FindProxyForURL(u, h) { return 'DIRECT'; }\n")})
    r = _get(L, "host", "198.51.100.80", 8080, "/proxy.pac")
    check(r.status == 200 and b"FindProxyForURL" in r.body and
          r.header("Content-Type") == "application/x-ns-proxy-autoconfig", r)
    r = _get(L, "host", "198.51.100.80", 8080, "/")
    check(r.status == 200 and r.body == b"hello from pac\n", r)
    check(L.counts()["pac"] == 2, "pac counted: %s" % L.counts())
    L.add_address("203.0.113.53")
    z = L.add_dns_server("203.0.113.53", {"second.lab.test": {"A": ["203.0.113.10"]}})
    from labtools import dns
    r = dns.query(L.socket_factory("host"), ("203.0.113.53", 53), "second.lab.test")
    check(r["answers"][0][3] == "203.0.113.10" and z.query_log("second.lab.test"), r)
    check(L.dns_query("second.lab.test")["rcode"] == 3, "zones are separate")
    try:
        L.add_address("10.0.0.1")
        raise AssertionError("non-documentation address accepted")
    except lab.LabError:
        pass


def t_dns_survives_garbage(L):
    import socket as _s
    for junk in (b"", b"\x00" * 3, os.urandom(12), os.urandom(600),
                 b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\xc0\x0c\x00\x01"):
        s = netns.socket_in(L.ns_host, _s.AF_INET, _s.SOCK_DGRAM)
        s.sendto(junk, (lab.DNS_SERVER, 53))
        s.close()
    s = L.connect_from("host", lab.DNS_SERVER, 53)
    s.sendall(b"\x00\x05hello")
    s.close()
    check(L.dns_query("anything.lab.test", timeout=1) is not None, "DNS server dead after garbage")


def t_purge():
    prefix = "egp%d" % (os.getpid() % 10000)
    L = Lab(prefix=prefix, workers=1)
    L.setup()   # simulate a crash: no teardown
    try:
        p = L.spawn(L.ns_host, ["sleep", "60"])
        me = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lab.py")
        cp = subprocess.run([sys.executable, me, "purge", "--prefix", prefix],
                            capture_output=True, text=True, timeout=60)
        check(cp.returncode == 0 and prefix + "-host" in cp.stdout, cp.stdout + cp.stderr)
        check(not [n for n in netns.ns_list() if n.startswith(prefix + "-")], "ns left")
        p.wait(timeout=5)
    finally:
        L.teardown()


def t_teardown():
    L = Lab(prefix="egt%d" % (os.getpid() % 10000), workers=2)
    with L:
        p = L.spawn(L.ns_host, ["sleep", "60"])
        q = L.spawn(L.workers[1].ns, ["sleep", "60"])
        # a grandchild not started through spawn: found by ip netns pids
        gp = L.run_in(L.ns_inet, ["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"])
        orphan = int(gp.stdout.strip())
        check(netns.pid_alive(orphan), "orphan runs")
        wd = L.workdir
        names = list(L.namespaces)
    for pid in (p.pid, q.pid, orphan):
        check(not netns.pid_alive(pid), "process %d survived teardown" % pid)
    left = [n for n in netns.ns_list() if n in names]
    check(not left, "namespaces left: %s" % left)
    check(not os.path.exists(wd), "workdir left")
    check(L.prefix + "-" not in netns.ip("-o", "link").stdout, "links left")


def t_teardown_on_sigterm():
    """A test process killed with SIGTERM (a ctest timeout) still tears its lab down."""
    me = os.path.dirname(os.path.abspath(__file__))
    prefix = "egs%d" % (os.getpid() % 10000)
    code = ("import sys,time;sys.path.insert(0,%r);import lab\n"
            "with lab.Lab(prefix=%r, workers=1) as L:\n"
            "    print('up', flush=True)\n    time.sleep(60)\n" % (me, prefix))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        check(line.strip() == "up", "child lab did not come up: %r" % line)
        check(netns.ns_exists(prefix + "-host"), "child namespaces")
        p.terminate()
        p.wait(timeout=20)
        left = [n for n in netns.ns_list() if n.startswith(prefix + "-")]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=5)
        subprocess.run([sys.executable, os.path.join(me, "lab.py"), "purge", "--prefix",
                        prefix], capture_output=True, timeout=60)
        p.stdout.close()
    check(p.returncode == 128 + 15, "exit status %s" % p.returncode)
    check(not left, "SIGTERM left namespaces behind: %s" % left)


def t_teardown_on_failure():
    names = []
    try:
        with Lab(prefix="egf%d" % (os.getpid() % 10000), workers=2) as L:
            names = list(L.namespaces)
            raise KeyError("boom")
    except KeyError:
        pass
    check(names and not [n for n in netns.ns_list() if n in names], "namespaces left")


def t_cli():
    d = tempfile.mkdtemp(prefix="eglabcli-")
    st = os.path.join(d, "state.json")
    prefix = "egc%d" % (os.getpid() % 10000)
    me = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lab.py")
    try:
        cp = subprocess.run([sys.executable, me, "up", "--prefix", prefix, "--state", st],
                            capture_output=True, text=True, timeout=60)
        check(cp.returncode == 0, "up: %s %s" % (cp.stdout, cp.stderr))
        with open(st) as f:
            state = json.load(f)
        check(state["ready"] and netns.pid_alive(state["pid"]), "lab process runs")
        check(netns.ns_exists(prefix + "-host"), "host namespace")
        cp = subprocess.run([sys.executable, me, "ctl", "--state", st,
                             json.dumps({"op": "zone.update", "zone": {
                                 "cli.lab.test": {"A": ["198.51.100.11"]}}})],
                            capture_output=True, text=True, timeout=10)
        check(cp.returncode == 0, cp.stdout + cp.stderr)
        from labtools import dns
        r = dns.query(lambda f, t: netns.socket_in(prefix + "-host", f, t),
                      (lab.DNS_SERVER, 53), "cli.lab.test")
        check(r and r["answers"][0][3] == "198.51.100.11", "cli zone: %s" % r)
        netns.connect_in(prefix + "-host", lab.HTTP_ORIGIN, 80).close()
        time.sleep(0.1)
        cp = subprocess.run([sys.executable, me, "ctl", "--state", st, '{"op": "counts"}'],
                            capture_output=True, text=True, timeout=10)
        check(json.loads(cp.stdout)["counts"]["http80"] == 1, cp.stdout)
        cp = subprocess.run([sys.executable, me, "down", "--state", st],
                            capture_output=True, text=True, timeout=60)
        check(cp.returncode == 0, "down: %s" % cp.stderr)
        if os.access(lab.binary("egressd"), os.X_OK):
            _cli_with_egressd(me, st, prefix, state)
        check(not netns.pid_alive(state["pid"]), "lab process gone")
        check(not [n for n in netns.ns_list() if n.startswith(prefix + "-")], "ns left")
        check(not os.path.exists(st), "state file removed")
    finally:
        if os.path.exists(st):
            subprocess.run([sys.executable, me, "down", "--state", st], timeout=60,
                           capture_output=True)
        import shutil
        shutil.rmtree(d, ignore_errors=True)


def _cli_with_egressd(me, st, prefix, old):
    """up --egressd (what make demo uses): egressd runs in the lab's host namespace and
    takes a grant over its control socket; down stops it."""
    cp = subprocess.run([sys.executable, me, "up", "--prefix", prefix, "--state", st,
                         "--egressd"], capture_output=True, text=True, timeout=90)
    check(cp.returncode == 0, "up --egressd: %s %s" % (cp.stdout, cp.stderr))
    with open(st) as f:
        state = json.load(f)
    from labtools.egressd import Egressd
    e = state["egressd"]
    check(netns.pid_alive(e["pid"]), "egressd runs")
    ctl = Egressd.__new__(Egressd)
    ctl.settings = {"control_socket": e["control_socket"]}
    w = state["workers"][0]
    rep = ctl.control({"op": "grant.create", "grant": {
        "principal": "demo", "allow": ["https://origin.lab.test"],
        "limits": {"lifetime_s": 60}}, "listen": w["proxy"], "interface": w["host_if"]})
    check(rep.get("ok"), "grant.create: %s" % rep)
    addr, port = w["proxy"].split(":")
    r = proxyclient.connect_request(
        lambda a, p, t: netns.connect_in(w["ns"], a, p, timeout=t), (addr, int(port)),
        "origin.lab.test:443")
    check(r.status == 200, "CONNECT through the CLI lab: %r" % r)
    r.close()
    cp = subprocess.run([sys.executable, me, "down", "--state", st], capture_output=True,
                        text=True, timeout=60)
    check(cp.returncode == 0, "down: %s" % cp.stderr)
    check(not netns.pid_alive(e["pid"]), "egressd survived down")
    check(not netns.pid_alive(state["pid"]), "lab process survived down")
    check(not [n for n in netns.ns_list() if n.startswith(prefix + "-")], "ns left")


def main():
    lab.require_root()
    res = Results()
    with Lab() as L:
        res.run("names_and_root_namespace_untouched", t_names, L)
        res.run("dns_answers_as_configured", t_dns, L)
        res.run("origins_reachable_from_host", t_origins, L)
        res.run("accept_counters_exact", t_counters, L)
        res.run("workers_isolated", t_isolation, L)
        res.run("extra_address_and_service", t_extra_service, L)
        res.run("dns_survives_garbage", t_dns_survives_garbage, L)
    res.run("teardown_complete", t_teardown)
    res.run("teardown_on_failure", t_teardown_on_failure)
    res.run("teardown_on_sigterm", t_teardown_on_sigterm)
    res.run("cli_up_ctl_down", t_cli)
    res.run("cli_purge_after_crash", t_purge)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
