#!/usr/bin/env bash
# Lake maintenance benchmark (issue 25): small files from silt serve, compacted; SIGKILL during
# compaction (bench/lake_ops.py; docs/lake.md).
#   bench/lake-ops.sh [--minutes 10] [--rate 20000] [--tables 4] [--kills 50]
#   SILT=path/to/silt bench/lake-ops.sh ...     # use this binary, skip the build
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/silt-target}"
if [ -z "${SILT:-}" ]; then
  echo "== building silt (release)" >&2
  cargo build --release -q -p silt
  SILT="$CARGO_TARGET_DIR/release/silt"
fi
PY="$(scripts/pyenv.sh)"
exec "$PY" bench/lake_ops.py --silt "$SILT" --python "$PY" "$@"
