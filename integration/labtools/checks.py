"""Assertions the egressd integration tests share."""

import os
import sys
import time

from labtools.egressd import binary


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def require_binaries(*names):
    """A test that needs a binary that is not built fails loudly (exit 1), never skips."""
    missing = [n for n in names if not os.access(binary(n), os.X_OK)]
    if missing:
        print("FAIL: not built: %s (EGRESS_BINARY_DIR=%s)"
              % (", ".join(binary(n) for n in missing), os.environ.get("EGRESS_BINARY_DIR")))
        print("0 passed, 1 failed")
        sys.exit(1)


def refused(resp, status, reason):
    """resp is an egressd refusal: the status, X-Egress-Reason and the one-line body."""
    check(resp.status == status and resp.egress_reason == reason,
          "expected %s %s, got %r" % (status, reason, resp))
    body = resp.body.decode("utf-8", "replace")
    check(body.startswith(reason + ":"), "refusal body %r does not start with %s:"
          % (body, reason))
    check(resp.sock is None, "refusal left a tunnel open")
    check(resp.status != 407, "407 for a policy denial")


def allowed_tunnel(resp):
    check(resp.status == 200 and resp.sock is not None, "expected 200 tunnel, got %r" % resp)


def records(d, event=None, start=0):
    out = d.decisions()[start:]
    if event:
        out = [r for r in out if r.get("event") == event]
    return out


def field(rec, *names, default=None):
    """First present field among names (tolerates small schema spelling differences)."""
    for n in names:
        if n in rec:
            return rec[n]
    return default


def wait_decision(d, pred, timeout=5.0, start=0):
    r = d.wait_record(lambda r: r.get("event") == "decision" and pred(r), timeout=timeout,
                      start=start)
    check(r is not None, "no matching decision record in %s (last: %s)"
          % (d.log_path, (d.decisions() or [None])[-1]))
    return r


def wait_close(d, pred, timeout=5.0, start=0):
    """The close record of an allowed hop (through a proxy it carries the proxy's answer:
    docs/decision-log.md, "The allow record comes first")."""
    r = d.wait_record(lambda r: r.get("event") == "close" and pred(r), timeout=timeout,
                      start=start)
    check(r is not None, "no matching close record in %s (last: %s)"
          % (d.log_path, (d.decisions() or [None])[-1]))
    return r


def target_of(rec):
    return str(field(rec, "destination", "canonical", "dest", "target", default=""))


def verdict_of(rec):
    return field(rec, "verdict", "decision")


def reason_of(rec):
    return field(rec, "reason")


def bounded_wait(pred, timeout, step=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "ERROR: UndefinedBehaviorSanitizer")


def stop_clean(d):
    """Stop egressd (SIGTERM drain) and require exit 0 with no sanitizer report."""
    rc = d.stop()
    err = d.stderr_text()
    bad = [m for m in SANITIZER_MARKERS if m in err]
    check(not bad, "sanitizer report in egressd's stderr:\n%s" % d.stderr_tail(60))
    check(rc == 0, "egressd exit status %s:\n%s" % (rc, d.stderr_tail()))
