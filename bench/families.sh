#!/usr/bin/env bash
# Benchmark of the model families at their published shapes: generates each
# plan, verifies it cold (in process, no cache) and prints a Markdown table
# of plan size, stages, distinct stages, solver calls, verify time and peak
# memory; then injects every catalogued bug and reports the time to find
# each one (and the total).
#
#   bench/families.sh                  # llama3-8b full depth dp2 tp2 pp2 mb2, MoE plan, bug hunt
#   bench/families.sh --quick          # 4 layers instead of full depth
#   PLANS="llama3-8b:--dp 2 --tp 2 --pp 2 --microbatches 2" BUGS_MODEL=llama3-tiny bench/families.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SHARDPROOF_BUILD_DIR:-$root/build}"
cli="$build_dir/shardproof"
depth=""
[[ "${1:-}" == "--quick" ]] && depth="--layers 4"

# model:options, one plan per line. The first is the plan TrainVerify's bug
# study used (Llama-3 8B, dp2 tp2 pp2, 2 micro-batches).
default_plans="llama3-8b:$depth --dp 2 --tp 2 --pp 2 --microbatches 2"
"$cli" plan --list-models 2>/dev/null | grep -qx deepseek-v3 &&
  default_plans+=$'\n'"deepseek-v3:${depth:---layers 8} --dp 2 --tp 2 --pp 2 --ep 2 --microbatches 2"
PLANS="${PLANS:-$default_plans}"
BUGS_MODEL="${BUGS_MODEL:-llama3-8b}"
BUGS_DEPTH="${BUGS_DEPTH:---layers 4}"

if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  "$root/scripts/setup.sh" >&2
else
  cmake --build "$build_dir" -j "${SHARDPROOF_JOBS:-2}" >&2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Cold runs: no persistent cache when the CLI has one.
verify_flags=(--quiet --format json)
"$cli" verify --help 2>&1 | grep -q -- --no-cache && verify_flags+=(--no-cache)

source "$root/bench/lib.sh"

echo "| plan | ops (logical/parallel) | plan MB | generate s | stages | distinct | solved | verify s | peak MiB | verdict |"
echo "|---|---|---|---|---|---|---|---|---|---|"
while IFS= read -r line; do
  [[ -z "$line" ]] && continue
  model="${line%%:*}"
  read -r -a opts <<<"${line#*:}"
  t0=$(now)
  "$cli" plan "$model" "${opts[@]}" -o "$work/plan.json"
  t1=$(now)
  rc=0
  /usr/bin/time -f %M -o "$work/rss" "$cli" verify "${verify_flags[@]}" "$work/plan.json" \
    >"$work/report.json" 2>"$work/err" || rc=$?
  t2=$(now)
  mib=$(awk '{ printf "%.0f", $1 / 1024 }' "$work/rss" | tail -n1)
  mb=$(du -m "$work/plan.json" | cut -f1)
  r="$work/report.json"
  echo "| $model ${opts[*]} | $(field "$r" stats.logical_ops)/$(field "$r" stats.parallel_ops) |" \
    "$mb | $(elapsed "$t0" "$t1") | $(field "$r" stats.stages) | $(field "$r" stats.unique_stages) |" \
    "$(field "$r" stats.solved) | $(elapsed "$t1" "$t2") | $mib | $(field "$r" verdict) |"
done <<<"$PLANS"

# Bug hunt: every bug of each catalogue on the first base configuration it
# applies to (the same candidates as tests/llama_verify_test.cpp and
# tests/moe_verify_test.cpp); a bug both catalogues list is hunted once.
llama_bases=("--dp 2 --tp 2 --pp 2 --microbatches 2" "--dp 2 --tp 2 --pp 2 --microbatches 2 --sp"
  "--dp 2 --tp 2 --pp 2 --microbatches 2 --cp 2" "--dp 2 --tp 2 --pp 2 --microbatches 2 --zero 1"
  "--dp 2 --tp 2 --pp 2 --microbatches 2 --tie-embeddings" "--tp 4" "--pp 2"
  "--tp 2 --bias" "--tp 2 --reshard-residual" "--tp 16")
moe_bases=("--dp 2 --ep 2 --tp 2 --pp 2 --microbatches 2" "--dp 2 --tp 2 --pp 2 --microbatches 2"
  "--dp 2 --ep 2 --tp 2 --pp 2 --microbatches 2 --zero 1" "--tp 2 --pp 2"
  "--dp 2 --ep 2 --tp 2 --batch 4")
MOE_BUGS_MODEL="${MOE_BUGS_MODEL:-deepseek-v3}"
MOE_BUGS_DEPTH="${MOE_BUGS_DEPTH:---layers 4}"  # its first MoE layer is layer 3
echo
echo "| bug | configuration | seconds | verdict | finding at expected tensor |"
echo "|---|---|---|---|---|"
total_start=$(now)
found=0
count=0
hunted=" "
hunt() {  # model, depth, bases...
  local model="$1" depth="$2" bug base expected t0 t1 verdict named
  shift 2
  for bug in $("$cli" plan "$model" --list-bugs | cut -d' ' -f1); do
    [[ "$hunted" == *" $bug "* ]] && continue
    for base in "$@"; do
      read -r -a opts <<<"$depth $base"
      "$cli" plan "$model" "${opts[@]}" --bug "$bug" -o "$work/bug.json" 2>/dev/null || continue
      expected=$(field "$work/bug.json" meta.bug_first_tensor)
      t0=$(now)
      "$cli" verify "${verify_flags[@]}" "$work/bug.json" >"$work/report.json" 2>"$work/err" || true
      t1=$(now)
      verdict=$(field "$work/report.json" verdict)
      named=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))
print("yes" if any(f.get("tensor")==sys.argv[2] for f in r.get("findings",[])) else "no")' \
        "$work/report.json" "$expected")
      count=$((count + 1))
      hunted+="$bug "
      [[ "$verdict" == "not-equivalent" && "$named" == yes ]] && found=$((found + 1))
      echo "| $bug | $model ${opts[*]} | $(elapsed "$t0" "$t1") | $verdict | $named ($expected) |"
      break
    done
  done
}
hunt "$BUGS_MODEL" "$BUGS_DEPTH" "${llama_bases[@]}"
"$cli" plan --list-models 2>/dev/null | grep -qx "$MOE_BUGS_MODEL" &&
  hunt "$MOE_BUGS_MODEL" "$MOE_BUGS_DEPTH" "${moe_bases[@]}"
echo
echo "bugs found: $found of $count in $(elapsed "$total_start" "$(now)") s (plan generation" \
  "included in the total, not in the per-bug seconds)"
