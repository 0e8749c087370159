#!/usr/bin/env python3
"""The decision log as an audit trail, end to end on a real egressd: with log_max_bytes
the log rotates by itself and each new file starts with a rotate record naming the file
before it; with log_hmac_key the chain verifies only with the key (egressctl log verify
--key; no key or a wrong key fails); egressctl log query/summary/export count exactly the
hops made; every member of every record egressd wrote is documented in
docs/decision-log.md; the syslog mirror (log_syslog) delivers every record as an RFC 5424
message carrying the file's exact line."""

import glob
import hashlib
import gzip
import json
import os
import re
import shutil
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from lab import Lab, Results  # noqa: E402
from labtools import proxyclient  # noqa: E402
from labtools import chromium  # noqa: E402
from labtools.checks import stop_clean, allowed_tunnel, check, refused, require_binaries  # noqa: E402

ZONE = {
    "ok.lab.test": {"A": [lab.HTTP_ORIGIN]},
    "echo.lab.test": {"A": [lab.ECHO_ORIGIN]},
    "no.lab.test": {"A": [lab.HTTP_ORIGIN]},
}
GRANT = ["https://ok.lab.test", "http://ok.lab.test", "tcp://echo.lab.test:7"]
PRINCIPAL = "audited"
DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "docs", "decision-log.md")


class Collector:
    """A unix datagram syslog collector drained by a thread (the kernel queue is short)."""

    def __init__(self, path):
        self.path = path
        self.msgs = []
        self.stop = False
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        # Writable by everyone, as /dev/log is: egressd sends after dropping root.
        os.chmod(path, 0o666)
        self.sock.settimeout(0.1)
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            try:
                self.msgs.append(self.sock.recv(65536))
            except socket.timeout:
                continue
            except OSError:
                return

    def close(self):
        self.stop = True
        self.t.join(timeout=5)
        self.sock.close()


def files_of(d):
    """Rotated files (their names sort in chain order), then the live file."""
    return sorted(glob.glob(d.log_path + ".*")) + [d.log_path]


def records_of(path, racing=False):
    """The records of path. racing: the log may be rotating right now (between the rename
    and the new file, the path briefly does not exist): treat a missing file as empty;
    and egressd may be writing right now (a reader can see part of a write(2): the file
    grows page by page): leave out a last line without its newline."""
    try:
        with open(path) as f:
            lines = f.readlines()
    except FileNotFoundError:
        if racing:
            return []
        raise
    if racing and lines and not lines[-1].endswith("\n"):
        lines.pop()
    return [json.loads(line) for line in lines if line.strip()]


def lines_of(paths):
    out = []
    for p in paths:
        with open(p) as f:
            out += [line.rstrip("\n") for line in f if line.strip()]
    return out


def make_traffic(L, d, st):
    """Tunnels, an HTTP request and denials until the log has rotated twice (bounded)."""
    st["allow"] = st["deny"] = st["tunnels"] = 0
    for _ in range(2):
        r = L.connect(0, "echo.lab.test:7")
        allowed_tunnel(r)
        check(proxyclient.tunnel_echo(r.sock, b"x" * 1000) == b"x" * 1000, "echo")
        r.close()
        st["allow"] += 1
        st["tunnels"] += 1
    h = L.http(0, "GET", "http://ok.lab.test/")
    check(h.status == 200, "%r" % h)
    st["allow"] += 1
    h = L.http(0, "GET", "http://ok.lab.test/no/such/page")   # the origin answers 404
    check(h.status == 404, "%r" % h)
    st["allow"] += 1
    for _ in range(200):
        refused(L.connect(0, "no.lab.test:443"), 403, "not_granted")
        st["deny"] += 1
        if len(files_of(d)) >= 3:
            break
    # every record on disk: closes and denials are written without anyone waiting
    want = st["allow"] + st["deny"] + st["tunnels"] + 2     # + the GETs' closes
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        recs = [r for p in files_of(d) for r in records_of(p, racing=True)]
        if sum(1 for r in recs if r.get("event") in ("decision", "close")) >= want:
            break
        time.sleep(0.1)
    check(len(files_of(d)) >= 3, "no rotation after %d denials: %s" % (st["deny"],
                                                                     files_of(d)))


def t_rotation_chain(L, d, st):
    files = files_of(d)
    for prev, cur in zip(files, files[1:]):
        first = records_of(cur)[0]
        check(first["event"] == "rotate", "%s starts with %s" % (cur, first["event"]))
        check(first["previous_file"] == prev, "previous_file %r, want %r"
              % (first["previous_file"], prev))
        check(first["cause"] == "max_bytes", "cause %r" % first["cause"])
        last = records_of(prev)[-1]
        check(first["previous_seq"] == last["seq"] and first["prev"] == last["hash"],
              "rotate record does not carry the previous file's last record")
        check(re.search(r"\.\d{12}$", prev) or prev == d.log_path, "rotated name %s" % prev)
        check(os.path.getsize(prev) <= 32768, "%s is %d bytes" % (prev, os.path.getsize(prev)))


def t_verify_keyed(L, d, st):
    files = files_of(d)
    rc, out, err = d.egressctl("log", "verify", "--key", st["key"], *files)
    check(rc == 0 and "intact" in out and "HMAC" in out, "with the key: %s %s" % (out, err))
    rc, out, err = d.egressctl("log", "verify", *files)
    check(rc == 1 and "edited" in out and "--key" in out, "without the key: %s %s" % (out, err))
    rc, out, err = d.egressctl("log", "verify", "--key", st["wrong"], *files)
    check(rc == 1 and "edited" in out, "wrong key: %s %s" % (out, err))
    # a rotated file missing from the middle
    rc, out, err = d.egressctl("log", "verify", "--key", st["key"], files[0], *files[2:])
    check(rc == 1 and "deleted" in out, "missing middle file: %s %s" % (out, err))


def t_query_counts(L, d, st):
    files = files_of(d)
    rc, out, err = d.egressctl("log", "query", "--principal", PRINCIPAL, "--verdict", "deny",
                               *files)
    check(rc == 0, err)
    lines = out.splitlines()
    check(len(lines) == st["deny"], "%d deny records, %d denials made" % (len(lines),
                                                                          st["deny"]))
    check(all(json.loads(x)["reason"] == "not_granted" for x in lines), "reasons")
    rc, out, err = d.egressctl("log", "query", "--principal", PRINCIPAL, "--verdict", "allow",
                               "--table", *files)
    check(rc == 0 and len(out.splitlines()) == 1 + st["allow"], out)
    rc, out, err = d.egressctl("log", "query", "--event", "rotate", *files)
    check(len(out.splitlines()) == len(files) - 1, "rotate records: %s" % out)
    rc, out, err = d.egressctl("log", "query", "--dest", "echo.lab.test:*", "--event",
                               "close", *files)
    check(len(out.splitlines()) == st["tunnels"], "echo closes: %s" % out)


def t_gz_rotated(L, d, st):
    """logrotate's compress: the oldest rotated file as .gz reads and verifies like the
    plain one; negative twins: a cut .gz and a gzip bomb are errors, not shorter logs."""
    files = files_of(d)
    gz = os.path.join(L.workdir, os.path.basename(files[0]) + ".gz")
    with open(files[0], "rb") as f, gzip.open(gz, "wb") as g:
        g.write(f.read())
    rc, out, err = d.egressctl("log", "verify", "--key", st["key"], gz, *files[1:])
    check(rc == 0 and "intact" in out, "verify with .gz: %s %s" % (out, err))
    rc, out, err = d.egressctl("log", "query", "--principal", PRINCIPAL, "--verdict", "deny",
                               gz, *files[1:])
    check(rc == 0 and len(out.splitlines()) == st["deny"], "query with .gz: %s" % err)
    with open(gz, "rb") as f:
        data = f.read()
    cut = gz + ".cut.gz"
    with open(cut, "wb") as f:
        f.write(data[:len(data) // 2])
    rc, out, err = d.egressctl("log", "verify", "--key", st["key"], cut, *files[1:])
    check(rc == 1 and "corrupt or cut gzip" in out, "cut .gz: %s %s" % (out, err))
    bomb = os.path.join(L.workdir, "bomb.jsonl.gz")
    with gzip.open(bomb, "wb", compresslevel=9) as g:
        for _ in range(64):
            g.write(b"\0" * (1 << 20))
    rc, out, err = d.egressctl("log", "summary", "--format", "json", bomb)
    check(rc == 1 and "decompression bomb" in err, "bomb: %s %s" % (out[:200], err))
    os.unlink(bomb)


def _chain_lines(recs):
    """Records (time, event, fields dict) as a hash chain, the bytes egressd writes."""
    out, prev = [], "0" * 64
    for seq, (t, ev, fields) in enumerate(recs, 1):
        body = json.dumps(dict([("v", 2), ("time", t), ("seq", seq), ("event", ev)] +
                               list(fields.items()) + [("prev", prev)]),
                          separators=(",", ":"))
        h = hashlib.sha256((prev + "\n" + body).encode()).hexdigest()
        out.append(body[:-1] + ',"hash":"%s"}' % h)
        prev = h
    return out


def t_html_report_in_chromium(L, d, st):
    """A big, hostile log (300 principals with 64-character names, 253-character host
    names, an edited and a deleted record) makes a bounded report that fits 1280 px in
    headless Chromium: no element past the right edge, top 50 principals and top 200
    pairs with a "more" row each, both warnings; a screenshot is kept for people."""
    recs = []
    for i in range(300):
        p = ("run-%03d-" % i) + "x" * 56
        for k in range(2):
            host = ("h%d-" % k) + "a" * 60 + "." + "b" * 60 + "." + "c" * 60 + "." + \
                "d" * 58 + ".example"
            recs.append(("2026-12-01T10:%02d:%02d.000000Z" % (i // 60, i % 60), "decision",
                         {"conn": "c-%d" % i, "principal": p, "grant_id": None,
                          "method": "CONNECT", "target": host + ":443",
                          "dest": host + ":443", "verdict": "deny" if k else "allow",
                          "reason": "not_granted" if k else "allowed", "route": "direct",
                          "route_source": "direct", "resolved": [], "classes_dropped": [],
                          "pinned": None, "attested": True, "resolve_us": 1,
                          "connect_us": 1}))
    lines = _chain_lines(recs)
    lines[10] = lines[10].replace('"verdict":"allow"', '"verdict":"deny!"')   # edited
    del lines[20]                                                              # deleted
    log = os.path.join(L.workdir, "big.jsonl")
    with open(log, "w") as f:
        f.write("\n".join(lines) + "\n")
    html = os.path.join(L.workdir, "big.html")
    rc, out, err = d.egressctl("log", "summary", "--format", "html", "-o", html, log)
    check(rc == 0, err)
    size = os.path.getsize(html)
    check(size < 400 * 1024, "report of %d bytes" % size)
    png = os.path.join(L.workdir, "report-1280.png")
    m = chromium.render(html, png, ns=L.ns_host, width=1280, height=900)
    check(m["scroll_width"] <= m["client_width"] == 1280 and not m["wide"],
          "the page is wider than 1280 px: %r" % m)
    check(m["svgs"] == 3, "charts: %r" % m)
    check(len(m["more"]) == 2 and "250 more principals" in m["more"][0] and
          "398 more principal/destination pairs" in m["more"][1], "more rows: %r" % m["more"])
    check(m["rows"] == 2 + 50 + 1 + 200 + 1, "rows: %r" % m["rows"])
    check(set(m["warnings"]) == {"warning", "warning-deleted"}, "warnings: %r" % m)
    with open(png, "rb") as f:
        head = f.read(8)
    check(head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 50000,
          "screenshot %s: %d bytes" % (png, os.path.getsize(png)))
    keep = os.environ.get("EGRESS_REPORT_SCREENSHOT")
    if keep:
        shutil.copy(png, keep)
    # the edited record is not in the totals: 599 records read, 1 edited -> 598
    rc, out, err = d.egressctl("log", "summary", "--format", "json", log)
    s = json.loads(out)
    check(s["records"] == 598 and s["bad_hash"] == 1 and s["deleted"] == 1,
          "json summary: %r" % {k: s.get(k) for k in ("records", "bad_hash", "deleted")})


def t_summary_counts(L, d, st):
    files = files_of(d)
    rc, out, err = d.egressctl("log", "summary", "--format", "json", "--key", st["key"],
                               *files)
    check(rc == 0, err)
    s = json.loads(out)
    p = s["principals"][PRINCIPAL]
    check(p["deny"] == st["deny"] and p["allow"] == st["allow"], "summary %s" % p)
    check(p["denials_by_reason"] == {"not_granted": st["deny"]}, "%s" % p)
    check(p["closes"] == st["tunnels"] + 2 and p["bytes_up"] >= 2000, "%s" % p)
    check(p["unattested_share"] == 0.0, "%s" % p)
    html = os.path.join(L.workdir, "audit.html")
    rc, out, err = d.egressctl("log", "summary", "--format", "html", "-o", html, "--key",
                               st["key"], *files)
    check(rc == 0, err)
    with open(html) as f:
        page = f.read()
    check(page.count("<svg") == 3 and PRINCIPAL in page and "<script" not in page, "report")


def t_squid_export(L, d, st):
    rc, out, err = d.egressctl("log", "export", "--format", "squid", *files_of(d))
    check(rc == 0, err)
    lines = out.splitlines()
    for x in lines:
        check(len(x.split()) == 10, "squid line %r" % x)
    codes = [x.split()[3] for x in lines]
    check(codes.count("TCP_DENIED/403") == st["deny"], "denied lines")
    check(codes.count("TCP_TUNNEL/200") == st["tunnels"], "tunnel lines")
    # the origin's status from the close record: an origin 404 is not TCP_MISS/200
    check(codes.count("TCP_MISS/200") == 1, "GET 200 line: %r" % codes)
    check(codes.count("TCP_MISS/404") == 1, "GET 404 line: %r" % codes)
    closes = [r for p in files_of(d) for r in records_of(p)
              if r.get("event") == "close" and "status" in r]
    check(sorted(r["status"] for r in closes) == [200, 404], "close status: %r" % closes)
    check(all(x.split()[7] == PRINCIPAL for x in lines), "user field")


def t_fields_documented(L, d, st):
    with open(DOC) as f:
        rows = [ln for ln in f if ln.startswith("|")]
    keys = set()
    for p in files_of(d):
        for r in records_of(p):
            keys.update(r.keys())
    missing = sorted(k for k in keys if not any("`%s`" % k in ln for ln in rows))
    check(not missing, "fields egressd wrote but docs/decision-log.md does not document: %s"
          % missing)


def t_syslog_mirror(L, d, st):
    """Best effort by design (a full collector queue drops, never delays a hop): every
    message that arrived is exact and in order; most arrive even with the kernel's short
    unix datagram queue (net.unix.max_dgram_qlen) and a Python collector."""
    lines = lines_of(files_of(d))
    deadline = time.monotonic() + 3
    while len(st["collector"].msgs) < len(lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    msgs = [m.decode() for m in st["collector"].msgs]
    check(len(msgs) >= min(len(lines), 20), "%d messages for %d records"
          % (len(msgs), len(lines)))
    i = 0
    for m in msgs:
        check(re.match(r"^<1(09|10)>1 \d{4}-\d\d-\d\dT\S+Z \S+ egressd \d+ [a-z_]+ "
                       r"\[egress@32473 seq=\"\d+\"", m), "header %r" % m[:120])
        while i < len(lines) and not m.endswith("] " + lines[i]):
            i += 1
        check(i < len(lines), "message is not a file line (or out of order): %r" % m[-120:])
        if '"verdict":"deny"' in lines[i]:
            check(m.startswith("<109>"), "deny is notice")
        i += 1
    print("  syslog: %d of %d records arrived" % (len(msgs), len(lines)))


def main():
    lab.require_root()
    require_binaries("egressd", "egressctl")
    res = Results()
    with Lab() as L:
        L.set_zone(ZONE)
        st = {"key": os.path.join(L.workdir, "log.key"),
              "wrong": os.path.join(L.workdir, "wrong.key")}
        for path in (st["key"], st["wrong"]):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, os.urandom(32).hex().encode() + b"\n")
            os.close(fd)
        st["collector"] = Collector(os.path.join(L.workdir, "syslog-%d.sock" % os.getpid()))
        try:
            d = L.egressd(settings={"log_max_bytes": "32768", "log_hmac_key": st["key"],
                                    "log_syslog": "unix:" + st["collector"].path})
            L.grant(d, 0, GRANT, principal=PRINCIPAL)
            for name, fn in (("traffic", make_traffic),
                             ("rotation_continues_chain", t_rotation_chain),
                             ("verify_keyed_chain", t_verify_keyed),
                             ("query_counts", t_query_counts),
                             ("gz_rotated_files", t_gz_rotated),
                             ("summary_counts", t_summary_counts),
                             ("html_report_in_chromium", t_html_report_in_chromium),
                             ("squid_export", t_squid_export),
                             ("fields_documented", t_fields_documented),
                             ("syslog_mirror", t_syslog_mirror)):
                res.run(name, fn, L, d, st)
            res.run("egressd_clean_exit", stop_clean, d)
        finally:
            st["collector"].close()
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
