#!/usr/bin/env bash
# feed: one seller's feed load end to end on this machine (MISSION "How fast": a feed of
# 100,000 offers, about 100 MB of XML, fetched, validated, unified and sent in under 30 s with
# RSS under 300 MB; parse-and-validate at least 50% of `xmllint --stream` on the same file).
#   bench/feed.sh GOSTD FEED_BENCH PG_PORT
# - an Avito Autoload feed of BENCH_FEED_OFFERS ads (100000; bench/feed_gen.py, seed
#   BENCH_FEED_SEED, 1) generated once into var/bench-feed/ (kept for the next run: the name
#   carries the size, the seed and the generator's hash);
# - served by `python3 -m http.server` on 127.0.0.1 (a free port);
# - a real Kafka broker (scripts/kafka.sh, port BENCH_KAFKA_PORT (19192), var/kafkabench) with
#   a requests and a responses topic of this run;
# - one release gostd on a fresh database (gost_feed) consuming the requests
#   (--feed.requests_topic) and answering every offer, then the load's end, on the responses
#   topic; its stages, image functions, scheduled actions and outbox relay are off, so the
#   node does the feed exchange's work only;
# - `xmllint --stream --noout` on the same file: the parse floor (its wall time);
# - gost_feed_bench (bench/feed_bench.cpp): fetch, check, unify, send, the terminal response.
# BENCH_FEED_DRIVER_ARGS: more arguments for the driver (e.g. --producer-max-kbytes 16384).
# Prints the driver's JSON line with floor_value (xmllint's seconds) and floor_ratio
# (xmllint's seconds over gost's check pass) added. Stops everything it started.
set -euo pipefail

gostd=$1 bench=$2 port=$3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
offers=${BENCH_FEED_OFFERS:-100000}
seed=${BENCH_FEED_SEED:-1}
db=gost_feed
admin="host=127.0.0.1 port=$port user=gost dbname=postgres"
dsn="host=127.0.0.1 port=$port user=gost dbname=$db"
export GOST_KAFKA_PORT=${BENCH_KAFKA_PORT:-19192} GOST_KAFKA_DIR=$root/var/kafkabench
brokers=127.0.0.1:$GOST_KAFKA_PORT
data=$root/var/bench-feed
work=$(mktemp -d)
node= web= kafka_started=
cleanup() {
  if [[ -n $node ]]; then kill -TERM "$node" 2>/dev/null || true; for _ in $(seq 50); do kill -0 "$node" 2>/dev/null || break; sleep 0.1; done; kill -9 "$node" 2>/dev/null || true; fi
  [[ -n $web ]] && kill "$web" 2>/dev/null || true
  [[ -n $kafka_started ]] && "$root/scripts/kafka.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
die() { echo "feed: $*" >&2; exit 1; }
command -v xmllint >/dev/null || die "xmllint not found; run scripts/install-deps.sh (libxml2-utils)"

# The feed, generated once per size, seed and generator.
mkdir -p "$data"
gen_hash=$(sha256sum "$root/bench/feed_gen.py" | cut -c1-8)
name=feed-$offers-$seed-$gen_hash.xml
if [[ ! -s $data/$name ]]; then
  echo "feed: generating $offers ads into var/bench-feed/$name..." >&2
  find "$data" -maxdepth 1 -name 'feed-*.xml*' -delete
  python3 "$root/bench/feed_gen.py" --offers "$offers" --seed "$seed" --out "$data/$name" >&2
fi
bytes=$(stat -c %s "$data/$name")
echo "feed: $name, $bytes bytes" >&2

# The seller's web server.
web_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$web_port" --bind 127.0.0.1 --directory "$data" >"$work/http.log" 2>&1 &
web=$!
for _ in $(seq 100); do curl -sfI "http://127.0.0.1:$web_port/$name" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sfI "http://127.0.0.1:$web_port/$name" >/dev/null || { cat "$work/http.log" >&2; die "the HTTP server did not start"; }

# The broker, the topics of this run, the node.
kafka_started=1
"$root/scripts/kafka.sh" start >&2
tag=$$-$(date +%s)
requests=gost.bench-feed-requests-$tag responses=gost.bench-feed-responses-$tag
"$bench" topics --brokers "$brokers" --topics "$requests,$responses" || die "cannot create the topics"
psql "$admin" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
"$gostd" --pg.dsn="$dsn" --node.id=feedbench --shard.count=8 --grpc.listen=127.0.0.1:0 \
  --grpc.port_file="$work/port" --caf.listen=127.0.0.1:0 --http.listen=127.0.0.1:0 \
  --kafka.brokers="$brokers" --kafka.topic="gost.bench-feed-saved-$tag" \
  --feed.requests_topic="$requests" --feed.responses_topic="$responses" \
  --feed.group="gost.feeds-$tag" --outbox.relay=false --stages.expire.enabled=false \
  --stages.photos.enabled=false --images.enabled=false --scheduled.enabled=false \
  --log.level=warn >"$work/gostd.log" 2>&1 &
node=$!
for _ in $(seq 300); do [[ -s $work/port ]] && break; kill -0 "$node" 2>/dev/null || break; sleep 0.1; done
[[ -s $work/port ]] || { tail -20 "$work/gostd.log" >&2; die "gostd did not start"; }
# No wait for its consumer to join: a new group reads the requests topic from its start.

# The parse floor, on the same file with the page cache warm.
cat "$data/$name" >/dev/null
t0=$(date +%s%N)
xmllint --stream --noout "$data/$name" || die "xmllint refused the feed"
t1=$(date +%s%N)
floor=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.2f", ns / 1e9 }')
echo "feed: xmllint --stream --noout: $floor s" >&2

mkdir -p "$work/blobs"
postmaster=$(python3 "$root/bench/proc_cpu.py" postmaster "$dsn")
line=$("$bench" run --gostd-pid "$node" --pg-postmaster "$postmaster" --url "http://127.0.0.1:$web_port/$name" --blob-dir "$work/blobs" \
         --brokers "$brokers" --requests-topic "$requests" --responses-topic "$responses" \
         --seller bench-seller --task "bench-$tag" ${BENCH_FEED_DRIVER_ARGS:-}) \
  || { tail -20 "$work/gostd.log" >&2; die "the driver failed"; }
kill -0 "$node" 2>/dev/null || { tail -20 "$work/gostd.log" >&2; die "gostd exited during the run"; }
check=$(sed -E 's/.*"check_s": *([0-9.]+).*/\1/' <<<"$line")
printf '%s, "floor": "xmllint --stream --noout", "floor_value": %s, "floor_ratio": %.2f}\n' \
  "${line%\}}" "$floor" "$(awk -v a="$floor" -v b="$check" 'BEGIN { print a / b }')"
