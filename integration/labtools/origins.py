"""Origin servers of the lab: HTTP (plain, also on 443) and raw TCP echo, each counting the
connections it accepted, so a test can prove that a denied hop never reached the origin.

HTTP endpoints (every response carries `X-Origin: <name>`):
  /                 small body "hello from <name>\\n"
  /echo             body = the request head exactly as received, then the request body
                    (decoded if chunked)
  /bytes/N          N bytes of pattern_bytes(N) (N <= 4 GiB)
  /redirect?to=URL&code=302     a redirect to URL (code 301/302/303/307/308)
  /chunked          a chunked response of a few chunks ("chunk-0\\n" ... "chunk-4\\n")
  /slow?s=SECONDS   waits SECONDS (<= 30, default 2) before answering "slow\\n"
  /status/N         answers status N
  TCPService.routes may add fixed answers per path (PAC files, crafted redirects).
Anything else: 404.
"""

import socket
import threading
import time
import urllib.parse

from labtools import servers

BODY_MAX = 64 * 1024 * 1024

_BLOCK = bytes(range(256)) * 256  # 64 KiB


def pattern_bytes(n, offset=0):
    """The bytes /bytes/N sends (n bytes starting at offset of the endless pattern)."""
    out = bytearray()
    pos = offset
    while len(out) < n:
        i = pos % len(_BLOCK)
        take = min(len(_BLOCK) - i, n - len(out))
        out += _BLOCK[i:i + take]
        pos += take
    return bytes(out)


class Counters:
    """Accepted-connection counters per origin name, with the peers seen."""

    def __init__(self):
        self._lock = threading.Lock()
        self._n = {}
        self._peers = {}

    def hit(self, name, peer):
        with self._lock:
            self._n[name] = self._n.get(name, 0) + 1
            self._peers.setdefault(name, []).append(peer)
            if len(self._peers[name]) > 1000:
                del self._peers[name][:500]

    def get(self, name):
        with self._lock:
            return self._n.get(name, 0)

    def snapshot(self):
        with self._lock:
            return dict(self._n)

    def peers(self, name):
        with self._lock:
            return list(self._peers.get(name, []))


class TCPService(servers.Server):
    """Accept loop on a listening socket; one thread per connection; counts accepts."""

    def __init__(self, name, sock, counters, handler):
        super().__init__(sock)
        self.name = name
        self.counters = counters
        self.handler = handler
        self._conns = set()
        self._lock = threading.Lock()
        # path -> (status, [header lines], body bytes): fixed answers that take precedence
        # over the built-in endpoints (a PAC file, a crafted redirect, ...).
        self.routes = {}
        # Every HTTP request head this service parsed: (method, target, Host header).
        self.requests = []

    @property
    def address(self):
        return self.sock.getsockname()[:2]

    def stop(self):
        super().stop()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                c.close()
            except OSError:
                pass

    def _accepted(self, c, peer):
        self.counters.hit(self.name, peer[0])
        with self._lock:
            self._conns.add(c)
        threading.Thread(target=self._run, args=(c, peer), daemon=True).start()

    def _run(self, c, peer):
        try:
            c.settimeout(30)
            self.handler(self, c, peer)
        except (OSError, ValueError):
            pass
        finally:
            with self._lock:
                self._conns.discard(c)
            try:
                c.close()
            except OSError:
                pass


def echo_handler(svc, c, peer):
    c.settimeout(60)
    while not svc._stop.is_set():
        d = c.recv(65536)
        if not d:
            try:
                c.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            return
        c.sendall(d)


def trap_handler(svc, c, peer):
    """A listener that must never be reached: count and close."""
    return


def _response(status, body=b"", headers=(), name="origin", close=False):
    reason = {200: "OK", 301: "Moved Permanently", 302: "Found", 303: "See Other",
              307: "Temporary Redirect", 308: "Permanent Redirect", 404: "Not Found",
              400: "Bad Request"}.get(status, "Status")
    h = ["HTTP/1.1 %d %s" % (status, reason), "X-Origin: " + name,
         "Content-Length: %d" % len(body)]
    h += list(headers)
    if close:
        h.append("Connection: close")
    return ("\r\n".join(h) + "\r\n\r\n").encode() + body


def http_handler(svc, c, peer):
    buf = b""
    for _ in range(1000):
        head, buf = servers.read_head(c, buf)
        if head is None:
            return
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ")
        except ValueError:
            c.sendall(_response(400, b"bad request line\n", name=svc.name, close=True))
            return
        hdrs = {}
        for ln in lines[1:]:
            if not ln:
                continue
            k, _, v = ln.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        body = b""
        if "chunked" in hdrs.get("transfer-encoding", "").lower():
            body, buf = servers.read_chunked(c, buf, BODY_MAX)
        elif "content-length" in hdrs:
            n = int(hdrs["content-length"])
            if n > BODY_MAX:
                raise ValueError("body too large")
            buf = servers.recv_more(c, buf, n)
            body, buf = buf[:n], buf[n:]
        if len(svc.requests) < 10000:
            svc.requests.append((method, target, hdrs.get("host")))
        close = (hdrs.get("connection", "").lower() == "close" or version == "HTTP/1.0")
        u = urllib.parse.urlsplit(target)
        path = u.path
        q = urllib.parse.parse_qs(u.query)
        if path in svc.routes:
            st, hh, bb = svc.routes[path]
            out = _response(st, bb, hh, name=svc.name, close=close)
        elif path == "/":
            out = _response(200, ("hello from %s\n" % svc.name).encode(), name=svc.name,
                            close=close)
        elif path == "/echo":
            out = _response(200, head + body, ["Content-Type: application/octet-stream"],
                            name=svc.name, close=close)
        elif path.startswith("/bytes/"):
            n = int(path[len("/bytes/"):])
            if n < 0 or n > (4 << 30):
                out = _response(400, b"bad size\n", name=svc.name, close=True)
            else:
                hh = ("HTTP/1.1 200 OK\r\nX-Origin: %s\r\nContent-Length: %d\r\n"
                      "Content-Type: application/octet-stream\r\n%s\r\n"
                      % (svc.name, n, "Connection: close\r\n" if close else "")).encode()
                c.sendall(hh)
                sent = 0
                while sent < n:
                    if svc._stop.is_set():
                        return
                    i = sent % len(_BLOCK)
                    take = min(len(_BLOCK) - i, n - sent)
                    c.sendall(_BLOCK[i:i + take])
                    sent += take
                out = None
        elif path == "/redirect":
            to = q.get("to", ["/"])[0]
            code = int(q.get("code", ["302"])[0])
            out = _response(code, b"redirect\n", ["Location: " + to], name=svc.name,
                            close=close)
        elif path == "/chunked":
            parts = ["HTTP/1.1 200 OK", "X-Origin: " + svc.name, "Transfer-Encoding: chunked"]
            if close:
                parts.append("Connection: close")
            data = ("\r\n".join(parts) + "\r\n\r\n").encode()
            for i in range(5):
                chunk = ("chunk-%d\n" % i).encode()
                data += b"%x\r\n" % len(chunk) + chunk + b"\r\n"
            out = data + b"0\r\n\r\n"
        elif path == "/slow":
            s = min(float(q.get("s", ["2"])[0]), 30.0)
            if svc._stop.wait(s):
                return
            out = _response(200, b"slow\n", name=svc.name, close=close)
        elif path.startswith("/status/"):
            out = _response(int(path[len("/status/"):]), b"status\n", name=svc.name,
                            close=close)
        else:
            out = _response(404, b"not found\n", name=svc.name, close=close)
        if method == "HEAD" and out is not None:
            out = out[:out.index(b"\r\n\r\n") + 4]
        if out is not None:
            c.sendall(out)
        if close:
            return


HANDLERS = {"http": http_handler, "echo": echo_handler, "trap": trap_handler}


def wait_count(counters, name, at_least, timeout=3.0):
    """Bounded wait until counters[name] >= at_least; return the final count."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if counters.get(name) >= at_least:
            break
        time.sleep(0.01)
    return counters.get(name)
