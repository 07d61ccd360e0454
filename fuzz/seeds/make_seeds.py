#!/usr/bin/env python3
"""Writes the hand-made seeds of the binary fuzz targets (avro, msgpack, pcap, pcapng, sflow,
netflow, forward) into fuzz/seeds/<target>/: a few tiny valid inputs each, encoded here byte by byte so that no library
is needed. The text seeds in fuzz/seeds/ are written by hand. Run: python3 fuzz/seeds/make_seeds.py
"""
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- Avro object container files ------------------------------------------------------------
def zz(n):
    """Avro long: zigzag, then base-128 varint."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def astr(s):
    b = s.encode() if isinstance(s, str) else s
    return zz(len(b)) + b


def avro_file(schema, records, codec="null", per_block=2):
    sync = bytes(range(16))
    meta = {"avro.schema": schema.encode(), "avro.codec": codec.encode()}
    out = b"Obj\x01" + zz(len(meta))
    for k, v in meta.items():
        out += astr(k) + astr(v)
    out += zz(0) + sync
    for i in range(0, len(records), per_block):
        chunk = records[i : i + per_block]
        data = b"".join(chunk)
        if codec == "deflate":
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            data = c.compress(data) + c.flush()
        out += zz(len(chunk)) + zz(len(data)) + data + sync
    return out


AVRO_SCHEMA = (
    '{"type":"record","name":"r","fields":['
    '{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},'
    '{"name":"host","type":"string"},'
    '{"name":"n","type":["null","long"]},'
    '{"name":"tags","type":{"type":"array","items":"string"}},'
    '{"name":"m","type":{"type":"map","values":"double"}}]}'
)


def avro_record(i):
    ts = zz(1_700_000_000_000_000 + i * 1_000_003)
    host = astr("10.0.0.%d" % i)
    n = zz(0) if i % 2 else zz(1) + zz(i * 7)
    tags = (zz(2) + astr("a") + astr("b%d" % i) + zz(0)) if i % 3 else zz(0)
    m = zz(1) + astr("k") + struct.pack("<d", i / 3) + zz(0)
    return ts + host + n + tags + m


recs = [avro_record(i) for i in range(5)]
put("avro", "null.avro", avro_file(AVRO_SCHEMA, recs))
put("avro", "deflate.avro", avro_file(AVRO_SCHEMA, recs, codec="deflate"))
put(
    "avro",
    "scalars.avro",
    avro_file(
        '{"type":"record","name":"s","fields":[{"name":"b","type":"boolean"},'
        '{"name":"f","type":"float"},{"name":"x","type":"bytes"},'
        '{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},'
        '{"name":"d","type":{"type":"int","logicalType":"date"}},'
        '{"name":"fx","type":{"type":"fixed","name":"F","size":2}}]}',
        [b"\x01" + struct.pack("<f", 1.5) + astr(b"\x00\xff") + zz(1) + zz(19000) + b"ab"],
    ),
)

# --- MessagePack -----------------------------------------------------------------------------
def mstr(s):
    b = s.encode()
    if len(b) < 32:
        return bytes([0xA0 | len(b)]) + b
    return b"\xd9" + bytes([len(b)]) + b


def mmap(pairs):
    return bytes([0x80 | len(pairs)]) + b"".join(k + v for k, v in pairs)


def mint(n):
    if 0 <= n < 128:
        return bytes([n])
    if n < 0 and n >= -32:
        return struct.pack("b", n)
    return b"\xd3" + struct.pack(">q", n)


rec1 = mmap(
    [
        (mstr("time"), mint(1_700_000_000)),
        (mstr("log"), mstr('10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] "GET / HTTP/1.1" 200 612')),
        (mstr("stream"), mstr("stdout")),
        (mstr("n"), b"\xcb" + struct.pack(">d", 2.5)),
        (mstr("ok"), b"\xc3"),
        (mstr("none"), b"\xc0"),
        (mstr("list"), b"\x93" + mint(1) + mint(-5) + mstr("x")),
        (mstr("nested"), mmap([(mstr("a"), mint(300)), (b"\x07", mstr("int key"))])),
    ]
)
rec2 = mmap([(mstr("time"), mint(1_700_000_001)), (mstr("log"), mstr("second")), (mstr("bin"), b"\xc4\x02hi")])
put("msgpack", "records.msgpack", rec1 + rec2 + rec1)
# fluentd event entries: [EventTime, record] and [integer time, record]
event_time = b"\xd7\x00" + struct.pack(">II", 1_700_000_002, 500_000_000)
put("msgpack", "fluentd.msgpack", b"\x92" + event_time + rec2 + b"\x92" + mint(1_700_000_003) + rec2)
# the timestamp extension (-1), 4- and 8-byte forms
put(
    "msgpack",
    "timestamp.msgpack",
    mmap([(mstr("ts"), b"\xd6\xff" + struct.pack(">I", 1_700_000_004)), (mstr("v"), mint(1))])
    + mmap([(mstr("ts"), b"\xd7\xff" + struct.pack(">Q", (5 << 34) | 1_700_000_005)), (mstr("v"), mint(2))]),
)

# --- pcap and pcapng --------------------------------------------------------------------------
def ipv4_udp(src, dst, sport, dport, payload):
    udp = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, bytes(src), bytes(dst))
    return ip + udp


def ipv4_tcp(src, dst, sport, dport, flags, payload=b""):
    tcp = struct.pack(">HHIIBBHHH", sport, dport, 1, 0, 0x50, flags, 65535, 0, 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0, 64, 6, 0, bytes(src), bytes(dst))
    return ip + tcp


def ipv6_icmp(payload):
    icmp = b"\x80\x00\x00\x00" + payload
    src = b"\x20\x01\x0d\xb8" + b"\x00" * 11 + b"\x01"
    dst = b"\x20\x01\x0d\xb8" + b"\x00" * 11 + b"\x02"
    return struct.pack(">IHBB", 0x60000000, len(icmp), 58, 64) + src + dst + icmp


def eth(payload, ethertype=0x0800, vlan=None):
    hdr = b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb"
    if vlan is not None:
        hdr += struct.pack(">HH", 0x8100, vlan)
    return hdr + struct.pack(">H", ethertype) + payload


A, B = [10, 0, 0, 1], [10, 0, 0, 2]
frames = [
    eth(ipv4_tcp(A, B, 40000, 80, 0x02)),
    eth(ipv4_tcp(B, A, 80, 40000, 0x12)),
    eth(ipv4_tcp(A, B, 40000, 80, 0x18, b"GET / HTTP/1.1\r\n\r\n")),
    eth(ipv4_udp(A, [8, 8, 8, 8], 5353, 53, b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00")),
    eth(ipv6_icmp(b"ping"), ethertype=0x86DD, vlan=7),
    eth(ipv4_tcp(A, B, 40000, 80, 0x11)),
]


def pcap(frames, linktype=1, magic=0xA1B2C3D4):
    out = struct.pack("<IHHiIII", magic, 2, 4, 0, 0, 65535, linktype)
    for i, f in enumerate(frames):
        out += struct.pack("<IIII", 1_700_000_000 + i, 1000 * i, len(f), len(f)) + f
    return out


put("pcap", "tcp-udp-vlan.pcap", pcap(frames))
put("pcap", "nanosecond.pcap", pcap(frames[:3], magic=0xA1B23C4D))
# raw IPv4 link type (101), big-endian file
be = struct.pack(">IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101)
for i, f in enumerate(frames[:2]):
    ip = f[14:]
    be += struct.pack(">IIII", 1_700_000_000 + i, 0, len(ip), len(ip)) + ip
put("pcap", "raw-be.pcap", be)


def block(btype, body):
    body += b"\x00" * (-len(body) % 4)
    n = 12 + len(body)
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def pcapng(frames):
    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    # IDB with an if_tsresol option (microseconds) and end of options
    idb = block(1, struct.pack("<HHI", 1, 0, 65535) + struct.pack("<HHB3x", 9, 1, 6) + b"\x00\x00\x00\x00")
    out = shb + idb
    for i, f in enumerate(frames):
        ts = (1_700_000_000 + i) * 1_000_000
        epb = struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(f), len(f)) + f + b"\x00" * (-len(f) % 4)
        out += block(6, epb)
    # a simple packet block and a name resolution block (skipped)
    out += block(3, struct.pack("<I", len(frames[0])) + frames[0])
    out += block(4, b"\x00\x00\x00\x00")
    return out


put("pcapng", "epb-spb.pcapng", pcapng(frames))
put("pcapng", "two-frames.pcapng", pcapng(frames[3:5]))


# --- sFlow v5 and NetFlow v5 / IPFIX in captures (targets sflow, netflow) ----------------------
def udp_frames(dport, payloads):
    return [eth(ipv4_udp([192, 0, 2, 1], [192, 0, 2, 9], 50000, dport, p)) for p in payloads]


def sflow_datagram(seq):
    sampled = eth(ipv4_tcp(A, B, 40000, 443, 0x18, b"x" * 20))
    sampled += b"\x00" * (-len(sampled) % 4)
    raw = struct.pack(">IIII", 1, 1500, 4, len(sampled)) + sampled  # ethernet header record
    raw_rec = struct.pack(">II", 1, len(raw)) + raw
    switch = struct.pack(">IIII", 100, 0, 200, 0)
    switch_rec = struct.pack(">II", 1001, len(switch)) + switch
    flow = struct.pack(">IIIIIIII", seq, 3, 1024, 1024 * seq, 0, 3, 4, 2) + raw_rec + switch_rec
    flow_sample = struct.pack(">II", 1, len(flow)) + flow
    generic = struct.pack(
        ">IIQIIQIIIIIIQIIIIII", 3, 6, 10**9, 1, 3, 123456, 100, 2, 1, 0, 0, 0, 654321, 90, 1, 1, 0, 0, 0
    )
    counters = struct.pack(">III", seq, 3, 1) + struct.pack(">II", 1, len(generic)) + generic
    counter_sample = struct.pack(">II", 2, len(counters)) + counters
    hdr = struct.pack(">II4sIIII", 5, 1, bytes([192, 0, 2, 1]), 0, seq, 3_600_000, 2)
    return hdr + flow_sample + counter_sample


put("sflow", "flow-and-counter.pcap", pcap(udp_frames(6343, [sflow_datagram(1), sflow_datagram(2)])))


def nf5_datagram():
    recs = b""
    for i in range(2):
        recs += struct.pack(
            ">4s4s4sHHIIIIHHBBBBHHBBH",
            bytes(A), bytes([8, 8, 8, 8 + i]), bytes(B), 1, 2, 10 + i, 1000 + i, 1000, 2000,
            40000 + i, 53, 0, 0x18, 17, 0, 64500, 15169, 24, 24, 0,
        )
    return struct.pack(">HHIIIIBBH", 5, 2, 3_600_000, 1_700_000_000, 0, 1, 0, 0, 0) + recs


def ipfix_datagram():
    fields = [(8, 4), (12, 4), (7, 2), (11, 2), (4, 1), (1, 8), (2, 8), (152, 8), (153, 8)]
    tmpl = struct.pack(">HH", 256, len(fields)) + b"".join(struct.pack(">HH", f, l) for f, l in fields)
    tset = struct.pack(">HH", 2, 4 + len(tmpl)) + tmpl
    rec = struct.pack(">4s4sHHBQQQQ", bytes(A), bytes(B), 40000, 443, 6, 1500, 3, 1_700_000_000_000, 1_700_000_001_000)
    dset = struct.pack(">HH", 256, 4 + len(rec)) + rec
    body = tset + dset
    return struct.pack(">HHIII", 10, 16 + len(body), 1_700_000_001, 1, 7) + body


put("netflow", "v5.pcap", pcap(udp_frames(2055, [nf5_datagram()])))
put("netflow", "ipfix-template-and-data.pcap", pcap(udp_frames(4739, [ipfix_datagram()])))


# --- fluentd Forward protocol (target forward): what a client sends on one connection ------------
def marr(items):
    return bytes([0x90 | len(items)]) + b"".join(items)


def mbin(b):
    return b"\xc4" + bytes([len(b)]) + b if len(b) < 256 else b"\xc5" + struct.pack(">H", len(b)) + b


def chunk(c):
    return mmap([(mstr("chunk"), mstr(c))])


entry1 = marr([event_time, rec2])
entry2 = marr([mint(1_700_000_003), rec1])
packed = entry1 + entry2 + entry1
gz = zlib.compressobj(9, zlib.DEFLATED, 31)
gzipped = gz.compress(packed) + gz.flush()
# Message mode with and without options, a keepalive, Forward mode with a chunk.
put(
    "forward",
    "message-forward.mp",
    marr([mstr("docker.nginx"), mint(1_700_000_000), rec2])
    + b"\xc0"
    + marr([mstr("docker.nginx"), event_time, rec1, chunk("m1")])
    + marr([mstr("app"), marr([entry1, entry2]), chunk("f1")]),
)
# PackedForward (bin and str entries, with size) and CompressedPackedForward.
put(
    "forward",
    "packed.mp",
    marr([mstr("docker.nginx"), mbin(packed), mmap([(mstr("chunk"), mstr("p1")), (mstr("size"), mint(3))])])
    + marr([mstr("app"), mbin(gzipped), mmap([(mstr("compressed"), mstr("gzip")), (mstr("chunk"), mstr("p2"))])]),
)
# fluent-bit's time as [EventTime, metadata], and a frame ending mid-way.
put(
    "forward",
    "fluent-bit.mp",
    marr([mstr("fb"), marr([marr([marr([event_time, mmap([])]), rec2])]), chunk("fb1")])
    + marr([mstr("fb"), mint(1)])[:3],
)
