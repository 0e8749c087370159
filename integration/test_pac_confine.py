#!/usr/bin/env python3
"""The route helper's confinement keeps what PAC evaluation needs (docs/SECURITY.md, "The libproxy/PAC helper").

egressd-route-helper runs libproxy and the PAC script under egressd/helper/pacsandbox.h: UDP for
glibc's stub resolver and NETLINK_ROUTE stay, every other socket (TCP, AF_UNIX, raw, ...)
fails. The unit test (unit.test_pacsandbox) proves the refusals; this test proves that a
PAC using dnsResolve()/isInNet()/isResolvable()/myIpAddress() still gets real DNS answers
under that filter. The helper is started as root in the lab's host namespace, in a private
mount namespace whose /etc/resolv.conf names the lab's DNS server (nothing outside the
lab is queried), and asked over its line protocol (common/routeproto.h).

Expectations: a name resolving into 198.51.100.0/24 gets the "inside" proxy, one resolving
into 203.0.113.0/24 the "other" proxy, an NXDOMAIN name the "unresolved" answer; the lab DNS
server logged those queries (so the answers came from DNS over UDP, not a cache or a
file); myIpAddress() answers an IPv4 literal; the helper runs as uid 65534 with
NoNewPrivs 1 and Seccomp 2. Where libproxy's own configuration would run WPAD or fetch a PAC
itself (wpad://, WPAD://, pac+http://...: libproxy fails open to direct:// when that fails),
the helper answers "ERR wpad" instead; a manual proxy setting (the twin) is answered as
before."""

import os
import re
import select
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools.egressd import binary  # noqa: E402

PAC = r"""
function FindProxyForURL(url, host) {
  if (host == "me.lab.test")
    return "PROXY " + myIpAddress() + ":1";
  if (!isResolvable(host))
    return "PROXY unresolved.lab.test:1";
  var a = dnsResolve(host);
  if (isInNet(a, "198.51.100.0", "255.255.255.0"))
    return "PROXY inside.lab.test:3128";
  return "PROXY other.lab.test:3128";
}
/* egressd-pac-wrapper v1 */
"""

ZONE = {
    "in.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "out.lab.test": {"A": [lab.ORIGIN2]},
    "nx.lab.test": {"rcode": "NXDOMAIN"},
}


class Helper:
    def __init__(self, L, proxy=None):
        d = L.workdir
        self.pac = os.path.join(d, "confine.pac")
        with open(self.pac, "w") as f:
            f.write(PAC)
        os.chmod(self.pac, 0o644)
        resolv = os.path.join(d, "resolv-confine.conf")
        with open(resolv, "w") as f:
            f.write("nameserver %s\noptions timeout:1 attempts:2\n" % lab.DNS_SERVER)
        os.chmod(resolv, 0o644)
        os.chmod(d, 0o755)
        script = ("mount --make-rprivate / && mount --bind %s /etc/resolv.conf && exec %s"
                  % (resolv, binary("egressd-route-helper")))
        env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
               "http_proxy": proxy or "pac+file://" + self.pac}
        if proxy is not None:
            env["https_proxy"] = proxy
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", L.ns_host, "unshare", "-m", "sh", "-c", script],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.n = 0
        self.buf = b""

    def ask(self, host, timeout=10.0):
        self.n += 1
        self.proc.stdin.write(("%d https://%s:443/\n" % (self.n, host)).encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no answer for %s within %ss" % (host, timeout))
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise AssertionError("helper exited: %s" % self.stderr())
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        words = line.decode().split()
        assert words and words[0] == str(self.n), "reply id: %r" % line
        return words[1:]

    def helper_pid(self):
        """The helper process (the exec'd sh under ip netns exec / unshare)."""
        pid = self.proc.pid
        for _ in range(4):
            try:
                with open("/proc/%d/comm" % pid) as f:
                    comm = f.read().strip()
            except OSError:
                return None
            if comm.startswith("egressd-route"):
                return pid
            try:
                kids = open("/proc/%d/task/%d/children" % (pid, pid)).read().split()
            except OSError:
                return None
            if not kids:
                return None
            pid = int(kids[0])
        return None

    def stderr(self):
        try:
            self.proc.kill()
            return self.proc.communicate(timeout=5)[1].decode("utf-8", "replace")[-2000:]
        except Exception as e:  # noqa: BLE001
            return str(e)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def status_fields(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def main():
    lab.require_root()
    res = Results()
    with Lab(workers=1, zone=ZONE) as L:
        h = Helper(L)
        try:
            def dns_inside():
                L.zone.clear_log()
                ans = h.ask("in.lab.test")
                lab.check(ans == ["OK", "http://inside.lab.test:3128"], "answer %r" % ans)
                lab.check(len(L.zone.query_log("in.lab.test")) > 0,
                          "the lab DNS saw no query for in.lab.test")

            def dns_other():
                ans = h.ask("out.lab.test")
                lab.check(ans == ["OK", "http://other.lab.test:3128"], "answer %r" % ans)
                lab.check(len(L.zone.query_log("out.lab.test")) > 0,
                          "the lab DNS saw no query for out.lab.test")

            def dns_nxdomain():
                ans = h.ask("nx.lab.test")
                lab.check(ans == ["OK", "http://unresolved.lab.test:1"], "answer %r" % ans)

            def my_ip():
                ans = h.ask("me.lab.test")
                lab.check(len(ans) == 2 and ans[0] == "OK" and
                          re.fullmatch(r"http://\d+\.\d+\.\d+\.\d+:1", ans[1]) is not None,
                          "myIpAddress answer %r" % ans)

            def confined():
                pid = h.helper_pid()
                lab.check(pid is not None, "helper process not found")
                st = status_fields(pid)
                lab.check(st["Uid"].split()[:3] == ["65534"] * 3, "Uid %s" % st["Uid"])
                lab.check(st["NoNewPrivs"] == "1", "NoNewPrivs %s" % st["NoNewPrivs"])
                lab.check(st["Seccomp"] == "2", "Seccomp %s" % st["Seccomp"])

            res.run("dns_inside", dns_inside)
            res.run("dns_other", dns_other)
            res.run("dns_nxdomain", dns_nxdomain)
            res.run("my_ip", my_ip)
            res.run("confined", confined)
        finally:
            h.close()

        def libproxy_discovery(proxy):
            """libproxy configured (here through the helper's own environment, as a
            desktop setting would) to run WPAD or fetch a PAC itself: the helper answers
            "ERR wpad", never libproxy's fail-open direct://."""
            def t():
                h2 = Helper(L, proxy)
                try:
                    ans = h2.ask("in.lab.test", timeout=20)
                    lab.check(ans == ["ERR", "wpad"], "answer %r" % ans)
                finally:
                    h2.close()
            return t

        def libproxy_manual_twin():
            """Negative twin: a manual proxy setting is answered as before."""
            h3 = Helper(L, "http://inside.lab.test:3128")
            try:
                ans = h3.ask("in.lab.test")
                lab.check(ans == ["OK", "http://inside.lab.test:3128"], "answer %r" % ans)
            finally:
                h3.close()

        res.run("libproxy_own_wpad_refused", libproxy_discovery("wpad://"))
        res.run("libproxy_own_wpad_any_case_refused", libproxy_discovery("WPAD://"))
        res.run("libproxy_own_pac_url_refused",
                libproxy_discovery("pac+http://%s:1/proxy.pac" % lab.HTTP_ORIGIN))
        res.run("libproxy_manual_proxy_twin", libproxy_manual_twin)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
