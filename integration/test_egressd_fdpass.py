#!/usr/bin/env python3
"""grant.create with a passed listener (listen_fd, SCM_RIGHTS), docs/control.md.

egress-exec makes a run's listener in the run's own link namespace and passes it to
egressd, which then binds nothing itself. Expectations: a listening TCP socket passed with
{"listen_fd": true} becomes the grant's listener (the reply names its address; an allowed
CONNECT through it succeeds with a decision record, a not-granted one is 403, and revoking
the grant closes it); refused, with egressd still serving: the flag without an fd
(malformed), an fd with an ordinary grant.create (the fd is closed, the request served as
before), a UDP socket, a socket that is not listening, a listener bound to 0.0.0.0
or to ::ffff:0.0.0.0, or not bound to the device named (bad_listener), "listen" and
"listen_fd" together (malformed); an fd sent with a request that does not take it is not
kept for the next one, and a request never takes the fd of the request after it."""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import netns  # noqa: E402
from labtools.checks import allowed_tunnel, check, refused, wait_decision  # noqa: E402

GRANT = {"principal": "fdpass", "allow": ["https://origin.lab.test"], "allow_address": [],
         "pinning": "preferred", "credential_origin": [], "limits": {"lifetime_s": 600}}


def control_fd(d, req, fds=(), timeout=5.0):
    """One request line with fds attached to its first bytes; the decoded reply."""
    import json
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(d.control_path)
        data = json.dumps(req).encode() + b"\n"
        if fds:
            socket.send_fds(s, [data], list(fds))
        else:
            s.sendall(data)
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in buf and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return json.loads(buf.split(b"\n")[0])
    finally:
        s.close()


def listener(L, port, addr=None):
    w = L.workers[0]
    s = netns.socket_in(L.ns_host)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, w.host_if.encode())
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr or w.host_addr, port))
    s.listen(16)
    return s


def t_adopted(L, d):
    s = listener(L, 3131)
    try:
        r = control_fd(d, {"op": "grant.create", "grant": GRANT, "listen_fd": True,
                           "interface": L.workers[0].host_if}, [s.fileno()])
    finally:
        s.close()          # egressd holds its own copy
    check(r.get("ok") and r.get("listen") == "%s:3131" % L.workers[0].host_addr, r)
    proxy = (L.workers[0].host_addr, 3131)
    start = len(d.decisions())
    c = L.connect(0, "origin.lab.test:443", proxy=proxy)
    allowed_tunnel(c)
    c.close()
    rec = wait_decision(d, lambda x: x.get("dest") == "origin.lab.test:443",
                        start=start)
    check(rec.get("principal") == "fdpass" and rec.get("verdict") == "allow", rec)
    refused(L.connect(0, "origin2.lab.test:443", proxy=proxy), 403, "not_granted")
    check(d.grant_revoke(r["grant_id"]).get("ok"), "revoke")
    deadline = time.monotonic() + 3
    closed = False
    while time.monotonic() < deadline and not closed:
        try:
            L.connect_from(0, proxy[0], proxy[1], timeout=1).close()
            time.sleep(0.1)
        except OSError:
            closed = True
    check(closed, "the adopted listener still accepts after grant.revoke")


def t_refusals(L, d):
    base = {"op": "grant.create", "grant": GRANT, "interface": L.workers[0].host_if}
    r = control_fd(d, dict(base, listen_fd=True))
    check(not r.get("ok") and r.get("error") == "malformed" and "file descriptor" in
          r.get("message", ""), r)
    r = control_fd(d, dict(base, listen_fd=False))
    check(not r.get("ok") and r.get("error") == "malformed", r)
    s = listener(L, 3132)
    try:
        r = control_fd(d, dict(base, listen_fd=True, listen="%s:3132" %
                               L.workers[0].host_addr), [s.fileno()])
        check(not r.get("ok") and r.get("error") == "malformed", r)
    finally:
        s.close()
    u = netns.socket_in(L.ns_host, type=socket.SOCK_DGRAM)
    try:
        u.bind((L.workers[0].host_addr, 3133))
        r = control_fd(d, dict(base, listen_fd=True), [u.fileno()])
        check(not r.get("ok") and r.get("error") == "bad_listener", r)
    finally:
        u.close()
    t = netns.socket_in(L.ns_host)
    try:
        t.bind((L.workers[0].host_addr, 3134))     # bound, not listening
        r = control_fd(d, dict(base, listen_fd=True), [t.fileno()])
        check(not r.get("ok") and r.get("error") == "bad_listener" and "listening" in
              r.get("message", ""), r)
    finally:
        t.close()
    w = netns.socket_in(L.ns_host)
    try:
        w.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        w.bind(("0.0.0.0", 3135))
        w.listen(4)
        r = control_fd(d, dict(base, listen_fd=True), [w.fileno()])
        check(not r.get("ok") and r.get("error") == "bad_listener" and "wildcard" in
              r.get("message", ""), r)
    finally:
        w.close()
    m = None
    try:
        m = netns.socket_in(L.ns_host, socket.AF_INET6)
        m.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        m.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        m.bind(("::ffff:0.0.0.0", 3139))
        m.listen(4)
    except OSError:
        if m is not None:
            m.close()
        m = None                 # no IPv6 in this namespace: nothing to check
    if m is not None:
        try:
            r = control_fd(d, dict(base, listen_fd=True), [m.fileno()])
            check(not r.get("ok") and r.get("error") == "bad_listener" and "wildcard" in
                  r.get("message", ""), "v4-mapped wildcard: %r" % r)
        finally:
            m.close()
    n = netns.socket_in(L.ns_host)
    try:                      # a listener on the address but not bound to the device named
        n.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        n.bind((L.workers[0].host_addr, 3140))
        n.listen(4)
        r = control_fd(d, dict(base, listen_fd=True), [n.fileno()])
        check(not r.get("ok") and r.get("error") == "bad_listener" and "device" in
              r.get("message", ""), r)
    finally:
        n.close()
    check(d.status().get("ok"), "egressd stopped serving")
    check(len([g for g in d.control({"op": "grant.list"})["grants"]
               if g.get("principal") == "fdpass"]) == 0, "a refused grant.create left a grant")


def t_unused_fd_not_kept(L, d):
    """An fd that comes with a status request is closed, not kept for a later listen_fd
    request, and an ordinary grant.create with an fd attached binds its own address."""
    s = listener(L, 3136)
    try:
        r = control_fd(d, {"op": "status"}, [s.fileno()])
        check(r.get("ok"), r)
    finally:
        s.close()
    r = control_fd(d, {"op": "grant.create", "grant": GRANT, "listen_fd": True,
                       "interface": L.workers[0].host_if})
    check(not r.get("ok") and r.get("error") == "malformed", r)
    # the closed socket's port is free again: nothing in egressd holds it
    s = listener(L, 3136)
    s.close()
    x = listener(L, 3137)
    try:
        r = control_fd(d, {"op": "grant.create", "grant": GRANT, "interface":
                           L.workers[0].host_if, "listen": "%s:3138" %
                           L.workers[0].host_addr}, [x.fileno()])
        check(r.get("ok") and r.get("listen").endswith(":3138"), r)
        d.grant_revoke(r["grant_id"])
    finally:
        x.close()
    x = listener(L, 3137)      # egressd closed the fd it did not take
    x.close()


def t_fd_belongs_to_its_line(L, d):
    """Two requests on one connection, the second carrying the fd: the first (which asks
    for a passed listener but sent none) must never get the second's fd, even when the
    kernel delivers both in one read."""
    import json
    base = {"op": "grant.create", "grant": GRANT, "listen_fd": True,
            "interface": L.workers[0].host_if}
    for attempt in range(5):
        s = listener(L, 3141)
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            c.settimeout(5)
            c.connect(d.control_path)
            c.sendall(json.dumps(dict(base, id=1)).encode() + b"\n")
            socket.send_fds(c, [json.dumps(dict(base, id=2)).encode() + b"\n"], [s.fileno()])
            buf = b""
            deadline = time.monotonic() + 5
            while buf.count(b"\n") < 2 and time.monotonic() < deadline:
                chunk = c.recv(65536)
                if not chunk:
                    break
                buf += chunk
        finally:
            c.close()
            s.close()
        replies = {r["id"]: r for r in (json.loads(x) for x in buf.split(b"\n") if x)}
        check(not replies[1].get("ok") and "file descriptor" in replies[1].get("message", ""),
              "request 1 took request 2's fd: %r" % replies[1])
        if replies[2].get("ok"):
            d.grant_revoke(replies[2]["grant_id"])


def main():
    lab.require_root()
    res = Results()
    with Lab(workers=1) as L:
        d = L.egressd()
        res.run("adopted", t_adopted, L, d)
        res.run("refusals", t_refusals, L, d)
        res.run("unused_fd_not_kept", t_unused_fd_not_kept, L, d)
        res.run("fd_belongs_to_its_line", t_fd_belongs_to_its_line, L, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
