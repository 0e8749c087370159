"""NTLMv2 as a proxy or server checks it (MS-NLMP 3.3.2), for the lab's NTLM proxy.

A real server does not trust the user name in AUTHENTICATE: it recomputes the NTLMv2 proof
from the password it knows and compares. So does this lab tool:

    ResponseKeyNT = NTOWFv2(password, user, domain)
                  = HMAC-MD5(MD4(UTF-16LE(password)), UTF-16LE(upper(user) + domain))
    NTProofStr    = HMAC-MD5(ResponseKeyNT, ServerChallenge + temp)

where NtChallengeResponse = NTProofStr (16 bytes) + temp, and user and domain are the ones
the client sent. A wrong password, a broken hash or a response computed for another
challenge fails. hashlib's md4 is missing with OpenSSL 3 (legacy provider), so MD4
(RFC 1320) is implemented here; self_test() checks it and the whole computation against
the RFC 1320 and MS-NLMP 4.2.4 test vectors.
"""

import hmac
import struct


def _rotl(x, n):
    x &= 0xFFFFFFFF
    return ((x << n) | (x >> (32 - n))) & 0xFFFFFFFF


def md4(data):
    """MD4 (RFC 1320) of bytes, 16 bytes."""
    msg = bytearray(data)
    bitlen = (8 * len(data)) & 0xFFFFFFFFFFFFFFFF
    msg.append(0x80)
    while len(msg) % 64 != 56:
        msg.append(0)
    msg += struct.pack("<Q", bitlen)
    a, b, c, d = 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476

    def f(x, y, z):
        return (x & y) | (~x & z)

    def g(x, y, z):
        return (x & y) | (x & z) | (y & z)

    def h(x, y, z):
        return x ^ y ^ z

    for off in range(0, len(msg), 64):
        X = struct.unpack("<16I", bytes(msg[off:off + 64]))
        aa, bb, cc, dd = a, b, c, d
        for i in range(16):                           # round 1
            k = i
            s = (3, 7, 11, 19)[i % 4]
            if i % 4 == 0:
                a = _rotl(a + f(b, c, d) + X[k], s)
            elif i % 4 == 1:
                d = _rotl(d + f(a, b, c) + X[k], s)
            elif i % 4 == 2:
                c = _rotl(c + f(d, a, b) + X[k], s)
            else:
                b = _rotl(b + f(c, d, a) + X[k], s)
        for i in range(16):                           # round 2
            k = (i % 4) * 4 + i // 4
            s = (3, 5, 9, 13)[i % 4]
            t = 0x5A827999
            if i % 4 == 0:
                a = _rotl(a + g(b, c, d) + X[k] + t, s)
            elif i % 4 == 1:
                d = _rotl(d + g(a, b, c) + X[k] + t, s)
            elif i % 4 == 2:
                c = _rotl(c + g(d, a, b) + X[k] + t, s)
            else:
                b = _rotl(b + g(c, d, a) + X[k] + t, s)
        order = (0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15)
        for i in range(16):                           # round 3
            k = order[i]
            s = (3, 9, 11, 15)[i % 4]
            t = 0x6ED9EBA1
            if i % 4 == 0:
                a = _rotl(a + h(b, c, d) + X[k] + t, s)
            elif i % 4 == 1:
                d = _rotl(d + h(a, b, c) + X[k] + t, s)
            elif i % 4 == 2:
                c = _rotl(c + h(d, a, b) + X[k] + t, s)
            else:
                b = _rotl(b + h(c, d, a) + X[k] + t, s)
        a = (a + aa) & 0xFFFFFFFF
        b = (b + bb) & 0xFFFFFFFF
        c = (c + cc) & 0xFFFFFFFF
        d = (d + dd) & 0xFFFFFFFF
    return struct.pack("<4I", a, b, c, d)


def ntowfv2(password, user, domain):
    nt_hash = md4(password.encode("utf-16-le"))
    return hmac.new(nt_hash, (user.upper() + domain).encode("utf-16-le"), "md5").digest()


def nt_proof(password, user, domain, server_challenge, temp):
    key = ntowfv2(password, user, domain)
    return hmac.new(key, server_challenge + temp, "md5").digest()


def parse_authenticate(msg):
    """The fields of an NTLM AUTHENTICATE message (MS-NLMP 2.2.1.3) as a dict, or None
    when it is not one (or a field points outside the message)."""
    if len(msg) < 64 or msg[:8] != b"NTLMSSP\x00" or struct.unpack("<I", msg[8:12])[0] != 3:
        return None
    flags = struct.unpack("<I", msg[60:64])[0]

    def field(at):
        ln, _, off = struct.unpack("<HHI", msg[at:at + 8])
        if off + ln > len(msg):
            raise ValueError("field outside the message")
        return msg[off:off + ln]
    try:
        lm, nt, dom, user, ws = (field(12), field(20), field(28), field(36), field(44))
    except ValueError:
        return None
    enc = "utf-16-le" if flags & 0x00000001 else "latin-1"    # NTLMSSP_NEGOTIATE_UNICODE
    return {"lm": lm, "nt": nt, "domain": dom.decode(enc, "replace"),
            "user": user.decode(enc, "replace"), "workstation": ws.decode(enc, "replace"),
            "flags": flags}


def verify_authenticate(msg, server_challenge, password, user):
    """(ok, why): does AUTHENTICATE msg prove knowledge of password for user, answering
    server_challenge, with NTLMv2? why says what failed."""
    a = parse_authenticate(msg)
    if a is None:
        return False, "not an AUTHENTICATE message"
    if a["user"].lower() != user.lower():
        return False, "user %r" % a["user"]
    nt = a["nt"]
    if len(nt) <= 24:
        return False, "not an NTLMv2 response (NtChallengeResponse of %d bytes)" % len(nt)
    proof, temp = nt[:16], nt[16:]
    if temp[:2] != b"\x01\x01":
        return False, "NTLMv2 blob version %r" % temp[:2]
    want = nt_proof(password, a["user"], a["domain"], server_challenge, temp)
    if not hmac.compare_digest(proof, want):
        return False, "NTProofStr does not match (wrong password or broken hash)"
    return True, "ok"


def self_test():
    """RFC 1320 MD4 vectors and the MS-NLMP 4.2.4 NTLMv2 example; raises AssertionError."""
    for data, hexd in ((b"", "31d6cfe0d16ae931b73c59d7e0c089c0"),
                       (b"abc", "a448017aaf21d8525fc10ae87aa6729d"),
                       (b"message digest", "d9130a8164549fe818874806e1c7014b"),
                       (b"12345678901234567890123456789012345678901234567890123456789012345678"
                        b"901234567890", "e33b4ddc9c38f2199c3e7b164fcc0536")):
        assert md4(data).hex() == hexd, "MD4(%r) = %s" % (data, md4(data).hex())
    key = ntowfv2("Password", "User", "Domain")
    assert key.hex() == "0c868a403bfd7a93a3001ef22ef02e3f", "NTOWFv2 %s" % key.hex()
    av = b""
    for av_id, val in ((2, "Domain"), (1, "Server")):
        v = val.encode("utf-16-le")
        av += struct.pack("<HH", av_id, len(v)) + v
    av += b"\x00\x00\x00\x00"
    temp = (b"\x01\x01" + b"\x00" * 6 + b"\x00" * 8 + b"\xaa" * 8 + b"\x00" * 4 + av
            + b"\x00" * 4)
    proof = nt_proof("Password", "User", "Domain", bytes.fromhex("0123456789abcdef"), temp)
    assert proof.hex() == "68cd0ab851e51c96aabc927bebef6a1c", "NTProofStr %s" % proof.hex()
