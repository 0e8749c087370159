"""A tiny HTTP-proxy client over raw sockets (never env proxies): CONNECT and absolute-form
requests, reading the status line, headers (X-Egress-Reason) and a bounded body.

Every function takes a socket factory `connect(addr, port, timeout)` so the request can be
sent from inside a lab namespace (Lab.connect_from(ns, ...)).
"""

import socket
import time

HEAD_MAX = 65536
BODY_MAX = 64 * 1024 * 1024


class Response:
    def __init__(self):
        self.status = None       # int, or None when no response head arrived
        self.reason_phrase = ""
        self.version = ""
        self.headers = []        # [(name, value)] in order
        self.head = b""          # raw head bytes
        self.body = b""
        self.sock = None         # open tunnel socket after a 200 to CONNECT
        self.error = None        # text: what went wrong on the client side (eof, timeout)
        self.elapsed = 0.0

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    @property
    def egress_reason(self):
        return self.header("X-Egress-Reason")

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def __repr__(self):
        return "<Response %s reason=%s err=%s body=%r>" % (
            self.status, self.egress_reason, self.error, self.body[:120])


def _parse_head(resp, head):
    resp.head = head
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError("bad status line %r" % lines[0])
    resp.version = parts[0]
    resp.status = int(parts[1])
    resp.reason_phrase = parts[2] if len(parts) > 2 else ""
    for ln in lines[1:]:
        if not ln:
            continue
        k, _, v = ln.partition(":")
        resp.headers.append((k.strip(), v.strip()))


def read_head(sock, deadline):
    """Read bytes until CRLFCRLF; return (head, leftover) or (None, partial) on EOF."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > HEAD_MAX:
            raise ValueError("response head too large")
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("response head timeout")
        sock.settimeout(left)
        d = sock.recv(65536)
        if not d:
            return None, buf
        buf += d
    i = buf.index(b"\r\n\r\n") + 4
    return buf[:i], buf[i:]


def _recv_until_close(sock, buf, deadline, limit=BODY_MAX):
    while len(buf) < limit:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("body timeout")
        sock.settimeout(left)
        d = sock.recv(65536)
        if not d:
            break
        buf += d
    return buf


def _read_body(sock, resp, buf, deadline, method):
    if method == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200:
        return buf
    te = (resp.header("Transfer-Encoding") or "").lower()
    cl = resp.header("Content-Length")
    if "chunked" in te:
        body = b""
        while True:
            while b"\r\n" not in buf:
                buf = _recv_some(sock, buf, deadline)
            line, buf = buf.split(b"\r\n", 1)
            n = int(line.split(b";")[0].strip(), 16)
            if n == 0:
                while b"\r\n\r\n" not in b"\r\n" + buf:
                    buf = _recv_some(sock, buf, deadline)
                return body
            while len(buf) < n + 2:
                buf = _recv_some(sock, buf, deadline)
            body += buf[:n]
            buf = buf[n + 2:]
            if len(body) > BODY_MAX:
                raise ValueError("body too large")
    if cl is not None:
        n = int(cl)
        while len(buf) < n:
            buf = _recv_some(sock, buf, deadline)
        return buf[:n]
    return _recv_until_close(sock, buf, deadline)


def _recv_some(sock, buf, deadline):
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("body timeout")
    sock.settimeout(left)
    d = sock.recv(65536)
    if not d:
        raise ValueError("eof in body")
    return buf + d


def exchange(connect, proxy, raw, timeout=10.0, method="GET", keep_tunnel=False):
    """Send raw request bytes to proxy (addr, port) and read one response.

    keep_tunnel: on status 200 leave the socket open in resp.sock (CONNECT) without
    reading a body. Client-side failures (refused, reset, EOF before a head, timeout) are
    reported in resp.error, never raised, so negative tests can assert on them."""
    resp = Response()
    t0 = time.monotonic()
    deadline = t0 + timeout
    try:
        sock = connect(proxy[0], proxy[1], timeout)
    except OSError as e:
        resp.error = "connect: %s" % e
        resp.elapsed = time.monotonic() - t0
        return resp
    keep = False
    try:
        sock.sendall(raw)
        head, rest = read_head(sock, deadline)
        if head is None:
            resp.error = "eof before response head (%d bytes)" % len(rest)
            resp.body = rest
            return resp
        _parse_head(resp, head)
        if keep_tunnel and resp.status == 200:
            resp.sock = sock
            resp.body = rest  # bytes the origin already sent through the tunnel
            keep = True
            return resp
        resp.body = _read_body(sock, resp, rest, deadline, method)
    except socket.timeout as e:
        resp.error = "timeout: %s" % e
    except (OSError, ValueError) as e:
        resp.error = "%s: %s" % (type(e).__name__, e)
    finally:
        resp.elapsed = time.monotonic() - t0
        if not keep:
            sock.close()
    return resp


def connect_request(connect, proxy, target, headers=(), timeout=10.0, version="HTTP/1.1"):
    """CONNECT target (host:port); on 200 resp.sock is the tunnel."""
    lines = ["CONNECT %s %s" % (target, version), "Host: %s" % target]
    lines += ["%s: %s" % kv for kv in headers]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return exchange(connect, proxy, raw, timeout=timeout, method="CONNECT", keep_tunnel=True)


def http_request(connect, proxy, method, url, headers=(), body=None, timeout=10.0,
                 version="HTTP/1.1", host=True):
    """Absolute-form request to the proxy; reads the whole response (bounded)."""
    lines = ["%s %s %s" % (method, url, version)]
    if host:
        hostpart = url.split("://", 1)[-1].split("/", 1)[0]
        lines.append("Host: %s" % hostpart)
    lines += ["%s: %s" % kv for kv in headers]
    if body is not None:
        lines.append("Content-Length: %d" % len(body))
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
    return exchange(connect, proxy, raw, timeout=timeout, method=method)


def tunnel_http_get(sock, host, path="/", timeout=10.0):
    """Plain HTTP GET through an open tunnel socket (the origin speaks HTTP even on 443)."""
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode()
    resp = Response()
    deadline = time.monotonic() + timeout
    try:
        sock.sendall(req)
        head, rest = read_head(sock, deadline)
        if head is None:
            resp.error = "eof before response head"
            return resp
        _parse_head(resp, head)
        resp.body = _read_body(sock, resp, rest, deadline, "GET")
    except socket.timeout as e:
        resp.error = "timeout: %s" % e
    except (OSError, ValueError) as e:
        resp.error = "%s: %s" % (type(e).__name__, e)
    return resp


def recv_upto(sock, buf, n, deadline):
    """Read onto buf until it holds n bytes or the peer closes (then shorter); raise
    socket.timeout at the deadline (time.monotonic())."""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("read timeout")
        sock.settimeout(left)
        d = sock.recv(65536)
        if not d:
            break
        buf += d
    return buf


def tunnel_echo(sock, data, timeout=5.0):
    """Send data through a tunnel to an echo origin and read it back (bounded)."""
    deadline = time.monotonic() + timeout
    sock.sendall(data)
    return recv_upto(sock, b"", len(data), deadline)


def wait_closed(sock, timeout):
    """Wait until the peer closes (EOF or reset); return seconds waited or None on timeout."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            d = sock.recv(65536)
        except socket.timeout:
            return None
        except OSError:
            return time.monotonic() - t0
        if not d:
            return time.monotonic() - t0
