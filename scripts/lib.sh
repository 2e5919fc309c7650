# Shared by the project's scripts (source it). Not a command.

# step NAME LOG CMD...: runs CMD quietly into LOG; on failure shows the log's tail and stops
# the calling script with one line saying which step failed.
step() {
  local name=$1 log=$2
  shift 2
  if ! "$@" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "$(basename "$0"): $name failed (full log: $log)" >&2
    exit 1
  fi
}

# start_test_services LOGDIR: the test services (PostgreSQL, a real Kafka broker, Redis) on
# their own ports and directories, so a developer's demo node is untouched, exported for the
# tests (GOST_TEST_PG, GOST_TEST_KAFKA, GOST_TEST_REDIS), stopped when the calling script exits.
# Another checkout testing at the same time sets its own (GOST_PG_PORT, GOST_PG_DIR,
# GOST_KAFKA_PORT, GOST_KAFKA_DIR; Kafka also takes GOST_KAFKA_PORT + 1 for its controller;
# GOST_REDIS_PORT, GOST_REDIS_DIR). Run from the checkout's root.
start_test_services() {
  local logs=$1 root
  root=$(pwd)
  export GOST_PG_DIR=${GOST_PG_DIR:-$root/var/pgtest} GOST_PG_PORT=${GOST_PG_PORT:-54339}
  export GOST_TEST_PG="host=127.0.0.1 port=$GOST_PG_PORT user=gost"
  export GOST_KAFKA_PORT=${GOST_KAFKA_PORT:-19092} GOST_KAFKA_DIR=${GOST_KAFKA_DIR:-$root/var/kafkatest}
  export GOST_TEST_KAFKA=127.0.0.1:$GOST_KAFKA_PORT
  export GOST_REDIS_PORT=${GOST_REDIS_PORT:-16379} GOST_REDIS_DIR=${GOST_REDIS_DIR:-$root/var/redistest}
  export GOST_TEST_REDIS=127.0.0.1:$GOST_REDIS_PORT
  trap stop_test_services EXIT
  step "starting PostgreSQL" "$logs/pg.log" scripts/pg.sh start
  step "starting Kafka" "$logs/kafka.log" scripts/kafka.sh start
  step "starting Redis" "$logs/redis.log" scripts/redis.sh start
}

stop_test_services() {
  scripts/redis.sh stop >/dev/null 2>&1 || true
  scripts/kafka.sh stop >/dev/null 2>&1 || true
  scripts/pg.sh stop >/dev/null 2>&1 || true
}
