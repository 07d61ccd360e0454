#!/usr/bin/env python3
"""silt serve benchmark (issue 22): sustained fluentd Forward ingest with acks, freshness from
acknowledgement to visible in a query, and RSS over the run.

  bench/serve.sh [--family real|gen] [--seconds 60] [--connections 2] [--window 8] [--frame-events 1000]
  bench/serve.sh --rate 300000 ...          # open loop: this many events/s offered
  bench/serve.sh --times cycle ...          # the same 64 seconds of event time over and over (before 2026-11-28)

Starts `silt serve` on a fresh lake with the Forward route of the README
(docker.** -> docker.nginx, --parse-field docker.nginx:log=access), then for --seconds:
- N connections send PackedForward frames (chunk option on) of Docker json-file-like nginx
  records (--family real: the corpus's web-shop access log, repeated with shifted days and
  perturbed addresses; gen: generated lines), and every ack's latency is recorded:
  - closed loop (default): each connection keeps up to --window frames in flight and sends the
    next one when an ack comes back: the highest rate the server sustains, but the latency is
    then set by the window (Little's law: mean ~ frames in flight / rate), not by the server;
  - open loop (--rate R): frames are sent on a fixed schedule, R events/s over all connections
    whatever the acks do (a sending thread and a receiving thread per connection), and each
    ack's latency is measured from its frame's *scheduled* send time, so a server that pushes
    back (TCP, withheld acks) or a client that falls behind its schedule counts against the
    latency (no coordinated omission). How late the client itself sent is printed apart;
    frames still unacknowledged 30 s after the end are counted (and their latency taken as
    at least that wait);
- once every 100 ms a marker record is POSTed to /v1/ingest/bench.fresh, and /v1/query is polled
  until it is counted: the time from the HTTP 200 to visible is the freshness;
- the server's RSS is sampled every second.
Prints events/s, ack p50/p99, freshness p50/p99, RSS at 1/4 and at the end, and the ratios to the
issue's goals (>= 300k events/s, p99 ack <= 50 ms, p99 freshness <= 250 ms, RSS flat within 20 %).
No other tool runs here the same way (fluentd + columnify cannot answer a query), so the baseline
for freshness is RASP's published 1.161 s mean producer-to-queryable.
"""
import argparse, json, os, random, select, shutil, socket, statistics, subprocess, sys, tempfile, threading, time
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


# --times advance: each entry's EventTime is (seconds, nanoseconds) with the seconds and the
# nanoseconds' top byte put per frame where this marker is (one C-level join per frame, cheap
# enough for the client to keep its schedule) and the low 3 bytes the entry's index in
# microseconds: global frame n is at BASE + n // 59 s + (n % 59) * 2**24 ns, entry j 1 µs later
# each, so event time advances frame by frame (about 16.8 ms of event time per frame) as a live
# stream's does.
BASE = 1711299600
MARK = b"\xf8\xf9\xfa\xfb\xfc"


def make_frames(n_frames, per_frame, family, times, seed=7):
    rnd = random.Random(seed)
    lines = corpus_lines() if family == "real" else None
    frames = []
    k = 0
    for f in range(n_frames):
        entries = bytearray()
        for j in range(per_frame):
            if times == "cycle":
                t = msgpack.ExtType(0, (BASE + k // 1000).to_bytes(4, "big") + (k % 1000 * 1000).to_bytes(4, "big"))
            else:
                t = msgpack.ExtType(0, MARK + (j * 1000).to_bytes(3, "big"))
            log = real_line(lines, k, rnd) if lines else nginx_line(k, rnd)
            rec = {"container_id": "3f2a" * 16, "container_name": "/web", "source": "stdout",
                   "log": log}
            entries += msgpack.packb([t, rec], use_bin_type=True)
            k += 1
        if times == "advance":
            assert entries.count(MARK) == per_frame
        frames.append(bytes(entries))
    return frames


class Frames:
    """The frames to send: connection `cid` of `conns` sends `get(i, cid)` as its i-th frame.

    times "cycle": the 64 prebuilt frames over and over, the same event times each pass (all
    the runs recorded before 2026-11-28; the server's sort then has to interleave the two
    connections' rows one by one). "advance": event time advances with every frame sent, over
    all connections (global frame number i * conns + cid), as a live stream's does."""

    def __init__(self, templates, times, conns):
        self.templates, self.times, self.conns = templates, times, conns
        # Split at the markers once; a frame is then one join (a copy), not a search.
        self.parts = [t.split(MARK) for t in templates]

    def get(self, i, cid):
        k = i % len(self.templates)
        if self.times == "cycle":
            return self.templates[k]
        n = i * self.conns + cid
        return ((BASE + n // 59).to_bytes(4, "big") + bytes([n % 59])).join(self.parts[k])


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
            s.sendall(packed("docker.web", frames.get(i, cid), chunk, per_frame))
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


def open_sender(port, frames, per_frame, interval, offset, t_end, lat, counts, cid, lags, unacked, trace):
    """Open loop: sends frame k of this connection at t0 + offset + k * interval (or at once when
    late), a second thread reads the acks; latency from the scheduled time."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sched = {}
    state = {"done": False}

    def receiver():
        unpacker = msgpack.Unpacker(raw=False)
        deadline = None
        while True:
            if state["done"]:
                if not sched:
                    break
                deadline = deadline or time.perf_counter() + 30
                if time.perf_counter() > deadline:
                    break
            # Not a socket timeout: that would apply to the sender's sendall as well.
            if not select.select([s], [], [], 0.2)[0]:
                continue
            data = s.recv(65536)
            if not data:
                break
            now = time.perf_counter()
            unpacker.feed(data)
            for msg in unpacker:
                t = sched.pop(msg["ack"], None)
                if t is not None:
                    lat.append(now - t[0])
                    counts[cid] += per_frame
                    if trace is not None:
                        trace.append((cid, msg["ack"], t[0], t[1], now))
        # Never acknowledged: at least this late.
        now = time.perf_counter()
        for chunk, t in list(sched.items()):
            lat.append(now - t[0])
            unacked[cid] += 1

    rt = threading.Thread(target=receiver)
    rt.start()
    i = 0
    nxt = offset
    while nxt < t_end:
        now = time.perf_counter()
        if nxt > now:
            time.sleep(nxt - now)
            now = time.perf_counter()
        chunk = f"c{cid}-{i}"
        sched[chunk] = (nxt, now)
        lags.append(now - nxt)
        s.sendall(packed("docker.web", frames.get(i, cid), chunk, per_frame))
        i += 1
        nxt += interval
    state["done"] = True
    rt.join()
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


SERIES = ["memory_rows_bytes", "wal_last_seq", "ingest_visible_seq", "flushed_seq", "flush_total",
          "flush_files_total", "queries_total", "query_seconds_total", "compactions_total",
          "lake_files", "footer_cache_bytes", "memory_trims_total", "memory_trim_seconds_total"]


def metrics(hport):
    """The server's /metrics named in SERIES ({} if it does not answer within 1 s)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{hport}/metrics", timeout=1) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        name, _, v = line.partition(" ")
        if name.startswith("silt_") and name[5:] in SERIES:
            out[name[5:]] = v
    return out


def meminfo():
    """The machine's dirty and under-writeback page cache, MiB (what the disk has yet to take)."""
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Dirty", "Writeback"):
                out[k] = int(v.split()[0]) // 1024
    return out


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
    ap.add_argument("--times", choices=["advance", "cycle"], default="advance",
                    help="event times: advance frame by frame as a live stream's (default), or cycle "
                         "over the same 64 seconds (the runs before 2026-11-28)")
    ap.add_argument("--rate", type=float, default=0,
                    help="open loop: events/s offered over all connections, on a fixed schedule "
                         "(latency from each frame's scheduled send time); 0: closed loop (--window)")
    ap.add_argument("--serve-arg", action="append", default=[],
                    help="one more argument for `silt serve` (repeat it: --serve-arg=--flush-size --serve-arg=256MiB)")
    ap.add_argument("--keep-lake", action="store_true", help="keep the lake (removed after the run otherwise)")
    ap.add_argument("--lake", help="serve into this lake (e.g. s3://bucket/prefix, with the AWS_* variables set) "
                                   "instead of a fresh temporary directory")
    ap.add_argument("--result", help="also write the figures here (JSON), for bench/object_lake.py")
    ap.add_argument("--trace", help="open loop: write each frame's conn,chunk,scheduled,sent,acked times here (CSV)")
    ap.add_argument("--series", help="write, every second, the server's RSS, the machine's dirty and under-writeback page "
                                     "cache and a few of the server's /metrics here (CSV): where memory or lag grows "
                                     "over a long run")
    ap.add_argument("--against", type=float, metavar="SECONDS",
                    help="first a run of SECONDS (same settings, its own lake), then the --seconds run, and "
                         "compare their RSS over the last 30 s (goal: within 20 %%; e.g. --against 60 --seconds 600)")
    a = ap.parse_args()
    if a.times == "advance" and a.frame_events > 16000:
        # Entry j's microseconds fill the low 3 bytes of its nanoseconds (see MARK).
        ap.error("--times advance stamps at most 16,000 events per frame; use --times cycle for more")
    if a.against and (a.lake or a.series or a.trace or a.result):
        ap.error("--against runs twice: leave out --lake, --series, --trace and --result")
    if a.against:
        short = one(argparse.Namespace(**{**vars(a), "seconds": a.against}))
        full = one(a)
        ratio = full / short
        print(f"\n| RSS, median of the last 30 s | {short / 2**20:.0f} MiB after {a.against:.0f} s / "
              f"{full / 2**20:.0f} MiB after {a.seconds:.0f} s | within 20 % | {(ratio - 1) * 100:+.0f} % |")
    else:
        one(a)


def one(a):
    """One benchmark run in a fresh temporary directory; returns its RSS figure (bytes: the median of
    the last 30 s of samples)."""
    tmp = tempfile.mkdtemp(prefix="silt-bench-serve-")
    # An object-store lake keeps the server's write-ahead log and staging in a state directory.
    lake, state = (a.lake, ["--state", os.path.join(tmp, "state")]) if a.lake else (tmp, [])
    procs = []
    try:
        return run(a, lake, state, procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if a.keep_lake:
            print(f"lake kept: {lake}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def run(a, lake, state, procs):
    fport, hport = free_port(), free_port()
    print(f"== making frames ({a.frame_events} events each)", flush=True)
    frames = Frames(make_frames(64, a.frame_events, a.family, a.times), a.times, a.connections)
    srv = subprocess.Popen([a.silt, "serve", "--lake", lake, "--http", f"127.0.0.1:{hport}",
                            "--forward", f"127.0.0.1:{fport}", "--route", "docker.**=docker.nginx",
                            "--parse-field", "docker.nginx:log=access"] + state + a.serve_arg,
                           stderr=subprocess.PIPE, text=True)
    procs.append(srv)
    said = []
    for line in srv.stderr:
        if line.startswith("Ctrl-C"):
            break
        said.append(line)
    else:
        sys.exit("silt serve did not start:\n" + "".join(said[-20:]))
    threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()
    stop = threading.Event()
    lat, fresh, samples, lags = [], [], [], []
    trace = [] if a.trace else None
    counts = [0] * a.connections
    unacked = [0] * a.connections
    t0, t0_wall = time.perf_counter(), time.time()
    if a.rate > 0:
        # Each connection sends one frame every `interval`; the connections are staggered.
        interval = a.frame_events * a.connections / a.rate
        t_start = t0 + 0.05
        threads = [threading.Thread(target=open_sender,
                                    args=(fport, frames, a.frame_events, interval, t_start + c * interval / a.connections,
                                          t_start + a.seconds, lat, counts, c, lags, unacked, trace))
                   for c in range(a.connections)]
    else:
        threads = [threading.Thread(target=sender, args=(fport, frames, a.frame_events, a.window, stop, lat, counts, c))
                   for c in range(a.connections)]
    fresh_thread = threading.Thread(target=freshness, args=(hport, stop, fresh))
    for t in threads + [fresh_thread]:
        t.start()
    series = open(a.series, "w") if a.series else None
    if series:
        series.write("t,rss_mib,dirty_mib,writeback_mib," + ",".join(SERIES) + "\n")
    while time.perf_counter() - t0 < a.seconds:
        time.sleep(1)
        samples.append((time.perf_counter() - t0, rss(srv.pid)))
        if series:
            m, mem = metrics(hport), meminfo()
            series.write(f"{samples[-1][0]:.1f},{samples[-1][1] / 2**20:.0f},{mem.get('Dirty', '')},{mem.get('Writeback', '')},"
                         + ",".join(m.get(k, "") for k in SERIES) + "\n")
            series.flush()
    if series:
        series.close()
    stop.set()
    for t in threads + [fresh_thread]:
        t.join()
    wall = time.perf_counter() - t0
    events = sum(counts)
    # Open loop: the rate over the sending period (the last acks may come after it).
    rate = events / (a.seconds if a.rate > 0 else wall)
    quarter = [r for (t, r) in samples if t >= a.seconds / 4][:1] or [samples[0][1]]
    end = samples[-1][1]
    growth = end / quarter[0] - 1
    # The server hands memory back after backlogs (crates/silt-serve/src/memory.rs), so one sample
    # swings with where it falls between two trims: the last 30 s say more.
    last = sorted(r for (t, r) in samples if t >= samples[-1][0] - 30)
    settled = last[len(last) // 2]
    if a.rate > 0:
        mode = (f"open loop: {a.rate:,.0f} events/s offered on a fixed schedule over {a.connections} Forward connections, "
                f"latency from each frame's scheduled send time")
    else:
        mode = f"closed loop: {a.connections} Forward connections x {a.window} frames in flight"
    print(f"\nsilt serve, family {a.family}, event times {a.times}, {mode}, {a.frame_events} events/frame, {a.seconds:.0f} s, "
          f"2 CPUs shared with the clients")
    print(f"| measure | value | goal | ratio to goal |")
    print(f"|---|---|---|---|")
    if a.rate > 0:
        print(f"| Forward events/s acked (offered {a.rate:,.0f}) | {rate:,.0f} | >= 300,000 | {rate / 300000:.2f} |")
    else:
        print(f"| Forward events/s (acked) | {rate:,.0f} | >= 300,000 | {rate / 300000:.2f} |")
    print(f"| ack latency p50 / p99 / max, n={len(lat)} | {pct(lat, 50) * 1e3:.1f} / {pct(lat, 99) * 1e3:.1f} / {max(lat) * 1e3:.1f} ms | p99 <= 50 ms | {pct(lat, 99) * 1e3 / 50:.2f} |")
    print(f"| freshness (200 -> visible) p50 / p99, n={len(fresh)} | {pct(fresh, 50) * 1e3:.1f} / {pct(fresh, 99) * 1e3:.1f} ms | p99 <= 250 ms | {pct(fresh, 99) * 1e3 / 250:.2f} |")
    print(f"| freshness p99 / RASP's 1.161 s mean | | | {pct(fresh, 99) / 1.161:.3f} |")
    print(f"| RSS at {a.seconds / 4:.0f} s / end | {quarter[0] / 2**20:.0f} / {end / 2**20:.0f} MiB | within 20 % | {growth * 100:+.0f} % |")
    print(f"| RSS, median of the last 30 s / highest | {settled / 2**20:.0f} / {max(r for _, r in samples) / 2**20:.0f} MiB | | |")
    if a.rate > 0:
        print(f"client sending late (sent - scheduled) p50 / p99 / max: {pct(lags, 50) * 1e3:.1f} / "
              f"{pct(lags, 99) * 1e3:.1f} / {max(lags) * 1e3:.1f} ms (counted in the latency above); "
              f"frames never acknowledged: {sum(unacked)}")
    if trace is not None:
        with open(a.trace, "w") as f:
            f.write(f"# times in s from the start, {t0_wall:.6f} s since the epoch\n")
            f.write("conn,chunk,scheduled,sent,acked\n")
            for c, ch, ts, tx, ta in trace:
                f.write(f"{c},{ch},{ts - t0:.6f},{tx - t0:.6f},{ta - t0:.6f}\n")
    sys.stdout.flush()
    t1 = time.perf_counter()
    srv.terminate()
    srv.wait(timeout=1800)
    print(f"drain after SIGTERM (everything acknowledged written to the lake): {time.perf_counter() - t1:.1f} s")
    drain = time.perf_counter() - t1
    out = subprocess.run([a.silt, "query", "--lake", lake, "--format", "csv",
                          "SELECT count(*) FROM docker.nginx"], capture_output=True, text=True)
    in_lake = int(out.stdout.splitlines()[-1]) if out.returncode == 0 else None
    print(f"rows in the lake after the drain: {in_lake} (acked: {events})")
    if a.result:
        with open(a.result, "w") as f:
            json.dump({"events_per_s": rate, "acked": events, "in_lake": in_lake, "drain_s": drain,
                       "ack_p50_ms": pct(lat, 50) * 1e3, "ack_p99_ms": pct(lat, 99) * 1e3,
                       "fresh_p50_ms": pct(fresh, 50) * 1e3, "fresh_p99_ms": pct(fresh, 99) * 1e3,
                       "rss_end_mib": end / 2**20, "rss_last30_mib": settled / 2**20}, f)
    return settled


if __name__ == "__main__":
    main()
