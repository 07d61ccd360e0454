#!/usr/bin/env bash
# Docker/nginx logs -> Parquet benchmark (issue 4, acceptance 2 and 3): silt convert (MessagePack
# and NDJSON input; `log` kept as a string and parsed with --parse-field log=access; zstd and
# snappy) vs DuckDB read_json -> COPY (snappy, zstd), then the seed's two Athena questions on
# every output with the bytes a Parquet reader has to scan. Median of 3 runs of each (--runs).
# Builds silt in release mode, sets up the Python venv (scripts/pyenv.sh), generates the data
# with `silt generate docker-nginx`, writes bench/out/weblogs.{md,csv}. Options go to
# bench/weblogs.py, e.g.:  bench/weblogs.sh --bytes 25MB
# See docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/silt-target}"

echo "== building silt (release)" >&2
cargo build --release -q -p silt
SILT="$CARGO_TARGET_DIR/release/silt"

PY="$(scripts/pyenv.sh)"
exec "$PY" bench/weblogs.py --silt "$SILT" "$@"
