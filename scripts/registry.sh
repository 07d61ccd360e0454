#!/usr/bin/env bash
# A real Confluent-compatible schema registry for tests: Apicurio Registry (a Quarkus app) with its
# in-memory H2 storage on 127.0.0.1, run from the release's "-all.tar.gz" distribution on Maven
# Central (io.apicurio:apicurio-registry-app:VERSION:tar.gz:all, a ready-built Quarkus fast-jar
# layout: quarkus-run.jar, lib/, app/, quarkus/), fetched once by Maven into
# $HOME/.cache/silt-registry; no Docker. The Confluent Schema Registry API is served under
# /apis/ccompat/v7. Nothing is kept across restarts: every start begins with an empty registry.
#
#   registry.sh start    fetch the app if needed, start (idempotent), wait until the API serves;
#                        the last stdout line is the API's base URL,
#                        http://127.0.0.1:PORT/apis/ccompat/v7
#   registry.sh url      print the base URL of the running registry
#   registry.sh status   exit 0 and say so when running, exit 3 when not
#   registry.sh stop     stop the registry and wait for it to exit (its schemas are lost)
#   registry.sh clean    stop, then delete the state directory (log, pid)
#   registry.sh fetch    only fetch the app into the cache
#
#   SILT_REGISTRY_PORT       HTTP port on 127.0.0.1 (default 18831; must be free)
#   SILT_REGISTRY_DIR        state: log, pid, port (default $SILT_REGISTRY_CACHE/run)
#   SILT_REGISTRY_HEAP       -Xmx (default 256m)
#   SILT_REGISTRY_VERSION    Apicurio Registry release (default 3.3.3; 3.x needs Java >= 21)
#   SILT_REGISTRY_CACHE      download cache (default $HOME/.cache/silt-registry)
#   SILT_REGISTRY_JAVA_HOME  a JDK/JRE >= 21 to run it with (default: the newest >= 21 found in
#                            JAVA_HOME, on PATH or under /usr/lib/jvm)
#   SILT_REGISTRY_CDS        1 (default): keep a JVM class-data-sharing archive in the cache,
#                            written when the first run stops, which makes later starts ~40% faster;
#                            0: don't
#
# Needs Java >= 21 (the app's classes are Java 21 bytecode; the default Java 17 cannot run it)
# and, on the first run only, Maven; Maven is installed with apt-get when missing, and so is a
# Java 21+ when none is found and apt offers one (as root, or with passwordless sudo). Progress and
# errors go to stderr.
set -euo pipefail

VERSION="${SILT_REGISTRY_VERSION:-3.3.3}"
CACHE="${SILT_REGISTRY_CACHE:-$HOME/.cache/silt-registry}"
APP="$CACHE/$VERSION/app"
DIR="${SILT_REGISTRY_DIR:-$CACHE/run}"
PORT="${SILT_REGISTRY_PORT:-18831}"
HEAP="${SILT_REGISTRY_HEAP:-256m}"
CDS="${SILT_REGISTRY_CDS:-1}"
START_TIMEOUT="${SILT_REGISTRY_START_TIMEOUT:-120}"
DEP_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
MIN_JAVA=21

say() { echo "registry.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# shellcheck source=scripts/lib/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/ports.sh"
# shellcheck source=scripts/lib/service.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/service.sh"

# The major version of the java binary $1 (empty when it does not run).
java_major() {
  "$1" -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -n 1
}

# Print the path of a java >= MIN_JAVA: SILT_REGISTRY_JAVA_HOME, JAVA_HOME, PATH, then the newest
# under /usr/lib/jvm.
find_java() {
  local c v best="" bestv=0
  if [ -n "${SILT_REGISTRY_JAVA_HOME:-}" ]; then
    c="$SILT_REGISTRY_JAVA_HOME/bin/java"
    v="$(java_major "$c" 2>/dev/null || true)"
    [ -n "$v" ] && [ "$v" -ge "$MIN_JAVA" ] || die "SILT_REGISTRY_JAVA_HOME=$SILT_REGISTRY_JAVA_HOME has no java >= $MIN_JAVA"
    echo "$c"; return
  fi
  for c in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(command -v java 2>/dev/null || true)"; do
    [ -n "$c" ] && [ -x "$c" ] || continue
    v="$(java_major "$c" 2>/dev/null || true)"
    if [ -n "$v" ] && [ "$v" -ge "$MIN_JAVA" ]; then echo "$c"; return; fi
  done
  for c in /usr/lib/jvm/*/bin/java; do
    [ -x "$c" ] || continue
    v="$(java_major "$c" 2>/dev/null || true)"
    if [ -n "$v" ] && [ "$v" -ge "$MIN_JAVA" ] && [ "$v" -gt "$bestv" ]; then best="$c"; bestv="$v"; fi
  done
  [ -n "$best" ] && echo "$best"
}

need_java() {
  local j pkg
  j="$(find_java || true)"
  if [ -z "$j" ]; then
    for pkg in openjdk-25-jre-headless openjdk-21-jre-headless; do
      if apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        apt_install "$pkg"
        j="$(find_java || true)"
        break
      fi
    done
  fi
  [ -n "$j" ] || die "Apicurio Registry $VERSION needs Java >= $MIN_JAVA and none was found (JAVA_HOME, PATH, /usr/lib/jvm) nor offered by apt; set SILT_REGISTRY_JAVA_HOME to one"
  echo "$j"
}

# The release's Quarkus distribution unpacked into $APP, once.
fetch() {
  [ -f "$APP/.complete" ] && return
  mkdir -p "$CACHE"
  exec 7>"$CACHE/fetch.lock"
  if command -v flock >/dev/null 2>&1; then flock 7; fi
  if [ -f "$APP/.complete" ]; then exec 7>&-; return; fi
  command -v mvn >/dev/null 2>&1 || apt_install maven
  local work="$CACHE/$VERSION.fetch" t0=$SECONDS tgz
  rm -rf "$work" "$APP"
  mkdir -p "$work/app"
  say "fetching io.apicurio:apicurio-registry-app:$VERSION:tar.gz:all (~160 MB) from Maven Central into $APP (first run only)"
  # A standalone goal: no pom needed; the local repository is thrown away afterwards.
  (cd "$work" && nice -n 19 mvn -q -B -Dmaven.repo.local="$work/m2" "$DEP_PLUGIN:copy" \
    -Dartifact="io.apicurio:apicurio-registry-app:$VERSION:tar.gz:all" -DoutputDirectory="$work" \
    -Dmdep.overWriteReleases=true >&2) \
    || die "mvn could not fetch io.apicurio:apicurio-registry-app:$VERSION:tar.gz:all (see above); is Maven Central reachable?"
  tgz="$work/apicurio-registry-app-$VERSION-all.tar.gz"
  [ -f "$tgz" ] || die "mvn reported success but $tgz is missing"
  nice -n 19 tar -xzf "$tgz" -C "$work/app" || die "unpacking $tgz failed"
  [ -f "$work/app/quarkus-run.jar" ] || die "$tgz has no quarkus-run.jar at its top; not the expected Quarkus layout"
  mkdir -p "$(dirname "$APP")"
  mv "$work/app" "$APP"
  rm -rf "$work"
  touch "$APP/.complete"
  say "fetched Apicurio Registry $VERSION ($(du -sh "$APP" | cut -f1) unpacked) in $((SECONDS - t0)) s"
  exec 7>&-
}

# The pid of our running registry, if any (checks that the pid still is one started on our DIR).
running_pid() { pid_of "$DIR/registry.pid" "-Dsilt.registry.dir=$DIR "; }

url() { echo "http://127.0.0.1:$(cat "$DIR/port")/apis/ccompat/v7"; }

# Whether GET $1 answers 200.
http_ok() {
  if command -v curl >/dev/null 2>&1; then
    [ "$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$1" 2>/dev/null)" = 200 ]
  else
    local rest="${1#http://}" hostport path status
    hostport="${rest%%/*}"; path="/${rest#*/}"
    status="$( (exec 3<>"/dev/tcp/${hostport%:*}/${hostport#*:}" || exit 1
      printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$hostport" >&3
      head -n 1 <&3) 2>/dev/null)" || return 1
    [[ "$status" == *" 200"* ]]
  fi
}

# The server answers what the tests ask of it.
ready() { http_ok "http://127.0.0.1:$PORT/apis/ccompat/v7/subjects"; }

start() {
  mkdir -p "$DIR"
  exec 9>"$DIR/.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if running_pid >/dev/null; then url; return; fi
  fetch
  local java major pid cds=()
  java="$(need_java)"
  major="$(java_major "$java")"
  port_free "$PORT" || die "port $PORT on 127.0.0.1 is in use by something else; free it or set SILT_REGISTRY_PORT"
  echo "$PORT" >"$DIR/port"
  if [ "$CDS" = 1 ]; then
    # Written when a run without a usable archive exits (a few seconds more at that stop), then
    # mapped by later starts; the JVM rebuilds it by itself if it no longer matches.
    cds=(-XX:+AutoCreateSharedArchive -XX:SharedArchiveFile="$CACHE/$VERSION/cds-java$major.jsa" -Xlog:cds=off -Xlog:cds+dynamic=off)
  fi
  : >"$DIR/registry.log"
  # setsid: the registry does not share the caller's process group or terminal; it must not keep
  # the lock files open (7-9), or the next start would wait on them forever. The deletion switches
  # let the Confluent API's DELETE /subjects/... work (Apicurio 3 refuses deletes by default).
  (cd "$DIR" && exec setsid "$java" -Xms64m -Xmx"$HEAP" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    "${cds[@]}" -Djava.awt.headless=true -Dsilt.registry.dir="$DIR" \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$PORT" \
    -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port=0 \
    -Dapicurio.storage.kind=sql -Dapicurio.storage.sql.kind=h2 \
    -Dapicurio.rest.deletion.group.enabled=true \
    -Dapicurio.rest.deletion.artifact.enabled=true \
    -Dapicurio.rest.deletion.artifact-version.enabled=true \
    -jar "$APP/quarkus-run.jar" >"$DIR/registry.log" 2>&1 </dev/null 7>&- 8>&- 9>&-) &
  pid=$!
  echo "$pid" >"$DIR/registry.pid"
  await_ready "$pid" "$DIR/registry.log" "$DIR/registry.pid" "$START_TIMEOUT" "the registry" ready
  say "Apicurio Registry $VERSION up (pid $pid, java $major, log $DIR/registry.log)"
  url
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then rm -f "$DIR/registry.pid"; say "not running"; return; fi
  stop_pid "$pid" "$DIR/registry.pid" "$CACHE/$VERSION"/cds-java*.jsa
}

cmd="${1:-}"
case "$cmd" in
  start) start ;;
  stop) stop ;;
  clean) stop; rm -rf "$DIR"; say "removed $DIR" ;;
  status)
    if pid="$(running_pid)"; then say "running: pid $pid, $(url), log $DIR/registry.log"; exit 0; fi
    say "not running (state dir $DIR)"; exit 3 ;;
  url) running_pid >/dev/null || die "not running (state dir $DIR); start it with registry.sh start"; url ;;
  fetch) fetch; echo "$APP" ;;
  *) echo "usage: $0 start|stop|status|url|clean|fetch" >&2; exit 2 ;;
esac
