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
