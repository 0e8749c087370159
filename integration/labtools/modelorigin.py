"""A model origin for the lab: HTTPS (a lab CA's certificate), answers only with the right
key, and streams Server-Sent Events (issue 16, docs/model-connections.md).

GET or POST /v1/stream with `x-api-key: <key>` (or `Authorization: Bearer <key>`): 200,
text/event-stream, chunked, `events` events a few milliseconds apart, then the end. Any
other key: 401. Records every request head it saw (self.heads), the SNI of every handshake
(self.sni) and the keys it was sent (self.keys). Keep-alive: several requests per
connection.
"""

import socket
import ssl
import threading
import time

from labtools import netns


class ModelOrigin:
    def __init__(self, lab, addr, port, certfile, keyfile, key, events=5):
        self.lab = lab
        self.key = key
        self.events = events
        self.heads = []
        self.sni = []
        self.keys = []
        self.handshakes = 0
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certfile, keyfile)
        self.ctx.set_alpn_protocols(["http/1.1"])
        self.ctx.sni_callback = lambda sslobj, name, ctx: self.sni.append(name) and None
        self.sock = netns.listen_in(lab.ns_inet, addr, port)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        self.sock.settimeout(0.2)
        self._t.start()
        return self

    def stop(self):
        self._stop.set()
        self._t.join(timeout=2)
        self.sock.close()

    def _loop(self):
        while not self._stop.is_set():
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._conn, args=(c,), daemon=True).start()

    @staticmethod
    def _read_head(t):
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = t.recv(4096)
            if not d:
                return None, b""
            buf += d
            if len(buf) > 65536:
                return None, b""
        head, rest = buf.split(b"\r\n\r\n", 1)
        return head.decode("latin-1"), rest

    def _conn(self, c):
        try:
            c.settimeout(10)
            try:
                t = self.ctx.wrap_socket(c, server_side=True)
            except (ssl.SSLError, OSError):
                return
            self.handshakes += 1
            rest = b""
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                head, more = self._read_head(t) if not rest else (None, b"")
                if head is None:
                    return
                self.heads.append(head)
                hdrs = {}
                for line in head.split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    hdrs[k.strip().lower()] = v.strip()
                n = int(hdrs.get("content-length", "0") or 0)
                body = more
                while len(body) < n:
                    d = t.recv(65536)
                    if not d:
                        return
                    body += d
                got = hdrs.get("x-api-key") or hdrs.get("authorization", "")[7:]
                self.keys.append(got)
                if got != self.key:
                    t.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\n"
                              b"Content-Length: 13\r\n\r\nwrong api key")
                    continue
                t.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                          b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")
                for i in range(self.events):
                    ev = ("event: delta\ndata: {\"n\": %d}\n\n" % i).encode()
                    t.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
                    time.sleep(0.02)
                t.sendall(b"0\r\n\r\n")
                if hdrs.get("connection", "").lower() == "close":
                    return
        except OSError:
            pass
        finally:
            c.close()
