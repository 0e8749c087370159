#!/usr/bin/env python3
"""egress-exec run with the sample WorkUnits and the demo AgentPreset from conf/, networked.

Inside the lab (integration/lab.py: an "internet" namespace with origins on
198.51.100.10 / 203.0.113.10 and a DNS server, a "host" namespace running egressd), the demo
agent fetches the allowlisted origin (allowed), tries origin2 (refused: not_granted, the
origin never sees a connection) and edits README.md: the candidate is accepted. The second
sample writes under a forbidden path: rejected. The host repository stays byte-for-byte
unchanged. Needs root (exit 77 otherwise); touches nothing outside its own namespaces.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lab import Lab, Results, check, require_root  # noqa: E402
from labtools.egressd import binary  # noqa: E402

import test_orchestrate_local as local  # noqa: E402  (repository and digest helpers)

SRC = local.SRC
CONF = os.path.join(SRC, "conf")


def run(L, d, case, workunit):
    before = local.tree_digest(case.repo)
    # nsenter --net only: `ip netns exec` would remount /sys and hide the cgroup
    # hierarchies the sandbox needs.
    p = subprocess.run(["nsenter", "--net=/run/netns/" + L.ns_host, binary("egress-exec"), "run",
                             "--workunit", os.path.join(CONF, "workunits", workunit),
                             "--preset", os.path.join(CONF, "presets", "demo-agent.ini"),
                             "--repo", case.repo, "--out", case.out,
                             "--egressd-control", d.control_path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
    case.stderr = (p.stderr or b"").decode(errors="replace") if isinstance(p.stderr, bytes) \
        else (p.stderr or "")
    if os.environ.get("VERBOSE"):
        sys.stdout.write(case.stderr)
    check(local.tree_digest(case.repo) == before, "the host repository changed")
    with open(os.path.join(case.out, "manifest.json")) as f:
        case.manifest = json.load(f)
    return p.returncode


def decisions(case):
    out = []
    data = case.artifact("decisions.jsonl") or b""
    for line in data.decode().splitlines():
        out.append(json.loads(line))
    return out


def t_demo_accepted(L, d, top):
    c = local.Case(top, "demo")
    http2_before = L.count("http2")
    rc = run(L, d, c, "demo.ini")
    local.expect(c, rc, local.EX_OK, "accepted", "allowed")
    m = c.manifest
    check(m["grant"]["allowlist"] == ["http://origin.lab.test"], m["grant"])
    check(m["grant"]["id"] and len(m["grant"]["id"]) == 32, m["grant"])
    diff = c.artifact("candidate.diff").decode()
    check("+http://origin.lab.test/ HTTP 200" in diff, diff)
    check("+http://origin2.lab.test/ HTTP 403" in diff, diff)
    check("+Fetched the allowlisted origin" in diff, diff)
    check(L.count("http80") >= 1, "the allowlisted origin saw the fetch")
    check(L.count("http2") == http2_before, "the ungranted origin saw a connection")
    recs = decisions(c)
    reasons = [r.get("reason") for r in recs]
    check("allowed" in reasons and "not_granted" in reasons, recs)
    check(all(r.get("principal") in (None, m["run_id"]) for r in recs), "foreign records")
    check(m["versions"]["egressd"], m["versions"])


def t_demo_forbidden(L, d, top):
    c = local.Case(top, "forbidden")
    rc = run(L, d, c, "demo-forbidden.ini")
    local.expect(c, rc, local.EX_REJECTED, "rejected", "scope_forbidden")
    v = local.violations(c)
    check(("secrets/token.txt", "scope_forbidden") in v or
          ("secrets", "scope_forbidden") in v, v)
    check(c.artifact("candidate.diff") is None, "a rejected candidate has no diff")


def main():
    require_root()
    top = tempfile.mkdtemp(prefix="egx-orchnet-%d-" % os.getpid())
    os.chmod(top, 0o755)
    R = Results()
    try:
        with Lab(workers=0) as L:
            d = L.egressd()
            R.run("demo_accepted", t_demo_accepted, L, d, top)
            R.run("demo_forbidden", t_demo_forbidden, L, d, top)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return R.finish()


if __name__ == "__main__":
    sys.exit(main())
