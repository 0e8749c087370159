#!/usr/bin/env python3
"""egress-exec run with the sample WorkUnits and the demo AgentPreset from conf/, networked.

Inside the lab (integration/lab.py: an "internet" namespace with origins on
198.51.100.10 / 203.0.113.10 and a DNS server, a "host" namespace running egressd), the demo
agent fetches the allowlisted origin (allowed), tries origin2 (refused: not_granted, the
origin never sees a connection) and edits README.md: the candidate is accepted. The second
sample also writes outside its allowed paths: rejected. The host repository stays byte-for-byte
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


# The embedded egressd (no --egressd-control) needs the lab's DNS server and the explicit
# documentation-range override, exactly as an operator would set them.
EMBEDDED_SETTINGS = ["dns_server=198.51.100.53", "allow_special_address=198.51.100.0/24",
                     "allow_special_address=203.0.113.0/24", "dns_timeout=1s",
                     "connect_timeout=3s"]


def run(L, d, case, workunit):
    before = local.tree_digest(case.repo)
    if d is None:
        egressd_args = []
        for kv in EMBEDDED_SETTINGS:
            egressd_args += ["--egressd-setting", kv]
    else:
        egressd_args = ["--egressd-control", d.control_path]
    # nsenter --net only: `ip netns exec` would remount /sys and hide the cgroup
    # hierarchies the sandbox needs.
    p = subprocess.run(["nsenter", "--net=/run/netns/" + L.ns_host, binary("egress-exec"), "run",
                             "--workunit", os.path.join(CONF, "workunits", workunit),
                             "--preset", os.path.join(CONF, "presets", "demo-agent.ini"),
                             "--repo", case.repo, "--out", case.out] + egressd_args,
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
    # the first line is the anchor (the chain position before the run's first record)
    check(out and set(out[0]) == {"egress_anchor"}, "no anchor line: %r" % out[:1])
    return out[1:]


def check_extract(L, d, c, run_id):
    """The run's decisions.jsonl verifies alone and against the shared egressd's log;
    negative twins: a record taken out, and a foreign record put in, are both caught."""
    ext = os.path.join(c.out, "decisions.jsonl")
    rc, out, err = d.egressctl("log", "verify", ext)
    check(rc == 0 and "intact extract" in out and run_id in out, "alone: %s %s" % (out, err))
    rc, out, err = d.egressctl("log", "verify", ext, d.log_path)
    check(rc == 0 and "matches the system log" in out, "with the log: %s %s" % (out, err))
    with open(ext, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    bad = ext + ".bad"
    recs = [json.loads(x) for x in lines[1:]]
    drop = max(i for i, r in enumerate(recs) if r.get("event") == "decision") + 1
    with open(bad, "wb") as f:
        f.write(b"".join(lines[:drop] + lines[drop + 1:]))
    rc, out, err = d.egressctl("log", "verify", bad, d.log_path)
    check(rc == 1 and "missing from the extract" in out, "record taken out: %s %s"
          % (out, err))
    with open(d.log_path, "rb") as f:
        foreign = [x for x in f.read().splitlines(keepends=True)
                   if json.loads(x).get("principal") not in (run_id, None)]
    if foreign:
        with open(bad, "wb") as f:
            f.write(b"".join(lines[:1] + [foreign[-1]]))
        rc, out, err = d.egressctl("log", "verify", bad)
        check(rc == 1 and "not a record of the anchor" in out, "foreign: %s %s" % (out, err))
    os.unlink(bad)


def t_demo_accepted(L, d, top, name="demo"):
    c = local.Case(top, name)
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
    if d is not None:
        check_extract(L, d, c, m["run_id"])
    check(m["versions"]["egressd"], m["versions"])


def t_demo_forbidden(L, d, top):
    c = local.Case(top, "forbidden")
    rc = run(L, d, c, "demo-forbidden.ini")
    local.expect(c, rc, local.EX_REJECTED, "rejected", "scope_violation")
    v = local.violations(c)
    check(v == {("CHANGELOG.md", "scope_violation")}, v)
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
            R.run("demo_embedded_egressd", t_demo_accepted, L, None, top, "embedded")
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return R.finish()


if __name__ == "__main__":
    sys.exit(main())
