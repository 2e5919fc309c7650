#!/usr/bin/env bash
# Builds gost's Debian packages (docs/packaging.md): configures and builds a preset (default
# `release`), then `cpack -G DEB` into build/<preset>/packages/:
#   gost_<version>_<arch>.deb         gostd, gostctl, the systemd unit, /etc/gost/gostd.conf
#   libgost-dev_<version>_<arch>.deb  headers, static libraries, the CMake package
# Prints the two paths. Usage: scripts/package.sh [PRESET]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
preset=${1:-release}
logs=$root/var/package-logs
mkdir -p "$logs"
source "$root/scripts/lib.sh"

step "configuring (preset $preset)" "$logs/configure.log" cmake --preset "$preset"
step "building" "$logs/build.log" cmake --build --preset "$preset" -j "$(nproc)"
out=$root/build/$preset/packages
rm -rf "$out"
step "packaging" "$logs/cpack.log" \
  cpack --config "$root/build/$preset/CPackConfig.cmake" -G DEB -B "$out"
ls "$out"/*.deb
