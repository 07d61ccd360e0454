#!/usr/bin/env bash
# PCAP import benchmark: silt (packets and flows) vs tshark -T fields, in one run.
# Builds silt in release mode (or uses $SILT), generates a 200 MB and a 2 GiB trace with
# `silt generate pcap` into bench/out/ (git-ignored), then takes the real-derived trace (the
# corpus browsing capture repeated with one-hour shifts to 1.1 GB, and its 200 MB prefix; made
# once and cached in bench/out/), imports each, times tshark on the same bytes (a prefix of at
# most --tshark-max, default 512MB), prints a table and writes bench/out/pcap.{md,csv}.
# All options go to bench/pcap_bench.py, e.g.:
#   bench/pcap.sh --sizes 50MB,500MB --tshark-max 0 --tools silt,tshark --no-real
#   SILT=path/to/silt bench/pcap.sh --sizes none      # only the real-derived trace
# See docs/benchmarks.md. Needs tshark (scripts/apt-deps.sh) and python3 (standard library only).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
exec python3 bench/pcap_bench.py --silt "$SILT" "$@"
