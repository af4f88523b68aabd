#!/usr/bin/env bash
# Frontier-scale plans in the compact form (shardproof-plan/1.1), verified
# per coordinate class without expansion. Two Markdown tables:
#
# 1. Each frontier plan: compact file size, op instances it denotes, stages
#    verified (at the corners of the classes) and distinct, corners explored,
#    pipeline-stage batches verified and how many took the result of an
#    identical one (batch_reuse.h), cold time (wall, and CPU: the machine
#    may be shared) split by phase (parse: reading and checking each batch's
#    expansion; cut: exploring corners and cutting; key; decide) and peak
#    memory in process without cache, the cold time on one core (--jobs 1)
#    and the speed-up of two, and cold and warm
#    time through a daemon in a fresh cache and runtime directory. The cold
#    run is per class (--classes); through the daemon a plan under 10^6 op
#    instances is expanded instead (the default). Runs are bounded by
#    LIMIT_S seconds and LIMIT_GIB GiB (the targets: 300 s, 4 GiB).
# 2. The scaling curves (mlp, and llama3-405b unless --quick): from a base plan, each of dp, tp, pp, micro-batches
#    and layers doubled in turn (verified per class with --classes even when
#    small, so every row is the same method).
#
#   bench/frontier.sh            # both tables
#   bench/frontier.sh --quick    # a smaller frontier plan and curve
#   PLANS="mlp:--layers 16 --hidden 64 --dp 64 --tp 8 --pp 16 --microbatches 16 --batch 1024" bench/frontier.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SHARDPROOF_BUILD_DIR:-$root/build}"
cli="$build_dir/shardproof"
quick=""
[[ "${1:-}" == "--quick" ]] && quick=1

if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  "$root/scripts/setup.sh" >&2
else
  cmake --build "$build_dir" -j "${SHARDPROOF_JOBS:-2}" >&2
fi

work="$(mktemp -d)"
mkdir -p "$work/run" && chmod 700 "$work/run"
export SHARDPROOF_CACHE_DIR="$work/cache" XDG_RUNTIME_DIR="$work/run"
cleanup() {
  "$cli" daemon stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# Llama3-405B's mesh (dp64 tp8 pp16, 16 micro-batches: 8,192 GPUs) and
# DeepSeek-V3's (dp32 tp8 pp8, 16 micro-batches: 2,048 GPUs). The mlp family
# carries them today; a transformer family is added when its planner writes
# the compact form (`shardproof plan MODEL --compact`).
if [[ -n "$quick" ]]; then
  default_plans="mlp:--layers 8 --hidden 64 --dp 32 --tp 8 --pp 8 --microbatches 16 --batch 1024"
else
  default_plans="mlp:--layers 16 --hidden 64 --dp 64 --tp 8 --pp 16 --microbatches 16 --batch 1024"
  default_plans+=$'\n'"mlp:--layers 8 --hidden 64 --dp 32 --tp 8 --pp 8 --microbatches 16 --batch 512"
  for spec in "llama3-405b:--dp 64 --tp 8 --pp 16 --microbatches 16" \
    "deepseek-v3:--dp 32 --ep 32 --tp 8 --pp 8 --microbatches 16"; do
    "$cli" plan "${spec%%:*}" ${spec#*:} --compact -o /dev/null >/dev/null 2>&1 &&
      default_plans+=$'\n'"$spec"
  done
fi
PLANS="${PLANS:-$default_plans}"

source "$root/bench/lib.sh"
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# The issue's targets bound every run: past them the row says so instead of
# the machine swapping for an hour.
LIMIT_S="${LIMIT_S:-300}"
LIMIT_GIB="${LIMIT_GIB:-4}"

# verify_cold PLAN [flags...]: sets cold_s, cpu_s, peak_mib; report in $work/report.json
verify_cold() {
  local plan="$1" t0 t1
  shift
  t0=$(now)
  (ulimit -v $((LIMIT_GIB * 1024 * 1024 + 512 * 1024)) &&
    SHARDPROOF_DEBUG_CLASSES=1 timeout "$LIMIT_S" /usr/bin/time -f "%M %U %S" -o "$work/rss" "$cli" verify --quiet --no-cache \
      --format json "$@" "$plan") >"$work/report.json" 2>"$work/err" || true
  [[ -s "$work/report.json" ]] ||
    echo "{\"verdict\": \"did not finish within ${LIMIT_S} s and ${LIMIT_GIB} GiB\"}" >"$work/report.json"
  [[ -s "$work/rss" ]] || echo 0 >"$work/rss"
  t1=$(now)
  cold_s=$(elapsed "$t0" "$t1")
  # GNU time writes "Command exited with non-zero status N" first on failure.
  peak_mib=$(tail -n1 "$work/rss" | awk '{ printf "%.0f", $1 / 1024 }')
  cpu_s=$(tail -n1 "$work/rss" | awk '{ printf "%.1f", $2 + $3 }')
  # "batches: 16, reused 13" (the class verifier's debug output) as "16 (13)"
  batches=$(sed -n 's/^batches: \([0-9]*\), reused \([0-9]*\)$/\1 (\2)/p' "$work/err" | tail -n1)
}

# phases R: parse/cut/key/decide seconds of report R (wall, summed over batches)
phases() {
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1])).get("stats", {}).get("phases", {})
print("/".join("%.1f" % p.get(k, 0) for k in ("parse", "cut", "key", "decide")))' "$1"
}

echo "| plan | file KB | op instances | stages verified | distinct | corners | batches (reused) | cold s | cold CPU s | cold s, 1 core (speed-up on 2) | parse/cut/key/decide s | peak MiB | daemon cold s | daemon warm s | verdict |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
while IFS= read -r line; do
  [[ -z "$line" ]] && continue
  model="${line%%:*}"
  read -r -a opts <<<"${line#*:}"
  "$cli" plan "$model" "${opts[@]}" --compact -o "$work/plan.json"
  kb=$(du -k "$work/plan.json" | cut -f1)
  # The same run on one core first (--jobs 1: no batch prepared beside the
  # one verified, one solver thread): what both cores save.
  verify_cold "$work/plan.json" --classes --jobs 1
  one_core_s=$cold_s
  verify_cold "$work/plan.json" --classes
  r="$work/report.json"
  speedup=$(awk -v a="$one_core_s" -v b="$cold_s" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
  rm -rf "$work/cache" "$work/rss"
  daemon_cold="-" daemon_warm="-"
  if [[ "$(field "$r" verdict)" == equivalent ]]; then  # only what finished in process
    "$cli" daemon start >/dev/null
    t0=$(now)
    "$cli" verify --quiet "$work/plan.json" >/dev/null 2>&1 || true
    t1=$(now)
    "$cli" verify --quiet "$work/plan.json" >/dev/null 2>&1 || true
    t2=$(now)
    "$cli" daemon stop >/dev/null
    daemon_cold=$(elapsed "$t0" "$t1") daemon_warm=$(elapsed "$t1" "$t2")
  fi
  echo "| $model ${opts[*]} | $kb | $(field "$r" stats.parallel_ops) | $(field "$r" stats.stages) |" \
    "$(field "$r" stats.unique_stages) | $(field "$r" stats.class_anchors) |" \
    "${batches:--} | $cold_s | $cpu_s | $one_core_s ($speedup) |" \
    "$(phases "$r") | $peak_mib | $daemon_cold | $daemon_warm | $(field "$r" verdict) |"
done <<<"$PLANS"

# The curves: each dimension doubled from a base, per class (--classes).
# curve MODEL OPTIONS...: one table.
curve() {
  local model="$1" dim i
  shift
  base=("$@")
  echo
  echo "Scaling from $model ${base[*]} (per class, --classes):"
  echo
  echo "| doubled | op instances | stages verified | corners | batches (reused) | cold s | cold CPU s | parse/cut/key/decide s | peak MiB | verdict |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for dim in none dp tp pp microbatches layers; do
    if [[ "$dim" == none ]]; then read -r -a opts <<<"${base[*]}"; else read -r -a opts <<<"$(double "$dim")"; fi
    [[ "$dim" == dp || "$dim" == microbatches ]] && {
      # keep each rank's batch slice: the global batch doubles with dp and mb
      for ((i = 0; i < ${#opts[@]}; i += 2)); do
        [[ "${opts[i]}" == --batch ]] && opts[i + 1]=$((opts[i + 1] * 2))
      done
    }
    if ! "$cli" plan "$model" "${opts[@]}" --compact -o "$work/curve.json" 2>"$work/err"; then
      echo "| $dim | skipped: $(head -c 120 "$work/err") | | | | | | | | |"
      continue
    fi
    verify_cold "$work/curve.json" --classes
    r="$work/report.json"
    echo "| $dim | $(field "$r" stats.parallel_ops) | $(field "$r" stats.stages) |" \
      "$(field "$r" stats.class_anchors) | ${batches:--} |" \
      "$cold_s | $cpu_s | $(phases "$r") | $peak_mib | $(field "$r" verdict) |"
  done
}
double() {  # name: prints the base with that option doubled
  local out=() i
  for ((i = 0; i < ${#base[@]}; i += 2)); do
    if [[ "${base[i]}" == "--$1" ]]; then out+=("${base[i]}" $((base[i + 1] * 2))); else out+=("${base[i]}" "${base[i + 1]}"); fi
  done
  echo "${out[@]}"
}
if [[ -n "$quick" ]]; then
  curve mlp --layers 4 --hidden 64 --dp 8 --tp 4 --pp 2 --microbatches 8 --batch 512
else
  curve mlp --layers 8 --hidden 64 --dp 16 --tp 4 --pp 4 --microbatches 8 --batch 1024
  # A transformer at Llama3-405B's sizes (the batch follows dp and mb).
  curve llama3-405b --layers 4 --dp 8 --tp 4 --pp 2 --microbatches 8
fi
