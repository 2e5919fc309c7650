#!/usr/bin/env bash
# Installs the Debian packages gost needs, only those missing. Idempotent and quiet on success.
# Usage: scripts/install-deps.sh [--kafka]   (--kafka also makes sure Java and Maven exist)
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build ccache pkg-config git
  libcaf-dev libpqxx-dev libpq-dev
  libprotobuf-dev protobuf-compiler
  libgrpc++-dev protobuf-compiler-grpc
  librdkafka-dev libspdlog-dev libfmt-dev doctest-dev
  libvips-dev libcurl4-openssl-dev libxml2-dev
  libjpeg-dev          # libjpeg-turbo: the JPEG preview decoded without libvips (actors/images)
  libjemalloc-dev      # the allocator linked into gostd and applications (GOST_JEMALLOC)
  libvips-tools        # the `vips` command: scripts/run.sh makes its demo photos with it
  libxml2-utils        # xmllint: the feed benchmark's parse floor (bench/feed.sh)
  libhiredis-dev redis-server   # the image functions' Redis layer (scripts/redis.sh)
  postgresql postgresql-contrib
  pg-auto-failover-cli postgresql-15-auto-failover  # scripts/pg-ha.sh: the e2e tier's failover test
  curl procps iproute2 openssl
  clang-format
  python3-venv         # examples/price_predict/setup.sh: the Python stage's venv (PyPI)
  prometheus           # promtool: the e2e tier checks /metrics with it
  chromium             # headless: the e2e tier loads the web console (console_web.e2etest.cpp)
)
if [[ "${1:-}" == "--kafka" ]]; then
  pkgs+=(default-jre-headless maven)
fi

missing=()
for p in "${pkgs[@]}"; do
  # Java/maven may come from a non-Debian install on the machine; accept the binaries.
  case "$p" in
    default-jre-headless) command -v java >/dev/null && continue ;;
    maven) command -v mvn >/dev/null && continue ;;
  esac
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-deps: apt-get failed (see above); install the packages listed by hand and re-run" >&2
  exit 1
fi
rm -f "$log"
