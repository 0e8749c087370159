#!/usr/bin/env python3
"""Two principals at the same time (two worker namespaces, two listeners, two grants) never
use each other's authority; revocation closes the listener and every live tunnel of that
grant within about a second and leaves the other principal alone; the control socket
refuses malformed requests without changing anything; a lifetime expires on its own."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxyclient  # noqa: E402
from labtools.checks import stop_clean, allowed_tunnel, check, refused, require_binaries  # noqa: E402

ZONE = {
    "one.lab.test": {"A": [lab.ECHO_ORIGIN]},
    "two.lab.test": {"A": [lab.ECHO2]},
    "web1.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "web2.lab.test": {"A": [lab.ORIGIN2]},
}
G1 = ["tcp://one.lab.test:7", "http://web1.lab.test"]
G2 = ["tcp://two.lab.test:7", "http://web2.lab.test"]


def _echo_ok(sock, tag):
    data = ("%s-%f" % (tag, time.time())).encode()
    check(proxyclient.tunnel_echo(sock, data) == data, "echo through %s" % tag)


def t_concurrent_no_bleed(L, d, st):
    t1 = L.connect(0, "one.lab.test:7")
    t2 = L.connect(1, "two.lab.test:7")
    try:
        allowed_tunnel(t1)
        allowed_tunnel(t2)
        # While both tunnels are live, each principal tries the other's destinations.
        with L.no_origin_connection():
            refused(L.connect(0, "two.lab.test:7"), 403, "not_granted")
            refused(L.connect(1, "one.lab.test:7"), 403, "not_granted")
            refused(L.http(0, "GET", "http://web2.lab.test/"), 403, "not_granted")
            refused(L.http(1, "GET", "http://web1.lab.test/"), 403, "not_granted")
            # A header claiming another principal changes nothing.
            refused(L.connect(0, "two.lab.test:7", headers=[
                ("X-Egress-Principal", st["g2"]["grant_id"]),
                ("Proxy-Authorization", "Basic dzI6dzI=")]), 403, "not_granted")
        h1 = L.http(0, "GET", "http://web1.lab.test/")
        h2 = L.http(1, "GET", "http://web2.lab.test/")
        check(h1.status == 200 and h1.header("X-Origin") == "http80", "%r" % h1)
        check(h2.status == 200 and h2.header("X-Origin") == "http2", "%r" % h2)
        _echo_ok(t1.sock, "w1")
        _echo_ok(t2.sock, "w2")
    finally:
        t1.close()
        t2.close()
    # The decision records name the right principal.
    recs = [r for r in d.decisions() if r.get("event") == "decision"]
    for r in recs:
        txt = str(r)
        if "two.lab.test" in txt and r.get("verdict") == "allow":
            check(r.get("principal") == st["p2"], "allow of two.lab.test for %s" % r)
        if "one.lab.test" in txt and r.get("verdict") == "allow":
            check(r.get("principal") == st["p1"], "allow of one.lab.test for %s" % r)


def t_grant_list(L, d, st):
    r = d.control({"op": "grant.list"})
    check(r.get("ok"), "grant.list: %s" % r)
    ids = {g.get("grant_id"): g for g in r.get("grants", [])}
    for key in ("g1", "g2"):
        gid = st[key]["grant_id"]
        check(gid in ids, "grant %s missing from list" % gid)
        check(len(gid) >= 32 and all(c in "0123456789abcdef" for c in gid.lower()),
              "grant id %r is not >= 128 bits of hex" % gid)
    check(st["g1"]["grant_id"] != st["g2"]["grant_id"], "equal grant ids")


def t_port_zero_and_list_fields(L, d, st):
    w = L.workers[1]
    rep = d.grant_create("anyport", ["tcp://two.lab.test:7"], w.host_addr + ":0", w.host_if,
                         lifetime_s=60)
    host, _, port = rep.get("listen", "").rpartition(":")
    check(host == w.host_addr and port.isdigit() and int(port) > 0, "listen %s" % rep)
    r = L.connect(1, "two.lab.test:7", proxy=(w.host_addr, int(port)))
    allowed_tunnel(r)
    r.close()
    lst = d.control({"op": "grant.list"})
    g = [x for x in lst["grants"] if x.get("grant_id") == rep["grant_id"]]
    check(len(g) == 1, "listed once: %s" % lst)
    for k in ("principal", "listen", "interface", "created", "expires", "connections",
              "bytes", "grant"):
        check(k in g[0], "grant.list entry lacks %s: %s" % (k, g[0]))
    check(g[0]["principal"] == "anyport" and g[0]["interface"] == w.host_if and
          g[0]["listen"] == rep["listen"], "entry %s" % g[0])
    check(g[0]["grant"].get("allow") == ["tcp://two.lab.test:7"], "grant %s" % g[0]["grant"])
    d.grant_revoke(rep["grant_id"])


def t_control_refusals(L, d, st):
    n = len(d.control({"op": "grant.list"})["grants"])
    cases = [
        (b"this is not json\n", "malformed"),
        (b"[1,2,3]\n", "malformed"),
        (b'{"op": "no.such.op"}\n', "unknown_op"),
        (b'{"op": "status", "bogus": 1}\n', "unknown_key"),
        (b'{"op": "grant.revoke", "grant_id": "00000000000000000000000000000000"}\n',
         "unknown_grant"),
    ]
    import json
    for raw, code in cases:
        rep = d.control_raw(raw)
        try:
            obj = json.loads(rep.split(b"\n")[0])
        except ValueError:
            raise AssertionError("reply to %r is not JSON: %r" % (raw, rep))
        check(obj.get("ok") is False and obj.get("error") == code,
              "reply to %r: %s (want %s)" % (raw, obj, code))
    w = L.workers[1]
    bad = [
        {"principal": "bad label!", "allow": ["https://x.lab.test"],
         "limits": {"lifetime_s": 60}},
        {"principal": "p", "allow": ["https://*.test"], "limits": {"lifetime_s": 60}},
        {"principal": "p", "allow": ["ftp://x.lab.test"], "limits": {"lifetime_s": 60}},
        {"principal": "p", "allow": ["https://x.lab.test"], "nonsense": 1,
         "limits": {"lifetime_s": 60}},
        {"principal": "p", "allow": ["https://x.lab.test"]},    # dynamic without lifetime
    ]
    for g in bad:
        rep = d.control({"op": "grant.create", "grant": g, "listen": w.listen(3199),
                         "interface": w.host_if})
        check(rep.get("ok") is False and rep.get("error") in ("invalid_grant", "unknown_key"),
              "bad grant accepted: %s -> %s" % (g, rep))
    ok_grant = {"principal": "p", "allow": ["https://x.lab.test"], "limits": {"lifetime_s": 60}}
    for listen, ifname in ((w.listen(3199), "nosuchif0"), ("169.254.99.1:3199", w.host_if),
                           ("198.51.100.10:3199", w.host_if)):
        rep = d.control({"op": "grant.create", "grant": ok_grant, "listen": listen,
                         "interface": ifname})
        check(rep.get("ok") is False and rep.get("error") in ("bind_failed", "invalid_grant"),
              "listener %s on %s: %s" % (listen, ifname, rep))
    rep = d.control_raw(b'{"op": "status", "pad": "' + b"x" * 70000 + b'"}\n')
    check(b'"malformed"' in rep, "70 KB line: %r" % rep[:200])
    check(d.control({"op": "status"}).get("ok"), "control socket dead after a long line")
    check(len(d.control({"op": "grant.list"})["grants"]) == n, "refusals changed grants")


def t_control_uid_checked(L, d, st):
    """The control socket is 0600, and even when its mode is loosened a non-root peer is
    refused by SO_PEERCRED (error unauthorized) and changes nothing."""
    import json
    import stat
    import subprocess
    mode = stat.S_IMODE(os.stat(d.control_path).st_mode)
    check(mode & 0o077 == 0, "control socket mode %o" % mode)
    n = len(d.control({"op": "grant.list"})["grants"])
    dirs = [os.path.dirname(d.control_path), L.workdir]
    old = [stat.S_IMODE(os.stat(x).st_mode) for x in dirs]
    os.chmod(d.control_path, 0o666)
    for x in dirs:
        os.chmod(x, 0o711)
    try:
        w = L.workers[1]
        req = {"op": "grant.create", "grant": {"principal": "nobody",
               "allow": ["tcp://one.lab.test:7"], "limits": {"lifetime_s": 60}},
               "listen": w.listen(3198), "interface": w.host_if}
        code = ("import socket,sys;s=socket.socket(socket.AF_UNIX);s.settimeout(5);"
                "s.connect(sys.argv[1]);s.sendall(sys.argv[2].encode()+b'\\n');"
                "print(s.recv(65536).decode())")
        cp = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534",
                             "--clear-groups", "/usr/bin/python3", "-c", code,
                             d.control_path, json.dumps(req)],
                            capture_output=True, text=True, timeout=20)
        out = cp.stdout.strip()
        check(out, "no reply to a non-root peer: %s" % cp.stderr)
        rep = json.loads(out.splitlines()[0])
        check(rep.get("ok") is False and rep.get("error") == "unauthorized",
              "non-root peer: %s" % rep)
    finally:
        os.chmod(d.control_path, 0o600)
        for x, m in zip(dirs, old):
            os.chmod(x, m)
    check(len(d.control({"op": "grant.list"})["grants"]) == n, "non-root peer changed grants")


def t_listener_bound_to_device(L, d, st):
    """A listener is bound to its worker's veth: a client that reaches the listener's
    address through another interface (here: inet, given a route to the worker link via
    the host) is not served, although the address is local to the host namespace."""
    from labtools import netns
    w0 = L.workers[0]
    netns.ip("-n", L.ns_inet, "route", "replace", w0.host_addr + "/32", "via", lab.HOST_LINK)
    plain = netns.listen_in(L.ns_host, w0.host_addr, 3997)   # not bound to a device
    try:
        # The path works: a listener without a device binding is reachable from inet.
        L.connect_from("inet", w0.host_addr, 3997, timeout=2).close()
        try:
            s = L.connect_from("inet", w0.host_addr, lab.PROXY_PORT, timeout=2)
        except ConnectionRefusedError:
            return  # RST: the socket is bound to the worker's device
        try:
            s.sendall(b"CONNECT one.lab.test:7 HTTP/1.1\r\n\r\n")
            s.settimeout(3)
            data = s.recv(4096)
        except OSError:
            data = b""
        finally:
            s.close()
        check(not data.startswith(b"HTTP/1.1 200"), "served from the wrong interface: %r"
              % data[:100])
        raise AssertionError("listener accepted a connection from another interface")
    finally:
        plain.close()
        netns.ip("-n", L.ns_inet, "route", "del", w0.host_addr + "/32", check=False)


def t_revoke_closes_tunnels(L, d, st):
    t1 = L.connect(0, "one.lab.test:7")
    t1b = L.connect(0, "one.lab.test:7")
    t2 = L.connect(1, "two.lab.test:7")
    try:
        for t in (t1, t1b, t2):
            allowed_tunnel(t)
        _echo_ok(t1.sock, "w1")
        start = len(d.decisions())
        t0 = time.monotonic()
        rep = d.grant_revoke(st["g1"]["grant_id"])
        check(rep.get("ok"), "revoke: %s" % rep)
        for t in (t1, t1b):
            w = proxyclient.wait_closed(t.sock, 3.0)
            check(w is not None, "tunnel still open 3s after revoke")
        el = time.monotonic() - t0
        check(el <= 1.5, "revocation took %.2fs (want ~1s)" % el)
        # The other principal is untouched.
        _echo_ok(t2.sock, "w2")
        h2 = L.http(1, "GET", "http://web2.lab.test/")
        check(h2.status == 200, "w2 after w1 revoke: %r" % h2)
        # w1's listener is gone.
        r = L.connect(0, "one.lab.test:7", timeout=3)
        check(r.status is None or (r.status == 403 and r.egress_reason in
                                   ("grant_revoked", "no_grant")),
              "w1 still served after revoke: %r" % r)
        r.close()
        rec = d.wait_record(lambda x: x.get("event") == "close" and
                            "revoked" in str(x.get("reason", x.get("close_reason"))),
                            start=start, timeout=3)
        check(rec is not None, "no close record with reason revoked")
        lst = d.control({"op": "grant.list"})
        check(st["g1"]["grant_id"] not in str(lst), "revoked grant still listed")
        rep = d.grant_revoke(st["g1"]["grant_id"])
        check(rep.get("ok") is False and rep.get("error") == "unknown_grant",
              "second revoke: %s" % rep)
    finally:
        for t in (t1, t1b, t2):
            t.close()


def t_lifetime_expiry(L, d, st):
    # Re-grant worker 1 with a 2 s lifetime: it works, then expires on its own.
    g = L.grant(d, 0, G1, lifetime_s=2, principal="short-lived")
    t0 = time.monotonic()
    r = L.connect(0, "one.lab.test:7")
    allowed_tunnel(r)
    try:
        _echo_ok(r.sock, "short")
        # Expiry ends the grant's authority, live tunnels included.
        w = proxyclient.wait_closed(r.sock, 4.0)
        check(w is not None and time.monotonic() - t0 <= 3.5,
              "tunnel of an expired grant still open")
    finally:
        r.close()
    time.sleep(0.3)
    with L.no_origin_connection():
        r = L.connect(0, "one.lab.test:7", timeout=3)
        check(r.status is None or (r.status == 403 and r.egress_reason in
                                   ("grant_expired", "no_grant")),
              "expired grant still served: %r" % r)
        r.close()
    check(g["grant_id"] not in str(d.control({"op": "grant.list"})), "expired grant listed")


def t_same_listen_twice(L, d, st):
    # A second grant on worker 2's address and port cannot steal its listener.
    w = L.workers[1]
    rep = d.control({"op": "grant.create", "grant": {
        "principal": "thief", "allow": ["tcp://one.lab.test:7"],
        "limits": {"lifetime_s": 60}}, "listen": w.listen(), "interface": w.host_if})
    check(rep.get("ok") is False, "second grant on the same listener: %s" % rep)
    refused(L.connect(1, "one.lab.test:7"), 403, "not_granted")


def main():
    lab.require_root()
    require_binaries("egressd")
    res = Results()
    with Lab() as L:
        L.set_zone(ZONE)
        d = L.egressd()
        st = {"p1": "alpha", "p2": "bravo"}
        st["g1"] = L.grant(d, 0, G1, principal="alpha")
        st["g2"] = L.grant(d, 1, G2, principal="bravo")
        for name, fn in (("concurrent_principals_no_bleed", t_concurrent_no_bleed),
                         ("grant_list_and_ids", t_grant_list),
                         ("port_zero_and_list_fields", t_port_zero_and_list_fields),
                         ("control_refusals_change_nothing", t_control_refusals),
                         ("same_listener_cannot_be_taken", t_same_listen_twice),
                         ("control_peer_uid_checked", t_control_uid_checked),
                         ("listener_bound_to_device", t_listener_bound_to_device),
                         ("revoke_closes_live_tunnels", t_revoke_closes_tunnels),
                         ("lifetime_expiry", t_lifetime_expiry)):
            res.run(name, fn, L, d, st)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
