#!/usr/bin/env bash
# Installs (first run) the Debian packages that tests use as independent references:
#   tshark    packet counts and field extraction for PCAP tests and the PCAP benchmark
#   chromium  headless rendering check of `silt bench` reports
#   rsyslog   a real syslog forwarder (TCP octet counting, UDP, and TLS with rsyslog-gnutls) in
#             `silt serve`'s client test; openssl makes that test's certificate
#   libssl-dev, cmake   to build librdkafka (the Kafka client) from source (libcurl comes from
#             curl-sys's bundled source: crates/silt-kafka/Cargo.toml)
# Idempotent and quiet when everything is present. Needs root or sudo for apt-get; when neither
# is available it says so and exits 0, and the tests that need a tool skip with a message.
set -euo pipefail
need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -x /usr/sbin/rsyslogd ] || command -v rsyslogd >/dev/null 2>&1 || need+=(rsyslog)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
for p in libssl-dev rsyslog-gnutls; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
    echo "apt-deps.sh: not root and no sudo; not installing ${need[*]} (tests that need them skip)" >&2
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
exec 9>/tmp/silt-apt-deps.lock
command -v flock >/dev/null 2>&1 && flock 9
echo "apt-deps.sh: installing ${need[*]}" >&2
$SUDO apt-get update -qq >&2 || true
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
