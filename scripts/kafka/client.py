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
