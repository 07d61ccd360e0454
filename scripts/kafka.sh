#!/usr/bin/env bash
# A real Kafka broker for tests: one Apache Kafka node in KRaft mode (broker and controller in one
# JVM) on 127.0.0.1, run from the release's jars on Maven Central (fetched once by Maven into
# $HOME/.cache/silt-kafka); no Docker, no tarball.
#
#   scripts/kafka.sh start                  fetch jars if needed, start (idempotent), wait until
#                                           the broker serves; the last stdout line is 127.0.0.1:PORT
#   scripts/kafka.sh bootstrap              print 127.0.0.1:PORT of the running broker
#   scripts/kafka.sh topic NAME PARTITIONS  create a topic (replication 1; an existing one is fine)
#   scripts/kafka.sh status                 exit 0 and say so when running, exit 3 when not
#   scripts/kafka.sh stop                   stop the broker and wait for it to exit (data is kept)
#   scripts/kafka.sh clean                  stop, then delete the state directory
#   scripts/kafka.sh fetch                  only fetch the jars into the cache
#
#   SILT_KAFKA_DIR         state: config, data, log, pid, port (default ${TMPDIR:-/tmp}/silt-kafka)
#   SILT_KAFKA_PORT        client port (default: the previous run's port if free, else a free one)
#   SILT_KAFKA_PARTITIONS  num.partitions for auto-created topics (default 1)
#   SILT_KAFKA_HEAP        broker -Xmx (default 512m)
#   SILT_KAFKA_VERSION     Kafka release (default 4.3.1; 4.4.0 lacks kafka-tools-api on Maven Central)
#   SILT_KAFKA_CACHE       jar cache (default $HOME/.cache/silt-kafka)
#
# Needs Java >= 17 and, on the first run only, Maven; both are installed with apt-get when missing
# (as root, or with passwordless sudo). Progress and errors go to stderr.
set -euo pipefail

VERSION="${SILT_KAFKA_VERSION:-4.3.1}"
SLF4J_VERSION=2.0.17
CACHE="${SILT_KAFKA_CACHE:-$HOME/.cache/silt-kafka}"
LIBS="$CACHE/$VERSION/libs"
DIR="${SILT_KAFKA_DIR:-${TMPDIR:-/tmp}/silt-kafka}"
PARTITIONS="${SILT_KAFKA_PARTITIONS:-1}"
HEAP="${SILT_KAFKA_HEAP:-512m}"
START_TIMEOUT="${SILT_KAFKA_START_TIMEOUT:-90}"

say() { echo "kafka.sh: $*" >&2; }
die() { say "$*"; exit 1; }

apt_install() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "need $* but not root and no sudo: install them (apt-get install $*) and run again"
    sudo="sudo -n"
  fi
  say "installing $* with apt-get"
  exec 8>/tmp/silt-apt-deps.lock
  if command -v flock >/dev/null 2>&1; then flock 8; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >&2 || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >&2 \
    || die "apt-get install $* failed; install them by hand and run again"
}

java_major() {
  java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -n 1
}

need_java() {
  local v
  v="$(java_major 2>/dev/null || true)"
  if [ -z "$v" ] || [ "$v" -lt 17 ]; then
    apt_install openjdk-17-jre-headless
    v="$(java_major 2>/dev/null || true)"
    if [ -z "$v" ] || [ "$v" -lt 17 ]; then
      die "Kafka $VERSION needs Java >= 17 but 'java' is ${v:-missing}; put a Java 17+ first on PATH"
    fi
  fi
}

# The release's runtime jars (broker, storage tool, admin tools) copied flat into $LIBS, once.
fetch() {
  [ -f "$LIBS/.complete" ] && return
  mkdir -p "$CACHE"
  exec 7>"$CACHE/fetch.lock"
  if command -v flock >/dev/null 2>&1; then flock 7; fi
  [ -f "$LIBS/.complete" ] && return
  command -v mvn >/dev/null 2>&1 || apt_install maven
  need_java
  local work="$CACHE/$VERSION.fetch" t0=$SECONDS
  rm -rf "$work" "$LIBS"
  mkdir -p "$work"
  cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>silt.test</groupId><artifactId>kafka-libs</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$SLF4J_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>$SLF4J_VERSION</version></dependency>
  </dependencies>
  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId><artifactId>maven-dependency-plugin</artifactId><version>3.8.1</version>
  </plugin></plugins></build>
</project>
POM
  say "fetching Kafka $VERSION jars from Maven Central into $LIBS (first run only)"
  nice -n 19 mvn -q -B -f "$work/pom.xml" -Dmaven.repo.local="$work/m2" \
    dependency:copy-dependencies -DoutputDirectory="$work/libs" -DincludeScope=runtime >&2 \
    || die "mvn could not fetch org.apache.kafka:kafka_2.13:$VERSION and its dependencies (see above); is Maven Central reachable?"
  ls "$work"/libs/kafka_2.13-"$VERSION".jar >/dev/null || die "fetched jars lack kafka_2.13-$VERSION.jar"
  mkdir -p "$(dirname "$LIBS")"
  mv "$work/libs" "$LIBS"
  rm -rf "$work"
  touch "$LIBS/.complete"
  say "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars in $((SECONDS - t0)) s"
}

# shellcheck source=scripts/lib/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/ports.sh"

# The pid of our running broker, if any (checks that the pid still is a Kafka on our config).
running_pid() {
  local pid
  pid="$(cat "$DIR/broker.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$DIR/server.properties" || return 1
  echo "$pid"
}

bootstrap() { echo "127.0.0.1:$(cat "$DIR/port")"; }

# A short-lived JVM for Kafka's own command-line tools.
tool() {
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
    -Dslf4j.internal.verbosity=WARN -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -cp "$LIBS/*" "$@"
}

write_config() {
  local port="$1" cport="$2"
  cat >"$DIR/server.properties" <<PROPS
# Written by scripts/kafka.sh on every start.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$DIR/data
num.partitions=$PARTITIONS
default.replication.factor=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
PROPS
}

start() {
  mkdir -p "$DIR"
  exec 9>"$DIR/.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if running_pid >/dev/null; then bootstrap; return; fi
  fetch
  need_java
  local port cport pid cid
  if [ -n "${SILT_KAFKA_PORT:-}" ]; then
    port="$SILT_KAFKA_PORT"
    port_free "$port" || die "SILT_KAFKA_PORT=$port is in use on 127.0.0.1; pick another or unset it"
  else
    port="$(cat "$DIR/port" 2>/dev/null || true)"
    if [ -z "$port" ] || ! port_free "$port"; then port="$(free_port)"; fi
  fi
  cport="$(free_port)"
  while [ "$cport" = "$port" ]; do cport="$(free_port)"; done
  echo "$port" >"$DIR/port"
  write_config "$port" "$cport"
  if [ ! -f "$DIR/data/meta.properties" ]; then
    rm -rf "$DIR/data"
    # A cluster id is a random 16-byte UUID in unpadded URL-safe base64 (22 characters).
    cid="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | cut -c 1-22)"
    tool kafka.tools.StorageTool format -t "$cid" -c "$DIR/server.properties" >"$DIR/format.log" 2>&1 \
      || { cat "$DIR/format.log" >&2; die "formatting $DIR/data failed"; }
  fi
  : >"$DIR/broker.log"
  # setsid: the broker does not share the caller's process group or terminal; it must not keep
  # the lock files open (7-9), or the next start would wait on them forever.
  setsid java -Xms256m -Xmx"$HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd HH:mm:ss.SSS" \
    -cp "$LIBS/*" kafka.Kafka "$DIR/server.properties" >"$DIR/broker.log" 2>&1 </dev/null 7>&- 8>&- 9>&- &
  pid=$!
  echo "$pid" >"$DIR/broker.pid"
  for _ in $(seq 1 $((START_TIMEOUT * 4))); do
    # Ready when the broker has finished starting and its client listener accepts connections.
    if grep -q "Kafka Server started" "$DIR/broker.log" && accepts "$port"; then
      say "Kafka $VERSION up (pid $pid, log $DIR/broker.log)"
      bootstrap
      return
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      say "the broker exited during startup; last lines of $DIR/broker.log:"
      tail -n 40 "$DIR/broker.log" >&2
      rm -f "$DIR/broker.pid"
      exit 1
    fi
    sleep 0.25
  done
  say "the broker did not come up on 127.0.0.1:$port within ${START_TIMEOUT}s; last lines of $DIR/broker.log:"
  tail -n 40 "$DIR/broker.log" >&2
  kill "$pid" 2>/dev/null || true
  rm -f "$DIR/broker.pid"
  exit 1
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then rm -f "$DIR/broker.pid"; say "not running"; return; fi
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 120); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "pid $pid did not exit within 30 s of SIGTERM; sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$DIR/broker.pid"
  say "stopped (pid $pid)"
}

need_running() {
  running_pid >/dev/null || die "not running (state dir $DIR); start it with scripts/kafka.sh start"
}

topic() {
  local name="${1:-}" parts="${2:-}"
  if [ -z "$name" ] || ! [[ "$parts" =~ ^[1-9][0-9]*$ ]]; then die "usage: kafka.sh topic NAME PARTITIONS"; fi
  need_running
  local out have
  out="$(tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$(bootstrap)" --create \
    --if-not-exists --topic "$name" --partitions "$parts" --replication-factor 1 2>&1)" \
    || die "creating topic $name failed: $out"
  if grep -q "Created topic" <<<"$out"; then say "topic $name created with $parts partitions"; return; fi
  # It existed already: fine only if it has the partitions asked for.
  out="$(tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$(bootstrap)" --describe \
    --topic "$name" 2>&1)" || die "describing topic $name failed: $out"
  have="$(sed -n 's/.*PartitionCount: *\([0-9][0-9]*\).*/\1/p' <<<"$out" | head -n 1)"
  [ "$have" = "$parts" ] \
    || die "topic $name exists with ${have:-?} partitions, not $parts; use another name or 'kafka.sh clean'"
  say "topic $name exists with $parts partitions"
}

cmd="${1:-}"
case "$cmd" in
  start) start ;;
  stop) stop ;;
  clean) stop; rm -rf "$DIR"; say "removed $DIR" ;;
  status)
    if pid="$(running_pid)"; then say "running: pid $pid, $(bootstrap), data $DIR/data"; exit 0; fi
    say "not running (state dir $DIR)"; exit 3 ;;
  bootstrap) need_running; bootstrap ;;
  topic) shift; topic "$@" ;;
  fetch) fetch; echo "$LIBS" ;;
  *) echo "usage: $0 start|stop|status|bootstrap|topic NAME PARTITIONS|clean|fetch" >&2; exit 2 ;;
esac
