#!/usr/bin/env python3
"""Static grants keep their id, their revocation and their lifetime across reloads and
restarts (docs/egressd.md "Static grants across reloads and restarts"):
- the id of a static grant is its content: unchanged file, same id after SIGHUP and after
  a restart; a changed grant gets a new id;
- `grant.revoke` of a static grant holds through SIGHUP and a restart (its listener stays
  closed), is listed in `revoked_static`, and ends only when the operator changes that
  grant in the file or clears it with `grant.unrevoke` (effective at the next reload);
- an expired static `lifetime` does not start again on reload or restart: it counts from
  the first issue of the unchanged grant.
Negative twins: the revoked/expired grant is refused at every step until the operator acts,
and the unrelated grant keeps working throughout."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxyclient  # noqa: E402
from labtools.egressd import binary  # noqa: E402
from labtools.checks import (stop_clean, allowed_tunnel, bounded_wait, check,  # noqa: E402
                             require_binaries)

ZONE = {"first.lab.test": {"A": [lab.HTTP_ORIGIN]},
        "second.lab.test": {"A": [lab.ORIGIN2]}}
SVC_PORT, SHORT_PORT, KEEP_PORT, BUDGET_PORT = 3141, 3142, 3143, 3144


def _connect(L, port, target="first.lab.test:443"):
    """The CONNECT status through the static listener on port, or None when nothing
    listens there (connection refused)."""
    try:
        r = proxyclient.connect_request(L.connector("host"), ("127.0.0.1", port), target,
                                        timeout=5)
    except ConnectionRefusedError:
        return None
    r.close()
    return r.status


def _reload(d, timeout=5.0):
    n = len(d.stderr_text())
    d.reload()
    check(bounded_wait(lambda: "in service" in d.stderr_text()[n:] or
                       "reload failed" in d.stderr_text()[n:], timeout),
          "reload not logged: %r" % d.stderr_text()[n:])
    check("reload failed" not in d.stderr_text()[n:], d.stderr_text()[n:])


def _restart(d):
    check(d.stop() == 0, "egressd did not exit cleanly:\n%s" % d.stderr_tail())
    d.start()


def _static_ids(d):
    r = d.control({"op": "grant.list"})
    check(r.get("ok"), r)
    return ({g["principal"]: g["grant_id"] for g in r["grants"] if not g["dynamic"]},
            {g["grant_id"]: g for g in r.get("revoked_static", [])})


def t_ids_stable(L, d, st):
    ids, _ = _static_ids(d)
    check(set(ids) == {"svc", "short", "keep", "budget"}, ids)
    st["svc"] = ids["svc"]
    _reload(d)
    check(_static_ids(d)[0] == ids, "ids changed on reload: %r -> %r" % (ids, _static_ids(d)))
    _restart(d)
    check(_static_ids(d)[0] == ids, "ids changed on restart")
    check(_connect(L, SVC_PORT) == 200, "svc before revoke")


def t_revoke_holds(L, d, st):
    r = d.grant_revoke(st["svc"])
    check(r.get("ok"), r)
    check(bounded_wait(lambda: _connect(L, SVC_PORT) is None, 2), "revoke did not close")
    _reload(d)
    check(_connect(L, SVC_PORT) is None, "SIGHUP reinstated a revoked static grant")
    ids, revoked = _static_ids(d)
    check("svc" not in ids and st["svc"] in revoked, "list: %r %r" % (ids, revoked))
    check("stays revoked" in d.stderr_text(), "no log line for the held revocation")
    _restart(d)
    check(_connect(L, SVC_PORT) is None, "a restart reinstated a revoked static grant")
    check(_connect(L, KEEP_PORT) == 200, "the unrelated grant broke")


def _egressctl(d, *args):
    return subprocess.run([binary("egressctl"), "-s", d.control_path] + list(args),
                          capture_output=True, text=True, timeout=20)


def t_unrevoke(L, d, st):
    r = d.control({"op": "grant.unrevoke", "grant_id": "0" * 32})
    check(r.get("error") == "unknown_grant", r)
    cp = _egressctl(d, "grant", "list")
    check(cp.returncode == 0 and st["svc"] in cp.stdout and "revoked static grant" in
          cp.stdout, "egressctl grant list: %r %r" % (cp.stdout, cp.stderr))
    cp = _egressctl(d, "grant", "unrevoke", st["svc"])
    check(cp.returncode == 0 and "next reload" in cp.stdout,
          "egressctl grant unrevoke: %s %r %r" % (cp.returncode, cp.stdout, cp.stderr))
    check(_connect(L, SVC_PORT) is None, "unrevoke must wait for the reload")
    _reload(d)
    check(_connect(L, SVC_PORT) == 200, "unrevoked grant not back after reload")
    check(_static_ids(d)[0]["svc"] == st["svc"], "id changed")


def t_changed_grant_is_new(L, d, st):
    check(d.grant_revoke(st["svc"]).get("ok"), "revoke")
    _reload(d)
    check(_connect(L, SVC_PORT) is None, "revoked")
    d.grants["svc"]["allow"] = ["https://first.lab.test", "https://second.lab.test"]
    d.write_config()
    _reload(d)
    check(_connect(L, SVC_PORT) == 200, "changed grant not in service")
    check(_connect(L, SVC_PORT, "second.lab.test:443") == 200, "new entry not in force")
    new = _static_ids(d)[0]["svc"]
    check(new != st["svc"], "a changed grant kept its id")


def t_lifetime_holds(L, d, st):
    # "short" has lifetime 3s, first issued when this egressd first started.
    check(bounded_wait(lambda: _connect(L, SHORT_PORT) is None, 8, step=0.2),
          "short grant never expired")
    _reload(d)
    check(_connect(L, SHORT_PORT) is None, "SIGHUP restarted an expired lifetime")
    check("expired at" in d.stderr_text(), "no log line for the expired static grant")
    _restart(d)
    check(_connect(L, SHORT_PORT) is None, "a restart restarted an expired lifetime")
    d.grants["short"]["lifetime"] = "1h"
    d.write_config()
    _reload(d)
    check(_connect(L, SHORT_PORT) == 200, "a changed grant gets a fresh lifetime")
    check(_connect(L, KEEP_PORT) == 200, "the unrelated grant broke")


def t_unchanged_grant_keeps_budget(L, d, st):
    """An unchanged static grant stays the same grant across a reload: its byte budget
    (and live tunnels) go on; before, a reload gave it a fresh budget."""
    t = proxyclient.connect_request(L.connector("host"), ("127.0.0.1", BUDGET_PORT),
                                    "first.lab.test:443", timeout=5)
    allowed_tunnel(t)
    try:
        g = proxyclient.tunnel_http_get(t.sock, "first.lab.test", "/bytes/300000", timeout=10)
        check(g.status is None or len(g.body) < 300000, "budget not enforced in the tunnel")
    finally:
        t.close()
    check(bounded_wait(lambda: _connect(L, BUDGET_PORT) == 403, 3), "budget not used up")
    _reload(d)
    check(_connect(L, BUDGET_PORT) == 403, "a reload gave the unchanged grant a fresh budget")
    # a live tunnel of an unchanged grant is not touched by a reload either
    t = proxyclient.connect_request(L.connector("host"), ("127.0.0.1", KEEP_PORT),
                                    "first.lab.test:443", timeout=5)
    allowed_tunnel(t)
    try:
        _reload(d)
        r = proxyclient.tunnel_http_get(t.sock, "first.lab.test", "/", timeout=5)
        check(r.status == 200, "tunnel after reload: %r" % r)
    finally:
        t.close()
    ids, _ = _static_ids(d)
    lst = {g["principal"]: g for g in d.control({"op": "grant.list"})["grants"]}
    check(lst["budget"]["bytes"] >= 100000, "budget counter lost: %s" % lst["budget"])


def t_state_file(L, d, st):
    p = d.conf_path + ".state"
    s = os.stat(p)
    check(s.st_uid == os.geteuid() and s.st_mode & 0o777 == 0o600,
          "state file owner/mode: %d %o" % (s.st_uid, s.st_mode & 0o777))
    # egressd refuses to start on a state file others may write (it could drop revocations)
    os.chmod(p, 0o666)
    check(d.stop() == 0, "stop")
    rc, _, err = d.check_config()
    check(rc == 1 and "state_file" in err, "-t accepted a writable state file: %r" % err)
    try:
        d.start()
        started = True
    except Exception:
        started = False
    check(not started, "egressd started with a group/world-writable state file")
    os.chmod(p, 0o600)
    d.start()


def main():
    lab.require_root()
    require_binaries("egressd", "egressctl")
    res = Results()
    with Lab() as L:
        L.set_zone(ZONE)
        d = L.egressd(
            listeners={"svc": {"listen": "127.0.0.1:%d" % SVC_PORT, "grant": "svc"},
                       "short": {"listen": "127.0.0.1:%d" % SHORT_PORT, "grant": "short"},
                       "keep": {"listen": "127.0.0.1:%d" % KEEP_PORT, "grant": "keep"},
                       "budget": {"listen": "127.0.0.1:%d" % BUDGET_PORT,
                                  "grant": "budget"}},
            grants={"svc": {"allow": ["https://first.lab.test"]},
                    "short": {"allow": ["https://first.lab.test"], "lifetime": "3s"},
                    "keep": {"allow": ["https://first.lab.test"]},
                    "budget": {"allow": ["https://first.lab.test"], "bytes": "100000"}})
        st = {"t0": time.monotonic()}
        for name, fn in (("static_ids_stable", t_ids_stable),
                         ("revoke_holds_across_reload_and_restart", t_revoke_holds),
                         ("unrevoke_then_reload", t_unrevoke),
                         ("changed_grant_is_a_new_grant", t_changed_grant_is_new),
                         ("expired_lifetime_holds", t_lifetime_holds),
                         ("unchanged_grant_keeps_budget", t_unchanged_grant_keeps_budget),
                         ("state_file_checked", t_state_file)):
            res.run(name, fn, L, d, st)
        res.run("egressd_clean_exit", stop_clean, d)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
