"""A fluent-logger (Python) client for silt-forward's real-client test (tests/clients.rs).

Sends events with nested maps, binary values, EventTime (nanosecond_precision=True) and
integer time through fluent.sender.FluentSender (Message mode, no acks: the library has
none). Then, since the library cannot ask for acks, it sends a PackedForward and a
CompressedPackedForward frame with a `chunk` option itself (encoded with the same `msgpack`
package the library uses) and checks each ack. Usage: send_events.py HOST PORT.
"""

import gzip
import socket
import sys

import msgpack
from fluent import sender


def record(i):
    return {
        "n": i,
        "msg": "hello %d" % i,
        "bin": b"\x00\x01\xff",
        "nested": {"list": [1, "x", True, None], "f": 1.5, "deeper": {"k": "v"}},
    }


def read_ack(sock):
    unpacker = msgpack.Unpacker(raw=False)
    while True:
        data = sock.recv(4096)
        if not data:
            raise SystemExit("server closed before the ack")
        unpacker.feed(data)
        for obj in unpacker:
            return obj


def main():
    host, port = sys.argv[1], int(sys.argv[2])

    ns = sender.FluentSender("py", host=host, port=port, nanosecond_precision=True)
    for i in range(3):
        if not ns.emit_with_time("ns", 1700000000 + i + 0.25, record(i)):
            raise SystemExit("emit failed: %r" % ns.last_error)
    ns.close()

    secs = sender.FluentSender("py", host=host, port=port)
    for i in range(3):
        if not secs.emit_with_time("int", 1700000100 + i, record(10 + i)):
            raise SystemExit("emit failed: %r" % secs.last_error)
    secs.close()

    entries = b"".join(
        msgpack.packb([sender.EventTime(1700000200 + i, 7), record(20 + i)]) for i in range(4)
    )
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(msgpack.packb(["py.packed", entries, {"chunk": "py-chunk-1", "size": 4}]))
        ack = read_ack(s)
        if ack != {"ack": "py-chunk-1"}:
            raise SystemExit("bad ack %r" % (ack,))
        half = len(entries) // 2
        compressed = gzip.compress(entries[:half]) + gzip.compress(entries[half:])
        s.sendall(
            msgpack.packb(
                ["py.gzip", compressed, {"chunk": "py-chunk-2", "compressed": "gzip", "size": 4}]
            )
        )
        ack = read_ack(s)
        if ack != {"ack": "py-chunk-2"}:
            raise SystemExit("bad ack %r" % (ack,))
    print("ok")


if __name__ == "__main__":
    main()
