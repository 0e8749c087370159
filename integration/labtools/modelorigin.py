"""A model origin for the lab: HTTPS (a lab CA's certificate), answers only with the right
key, and streams Server-Sent Events (docs/model-connections.md).

GET or POST /v1/stream with `x-api-key: <key>` (or `Authorization: Bearer <key>`): 200,
text/event-stream, chunked, `events` events a few milliseconds apart, then the end. Any
other key: 401. Records every request head it saw (self.heads), the SNI of every handshake
(self.sni) and the keys it was sent (self.keys). Keep-alive: several requests per
connection.
"""

import ssl
import time

from labtools import netns, servers


class ModelOrigin(servers.Server):
    def __init__(self, lab, addr, port, certfile, keyfile, key, events=5):
        super().__init__(netns.listen_in(lab.ns_inet, addr, port))
        self.lab = lab
        self.key = key
        self.events = events
        self.heads = []
        self.sni = []
        self.keys = []
        self.handshakes = 0
        self.ctx = servers.tls_server_context(certfile, keyfile, alpn=["http/1.1"],
                                              sni=self.sni)

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
                head, more = servers.read_head(t) if not rest else (None, b"")
                if head is None:
                    return
                head = head[:-4].decode("latin-1")
                self.heads.append(head)
                hdrs = {}
                for line in head.split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    hdrs[k.strip().lower()] = v.strip()
                n = int(hdrs.get("content-length", "0") or 0)
                servers.recv_more(t, more, n)
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
        except (OSError, ValueError):
            pass
        finally:
            c.close()
