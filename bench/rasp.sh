#!/usr/bin/env bash
# RASP pipeline benchmark (issue 23): sFlow enriched with ASN, geo, reverse DNS at import
# against a DuckDB join, and RASP's queries (bench/rasp.py; docs/enrich.md).
#   bench/rasp.sh [--rdns-rows 200000000] [--samples 10000000] [--reps 3]
#   SILT=path/to/silt bench/rasp.sh ...     # use this binary, skip the build
#   RDNS_BENCH=path/to/rdns-bench ...        # the same for silt-rdns's rdns-bench example (--features rocksdb)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
PY="$(scripts/pyenv.sh)"
# The key-value store comparison runs silt-rdns's rdns-bench example ($RDNS_BENCH, else built here
# with RocksDB, which is C++ built from source: bindgen needs libclang, installed here when missing).
if [ -z "${RDNS_BENCH:-}" ]; then
  if ! ldconfig -p | grep -q 'libclang\(-[0-9.]*\)\?\.so '; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
    echo "== installing libclang-dev with apt-get (RocksDB's bindings are generated at build time)" >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends libclang-dev >&2 \
      || { echo "rasp.sh: apt-get install libclang-dev failed; install it by hand and run again" >&2; exit 1; }
  fi
  echo "== building rdns-bench with RocksDB (release; the first build takes about 10 minutes)" >&2
  cargo build --release -q -p silt-rdns --features rocksdb --example rdns-bench
  RDNS_BENCH="$CARGO_TARGET_DIR/release/examples/rdns-bench"
fi
exec "$PY" bench/rasp.py --silt "$SILT" --python "$PY" --rdns-bench "$RDNS_BENCH" "$@"
