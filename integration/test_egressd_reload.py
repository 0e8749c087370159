#!/usr/bin/env python3
"""SIGHUP reload is all-or-nothing: a good file replaces the static grants; a broken file
(syntax error, unknown key, invalid grant entry) keeps the running configuration, egressd
stays up and says why with file:line; `egressd -t` reports the same problems; dynamic
grants survive reloads; a live tunnel of a replaced static grant keeps running, and
still ends with its close record when the drain of a stop ends."""

import hashlib
import json
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxyclient  # noqa: E402
from labtools.checks import (stop_clean, allowed_tunnel, bounded_wait, check, refused,  # noqa: E402
                             require_binaries)

ZONE = {
    "first.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "second.lab.test": {"A": [lab.ORIGIN2]},
    "echo.lab.test": {"A": [lab.ECHO_ORIGIN]},
    "dyn.lab.test": {"A": [lab.ECHO2]},
}
STATIC_PORT = 3140
STATIC = ("127.0.0.1", STATIC_PORT)


def _static(L, target):
    return proxyclient.connect_request(L.connector("host"), STATIC, target, timeout=5)


def _wait_applies(L, target, want_status, timeout=5.0):
    def probe():
        r = _static(L, target)
        r.close()
        return r if r.status == want_status else None
    return bounded_wait(probe, timeout, step=0.1)


def _reload_and_wait(d, timeout=5.0):
    """SIGHUP, then wait (bounded) until egressd logged the outcome, so that nothing we
    send afterwards can be in flight while the reload runs."""
    n = len(d.stderr_text())
    d.reload()
    check(bounded_wait(lambda: "in service" in d.stderr_text()[n:] or
                       "reload failed" in d.stderr_text()[n:], timeout),
          "reload not logged: %r" % d.stderr_text()[n:])


def t_initial(L, d, st):
    r = _static(L, "first.lab.test:443")
    allowed_tunnel(r)
    r.close()
    with L.no_origin_connection():
        refused(_static(L, "second.lab.test:443"), 403, "not_granted")


def t_good_reload(L, d, st):
    st["tunnel"] = _static(L, "echo.lab.test:7")   # a live tunnel of the old grant
    allowed_tunnel(st["tunnel"])
    d.grants["svc"]["allow"] = ["https://second.lab.test", "tcp://echo.lab.test:7"]
    d.write_config()
    d.reload()
    check(_wait_applies(L, "second.lab.test:443", 200), "reload did not apply")
    check(d.alive(), "egressd died on a good reload")
    with L.no_origin_connection():
        refused(_static(L, "first.lab.test:443"), 403, "not_granted")
    data = b"still here"
    check(proxyclient.tunnel_echo(st["tunnel"].sock, data) == data,
          "live tunnel broken by reload")


def _broken_texts(d):
    from labtools.egressd import render_ini
    good = render_ini(d.settings, d.listeners, d.grants)
    out = [("syntax", "[egressd\n" + good)]
    out.append(("unknown_key", good.replace("[egressd]\n", "[egressd]\nno_such_key = 1\n")))
    # a key that is not UTF-8: the error quotes its bytes (the failed reload's record keeps
    # them, as U+00FF, t_grant_and_config_events)
    out.append(("unknown_key_bytes", good.replace("[egressd]\n",
                                                  "[egressd]\nno_such_key\udcff = 1\n")))
    g = dict(d.grants)
    g["svc"] = dict(g["svc"], allow=["https://first.lab.test", "https://*.test"])
    out.append(("bad_allow", render_ini(d.settings, d.listeners, g)))
    out.append(("unknown_section", good + "\n[nonsense]\nx = 1\n"))
    out.append(("bad_duration", good.replace("[egressd]\n", "[egressd]\nidle_timeout = 5 parsecs\n")))
    return out


def t_broken_reload_keeps_old(L, d, st):
    for name, text in _broken_texts(d):
        # -t on the broken file names the problem with file:line.
        d.write_config(text)
        rc, out, err = d.check_config()
        check(rc == 1 and (d.conf_path + ":") in err, "%s: -t rc=%s err=%r" % (name, rc, err))
        before_err = len(d.stderr_text())
        d.reload()
        check(bounded_wait(lambda: "reload failed" in d.stderr_text()[before_err:], 5),
              "%s: no 'reload failed' in egressd's log: %r"
              % (name, d.stderr_text()[before_err:]))
        check(d.alive(), "%s: egressd exited on a broken reload" % name)
        # The running configuration is the previous good one.
        r = _static(L, "second.lab.test:443")
        allowed_tunnel(r)
        r.close()
        with L.no_origin_connection():
            refused(_static(L, "first.lab.test:443"), 403, "not_granted")
    d.write_config()  # restore the good file
    rc, out, err = d.check_config()
    check(rc == 0 and out.startswith("%s: ok" % d.conf_path), "good file -t: %r %r"
          % (out, err))


def t_control_reload(L, d, st):
    from labtools.egressd import render_ini
    d.write_config(render_ini(d.settings, d.listeners, d.grants) + "[oops\n")
    rep = d.control({"op": "reload"})
    check(rep.get("ok") is False, "control reload of a broken file: %s" % rep)
    d.write_config()
    rep = d.control({"op": "reload"})
    check(rep.get("ok") is True, "control reload of a good file: %s" % rep)


def t_dynamic_survives(L, d, st):
    r = L.connect(0, "dyn.lab.test:7")
    allowed_tunnel(r)
    r.close()
    d.reload()
    time.sleep(0.5)
    r = L.connect(0, "dyn.lab.test:7")
    allowed_tunnel(r)
    r.close()
    check(st["g"]["grant_id"] in str(d.control({"op": "grant.list"})), "dynamic grant lost")


def t_old_tunnel_survived(L, d, st):
    t = st.get("tunnel")
    check(t is not None and t.sock is not None, "no tunnel from the good-reload step")
    try:
        check(proxyclient.tunnel_echo(t.sock, b"after all reloads") == b"after all reloads",
              "tunnel broken")
    finally:
        t.close()


def t_reload_changes_dns(L, d, st):
    """A reload that changes dns_server takes effect for new lookups; a lookup in flight
    during the reload ends cleanly (answered or refused), and egressd stays up."""
    import threading
    L.add_address("203.0.113.53")
    z2 = L.add_dns_server("203.0.113.53", dict(
        ZONE, **{"dnsmove.lab.test": {"A": [lab.ORIGIN2], "ttl": 0}}))
    L.update_zone({"dnsmove.lab.test": {"A": [lab.HTTP_ORIGIN], "ttl": 0},
                   "inflight.lab.test": {"A": [lab.HTTP_ORIGIN], "delay": 1.0, "ttl": 0}})
    g = L.grant(d, 1, ["https://dnsmove.lab.test", "https://inflight.lab.test"])
    r = L.connect(1, "dnsmove.lab.test:443")
    allowed_tunnel(r)
    g1 = proxyclient.tunnel_http_get(r.sock, "x", "/")
    r.close()
    check(g1.header("X-Origin") == "http443", "before reload: %r" % g1)
    out = []
    th = threading.Thread(target=lambda: out.append(L.connect(1, "inflight.lab.test:443",
                                                              timeout=10)))
    th.start()
    check(bounded_wait(lambda: L.zone.query_log("inflight.lab.test"), 3), "no lookup")
    d.settings["dns_server"] = ["203.0.113.53"]
    d.write_config()
    d.reload()
    th.join(timeout=10)
    check(out and out[0].status in (200, 502, 503, 504), "in-flight lookup: %r" % out)
    out[0].close()
    def moved():
        r = L.connect(1, "dnsmove.lab.test:443")
        if r.status != 200:
            return None
        g2 = proxyclient.tunnel_http_get(r.sock, "x", "/")
        r.close()
        return g2.header("X-Origin") == "http2_443"
    check("apply from the next reload" not in d.stderr_text(),
          "DNS settings deferred by a lookup in flight")
    check(bounded_wait(moved, 2, step=0.2), "new dns_server not used after reload:\n%s"
          % d.stderr_tail(12))
    check(z2.query_log("dnsmove.lab.test"), "new server never asked")
    check(d.alive(), "egressd died")
    d.grant_revoke(g["grant_id"])


def t_sigusr1_keeps_running(L, d, st):
    d.signal(signal.SIGUSR1)
    time.sleep(0.3)
    check(d.alive(), "SIGUSR1 killed egressd")
    r = _static(L, "second.lab.test:443")
    allowed_tunnel(r)
    r.close()


def _grant_recs(d, **want):
    return [r for r in d.decisions() if r.get("event") == "grant" and
            all(r.get(k) == v for k, v in want.items())]


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def t_grant_and_config_events(L, d, st):
    """The decision log says what was granted and when (schema 2): start, a create per
    grant, the reload's replace with old and new entries, config records for good and
    broken reloads with the file's hash, revoke and expire with their own reasons; and
    egressctl log grants --at answers from them (its negative twin: the other time)."""
    recs = d.decisions()
    check(all(r.get("v") == 2 for r in recs), "records not schema 2")
    starts = [r for r in recs if r.get("event") == "start"]
    check(len(starts) == 1 and re.fullmatch(r"[0-9a-f]{64}", starts[0]["config_sha256"] or ""),
          "start record: %r" % starts)
    created = _grant_recs(d, action="create", source="static", name="svc")
    check(len(created) == 1 and created[0]["allow"] == ["https://first.lab.test",
                                                       "tcp://echo.lab.test:7"],
          "static create: %r" % created)
    dyn = _grant_recs(d, action="create", grant_id=st["g"]["grant_id"])
    check(len(dyn) == 1 and dyn[0]["source"] == "dynamic" and
          dyn[0]["allow"] == ["tcp://dyn.lab.test:7"], "dynamic create: %r" % dyn)
    repl = [r for r in _grant_recs(d, action="replace", name="svc")
            if r["old_allow"] != r["allow"]]
    check(len(repl) == 1 and repl[0]["old_grant_id"] == created[0]["grant_id"] and
          repl[0]["old_allow"] == ["https://first.lab.test", "tcp://echo.lab.test:7"] and
          repl[0]["allow"] == ["https://second.lab.test", "tcp://echo.lab.test:7"],
          "replace: %r" % repl)
    conf = [r for r in recs if r.get("event") == "config"]
    failed = [r for r in conf if r["result"] == "failed"]
    check(len(failed) >= len(_broken_texts(d)) + 1 and
          all(r["error"] and re.fullmatch(r"[0-9a-f]{64}", r["sha256"]) for r in failed),
          "failed reloads: %r" % failed)
    check(any("unknown key 'no_such_key\u00ff'" in r["error"] for r in failed),
          "the failed reload of a key that is not UTF-8 has no error: %r" % failed)
    oks = [r for r in conf if r["result"] == "ok"]
    check(oks and oks[-1]["sha256"] == _sha256(d.conf_path) and oks[-1]["error"] is None,
          "last good reload's hash: %r" % oks[-1:])
    check(len({r["sha256"] for r in failed}) > 1, "broken files hashed alike")
    revoked = [r for r in recs if r.get("event") == "grant" and r["action"] == "revoke"]
    check(revoked and revoked[-1]["reason"] == "grant_revoked", "revoke: %r" % revoked)
    # expiry: a dynamic grant of 1 s
    g = L.grant(d, 1, ["https://first.lab.test"], principal="shortlived", lifetime_s=1)
    e = d.wait_record(lambda r: r.get("event") == "grant" and r.get("action") == "expire" and
                      r.get("grant_id") == g["grant_id"], timeout=5)
    check(e is not None and e["reason"] == "grant_expired" and e["principal"] == "shortlived",
          "expire record: %r" % e)
    # log grants --at: before and after the good reload
    principal = created[0]["principal"]
    before = created[0]["time"]
    after = repl[0]["time"]
    rc, out, err = d.egressctl("log", "grants", "--at", before, "--principal", principal,
                               "--json", d.log_path)
    check(rc == 0, "log grants rc=%d %s" % (rc, err))
    got = json.loads(out)
    check(len(got) == 1 and got[0]["allow"] == ["https://first.lab.test",
                                                "tcp://echo.lab.test:7"],
          "at %s: %r" % (before, got))
    rc, out, err = d.egressctl("log", "grants", "--at", after, "--principal", principal,
                               d.log_path)
    check(rc == 0 and "allow https://second.lab.test" in out and
          "first.lab.test" not in out, "at %s: %r %r" % (after, out, err))
    rc, out, err = d.egressctl("log", "grants", "--at", "now", "--principal", "shortlived",
                               d.log_path)
    check(rc == 0 and "no grant in service" in out, "expired grant still listed: %r" % out)
    rc, out, err = d.egressctl("log", "grants", "--at", e["time"], "--principal", "nobody",
                               "--json", d.log_path)
    check(rc == 0 and json.loads(out) == [], "unknown principal: %r" % out)
    rc, out, err = d.egressctl("log", "grants", "--at", "yesterday-ish", d.log_path)
    check(rc == 2, "bad --at accepted: %d %r" % (rc, out))


def t_replaced_grant_tunnel_held(L, d, st):
    """A tunnel of a static grant that a reload then replaces, still open when egressd is
    stopped (issue 19): the drain's end must reach it although its grant is no longer in
    service, so egressd exits within drain_timeout and the hop gets its close record."""
    t = _static(L, "echo.lab.test:7")
    allowed_tunnel(t)
    st["held"] = t
    allows = [r for r in d.decisions() if r.get("event") == "decision" and
              r.get("verdict") == "allow" and r.get("dest") == "echo.lab.test:7"]
    check(allows, "no allow record for the held tunnel")
    st["held_hop"] = allows[-1]["hop"]
    d.grants["svc"]["allow"] = ["https://second.lab.test", "tcp://echo.lab.test:7",
                                "https://first.lab.test"]
    d.write_config()
    _reload_and_wait(d)
    check(_wait_applies(L, "first.lab.test:443", 200), "reload did not apply")
    check(proxyclient.tunnel_echo(t.sock, b"held") == b"held", "held tunnel broken")


def t_stop_with_held_tunnel(L, d, st):
    t0 = time.monotonic()
    try:
        stop_clean(d)
    finally:
        if st.get("held") is not None:
            st["held"].close()
    took = time.monotonic() - t0
    check(took < 6.0, "the drain (drain_timeout 1s) took %.1fs" % took)
    closes = [r for r in d.decisions() if r.get("event") == "close" and
              r.get("hop") == st.get("held_hop")]
    check(len(closes) == 1 and closes[0].get("reason") == "shutdown",
          "the held tunnel's hop %s: close records %r" % (st.get("held_hop"), closes))


def t_stop_record(L, d, st):
    recs = d.decisions()
    check(recs and recs[-1].get("event") == "stop" and recs[-1]["cause"] in ("drain", "exit"),
          "last record is not stop: %r" % recs[-1:])
    rc, out, err = d.egressctl("log", "verify", d.log_path)
    check(rc == 0, "verify after stop: %s %s" % (out, err))
    rc, out, err = d.egressctl("log", "grants", "--at", "now", "--json", d.log_path)
    check(rc == 0 and json.loads(out) == [], "grants after stop: %r" % out)


def main():
    lab.require_root()
    require_binaries("egressd")
    res = Results()
    with Lab() as L:
        L.set_zone(ZONE)
        d = L.egressd(settings={"drain_timeout": "1s"},
                      listeners={"svc": {"listen": "127.0.0.1:%d" % STATIC_PORT,
                                         "grant": "svc"}},
                      grants={"svc": {"allow": ["https://first.lab.test",
                                                "tcp://echo.lab.test:7"],
                                      "lifetime": "0"}})
        st = {"g": L.grant(d, 0, ["tcp://dyn.lab.test:7"])}
        for name, fn in (("static_grant_initial", t_initial),
                         ("good_reload_applies", t_good_reload),
                         ("broken_reload_keeps_old_config", t_broken_reload_keeps_old),
                         ("control_reload_all_or_nothing", t_control_reload),
                         ("dynamic_grants_survive_reload", t_dynamic_survives),
                         ("tunnel_of_replaced_grant_survives", t_old_tunnel_survived),
                         ("reload_changes_dns_server", t_reload_changes_dns),
                         ("sigusr1_reopen", t_sigusr1_keeps_running),
                         ("grant_and_config_events", t_grant_and_config_events)):
            res.run(name, fn, L, d, st)
        res.run("egressd_still_running", lambda: check(d.alive(), d.stderr_tail()))
        res.run("replaced_grant_tunnel_held", t_replaced_grant_tunnel_held, L, d, st)
        res.run("egressd_clean_exit_drain_ends_held_tunnel", t_stop_with_held_tunnel, L, d,
                st)
        res.run("stop_record_last", t_stop_record, L, d, st)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
