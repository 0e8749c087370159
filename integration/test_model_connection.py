#!/usr/bin/env python3
"""Model connections (docs/model-connections.md): egressd holds the model credential and adds it on the wire.

The lab: a model origin over HTTPS (certificate from a lab CA) that answers only with the
real key and streams SSE; a second destination of the same connection whose certificate
names another host; an ordinary TLS origin that is granted but not bound to the
connection. egressd gets the connections file (credential root-only), the lab CA as its
origin trust store, and a grant naming the connection with a run CA (intercept_ca).

Positive: curl, python3 urllib and node 20 reach the model through the proxy with a
placeholder key and the run CA; the origin saw the real key, never the placeholder; inner
records are chained. Negative twins: inner Host other than the CONNECT host; an origin with
a bad certificate (502 origin_tls_failed); an opaque tunnel whose SNI differs from the
CONNECT host (sni_mismatch); the same on another port an https:// entry marks as TLS
(8443: matching SNI allowed, mismatching refused, absent allowed and recorded), and its
twin, a tcp:// entry, which is not checked; a destination that is not bound is not
intercepted (the worker sees the origin's own certificate); a worker that does not trust
the run CA (client_tls_failed, nothing reaches the origin). The metrics count every inner
request like any hop: the decision counters equal the decision records, the close counter
the close records. An inner request's close is held through a failure of the decision log
(its disk full) and written at the stop when the space is back, or named as lost."""

import os
import socket
import ssl
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import egressd as ed  # noqa: E402
from labtools import logfault, modelorigin, netns, proxies  # noqa: E402
from labtools.checks import (bounded_wait, check, records, require_binaries,  # noqa: E402
                             stop_clean, wait_decision)

MODEL_ADDR = "203.0.113.40"
BAD_ADDR = "203.0.113.41"
OTHER_ADDR = "203.0.113.42"
SLOW_ADDR = "203.0.113.43"
ZONE = {
    "slow.lab.test": {"A": [SLOW_ADDR]},
    "model.lab.test": {"A": [MODEL_ADDR]},
    "badcert.lab.test": {"A": [BAD_ADDR]},
    "other.lab.test": {"A": [OTHER_ADDR]},
    "origin.lab.test": {"A": [lab.HTTP_ORIGIN]},
}
KEY = "sk-lab-REAL-0f1e2d3c4b5a"
PLACEHOLDER = "egress-placeholder-7c9e1f0a"
GRANT = ["https://model.lab.test", "https://badcert.lab.test", "https://other.lab.test",
         "https://slow.lab.test",
         "http://origin.lab.test", "https://other.lab.test:8443", "tcp://other.lab.test:9443"]
METRICS = ("127.0.0.1", 9464)


def setup_egressd(L, labca, runca, settings=None):
    keyfile = os.path.join(L.workdir, "model.key")
    with open(keyfile, "w") as f:
        f.write(KEY + "\n")
    os.chown(keyfile, 0, 0)
    os.chmod(keyfile, 0o600)
    conns = os.path.join(L.workdir, "trusted-models.ini")
    with open(conns, "w") as f:
        f.write("[connection model]\n"
                "destination = https://model.lab.test\n"
                "destination = https://badcert.lab.test\n"
                "destination = https://slow.lab.test\n"
                "credential_file = %s\n"
                "credential_header = x-api-key\n"
                "allow_method = POST\nallow_method = GET\n"
                "allow_path = /v1/*\n" % keyfile)
    os.chmod(conns, 0o644)
    st = {"connections": conns, "origin_ca_file": labca.cert,
          "metrics_listen": "%s:%d" % METRICS}
    st.update(settings or {})
    d = L.egressd(settings={k: v for k, v in st.items() if v is not None})
    with open(runca.cert) as f:
        cert = f.read()
    with open(runca.key) as f:
        key = f.read()
    w = L.workers[0]
    r = d.control({"op": "grant.create", "listen": w.listen(), "interface": w.host_if,
                   "grant": {"principal": "w1-model", "allow": GRANT,
                             "connection": "model", "limits": {"lifetime_s": 600}},
                   "intercept_ca": {"cert": cert, "key": key},
                   "credential_placeholder": PLACEHOLDER})
    check(r.get("ok"), "grant.create %s" % r)
    return d


def out(cp):
    o = cp.stdout
    return o.decode("utf-8", "replace") if isinstance(o, bytes) else o


def proxy_url(L):
    return "http://%s:%d" % L.proxy_of(0)


def t_curl(L, d, origin, runca):
    n = len(origin.keys)
    cp = L.run_in(L.workers[0].ns, ["curl", "-sS", "-N", "--max-time", "20", "--proxy",
                                    proxy_url(L), "--cacert", runca.cert,
                                    "-H", "x-api-key: " + PLACEHOLDER,
                                    "-H", "Cookie: session=worker",
                                    "https://model.lab.test/v1/stream?beta=1"],
                  timeout=30)
    check(cp.returncode == 0, "curl rc %d: %s" % (cp.returncode, cp.stderr))
    check('data: {"n": 4}' in out(cp), "curl got %r" % out(cp)[:300])
    check(origin.keys[n:] == [KEY], "origin saw %r" % origin.keys[n:])
    check(not any(PLACEHOLDER in h or "session=worker" in h for h in origin.heads),
          "placeholder or cookie reached the origin")
    rec = wait_decision(d, lambda x: x.get("hop_kind") == "inner" and
                        x.get("target") == "/v1/stream")
    check(rec.get("verdict") == "allow" and rec.get("credential") == "model" and
          rec.get("intercepted") is True and rec.get("dest") == "model.lab.test:443",
          "record %s" % rec)
    close = d.wait_record(lambda x: x.get("event") == "close" and
                          x.get("hop") == rec.get("hop"), timeout=5)
    check(close is not None and close.get("status") == 200 and close.get("bytes_down", 0) > 0,
          "close %s" % close)
    with open(d.log_path, "rb") as f:
        check(KEY.encode() not in f.read(), "the key is in the decision log")
    cp = netns.run([lab.binary("egressctl"), "log", "verify", d.log_path], check=False)
    check(cp.returncode == 0, "chain: %s %s" % (cp.stdout, cp.stderr))


def t_python(L, d, origin, runca):
    n = len(origin.keys)
    code = ("import ssl, urllib.request, sys\n"
            "ctx = ssl.create_default_context(cafile=%r)\n"
            "op = urllib.request.build_opener(urllib.request.ProxyHandler("
            "{'https': %r}), urllib.request.HTTPSHandler(context=ctx))\n"
            "req = urllib.request.Request('https://model.lab.test/v1/stream', "
            "data=b'{}', headers={'x-api-key': %r, 'Content-Type': 'application/json'})\n"
            "sys.stdout.write(op.open(req, timeout=20).read().decode())\n"
            % (runca.cert, proxy_url(L), PLACEHOLDER))
    cp = L.run_in(L.workers[0].ns, [sys.executable, "-c", code], timeout=30)
    check(cp.returncode == 0, "python rc %d: %s" % (cp.returncode, cp.stderr[-500:]))
    check('data: {"n": 4}' in out(cp), "python got %r" % out(cp)[:300])
    check(origin.keys[n:] == [KEY], "origin saw %r" % origin.keys[n:])


NODE = r"""
const http = require('http'), tls = require('tls');
const [ph, ph_port] = process.env.PROXY.split(':');
const req = http.request({host: ph, port: +ph_port, method: 'CONNECT',
                          path: 'model.lab.test:443'});
req.on('connect', (res, sock) => {
  if (res.statusCode !== 200) { console.error('connect', res.statusCode); process.exit(2); }
  // default trust store + NODE_EXTRA_CA_CERTS (the run CA)
  const t = tls.connect({socket: sock, servername: 'model.lab.test',
                         ALPNProtocols: ['http/1.1']}, () => {
    t.write('GET /v1/stream HTTP/1.1\r\nHost: model.lab.test\r\nx-api-key: ' +
            process.env.PH + '\r\nConnection: close\r\n\r\n');
  });
  let out = '';
  t.on('data', d => { out += d; });
  t.on('end', () => { process.stdout.write(out); process.exit(0); });
  t.on('error', e => { console.error(String(e)); process.exit(3); });
});
req.on('error', e => { console.error(String(e)); process.exit(4); });
req.end();
setTimeout(() => { console.error('timeout'); process.exit(5); }, 20000);
"""


def t_node(L, d, origin, runca):
    n = len(origin.keys)
    script = os.path.join(L.workdir, "model-client.js")
    with open(script, "w") as f:
        f.write(NODE)
    env = ["env", "NODE_EXTRA_CA_CERTS=" + runca.cert, "PH=" + PLACEHOLDER,
           "PROXY=%s:%d" % L.proxy_of(0)]
    cp = L.run_in(L.workers[0].ns, env + ["node", script], timeout=30)
    check(cp.returncode == 0, "node rc %d: %s" % (cp.returncode, cp.stderr[-500:]))
    check('data: {"n": 4}' in out(cp), "node got %r" % out(cp)[:300])
    check(origin.keys[n:] == [KEY], "origin saw %r" % origin.keys[n:])


def tls_through(L, target, sni, cafile):
    """CONNECT target from worker 0, then TLS with sni verified against cafile."""
    r = L.connect(0, target)
    check(r.status == 200, "CONNECT %s: %r" % (target, r))
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["http/1.1"])
    r.sock.settimeout(10)
    return ctx.wrap_socket(r.sock, server_hostname=sni)


def read_all(t):
    buf = b""
    while True:
        try:
            d = t.recv(65536)
        except (OSError, ssl.SSLError):
            break
        if not d:
            break
        buf += d
    return buf


def t_inner_host_mismatch(L, d, origin, runca):
    n = len(origin.heads)
    t = tls_through(L, "model.lab.test:443", "model.lab.test", runca.cert)
    t.sendall(b"GET /v1/stream HTTP/1.1\r\nHost: other.lab.test\r\nx-api-key: %s\r\n\r\n"
              % PLACEHOLDER.encode())
    out = read_all(t)
    t.close()
    check(out.startswith(b"HTTP/1.1 403") and b"inner_host_mismatch" in out, "got %r" % out)
    check(len(origin.heads) == n, "the origin saw the request")
    wait_decision(d, lambda x: x.get("reason") == "inner_host_mismatch")


def t_placeholder_misdirected(L, d, origin, runca):
    """The placeholder sent anywhere egressd reads in clear but the intercepted credential
    header is refused: a granted plain-HTTP origin, and inside the interception."""
    before = L.count("http80")
    r = L.http(0, "GET", "http://origin.lab.test/", headers=[("Authorization",
                                                            "Bearer " + PLACEHOLDER)])
    check(r.status == 403 and r.egress_reason == "credential_misdirected", "%r" % r)
    check(L.count("http80") == before, "the origin saw the placeholder")
    # twin: the same request without it passes
    r = L.http(0, "GET", "http://origin.lab.test/")
    check(r.status == 200, "%r" % r)
    n = len(origin.heads)
    t = tls_through(L, "model.lab.test:443", "model.lab.test", runca.cert)
    t.sendall(b"GET /v1/stream?k=%s HTTP/1.1\r\nHost: model.lab.test\r\n\r\n"
              % PLACEHOLDER.encode())
    out = read_all(t)
    t.close()
    check(b"credential_misdirected" in out, "got %r" % out)
    check(len(origin.heads) == n, "the origin saw the request")


def t_bad_origin_cert(L, d, bad, runca):
    t = tls_through(L, "badcert.lab.test:443", "badcert.lab.test", runca.cert)
    t.sendall(b"GET /v1/stream HTTP/1.1\r\nHost: badcert.lab.test\r\n\r\n")
    out = read_all(t)
    t.close()
    check(out.startswith(b"HTTP/1.1 502") and b"origin_tls_failed" in out, "got %r" % out)
    rec = wait_decision(d, lambda x: x.get("reason") == "origin_tls_failed")
    check("hostname mismatch" in rec.get("tls_error", ""), "record %s" % rec)
    check(not bad.heads, "a request reached the origin with the bad certificate")


def t_sni_mismatch(L, d, other, labca):
    n = other.handshakes
    r = L.connect(0, "other.lab.test:443")
    check(r.status == 200, "CONNECT %r" % r)
    ctx = ssl.create_default_context(cafile=labca.cert)
    r.sock.settimeout(10)
    try:
        t = ctx.wrap_socket(r.sock, server_hostname="model.lab.test")
        t.close()
        check(False, "a handshake with SNI model.lab.test went through other.lab.test")
    except (ssl.SSLError, OSError):
        pass
    rec = wait_decision(d, lambda x: x.get("reason") == "sni_mismatch")
    check(rec.get("sni") == "model.lab.test" and rec.get("dest") == "other.lab.test:443",
          "record %s" % rec)
    check(other.handshakes == n, "the origin saw the mismatching hello")


def t_sni_wait_edges(L, d, other, labca):
    """The ClientHello wait after the 200 (egressd reads the worker's first bytes into its
    buffer and judges them after each read, sniguard.h): a hello sent in two pieces with a
    pause between is judged whole, and the handshake and a request go through; a worker
    that leaves before any byte, or is reset, ends with client_closed (no second decision);
    a hello that never completes is refused header_timeout when the 10 s wait is over."""
    # a hello in two pieces
    n = other.handshakes
    start = len(d.decisions())
    r = L.connect(0, "other.lab.test:443")
    check(r.status == 200, "CONNECT %r" % r)
    ctx = ssl.create_default_context(cafile=labca.cert)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, out, server_hostname="other.lab.test")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    r.sock.settimeout(10)
    r.sock.sendall(hello[:7])
    time.sleep(0.3)
    r.sock.sendall(hello[7:])
    deadline = time.monotonic() + 10
    done = False
    while not done and time.monotonic() < deadline:
        try:
            tls.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            pending = out.read()
            if pending:
                r.sock.sendall(pending)
            chunk = r.sock.recv(65536)
            check(chunk, "the tunnel closed during the handshake")
            inc.write(chunk)
    check(done, "no handshake through the split hello in 10 s")
    tls.write(b"GET / HTTP/1.1\r\nHost: other.lab.test\r\nConnection: close\r\n\r\n")
    r.sock.sendall(out.read())
    got = b""
    while time.monotonic() < deadline and b"HTTP/1.1" not in got:
        try:
            got += tls.read(65536)
        except ssl.SSLWantReadError:
            chunk = r.sock.recv(65536)
            if not chunk:
                break
            inc.write(chunk)
        except ssl.SSLError:
            break
    check(b"HTTP/1.1" in got, "no response through the split hello: %r" % got[:80])
    check(other.handshakes == n + 1, "handshakes %d -> %d" % (n, other.handshakes))
    r.sock.close()
    rec = d.wait_record(lambda x: x.get("event") == "close" and
                        x.get("dest") == "other.lab.test:443" and x.get("tls") is True and
                        x.get("sni") == "other.lab.test", timeout=5, start=start)
    check(rec is not None, "no close record with the split hello's name")
    # the worker leaves before its hello, or its connection is reset (with a few bytes of
    # it sent, so the reset is seen as one): client_closed, and no second decision
    for what, first, reset in (("left", b"", False), ("reset", hello[:3], True)):
        start = len(d.decisions())
        r = L.connect(0, "other.lab.test:443")
        check(r.status == 200, "CONNECT %r" % r)
        if first:
            r.sock.sendall(first)
            time.sleep(0.2)
        if reset:
            r.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        r.sock.close()
        rec = d.wait_record(lambda x: x.get("event") == "close" and
                            x.get("dest") == "other.lab.test:443", timeout=5, start=start)
        check(rec is not None and rec.get("reason") == "client_closed",
              "%s: close record %s" % (what, rec))
        check(not [x for x in d.decisions()[start:] if x.get("event") == "decision" and
                   x.get("verdict") == "deny"], "%s: a second decision" % what)
    # a hello that never completes: header_timeout after the wait (10 s)
    start = len(d.decisions())
    n = other.handshakes
    r = L.connect(0, "other.lab.test:443")
    check(r.status == 200, "CONNECT %r" % r)
    r.sock.sendall(hello[:40])
    rec = d.wait_record(lambda x: x.get("event") == "decision" and
                        x.get("reason") == "header_timeout", timeout=20, start=start)
    check(rec is not None and rec.get("dest") == "other.lab.test:443", "record %s" % rec)
    r.sock.settimeout(5)
    try:
        check(r.sock.recv(100) == b"", "the tunnel stayed open after the timeout")
    except OSError:
        pass
    r.sock.close()
    check(other.handshakes == n, "the origin saw the incomplete hello")


def t_sni_marked_tls_port(L, d, tls8443, raw9443, labca):
    """An https:// entry marks its destination as TLS on any port: other.lab.test:8443 is
    SNI-checked like port 443. Its twin, tcp://other.lab.test:9443, is not (a tcp entry
    says nothing about the protocol)."""
    # matching SNI: allowed, the close record carries the check
    t = tls_through(L, "other.lab.test:8443", "other.lab.test", labca.cert)
    t.close()
    rec = d.wait_record(lambda x: x.get("event") == "close" and
                        x.get("dest") == "other.lab.test:8443" and x.get("tls") is True and
                        x.get("sni") == "other.lab.test", timeout=5)
    check(rec is not None, "no checked close record for other.lab.test:8443")
    # the origin counts that handshake in its own thread, not necessarily before the close
    # record (seen once under load): counted first, or the next check races it
    check(bounded_wait(lambda: tls8443.handshakes >= 1, 5), "the origin saw no handshake")
    # mismatching SNI: refused before any byte reaches the origin, with its reason
    n = tls8443.handshakes
    r = L.connect(0, "other.lab.test:8443")
    check(r.status == 200, "CONNECT %r" % r)
    ctx = ssl.create_default_context(cafile=labca.cert)
    r.sock.settimeout(10)
    try:
        ctx.wrap_socket(r.sock, server_hostname="model.lab.test").close()
        check(False, "a hello naming model.lab.test went through other.lab.test:8443")
    except (ssl.SSLError, OSError):
        pass
    rec = wait_decision(d, lambda x: x.get("reason") == "sni_mismatch" and
                        x.get("dest") == "other.lab.test:8443")
    check(rec.get("verdict") == "deny" and rec.get("sni") == "model.lab.test", "%s" % rec)
    check(tls8443.handshakes == n, "the origin saw the mismatching hello")
    # no SNI at all: allowed and recorded (sni null), as on port 443
    r = L.connect(0, "other.lab.test:8443")
    check(r.status == 200, "CONNECT %r" % r)
    nosni = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    nosni.check_hostname = False
    nosni.verify_mode = ssl.CERT_NONE
    r.sock.settimeout(10)
    nosni.wrap_socket(r.sock, server_hostname=None).close()
    rec = d.wait_record(lambda x: x.get("event") == "close" and
                        x.get("dest") == "other.lab.test:8443" and x.get("tls") is True and
                        "sni" in x and x.get("sni") is None, timeout=5)
    check(rec is not None, "no close record with sni null for other.lab.test:8443")
    # twin: a tcp:// entry is not checked: the same mismatching hello reaches the origin
    n = raw9443.handshakes
    r = L.connect(0, "other.lab.test:9443")
    check(r.status == 200, "CONNECT %r" % r)
    r.sock.settimeout(10)
    nosni.wrap_socket(r.sock, server_hostname="model.lab.test").close()
    check(bounded_wait(lambda: raw9443.handshakes > n, 5),
          "the tcp:// destination did not see the handshake")
    check(not any(x.get("reason") == "sni_mismatch" and x.get("dest") == "other.lab.test:9443"
                  for x in d.decisions()), "a tcp:// tunnel was SNI-checked")


def t_metrics_inner(L, d):
    """Every inner request is a hop in the metrics as in the log: the decision counters
    match the decision records, by verdict and reason (inner refusals included), and the
    close counter the close records. Compared once nothing moves (bounded retries: a
    tunnel of an earlier case may still be writing its close)."""
    def compare():
        recs = d.decisions()
        txt = L.metrics_text(METRICS[1], METRICS[0])
        if len(d.decisions()) != len(recs):
            return None
        counts = {}
        for x in recs:
            if x.get("event") == "decision":
                k = (x.get("verdict"), x.get("reason"))
                counts[k] = counts.get(k, 0) + 1
        bad = [k for k, n in counts.items()
               if 'egressd_decisions_total{verdict="%s",reason="%s"} %d' % (k[0], k[1], n)
               not in txt]
        closes = sum(1 for x in recs if x.get("event") == "close")
        got = sum(int(ln.rsplit(" ", 1)[1]) for ln in txt.splitlines()
                  if ln.startswith("egressd_closes_total{"))
        return (recs, counts, txt, bad, closes, got)

    res = None
    for _ in range(50):
        res = compare()
        if res is not None and not res[3] and res[4] == res[5]:
            break
        time.sleep(0.1)
    check(res is not None, "the log kept moving")
    recs, counts, txt, bad, closes, got = res
    for reason in ("inner_host_mismatch", "origin_tls_failed", "credential_misdirected"):
        check(counts.get(("deny", reason), 0) > 0, "no %s record to compare" % reason)
    check(any(x.get("hop_kind") == "inner" and x.get("verdict") == "allow" for x in recs),
          "no inner allow record")
    check(not bad, "metrics disagree with the records for %s:\n%s" % (bad, "\n".join(
        ln for ln in txt.splitlines() if "decisions_total{" in ln)))
    check(got == closes, "close records %d, egressd_closes_total %d" % (closes, got))


def t_not_bound_opaque(L, d, other, labca, runca):
    # the origin's own certificate (lab CA), not a leaf of the run CA
    t = tls_through(L, "other.lab.test:443", "other.lab.test", labca.cert)
    issuer = dict(x[0] for x in t.getpeercert()["issuer"])
    t.close()
    check("egress lab CA" in issuer.get("commonName", ""), "issuer %s" % issuer)
    try:
        t = tls_through(L, "other.lab.test:443", "other.lab.test", runca.cert)
        t.close()
        check(False, "a run CA leaf was presented for a destination that is not bound")
    except ssl.SSLError:
        pass
    rec = d.wait_record(lambda x: x.get("event") == "close" and
                        x.get("dest") == "other.lab.test:443" and x.get("tls") is True and
                        x.get("reason") != "sni_mismatch", timeout=5)
    check(rec is not None and rec.get("sni") == "other.lab.test", "close %s" % rec)


def t_client_untrusting(L, d, origin, runca):
    n = len(origin.heads)
    cp = L.run_in(L.workers[0].ns, ["curl", "-sS", "--max-time", "10", "--proxy",
                                    proxy_url(L), "https://model.lab.test/v1/stream"],
                  timeout=30)
    check(cp.returncode != 0, "curl trusted a leaf it has no CA for")
    check(bounded_wait(lambda: any(r.get("reason") == "client_tls_failed"
                                   for r in records(d, "close")), 5),
          "no client_tls_failed close record")
    check(len(origin.heads) == n, "the origin saw a request")


def t_grant_refusals(L, d, runca):
    w = L.workers[0]
    base = {"principal": "w1-x", "allow": ["https://model.lab.test"],
            "limits": {"lifetime_s": 60}}
    r = d.control({"op": "grant.create", "listen": "%s:3199" % w.host_addr,
                   "interface": w.host_if, "grant": dict(base, connection="nope")})
    check(not r.get("ok") and r.get("error") == "unknown_connection", "%s" % r)
    r = d.control({"op": "grant.create", "listen": "%s:3199" % w.host_addr,
                   "interface": w.host_if, "grant": dict(base, connection="model")})
    check(not r.get("ok") and r.get("error") == "ca_unavailable", "%s" % r)


SANDBOX_SCRIPT = r"""
set -u
echo "PH=$MODEL_API_KEY"
curl -sS -N --max-time 15 -H "x-api-key: $MODEL_API_KEY" \
    https://model.lab.test/v1/stream > /tmp/model.out 2>&1
echo "CURL_RC=$?"
grep -c 'data: {"n": 4}' /tmp/model.out | sed 's/^/EVENTS=/'
echo "SSL_CERT_FILE=${SSL_CERT_FILE:-unset} NODE_EXTRA_CA_CERTS=${NODE_EXTRA_CA_CERTS:-unset}"
printf '%s%s' 'REAL-0f1e' '2d3c4b5a' > /tmp/.pat
printf 'x%sy\n' "$(cat /tmp/.pat)" > /tmp/canary
for f in $(find /etc /tmp /work /run /var /home /root /opt /srv /mnt /dev/shm \
        -xdev -type f -readable 2>/dev/null) /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do
    [ "$f" = /tmp/.pat ] && continue
    grep -q -a -F -f /tmp/.pat "$f" 2>/dev/null && echo "FOUND:$f"
done
env | grep -q -F -f /tmp/.pat && echo "FOUND:env"
echo SCAN_DONE
"""


def t_sandbox(L, d, origin, conns):
    """egress-exec run, model_only preset naming the connection: the run CA is made and
    handed to egressd, the CA bundle and variables are in the sandbox, the worker reaches
    the model with a placeholder, and the key is nowhere the worker can read."""
    import shutil
    import subprocess
    import tempfile
    import test_orchestrate_local as local
    top = tempfile.mkdtemp(prefix="egress-mc-")
    os.chmod(top, 0o755)
    try:
        c = local.Case(top, "model")
        preset = ("[preset]\nname = model-shell\nexecutable = /bin/sh\nargv = sh\n"
                  "argv = -s\nprompt_transport = stdin\n"
                  "network_policy = model_only\nmodel_connection = model\n"
                  "placeholder_env = MODEL_API_KEY\n"
                  "[ceilings]\nwall_seconds = 60\ncpu_millicores = 1000\n"
                  "memory_bytes = 256M\ndisk_bytes = 64M\nprocesses = 64\n"
                  "output_bytes = 64K\n")
        wu = local.workunit(SANDBOX_SCRIPT, network="allowlist",
                            destinations=["https://model.lab.test"], output_bytes="64K",
                            wall_seconds="40")
        wu_path = os.path.join(c.dir, "wu.ini")
        with open(wu_path, "w") as f:
            f.write(wu)
        with open(c.preset, "w") as f:
            f.write(preset)
        n = len(origin.keys)
        p = subprocess.run(["nsenter", "--net=/run/netns/" + L.ns_host,
                            lab.binary("egress-exec"), "run", "--workunit", wu_path,
                            "--preset", c.preset, "--repo", c.repo, "--out", c.out,
                            "--egressd-control", d.control_path, "--trusted-models", conns],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
        stdout = (c.artifact("stdout.log") or b"").decode(errors="replace")
        check(p.returncode == 0, "egress-exec rc %d: %s\n%s" % (
            p.returncode, p.stderr.decode(errors="replace")[-800:], stdout[-800:]))
        check("CURL_RC=0" in stdout and "EVENTS=1" in stdout, "worker output %r" % stdout)
        check("SSL_CERT_FILE=/etc/egress/ca-bundle.pem" in stdout, stdout)
        check("PH=egress-placeholder-" in stdout, "placeholder %r" % stdout[:200])
        check("SCAN_DONE" in stdout and "FOUND:/tmp/canary" in stdout,
              "the scan does not work: %r" % stdout)
        leaks = [x for x in stdout.splitlines() if x.startswith("FOUND:") and
                 x != "FOUND:/tmp/canary"]
        check(not leaks, "the key is readable inside the sandbox: %s" % leaks)
        check(origin.keys[n:] == [KEY], "origin saw %r" % origin.keys[n:])
    finally:
        shutil.rmtree(top, ignore_errors=True)

def t_reload_keeps_credentials(L, d, origin, runca):
    """egressd runs as its drop account: a SIGHUP/control reload cannot read the root-only
    credential file again, and keeps the credential start-up read (as proxy_credentials);
    the interception works after it with the real key."""
    st = os.stat(os.path.join(L.workdir, "model.key"))
    check(st.st_uid == 0 and st.st_mode & 0o077 == 0, "the key file is not root-only")
    with open("/proc/%d/status" % d.proc.pid) as f:
        uids = [ln.split()[1:] for ln in f if ln.startswith("Uid:")][0]
    check(all(u != "0" for u in uids), "egressd did not drop root: %s" % uids)
    r = d.control({"op": "reload"})
    check(r.get("ok"), "reload with a root-only credential file failed: %s" % r)
    t_curl(L, d, origin, runca)


def t_check_every_error(L, d):
    """egressd -t names every problem of the connections file with its file:line."""
    bad = os.path.join(L.workdir, "bad-models.ini")
    with open(bad, "w") as f:
        f.write("[connection a]\n"
                "destination = https://*.lab.test\n"             # 2
                "credential_file = /nonexistent/key\n"
                "[connection b]\n"
                "destination = https://b.lab.test\n"
                "credential_file = /nonexistent/key\n"
                "allow_method = post\n"                          # 7
                "allow_path = v1\n")                             # 8
    os.chmod(bad, 0o644)
    c = L.egressd(settings={"connections": bad}, start=False)
    rc, out_, err = c.check_config()
    check(rc == 1, "egressd -t accepted a broken connections file: %s %s" % (out_, err))
    for want in ("bad-models.ini:2: [connection a] destination",
                 "bad-models.ini:7: allow_method 'post'", "bad-models.ini:8: allow_path 'v1'"):
        check(want in err, "egressd -t does not say %r:\n%s" % (want, err))


def t_reload_drops_connection(L, d):
    """A reload that removes the connections file: the grant that names one can no longer
    be served as intercepted, and nothing falls back to opaque (connection_unavailable)."""
    for k in ("connections", "origin_ca_file"):
        d.settings.pop(k, None)
    d.write_config()
    r = d.control({"op": "reload"})
    check(r.get("ok"), "reload %s" % r)
    with L.no_origin_connection():
        r = L.connect(0, "model.lab.test:443")
        check(r.status == 503 and r.egress_reason == "connection_unavailable", "%r" % r)
        r.close()


def t_inner_close_held(L, labca, runca, freed):
    """An inner request allowed before the decision log's disk filled ends while the log is
    failed: its close record is held, like an outer hop's (test_fault_log,
    close_held_at_stop; labtools/logfault.py). freed: the space returns before the stop,
    which writes the held close before its stop record. Not freed: egressd names the lost
    close (its hop) at the stop and counts it."""
    mnt = logfault.logfs(L, "logfs-inner-%d" % freed)
    d = None
    try:
        ed.give_to_run_user(mnt, 0o750)
        d = setup_egressd(L, labca, runca, {"decision_log": os.path.join(mnt, "d.jsonl"),
                                            "drain_timeout": "2s", "metrics_listen": None})
        # slow.lab.test streams 150 events 20 ms apart: the answer outlasts the fill
        t = tls_through(L, "slow.lab.test:443", "slow.lab.test", runca.cert)
        t.sendall(("GET /v1/stream HTTP/1.1\r\nHost: slow.lab.test\r\nx-api-key: %s\r\n"
                   "\r\n" % PLACEHOLDER).encode())
        got = b""
        while b"data:" not in got:   # bounded by the socket's 10 s timeout
            c = t.recv(4096)
            check(c, "the stream ended before its first event")
            got += c
        rec = wait_decision(d, lambda x: x.get("hop_kind") == "inner" and
                            x.get("dest") == "slow.lab.test:443")
        filler = os.path.join(mnt, "filler")
        logfault.fail_log(L, filler, "model.lab.test:443")
        while not got.endswith(b"0\r\n\r\n"):   # the rest of the stream, then its end
            c = t.recv(65536)
            check(c, "the stream ended early")
            got += c
        t.close()
        check(bounded_wait(lambda: d.control({"op": "status"}).get("connections") == 0, 5,
                           step=0.1), "the tunnel did not end:\n%s" % d.stderr_tail(5))
        logfault.held_close_at_stop(
            d, rec["hop"], filler, freed,
            lambda c: None if c.get("status") == 200 and c.get("intercepted") is True else
            "not the inner request's close (status 200, intercepted)")
        cp = netns.run([lab.binary("egressctl"), "log", "verify", d.log_path], check=False)
        check(cp.returncode == 0, "chain: %s %s" % (cp.stdout, cp.stderr))
    finally:
        if d is not None and d.alive():
            d.stop()
        logfault.umount(mnt)


def main():
    lab.require_root()
    require_binaries("egressd", "egressctl")
    for tool in ("curl", "node", "openssl"):
        if not any(os.access(os.path.join(p, tool), os.X_OK)
                   for p in os.environ.get("PATH", "").split(":")):
            print("FAIL: %s is not installed (scripts/deps.sh)" % tool)
            print("0 passed, 1 failed")
            return 1
    res = Results()
    with Lab(workers=1, zone=ZONE) as L:
        proxies.add_addresses(L, MODEL_ADDR, BAD_ADDR, OTHER_ADDR, SLOW_ADDR)
        labca = proxies.LabCA(L)
        runca = proxies.LabCA(L, "runca")
        mc, mk = labca.server_cert("model.lab.test", ["model.lab.test"])
        oc, ok = labca.server_cert("other.lab.test", ["other.lab.test"])
        origin = modelorigin.ModelOrigin(L, MODEL_ADDR, 443, mc, mk, KEY).start()
        # badcert.lab.test presents model.lab.test's certificate: hostname mismatch
        bad = modelorigin.ModelOrigin(L, BAD_ADDR, 443, mc, mk, KEY).start()
        other = modelorigin.ModelOrigin(L, OTHER_ADDR, 443, oc, ok, KEY).start()
        tls8443 = modelorigin.ModelOrigin(L, OTHER_ADDR, 8443, oc, ok, KEY).start()
        raw9443 = modelorigin.ModelOrigin(L, OTHER_ADDR, 9443, oc, ok, KEY).start()
        sc, sk = labca.server_cert("slow.lab.test", ["slow.lab.test"])
        slow = modelorigin.ModelOrigin(L, SLOW_ADDR, 443, sc, sk, KEY, events=150).start()
        d = setup_egressd(L, labca, runca)
        for name, fn, args in (
                ("curl_placeholder_gets_stream", t_curl, (origin, runca)),
                ("python_urllib", t_python, (origin, runca)),
                ("node20", t_node, (origin, runca)),
                ("inner_host_mismatch", t_inner_host_mismatch, (origin, runca)),
                ("placeholder_misdirected", t_placeholder_misdirected, (origin, runca)),
                ("origin_bad_certificate_502", t_bad_origin_cert, (bad, runca)),
                ("opaque_sni_mismatch", t_sni_mismatch, (other, labca)),
                ("sni_wait_split_left_timeout", t_sni_wait_edges, (other, labca)),
                ("not_bound_stays_opaque", t_not_bound_opaque, (other, labca, runca)),
                ("sni_checked_on_marked_tls_port", t_sni_marked_tls_port,
                 (tls8443, raw9443, labca)),
                ("worker_without_run_ca", t_client_untrusting, (origin, runca)),
                ("grant_refusals", t_grant_refusals, (runca,)),
                ("sandbox_run_ca_and_no_key_inside", t_sandbox,
                 (origin, os.path.join(L.workdir, "trusted-models.ini")))):
            res.run(name, fn, L, d, *args)
        res.run("metrics_count_inner_hops", t_metrics_inner, L, d)
        res.run("reload_keeps_credentials", t_reload_keeps_credentials, L, d, origin, runca)
        res.run("check_reports_every_error", t_check_every_error, L, d)
        res.run("reload_drops_connection", t_reload_drops_connection, L, d)
        res.run("egressd_clean_exit", stop_clean, d)
        for freed in (True, False):
            res.run("inner_close_held_%s" % ("space_back" if freed else "disk_full"),
                    t_inner_close_held, L, labca, runca, freed)
        for o in (origin, bad, other, tls8443, raw9443, slow):
            o.stop()
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
