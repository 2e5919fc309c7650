#!/usr/bin/env bash
# The CMake package end to end: installs the build tree into a prefix of its own
# (`cmake --install BUILD --prefix BUILD/install-test/prefix`, never a system directory),
# configures and builds examples/ as a separate project against it (find_package(gost)), and
# runs the example application's --help: it compiled against the installed headers, linked
# the installed static libraries with their dependencies, and runs.
#   tests/install/install_test.sh BUILD_DIR SOURCE_DIR     (CTest: install.examples)
# Fixed paths under the build directory, wiped first: ccache then hits across runs.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$build/install-test
rm -rf "$work/prefix" "$work/build" "$work/watchlist" "$work/watchlist-build"
mkdir -p "$work"

run() { # run LOG CMD...: quiet unless it fails
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    tail -n 80 "$log" >&2
    echo "install_test: failed: $* (log: $log)" >&2
    exit 1
  fi
}

run "$work/install.log" cmake --install "$build" --prefix "$work/prefix"
for f in lib/cmake/gost/gostConfig.cmake lib/cmake/gost/FindCAF.cmake \
  lib/cmake/gost/GostProto.cmake include/gost/runtime/node_builder.hpp \
  include/gost/v1/offer.pb.h include/gost/v1/offer.proto lib/libgost_runtime.a bin/gostd \
  include/gost/entities/entity_type.hpp lib/libgost_entities.a; do
  [[ -e $work/prefix/$f ]] || { echo "install_test: $f not installed" >&2; exit 1; }
done
# Nothing outside the prefix: the package's system files (/etc, systemd) are not in a plain
# install (packaging/CMakeLists.txt).
outside=$(grep -vE "^-- (Install configuration: |(Installing|Up-to-date): $work/prefix/)" \
  "$work/install.log" || true)
if [[ -n $outside ]]; then
  echo "$outside" >&2
  echo "install_test: cmake --install wrote outside its prefix (above)" >&2
  exit 1
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# A sanitized build tree (tests/CMakeLists.txt sets GOST_CONSUMER_FLAGS): the consumers compile
# and link with the same sanitizer runtime as the installed libraries.
if [[ -n ${GOST_CONSUMER_FLAGS:-} ]]; then
  launcher+=("-DCMAKE_CXX_FLAGS=$GOST_CONSUMER_FLAGS"
    "-DCMAKE_EXE_LINKER_FLAGS=${GOST_CONSUMER_FLAGS%% -U*}")
fi
run "$work/configure.log" cmake -S "$src/examples" -B "$work/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "${launcher[@]}"
run "$work/build.log" cmake --build "$work/build" -j 2
# The headers came from the prefix, not from the source tree.
if grep -q -- "-I$src/\(runtime\|actors\|config\|persistence\)" "$work/build/compile_commands.json" 2>/dev/null; then
  echo "install_test: the example compiled against gost's source tree" >&2
  exit 1
fi
run "$work/help.log" "$work/build/app/gost_example" --help
# It names itself (node_builder::name) and lists its stage's key.
grep -q "^gost_example 1.0.0 (gost " "$work/help.log" && grep -q "^Usage: gost_example" "$work/help.log" \
  && grep -q -- "--stages.photo_count.enabled=" "$work/help.log" || {
  cat "$work/help.log" >&2
  echo "install_test: gost_example --help printed no usage under its own name, or no" \
    "stages.photo_count.enabled" >&2
  exit 1
}

# The acceptance case of docs/adding-an-actor-type.md: an actor type in a folder of its own,
# outside gost's tree, with its short CMakeLists, its unit test and its PostgreSQL-tier test (a
# node in the test's process: gost/testing/app_node.hpp) on gost's test kit.
cp -r "$src/examples/watchlist" "$work/watchlist"
run "$work/watchlist-configure.log" cmake -S "$work/watchlist" -B "$work/watchlist-build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$work/prefix" "${launcher[@]}"
run "$work/watchlist-build.log" cmake --build "$work/watchlist-build" -j 2
run "$work/watchlist-test.log" ctest --test-dir "$work/watchlist-build" --output-on-failure
grep -q "100% tests passed, 0 tests failed out of 2" "$work/watchlist-test.log" || {
  cat "$work/watchlist-test.log" >&2
  echo "install_test: the watchlist's unit and PostgreSQL-tier tests did not both run" >&2
  exit 1
}
