"""Real upstream proxies and route fixtures for the lab (docs/routing.md), all inside the lab's
`inet` namespace: squid (no auth, Basic, Negotiate against a local MIT KDC), dante (SOCKS5,
no auth), and PAC fixtures (served by the lab's HTTP origin, as a file, and a server that
accepts and never answers).

Addresses (extra /32s on inet's loopback, documentation ranges only, via Lab.add_address):

    PROXY_ADDR   203.0.113.30  squid                     name proxy.lab.test
    PROXY2_ADDR  203.0.113.31  a second squid            name proxy2.lab.test
    DEAD_ADDR    203.0.113.39  nothing listens (refused)  name dead.lab.test
    SOCKS_ADDR   203.0.113.40  dante :1080               name socks.lab.test
    KDC_ADDR     203.0.113.88  krb5kdc :88 (udp+tcp)
    STALL_ADDR   203.0.113.50  :80 accepts and never answers

Every process is started with Lab.spawn (so the lab kills it at teardown too) and stopped
by its pid in stop(). Files (configs, logs, keytabs, databases) live under the lab workdir.

squid runs as its `proxy` user after start-up: its directory is chowned to proxy and the
lab workdir is made traversable (0711) so it can write its access log there.
"""

import os
import pwd
import shutil
import socket
import subprocess
import threading
import time

from labtools import netns, servers

PROXY_ADDR = "203.0.113.30"
PROXY2_ADDR = "203.0.113.31"
DEAD_ADDR = "203.0.113.39"
SOCKS_ADDR = "203.0.113.40"
KDC_ADDR = "203.0.113.88"
STALL_ADDR = "203.0.113.50"
SQUID_PORT = 3128
SOCKS_PORT = 1080
REALM = "LAB.TEST"

SQUID = "/usr/sbin/squid"
DANTED = "/usr/sbin/danted"
KRB5KDC = "/usr/sbin/krb5kdc"
KDB5_UTIL = "/usr/sbin/kdb5_util"
KADMIN_LOCAL = "/usr/sbin/kadmin.local"
NCSA_AUTH = "/usr/lib/squid/basic_ncsa_auth"
KRB_AUTH = "/usr/lib/squid/negotiate_kerberos_auth"


def missing_tools(*names):
    """Which of the named tools (squid, danted, kdc) are not installed: [paths]."""
    want = {"squid": [SQUID, NCSA_AUTH], "danted": [DANTED],
            "kdc": [KRB5KDC, KDB5_UTIL, KADMIN_LOCAL, KRB_AUTH]}
    out = []
    for n in names:
        out += [p for p in want[n] if not os.access(p, os.X_OK)]
    return out


def _wait_port(lab, addr, port, proc, timeout, what, logpath=None, ns=None):
    """Bounded wait until addr:port accepts inside ns (default inet), or proc died."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        try:
            s = netns.connect_in(ns or lab.ns_inet, addr, port, timeout=0.5)
            s.close()
            return
        except OSError as e:
            last = e
        time.sleep(0.05)
    tail = ""
    if logpath and os.path.exists(logpath):
        with open(logpath, "rb") as f:
            tail = f.read()[-2000:].decode("utf-8", "replace")
    raise netns.LabError("%s did not listen on %s:%d within %ss (exit %s, last %s)\n%s"
                         % (what, addr, port, timeout, proc.poll() if proc else None, last,
                            tail))


def _stop_proc(lab, p, timeout=5.0):
    if p is None:
        return
    if p.poll() is None:
        netns.kill_pid(p.pid, timeout=timeout)
    try:
        p.wait(timeout=1)
    except subprocess.TimeoutExpired:
        pass
    if p in lab.procs:
        lab.procs.remove(p)


def traversable_workdir(lab):
    """Let unprivileged lab peers (squid as `proxy`, egressd's route helper as nobody)
    traverse the lab workdir: 0711, no listing."""
    st = os.stat(lab.workdir)
    os.chmod(lab.workdir, (st.st_mode & 0o7777) | 0o711)


# --- squid ----------------------------------------------------------------------------

class Squid:
    """One squid (`squid -N -f CONF`) on addr:port in inet (or ns, e.g. the lab's host
    namespace for a proxy on 127.0.0.1).

    auth: None, "basic" (users {name: password}, a password file from `openssl passwd
    -apr1`, basic_ncsa_auth), "negotiate" (kdc: a KDC with the HTTP/<name> keytab,
    negotiate_kerberos_auth) or "ntlm" (ntlm_fake_auth: offers NTLM only). Its access log
    is access_log_lines()."""

    def __init__(self, lab, name="squid", addr=PROXY_ADDR, port=SQUID_PORT, auth=None,
                 users=None, kdc=None, service_name="proxy.lab.test", ns=None):
        self.lab = lab
        self.ns = ns or lab.ns_inet   # the lab's host namespace for a proxy on loopback
        self.name = name
        self.addr = addr
        self.port = port
        self.auth = auth
        self.users = dict(users or {})
        self.kdc = kdc
        self.service_name = service_name
        self.dir = os.path.join(lab.workdir, name)
        self.conf = os.path.join(self.dir, "squid.conf")
        self.access_log = os.path.join(self.dir, "access.log")
        self.cache_log = os.path.join(self.dir, "cache.log")
        self.stderr_path = os.path.join(self.dir, "stderr")
        self.proc = None

    @property
    def url(self):
        return "http://%s:%d" % (self.addr, self.port)

    def _config(self):
        d = self.dir
        lines = [
            "http_port %s:%d" % (self.addr, self.port),
            "pid_filename %s/squid.pid" % d,
            "access_log stdio:%s" % self.access_log,
            "cache_log %s" % self.cache_log,
            "cache_store_log none",
            "logfile_rotate 0",
            "coredump_dir %s" % d,
            "cache deny all",
            "cache_mem 4 MB",
            "dns_nameservers 198.51.100.53",
            "hosts_file none",
            "pinger_enable off",
            "icp_port 0",
            "htcp_port 0",
            "netdb_filename none",
            "shutdown_lifetime 0 seconds",
            "visible_hostname %s" % self.service_name,
            "cache_effective_user proxy",
            "client_persistent_connections on",
            "forwarded_for delete",
            "via off",
            "strip_query_terms off",
        ]
        if self.auth == "basic":
            lines += [
                "auth_param basic program %s %s/passwd" % (NCSA_AUTH, d),
                "auth_param basic children 2 startup=1 idle=1",
                "auth_param basic realm lab",
                "acl authed proxy_auth REQUIRED",
                "http_access allow authed",
                "http_access deny all",
            ]
        elif self.auth == "negotiate":
            lines += [
                "auth_param negotiate program %s -k %s -s HTTP/%s@%s"
                % (KRB_AUTH, self.kdc.http_keytab, self.service_name, REALM),
                "auth_param negotiate children 2 startup=1 idle=1",
                "auth_param negotiate keep_alive on",
                "acl authed proxy_auth REQUIRED",
                "http_access allow authed",
                "http_access deny all",
            ]
        elif self.auth == "ntlm":
            # NTLM choreography only: ntlm_fake_auth accepts any well-formed exchange
            lines += [
                "auth_param ntlm program /usr/lib/squid/ntlm_fake_auth",
                "auth_param ntlm children 2 startup=1 idle=1",
                "auth_param ntlm keep_alive on",
                "acl authed proxy_auth REQUIRED",
                "http_access allow authed",
                "http_access deny all",
            ]
        else:
            lines += ["http_access allow all"]
        return "\n".join(lines) + "\n"

    def start(self, timeout=20.0):
        if os.path.exists(self.dir):
            shutil.rmtree(self.dir)
        os.makedirs(self.dir)
        traversable_workdir(self.lab)
        pw = pwd.getpwnam("proxy")
        if self.auth == "basic":
            rows = []
            for u, p in self.users.items():
                cp = netns.run(["openssl", "passwd", "-apr1", p])
                rows.append("%s:%s" % (u, cp.stdout.strip()))
            with open(os.path.join(self.dir, "passwd"), "w") as f:
                f.write("\n".join(rows) + "\n")
        if self.auth == "negotiate":
            # the HTTP service keytab must be readable by squid's helper (user proxy)
            os.chown(self.kdc.http_keytab, pw.pw_uid, pw.pw_gid)
        with open(self.conf, "w") as f:
            f.write(self._config())
        for root, dirs, files in os.walk(self.dir):
            for n in dirs + files:
                os.chown(os.path.join(root, n), pw.pw_uid, pw.pw_gid)
        os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        env = dict(os.environ)
        if self.kdc is not None:
            env.update(self.kdc.env())
            # a replay cache in squid's own directory: a reused Negotiate token is refused
            env["KRB5RCACHEDIR"] = self.dir
        errf = open(self.stderr_path, "wb")
        try:
            self.proc = self.lab.spawn(self.ns, [SQUID, "-N", "-f", self.conf],
                                       stdout=errf, stderr=errf, env=env)
        finally:
            errf.close()
        _wait_port(self.lab, self.addr, self.port, self.proc, timeout, "squid " + self.name,
                   self.cache_log, ns=self.ns)
        return self

    def stop(self):
        _stop_proc(self.lab, self.proc)
        self.proc = None

    def access_log_lines(self):
        try:
            with open(self.access_log, "rb") as f:
                return f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return []

    def wait_log(self, pred, timeout=5.0):
        """Bounded wait for an access-log line satisfying pred; the line or None. (squid
        writes a CONNECT's line when the tunnel ends.)"""
        deadline = time.monotonic() + timeout
        while True:
            for ln in self.access_log_lines():
                if pred(ln):
                    return ln
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)


# --- MIT KDC --------------------------------------------------------------------------

class KDC:
    """A throw-away MIT Kerberos realm (LAB.TEST) with every file in the lab workdir; the
    KDC listens on KDC_ADDR:88 inside inet. Principals: HTTP/<service> (keytab for squid)
    and a client (keytab for egressd)."""

    def __init__(self, lab, services=("proxy.lab.test",), client="egressd", addr=KDC_ADDR):
        self.lab = lab
        self.addr = addr
        self.services = list(services)
        self.client = client
        self.dir = os.path.join(lab.workdir, "kdc")
        self.krb5_conf = os.path.join(self.dir, "krb5.conf")
        self.kdc_conf = os.path.join(self.dir, "kdc.conf")
        self.http_keytab = os.path.join(self.dir, "http.keytab")
        self.client_keytab = os.path.join(self.dir, "client.keytab")
        self.log = os.path.join(self.dir, "kdc.log")
        self.proc = None

    @property
    def client_principal(self):
        return "%s@%s" % (self.client, REALM)

    def env(self):
        return {"KRB5_CONFIG": self.krb5_conf, "KRB5_KDC_PROFILE": self.kdc_conf}

    def _write_configs(self):
        d = self.dir
        with open(self.krb5_conf, "w") as f:
            f.write("[libdefaults]\n default_realm = %s\n dns_lookup_kdc = false\n"
                    " dns_lookup_realm = false\n rdns = false\n"
                    " dns_canonicalize_hostname = false\n udp_preference_limit = 1\n"
                    " default_ccache_name = FILE:%s/ccache-default\n"
                    " kdc_timeout = 3s\n max_retries = 1\n"
                    "[realms]\n %s = {\n  kdc = %s:88\n }\n"
                    "[domain_realm]\n .lab.test = %s\n lab.test = %s\n"
                    % (REALM, d, REALM, self.addr, REALM, REALM))
        with open(self.kdc_conf, "w") as f:
            f.write("[kdcdefaults]\n kdc_listen = %s:88\n kdc_tcp_listen = %s:88\n"
                    "[realms]\n %s = {\n  database_name = %s/principal\n"
                    "  key_stash_file = %s/stash\n  acl_file = %s/kadm5.acl\n"
                    "  kdc_listen = %s:88\n  kdc_tcp_listen = %s:88\n"
                    "  supported_enctypes = aes256-cts-hmac-sha1-96:normal "
                    "aes128-cts-hmac-sha1-96:normal\n }\n"
                    "[logging]\n kdc = FILE:%s\n default = FILE:%s\n"
                    % (self.addr, self.addr, REALM, d, d, d, self.addr, self.addr,
                       self.log, self.log))
        with open(os.path.join(d, "kadm5.acl"), "w") as f:
            f.write("*/admin@%s *\n" % REALM)

    def _run(self, args, timeout=30):
        env = dict(os.environ)
        env.update(self.env())
        try:
            cp = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env,
                                stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise netns.LabError("timeout: %s" % " ".join(args))
        if cp.returncode != 0:
            raise netns.LabError("%s: exit %d: %s" % (" ".join(args), cp.returncode,
                                                      (cp.stderr or cp.stdout).strip()))
        return cp

    def kadmin(self, query):
        return self._run([KADMIN_LOCAL, "-r", REALM, "-q", query])

    def start(self, timeout=15.0):
        if os.path.exists(self.dir):
            shutil.rmtree(self.dir)
        os.makedirs(self.dir, mode=0o755)
        traversable_workdir(self.lab)
        self._write_configs()
        self._run([KDB5_UTIL, "-r", REALM, "-P", "lab-master-" + self.lab.prefix, "create",
                   "-s"])
        for svc in self.services:
            self.kadmin("addprinc -randkey HTTP/%s@%s" % (svc, REALM))
            self.kadmin("ktadd -k %s HTTP/%s@%s" % (self.http_keytab, svc, REALM))
        self.kadmin("addprinc -randkey %s" % self.client_principal)
        self.kadmin("ktadd -k %s %s" % (self.client_keytab, self.client_principal))
        os.chmod(self.client_keytab, 0o600)
        os.chmod(self.krb5_conf, 0o644)
        env = dict(os.environ)
        env.update(self.env())
        errf = open(os.path.join(self.dir, "stderr"), "wb")
        try:
            self.proc = self.lab.spawn(self.lab.ns_inet, [KRB5KDC, "-n", "-r", REALM],
                                       stdout=errf, stderr=errf, env=env)
        finally:
            errf.close()
        _wait_port(self.lab, self.addr, 88, self.proc, timeout, "krb5kdc", self.log)
        return self

    def stop(self):
        _stop_proc(self.lab, self.proc)
        self.proc = None


# --- dante ----------------------------------------------------------------------------

class Dante:
    """danted (SOCKS5, no authentication) on addr:port in inet. Names in SOCKS requests are
    resolved by danted with a resolv.conf pointing at the lab DNS: it runs in a private mount
    namespace where that file is bind-mounted over /etc/resolv.conf (nothing outside the
    process changes). Username authentication (RFC 1929) in danted checks system users, so
    the lab does not run it."""

    def __init__(self, lab, name="dante", addr=SOCKS_ADDR, port=SOCKS_PORT):
        self.lab = lab
        self.name = name
        self.addr = addr
        self.port = port
        self.dir = os.path.join(lab.workdir, name)
        self.conf = os.path.join(self.dir, "danted.conf")
        self.log = os.path.join(self.dir, "danted.log")
        self.proc = None

    @property
    def url(self):
        return "socks5://%s:%d" % (self.addr, self.port)

    def start(self, timeout=15.0):
        if os.path.exists(self.dir):
            shutil.rmtree(self.dir)
        os.makedirs(self.dir, mode=0o755)
        traversable_workdir(self.lab)
        nobody = "nobody"
        with open(self.conf, "w") as f:
            f.write("logoutput: %s\n" % self.log +
                    "internal: %s port = %d\n" % (self.addr, self.port) +
                    "external: %s\n" % self.addr +
                    "clientmethod: none\nsocksmethod: none\n"
                    "user.privileged: root\nuser.unprivileged: %s\n" % nobody +
                    "client pass {\n from: 0.0.0.0/0 to: 0.0.0.0/0\n log: error connect\n}\n"
                    "socks pass {\n from: 0.0.0.0/0 to: 0.0.0.0/0\n command: connect\n"
                    " log: error connect\n}\n")
        resolv = os.path.join(self.dir, "resolv.conf")
        with open(resolv, "w") as f:
            f.write("nameserver 198.51.100.53\noptions timeout:1 attempts:1\n")
        os.chmod(resolv, 0o644)
        script = ("mount --make-rprivate / && mount --bind %s /etc/resolv.conf && "
                  "exec %s -f %s -p %s/danted.pid" % (resolv, DANTED, self.conf, self.dir))
        errf = open(os.path.join(self.dir, "stderr"), "wb")
        try:
            self.proc = self.lab.spawn(self.lab.ns_inet,
                                       ["unshare", "--mount", "sh", "-c", script],
                                       stdout=errf, stderr=errf)
        finally:
            errf.close()
        _wait_port(self.lab, self.addr, self.port, self.proc, timeout, "danted", self.log)
        return self

    def stop(self):
        _stop_proc(self.lab, self.proc)
        self.proc = None

    def log_text(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""


# --- a server that accepts and never answers ------------------------------------------

class StallServer(servers.Server):
    """Accepts on addr:port in inet and holds every connection silently (a stalled PAC
    server). Counts accepts."""

    def __init__(self, lab, addr=STALL_ADDR, port=80):
        super().__init__(netns.listen_in(lab.ns_inet, addr, port))
        self._held = []

    def _accepted(self, c, peer):
        self._held.append(c)

    def stop(self):
        super().stop()
        for c in self._held:
            try:
                c.close()
            except OSError:
                pass


# --- PAC fixtures ---------------------------------------------------------------------

def pac_proxied(proxy="proxy.lab.test:%d" % SQUID_PORT, domain=".proxied.test"):
    """PAC: *.proxied.test through the proxy (or a "PROXY a; PROXY b" list), the rest
    DIRECT."""
    ret = proxy if proxy.startswith(("PROXY ", "SOCKS", "HTTPS ", "DIRECT")) \
        else "PROXY " + proxy
    return ("function FindProxyForURL(url, host) {\n"
            "  if (dnsDomainIs(host, \"%s\")) return \"%s\";\n"
            "  return \"DIRECT\";\n}\n" % (domain, ret))


PAC_LOOP = "function FindProxyForURL(url, host) {\n  while (true) {}\n  return \"DIRECT\";\n}\n"
PAC_SYNTAX = "function FindProxyForURL(url, host) {\n  return \"DIRECT\"; ) ) {\n"


def serve_pac(lab, path, text, status=200, service="http80"):
    """Serve text at path on a lab HTTP origin (default 198.51.100.10:80)."""
    lab.services[service].routes[path] = (
        status, ["Content-Type: application/x-ns-proxy-autoconfig"],
        text.encode() if isinstance(text, str) else text)
    return "http://%s:%d%s" % (lab.services[service].address[0],
                               lab.services[service].address[1], path)


def write_pac(lab, name, text):
    """A PAC file in the lab workdir (world-readable: egressd copies it)."""
    d = os.path.join(lab.workdir, "pac")
    os.makedirs(d, mode=0o755, exist_ok=True)
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write(text)
    os.chmod(p, 0o644)
    return p


def credentials_file(lab, name, sections, mode=0o600):
    """A proxy credentials file (root-owned, mode 0600 by default). sections: {"host:port":
    {key: value}}."""
    d = os.path.join(lab.workdir, "creds")
    os.makedirs(d, mode=0o700, exist_ok=True)
    p = os.path.join(d, name)
    out = []
    for hp, kv in sections.items():
        out.append("[proxy %s]" % hp)
        out += ["%s = %s" % (k, v) for k, v in kv.items()]
        out.append("")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(out))
    os.chown(p, 0, 0)
    os.chmod(p, mode)
    return p


# --- a recording HTTP proxy -----------------------------------------------------------

class RecordingProxy(servers.Server):
    """A fake HTTP proxy on addr:port in inet that records every request head it receives
    (self.heads, raw bytes) and answers: to CONNECT 200, then acts as an HTTP origin whose
    every answer's body is the request head it read (like the origin's /echo); to an
    absolute-form request 200 with the head as body. With require_auth set it answers 407
    (Proxy-Authenticate: Basic) unless the head carries Proxy-Authorization equal to it.
    Its own accept log: self.accepted counts connections, self.silent those that closed
    without sending a single byte (connected, nothing received)."""

    def __init__(self, lab, addr, port=SQUID_PORT, require_auth=None):
        super().__init__(netns.listen_in(lab.ns_inet, addr, port))
        self.require_auth = require_auth
        self.heads = []
        self.tunnel_heads = []
        self.silent = 0
        self.head_times = []          # (time.time(), request line) of each first head

    def _authorized(self, head):
        if self.require_auth is None:
            return True
        for ln in head.split(b"\r\n")[1:]:
            k, _, v = ln.partition(b":")
            if k.strip().lower() == b"proxy-authorization" and \
                    v.strip() == self.require_auth.encode():
                return True
        return False

    def _conn(self, c):
        try:
            c.settimeout(10)
            head, rest = servers.read_head(c, b"")
            if head is None:
                if not rest:
                    self.silent += 1
                return
            self.heads.append(head)
            self.head_times.append((time.time(), head.split(b"\r\n", 1)[0]))
            if not self._authorized(head):
                c.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                          b"Proxy-Authenticate: Basic realm=\"rec\"\r\n"
                          b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                return
            if head.startswith(b"CONNECT "):
                c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                for _ in range(100):
                    h2, rest = servers.read_head(c, rest)
                    if h2 is None:
                        return
                    self.tunnel_heads.append(h2)
                    c.sendall(b"HTTP/1.1 200 OK\r\nX-Origin: recorder\r\n"
                              b"Content-Length: %d\r\n\r\n" % len(h2) + h2)
                return
            # like a real proxy, the forwarded head (echoed here) loses Proxy-Authorization
            fwd = b"\r\n".join(ln for ln in head.split(b"\r\n")
                                if not ln.lower().startswith(b"proxy-authorization:"))
            c.sendall(b"HTTP/1.1 200 OK\r\nX-Origin: recorder\r\nConnection: close\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(fwd) + fwd)
        except OSError:
            pass
        finally:
            c.close()


# --- TLS in front of a proxy (an https:// upstream) ------------------------------------

class LabCA:
    """A throw-away CA (openssl CLI) in the lab workdir; server certificates for names."""

    def __init__(self, lab, name="ca"):
        self.dir = os.path.join(lab.workdir, name)
        os.makedirs(self.dir, mode=0o755, exist_ok=True)
        self.key = os.path.join(self.dir, "ca.key")
        self.cert = os.path.join(self.dir, "ca.pem")
        netns.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                   self.key, "-out", self.cert, "-days", "2", "-subj", "/CN=egress lab CA " +
                   lab.prefix, "-addext", "basicConstraints=critical,CA:TRUE",
                   "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        os.chmod(self.cert, 0o644)

    def server_cert(self, cn, sans):
        """(certfile, keyfile) for cn with DNS subjectAltNames sans."""
        base = os.path.join(self.dir, cn)
        ext = base + ".ext"
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\nextendedKeyUsage=serverAuth\n"
                    "basicConstraints=CA:FALSE\n" % ",".join("DNS:" + n for n in sans))
        netns.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout",
                   base + ".key", "-out", base + ".csr", "-subj", "/CN=" + cn])
        netns.run(["openssl", "x509", "-req", "-in", base + ".csr", "-CA", self.cert,
                   "-CAkey", self.key, "-CAcreateserial", "-out", base + ".pem", "-days",
                   "2", "-extfile", ext])
        return base + ".pem", base + ".key"


class TLSFront(servers.Server):
    """TLS on addr:port in inet, relaying the decrypted bytes to backend (addr, port) — an
    https:// proxy made of squid. Records the SNI of every handshake (self.sni) and counts
    completed handshakes (self.handshakes)."""

    def __init__(self, lab, addr, port, backend, certfile, keyfile):
        super().__init__(netns.listen_in(lab.ns_inet, addr, port))
        self.lab = lab
        self.backend = backend
        self.sni = []
        self.handshakes = 0
        self.ctx = servers.tls_server_context(certfile, keyfile, sni=self.sni)

    def _conn(self, c):
        import ssl
        b = None
        try:
            c.settimeout(10)
            try:
                t = self.ctx.wrap_socket(c, server_side=True)
            except (ssl.SSLError, OSError):
                return
            self.handshakes += 1
            b = netns.connect_in(self.lab.ns_inet, self.backend[0], self.backend[1], 5)
            t.settimeout(0.05)
            b.settimeout(0.05)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not self._stop.is_set():
                moved = False
                for src, dst in ((t, b), (b, t)):
                    try:
                        d = src.recv(65536)
                    except (socket.timeout, ssl.SSLWantReadError):
                        continue
                    if not d:
                        return
                    dst.sendall(d)
                    moved = True
                if not moved:
                    time.sleep(0.005)
        except OSError:
            pass
        finally:
            if b is not None:
                b.close()
            c.close()


# --- a scripted SOCKS5 server (RFC 1928 / RFC 1929) ------------------------------------

class FakeSocks5(servers.Server):
    """SOCKS5 on addr:port in inet. users: {name: password} -> only username/password
    (RFC 1929) is accepted; None -> only "no authentication". reply: the CONNECT reply code
    (0 = success, then the connection echoes bytes). Records the offered methods, the
    credentials received and the CONNECT requests (atyp, address, port)."""

    def __init__(self, lab, addr, port=SOCKS_PORT, users=None, reply=0):
        super().__init__(netns.listen_in(lab.ns_inet, addr, port))
        self.users = users
        self.reply = reply
        self.methods = []
        self.auths = []
        self.requests = []

    @staticmethod
    def _recv(c, n):
        buf = b""
        while len(buf) < n:
            d = c.recv(n - len(buf))
            if not d:
                raise OSError("eof")
            buf += d
        return buf

    def _conn(self, c):
        try:
            c.settimeout(10)
            ver, nm = self._recv(c, 2)
            methods = list(self._recv(c, nm))
            self.methods.append(methods)
            want = 0x02 if self.users is not None else 0x00
            if ver != 5 or want not in methods:
                c.sendall(b"\x05\xff")
                return
            c.sendall(bytes([5, want]))
            if want == 0x02:
                v, ul = self._recv(c, 2)
                user = self._recv(c, ul).decode("latin-1")
                pl = self._recv(c, 1)[0]
                pw = self._recv(c, pl).decode("latin-1")
                self.auths.append((user, pw))
                if v != 1 or self.users.get(user) != pw:
                    c.sendall(b"\x01\x01")
                    return
                c.sendall(b"\x01\x00")
            ver, cmd, _rsv, atyp = self._recv(c, 4)
            if atyp == 1:
                a = socket.inet_ntop(socket.AF_INET, self._recv(c, 4))
            elif atyp == 4:
                a = socket.inet_ntop(socket.AF_INET6, self._recv(c, 16))
            elif atyp == 3:
                a = self._recv(c, self._recv(c, 1)[0]).decode("latin-1")
            else:
                return
            port = int.from_bytes(self._recv(c, 2), "big")
            self.requests.append((atyp, a, port))
            c.sendall(bytes([5, self.reply, 0, 1, 0, 0, 0, 0, 0, 0]))
            if self.reply != 0:
                return
            while not self._stop.is_set():
                d = c.recv(65536)
                if not d:
                    return
                c.sendall(d)
        except (OSError, ValueError):
            pass
        finally:
            c.close()


# --- a scripted hostile HTTP proxy ----------------------------------------------------

class ScriptedProxy(servers.Server):
    """An HTTP proxy on addr:port in inet that reads one request head and then plays
    `script`, a list of steps: bytes (sent), a float (seconds to wait, bounded by the
    stop event), "echo" (echo everything from then on) or "hold" (say nothing, keep the
    connection open until stopped). Records the heads it read."""

    def __init__(self, lab, addr, port=SQUID_PORT, script=()):
        super().__init__(netns.listen_in(lab.ns_inet, addr, port))
        self.script = list(script)
        self.heads = []

    def _accepted(self, c, peer):
        threading.Thread(target=self._conn, args=(c, list(self.script)),
                         daemon=True).start()

    def _conn(self, c, script):
        try:
            c.settimeout(30)
            head, rest = servers.read_head(c, b"")
            if head is None:
                return
            self.heads.append(head)
            for step in script:
                if isinstance(step, bytes):
                    c.sendall(step)
                elif isinstance(step, float):
                    if self._stop.wait(min(step, 30.0)):
                        return
                elif step == "hold":
                    self._stop.wait(30.0)
                    return
                elif step == "echo":
                    if rest:
                        c.sendall(rest)
                    while not self._stop.is_set():
                        d = c.recv(65536)
                        if not d:
                            return
                        c.sendall(d)
        except OSError:
            pass
        finally:
            c.close()


def route_query(d, url, timeout=10.0):
    """egressd's control request {"op": "route", "url": URL}: the route it would take."""
    return d.control({"op": "route", "url": url}, timeout=timeout)


def wait_pac_ready(d, url="https://pac-ready.invalid/", timeout=10.0):
    """Bounded wait until egressd holds a good PAC copy (its first fetch runs in the
    background after start-up; until then hops are pac_unavailable). Returns the last
    route reply."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = route_query(d, url)
        except (OSError, ValueError) as e:
            last = {"error": str(e)}
        if last.get("status") != "pac_unavailable" and "error" not in last:
            return last
        time.sleep(0.05)
    raise netns.LabError("egressd holds no good PAC copy after %ss: %s" % (timeout, last))


def add_addresses(lab, *addrs):
    for a in addrs:
        lab.add_address(a)
