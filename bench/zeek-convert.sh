#!/usr/bin/env bash
# Zeek TSV -> Parquet (zstd level 1) benchmark: silt vs DuckDB vs pyarrow, in one run.
# Builds silt in release mode, sets up the Python venv (scripts/pyenv.sh), generates 2M conn and
# 2M dns records, converts each with every tool (3 runs each, median), prints a table and writes
# bench/out/zeek-convert.{md,csv}. All options are passed to bench/zeek_convert.py, e.g.:
#   bench/zeek-convert.sh --events 500000 --runs 1 --datasets conn --tools silt,duckdb
# See docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/silt-target}"

echo "== building silt (release)" >&2
cargo build --release -q -p silt
SILT="$CARGO_TARGET_DIR/release/silt"

# The generator: `silt generate zeek` when the CLI has it, else silt-gen's example driver.
if "$SILT" generate --help >/dev/null 2>&1; then
  GEN="$SILT generate zeek"
else
  cargo build --release -q -p silt-gen --example gen
  GEN="$CARGO_TARGET_DIR/release/examples/gen zeek"
fi

PY="$(scripts/pyenv.sh)"
exec "$PY" bench/zeek_convert.py --silt "$SILT" --gen "$GEN" "$@"
