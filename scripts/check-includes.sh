#!/usr/bin/env bash
# The layout's arrows, checked: every #include "..." of gost's own code must point down the
# dependency order (docs/architecture.md), never back up. Prints each forbidden include as
# FILE:LINE: INCLUDE (RULE) and exits 1 when there is any; silent and 0 otherwise.
#   scripts/check-includes.sh [ROOT]      (default: the checkout this script lives in)
# CTest runs it on the tree and on tests/fixtures/bad-layout (which must fail).
set -euo pipefail

root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$root"

# The domains under actors/ (each reaches another only through gost/<domain>/protocol.hpp).
# actors/entities (durable entity types) counts as one for the others, and sits below them:
#   actors/core <- actors/entities <- actors/<domain> <- runtime
domains=()
for d in actors/*/; do
  d=${d%/}; d=${d#actors/}
  [[ $d == core ]] || domains+=("$d")
done

# Headers a domain offers other domains besides its protocol.hpp: the stage API (stages of
# other domains, as actors/photos, are written against it), the image service's request
# path (cache first, a miss queued), which stages call without waiting, and the durable
# entity type (tasks are entity types).
public_headers=(gost/offers/stage.hpp gost/offers/typed_stage.hpp gost/images/ask.hpp
  gost/entities/entity_type.hpp)
is_public() {
  local h
  for h in "${public_headers[@]}"; do [[ $1 == "$h" ]] && return 0; done
  return 1
}

violations=0
report() { # file line include rule
  echo "$1:$2: $3 ($4)"
  violations=$((violations + 1))
}

# The runtime folder an include of runtime/ code names ("cluster/router.hpp" -> cluster).
runtime_folder() { [[ $1 == */* ]] && echo "${1%%/*}" || echo ""; }

check_file() {
  local f=$1 n=0 line inc
  while IFS= read -r line; do
    n=$((n + 1))
    [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]+\"([^\"]+)\" ]] || continue
    inc=${BASH_REMATCH[1]}
    case $f in
      config/*)
        [[ $inc == gost/* && $inc != gost/config/* ]] \
          && report "$f" "$n" "$inc" "config/ depends on nothing of gost's"
        ;;
      persistence/*)
        [[ $inc =~ ^gost/(config|core|runtime)/ ]] \
          && report "$f" "$n" "$inc" "persistence/ sits below actors/ and runtime/"
        for d in "${domains[@]}"; do
          [[ $inc == gost/$d/* ]] && report "$f" "$n" "$inc" "persistence/ sits below actors/"
        done
        ;;
      actors/core/*)
        [[ $inc =~ ^gost/(config|runtime)/ ]] \
          && report "$f" "$n" "$inc" "the kit sits below runtime/"
        [[ $inc =~ ^gost/persistence/[a-z_]+/ && $inc != gost/persistence/entities/* ]] \
          && report "$f" "$n" "$inc" "the kit uses no domain's tables (only its own: entities/)"
        [[ $inc =~ ^gost/v1/ ]] \
          && report "$f" "$n" "$inc" "the kit knows no domain's messages"
        for d in "${domains[@]}"; do
          [[ $inc == gost/$d/* ]] && report "$f" "$n" "$inc" "the kit knows no domain"
        done
        ;;
      actors/entities/*)
        [[ $inc =~ ^gost/(config|runtime)/ ]] \
          && report "$f" "$n" "$inc" "actors/ sits below runtime/"
        for d in "${domains[@]}"; do
          [[ $d == entities ]] && continue
          [[ $inc == gost/$d/* ]] && report "$f" "$n" "$inc" "durable entities sit below the domains (core <- entities <- $d)"
        done
        ;;
      actors/*)
        local mine=${f#actors/}; mine=${mine%%/*}
        [[ $inc =~ ^gost/(config|runtime)/ ]] \
          && report "$f" "$n" "$inc" "actors/ sits below runtime/"
        for d in "${domains[@]}"; do
          [[ $d == "$mine" ]] && continue
          [[ $inc == gost/$d/* && $inc != gost/$d/protocol.hpp ]] && ! is_public "$inc" \
            && report "$f" "$n" "$inc" "domain $mine reaches $d only through gost/$d/protocol.hpp (or a header in public_headers)"
        done
        ;;
      runtime/*)
        local from=${f#runtime/}; from=${from%%/*}
        local to; to=$(runtime_folder "$inc")
        case "$from:$to" in
          rpc:cluster|rpc:api|rpc:kafka|rpc:console|rpc:node)
            report "$f" "$n" "$inc" "runtime/rpc includes no other runtime folder" ;;
          cluster:api|cluster:kafka|cluster:console|cluster:node)
            report "$f" "$n" "$inc" "runtime/cluster includes only rpc/" ;;
          api:kafka|api:console|api:node|kafka:api|kafka:console|kafka:node|console:kafka|console:node)
            report "$f" "$n" "$inc" "runtime/$from may include only rpc/, cluster/$([[ $from == console ]] && echo ' and api/')" ;;
        esac
        ;;
    esac
    true # a rule that did not match is not a failure (set -e)
  done <"$f"
  return 0
}

while IFS= read -r f; do
  check_file "$f"
done < <(find config persistence actors runtime -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' \) 2>/dev/null | sort)

if [[ $violations -gt 0 ]]; then
  echo "check-includes: $violations include(s) point against the layout's arrows (docs/architecture.md)" >&2
  exit 1
fi
