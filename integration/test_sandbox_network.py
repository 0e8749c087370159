#!/usr/bin/env python3
"""Network confinement of `egress-exec run` inside the lab's host namespace (docs/sandbox.md,
network steps): the worker reaches only its own egressd listener over its veth, with exactly its
grant; no direct route, no UDP DNS; a wildcard service in egressd's namespace is out of
reach (the veth's host end lives in the run's own link namespace); two workers with different grants at once cannot use
each other's grant or see each other's files; the grant is revoked and the veth removed
afterwards; the embedded egressd works and goes away."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sandboxtest as st  # noqa: E402
from lab import Lab  # noqa: E402
from sandboxtest import check  # noqa: E402

WORKER = r'''
import json, os, socket, sys, time
me, allowed, other, other_addr = sys.argv[1:5]
res = {"proxy": os.environ.get("HTTP_PROXY", ""), "env": sorted(os.environ)}
h, port = res["proxy"][len("http://"):].rsplit(":", 1)
def http(host):
    s = socket.create_connection((h, int(port)), timeout=5)
    s.sendall(("GET http://%s/x HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" %
               (host, host)).encode())
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    s.close()
    head = data.split(b"\r\n\r\n")[0].decode(errors="replace").split("\r\n")
    reason = [l.split(":", 1)[1].strip() for l in head if l.lower().startswith("x-egress-reason:")]
    return head[0].split(" ")[1] + ":" + (reason[0] if reason else "")
def connect(host):
    s = socket.create_connection((h, int(port)), timeout=5)
    s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host, host)).encode())
    line = s.recv(4096).split(b"\r\n")[0].decode()
    s.close()
    return line.split(" ")[1]
res["allowed"] = http(allowed)
res["connect_allowed"] = connect(allowed)
res["other"] = http(other)
res["ip_literal"] = http("198.51.100.10")
def direct(addr, port, kind=socket.SOCK_STREAM):
    try:
        s = socket.socket(socket.AF_INET, kind)
        s.settimeout(2)
        if kind == socket.SOCK_DGRAM:
            s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x06origin\x03lab\x04test\x00\x00\x01\x00\x01", (addr, port))
            s.recvfrom(512)
        else:
            s.connect((addr, port))
        return "ok"
    except OSError as e:
        return "denied:%s" % (e.errno if e.errno is not None else "timeout")
res["direct_origin"] = direct("198.51.100.10", 80)
res["udp_dns"] = direct("198.51.100.53", 53, socket.SOCK_DGRAM)
res["other_listener"] = direct(other_addr, int(port))
res["host_other_port"] = direct(h, 22)
with open("/tmp/" + me, "w") as f:
    f.write(me)
with open("/work/" + me + ".txt", "w") as f:
    f.write(me)
time.sleep(float(os.environ.get("SLEEP", "1.5")))
res["tmp"] = sorted(os.listdir("/tmp"))
res["work"] = sorted(n for n in os.listdir("/work") if n.endswith(".txt"))
with open("/proc/net/route") as f:
    res["routes"] = [l.split()[1] for l in f.read().splitlines()[1:]]
res["links"] = sorted(os.listdir("/sys/class/net")) if os.path.exists("/sys/class/net") else []
print(json.dumps(res))
'''


def worker_cmd(me, allowed, other, other_addr):
    return st.py(WORKER) + [me, allowed, other, other_addr]


def check_worker(res, me, other_host):
    check(res["allowed"].startswith("404:") or res["allowed"].startswith("200:"),
          "allowed destination: %s" % res["allowed"])
    check(res["connect_allowed"] == "200", "CONNECT allowed: %s" % res["connect_allowed"])
    check(res["other"] == "403:not_granted", "%s reached %s: %s" % (me, other_host,
                                                                   res["other"]))
    check(res["ip_literal"].startswith("403:"), "IP literal: %s" % res["ip_literal"])
    check(res["direct_origin"].startswith("denied:101"), "direct: %s" % res["direct_origin"])
    check(res["udp_dns"].startswith("denied:101"), "UDP DNS: %s" % res["udp_dns"])
    check(res["other_listener"].startswith("denied:101"),
          "the other worker's listener: %s" % res["other_listener"])
    check(res["host_other_port"].startswith("denied:111"),
          "another port on the host end: %s" % res["host_other_port"])
    check(res["work"] == [me + ".txt"], "/work shows %s" % res["work"])
    check(me in res["tmp"] and len([n for n in res["tmp"] if n.startswith("w")]) == 1,
          "/tmp shows %s" % res["tmp"])
    # only the connected /30 and, with transparent capture (on by default), the synthetic
    # pool 198.18.0.0/15 via the gateway (000012C6); no default route (00000000 absent)
    check("00000000" not in res["routes"] and "000012C6" in res["routes"] and
          len([r for r in res["routes"] if r != "000012C6"]) == 1, res["routes"])
    envs = set(res["env"])
    check({"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} <= envs, res["env"])


def t_proxy_only(lab, d, repo):
    before = lab.counts()
    r = st.run(lab.ns_host, ["--repo", repo.path, "--allow", "http://origin.lab.test",
                             "--allow", "https://origin.lab.test", "--egressd-control",
                             d.control_path, "--net-pool", "169.254.210.0/24"],
               worker_cmd("w1", "origin.lab.test", "origin2.lab.test", "169.254.211.1"))
    check(r.rc == 0, r.describe())
    res = r.json_line()
    check_worker(res, "w1", "origin2.lab.test")
    after = lab.counts()
    check(after["http80"] - before["http80"] == 1 and after["http443"] - before["http443"] == 1,
          "allowed origins: %s -> %s" % (before, after))
    check(after["http2"] == before["http2"] and after["http2_443"] == before["http2_443"],
          "a denied origin saw a connection")
    att = r.result["attestation"]["network_enforcement"]
    check(att["attested"] and r.result["grant_id"] in att["detail"], att)
    grants = d.control({"op": "grant.list"}).get("grants", [])
    check(all(g["grant_id"] != r.result["grant_id"] for g in grants),
          "grant still live after the run")
    left = st.leftovers(lab.ns_host, r.result)
    check(not left, "leftovers: %s" % left)
    check(repo.unchanged(), "host repository changed")


def t_two_workers(lab, d, repo):
    before = lab.counts()
    env_sleep = dict(os.environ, SLEEP="2")
    os.environ["SLEEP"] = "2"
    a = st.start(lab.ns_host, ["--repo", repo.path, "--allow", "http://origin.lab.test",
                               "--allow", "https://origin.lab.test", "--env", "SLEEP",
                               "--egressd-control", d.control_path,
                               "--net-pool", "169.254.200.0/30"],
                 worker_cmd("wa", "origin.lab.test", "origin2.lab.test", "169.254.200.5"))
    b = st.start(lab.ns_host, ["--repo", repo.path, "--allow", "http://origin2.lab.test",
                               "--allow", "https://origin2.lab.test", "--env", "SLEEP",
                               "--egressd-control", d.control_path,
                               "--net-pool", "169.254.200.4/30"],
                 worker_cmd("wb", "origin2.lab.test", "origin.lab.test", "169.254.200.1"))
    del os.environ["SLEEP"]
    ra, rb = st.collect(a), st.collect(b)
    check(ra.rc == 0, ra.describe())
    check(rb.rc == 0, rb.describe())
    check_worker(ra.json_line(), "wa", "origin2.lab.test")
    check_worker(rb.json_line(), "wb", "origin.lab.test")
    check(ra.result["grant_id"] != rb.result["grant_id"], "same grant")
    after = lab.counts()
    check(after["http80"] - before["http80"] == 1 and after["http2"] - before["http2"] == 1,
          "origins: %s -> %s" % (before, after))
    for r in (ra, rb):
        left = st.leftovers(lab.ns_host, r.result)
        check(not left, "leftovers: %s" % left)
    check(repo.unchanged(), "host repository changed")
    del env_sleep


def t_embedded_egressd(lab, d, repo):
    r = st.run(lab.ns_host, ["--repo", repo.path, "--allow", "http://origin.lab.test",
                             "--allow", "https://origin.lab.test",
                             "--egressd-setting", "dns_server=198.51.100.53",
                             "--egressd-setting", "allow_special_address=198.51.100.0/24",
                             "--egressd-setting", "allow_special_address=203.0.113.0/24",
                             "--principal", "embedded-test"],
               worker_cmd("we", "origin.lab.test", "origin2.lab.test", "169.254.211.1"))
    check(r.rc == 0, r.describe())
    check_worker(r.json_line(), "we", "origin2.lab.test")
    recs = []
    with open(os.path.join(r.out_dir, "decisions.jsonl")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    # dest is "host:port" (possibly with a scheme prefix): compare the host:port part
    verdicts = {((x.get("dest") or "").split("//")[-1], x.get("verdict")) for x in recs
                if x.get("event") == "decision"}
    check(("origin.lab.test:80", "allow") in verdicts and
          ("origin2.lab.test:80", "deny") in verdicts, verdicts)
    check(all(x.get("principal") in (None, "embedded-test") for x in recs),
          "principal in the log")
    time.sleep(0.2)
    check(not st.host_processes_with(r.result["run_dir"]), "embedded egressd still runs")
    left = st.leftovers(lab.ns_host, r.result)
    check(not left, "leftovers: %s" % left)


def t_no_egressd_refuses(lab, d, repo):
    r = st.run(lab.ns_host, ["--repo", repo.path, "--allow", "http://origin.lab.test",
                             "--egressd-control", "/nonexistent/egressd.sock"],
               ["/bin/sh", "-c", "echo ran"])
    check(r.rc == 12 and b"ran" not in r.stdout and not r.result.get("started"),
          r.describe())
    check(r.result["reason"] == "capability_missing", r.describe())
    check(not r.result["attestation"]["network_enforcement"]["attested"], r.describe())


def t_default_pool_concurrent(lab, d, repo):
    """Three runs at once from the default pool: each gets a /30 outside 169.254.169.0/24
    and reaches its own listener (in its own link namespace, so two runs may even use the
    same /30 without meeting)."""
    code = ("import os, socket\n"
            "p = os.environ['HTTP_PROXY'][7:]\n"
            "h, port = p.rsplit(':', 1)\n"
            "s = socket.create_connection((h, int(port)), timeout=5)\n"
            "s.sendall(b'GET http://origin.lab.test/ HTTP/1.1\\r\\nHost: origin.lab.test\\r\\n\\r\\n')\n"
            "print(h, s.recv(12).decode())\n")
    runs = [st.start(lab.ns_host, ["--repo", repo.path, "--allow", "http://origin.lab.test",
                                   "--egressd-control", d.control_path], st.py(code))
            for _ in range(3)]
    results = [st.collect(r) for r in runs]
    hosts = set()
    for r in results:
        check(r.rc == 0, r.describe())
        h, status = r.stdout.decode().split()[:2]
        check(status == "HTTP/1.1", r.stdout)
        check(h.startswith("169.254.") and not h.startswith("169.254.169."), h)
        hosts.add(h)
        check(not st.leftovers(lab.ns_host, r.result), st.leftovers(lab.ns_host, r.result))


def t_wildcard_listener_unreachable(lab, d, repo):
    """A service bound to 0.0.0.0 in egressd's namespace (sshd, a DNS forwarder...) is not
    reachable from the worker: the veth's host end lives in the run's own link namespace,
    where only egressd's listener is. The run is allowed (network_enforcement attested),
    the worker reaches the allowlisted origin through egressd, its TCP connection to the
    service's port on the host end is refused and its UDP datagram goes nowhere, and the
    service sees nothing."""
    import socket
    from labtools import netns as labnetns
    code = ("import os, socket\n"
            "p = os.environ['HTTP_PROXY'][7:]\n"
            "h, port = p.rsplit(':', 1)\n"
            "s = socket.create_connection((h, int(port)), timeout=5)\n"
            "s.sendall(b'GET http://origin.lab.test/ HTTP/1.1\\r\\nHost: origin.lab.test"
            "\\r\\nConnection: close\\r\\n\\r\\n')\n"
            "print('proxy', s.recv(12).decode())\n"
            "try:\n"
            "    socket.create_connection((h, 2222), timeout=3)\n"
            "    print('tcp open')\n"
            "except OSError as e:\n"
            "    print('tcp denied', e.errno)\n"
            "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "u.sendto(b'x', (h, 2223))\n"
            "print('udp sent')\n")
    s = labnetns.listen_in(lab.ns_host, "0.0.0.0", 2222)
    u = labnetns.listen_in(lab.ns_host, "0.0.0.0", 2223, type=socket.SOCK_DGRAM)
    try:
        s.settimeout(0.05)
        r = st.run(lab.ns_host, ["--repo", repo.path, "--allow", "http://origin.lab.test",
                                 "--egressd-control", d.control_path], st.py(code))
        check(r.rc == 0, r.describe())
        att = r.result["attestation"]["network_enforcement"]
        check(att["attested"], att)
        out = r.stdout.decode()
        check("proxy HTTP/1.1" in out, out)
        check("tcp denied 111" in out, "the worker reached port 2222: %s" % out)
        try:
            s.accept()
            raise AssertionError("the wildcard service accepted a connection")
        except socket.timeout:
            pass
        u.settimeout(0.05)
        try:
            u.recvfrom(16)
            raise AssertionError("the wildcard UDP service got a datagram")
        except socket.timeout:
            pass
    finally:
        s.close()
        u.close()


def main():
    st.require_root()
    st.require_tools()
    results = st.Results()
    repo = st.Repo()
    try:
        with Lab(prefix="h7n%d" % (os.getpid() % 10000), workers=0) as lab:
            d = lab.egressd()
            for name, fn in [("proxy_only", t_proxy_only), ("two_workers", t_two_workers),
                             ("embedded_egressd", t_embedded_egressd),
                             ("no_egressd_refuses", t_no_egressd_refuses),
                             ("default_pool_concurrent", t_default_pool_concurrent),
                             ("wildcard_listener_unreachable", t_wildcard_listener_unreachable)]:
                results.run(name, fn, lab, d, repo)
    finally:
        repo.remove()
    return results.finish()


if __name__ == "__main__":
    sys.exit(main())
