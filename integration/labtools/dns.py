"""A controllable authoritative DNS server (UDP and TCP) and a tiny DNS client.

The zone is a dict, name -> spec, replaceable and updatable while the server runs:

    {"a.lab.test":   {"A": ["198.51.100.10"], "AAAA": ["::ffff:127.0.0.1"], "ttl": 60},
     "c.lab.test":   {"CNAME": "inner.lab.test"},          # chased inside the zone
     "nx.lab.test":  {"rcode": "NXDOMAIN"},                # also the answer for unknown names
     "sf.lab.test":  {"rcode": "SERVFAIL"},                # or "REFUSED"
     "nodata.lab.test": {},                                # NOERROR, no records
     "slow.lab.test": {"A": ["198.51.100.10"], "delay": 1.5},
     "drop.lab.test": {"drop": True},                      # never answered (timeout)
     "rb.lab.test":  {"sequence": [{"A": ["198.51.100.10"], "ttl": 0},
                                   {"A": ["127.0.0.1"], "ttl": 0}]},
     "*.wild.lab.test": {"A": ["198.51.100.10"]}}          # any name below wild.lab.test

"sequence" answers query number i (counted per name and query type) with spec i % len.
"tc": True answers UDP with the TC bit and no records (the client must retry over TCP).
"broken": True answers with a header that promises one record and no record bytes.
Every query is recorded (name, type, transport) for the tests.
"""

import socket
import struct
import threading
import time

QTYPE = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "MX": 15, "TXT": 16, "AAAA": 28,
         "SRV": 33, "OPT": 41, "HTTPS": 65, "ANY": 255}
QTYPE_NAME = {v: k for k, v in QTYPE.items()}
RCODE = {"NOERROR": 0, "FORMERR": 1, "SERVFAIL": 2, "NXDOMAIN": 3, "NOTIMP": 4, "REFUSED": 5}
CNAME_CHAIN_MAX = 8
QUERY_LOG_MAX = 20000


def encode_name(name):
    out = b""
    for label in name.strip(".").split("."):
        if not label:
            continue
        b = label.encode("ascii")
        if len(b) > 63:
            raise ValueError("label too long")
        out += bytes([len(b)]) + b
    return out + b"\0"


def decode_name(msg, off, depth=0):
    """Decode a (possibly compressed) name at off; return (name, offset after it)."""
    labels = []
    end = None
    hops = 0
    while True:
        if off >= len(msg):
            raise ValueError("truncated name")
        n = msg[off]
        if n == 0:
            off += 1
            break
        if n & 0xC0 == 0xC0:
            if off + 1 >= len(msg):
                raise ValueError("truncated pointer")
            ptr = ((n & 0x3F) << 8) | msg[off + 1]
            if end is None:
                end = off + 2
            hops += 1
            if hops > 16:
                raise ValueError("pointer loop")
            off = ptr
            continue
        if n > 63:
            raise ValueError("bad label")
        labels.append(msg[off + 1:off + 1 + n].decode("latin-1"))
        off += 1 + n
    return ".".join(labels), (end if end is not None else off)


def _rdata(rtype, value):
    if rtype == "A":
        return socket.inet_pton(socket.AF_INET, value)
    if rtype == "AAAA":
        return socket.inet_pton(socket.AF_INET6, value)
    if rtype == "CNAME":
        return encode_name(value)
    raise ValueError(rtype)


class Zone:
    """Thread-safe zone with per-(name, qtype) sequence counters and a query log."""

    def __init__(self, zone=None):
        self._lock = threading.Lock()
        self._zone = {}
        self._seq = {}
        self.queries = []
        if zone:
            self.set(zone)

    @staticmethod
    def _norm(zone):
        return {k.lower().rstrip("."): v for k, v in zone.items()}

    def set(self, zone):
        with self._lock:
            self._zone = self._norm(zone)
            self._seq = {}

    def update(self, zone):
        with self._lock:
            for k, v in self._norm(zone).items():
                self._zone[k] = v
                for key in [s for s in self._seq if s[0] == k]:
                    del self._seq[key]

    def remove(self, name):
        with self._lock:
            self._zone.pop(name.lower().rstrip("."), None)

    def snapshot(self):
        with self._lock:
            return dict(self._zone)

    def query_log(self, name=None):
        with self._lock:
            q = list(self.queries)
        if name is None:
            return q
        name = name.lower().rstrip(".")
        return [x for x in q if x["name"] == name]

    def clear_log(self):
        with self._lock:
            self.queries = []

    def _lookup_spec(self, name):
        spec = self._zone.get(name)
        if spec is not None:
            return spec
        parts = name.split(".")
        for i in range(1, len(parts)):
            spec = self._zone.get("*." + ".".join(parts[i:]))
            if spec is not None:
                return spec
        return None

    def _pick(self, name, qtype, spec):
        if "sequence" in spec:
            seq = spec["sequence"]
            key = (name, qtype)
            i = self._seq.get(key, 0)
            self._seq[key] = i + 1
            if not seq:
                return {}
            return seq[i % len(seq)]
        return spec

    def resolve(self, qname, qtype, transport):
        """Return dict(action="drop"|"answer", rcode, answers=[(name,type,ttl,value)],
        delay, tc)."""
        name = qname.lower().rstrip(".")
        with self._lock:
            if len(self.queries) < QUERY_LOG_MAX:
                self.queries.append({"t": time.time(), "name": name,
                                     "type": QTYPE_NAME.get(qtype, str(qtype)),
                                     "transport": transport})
            answers = []
            cur = name
            spec = self._lookup_spec(cur)
            if spec is None:
                return {"action": "answer", "rcode": RCODE["NXDOMAIN"], "answers": [],
                        "delay": 0, "tc": False}
            spec = self._pick(cur, qtype, spec)
            first = spec
            for _ in range(CNAME_CHAIN_MAX + 1):
                if spec.get("drop"):
                    return {"action": "drop", "delay": 0}
                if spec.get("broken"):
                    return {"action": "broken", "delay": first.get("delay", 0)}
                rc = spec.get("rcode", "NOERROR")
                if rc != "NOERROR":
                    return {"action": "answer", "rcode": RCODE[rc], "answers": answers,
                            "delay": first.get("delay", 0), "tc": False}
                ttl = int(spec.get("ttl", 60))
                if "CNAME" in spec and qtype != QTYPE["CNAME"]:
                    target = spec["CNAME"].lower().rstrip(".")
                    answers.append((cur, "CNAME", ttl, target))
                    nxt = self._lookup_spec(target)
                    if nxt is None:
                        break  # the chain leaves the zone: answer what we have
                    cur = target
                    spec = self._pick(cur, qtype, nxt)
                    continue
                if "CNAME" in spec and qtype == QTYPE["CNAME"]:
                    answers.append((cur, "CNAME", ttl, spec["CNAME"]))
                    break
                tname = QTYPE_NAME.get(qtype)
                if tname in ("A", "AAAA"):
                    vals = spec.get(tname, [])
                    if isinstance(vals, str):
                        vals = [vals]
                    for v in vals:
                        answers.append((cur, tname, ttl, v))
                break
            return {"action": "answer", "rcode": 0, "answers": answers,
                    "delay": first.get("delay", 0), "tc": bool(first.get("tc"))}


def build_response(query, qend, res, truncate=False):
    qid, flags = struct.unpack("!HH", query[:4])
    opcode = (flags >> 11) & 0xF
    rd = flags & 0x0100
    rflags = 0x8000 | (opcode << 11) | 0x0400 | rd | 0x0080 | (res["rcode"] & 0xF)
    answers = [] if truncate else res["answers"]
    if truncate:
        rflags |= 0x0200
    out = struct.pack("!HHHHHH", qid, rflags, 1, len(answers), 0, 0)
    out += query[12:qend]
    for name, rtype, ttl, value in answers:
        rd_ = _rdata(rtype, value)
        out += encode_name(name) + struct.pack("!HHIH", QTYPE[rtype], 1, ttl, len(rd_)) + rd_
    return out


def parse_query(msg):
    """Return (qname, qtype, end of question) or raise ValueError."""
    if len(msg) < 12:
        raise ValueError("short")
    flags, qd = struct.unpack("!H", msg[2:4])[0], struct.unpack("!H", msg[4:6])[0]
    if flags & 0x8000 or qd != 1:
        raise ValueError("not a single-question query")
    name, off = decode_name(msg, 12)
    if off + 4 > len(msg):
        raise ValueError("truncated question")
    qtype, _qclass = struct.unpack("!HH", msg[off:off + 4])
    return name, qtype, off + 4


class DNSServer:
    """UDP+TCP DNS server on already-bound sockets (created in the lab's inet namespace)."""

    def __init__(self, zone, udp_sock, tcp_sock):
        self.zone = zone
        self.udp = udp_sock
        self.tcp = tcp_sock
        self._stop = threading.Event()
        self._threads = []
        self._conns = set()
        self._clock = threading.Lock()

    def start(self):
        self.udp.settimeout(0.2)
        self.tcp.settimeout(0.2)
        for fn in (self._udp_loop, self._tcp_loop):
            t = threading.Thread(target=fn, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2)
        with self._clock:
            for c in list(self._conns):
                try:
                    c.close()
                except OSError:
                    pass
        self.udp.close()
        self.tcp.close()

    def _answer(self, msg, transport):
        try:
            qname, qtype, qend = parse_query(msg)
        except (ValueError, struct.error):
            return None, 0
        res = self.zone.resolve(qname, qtype, transport)
        if res["action"] == "drop":
            return None, 0
        if res["action"] == "broken":
            qid, flags = struct.unpack("!HH", msg[:4])
            hdr = struct.pack("!HHHHHH", qid, 0x8180 | (flags & 0x0100), 1, 1, 0, 0)
            return hdr + msg[12:qend], res["delay"]
        data = build_response(msg, qend, res, truncate=(transport == "udp" and res["tc"]))
        arcount = struct.unpack("!H", msg[10:12])[0]
        if transport == "udp" and len(data) > 512 and arcount == 0:
            data = build_response(msg, qend, res, truncate=True)  # no EDNS: retry over TCP
        return data, res["delay"]

    def _udp_send_later(self, data, peer, delay):
        if self._stop.wait(min(float(delay), 30.0)):
            return
        try:
            self.udp.sendto(data, peer)
        except OSError:
            pass

    def _udp_loop(self):
        while not self._stop.is_set():
            try:
                msg, peer = self.udp.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            data, delay = self._answer(msg, "udp")
            if data is None:
                continue
            if delay:
                threading.Thread(target=self._udp_send_later, args=(data, peer, delay),
                                 daemon=True).start()
            else:
                try:
                    self.udp.sendto(data, peer)
                except OSError:
                    pass

    def _tcp_loop(self):
        while not self._stop.is_set():
            try:
                c, _ = self.tcp.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._clock:
                self._conns.add(c)
            threading.Thread(target=self._tcp_conn, args=(c,), daemon=True).start()

    def _tcp_conn(self, c):
        try:
            c.settimeout(10)
            for _ in range(100):
                hdr = _recv_exact(c, 2)
                if not hdr:
                    return
                n = struct.unpack("!H", hdr)[0]
                msg = _recv_exact(c, n)
                if msg is None:
                    return
                data, delay = self._answer(msg, "tcp")
                if data is None:
                    self._stop.wait(30)  # "no answer": hold the connection, say nothing
                    return
                if delay and self._stop.wait(min(float(delay), 30.0)):
                    return
                c.sendall(struct.pack("!H", len(data)) + data)
        except OSError:
            pass
        finally:
            with self._clock:
                self._conns.discard(c)
            c.close()


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        d = s.recv(n - len(buf))
        if not d:
            return None
        buf += d
    return buf


def query(sock_factory, server, name, qtype="A", tcp=False, timeout=2.0, qid=0x1234):
    """Ask server (addr, port) one question; return dict(rcode, tc, answers=[(name, type,
    ttl, value)]) or None on timeout. sock_factory(family, type) makes the socket (so the
    question can be asked from inside a lab namespace)."""
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + encode_name(name) + \
        struct.pack("!HH", QTYPE[qtype], 1)
    if tcp:
        s = sock_factory(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(server)
            s.sendall(struct.pack("!H", len(q)) + q)
            hdr = _recv_exact(s, 2)
            if not hdr:
                return None
            msg = _recv_exact(s, struct.unpack("!H", hdr)[0])
        except socket.timeout:
            return None
        finally:
            s.close()
    else:
        s = sock_factory(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.settimeout(timeout)
            s.sendto(q, server)
            msg, _ = s.recvfrom(65535)
        except socket.timeout:
            return None
        finally:
            s.close()
    return parse_response(msg)


def parse_response(msg):
    _qid, flags, qd, an = struct.unpack("!HHHH", msg[:8])
    off = 12
    for _ in range(qd):
        _, off = decode_name(msg, off)
        off += 4
    answers = []
    for _ in range(an):
        name, off = decode_name(msg, off)
        rtype, _cls, ttl, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
        off += 10
        rd = msg[off:off + rdlen]
        tname = QTYPE_NAME.get(rtype, str(rtype))
        if tname == "A":
            val = socket.inet_ntop(socket.AF_INET, rd)
        elif tname == "AAAA":
            val = socket.inet_ntop(socket.AF_INET6, rd)
        elif tname == "CNAME":
            val = decode_name(msg, off)[0]
        else:
            val = rd
        answers.append((name, tname, ttl, val))
        off += rdlen
    return {"rcode": flags & 0xF, "tc": bool(flags & 0x0200), "answers": answers}
