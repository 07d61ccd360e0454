#!/usr/bin/env bash
# Creates (first run) or reuses a private Python virtualenv with DuckDB and its Delta Lake
# extension (`delta_scan`, built on delta-kernel-rs), the Delta reader the tests and
# bench/lake-ops.sh use besides Spark. DuckDB downloads extensions from its own site, which is not
# reachable here, so the extension comes from PyPI's `duckdb-ext-delta`, which is built for
# DuckDB 1.4.4: hence a venv of its own with duckdb pinned. Idempotent and quiet: stdout is
# exactly the venv's python path (`PY="$(scripts/duckdb-delta.sh)"`), or with `--extension` the
# path of the extension file to LOAD.
#
#   SILT_DUCKDB_DELTA_VENV  venv directory (default: $HOME/.cache/silt-duckdb-delta-venv)
#   PYTHON                  interpreter used to create it (default: python3)
set -euo pipefail

VENV="${SILT_DUCKDB_DELTA_VENV:-$HOME/.cache/silt-duckdb-delta-venv}"
PY="$VENV/bin/python"
PKGS=(duckdb==1.4.4 duckdb-ext-delta==1.4.4.20260205)

# The extension file inside the venv.
EXT_PY='
import duckdb, duckdb_ext, glob, os
print(glob.glob(os.path.join(os.path.dirname(duckdb_ext.__path__[0]), "duckdb_ext", "extensions",
                             "v" + duckdb.__version__, "*", "delta.duckdb_extension"))[0])
'

ready() {
  [ -x "$PY" ] && "$PY" -c "$EXT_PY" >/dev/null 2>&1
}

if ! ready; then
  mkdir -p "$(dirname "$VENV")"
  exec 9>"$VENV.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if ! ready; then
    if [ ! -x "$PY" ]; then
      "${PYTHON:-python3}" -m venv "$VENV" >&2
    fi
    "$PY" -m pip install --quiet --disable-pip-version-check "${PKGS[@]}" >&2
  fi
  ready || { echo "duckdb-delta.sh: the delta extension is not usable in $VENV" >&2; exit 1; }
fi
if [ "${1:-}" = "--extension" ]; then
  "$PY" -c "$EXT_PY"
else
  echo "$PY"
fi
