#!/usr/bin/env python3
"""PCAP import benchmark: `silt import pcap` (packets, and flows) vs `tshark -T fields`.

Run through bench/pcap.sh, which builds silt in release mode. Standard library only. For each
size (default 200MB and 2GiB, i.e. >= 2 GB):
  1. generates a trace with the project's generator (`silt generate pcap --bytes SIZE`: TCP
     sessions, DNS/NTP/syslog UDP, ICMP echo and errors, ~20% IPv6, VLAN/QinQ, some VXLAN,
     10,000 concurrent flows),
  2. imports it into a fresh lake as packets (`silt import pcap FILE --lake L`) and as flows
     (the flows flag read from `silt import --help`: --flows, else --schema pcap.flow),
  3. runs tshark extracting the same columns (time, addresses, ports, protocol, VLAN, lengths,
     Community ID via the communityid post-dissector) to /dev/null,
each a separate process whose wall time and peak RSS are measured (os.wait4 rusage of that very
child; bench/peak_rss.py warns when a figure could be this process's own peak). tshark is slow: with --tshark-max it reads only a prefix of the trace (whole records, cut
by this script), which is fair because throughput is per byte; the table says so.
Prints MB/s, packets/s, peak RSS, the silt/tshark throughput ratio (goal >= 10x) and the peak
RSS at the largest size over the smallest (goal: within 20%), and writes OUT/pcap.md and .csv.
With --real (the default), the same is done for a trace made from real traffic: the corpus
browsing capture pcap/vast-workshop_2011_browse.pcap (121 packets over 15 s) repeated with
one-hour time shifts per copy to --real-size (default 1.1GB, ~55,000 copies over ~6 years: sparse
data that touches a new hour with every copy), built by make_real_trace and cached in OUT/ with
its --real-prefix (default 200MB) prefix; the RSS goal compares the prefix with the whole trace.
If this silt has no `import pcap` yet, only the generator and tshark are measured.
"""

import argparse
import csv
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import time
from peak_rss import child_peak

TSHARK_FIELDS = [
    "frame.time_epoch", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "tcp.srcport",
    "tcp.dstport", "udp.srcport", "udp.dstport", "ip.proto", "vlan.id", "frame.len",
    "frame.cap_len",
]


def parse_size(s):
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", s)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {s}")
    mult = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "k": 1024, "kib": 1024,
            "m": 1024**2, "mib": 1024**2, "g": 1024**3, "gib": 1024**3}.get(m.group(2).lower())
    if mult is None:
        raise argparse.ArgumentTypeError(f"unknown unit in {s}")
    return int(float(m.group(1)) * mult)


def measure(cmd, stdout=subprocess.DEVNULL):
    """Runs cmd; returns (wall seconds, peak RSS bytes, exit code, stderr text)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
    # Read stderr before waiting so a chatty child cannot block on a full pipe.
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    rss = child_peak(ru, cmd)
    return wall, rss, p.returncode, err.decode(errors="replace")


def pcap_prefix(src, dst, max_bytes):
    """Copies whole records of classic pcap `src` to `dst` until max_bytes; returns (bytes,
    packets). Written by hand: a 16-byte record header walk is all it takes."""
    packets = 0
    with open(src, "rb") as f, open(dst, "wb") as o:
        head = f.read(24)
        magic = head[:4]
        if magic not in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
            raise SystemExit(f"{src}: not a little-endian classic pcap")
        o.write(head)
        n = 24
        while True:
            rh = f.read(16)
            if len(rh) < 16:
                break
            incl = struct.unpack_from("<I", rh, 8)[0]
            if n + 16 + incl > max_bytes:
                break
            o.write(rh)
            o.write(f.read(incl))
            n += 16 + incl
            packets += 1
    return n, packets


REAL_PCAP = "vast-workshop_2011_browse.pcap"
REAL_VERSION = 1  # bump when make_real_trace's output changes (part of the cache file name)


def corpus_dir():
    if os.environ.get("SILT_CORPUS"):
        return os.environ["SILT_CORPUS"]
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "corpus"))


def make_real_trace(src, dst, max_bytes, shift_s=3600):
    """Writes the classic pcap `src` repeated to at most max_bytes (whole records) into `dst`:
    copy k is the original with k * shift_s added to every record's ts_sec (the global header
    and everything else byte for byte). The source is sorted and shorter than shift_s, so times
    ascend. Returns (bytes, packets, copies)."""
    with open(src, "rb") as f:
        data = f.read()
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        raise SystemExit(f"{src}: not a classic pcap")
    head, body = data[:24], bytearray(data[24:])
    offs, secs, ends, o = [], [], [], 0
    while o + 16 <= len(body):
        sec, _, incl, _ = struct.unpack_from(e + "IIII", body, o)
        offs.append(o)
        secs.append(sec)
        o += 16 + incl
        ends.append(o)
    if not offs or o > len(body):
        raise SystemExit(f"{src}: truncated or empty pcap")
    if secs[-1] - secs[0] >= shift_s:
        raise SystemExit(f"{src} lasts {secs[-1] - secs[0]} s, longer than the shift")
    del body[o:]
    n, packets, k = 24, 0, 0
    tmp = dst + ".inprogress"
    with open(tmp, "wb", buffering=1 << 20) as out:
        out.write(head)
        while True:
            for off, sec in zip(offs, secs):
                struct.pack_into(e + "I", body, off, sec + k * shift_s)
            if n + len(body) <= max_bytes:
                out.write(body)
                n += len(body)
                packets += len(offs)
                k += 1
                continue
            # the last, partial copy: whole records while they fit
            j = 0
            while j < len(ends) and n + ends[j] <= max_bytes:
                j += 1
            if j:
                out.write(body[:ends[j - 1]])
                n += ends[j - 1]
                packets += j
                k += 1
            break
    os.replace(tmp, dst)
    return n, packets, k


def real_trace(outdir, max_bytes):
    """The cached real-derived trace of max_bytes (made on first use); returns (path, packets)."""
    src = os.path.join(corpus_dir(), "pcap", REAL_PCAP)
    if not os.path.exists(src):
        raise SystemExit(f"{src}: corpus pcap not found (set SILT_CORPUS, or --no-real)")
    dst = os.path.join(outdir, f"real-browse-{max_bytes}-{os.path.getsize(src)}-v{REAL_VERSION}.pcap")
    meta = dst + ".json"
    if os.path.exists(dst) and os.path.exists(meta):
        with open(meta) as f:
            m = json.load(f)
        if m.get("bytes") == os.path.getsize(dst):
            print(f"== reusing {dst}", file=sys.stderr)
            return dst, m["packets"]
    print(f"== making {dst} from {src} (one-hour shifts per copy)", file=sys.stderr)
    t0 = time.perf_counter()
    n, packets, copies = make_real_trace(src, dst, max_bytes)
    with open(meta, "w") as f:
        json.dump({"source": os.path.abspath(src), "bytes": n, "packets": packets, "copies": copies,
                   "shift_s": 3600}, f)
    print(f"   {human(n)}, {packets} packets, {copies} copies in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    return dst, packets


def real_prefix(full, max_bytes):
    """The cached whole-record prefix of the real trace `full`; returns (path, packets)."""
    dst = full[:-len(".pcap")] + f".prefix-{max_bytes}.pcap"
    meta = dst + ".json"
    if os.path.exists(dst) and os.path.exists(meta):
        with open(meta) as f:
            m = json.load(f)
        if m.get("bytes") == os.path.getsize(dst):
            return dst, m["packets"]
    n, packets = pcap_prefix(full, dst + ".inprogress", max_bytes)
    os.replace(dst + ".inprogress", dst)
    with open(meta, "w") as f:
        json.dump({"bytes": n, "packets": packets}, f)
    return dst, packets


def count_packets(path):
    """Records in a classic pcap (header walk with seeks; independent of silt and tshark)."""
    n = 0
    with open(path, "rb") as f:
        f.seek(24)
        while True:
            rh = f.read(16)
            if len(rh) < 16:
                return n
            f.seek(struct.unpack_from("<I", rh, 8)[0], 1)
            n += 1


def human(b):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if b < 1024 or unit == "GiB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{b} B"
        b /= 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--silt", required=True, help="path of the silt binary (release)")
    ap.add_argument("--sizes", default="200MB,2GiB",
                    help="generated trace sizes (default 200MB,2GiB; \"\" or none: no generated trace)")
    ap.add_argument("--real", action=argparse.BooleanOptionalAction, default=True,
                    help="also measure the real-derived trace (the corpus browsing capture repeated "
                         "with one-hour shifts; cached in OUT/) and its prefix (default on)")
    ap.add_argument("--real-size", default="1.1GB", help="size of the real-derived trace (default 1.1GB)")
    ap.add_argument("--real-prefix", default="200MB",
                    help="the smaller real-derived input: this prefix of the trace (default 200MB)")
    ap.add_argument("--out", default="bench/out", help="scratch and result directory")
    ap.add_argument("--tshark-max", type=parse_size, default=parse_size("512MB"),
                    help="tshark reads at most this prefix of each trace (0 = whole file; default 512MB)")
    ap.add_argument("--no-communityid", action="store_true", help="tshark without -e communityid")
    ap.add_argument("--tools", default="silt,silt-flows,tshark", help="subset of silt,silt-flows,tshark")
    ap.add_argument("--keep", action="store_true", help="keep generated traces and lakes (the real-derived "
                    "trace is a cache and always kept)")
    ap.add_argument("--seed", type=int, default=1)
    # Defaults: the writer's memory bounds set low enough that the 200 MB trace already reaches
    # them (with the import defaults, 256 MiB/32 MiB/32 MiB, only the 2 GiB run does, so peak RSS
    # compares "below the bound" with "at the bound"), and flow idle timeouts shorter than the
    # generated trace (~1 minute), so that flows end during the run as in a long capture.
    ap.add_argument("--silt-args", default="--memory 64MiB --sort-buffer 4MiB --row-group-size 8MiB",
                    help="extra arguments for every `silt import pcap` run, e.g. the writer's memory "
                         "bounds: \"--memory 64MiB --sort-buffer 4MiB --row-group-size 8MiB\"")
    ap.add_argument("--flow-args", default="--idle-timeout 5 --tcp-idle-timeout 15",
                    help="extra arguments for the --flows runs, e.g. \"--idle-timeout 5 --tcp-idle-timeout 15\"")
    a = ap.parse_args()

    os.makedirs(a.out, exist_ok=True)
    sizes = [(s.strip(), parse_size(s)) for s in a.sizes.split(",")
             if s.strip() and s.strip().lower() != "none"]
    # (family, label, bytes): the generated sizes, then the real-derived prefix and whole trace
    inputs = [("gen", label, size) for label, size in sizes]
    if a.real:
        inputs += [("real", f"real-{a.real_prefix}", parse_size(a.real_prefix)),
                   ("real", f"real-{a.real_size}", parse_size(a.real_size))]
    tools = set(a.tools.split(","))
    help_text = subprocess.run([a.silt, "import", "--help"], capture_output=True, text=True).stdout
    have_pcap = re.search(r"^\s+(-\s+)?pcap\b", help_text, re.M) is not None
    if "--flows" in help_text:
        flows_args = ["--flows"]
    else:
        flows_args = ["--schema", "pcap.flow"]
    if not have_pcap:
        print("!! this silt has no `import pcap`: measuring the generator and tshark only", file=sys.stderr)
    have_tshark = shutil.which("tshark") is not None
    if not have_tshark:
        print("!! tshark not found (scripts/apt-deps.sh installs it): skipping tshark", file=sys.stderr)

    rows = []
    for fam, label, size in inputs:
        if fam == "gen":
            trace = os.path.join(a.out, f"trace-{label}.pcap")
            print(f"== {label}: generating {trace}", file=sys.stderr)
            wall, rss, rc, err = measure([a.silt, "generate", "pcap", "--bytes", str(size), "--seed",
                                          str(a.seed), "-o", trace])
            if rc != 0:
                raise SystemExit(f"generate failed: {err}")
            fbytes = os.path.getsize(trace)
            packets = count_packets(trace)
            rows.append(dict(family=fam, size=label, tool="generate", input_bytes=fbytes,
                             packets=packets, wall_s=wall, rss=rss, note="silt generate pcap"))
            print(f"   {human(fbytes)}, {packets} packets in {wall:.1f} s", file=sys.stderr)
        else:
            full, full_packets = real_trace(a.out, parse_size(a.real_size))
            if size >= parse_size(a.real_size):
                trace, packets = full, full_packets
            else:
                trace, packets = real_prefix(full, size)
            fbytes = os.path.getsize(trace)
            print(f"== {label}: {trace} ({human(fbytes)}, {packets} packets)", file=sys.stderr)

        if have_pcap:
            for tool, extra in [("silt", []), ("silt-flows", flows_args)]:
                if tool not in tools:
                    continue
                lake = os.path.join(a.out, f"lake-pcap-{label}-{tool}")
                shutil.rmtree(lake, ignore_errors=True)
                cmd = [a.silt, "import", "pcap", trace, "--lake", lake] + extra + a.silt_args.split()
                if tool == "silt-flows":
                    cmd += a.flow_args.split()
                print(f"   {' '.join(cmd)}", file=sys.stderr)
                wall, rss, rc, err = measure(cmd)
                if rc != 0:
                    print(f"!! {tool} exited {rc}: {err[-2000:]}", file=sys.stderr)
                lake_files = [os.path.join(d, f) for d, _, fs in os.walk(lake) for f in fs]
                lake_bytes = sum(os.path.getsize(f) for f in lake_files)
                n_parquet = sum(1 for f in lake_files if f.endswith(".parquet"))
                print(f"   {tool}: {wall:.2f} s, {rss / 2**20:.1f} MiB, lake {human(lake_bytes)} in "
                      f"{len(lake_files)} files ({n_parquet} Parquet)", file=sys.stderr)
                rows.append(dict(family=fam, size=label, tool=tool, input_bytes=fbytes, packets=packets,
                                 wall_s=wall, rss=rss,
                                 note=("exit %d; " % rc if rc else "")
                                 + f"lake {human(lake_bytes)}, {len(lake_files)} files ({n_parquet} Parquet)"))
                if not a.keep:
                    shutil.rmtree(lake, ignore_errors=True)

        if have_tshark and "tshark" in tools:
            src, tbytes, tpackets, note = trace, fbytes, packets, "whole file"
            if a.tshark_max and fbytes > a.tshark_max:
                src = os.path.join(a.out, f"trace-{label}.prefix.pcap")
                tbytes, tpackets = pcap_prefix(trace, src, a.tshark_max)
                note = f"first {human(tbytes)} ({tpackets} packets) of the trace"
            cmd = ["tshark", "-n", "-r", src]
            if not a.no_communityid:
                cmd += ["--enable-protocol", "communityid"]
            cmd += ["-T", "fields"]
            for fld in TSHARK_FIELDS + ([] if a.no_communityid else ["communityid"]):
                cmd += ["-e", fld]
            print(f"   tshark on {note}", file=sys.stderr)
            wall, rss, rc, err = measure(cmd)
            if rc != 0:
                print(f"!! tshark exited {rc}: {err[-2000:]}", file=sys.stderr)
            rows.append(dict(family=fam, size=label, tool="tshark", input_bytes=tbytes, packets=tpackets,
                             wall_s=wall, rss=rss, note=note))
            if src != trace:
                os.remove(src)
        if fam == "gen" and not a.keep:
            os.remove(trace)

    for r in rows:
        r["mb_s"] = r["input_bytes"] / r["wall_s"] / 1e6
        r["packets_s"] = r["packets"] / r["wall_s"]
        r["rss_mib"] = r["rss"] / 2**20

    def find(size, tool):
        return next((r for r in rows if r["size"] == size and r["tool"] == tool), None)

    lines = []
    lines.append(f"PCAP import benchmark ({platform.machine()}, {os.cpu_count()} CPUs, "
                 f"{time.strftime('%Y-%m-%d %H:%M')}); silt = `silt import pcap FILE --lake L`, "
                 f"silt-flows = the same with `{' '.join(flows_args)}`, tshark = `tshark -T fields` "
                 f"with {len(TSHARK_FIELDS) + (0 if a.no_communityid else 1)} fields"
                 f"{'' if a.no_communityid else ' incl. communityid'}."
                 + (f" Extra silt arguments: `{a.silt_args}`." if a.silt_args else "")
                 + (f" Extra flow arguments: `{a.flow_args}`." if a.flow_args else "")
                 + (f" real-*: {REAL_PCAP} repeated with one-hour time shifts per copy." if a.real else ""))
    lines.append("")
    lines.append("| size | tool | input | packets | wall s | MB/s | packets/s | peak RSS MiB | note |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        lines.append(f"| {r['size']} | {r['tool']} | {human(r['input_bytes'])} | {r['packets']} | "
                     f"{r['wall_s']:.2f} | {r['mb_s']:.1f} | {r['packets_s']:.0f} | {r['rss_mib']:.1f} | {r['note']} |")
    lines.append("")
    for _, label, _ in inputs:
        t = find(label, "tshark")
        for tool in ["silt", "silt-flows"]:
            s = find(label, tool)
            if s and t:
                ratio = s["mb_s"] / t["mb_s"]
                lines.append(f"- {label}: {tool} / tshark throughput = {ratio:.1f}x "
                             f"(goal >= 10x: {'met' if ratio >= 10 else 'NOT met'})")
    for fam in ("gen", "real"):
        labels = [label for f, label, _ in inputs if f == fam]
        if len(labels) < 2:
            continue
        lo, hi = labels[0], labels[-1]
        for tool in ["silt", "silt-flows"]:
            a_, b_ = find(lo, tool), find(hi, tool)
            if a_ and b_:
                ratio = b_["rss"] / a_["rss"]
                lines.append(f"- {tool}: peak RSS {hi} / {lo} = {ratio:.2f} "
                             f"({b_['rss_mib']:.1f} / {a_['rss_mib']:.1f} MiB; goal within 20%: "
                             f"{'met' if abs(ratio - 1) <= 0.2 else 'NOT met'})")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(a.out, "pcap.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "pcap.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["family", "size", "tool", "input_bytes", "packets", "wall_s",
                                          "mb_s", "packets_s", "rss", "rss_mib", "note"])
        w.writeheader()
        for r in rows:
            w.writerow({k: r[k] for k in w.fieldnames})


if __name__ == "__main__":
    main()
