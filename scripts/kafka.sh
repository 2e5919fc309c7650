#!/usr/bin/env bash
# A real single-node Apache Kafka 4.x broker (KRaft) on loopback, for the kafka test tier.
# The broker jars come from Maven Central through `mvn` into a cache folder; nothing else is
# downloaded. Usage:
#   scripts/kafka.sh start    fetch jars if needed, format storage, start, wait until it answers
#   scripts/kafka.sh stop     stop the broker started by this script (by pid) and remove its logs
#   scripts/kafka.sh status   exit 0 when the broker answers
#   scripts/kafka.sh fetch    only fetch the jars
# Environment: GOST_KAFKA_VERSION (4.4.0), GOST_KAFKA_PORT (19092), GOST_KAFKA_DIR (var/kafka),
#              GOST_CACHE_DIR (~/.cache/gost).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=${GOST_KAFKA_VERSION:-4.4.0}
port=${GOST_KAFKA_PORT:-19092}
cport=$((port + 1))
dir=${GOST_KAFKA_DIR:-$root/var/kafka}
cache=${GOST_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gost}
libs=$cache/kafka-$version/libs
pidfile=$dir/broker.pid

die() { echo "kafka.sh: $*" >&2; exit 1; }

fetch() {
  [[ -f $libs/.complete ]] && return 0
  command -v mvn >/dev/null || die "mvn not found; run scripts/install-deps.sh --kafka"
  local work; work=$(mktemp -d)
  cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>gost</groupId><artifactId>kafka-broker-deps</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$version</version></dependency>
  </dependencies>
</project>
POM
  mkdir -p "$libs"
  echo "kafka.sh: fetching Apache Kafka $version jars with mvn (once) into $libs" >&2
  if ! mvn -q -B -f "$work/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$libs" >"$work/mvn.log" 2>&1; then
    cat "$work/mvn.log" >&2; rm -rf "$work"; die "mvn could not fetch kafka_2.13:$version"
  fi
  rm -rf "$work"
  touch "$libs/.complete"
}

answers() {
  # A TCP connect is not enough (the socket opens before the broker serves); ask for metadata.
  java -Xshare:auto -XX:TieredStopAtLevel=1 -cp "$libs/*" org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$port" --list \
    >/dev/null 2>&1 && return 0
  return 1
}

running() { [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

start() {
  fetch
  command -v java >/dev/null || die "java not found; run scripts/install-deps.sh --kafka"
  if running; then return 0; fi
  if answers; then
    die "another broker already answers on 127.0.0.1:$port (not started by this script with GOST_KAFKA_DIR=$dir); stop it or set GOST_KAFKA_PORT"
  fi
  rm -rf "$dir"; mkdir -p "$dir/logs"
  cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/logs
num.partitions=8
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
PROPS
  local uuid
  uuid=$(java -cp "$libs/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1)
  java -cp "$libs/*" kafka.tools.StorageTool format -t "$uuid" -c "$dir/server.properties" \
    >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; die "storage format failed"; }
  nohup java -Xms256m -Xmx512m -XX:+UseSerialGC \
    -cp "$libs/*" kafka.Kafka "$dir/server.properties" >"$dir/broker.log" 2>&1 &
  echo $! >"$pidfile"
  for _ in $(seq 1 120); do
    running || { tail -n 30 "$dir/broker.log" >&2; die "broker exited during start (log: $dir/broker.log)"; }
    answers && return 0
    sleep 1
  done
  tail -n 30 "$dir/broker.log" >&2
  die "broker did not answer on 127.0.0.1:$port within 120 s (log: $dir/broker.log)"
}

stop() {
  if running; then
    local pid; pid=$(cat "$pidfile")
    kill "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  status) running && answers ;;
  *) die "usage: kafka.sh start|stop|status|fetch" ;;
esac
