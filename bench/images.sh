#!/usr/bin/env bash
# images: gostd's image functions (ImageService) against thumbor on the same 1 MP JPEGs
# (bench/image_bench.cpp serves them and drives both; bench/peers/thumbor/README.md says what
# thumbor does for each function). Prints gost_image_bench's JSON line.
#   bench/images.sh GOSTD IMAGE_BENCH PG_PORT
# Options through the environment: BENCH_IMAGES_RATIO (4000 images), BENCH_IMAGES_PREVIEW (600),
# BENCH_IMAGES_MAIN_COLOR (600), BENCH_IMAGES_HITS (20000), BENCH_IMAGES_CLIENTS (16),
# BENCH_IMAGES_REDIS (1: a private redis-server in front of the results, as a gateway-facing
# node runs; 0: PostgreSQL alone), BENCH_REDIS_PORT (16399), BENCH_IMAGES_NODE_ARGS (extra
# gostd flags).
set -euo pipefail

gostd=$1 client=$2 port=$3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
db=gost_images
admin="host=127.0.0.1 port=$port user=gost dbname=postgres"
dsn="host=127.0.0.1 port=$port user=gost dbname=$db"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  # thumbor's forked processes too (its parent does not take them down when killed).
  [[ $thumbor_port == 0 ]] || pkill -9 -f "bin/thumbor --ip 127.0.0.1 --port $thumbor_port " 2>/dev/null || true
  if [[ ${BENCH_IMAGES_REDIS:-1} == 1 ]]; then
    GOST_REDIS_PORT=$redis_port GOST_REDIS_DIR=$root/var/redis-bench "$root/scripts/redis.sh" stop >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
redis_port=${BENCH_REDIS_PORT:-16399}
thumbor_port=0
trap cleanup EXIT

# thumbor from PyPI, in its own virtual environment (installed once).
venv=$root/var/peers/thumbor
want=$(sha256sum "$root/bench/peers/thumbor/requirements.txt" | cut -d' ' -f1)
if [[ ! -x $venv/bin/thumbor || $(cat "$venv/.gost-requirements.sha256" 2>/dev/null) != "$want" ]]; then
  echo "images: installing thumbor into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    -r "$root/bench/peers/thumbor/requirements.txt" >"$work/pip.log" 2>&1 \
    || { cat "$work/pip.log" >&2; echo "images: pip install thumbor failed" >&2; exit 1; }
  echo "$want" >"$venv/.gost-requirements.sha256"
fi

psql "$admin" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
redis_args=()
if [[ ${BENCH_IMAGES_REDIS:-1} == 1 ]]; then
  GOST_REDIS_PORT=$redis_port GOST_REDIS_DIR=$root/var/redis-bench "$root/scripts/redis.sh" start >/dev/null
  redis_args=(--images.redis.address="127.0.0.1:$redis_port")
fi
# The image server is on loopback: private sources allowed. Pools: a download-bound Ratio pool
# of 16 threads (each mostly waits on its fetch), the CPU-bound ones at the core count.
cores=$(nproc)
"$gostd" --pg.dsn="$dsn" --node.id=images --grpc.listen=127.0.0.1:0 \
  --grpc.port_file="$work/port" --caf.listen=127.0.0.1:0 --http.listen=127.0.0.1:0 \
  --outbox.relay=false --log.level=warn --scheduled.enabled=false \
  --images.allow_private_sources=true --images.poll=20ms --images.blob_dir="$work/blobs" \
  --images.ratio_workers=16 --images.preview_workers="$cores" --images.main_color_workers="$cores" \
  "${redis_args[@]}" ${BENCH_IMAGES_NODE_ARGS:-} >"$work/gostd.log" 2>&1 &
gost_pid=$!
pids+=($gost_pid)
for _ in $(seq 300); do [[ -s $work/port ]] && break; sleep 0.1; done
[[ -s $work/port ]] || { cat "$work/gostd.log" >&2; echo "images: gostd did not start" >&2; exit 1; }

thumbor_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$venv/bin/thumbor" --ip 127.0.0.1 --port "$thumbor_port" --conf "$root/bench/peers/thumbor/thumbor.conf" \
  --processes "$cores" --log-level error >"$work/thumbor.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
  curl -fs "http://127.0.0.1:$thumbor_port/healthcheck" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fs "http://127.0.0.1:$thumbor_port/healthcheck" >/dev/null \
  || { cat "$work/thumbor.log" >&2; echo "images: thumbor did not start" >&2; exit 1; }
sleep 1 # its forked processes listen too
thumbor_pids=$(pgrep -d, -f "thumbor.*--port $thumbor_port")

"$client" --addr "127.0.0.1:$(head -1 "$work/port")" --thumbor "127.0.0.1:$thumbor_port" \
  --ratio "${BENCH_IMAGES_RATIO:-4000}" --preview "${BENCH_IMAGES_PREVIEW:-600}" \
  --main-color "${BENCH_IMAGES_MAIN_COLOR:-600}" --hits "${BENCH_IMAGES_HITS:-20000}" \
  --concurrency "${BENCH_IMAGES_CLIENTS:-16}" --gost-pid "$gost_pid" --thumbor-pids "$thumbor_pids" \
  --thumbor-processes "$cores"
kill -TERM "$gost_pid"
wait "$gost_pid" || true
