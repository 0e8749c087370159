"""Shared body of the agent acceptance tests (test_agent_codex.py, test_agent_claude.py):
a real agent CLI from npm runs as the AgentPreset's executable under
`egress-exec run --workunit ...`, talks over HTTPS through egressd to a scripted model
(labtools/modelserver.py) on an allowlisted name, runs one shell command and writes one
file. docs/agents.md describes the set-up for people.

Per agent, two WorkUnits:
  edit    the model makes the agent `cat README.md` and write NOTES.md (in scope): the
          run is accepted, the candidate holds the edit, the decision log holds the model
          calls and nothing else (telemetry is off through the agents' documented
          variables; anything else would be a deny record, and the test fails on it).
  escape  the model makes the agent fetch https://origin2.lab.test/ (not granted) and
          write CHANGELOG.md (out of scope): the fetch is refused by egressd with a
          not_granted deny record and origin2 sees no connection; the candidate is
          rejected with scope_violation.

Credentials and route (default: model connection, docs/model-connections.md and
docs/agents.md). The preset names
`model_connection = labmodel` and `placeholder_env` (OPENAI_API_KEY for codex through its
provider's env_key, ANTHROPIC_API_KEY for claude): the agent holds only egress-exec's
random placeholder. The real key is in a root-only file named by the trusted-models file
that the private egressd reads; the scripted model accepts only that key. egressd
terminates the agent's TLS with the per-run CA (the agents trust it through the sandbox's
/etc/egress/ca-bundle.pem: CODEX_CA_CERTIFICATE / SSL_CERT_FILE, NODE_EXTRA_CA_CERTS) and
trusts the model origin's lab CA through `origin_ca_file`. The caller's environment is
an enterprise host's: https_proxy=pac+http://.../agent.pac (the PAC sends models.lab.test
through squid demanding Basic auth) and EGRESS_PROXY_CREDENTIALS naming the operator's
root-only proxy credentials; the agent never sees them. Asserted besides the outcomes:
the model saw the real key on every request and never the placeholder; inner decision
records are intercepted with credential labmodel; the model CONNECT's route is the
proxy; squid's log shows the authenticated CONNECT; neither the key nor the proxy
password is anywhere in the run's out folder.

EGRESS_AGENT_OPAQUE=1 keeps the older mode: the agent holds a lab-only key (LAB_KEY,
not a secret), the lab CA is shown through a preset ro_bind, the tunnel is an opaque
CONNECT, the route direct.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results, check, require_root  # noqa: E402
from labtools import modelserver, proxies  # noqa: E402
from labtools.egressd import binary  # noqa: E402

import test_orchestrate_local as local  # noqa: E402  (repository and manifest helpers)

# Default: model connection through the PAC-chosen authenticating proxy. EGRESS_AGENT_OPAQUE=1
# keeps the older mode (lab key in the worker, opaque CONNECT, direct route).
USE_MODEL_CONNECTION = os.environ.get("EGRESS_AGENT_OPAQUE") != "1"

SRC = local.SRC
INSTALL = os.path.join(SRC, "scripts", "install-agents.sh")
CACHE = os.environ.get("EGRESS_AGENT_CACHE", "/var/cache/egress-agents")
MODEL_ADDR = "203.0.113.60"
MODEL_NAME = "models.lab.test"
LAB_KEY = "lab-only-key-not-a-secret"
# Model-connection mode: the real key lives only in a root-only file egressd reads; the
# model server accepts only it. The worker holds egress-exec's random placeholder.
REAL_KEY = "sk-lab-REAL-%d-9d8c7b6a" % os.getpid()
PLACEHOLDER_PREFIX = "egress-placeholder-"
CONNECTION = "labmodel"
PLACEHOLDER_ENV = {"codex": "OPENAI_API_KEY", "claude": "ANTHROPIC_API_KEY"}
CRED_HEADER = {"codex": "authorization-bearer", "claude": "x-api-key"}
PROXY_USER = "agentops"
PROXY_PASSWORD = "pw-%d-Zk4" % os.getpid()
BUNDLE = "/etc/egress/ca-bundle.pem"   # the sandbox's CA bundle (host roots + run CA)
# Where the lab CA is put for the preset's ro_bind: not under /tmp (the sandbox builds its
# own /tmp, so a bind there is refused), one directory per test run, removed afterwards.
CA_TOP = "/var/lib/egress-agent-lab"

ZONE = dict(lab.DEFAULT_ZONE)
ZONE[MODEL_NAME] = {"A": [MODEL_ADDR]}
ZONE["proxy.lab.test"] = {"A": [proxies.PROXY_ADDR]}

EMBEDDED_SETTINGS = ["dns_server=198.51.100.53", "allow_special_address=198.51.100.0/24",
                     "allow_special_address=203.0.113.0/24", "dns_timeout=1s",
                     "connect_timeout=3s"]

# Telemetry, error reporting, update checks and other side traffic off, with each agent's
# documented variables (docs/agents.md). Set by the preset (through env(1) in argv), not
# by the caller: what the worker runs with is the preset's.
QUIET = {
    "codex": ["CODEX_DISABLE_TELEMETRY=1", "OTEL_SDK_DISABLED=true", "NO_UPDATE_NOTIFIER=1"],
    "claude": ["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1",
               "DISABLE_ERROR_REPORTING=1", "DISABLE_AUTOUPDATER=1",
               "DISABLE_BUG_COMMAND=1"],
}

# codex's side traffic is configuration, not environment: usage analytics (OTLP metrics to
# ab.chatgpt.com) and the plugin / app catalogues (chatgpt.com, api.github.com, github.com),
# each off by its documented key (`codex features list` names the features).
CODEX_QUIET_CONFIG = ["-c", "analytics.enabled=false", "-c", "features.plugins=false",
                      "-c", "features.remote_plugin=false", "-c", "features.apps=false"]

WORKUNIT = """id = agent-{name}
objective = Do the lab task: look at README.md, then record your notes.

[security]
sandbox_required = true

[permissions]
process_execution = true
secrets =
network = allowlist
destinations = https://{model}
filesystem_write = NOTES.md

[budget]
wall_seconds = 150
cpu_millicores = 1000
memory_bytes = 2G
disk_bytes = 512M
processes = 256
output_bytes = 1M

[constraints]
allowed_paths = NOTES.md
forbidden_paths = secrets
"""

PRESET_TAIL = """prompt_transport = stdin
network_policy = allowlisted

[ceilings]
wall_seconds = 180
cpu_millicores = 2000
memory_bytes = 2G
disk_bytes = 512M
processes = 256
output_bytes = 1M
diff_bytes = 1M
"""


def install():
    """Install (or find) the agents; {CODEX_BIN: ..., CLAUDE_BIN: ...}. Exit 77 without
    npm (the package list in scripts/deps.sh has it; a machine without it cannot run
    these tests); an install failure is a test failure."""
    if shutil.which("npm") is None:
        print("SKIP: npm not installed")
        sys.exit(77)
    p = subprocess.run([INSTALL, CACHE], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=900)
    if p.returncode != 0:
        raise lab.LabError("install-agents.sh failed: %s" % p.stderr.decode(errors="replace"))
    env = {}
    for line in p.stdout.decode().splitlines():
        k, _, v = line.partition("=")
        env[k] = v
    return env


def argv_lines(argv):
    return "".join("argv = %s\n" % a for a in argv)


MC_TAIL = ("prompt_transport = stdin\nnetwork_policy = model_only\n"
           "model_connection = %s\nplaceholder_env = %%s\n" % CONNECTION)


def preset_codex(binpath, ca, quiet=True):
    """ca None: model connection (placeholder in OPENAI_API_KEY, run CA from the sandbox's
    bundle); otherwise the lab CA file and the lab key (opaque mode)."""
    keyvar = PLACEHOLDER_ENV["codex"] if ca is None else "LAB_MODEL_BEARER"
    provider = ('model_providers.lab={name="lab",base_url="https://%s/v1",'
                'env_key="%s",wire_api="responses"}' % (MODEL_NAME, keyvar))
    trust = ["SSL_CERT_FILE=" + ca, "CODEX_CA_CERTIFICATE=" + ca,
             "LAB_MODEL_BEARER=" + LAB_KEY] if ca else ["CODEX_CA_CERTIFICATE=" + BUNDLE]
    argv = ["env"] + QUIET["codex"] + trust + [
        binpath, "exec", "--skip-git-repo-check",
        # The sandbox is egress-exec's: codex's own (Landlock/seccomp) would nest inside
        # it and needs privileges the worker does not have.
        "--dangerously-bypass-approvals-and-sandbox",
        "-c", provider, "-c", "model_provider=lab", "-m", "lab-model"] + \
        (CODEX_QUIET_CONFIG if quiet else []) + ["-"]
    if not quiet:
        argv = [a for a in argv if a not in QUIET["codex"]]
    return preset_text("codex", argv, ca)


def preset_text(agent, argv, ca):
    head = "[preset]\nname = %s-lab\nexecutable = /usr/bin/env\n" % agent + argv_lines(argv)
    if ca is None:
        return (head + "ro_bind = %s\n" % os.path.join(CACHE, agent) +
                MC_TAIL % PLACEHOLDER_ENV[agent] +
                PRESET_TAIL.split("network_policy = allowlisted\n", 1)[1])
    return (head + "ro_bind = %s\nro_bind = %s\n" % (os.path.join(CACHE, agent), ca) +
            PRESET_TAIL)


def preset_claude(binpath, ca, quiet=True):
    # model connection: NODE_EXTRA_CA_CERTS (the bundle with the run CA) and the
    # placeholder in ANTHROPIC_API_KEY both come from egress-exec
    trust = ["NODE_EXTRA_CA_CERTS=" + ca, "ANTHROPIC_API_KEY=" + LAB_KEY] if ca else []
    argv = ["env"] + (QUIET["claude"] if quiet else []) + trust + [
        "ANTHROPIC_BASE_URL=https://" + MODEL_NAME,
        binpath, "-p", "--model", "lab-model", "--allowedTools", "Bash", "Write"]
    return preset_text("claude", argv, ca)


# Set by main() in model-connection mode: extra egress-exec arguments (trusted models,
# origin trust, PAC) and the caller environment (proxy variables, operator credentials).
RUN = {"args": [], "env": None}


def decisions(case):
    data = case.artifact("decisions.jsonl") or b""
    return [json.loads(x) for x in data.decode().splitlines() if x.strip()]


def run_agent(L, case, preset_text, wu_text, srv, scenario):
    srv.set_scenario(scenario)
    wu = os.path.join(case.dir, "wu.ini")
    with open(wu, "w") as f:
        f.write(wu_text)
    with open(case.preset, "w") as f:
        f.write(preset_text)
    before = local.tree_digest(case.repo)
    args = ["nsenter", "--net=/run/netns/" + L.ns_host, binary("egress-exec"), "run",
            "--workunit", wu, "--preset", case.preset, "--repo", case.repo, "--out", case.out]
    for kv in EMBEDDED_SETTINGS:
        args += ["--egressd-setting", kv]
    args += RUN["args"]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300,
                       env=RUN["env"])
    case.stderr = p.stderr.decode(errors="replace")
    if os.environ.get("VERBOSE"):
        sys.stdout.write(case.stderr)
    check(local.tree_digest(case.repo) == before, "the host repository changed")
    with open(os.path.join(case.out, "manifest.json")) as f:
        case.manifest = json.load(f)
    return p.returncode


def transcript(case):
    out = (case.artifact("stdout.log") or b"").decode(errors="replace")
    err = (case.artifact("stderr.log") or b"").decode(errors="replace")
    return "--- stdout\n%s\n--- stderr\n%s\n--- egress-exec\n%s" % (out[-3000:], err[-3000:],
                                                                     case.stderr[-2000:])


def t_edit(L, srv, top, agent, preset_text):
    c = local.Case(top, agent + "-edit")
    n0 = len(srv.model_calls())
    rc = run_agent(L, c, preset_text, WORKUNIT.format(name=agent, model=MODEL_NAME), srv,
                   "edit")
    o = c.manifest["outcome"]
    check(rc == local.EX_OK and o["status"] == "accepted",
          "exit %d, outcome %s\n%s" % (rc, o, transcript(c)))
    diff = (c.artifact("candidate.diff") or b"").decode()
    check("+++ b/NOTES.md" in diff and "+Written by the agent under egress-exec." in diff,
          "candidate.diff: %r\n%s" % (diff, transcript(c)))
    # the candidate applies to a fresh clone of the base
    clone = os.path.join(c.dir, "clone")
    gcfg = os.path.join(c.dir, "gitconfig")
    with open(gcfg, "w") as f:
        f.write("[safe]\n\tdirectory = *\n")   # the repository belongs to the worker uid
    genv = dict(os.environ, GIT_CONFIG_GLOBAL=gcfg)
    subprocess.run(["git", "clone", "-q", c.repo, clone], check=True, timeout=60, env=genv)
    ap = subprocess.run(["git", "-C", clone, "apply", "--binary", "--check",
                         os.path.join(c.out, "candidate.diff")], capture_output=True,
                        timeout=60)
    check(ap.returncode == 0, "candidate does not apply: %s" % ap.stderr)
    calls = srv.model_calls()[n0:]
    check(len(calls) >= 3, "model calls: %d" % len(calls))
    # The agent showed the model the output of the shell command it ran (README.md).
    check(any("hello" in json.dumps(r[3]) for r in calls[1:]),
          "the shell command's output never reached the model")
    recs = decisions(c)
    dests = sorted({r.get("dest") for r in recs if r.get("dest")})
    check(dests == ["%s:443" % MODEL_NAME], "destinations in the decision log: %s" % dests)
    denied = [r for r in recs if r.get("verdict") == "deny"]
    check(not denied, "deny records (the agent tried other calls): %s" % denied)
    allowed = [r for r in recs if r.get("verdict") == "allow"]
    check(len(allowed) >= 1, "no allow record for the model: %s" % recs)
    if USE_MODEL_CONNECTION:
        check_model_connection(c, recs, calls)
    return c


def check_model_connection(c, recs, calls):
    """The model calls were intercepted and keyed by egressd; the route was the PAC's
    proxy; the key is in no artifact."""
    inner = [r for r in recs if r.get("hop_kind") == "inner" and r.get("event") == "decision"]
    check(len(inner) >= len(calls), "inner records %d < model calls %d: %s" % (
        len(inner), len(calls), recs))
    bad = [r for r in inner if not (r.get("intercepted") is True and
                                    r.get("credential") == CONNECTION and
                                    r.get("verdict") == "allow")]
    check(not bad, "inner records not intercepted/keyed: %s" % bad)
    outer = [r for r in recs if r.get("event") == "decision" and r.get("hop_kind") != "inner"
             and r.get("dest") == "%s:443" % MODEL_NAME]
    check(outer and all("proxy.lab.test:3128" in (r.get("route") or "") for r in outer),
          "the model CONNECT did not take the PAC's proxy: %s" % outer)
    no_key_in(c.out)
    print("  %d model calls, %d intercepted inner records (credential %s), route %s" % (
        len(calls), len(inner), CONNECTION, outer[0].get("route")))


def no_key_in(top):
    for d, _, files in os.walk(top):
        for name in files:
            p = os.path.join(d, name)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    data = f.read()
                check(REAL_KEY.encode() not in data, "%s carries the model key" % p)
                check(PROXY_PASSWORD.encode() not in data,
                      "%s carries the proxy password" % p)


def t_escape(L, srv, top, agent, preset_text):
    c = local.Case(top, agent + "-escape")
    n2 = L.count("http2_443")
    wu = WORKUNIT.format(name=agent, model=MODEL_NAME)
    rc = run_agent(L, c, preset_text, wu, srv, "escape")
    o = c.manifest["outcome"]
    check(rc == local.EX_REJECTED and o["status"] == "rejected" and
          o["reason"] == "scope_violation", "exit %d, outcome %s\n%s" % (rc, o, transcript(c)))
    check(local.violations(c) == {("CHANGELOG.md", "scope_violation")}, local.violations(c))
    check(c.artifact("candidate.diff") is None, "a rejected candidate has no diff")
    recs = decisions(c)
    deny = [r for r in recs if r.get("verdict") == "deny" and
            r.get("dest") == "origin2.lab.test:443"]
    check(deny and deny[0].get("reason") == "not_granted",
          "no not_granted record for origin2: %s" % recs)
    check(L.count("http2_443") == n2, "the ungranted origin saw a connection")
    others = {r.get("dest") for r in recs if r.get("dest")} - {
        "%s:443" % MODEL_NAME, "origin2.lab.test:443"}
    check(not others, "unexpected destinations: %s" % others)
    if USE_MODEL_CONNECTION:
        no_key_in(c.out)
    return c


def t_side_traffic(L, srv, top, agent, preset_text):
    """Negative twin of the quiet presets: with telemetry and catalogue fetches left on,
    every such call is refused by egressd (not_granted) and logged, the origin-less names
    never resolve past egressd, and the run still finishes well within its budget."""
    c = local.Case(top, agent + "-noisy")
    t0 = time.monotonic()
    rc = run_agent(L, c, preset_text, WORKUNIT.format(name=agent, model=MODEL_NAME), srv,
                   "edit")
    took = time.monotonic() - t0
    o = c.manifest["outcome"]
    check(rc == local.EX_OK and o["status"] == "accepted",
          "exit %d, outcome %s\n%s" % (rc, o, transcript(c)))
    check(took < 120, "the run took %.0fs: side calls hung it" % took)
    recs = decisions(c)
    other = [r for r in recs if r.get("dest") and r.get("dest") != "%s:443" % MODEL_NAME]
    # through the proxy: not_granted; a client that ignores the proxy variables asks the
    # run's stub resolver (transparent capture, docs/transparent.md): dns_not_granted
    check(all(r.get("verdict") == "deny" and r.get("reason") in ("not_granted",
                                                                 "dns_not_granted")
              for r in other if r.get("event") == "decision"), "other calls: %s" % other)
    if USE_MODEL_CONNECTION:
        no_key_in(c.out)
    print("  %s side traffic refused and logged: %s (%.1fs)" % (
        agent, sorted({r.get("dest") for r in other}) or "none attempted", took))


def setup_model_connection(L, agent, labca_file, catop):
    """The trusted-models file (connection CONNECTION, credential root-only), the origin
    trust (the lab CA, for egressd only), squid with Basic auth, a PAC that sends the model
    host through it and the operator's proxy credentials; fills RUN. Returns the squid."""
    keyfile = os.path.join(catop, "model.key")
    fd = os.open(keyfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(REAL_KEY + "\n")
    os.chown(keyfile, 0, 0)
    conns = os.path.join(catop, "trusted-models.ini")
    with open(conns, "w") as f:
        f.write("[connection %s]\ndestination = https://%s\ncredential_file = %s\n"
                "credential_header = %s\n" % (CONNECTION, MODEL_NAME, keyfile,
                                               CRED_HEADER[agent]))
    os.chmod(conns, 0o644)
    proxies.add_addresses(L, proxies.PROXY_ADDR)
    sq = proxies.Squid(L, auth="basic", users={PROXY_USER: PROXY_PASSWORD}).start()
    pac = proxies.serve_pac(L, "/agent.pac", proxies.pac_proxied(
        "proxy.lab.test:%d" % proxies.SQUID_PORT, domain=MODEL_NAME))
    opf = proxies.credentials_file(L, "operator.ini", {
        "proxy.lab.test:%d" % proxies.SQUID_PORT: {
            "scheme": "basic", "username": PROXY_USER, "password": PROXY_PASSWORD}})
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
           and not k.startswith("KRB5")}
    env.update({"https_proxy": "pac+" + pac, "http_proxy": "pac+" + pac,
                "EGRESS_PROXY_CREDENTIALS": opf})
    RUN["env"] = env
    RUN["args"] = ["--trusted-models", conns,
                   "--egressd-setting", "origin_ca_file=" + labca_file,
                   "--egressd-setting", "upstream_timeout=10s"]
    return sq


def t_only_real_key(srv, agent):
    """Every request carried the real key in the connection's header (Authorization:
    Bearer for codex, x-api-key for claude) and no placeholder anywhere in its head."""
    check(srv.requests, "the model server saw no request")
    print("  model server: %d requests, all with the real key" % len(srv.requests))
    for method, target, headers, _ in srv.requests:
        want, got = (("Bearer " + REAL_KEY, headers.get("authorization"))
                     if CRED_HEADER[agent] == "authorization-bearer"
                     else (REAL_KEY, headers.get("x-api-key")))
        check(got == want, "%s %s without the real key: %r" % (method, target, got))
        check(not any(PLACEHOLDER_PREFIX in v for v in headers.values()),
              "the placeholder reached the model: %s" % headers)


def t_squid_log(sq):
    lines = sq.access_log_lines()
    hits = [x for x in lines if PROXY_USER in x and "%s:443" % MODEL_NAME in x]
    check(hits, "squid shows no authenticated CONNECT to the model: %s" % lines[-10:])
    print("  squid: %d authenticated CONNECTs to the model, e.g. %s" % (len(hits), hits[0]))


def main(agent):
    require_root()
    if USE_MODEL_CONNECTION:
        miss = proxies.missing_tools("squid")
        if miss:
            print("FAIL: not installed: %s (scripts/deps.sh)" % " ".join(miss))
            return 1
    bins = install()
    binpath = bins["CODEX_BIN" if agent == "codex" else "CLAUDE_BIN"]
    top = tempfile.mkdtemp(prefix="egx-agent-%s-%d-" % (agent, os.getpid()))
    os.chmod(top, 0o755)
    catop = None
    R = Results()
    try:
        with Lab(workers=0, zone=ZONE) as L:
            L.add_address(MODEL_ADDR)
            ca = proxies.LabCA(L, "agentca")
            cert, key = ca.server_cert(MODEL_NAME, [MODEL_NAME])
            os.makedirs(CA_TOP, mode=0o755, exist_ok=True)
            catop = os.path.join(CA_TOP, L.prefix)
            os.makedirs(catop, mode=0o755, exist_ok=True)
            ca_file = os.path.join(catop, "lab-ca.pem")
            shutil.copyfile(ca.cert, ca_file)
            os.chmod(ca_file, 0o644)
            sock = lab.netns.listen_in(L.ns_inet, MODEL_ADDR, 443)
            sq = None
            if USE_MODEL_CONNECTION:
                sq = setup_model_connection(L, agent, ca_file, catop)
            srv = modelserver.ModelServer(sock, cert, key, "edit",
                                          REAL_KEY if USE_MODEL_CONNECTION else LAB_KEY).start()
            try:
                pca = None if USE_MODEL_CONNECTION else ca_file
                text = preset_codex(binpath, pca) if agent == "codex" else \
                    preset_claude(binpath, pca)
                R.run(agent + "_edit", t_edit, L, srv, top, agent, text)
                R.run(agent + "_escape", t_escape, L, srv, top, agent, text)
                noisy = preset_codex(binpath, pca, quiet=False) if agent == "codex" \
                    else preset_claude(binpath, pca, quiet=False)
                R.run(agent + "_side_traffic_refused", t_side_traffic, L, srv, top, agent,
                      noisy)
                unauth = [r for r in srv.requests if r[2].get("authorization") is None and
                          r[2].get("x-api-key") is None]
                R.run(agent + "_no_unkeyed_calls", check, not unauth,
                      "requests without the lab key: %s" % [(r[0], r[1]) for r in unauth])
                if USE_MODEL_CONNECTION:
                    R.run(agent + "_model_saw_only_real_key", t_only_real_key, srv, agent)
                    R.run(agent + "_proxy_authenticated_connect", t_squid_log, sq)
            finally:
                srv.stop()
                if sq:
                    sq.stop()
    finally:
        shutil.rmtree(top, ignore_errors=True)
        if catop:
            shutil.rmtree(catop, ignore_errors=True)
    return R.finish()
