"""What the lab's own peers (origins, fake proxies, model endpoints) share: a threaded server
over a listening socket that a test made in a namespace (netns.listen_in), the HTTP/1.1
head and body readers, and the TLS server context.

Server: one accept thread (polling the stop event every 0.2 s), one daemon thread per
connection running the subclass's _conn(c) (which closes c), a count of accepts, and a
bounded stop. A subclass that needs the peer or its own bookkeeping overrides
_accepted(c, peer).
"""

import socket
import ssl
import threading

HEAD_MAX = 65536


class Server:
    def __init__(self, sock):
        self.sock = sock
        self.accepted = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        self.sock.settimeout(0.2)
        self._t.start()
        return self

    def stop(self):
        self._stop.set()
        if self._t.is_alive():
            self._t.join(timeout=2)
        self.sock.close()

    def _loop(self):
        while not self._stop.is_set():
            try:
                c, peer = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted += 1
            self._accepted(c, peer)

    def _accepted(self, c, peer):
        threading.Thread(target=self._conn, args=(c,), daemon=True).start()

    def _conn(self, c):
        raise NotImplementedError


def read_head(c, buf=b"", limit=HEAD_MAX):
    """Read from c until buf holds a whole HTTP head: (head with its CRLFCRLF, the bytes
    after it), or (None, buf) at end of stream or past limit bytes."""
    while b"\r\n\r\n" not in buf:
        if len(buf) > limit:
            return None, buf
        d = c.recv(65536)
        if not d:
            return None, buf
        buf += d
    i = buf.index(b"\r\n\r\n") + 4
    return buf[:i], buf[i:]


def recv_more(c, buf, n):
    """Read from c until buf holds n bytes; ValueError at end of stream."""
    while len(buf) < n:
        d = c.recv(65536)
        if not d:
            raise ValueError("eof in body")
        buf += d
    return buf


def read_chunked(c, buf, limit):
    """A chunked body (RFC 9112 7.1) from buf and then c, decoded: (body, the bytes after
    it). Trailers are read and dropped. ValueError on bad framing, end of stream, or a
    body past limit bytes."""
    body = b""
    while True:
        while b"\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                raise ValueError("eof in chunk size")
            buf += d
        line, buf = buf.split(b"\r\n", 1)
        size = int(line.split(b";")[0].strip(), 16)
        if size == 0:
            # trailers until the empty line
            while True:
                while b"\r\n" not in buf:
                    d = c.recv(65536)
                    if not d:
                        raise ValueError("eof in trailer")
                    buf += d
                tl, buf = buf.split(b"\r\n", 1)
                if tl == b"":
                    return body, buf
        if len(body) + size > limit:
            raise ValueError("body too large")
        buf = recv_more(c, buf, size + 2)
        body += buf[:size]
        buf = buf[size + 2:]


def tls_server_context(certfile, keyfile, alpn=None, sni=None):
    """A TLS server context for certfile/keyfile; alpn: protocols to offer; sni: a list
    that records the server name of every handshake."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certfile, keyfile)
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    if sni is not None:
        ctx.sni_callback = lambda sslobj, name, c: sni.append(name) and None
    return ctx
