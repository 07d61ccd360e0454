#!/usr/bin/env bash
# RASP pipeline benchmark (issue 23): sFlow enriched with ASN, geo, reverse DNS at import
# against a DuckDB join, and RASP's queries (bench/rasp.py; docs/enrich.md).
#   bench/rasp.sh [--rdns-rows 20000000] [--samples 10000000] [--reps 3]
#   SILT=path/to/silt bench/rasp.sh ...     # use this binary, skip the build
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/silt-target}"
if [ -z "${SILT:-}" ]; then
  echo "== building silt (release)" >&2
  cargo build --release -q -p silt
  SILT="$CARGO_TARGET_DIR/release/silt"
fi
PY="$(scripts/pyenv.sh)"
exec "$PY" bench/rasp.py --silt "$SILT" --python "$PY" "$@"
