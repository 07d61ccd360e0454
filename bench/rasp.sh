#!/usr/bin/env bash
# RASP pipeline benchmark (issue 23): sFlow enriched with ASN, geo, reverse DNS at import
# against a DuckDB join, and RASP's queries (bench/rasp.py; docs/enrich.md).
#   bench/rasp.sh [--rdns-rows 20000000] [--samples 10000000] [--reps 3]
#   SILT=path/to/silt bench/rasp.sh ...     # use this binary, skip the build
#   RDNS_BENCH=path/to/rdns-bench ...        # the same for silt-rdns's rdns-bench example
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
PY="$(scripts/pyenv.sh)"
# The key-value store comparison runs silt-rdns's rdns-bench example ($RDNS_BENCH, else built here).
if [ -z "${RDNS_BENCH:-}" ]; then
  echo "== building rdns-bench (release)" >&2
  cargo build --release -q -p silt-rdns --example rdns-bench
  RDNS_BENCH="$CARGO_TARGET_DIR/release/examples/rdns-bench"
fi
exec "$PY" bench/rasp.py --silt "$SILT" --python "$PY" --rdns-bench "$RDNS_BENCH" "$@"
