# shellcheck shell=bash
# Port helpers shared by scripts/kafka.sh and scripts/minio.sh (sourced; needs a `die` function).

accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Whether a server can listen on 127.0.0.1:PORT (bind with SO_REUSEADDR, as servers do); without
# python3, whether nothing accepts connections there.
port_free() {
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$1" 2>/dev/null <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
PY
  elif accepts "$1"; then
    return 1
  fi
}

# A free port below the kernel's ephemeral range (above it when that range starts low), so that
# no other program's client socket, or its TIME-WAIT, can hold it by the time the server binds.
free_port() {
  local lo=32768 hi=60999 base span p
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  if [ "$lo" -gt 12000 ]; then base=10000; span=$((lo - 10000)); else base=$((hi + 1)); span=$((65536 - base)); fi
  [ "$span" -gt 0 ] || { base=20000; span=40000; }
  for _ in $(seq 1 200); do
    p=$((base + (RANDOM * 32768 + RANDOM) % span))
    if port_free "$p"; then echo "$p"; return; fi
  done
  die "found no free TCP port on 127.0.0.1"
}
