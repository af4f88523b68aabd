#!/usr/bin/env bash
# The whole bug catalogue, per family: every bug `--list-bugs` names is
# injected on the first base configuration it applies to, verified cold (in
# process, no cache), and counted as found when the verdict is
# not-equivalent and a finding names `meta.bug_first_tensor`. Prints one row
# per bug, then per family: bugs found / bugs listed and the wall time, and
# the total. Bugs run JOBS at a time (default 2: the 2-core target).
#
#   bench/catalogue.sh                         # mlp, llama3-tiny, moe-tiny
#   FAMILIES="llama3-8b deepseek-v3" DEPTH="--layers 4" bench/catalogue.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SHARDPROOF_BUILD_DIR:-$root/build}"
cli="$build_dir/shardproof"
FAMILIES="${FAMILIES:-mlp llama3-tiny moe-tiny}"
DEPTH="${DEPTH:-}"
JOBS="${JOBS:-2}"
source "$root/bench/lib.sh"

# Base configurations, smallest first (the candidates of the verify tests).
bases_for() {
  case "$1" in
    mlp) printf '%s\n' "--layers 4 --dp 2 --tp 2" "--layers 4 --pp 2 --microbatches 2" \
      "--layers 4 --dp 2 --tp 2 --pp 2 --microbatches 2" ;;
    moe-* | deepseek-*) printf '%s\n' "--layers 2 --tp 2" "--layers 2 --dp 2 --ep 2 --batch 4" \
      "--layers 2 --dp 2" "--layers 2 --dp 2 --ep 2 --zero 1" \
      "--layers 2 --pp 2 --microbatches 2" "--layers 2 --pp 2 --tie-embeddings" "--layers 2 --tp 4" \
      "--layers 4 --pp 2" "--layers 2 --tp 2 --bias" "--layers 2 --tp 2 --reshard-residual" \
      "--layers 2 --dp 2 --ep 2 --tp 2" "--layers 2 --dp 2 --ep 2 --tp 2 --clip" \
      "--layers 2 --pp 2 --clip" "--layers 2 --dp 2 --ep 2 --microbatches 2" \
      "--layers 2 --dp 2 --ep 2 --pp 2 --tie-embeddings --zero 1" \
      "--layers 2 --pp 2 --microbatches 2 --schedule" "--layers 2 --dp 2 --ep 2 --zero 3" \
      "--layers 2 --tp 2 --sp" "--layers 2 --dp 2 --cp 2" "--layers 2 --dp 2 --tp 2 --sp" \
      "--layers 2 --dp 4 --ep 2" "--layers 2 --dp 4 --ep 2 --zero 1" \
      "--layers 4 --pp 2 --vpp 2 --microbatches 2" \
      "--layers 4 --pp 2 --vpp 2 --microbatches 2 --schedule" \
      "--layers 2 --dp 2 --tp 2 --etp 1 --ep 2" "--layers 2 --dp 2 --tp 2 --etp 1 --ep 1" ;;
    *) printf '%s\n' "--layers 2 --dp 2 --tp 2" "--layers 2 --dp 2 --tp 2 --sp" \
      "--layers 2 --dp 2 --cp 2" "--layers 2 --dp 2 --zero 1" "--layers 2 --pp 2 --microbatches 2" \
      "--layers 2 --pp 2 --tie-embeddings" "--layers 2 --tp 4" "--layers 4 --pp 2" \
      "--layers 2 --tp 2 --bias" "--layers 2 --tp 2 --reshard-residual" \
      "--layers 2 --dp 2 --tp 2 --clip" "--layers 2 --pp 2 --clip" \
      "--layers 2 --dp 2 --microbatches 2" "--layers 2 --dp 2 --pp 2 --tie-embeddings --zero 1" \
      "--layers 2 --tp 2 --dropout" "--layers 2 --tp 2 --dropout --sp" \
      "--layers 2 --pp 2 --microbatches 2 --schedule" "--layers 2 --dp 2 --zero 3" \
      "--layers 4 --pp 2 --vpp 2 --microbatches 2" \
      "--layers 4 --pp 2 --vpp 2 --microbatches 2 --schedule" ;;
  esac
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
verify_flags=(--quiet --format json --no-cache)

# One bug: its row into $work/rows/<family>.<n>.
hunt() {  # family, n, bug
  local family="$1" n="$2" bug="$3" base opts expected t0 t1 verdict named out
  out="$work/rows/$family.$(printf %03d "$n")"
  while IFS= read -r base; do
    read -r -a opts <<<"$base $DEPTH"
    "$cli" plan "$family" "${opts[@]}" --bug "$bug" -o "$work/$family.$n.json" 2>/dev/null || continue
    expected=$(field "$work/$family.$n.json" meta.bug_first_tensor)
    t0=$(now)
    "$cli" verify "${verify_flags[@]}" "$work/$family.$n.json" >"$work/$family.$n.report" \
      2>/dev/null || true
    t1=$(now)
    verdict=$(field "$work/$family.$n.report" verdict)
    named=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))
print("yes" if any(f.get("tensor")==sys.argv[2] for f in r.get("findings",[])) else "no")' \
      "$work/$family.$n.report" "$expected" 2>/dev/null || echo no)
    echo "| $family | $bug | ${opts[*]} | $(elapsed "$t0" "$t1") | $verdict | $named ($expected) |" >"$out"
    return
  done < <(bases_for "$family")
  echo "| $family | $bug | (no base configuration applies) | - | - | no |" >"$out"
}

mkdir -p "$work/rows"
echo "| family | bug | configuration | verify s | verdict | finding at expected tensor |"
echo "|---|---|---|---|---|---|"
summary=()
total_start=$(now)
for family in $FAMILIES; do
  start=$(now)
  n=0
  for bug in $("$cli" plan "$family" --list-bugs | cut -d' ' -f1); do
    n=$((n + 1))
    while (($(jobs -rp | wc -l) >= JOBS)); do wait -n; done
    hunt "$family" "$n" "$bug" &
  done
  wait
  cat "$work/rows/$family".*
  found=$(cat "$work/rows/$family".* | grep -c '| not-equivalent | yes' || true)
  summary+=("| $family | $found / $n | $(elapsed "$start" "$(now)") |")
done
echo
echo "| family | bugs found / listed | wall s ($JOBS at a time) |"
echo "|---|---|---|"
printf '%s\n' "${summary[@]}"
echo
echo "whole catalogue: $(elapsed "$total_start" "$(now)") s"
