#!/usr/bin/env bash
# Makes the price.predict stage's Python environment: a venv with requirements.txt (PyPI) and
# the Python stubs of gost's .proto files and of this stage's own, generated with
# grpc_tools.protoc into the venv (never committed). Idempotent and quiet: a venv made from
# the same requirements, protos and script is kept as it is; on failure it prints the log.
#   examples/price_predict/setup.sh [VENV_DIR]     (default: var/price_predict/venv)
#   PYTHON=python3.11 examples/price_predict/setup.sh   (the interpreter; python3 by default)
# Then: VENV_DIR/bin/python examples/price_predict/server.py ... (README.md)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${1:-$root/var/price_predict/venv}
python=${PYTHON:-python3}
mkdir -p "$(dirname "$venv")"
venv=$(cd "$(dirname "$venv")" && pwd)/$(basename "$venv")

# Two callers at once (ctest -j) wait for each other rather than build one venv twice.
exec 9>"$venv.lock"
flock 9

stamp=$(cat "$here/setup.sh" "$here/requirements.txt" "$root"/proto/gost/v1/*.proto \
  "$here"/proto/price/v1/*.proto | sha256sum | cut -d' ' -f1)
[[ -f $venv/.setup-stamp && $(cat "$venv/.setup-stamp") == "$stamp" ]] && exit 0

log=$venv.log
fail() {
  cat "$log" >&2
  echo "price_predict/setup.sh: $1 (log above: $log)" >&2
  exit 1
}
rm -rf "$venv"
"$python" -m venv "$venv" >"$log" 2>&1 \
  || fail "$python -m venv failed: install python3-venv (scripts/install-deps.sh)"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" \
  >>"$log" 2>&1 || fail "pip install -r requirements.txt failed (PyPI reachable?)"

gen=$venv/gen
mkdir -p "$gen"
wkt=$("$venv/bin/python" -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')
(cd "$root/proto" && "$venv/bin/python" -m grpc_tools.protoc -I. -I"$here/proto" -I"$wkt" \
  --python_out="$gen" --grpc_python_out="$gen" gost/v1/*.proto) >>"$log" 2>&1 \
  || fail "grpc_tools.protoc failed on proto/gost/v1"
(cd "$here/proto" && "$venv/bin/python" -m grpc_tools.protoc -I. -I"$root/proto" -I"$wkt" \
  --python_out="$gen" price/v1/*.proto) >>"$log" 2>&1 \
  || fail "grpc_tools.protoc failed on proto/price/v1"
# The venv's interpreter finds the stubs (gost.v1.*_pb2, price.v1.*_pb2) without PYTHONPATH.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$gen" >"$site/gost_stubs.pth"
echo "$stamp" >"$venv/.setup-stamp"
rm -f "$log"
