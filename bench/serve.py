#!/usr/bin/env python3
"""silt serve benchmark (issue 22): sustained fluentd Forward ingest with acks, freshness from
acknowledgement to visible in a query, and RSS over the run.

  bench/serve.sh [--family real|gen] [--seconds 60] [--connections 2] [--window 8] [--frame-events 1000]

Starts `silt serve` on a fresh lake with the Forward route of the README
(docker.** -> docker.nginx, --parse-field docker.nginx:log=access), then for --seconds:
- N connections send PackedForward frames (chunk option on) of Docker json-file-like nginx
  records (--family real: the corpus's web-shop access log, repeated with shifted days and
  perturbed addresses; gen: generated lines), keeping up to --window frames in flight each; every ack's latency is recorded;
- once every 100 ms a marker record is POSTed to /v1/ingest/bench.fresh, and /v1/query is polled
  until it is counted: the time from the HTTP 200 to visible is the freshness;
- the server's RSS is sampled every second.
Prints events/s, ack p50/p99, freshness p50/p99, RSS at 1/4 and at the end, and the ratios to the
issue's goals (>= 300k events/s, p99 ack <= 50 ms, p99 freshness <= 250 ms, RSS flat within 20 %).
No other tool runs here the same way (fluentd + columnify cannot answer a query), so the baseline
for freshness is RASP's published 1.161 s mean producer-to-queryable.
"""
import argparse, json, os, random, socket, statistics, subprocess, sys, tempfile, threading, time
import urllib.request

import msgpack


def nginx_line(i, rnd):
    ip = f"10.{rnd.randrange(256)}.{rnd.randrange(256)}.{rnd.randrange(1, 255)}"
    path = rnd.choice(["/", "/index.html", "/api/v1/items", "/static/app.js", "/login"])
    status = rnd.choice([200, 200, 200, 304, 404, 500])
    return (f'{ip} - - [24/Mar/2024:17:{(i // 60) % 60:02d}:{i % 60:02d} +0000] "GET {path} HTTP/1.1" '
            f'{status} {rnd.randrange(100, 50000)} "-" "Mozilla/5.0 (X11; Linux x86_64)"')


def corpus_lines():
    """The corpus's real nginx access log (1,000 lines of a web shop), or exit."""
    root = os.environ.get("SILT_CORPUS") or os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpus")
    p = os.path.join(root, "weblogs", "lnav-shop_access_log.0")
    if not os.path.exists(p):
        sys.exit(f"{p}: corpus web log not found (set SILT_CORPUS)")
    with open(p, encoding="utf-8", errors="replace") as f:
        return [l.rstrip("\n") for l in f if l.strip()]


def real_line(lines, k, rnd):
    """Corpus line k mod n, its client address perturbed and its time shifted by one day per
    pass over the file (real-derived, like the Zeek benchmark's inputs)."""
    line = lines[k % len(lines)]
    ip, rest = line.split(" ", 1)
    a = ip.split(".")
    if len(a) == 4:
        ip = ".".join(a[:3] + [str((int(a[3]) + k // len(lines)) % 256)])
    day = 22 + (k // len(lines)) % 6
    return ip + " " + rest.replace("22/Jan/2019", f"{day:02d}/Jan/2019", 1)


def make_frames(n_frames, per_frame, family, seed=7):
    rnd = random.Random(seed)
    lines = corpus_lines() if family == "real" else None
    frames = []
    k = 0
    for f in range(n_frames):
        entries = bytearray()
        for _ in range(per_frame):
            t = msgpack.ExtType(0, (1711299600 + k // 1000).to_bytes(4, "big") + (k % 1000 * 1000).to_bytes(4, "big"))
            log = real_line(lines, k, rnd) if lines else nginx_line(k, rnd)
            rec = {"container_id": "3f2a" * 16, "container_name": "/web", "source": "stdout",
                   "log": log}
            entries += msgpack.packb([t, rec], use_bin_type=True)
            k += 1
        frames.append(bytes(entries))
    return frames


def packed(tag, entries, chunk, n):
    return msgpack.packb([tag, entries, {"chunk": chunk, "size": n}], use_bin_type=True)


def sender(port, frames, per_frame, window, stop, lat, counts, cid):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    unpacker = msgpack.Unpacker(raw=False)
    sent = {}
    i = 0
    while not stop.is_set() or sent:
        while not stop.is_set() and len(sent) < window:
            chunk = f"c{cid}-{i}"
            sent[chunk] = time.perf_counter()
            s.sendall(packed("docker.web", frames[i % len(frames)], chunk, per_frame))
            i += 1
        data = s.recv(65536)
        if not data:
            break
        unpacker.feed(data)
        now = time.perf_counter()
        for msg in unpacker:
            t0 = sent.pop(msg["ack"], None)
            if t0 is not None:
                lat.append(now - t0)
                counts[cid] += per_frame
    s.close()


def http(url, body=None, ctype="application/sql"):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": ctype})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read()


def freshness(hport, stop, out):
    i = 0
    while not stop.is_set():
        rec = json.dumps({"time": "2024-03-24T17:00:00Z", "mark": i}).encode() + b"\n"
        http(f"http://127.0.0.1:{hport}/v1/ingest/bench.fresh", rec, "application/x-ndjson")
        t0 = time.perf_counter()
        q = f"SELECT count(*) AS n FROM bench.fresh WHERE mark = {i}".encode()
        while time.perf_counter() - t0 < 30:
            try:
                n = json.loads(http(f"http://127.0.0.1:{hport}/v1/query", q))[0]["n"]
            except Exception:
                n = 0
            if n >= 1:
                break
            time.sleep(0.002)
        out.append(time.perf_counter() - t0)
        i += 1
        time.sleep(0.1)


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--silt", required=True)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--connections", type=int, default=2)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--frame-events", type=int, default=1000)
    ap.add_argument("--family", choices=["real", "gen"], default="real",
                    help="real: the corpus's nginx access log repeated with shifted days and addresses "
                         "(default); gen: generated nginx lines")
    a = ap.parse_args()
    lake = tempfile.mkdtemp(prefix="silt-bench-serve-")
    fport, hport = free_port(), free_port()
    print(f"== making frames ({a.frame_events} events each)", flush=True)
    frames = make_frames(64, a.frame_events, a.family)
    srv = subprocess.Popen([a.silt, "serve", "--lake", lake, "--http", f"127.0.0.1:{hport}",
                            "--forward", f"127.0.0.1:{fport}", "--route", "docker.**=docker.nginx",
                            "--parse-field", "docker.nginx:log=access"],
                           stderr=subprocess.PIPE, text=True)
    for line in srv.stderr:
        if line.startswith("Ctrl-C"):
            break
    threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()
    stop = threading.Event()
    lat, fresh, samples = [], [], []
    counts = [0] * a.connections
    threads = [threading.Thread(target=sender, args=(fport, frames, a.frame_events, a.window, stop, lat, counts, c))
               for c in range(a.connections)]
    threads.append(threading.Thread(target=freshness, args=(hport, stop, fresh)))
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    while time.perf_counter() - t0 < a.seconds:
        time.sleep(1)
        samples.append((time.perf_counter() - t0, rss(srv.pid)))
    stop.set()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    events = sum(counts)
    rate = events / wall
    quarter = [r for (t, r) in samples if t >= a.seconds / 4][:1] or [samples[0][1]]
    end = samples[-1][1]
    growth = end / quarter[0] - 1
    print(f"\nsilt serve, family {a.family}, {a.connections} Forward connections x {a.window} frames in flight, "
          f"{a.frame_events} events/frame, {wall:.0f} s, 2 CPUs shared with the clients")
    print(f"| measure | value | goal | ratio to goal |")
    print(f"|---|---|---|---|")
    print(f"| Forward events/s (acked) | {rate:,.0f} | >= 300,000 | {rate / 300000:.2f} |")
    print(f"| ack latency p50 / p99 | {pct(lat, 50) * 1e3:.1f} / {pct(lat, 99) * 1e3:.1f} ms | p99 <= 50 ms | {pct(lat, 99) * 1e3 / 50:.2f} |")
    print(f"| freshness (200 -> visible) p50 / p99, n={len(fresh)} | {pct(fresh, 50) * 1e3:.1f} / {pct(fresh, 99) * 1e3:.1f} ms | p99 <= 250 ms | {pct(fresh, 99) * 1e3 / 250:.2f} |")
    print(f"| freshness p99 / RASP's 1.161 s mean | | | {pct(fresh, 99) / 1.161:.3f} |")
    print(f"| RSS at {a.seconds / 4:.0f} s / end | {quarter[0] / 2**20:.0f} / {end / 2**20:.0f} MiB | within 20 % | {growth * 100:+.0f} % |")
    sys.stdout.flush()
    t1 = time.perf_counter()
    srv.terminate()
    srv.wait(timeout=1800)
    print(f"drain after SIGTERM (everything acknowledged written to the lake): {time.perf_counter() - t1:.1f} s")
    out = subprocess.run([a.silt, "query", "--lake", lake, "--format", "csv",
                          "SELECT count(*) FROM docker.nginx"], capture_output=True, text=True)
    print(f"rows in the lake after the drain: {out.stdout.splitlines()[-1]} (acked: {events})")


if __name__ == "__main__":
    main()
