#!/usr/bin/env bash
# Benchmark: generates MLP plans as layers, dp, tp and micro-batches grow,
# verifies each one in process without the cache (the engine's own cost;
# bench/cache.sh measures the daemon and its cache) and prints a Markdown
# table of size, work, wall time and peak memory.
#
#   bench/run.sh                       # full grid (54 plans)
#   bench/run.sh --quick               # a small grid, for a smoke test
#   LAYERS="2 4" DP="2" TP="1 2" MB="1" bench/run.sh   # any grid
#   OPTIMIZER=adam HIDDEN=16 BATCH=16 bench/run.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SHARDPROOF_BUILD_DIR:-$root/build}"
cli="$build_dir/shardproof"

if [[ "${1:-}" == "--quick" ]]; then
  : "${LAYERS:=2 4}" "${DP:=1 2}" "${TP:=1 2}" "${MB:=1 2}"
fi
LAYERS="${LAYERS:-2 4 8}"
DP="${DP:-1 2 4}"
TP="${TP:-1 2 4}"
MB="${MB:-1 2}"
HIDDEN="${HIDDEN:-8}"
BATCH="${BATCH:-8}"
OPTIMIZER="${OPTIMIZER:-sgd}"
JOBS="${JOBS:-0}"

# Build if needed (setup on a fresh machine, else an incremental build).
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  "$root/scripts/setup.sh" >&2
else
  cmake --build "$build_dir" -j "${SHARDPROOF_JOBS:-2}" >&2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Peak RSS in KiB of the verify process: GNU time (setup.sh installs the
# `time` package); without it the column says n/a.
have_gnu_time=0
[[ -x /usr/bin/time ]] && /usr/bin/time -f %M true >/dev/null 2>&1 && have_gnu_time=1

# Reads one field from the report JSON; jq or python3 when present, else a
# pattern match that works because the CLI prints "key": value on one line.
json_field() {  # file, jq path (e.g. .stats.stages), plain key
  if command -v jq >/dev/null; then
    jq -r "$2 // \"?\"" "$1"
  elif command -v python3 >/dev/null; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for k in sys.argv[2].strip(".").split("."): d=d.get(k, "?") if isinstance(d, dict) else "?"
print(d)' "$1" "$2"
  else
    grep -m1 -o "\"$3\": *[^,}]*" "$1" | sed 's/^[^:]*: *//; s/"//g' || echo "?"
  fi
}

echo "| plan | ops (logical/parallel) | stages | solved | seconds | peak MiB | verdict |"
echo "|---|---|---|---|---|---|---|"
for layers in $LAYERS; do
  for dp in $DP; do
    for tp in $TP; do
      for mb in $MB; do
        name="mlp L$layers dp$dp tp$tp mb$mb"
        plan="$work/plan.json"
        if ! "$cli" plan mlp --layers "$layers" --hidden "$HIDDEN" --batch "$BATCH" \
          --dp "$dp" --tp "$tp" --microbatches "$mb" --optimizer "$OPTIMIZER" \
          -o "$plan" 2>"$work/plan.err"; then
          echo "| $name | - | - | - | - | - | skipped: $(head -c 80 "$work/plan.err" | tr '\n|' '  ') |"
          continue
        fi
        start=$(date +%s.%N)
        rc=0
        if ((have_gnu_time)); then
          /usr/bin/time -f %M -o "$work/rss" "$cli" verify --no-cache --quiet --format json \
            --jobs "$JOBS" "$plan" >"$work/report.json" 2>"$work/verify.err" || rc=$?
          kib=$(tail -n1 "$work/rss")
        else
          "$cli" verify --no-cache --quiet --format json --jobs "$JOBS" "$plan" \
            >"$work/report.json" 2>"$work/verify.err" || rc=$?
          kib=""
        fi
        end=$(date +%s.%N)
        secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
        mib=$([[ -n "$kib" && "$kib" =~ ^[0-9]+$ ]] && awk -v k="$kib" 'BEGIN { printf "%.1f", k / 1024 }' || echo "n/a")
        if [[ -s "$work/report.json" ]]; then
          lops=$(json_field "$work/report.json" .stats.logical_ops logical_ops)
          pops=$(json_field "$work/report.json" .stats.parallel_ops parallel_ops)
          stages=$(json_field "$work/report.json" .stats.stages stages)
          solved=$(json_field "$work/report.json" .stats.solved solved)
          verdict=$(json_field "$work/report.json" .verdict verdict)
        else
          lops="?" pops="?" stages="?" solved="?" verdict="crashed (exit $rc)"
        fi
        echo "| $name | $lops/$pops | $stages | $solved | $secs | $mib | $verdict |"
      done
    done
  done
done
