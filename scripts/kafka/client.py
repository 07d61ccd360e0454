#!/usr/bin/env python3
"""Kafka client side of silt's tests and benchmarks (confluent-kafka, from scripts/pyenv.sh).

  client.py produce-ids BROKER TOPIC FIRST COUNT [--compression C] [--rate N]
      JSON records {"id": i, "host": ..., "bytes": ...} for i in FIRST..FIRST+COUNT, keyed by id
      (spread over the topic's partitions); --rate limits records/s.
  client.py produce-file BROKER TOPIC FILE [--compression C] [--msgpack] [--poison-at N] [--meta]
      every non-empty line of FILE as one message (--msgpack: each line, a JSON object, is sent
      msgpack-encoded); --poison-at N sends the bytes b'{"broken' as message N (0-based) first;
      --meta gives line n (0-based) the key str(n) (none when n % 50 == 7) and the headers
      n=str(n), bin=b'\xffok', tag=a, tag=b.
  client.py consume-avro BROKER TOPIC COUNT (--schemas DIR | --registry URL)
      reads COUNT Avro messages from the start of TOPIC with fastavro (an implementation of its
      own): single-object encoding (C3 01, Rabin fingerprint, record), checking the fingerprint
      against fastavro's own of the DIR/<fingerprint>.avsc schema, or the Confluent wire format
      (00, schema id, record) with the schema fetched from the registry; prints one JSON line per
      message: {"key", "fingerprint" or "id", "value"} (times as epoch microseconds, decimals as
      integers).
  client.py offsets BROKER GROUP TOPIC
      prints JSON {"committed": {p: o}, "end": {p: o}}.
Prints the number of messages produced (produce-*). Exits non-zero when a delivery failed.
"""
import json
import sys
import time

import confluent_kafka as ck


def producer(broker, compression):
    return ck.Producer({
        "bootstrap.servers": broker,
        "compression.type": compression,
        "linger.ms": 20,
        "enable.idempotence": True,
        "queue.buffering.max.messages": 200000,
    })


failed = []


def delivered(err, _msg):
    if err is not None:
        failed.append(str(err))


def send(p, topic, value, key=None, headers=None):
    while True:
        try:
            p.produce(topic, value, key=key, headers=headers, on_delivery=delivered)
            return
        except BufferError:
            p.poll(0.05)


def opt(args, name, default=None):
    if name in args:
        i = args.index(name)
        v = args[i + 1]
        del args[i:i + 2]
        return v
    return default


def canon(v):
    import datetime
    import decimal
    if isinstance(v, dict):
        return {k: canon(x) for k, x in v.items()}
    if isinstance(v, list):
        return [canon(x) for x in v]
    if isinstance(v, datetime.datetime):
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        return (v - epoch) // datetime.timedelta(microseconds=1)
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else str(v)
    if isinstance(v, bytes):
        return v.hex()
    return v


def consume_avro(args):
    import io
    import os
    import struct
    import urllib.request
    import fastavro
    from fastavro.schema import fingerprint, to_parsing_canonical_form
    schemas = opt(args, "--schemas")
    registry = opt(args, "--registry")
    broker, topic, count = args[0], args[1], int(args[2])
    by_fp = {}
    if schemas:
        for f in os.listdir(schemas):
            if f.endswith(".avsc"):
                with open(os.path.join(schemas, f)) as fh:
                    parsed = fastavro.parse_schema(json.load(fh))
                fp = fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO")
                # The file is named by the fingerprint as a 64-bit number in hex; fastavro gives
                # its little-endian bytes, as messages carry it.
                want = int.from_bytes(bytes.fromhex(fp), "little")
                if f != f"{want:016x}.avsc":
                    sys.exit(f"consume-avro: {f} holds a schema whose fingerprint is {want:016x}")
                by_fp[bytes.fromhex(fp)] = parsed
    by_id = {}
    c = ck.Consumer({"bootstrap.servers": broker, "group.id": f"avro-{time.time()}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    n, deadline = 0, time.time() + 120
    while n < count and time.time() < deadline:
        m = c.poll(1.0)
        if m is None or m.error():
            continue
        v = m.value()
        out = {"key": m.key().decode() if m.key() is not None else None}
        if schemas:
            if v[:2] != b"\xc3\x01":
                sys.exit(f"consume-avro: not single-object encoded: {v[:10].hex()}")
            if v[2:10] not in by_fp:
                sys.exit(f"consume-avro: no schema in {schemas} has fingerprint {v[2:10].hex()}")
            parsed, body = by_fp[v[2:10]], v[10:]
            out["fingerprint"] = v[2:10].hex()
        else:
            if v[0] != 0:
                sys.exit(f"consume-avro: not in the Confluent wire format: {v[:5].hex()}")
            sid = struct.unpack(">I", v[1:5])[0]
            if sid not in by_id:
                with urllib.request.urlopen(f"{registry}/schemas/ids/{sid}") as r:
                    by_id[sid] = fastavro.parse_schema(json.loads(json.load(r)["schema"]))
            parsed, body = by_id[sid], v[5:]
            out["id"] = sid
        buf = io.BytesIO(body)
        out["value"] = canon(fastavro.schemaless_reader(buf, parsed))
        if buf.read():
            sys.exit("consume-avro: bytes left after the record")
        print(json.dumps(out))
        n += 1
    c.close()
    if n < count:
        sys.exit(f"consume-avro: {n} of {count} messages within 120 s")


def main():
    args = sys.argv[1:]
    cmd = args.pop(0)
    if cmd == "produce-ids":
        compression = opt(args, "--compression", "none")
        rate = float(opt(args, "--rate", "0"))
        broker, topic, first, count = args[0], args[1], int(args[2]), int(args[3])
        p = producer(broker, compression)
        t0 = time.time()
        for n, i in enumerate(range(first, first + count)):
            rec = {"id": i, "host": f"10.0.{i % 250}.{i % 7}", "bytes": i * 3 % 10007}
            send(p, topic, json.dumps(rec).encode(), key=str(i).encode())
            p.poll(0)
            if rate > 0 and n % 100 == 0:
                ahead = n / rate - (time.time() - t0)
                if ahead > 0:
                    time.sleep(ahead)
        p.flush(60)
        print(count)
    elif cmd == "produce-file":
        compression = opt(args, "--compression", "none")
        poison = opt(args, "--poison-at")
        as_msgpack = "--msgpack" in args
        if as_msgpack:
            args.remove("--msgpack")
            import msgpack
        meta = "--meta" in args
        if meta:
            args.remove("--meta")
        broker, topic, path = args[0], args[1], args[2]
        p = producer(broker, compression)
        n = 0
        with open(path, "rb") as f:
            for line in f:
                line = line.rstrip(b"\r\n")
                if not line:
                    continue
                if poison is not None and n == int(poison):
                    send(p, topic, b'{"broken')
                if as_msgpack:
                    line = msgpack.packb(json.loads(line))
                if meta:
                    key = None if n % 50 == 7 else str(n).encode()
                    headers = [("n", str(n).encode()), ("bin", b"\xffok"), ("tag", b"a"),
                               ("tag", b"b")]
                    send(p, topic, line, key=key, headers=headers)
                else:
                    send(p, topic, line)
                n += 1
                p.poll(0)
        p.flush(60)
        print(n)
    elif cmd == "consume-avro":
        consume_avro(args)
    elif cmd == "offsets":
        broker, group, topic = args
        c = ck.Consumer({"bootstrap.servers": broker, "group.id": group,
                         "enable.auto.commit": False})
        md = c.list_topics(topic, timeout=30)
        parts = [ck.TopicPartition(topic, p) for p in md.topics[topic].partitions]
        committed = {tp.partition: tp.offset for tp in c.committed(parts, timeout=30)}
        end = {tp.partition: c.get_watermark_offsets(tp, timeout=30)[1] for tp in parts}
        c.close()
        print(json.dumps({"committed": committed, "end": end}))
    else:
        sys.exit(f"client.py: unknown command {cmd}")
    if failed:
        sys.exit(f"client.py: {len(failed)} deliveries failed, first: {failed[0]}")


if __name__ == "__main__":
    main()
