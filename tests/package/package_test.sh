#!/usr/bin/env bash
# The Debian packages end to end, as root on a Debian 12 machine with apt:
#   1. `cpack -G DEB` in the build tree: gost_<v>_<arch>.deb and libgost-dev_<v>_<arch>.deb;
#   2. `apt-get install ./gost_*.deb ./libgost-dev_*.deb` (their dependencies are the ones
#      scripts/install-deps.sh installs, so nothing is downloaded);
#   3. what gost's postinst made: the `gost` user, /var/lib/gost, the unit, the conffile;
#   4. the packaged gostd --help, then (with GOST_TEST_PG) the packaged gostd as the `gost`
#      user with the packaged config, on a database of its own on the test server: served,
#      ready, `gostctl nodes` lists it, SIGTERM stops it;
#   5. examples/ built against the installed package under /usr, its --help run;
#   6. `apt-get purge` of both, and the user, /etc/gost and /var/lib/gost gone again.
# It refuses to start when either package, the `gost` user or /etc/gost is already there, so
# that the purge leaves the machine as it found it.
#   tests/package/package_test.sh BUILD_DIR SOURCE_DIR        (CTest: package.deb)
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$build/package-test
die() { echo "package_test: $*" >&2; exit 1; }
run() { # run LOG CMD...: quiet unless it fails
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    tail -n 80 "$log" >&2
    die "failed: $* (log: $log)"
  fi
}

[[ $(id -u) -eq 0 ]] || die "needs root (apt-get install of the packages)"
for p in gost libgost-dev; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    die "package $p is installed already; remove it first (apt-get purge $p)"
  fi
done
! getent passwd gost >/dev/null || die "a user 'gost' exists already; the purge would remove it"
[[ ! -e /etc/gost ]] || die "/etc/gost exists already; the purge would remove it"

rm -rf "$work"
mkdir -p "$work/debs"
run "$work/cpack.log" cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/debs"
shopt -s nullglob
debs=("$work"/debs/gost_*.deb "$work"/debs/libgost-dev_*.deb)
[[ ${#debs[@]} -eq 2 ]] || die "cpack made ${#debs[@]} of the two packages: $(ls "$work/debs")"

node_pid=""
db=""
rundir=""
cleanup() {
  [[ -n $rundir ]] && rm -rf "$rundir"
  [[ -n $node_pid ]] && kill -KILL "$node_pid" 2>/dev/null
  [[ -n $db ]] && psql -X -q "$GOST_TEST_PG dbname=postgres" -c "DROP DATABASE IF EXISTS $db" \
    >/dev/null 2>&1
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -q gost libgost-dev >"$work/purge.log" 2>&1
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
run "$work/apt-install.log" apt-get install -y -q --no-install-recommends "${debs[@]}"

# What the maintainer scripts and the package put in place.
getent passwd gost >/dev/null || die "postinst made no user 'gost'"
[[ $(stat -c %U /var/lib/gost) == gost ]] || die "/var/lib/gost is not the gost user's"
[[ -f /lib/systemd/system/gost.service ]] || die "no /lib/systemd/system/gost.service"
grep -qx "ExecStart=/usr/bin/gostd --config /etc/gost/gostd.conf" /lib/systemd/system/gost.service \
  || die "gost.service does not run /usr/bin/gostd with /etc/gost/gostd.conf"
dpkg-query -W -f='${Conffiles}\n' gost | grep -q "/etc/gost/gostd.conf" \
  || die "/etc/gost/gostd.conf is not a conffile of gost"
[[ -x /usr/libexec/gost/pg.sh ]] || die "no /usr/libexec/gost/pg.sh"

run "$work/gostd-help.log" /usr/bin/gostd --help
grep -q "^Usage: gostd" "$work/gostd-help.log" || die "gostd --help printed no usage"
run "$work/gostctl-help.log" /usr/bin/gostctl --help

# The packaged node, as the service runs it, on the test PostgreSQL.
if [[ -n ${GOST_TEST_PG:-} ]]; then
  db=gost_pkgtest_$$
  run "$work/createdb.log" psql -X -q "$GOST_TEST_PG dbname=postgres" -c "CREATE DATABASE $db"
  rundir=$(mktemp -d /tmp/gost-pkgtest.XXXXXX) # the gost user may not reach the build tree
  chown gost:gost "$rundir"
  # setpriv execs gostd itself (runuser would stay its parent and answer SIGTERM with 143).
  (cd /var/lib/gost && exec setpriv --reuid=gost --regid=gost --init-groups \
    /usr/bin/gostd --config /etc/gost/gostd.conf \
    --pg.dsn="$GOST_TEST_PG dbname=$db" --grpc.listen=127.0.0.1:0 --http.listen=127.0.0.1:0 \
    --caf.listen=127.0.0.1:0 --grpc.port_file="$rundir/ports") >"$work/gostd.log" 2>&1 &
  node_pid=$!
  # Bounded polling on what the node reports: its port file (gRPC, then HTTP) once it serves.
  for _ in $(seq 600); do
    [[ -f $rundir/ports && $(wc -l <"$rundir/ports") -ge 2 ]] && break
    kill -0 "$node_pid" 2>/dev/null || { tail -n 40 "$work/gostd.log" >&2; die "gostd exited"; }
    sleep 0.1
  done
  [[ -f $rundir/ports && $(wc -l <"$rundir/ports") -ge 2 ]] \
    || { tail -n 40 "$work/gostd.log" >&2; die "gostd did not serve within 60 s"; }
  grpc_port=$(sed -n 1p "$rundir/ports")
  http_port=$(sed -n 2p "$rundir/ports")
  ready=""
  for _ in $(seq 300); do
    curl -fsS "http://127.0.0.1:$http_port/readyz" >/dev/null 2>&1 && { ready=1; break; }
    sleep 0.1
  done
  [[ -n $ready ]] || { tail -n 40 "$work/gostd.log" >&2; die "gostd never became ready"; }
  run "$work/gostctl-nodes.log" /usr/bin/gostctl --addr "127.0.0.1:$grpc_port" nodes
  grep -q "127.0.0.1:$grpc_port" "$work/gostctl-nodes.log" \
    || { cat "$work/gostctl-nodes.log" >&2; die "gostctl nodes does not list the node"; }
  kill -TERM "$node_pid"
  rc=0
  wait "$node_pid" || rc=$?
  node_pid=""
  [[ $rc -eq 0 ]] || { tail -n 40 "$work/gostd.log" >&2; die "gostd exited with $rc on SIGTERM"; }
  run "$work/dropdb.log" psql -X -q "$GOST_TEST_PG dbname=postgres" -c "DROP DATABASE $db"
  db=""
fi

# An application against the installed package: /usr is on CMake's default search path.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
run "$work/example-configure.log" cmake -S "$src/examples" -B "$work/example" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}"
grep -q "gost_DIR:PATH=/usr/lib" "$work/example/CMakeCache.txt" \
  || die "examples/ did not find gost under /usr ($(grep gost_DIR "$work/example/CMakeCache.txt"))"
run "$work/example-build.log" cmake --build "$work/example" -j 2
run "$work/example-help.log" "$work/example/app/gost_example" --help
grep -q "^Usage: gost_example" "$work/example-help.log" \
  || die "gost_example --help printed no usage under its own name"

# Purged: the machine as it was.
trap - EXIT
rm -rf "$rundir"
run "$work/purge.log" apt-get purge -y -q gost libgost-dev
! getent passwd gost >/dev/null || die "user gost left after the purge"
[[ ! -e /etc/gost && ! -e /var/lib/gost && ! -e /usr/bin/gostd ]] \
  || die "files left after the purge: $(ls -d /etc/gost /var/lib/gost /usr/bin/gostd 2>/dev/null)"
