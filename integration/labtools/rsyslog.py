"""A real rsyslog from Debian (rsyslogd, imtcp, the ossl netstream driver of
rsyslog-openssl) as the decision log's syslog collector (docs/audit.md), inside a lab
namespace on loopback only.

One rsyslogd per instance, started by the lab (`rsyslogd -n -f CONF -i PIDFILE`, its own
configuration, work directory and output files under the lab workdir; no imuxsock, no
/dev/log, nothing of the machine's own syslog). Inputs:

    plain_port  imtcp, octet-counted framing (RFC 6587)            -> plain.log
    tls_port    imtcp over TLS (RFC 5425), ossl driver, a client     -> tls.log
                certificate required (x509/certvalid) from the test CA

Each output line is one received message as it arrived (%rawmsg%). The test CA and the
collector's and egressd's certificates are made by make_pki() with the openssl CLI.
"""

import os
import signal
import subprocess
import time

from labtools import netns

RSYSLOGD = "/usr/sbin/rsyslogd"
MODDIR = "/usr/lib/x86_64-linux-gnu/rsyslog"
SERVER_NAME = "syslog.lab.test"


def missing():
    """What is not installed: [paths] (rsyslog, rsyslog-openssl)."""
    want = [RSYSLOGD, os.path.join(MODDIR, "imtcp.so"), os.path.join(MODDIR, "lmnsd_ossl.so")]
    return [p for p in want if not os.path.exists(p)]


def _openssl(args, cwd):
    subprocess.run(["openssl"] + args, cwd=cwd, check=True, timeout=60,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_pki(d):
    """A test CA, the collector's certificate (DNS:syslog.lab.test, IP:127.0.0.1) and
    egressd's client certificate, in d. Returns a dict of paths."""
    os.makedirs(d, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    _openssl(["req", "-x509"] + ec + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
              "-subj", "/CN=egress test syslog CA",
              "-addext", "basicConstraints=critical,CA:TRUE",
              "-addext", "keyUsage=critical,keyCertSign,cRLSign"], d)
    for name, cn, ext in (
            ("server", SERVER_NAME, "subjectAltName=DNS:%s,IP:127.0.0.1\n"
             "extendedKeyUsage=serverAuth\n" % SERVER_NAME),
            ("client", "egressd.lab.test", "subjectAltName=DNS:egressd.lab.test\n"
             "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext)
        _openssl(["req"] + ec + ["-keyout", name + ".key", "-out", name + ".csr",
                                 "-subj", "/CN=" + cn], d)
        _openssl(["x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                  "-CAcreateserial", "-out", name + ".pem", "-days", "2",
                  "-extfile", name + ".ext"], d)
    for k in ("ca.key", "server.key", "client.key"):
        os.chmod(os.path.join(d, k), 0o600)
    return {k: os.path.join(d, f) for k, f in (
        ("ca", "ca.pem"), ("server_cert", "server.pem"), ("server_key", "server.key"),
        ("client_cert", "client.pem"), ("client_key", "client.key"))}


class Rsyslog:
    def __init__(self, lab, d, pki, plain_port=10514, tls_port=10515, ns=None):
        self.lab = lab
        self.ns = ns or lab.ns_host
        self.dir = d
        self.pki = pki
        self.plain_port = plain_port
        self.tls_port = tls_port
        self.conf = os.path.join(d, "rsyslog.conf")
        self.pidfile = os.path.join(d, "rsyslogd.pid")
        self.plain_out = os.path.join(d, "plain.log")
        self.tls_out = os.path.join(d, "tls.log")
        self.stderr_path = os.path.join(d, "rsyslogd.stderr")
        self.proc = None
        os.makedirs(os.path.join(d, "work"), exist_ok=True)

    def _config(self):
        p = self.pki
        return "\n".join([
            # before any input: messages are up to ~20 KiB (a record is up to 16 KiB)
            'global(workDirectory="%s/work" maxMessageSize="64k" net.enableDNS="off"' % self.dir,
            '       defaultNetstreamDriverCAFile="%s"' % p["ca"],
            '       defaultNetstreamDriverCertFile="%s"' % p["server_cert"],
            '       defaultNetstreamDriverKeyFile="%s")' % p["server_key"],
            'module(load="imtcp" maxSessions="64")',
            'template(name="raw" type="string" string="%rawmsg%\\n")',
            'ruleset(name="plain") {',
            '  action(type="omfile" file="%s" template="raw" flushOnTXEnd="on")' % self.plain_out,
            '}',
            'ruleset(name="tls") {',
            '  action(type="omfile" file="%s" template="raw" flushOnTXEnd="on")' % self.tls_out,
            '}',
            'input(type="imtcp" address="127.0.0.1" port="%d" ruleset="plain"' % self.plain_port,
            '      supportOctetCountedFraming="on")',
            'input(type="imtcp" address="127.0.0.1" port="%d" ruleset="tls"' % self.tls_port,
            '      supportOctetCountedFraming="on" streamDriver.name="ossl"',
            '      streamDriver.mode="1" streamDriver.authMode="x509/certvalid")',
            ""])

    def start(self, timeout=60.0):
        with open(self.conf, "w") as f:
            f.write(self._config())
        errf = open(self.stderr_path, "ab")
        try:
            self.proc = self.lab.spawn(self.ns, [RSYSLOGD, "-n", "-f", self.conf,
                                                 "-i", self.pidfile],
                                       stdout=errf, stderr=errf)
        finally:
            errf.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise netns.LabError("rsyslogd exited with %s:\n%s"
                                     % (self.proc.returncode, self.stderr_tail()))
            ok = 0
            for port in (self.plain_port, self.tls_port):
                try:
                    netns.connect_in(self.ns, "127.0.0.1", port, timeout=0.5).close()
                    ok += 1
                except OSError:
                    pass
            if ok == 2:
                return self
            time.sleep(0.05)
        raise netns.LabError("rsyslogd did not listen within %ss:\n%s"
                             % (timeout, self.stderr_tail()))

    def kill(self):
        """SIGKILL (a collector that dies), bounded wait."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        try:
            os.unlink(self.pidfile)
        except FileNotFoundError:
            pass

    def stop(self):
        """SIGTERM (rsyslog writes what it has), bounded wait, then SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()

    def stderr_tail(self, n=30):
        try:
            with open(self.stderr_path, "rb") as f:
                return "\n".join(f.read().decode("utf-8", "replace").splitlines()[-n:])
        except OSError:
            return "(no stderr)"

    @staticmethod
    def messages(path):
        """The messages received, as lines (a missing file: none). Complete lines only:
        omfile writes through a buffer (ioBufferSize, 4 KiB by default) that it flushes
        when full, so a reader can catch a message half-written; the part after the last
        newline is left for the next read."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        return [ln.decode("utf-8", "replace") for ln in data.split(b"\n")[:-1] if ln]
