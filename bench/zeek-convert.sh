#!/usr/bin/env bash
# Zeek TSV -> Parquet (zstd level 1) benchmark: silt vs DuckDB vs pyarrow, in one run.
# Builds silt in release mode, sets up the Python venv (scripts/pyenv.sh), makes 2M conn and
# 2M dns records of two input families (gen: the generator's dense data; real: the corpus logs
# repeated over ~236 days with new uids and shifted addresses, cached in bench/out/zeek-real/),
# converts each with every tool (3 runs each, median), prints a table and writes
# bench/out/zeek-convert.{md,csv}. All options are passed to bench/zeek_convert.py, e.g.:
#   bench/zeek-convert.sh --events 500000 --runs 1 --datasets conn --tools silt,duckdb
#   bench/zeek-convert.sh --family real --tools silt,duckdb,duckdb-hourly
#   SILT=path/to/silt bench/zeek-convert.sh ...     # use this binary, skip the build
# See docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/silt-target}"

BUILD=1
if [ -n "${SILT:-}" ]; then
  BUILD=0
else
  echo "== building silt (release)" >&2
  cargo build --release -q -p silt
  SILT="$CARGO_TARGET_DIR/release/silt"
fi

# The generator: `silt generate zeek` when the CLI has it, else silt-gen's example driver (built
# only when this script builds silt; with SILT=... and no `generate`, only --family real runs).
GEN=()
if "$SILT" generate --help >/dev/null 2>&1; then
  GEN=(--gen "$SILT generate zeek")
elif [ "$BUILD" = 1 ]; then
  cargo build --release -q -p silt-gen --example gen
  GEN=(--gen "$CARGO_TARGET_DIR/release/examples/gen zeek")
fi

PY="$(scripts/pyenv.sh)"
exec "$PY" bench/zeek_convert.py --silt "$SILT" "${GEN[@]}" "$@"
