#!/usr/bin/env bash
# gost's own C++ sources in the project's style (.clang-format), with Debian 12's clang-format
# (version 14: another version formats some constructs differently).
#   scripts/format.sh           formats them in place (after a merge: run it, commit the result)
#   scripts/format.sh --check   changes nothing; lists the files that need formatting and exits
#                               1 when there is any (the CTest unit test layout.format)
# Sources: the C++ files under the project's folders; not generated code (it lives in build
# directories) and not tests/fixtures (trees made to be wrong). GOST_CLANG_FORMAT names another
# clang-format binary.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

check=false
case "${1:-}" in
  --check) check=true ;;
  "") ;;
  *) echo "usage: scripts/format.sh [--check]" >&2; exit 2 ;;
esac

cf=${GOST_CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null; then
  echo "format.sh: $cf not found; install it with scripts/install-deps.sh (Debian package clang-format)" >&2
  exit 1
fi
if ! "$cf" --version | grep -q 'version 14\.'; then
  echo "format.sh: $("$cf" --version) is not clang-format 14 (Debian 12's), whose output the tree follows;" \
       "set GOST_CLANG_FORMAT to a clang-format 14" >&2
  exit 1
fi

mapfile -t files < <(find config persistence actors runtime tests bench examples \
                       -path tests/fixtures -prune -o \
                       -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) -print | sort)

if ! $check; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 20 -P "$(nproc)" "$cf" -i --style=file
  exit 0
fi

# --dry-run --Werror fails on a file that would change; print the names, not the diagnostics.
bad=$(printf '%s\0' "${files[@]}" \
        | xargs -0 -n 1 -P "$(nproc)" sh -c '"$0" --dry-run --Werror --style=file "$1" >/dev/null 2>&1 || echo "$1"' "$cf" \
        | sort)
if [[ -n $bad ]]; then
  echo "$bad"
  echo "format.sh: $(echo "$bad" | wc -l) file(s) differ from .clang-format; run scripts/format.sh" >&2
  exit 1
fi
