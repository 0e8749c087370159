#!/usr/bin/env python3
"""A sandboxed worker (egress-exec) behind egressd whose route needs proxy credentials
(docs/routing.md: "the worker never sees any credential — its environment and its traffic").

egressd's route is a Basic-authenticating squid; the credential lives only in egressd's
root-only credentials file. The worker (egress-exec run, in the lab's host namespace)
fetches http://origin.lab.test/echo through its HTTP_PROXY and opens a CONNECT tunnel to
origin.lab.test:443 with GET /echo inside, sending its own Proxy-Authorization. Checks:
both work (through squid, as the configured user); the password and its base64 appear
nowhere in what the worker saw — its environment, /proc/self/environ, the response heads
and bodies (the origin's echo of what reached it); the worker cannot open egressd's
credentials file or egressd.ini; squid never saw the worker's own Proxy-Authorization."""

import base64
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
import sandboxtest as st  # noqa: E402
from lab import Lab  # noqa: E402
from labtools import proxies  # noqa: E402
from labtools.checks import check, require_binaries, stop_clean  # noqa: E402

USER = "alice"
PASSWORD = "sbx-%d-Kq9" % os.getpid()
B64 = base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode()).decode()
WORKER_AUTH = base64.b64encode(b"worker:worker-own-secret").decode()
ZONE = {
    "origin.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "proxy.lab.test": {"A": [proxies.PROXY_ADDR]},
}

WORKER = r'''
import json, os, socket, sys
creds_path, ini_path, wauth = sys.argv[1:4]
res = {"env": dict(os.environ)}
try:
    with open("/proc/self/environ", "rb") as f:
        res["environ"] = f.read().decode("latin-1")
except OSError as e:
    res["environ"] = "error %s" % e
proxy = os.environ.get("HTTP_PROXY", "")
h, port = proxy[len("http://"):].rstrip("/").rsplit(":", 1)
def recv_all(s):
    data = b""
    while True:
        try:
            b = s.recv(65536)
        except OSError:
            break
        if not b:
            break
        data += b
    return data.decode("latin-1")
s = socket.create_connection((h, int(port)), timeout=10)
s.sendall(("GET http://origin.lab.test/echo HTTP/1.1\r\nHost: origin.lab.test\r\n"
           "Proxy-Authorization: Basic %s\r\nConnection: close\r\n\r\n" % wauth).encode())
res["get"] = recv_all(s)
s.close()
s = socket.create_connection((h, int(port)), timeout=10)
s.sendall(("CONNECT origin.lab.test:443 HTTP/1.1\r\nHost: origin.lab.test:443\r\n"
           "Proxy-Authorization: Basic %s\r\n\r\n" % wauth).encode())
head = b""
while b"\r\n\r\n" not in head:
    b = s.recv(1)
    if not b:
        break
    head += b
res["connect"] = head.decode("latin-1")
if b" 200 " in head.split(b"\r\n")[0] + b" ":
    s.sendall(b"GET /echo HTTP/1.1\r\nHost: origin.lab.test\r\nConnection: close\r\n\r\n")
    res["tunnel"] = recv_all(s)
s.close()
for key, p in (("creds_file", creds_path), ("ini_file", ini_path)):
    try:
        with open(p, "rb") as f:
            res[key] = "read %d bytes" % len(f.read())
    except OSError as e:
        res[key] = "denied:%s" % e.errno
print(json.dumps(res))
'''


def t_worker_sees_no_credential(L, d, sq, repo, creds):
    r = st.run(L.ns_host, ["--repo", repo.path, "--allow", "http://origin.lab.test",
                           "--allow", "https://origin.lab.test", "--egressd-control",
                           d.control_path, "--net-pool", "169.254.212.0/24"],
               st.py(WORKER) + [creds, d.conf_path, WORKER_AUTH])
    try:
        check(r.rc == 0, r.describe())
        res = r.json_line()
        raw = r.stdout + r.stderr
    finally:
        shutil.rmtree(r.out_dir, ignore_errors=True)
    check(res["get"].startswith("HTTP/1.1 200") and "X-Origin: http80" in res["get"],
          "GET through egressd: %r" % res["get"][:300])
    check(res["connect"].startswith("HTTP/1.1 200"), "CONNECT: %r" % res["connect"])
    check(res.get("tunnel", "").startswith("HTTP/1.1 200") and
          "X-Origin: http443" in res.get("tunnel", ""), "tunnel: %r" % res.get("tunnel"))
    for secret in (PASSWORD, B64):
        check(secret.encode() not in raw, "the worker saw the credential: %r" % raw[:800])
    check("proxy-authorization" not in res["get"].lower() and
          "proxy-authorization" not in res["tunnel"].lower(),
          "a Proxy-Authorization reached the origin: %r %r" % (res["get"], res["tunnel"]))
    check(res["creds_file"].startswith("denied:"), "credentials file: %s" % res["creds_file"])
    check(res["ini_file"].startswith("denied:"), "egressd.ini: %s" % res["ini_file"])
    ln = sq.wait_log(lambda x: " GET http://origin.lab.test/echo %s " % USER in x)
    check(ln is not None, "squid log %s" % sq.access_log_lines())
    ln = sq.wait_log(lambda x: " CONNECT origin.lab.test:443 %s " % USER in x)
    check(ln is not None, "squid log %s" % sq.access_log_lines())
    check(not any("worker" in x for x in sq.access_log_lines()),
          "squid saw the worker's own credential")


def main():
    lab.require_root()
    st.require_tools()
    require_binaries("egressd")
    miss = proxies.missing_tools("squid")
    if miss:
        print("FAIL: not installed: %s (scripts/deps.sh)" % " ".join(miss))
        print("0 passed, 1 failed")
        return 1
    res = lab.Results()
    repo = st.Repo()
    try:
        with Lab(prefix="rs%d" % (os.getpid() % 100000), workers=0, zone=ZONE) as L:
            proxies.add_addresses(L, proxies.PROXY_ADDR)
            sq = proxies.Squid(L, auth="basic", users={USER: PASSWORD}).start()
            creds = proxies.credentials_file(L, "sbx.ini", {"proxy.lab.test:3128": {
                "scheme": "basic", "username": USER, "password": PASSWORD}})
            d = L.egressd(settings={"route": "proxy http://proxy.lab.test:3128",
                                    "proxy_credentials": creds})
            res.run("worker_sees_no_credential", t_worker_sees_no_credential, L, d, sq,
                    repo, creds)
            res.run("egressd_stops_clean", stop_clean, d)
            sq.stop()
    finally:
        repo.remove()
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
