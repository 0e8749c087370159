#!/usr/bin/env python3
"""Transparent capture (docs/transparent.md): proxy-unaware clients in a sandbox reach the
names their grant allows, and only those, with every hop authorized by egressd like a CONNECT.

The worker (egress-exec run, in the lab's host namespace) has NO proxy variables in the
environment of its clients (they are removed; curl also gets --noproxy '*'):

  private  egress-exec starts its own egressd. The worker's /etc/resolv.conf names the stub
           at its gateway; getent resolves a granted name to 198.18.0.0/15 and a name
           outside the grant fails (NXDOMAIN, a deny record dns_not_granted); curl over
           HTTPS (lab CA) and plain HTTP, Node's built-in fetch, a raw TCP echo and ssh (a
           tcp:// grant; ssh gets as far as the echoed banner) all work, their records say capture: transparent; negative twins:
           a ClientHello naming another host on a granted name's address (sni_mismatch),
           a plain-HTTP Host of another host (host_mismatch), an address the stub never
           handed out (transparent_unmapped), UDP to the lab's DNS server, to another port
           of the gateway and to a pool address (no answer); AAAA and MX for a granted name
           are empty NOERROR answers. The nftables rulesets of the lab's host namespace and
           of the machine's own namespace (read only) are the same before and after.
  system   the same through a running egressd (--egressd-control) whose route is an upstream
           proxy (squid): HTTPS and the echo work through it (squid's log shows the CONNECTs
           by name; the records say route = the proxy, attested false), a non-granted name
           is NXDOMAIN, records in that egressd's log.
  off      --transparent=off: no resolv.conf, names do not resolve, the manifest says so.
Needs root (exit 77 otherwise).
"""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
import sandboxtest as st  # noqa: E402
from lab import Lab, Results, check  # noqa: E402
from labtools import modelorigin, proxies  # noqa: E402
from labtools.checks import require_binaries, stop_clean  # noqa: E402
from labtools.egressd import binary  # noqa: E402

TLS_ADDR = "203.0.113.40"
OTHER_ADDR = "203.0.113.42"
METRICS_PORT = 9466           # the system egressd's metrics listener, inside the lab
KEY = "sk-lab-transparent-5e6f"
ZONE = dict(lab.DEFAULT_ZONE)
ZONE.update({"tls.lab.test": {"A": [TLS_ADDR]}, "other.lab.test": {"A": [OTHER_ADDR]},
             "nothere.lab.test": {"A": [lab.ECHO2]},
             "proxy.lab.test": {"A": [proxies.PROXY_ADDR]}})
SETTINGS = ["dns_server=198.51.100.53", "allow_special_address=198.51.100.0/24",
            "allow_special_address=203.0.113.0/24", "dns_timeout=1s", "connect_timeout=3s"]
GRANT = ["https://tls.lab.test", "http://origin.lab.test", "tcp://echo.lab.test:7"]

WORKER = r'''
import json, os, re, socket, ssl, struct, subprocess, sys
ca_pem, key, mode = sys.argv[1:4]
with open("/tmp/ca.pem", "w") as f:
    f.write(ca_pem)
env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
env["NODE_EXTRA_CA_CERTS"] = "/tmp/ca.pem"
res = {"env_proxy": sorted(k for k in env if "proxy" in k.lower())}
try:
    with open("/etc/resolv.conf") as f:
        res["resolv"] = f.read()
except OSError as e:
    res["resolv"] = "error:%s" % e.errno
def sh(args, timeout=40):
    try:
        cp = subprocess.run(args, capture_output=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"rc": "timeout", "out": "", "err": ""}
    return {"rc": cp.returncode, "out": cp.stdout.decode(errors="replace")[-1500:],
            "err": cp.stderr.decode(errors="replace")[-800:]}
def recv_all(s):
    data = b""
    while len(data) < 65536:
        try:
            b = s.recv(4096)
        except OSError as e:
            data += ("<error %s>" % e.errno).encode()
            break
        if not b:
            break
        data += b
    return data.decode("latin-1")
def resolve(name):
    try:
        return socket.gethostbyname(name)
    except OSError as e:
        return "error:%s" % type(e).__name__
res["getent_tls"] = sh(["getent", "ahostsv4", "tls.lab.test"])
res["getent_denied"] = sh(["getent", "hosts", "nothere.lab.test"])
res["tls_addr"] = resolve("tls.lab.test")
res["curl_https"] = sh(["curl", "-sS", "--noproxy", "*", "--max-time", "20", "--cacert",
                        "/tmp/ca.pem", "-H", "x-api-key: " + key,
                        "https://tls.lab.test/v1/stream"])
if mode == "off":
    print(json.dumps(res))
    sys.exit(0)
try:
    s = socket.create_connection(("echo.lab.test", 7), timeout=10)
    s.sendall(b"ping-transparent\n")
    got = b""
    while not got.endswith(b"\n"):     # no half-close: squid ends a tunnel on the first FIN
        b = s.recv(4096)
        if not b:
            break
        got += b
    res["echo"] = got.decode("latin-1")
    s.close()
except OSError as e:
    res["echo"] = "error:%s" % e
if mode == "system":
    print(json.dumps(res))
    sys.exit(0)
# ssh by name with no ProxyCommand: the echo origin sends ssh's own banner back, which is
# as far as an echo can take it (proves the name resolved and the stream was captured)
# (the key exchange then waits forever: timeout(1) ends it, ssh's log is kept)
res["ssh"] = sh(["timeout", "8", "ssh", "-v", "-F", "/dev/null", "-o", "BatchMode=yes", "-o",
                 "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o",
                 "ConnectTimeout=10", "-p", "7", "git@echo.lab.test", "true"], timeout=30)
res["curl_http"] = sh(["curl", "-sS", "--noproxy", "*", "--max-time", "20", "-o", "/dev/null",
                       "-w", "%{http_code}", "http://origin.lab.test/"])
res["node_fetch"] = sh(["node", "-e",
    "fetch('https://tls.lab.test/v1/stream', {headers: {'x-api-key': process.argv[1]}})"
    ".then(r => r.text().then(t => console.log(r.status + ' ' + t.length + ' ' + "
    "t.includes('\"n\": 4'))))"
    ".catch(e => { console.log('error ' + e + ' ' + (e.cause && e.cause.code)); "
    "process.exit(3); })", key])
ctx = ssl.create_default_context(cafile="/tmp/ca.pem")
try:
    with socket.create_connection((res["tls_addr"], 443), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="other.lab.test") as t:
            res["sni_mismatch"] = "connected"
except Exception as e:
    res["sni_mismatch"] = "failed:%s" % type(e).__name__
try:
    s = socket.create_connection((resolve("origin.lab.test"), 80), timeout=10)
    s.sendall(b"GET / HTTP/1.1\r\nHost: origin2.lab.test\r\nConnection: close\r\n\r\n")
    res["host_mismatch"] = recv_all(s).split("\r\n\r\n")[0]
    s.close()
except OSError as e:
    res["host_mismatch"] = "error:%s" % e
try:
    s = socket.create_connection(("198.18.255.1", 443), timeout=5)
    s.sendall(b"\x16\x03\x01")
    res["unmapped"] = "data:%r" % recv_all(s)
    s.close()
except OSError as e:
    res["unmapped"] = "error:%s" % e.errno
gw = [l.split()[1] for l in res["resolv"].splitlines() if l.startswith("nameserver")][0]
res["gw"] = gw
def query(name, qtype):
    q = struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    for lab_ in name.split("."):
        q += bytes([len(lab_)]) + lab_.encode()
    return q + b"\x00" + struct.pack("!HH", qtype, 1)
def udp(addr, port, payload):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.connect((addr, port))
        s.send(payload)
        d = s.recv(2048)
        return "answer:" + d.hex()
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return "error:%s" % e.errno
    finally:
        s.close()
res["udp_lab_dns"] = udp("198.51.100.53", 53, query("origin.lab.test", 1))
res["udp_gw_other"] = udp(gw, 5353, query("origin.lab.test", 1))
res["udp_pool"] = udp(res["tls_addr"], 53, query("origin.lab.test", 1))
res["stub_aaaa"] = udp(gw, 53, query("tls.lab.test", 28))
res["stub_mx"] = udp(gw, 53, query("tls.lab.test", 15))
res["stub_nx"] = udp(gw, 53, query("Other.Lab.Test", 1))
res["stub_a_case"] = udp(gw, 53, query("TLS.lab.TEST", 1))
# --- attacker's probes (docs/transparent.md): each must end refused, and recorded ---
def tcp_try(addr, port, payload=None, timeout=5):
    try:
        s = socket.create_connection((addr, port), timeout=timeout)
    except OSError as e:
        return "error:%s" % e.errno
    try:
        if payload:
            s.sendall(payload)
        return "data:%r" % recv_all(s)[:300]
    finally:
        s.close()
# a granted https name's address on a port the grant does not name (not_granted)
res["port_other"] = tcp_try(res["tls_addr"], 22)
# another TCP port of the gateway itself (rejected by the link namespace's input filter)
res["gw_tcp_other"] = tcp_try(gw, 8080)
# IPv6 and ICMP have no way out (no route; no ping sockets)
try:
    s6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s6.settimeout(3)
    s6.connect(("64:ff9b::c612:1", 443))
    res["ipv6"] = "connected"
except OSError as e:
    res["ipv6"] = "error:%s" % e.errno
for k, fam, typ, proto in (("icmp_socket", socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP),
                           ("raw_socket", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP),
                           ("packet_socket", socket.AF_PACKET, socket.SOCK_RAW, 0)):
    try:
        socket.socket(fam, typ, proto).close()
        res[k] = "made"
    except OSError as e:
        res[k] = "error:%s" % e.errno
# captured plain HTTP: absolute-form, CONNECT, and a pipelined second request whose Host
# names another origin: none may pick its own destination
oaddr = resolve("origin.lab.test")
res["http_absolute"] = tcp_try(oaddr, 80, b"GET http://other.lab.test/ HTTP/1.1\r\n"
                               b"Host: other.lab.test\r\nConnection: close\r\n\r\n")
res["http_connect"] = tcp_try(oaddr, 80, b"CONNECT other.lab.test:443 HTTP/1.1\r\n"
                              b"Host: other.lab.test:443\r\n\r\n")
res["http_two_hosts"] = tcp_try(oaddr, 80, b"GET / HTTP/1.1\r\nHost: origin.lab.test\r\n"
                                b"Host: other.lab.test\r\nConnection: close\r\n\r\n")
try:
    s = socket.create_connection((oaddr, 80), timeout=15)
    s.sendall(b"GET / HTTP/1.1\r\nHost: origin.lab.test\r\n\r\n"
              b"GET / HTTP/1.1\r\nHost: origin2.lab.test\r\nConnection: close\r\n\r\n")
    res["http_pipelined"] = re.findall(r"HTTP/1\.1 \d{3}|X-Egress-Reason: [a-z_]+",
                                       recv_all(s))
    s.close()
except OSError as e:
    res["http_pipelined"] = ["error:%s" % e]
# a ClientHello cut into two TLS records and sent in three TCP segments: naming another
# host it is refused, naming the granted host the handshake completes
import time
def frag_tls(sni):
    c = ssl.create_default_context(cafile="/tmp/ca.pem")
    c.check_hostname = False
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = c.wrap_bio(inc, out, server_hostname=sni)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    ver, ln = hello[1:3], int.from_bytes(hello[3:5], "big")
    body = hello[5:5 + ln]
    recs = b""
    for part in (body[:40], body[40:]):
        recs += b"\x16" + ver + len(part).to_bytes(2, "big") + part
    try:
        s = socket.create_connection((res["tls_addr"], 443), timeout=10)
        for a, b in ((0, 3), (3, 70), (70, len(recs))):
            s.sendall(recs[a:b])
            time.sleep(0.2)
        for _ in range(50):
            d = s.recv(65536)
            if not d:
                return "closed"
            inc.write(d)
            try:
                obj.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            o = out.read()
            if o:
                s.sendall(o)       # the client's Finished too: the origin counts it
            if done:
                time.sleep(0.2)
                return "handshake"
        return "stuck"
    except (OSError, ssl.SSLError) as e:
        return "error:%s" % type(e).__name__
res["frag_other"] = frag_tls("other.lab.test")
res["frag_granted"] = frag_tls("tls.lab.test")
# a flood of queries for names outside the grant: every one answered NXDOMAIN, the log
# gets a bounded number of records and a count of the rest (dns_suppressed)
FLOOD = 3000
fs = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
fs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
fs.connect((gw, 53))
fs.settimeout(0.5)
nx = other = sent = 0


def drain():
    # read answers until every query sent so far is answered, or a read times out
    global nx, other
    while nx + other < sent:
        try:
            d = fs.recv(2048)
        except socket.timeout:
            return
        if d[3] & 0xf == 3:
            nx += 1
        else:
            other += 1


t0 = time.monotonic()
for i in range(FLOOD):
    fs.send(query("flood%d.lab.test" % i, 1))
    sent += 1
    if i % 50 == 49:          # keep the stub's socket from overflowing: a burst, then read
        drain()
drain()
res["flood"] = {"sent": sent, "nxdomain": nx, "other": other,
                "seconds": round(time.monotonic() - t0, 3)}
fs.close()
print(json.dumps(res))
'''


def nft_rulesets(L):
    """`nft list ruleset` of the machine's namespace and of the lab's host namespace (read
    only: the point is that a run leaves both exactly as they were)."""
    out = []
    for pre in ([], ["nsenter", "--net=/run/netns/" + L.ns_host]):
        cp = subprocess.run(pre + ["nft", "list", "ruleset"], capture_output=True, timeout=20)
        out.append((cp.returncode, cp.stdout))
    return out


def run(L, args, mode, ca_pem):
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    out = st._out_dir()
    full = ["nsenter", "--net=/run/netns/" + L.ns_host, binary("egress-exec"), "run",
            "--out", out, "--wall", "90s",
            "--memory", "768M"]
    for g in GRANT:
        full += ["--allow", g]
    full += list(args) + ["--", st.PY, "-c", WORKER, ca_pem, KEY, mode]
    cp = subprocess.run(full, capture_output=True, timeout=180, env=env)
    r = st.Run(cp, out, 0)
    recs = []
    p = os.path.join(out, "decisions.jsonl")
    if os.path.exists(p):
        with open(p) as f:
            recs = [json.loads(x) for x in f if x.strip()]
    return r, recs


def dns_answer(hexstr):
    """(rcode, ancount, first A address or None) of a hex DNS answer."""
    b = bytes.fromhex(hexstr[len("answer:"):])
    rcode, an = b[3] & 0xf, int.from_bytes(b[6:8], "big")
    addr = ".".join(str(x) for x in b[-4:]) if an else None
    return rcode, an, addr


def decisions(recs, **kw):
    return [r for r in recs if r.get("event") == "decision" and
            all(r.get(k) == v for k, v in kw.items())]


def t_private(L, origin, ca_pem):
    before = nft_rulesets(L)
    hs = origin.handshakes
    r, recs = run(L, SETTINGS_ARGS, "private", ca_pem)
    check(r.rc == 0, r.describe())
    res = r.json_line()
    check(res["env_proxy"] == [], "proxy variables left: %s" % res["env_proxy"])
    check(res["resolv"].count("nameserver ") == 1, "resolv.conf: %r" % res["resolv"])
    check(res["getent_tls"]["rc"] == 0 and res["getent_tls"]["out"].startswith("198.1"),
          "getent granted: %s" % res["getent_tls"])
    check(res["tls_addr"].startswith("198.18.") or res["tls_addr"].startswith("198.19."),
          "synthetic address: %s" % res["tls_addr"])
    check(res["getent_denied"]["rc"] == 2, "getent non-granted: %s" % res["getent_denied"])
    check(res["curl_https"]["rc"] == 0 and '"n": 4' in res["curl_https"]["out"],
          "curl https: %s" % res["curl_https"])
    check(res["curl_http"]["rc"] == 0 and res["curl_http"]["out"] == "200",
          "curl http: %s" % res["curl_http"])
    check(res["node_fetch"]["rc"] == 0 and res["node_fetch"]["out"].startswith("200 ") and
          res["node_fetch"]["out"].strip().endswith("true"), "node fetch: %s" % res["node_fetch"])
    check(res["echo"] == "ping-transparent\n", "tcp echo: %r" % res["echo"])
    check("Authenticating to echo.lab.test:7" in res["ssh"]["err"] and
          "SSH2_MSG_KEXINIT received" in res["ssh"]["err"], "ssh: %s" % res["ssh"])
    check(res["sni_mismatch"].startswith("failed:"), "SNI of another host: %s"
          % res["sni_mismatch"])
    check(res["host_mismatch"].startswith("HTTP/1.1 403") and
          "X-Egress-Reason: host_mismatch" in res["host_mismatch"],
          "Host of another host: %r" % res["host_mismatch"])
    # accepted by the kernel, then closed by egressd without a byte
    check(res["unmapped"].startswith("error:") or
          res["unmapped"] in ("data:''", "data:'<error 104>'"),
          "unmapped pool address: %s" % res["unmapped"])
    check(res["udp_lab_dns"] == "error:101", "UDP to the lab DNS: %s" % res["udp_lab_dns"])
    check(res["udp_gw_other"] == "error:111", "UDP to another gateway port: %s"
          % res["udp_gw_other"])
    check(not res["udp_pool"].startswith("answer:"), "UDP to a pool address: %s"
          % res["udp_pool"])
    check(dns_answer(res["stub_aaaa"])[:2] == (0, 0), "AAAA: %s" % res["stub_aaaa"])
    check(dns_answer(res["stub_mx"])[:2] == (0, 0), "MX: %s" % res["stub_mx"])
    check(dns_answer(res["stub_nx"])[0] == 3, "other.lab.test: %s" % res["stub_nx"])
    check(dns_answer(res["stub_a_case"]) == (0, 1, res["tls_addr"]),
          "case-insensitive: %s vs %s" % (res["stub_a_case"], res["tls_addr"]))
    check(res["port_other"] in ("data:''", "data:'<error 104>'"),
          "a granted name's address on another port: %s" % res["port_other"])
    check(res["gw_tcp_other"] == "error:111", "another TCP port of the gateway: %s"
          % res["gw_tcp_other"])
    check(res["ipv6"].startswith("error:"), "IPv6: %s" % res["ipv6"])
    for k in ("icmp_socket", "raw_socket", "packet_socket"):
        check(res[k].startswith("error:"), "%s: %s" % (k, res[k]))
    for k in ("http_absolute", "http_connect", "http_two_hosts"):
        check(res[k].startswith("data:'HTTP/1.1 4"), "%s: %s" % (k, res[k]))
    check("malformed_request" in res["http_two_hosts"], "two Host headers: %s"
          % res["http_two_hosts"])
    # refused before its head was parsed, a captured hop still names its destination
    mal = decisions(recs, capture="transparent", reason="malformed_request")
    check(mal and all(x.get("dest") == "origin.lab.test:80" and x.get("method") is None
                      for x in mal), "captured malformed request's record: %s" % mal)
    pl = res["http_pipelined"]
    check(pl == ["HTTP/1.1 200", "HTTP/1.1 403", "X-Egress-Reason: host_mismatch"],
          "pipelined Host change: %s" % pl)
    check(res["frag_other"] in ("closed", "error:ConnectionResetError"),
          "fragmented ClientHello naming another host: %s" % res["frag_other"])
    check(res["frag_granted"] == "handshake",
          "fragmented ClientHello naming the host: %s" % res["frag_granted"])
    check(origin.handshakes - hs == 3, "TLS origin handshakes: %d" % (origin.handshakes - hs))
    # the records
    tr = decisions(recs, capture="transparent", verdict="allow")
    dests = sorted(set(x.get("dest") for x in tr))
    check(dests == ["echo.lab.test:7", "origin.lab.test:80", "tls.lab.test:443"],
          "allowed captured hops: %s" % dests)
    check(all(x.get("original_dst", "").startswith("198.1") for x in tr), tr)
    closes = [x for x in recs if x.get("event") == "close" and x.get("capture") == "transparent"]
    check(len(closes) >= len(tr), "close records: %d for %d allows" % (len(closes), len(tr)))
    nx = decisions(recs, reason="dns_not_granted")
    check(any(x.get("dest") == "nothere.lab.test" and x.get("verdict") == "deny" and
              x.get("hop_kind") == "dns" for x in nx), "dns deny: %s" % nx)
    check(decisions(recs, reason="sni_mismatch", capture="transparent"),
          "no sni_mismatch record")
    check(decisions(recs, reason="host_mismatch", capture="transparent"),
          "no host_mismatch record")
    check(decisions(recs, reason="transparent_unmapped"), "no transparent_unmapped record")
    check(decisions(recs, reason="not_granted", capture="transparent",
                    dest="tls.lab.test:22"), "no not_granted record for port 22")
    check(decisions(recs, reason="host_mismatch", capture="transparent") and
          len(decisions(recs, reason="sni_mismatch", capture="transparent")) >= 2,
          "fragmented / pipelined refusals not recorded")
    # every captured allow has its close, with the same capture fields
    for a in tr:
        cl = [x for x in closes if x.get("hop") == a.get("hop")]
        check(len(cl) == 1 and cl[0].get("original_dst") == a.get("original_dst"),
              "close of captured hop %s: %s" % (a.get("hop"), cl))
    # the flood: all answered NXDOMAIN; individual records within the budget, the rest
    # counted (egressd may have dropped datagrams the socket could not hold: never more
    # than were sent, never fewer than were answered)
    fl = res["flood"]
    check(fl["other"] == 0 and fl["nxdomain"] >= fl["sent"] * 0.9, "flood answers: %s" % fl)
    frec = [x for x in decisions(recs, reason="dns_not_granted")
            if x.get("dest", "").startswith("flood")]
    sup = [x for x in recs if x.get("event") == "dns_suppressed"]
    nsup = sum(x.get("suppressed", 0) for x in sup)
    budget = 64 + 16 * (fl["seconds"] + 2)
    check(len(frec) <= budget, "flood: %d deny records (budget %d): %s" % (len(frec), budget, fl))
    check(fl["nxdomain"] <= len(frec) + nsup <= fl["sent"],
          "flood: %d records + %d suppressed for %s" % (len(frec), nsup, fl))
    check(sup and all(x.get("grant_id") == r.result.get("grant_id") and
                      set(x.get("reasons", {})) == {"dns_not_granted"} and
                      x.get("last_dest", "").startswith("flood") for x in sup),
          "dns_suppressed: %s" % sup[:3])
    maps = [x for x in recs if x.get("event") == "dns_map"]
    check(any(x.get("dest") == "tls.lab.test" and x.get("answer") == res["tls_addr"]
              for x in maps), "dns_map: %s" % maps)
    check(r.result.get("grant_id"), r.describe())
    cp = subprocess.run([binary("egressctl"), "log", "verify", os.path.join(r.out_dir,
                        "decisions.jsonl")], capture_output=True, timeout=30)
    check(cp.returncode == 0, "extract verify: %s %s" % (cp.stdout, cp.stderr))
    after = nft_rulesets(L)
    check(before == after, "a ruleset outside the run changed: %s -> %s" % (before, after))
    shutil.rmtree(r.out_dir, ignore_errors=True)


def t_system(L, d, sq, origin, ca_pem):
    hs = origin.handshakes
    r, _ = run(L, ["--egressd-control", d.control_path, "--net-pool", "169.254.214.0/24"],
               "system", ca_pem)
    check(r.rc == 0, r.describe())
    res = r.json_line()
    check(res["curl_https"]["rc"] == 0 and '"n": 4' in res["curl_https"]["out"],
          "curl https: %s" % res["curl_https"])
    check(res["echo"] == "ping-transparent\n", "tcp echo: %r" % res["echo"])
    check(res["getent_denied"]["rc"] == 2, "getent non-granted: %s" % res["getent_denied"])
    check(origin.handshakes - hs == 1, "handshakes %d" % (origin.handshakes - hs))
    gid = r.result.get("grant_id")
    recs = [x for x in d.decisions() if x.get("grant_id") == gid]
    tls = decisions(recs, capture="transparent", verdict="allow", dest="tls.lab.test:443")
    check(tls and tls[0].get("route") == "http://proxy.lab.test:3128" and
          tls[0].get("attested") is False, "captured allow in egressd's log: %s" % tls)
    for hp in ("tls.lab.test:443", "echo.lab.test:7"):
        ln = sq.wait_log(lambda x, hp=hp: " CONNECT %s " % hp in x)
        check(ln is not None, "squid never saw CONNECT %s: %s" % (hp, sq.access_log_lines()))
    check(decisions(recs, reason="dns_not_granted", dest="nothere.lab.test"),
          "no dns_not_granted in egressd's log")
    # the metrics follow the records: every stub decision record is counted once
    txt = L.metrics_text(METRICS_PORT)
    allrecs = d.decisions()
    for verdict, reason in (("deny", "dns_not_granted"), ("allow", "allowed")):
        n = len([x for x in allrecs if x.get("event") == "decision" and
                 x.get("verdict") == verdict and x.get("reason") == reason])
        want = 'egressd_decisions_total{verdict="%s",reason="%s"} %d' % (verdict, reason, n)
        check(want in txt, "metrics: %s not in %s" % (
            want, [ln for ln in txt.splitlines() if "decisions_total{" in ln]))
    shutil.rmtree(r.out_dir, ignore_errors=True)


def t_off(L, origin, ca_pem):
    hs = origin.handshakes
    r, recs = run(L, SETTINGS_ARGS + ["--transparent", "off"], "off", ca_pem)
    check(r.rc == 0, r.describe())
    res = r.json_line()
    check(res["resolv"].startswith("error:"), "resolv.conf with capture off: %r"
          % res["resolv"])
    check(res["getent_tls"]["rc"] != 0 and res["tls_addr"].startswith("error:"),
          "a name resolved with capture off: %s" % res["getent_tls"])
    check(res["curl_https"]["rc"] != 0, "curl without a proxy worked: %s" % res["curl_https"])
    check(origin.handshakes == hs, "the origin saw a connection")
    check(not [x for x in recs if x.get("capture") == "transparent"], "captured records")
    shutil.rmtree(r.out_dir, ignore_errors=True)


SETTINGS_ARGS = []
for _kv in SETTINGS:
    SETTINGS_ARGS += ["--egressd-setting", _kv]


def main():
    lab.require_root()
    st.require_tools()
    require_binaries("egressd", "egressctl", "egress-exec")
    miss = proxies.missing_tools("squid")
    if miss:
        print("FAIL: not installed: %s (scripts/deps.sh)" % " ".join(miss))
        print("0 passed, 1 failed")
        return 1
    for tool in ("curl", "node", "openssl", "getent", "nft"):
        if shutil.which(tool) is None:
            print("FAIL: %s is not installed (scripts/deps.sh)" % tool)
            print("0 passed, 1 failed")
            return 1
    res = Results()
    with Lab(prefix="tp%d" % (os.getpid() % 100000), workers=0, zone=ZONE) as L:
        proxies.add_addresses(L, TLS_ADDR, OTHER_ADDR)
        labca = proxies.LabCA(L)
        tc, tk = labca.server_cert("tls.lab.test", ["tls.lab.test"])
        oc, ok = labca.server_cert("other.lab.test", ["other.lab.test"])
        origin = modelorigin.ModelOrigin(L, TLS_ADDR, 443, tc, tk, KEY).start()
        other = modelorigin.ModelOrigin(L, OTHER_ADDR, 443, oc, ok, KEY).start()
        with open(labca.cert) as f:
            ca_pem = f.read()
        res.run("private_egressd", t_private, L, origin, ca_pem)
        res.run("transparent_off", t_off, L, origin, ca_pem)
        proxies.add_addresses(L, proxies.PROXY_ADDR)
        sq = proxies.Squid(L).start()
        d = L.egressd(settings={"route": "proxy http://proxy.lab.test:3128",
                                "metrics_listen": "127.0.0.1:%d" % METRICS_PORT})
        res.run("system_egressd_via_proxy", t_system, L, d, sq, origin, ca_pem)
        res.run("egressd_stops_clean", stop_clean, d)
        sq.stop()
        origin.stop()
        other.stop()
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
