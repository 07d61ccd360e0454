#!/usr/bin/env bash
# `silt bench` at the scale of issue 5's goal 3: generated data with at least 1M events in each of
# zeek.conn, zeek.dns, suricata.flow and suricata.dns (1.1M conn, 1.1M dns, 2.7M EVE records:
# about 1.8 GB, generated once into the work directory), the full matrix, the variants, and the
# DuckDB/pyarrow baselines. Builds silt in release mode and sets up the Python venv
# (scripts/pyenv.sh). Takes about 10 minutes on 2 cores and ~3 GB of memory.
#   bench/silt-bench.sh                      # report in bench/out/silt-bench/
#   bench/silt-bench.sh --codecs zstd:1      # extra options go to `silt bench`
# Environment: WORK (data directory, default $TMPDIR/silt-bench-data), OUT (report directory).
# See docs/bench.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/silt-target}"
WORK="${WORK:-${TMPDIR:-/tmp}/silt-bench-data}"
OUT="${OUT:-bench/out/silt-bench}"

echo "== building silt (release)" >&2
cargo build --release -q -p silt
SILT="$CARGO_TARGET_DIR/release/silt"
PY="$(scripts/pyenv.sh)"

if [ ! -s "$WORK/zeek/conn.log" ] || [ ! -s "$WORK/zeek/dns.log" ] || [ ! -s "$WORK/eve/eve.json" ]; then
  echo "== generating data into $WORK" >&2
  rm -rf "$WORK"
  mkdir -p "$WORK"
  "$SILT" generate zeek --log conn --events 1100000 -o "$WORK/zeek"
  "$SILT" generate zeek --log dns --events 1100000 --seed 2 -o "$WORK/zeek-dns"
  mv "$WORK/zeek-dns/dns.log" "$WORK/zeek/" && rm -rf "$WORK/zeek-dns"
  "$SILT" generate suricata --events 2700000 -o "$WORK/eve"
fi

exec "$SILT" bench "$WORK/zeek" "$WORK/eve" --out "$OUT" --baselines --python "$PY" "$@"
