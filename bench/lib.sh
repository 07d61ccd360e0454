# shellcheck shell=bash
# Sourced by the bench/*.sh wrappers from the repository root: the silt binary to measure ($SILT,
# else a release build of this checkout, built here) in SILT.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/silt-target}"
if [ -z "${SILT:-}" ]; then
  echo "== building silt (release)" >&2
  cargo build --release -q -p silt
  SILT="$CARGO_TARGET_DIR/release/silt"
fi
export SILT
