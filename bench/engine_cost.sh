#!/usr/bin/env bash
# What an engine change costs: the same plans verified by two builds, one
# after the other, in process and cold (`verify --no-daemon --no-cache`),
# printed as one Markdown table (verdict, stages, CPU and wall seconds, peak
# memory). Each plan is written by the *after* build's planner and checked to
# be byte-identical to the before build's, so both verify the same file.
#
#   BEFORE=/path/to/old/build/shardproof bench/engine_cost.sh
#   BEFORE=... AFTER=... RUNS=3 PLANS="llama3-8b:--layers 2 --dp 2 --tp 2" bench/engine_cost.sh
#
# Default plans: issue 20's llama3-8b benchmark (2 and 4 layers, dp2 tp2 pp2
# mb2) and frontier plans in the compact form (mlp at 8,192 GPUs, llama3-405b
# at 16 layers on its 8,192-GPU mesh). RUNS runs each (default 1), alternating
# the builds; the table shows the run with the least CPU time.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/bench/lib.sh"
after="${AFTER:-$root/build/shardproof}"
before="${BEFORE:?set BEFORE to the shardproof binary to compare against}"
runs="${RUNS:-1}"
for b in "$before" "$after"; do
  [[ -x "$b" ]] || { echo "engine_cost: no executable $b" >&2; exit 2; }
done

default_plans="llama3-8b:--layers 2 --dp 2 --tp 2 --pp 2 --microbatches 2
llama3-8b:--layers 4 --dp 2 --tp 2 --pp 2 --microbatches 2
mlp:--layers 16 --hidden 64 --dp 64 --tp 8 --pp 16 --microbatches 16 --batch 1024 --compact
llama3-405b:--layers 16 --dp 64 --tp 8 --pp 16 --microbatches 16 --compact"
plans="${PLANS:-$default_plans}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# verify BIN PLAN OUT: one cold run; prints "verdict stages cpu wall peak_mib".
verify() {
  local t0 t1
  t0="$(now)"
  /usr/bin/time -f "%U %S %M" -o "$work/time" "$1" verify "$2" --no-daemon --no-cache \
    --format json >"$3" 2>/dev/null || true
  t1="$(now)"
  read -r user sys peak <"$work/time" || { user=0 sys=0 peak=0; }
  echo "$(field "$3" verdict) $(field "$3" stats.stages) $(awk -v u="$user" -v s="$sys" \
    'BEGIN { printf "%.1f", u + s }') $(elapsed "$t0" "$t1") $((peak / 1024))"
}

echo "| plan | build | verdict | stages | CPU s | wall s | peak MiB |"
echo "|---|---|---|---|---|---|---|"
i=0
while IFS= read -r spec; do
  [[ -z "$spec" ]] && continue
  model="${spec%%:*}" options="${spec#*:}"
  i=$((i + 1))
  # shellcheck disable=SC2086
  "$after" plan "$model" $options -o "$work/plan$i.json" >/dev/null 2>&1 ||
    { echo "| $model $options | - | planner refused | | | | |"; continue; }
  # shellcheck disable=SC2086
  if "$before" plan "$model" $options -o "$work/before$i.json" >/dev/null 2>&1 &&
    ! cmp -s "$work/plan$i.json" "$work/before$i.json"; then
    echo "| $model $options | - | the two planners write different plans: compared on the after build's | | | | |"
  fi
  declare -A best=()
  for ((r = 0; r < runs; r++)); do
    for which in before after; do
      bin="$before"
      [[ "$which" == after ]] && bin="$after"
      row="$(verify "$bin" "$work/plan$i.json" "$work/report.json")"
      cpu="$(echo "$row" | awk '{ print $3 }')"
      prev="${best[$which]:-}"
      if [[ -z "$prev" ]] || awk -v a="$cpu" -v b="$(echo "$prev" | awk '{ print $3 }')" \
        'BEGIN { exit !(a < b) }'; then
        best[$which]="$row"
      fi
    done
  done
  for which in before after; do
    read -r verdict stages cpu wall peak <<<"${best[$which]}"
    echo "| $model $options | $which | $verdict | $stages | $cpu | $wall | $peak |"
  done
  b_cpu="$(echo "${best[before]}" | awk '{ print $3 }')"
  a_cpu="$(echo "${best[after]}" | awk '{ print $3 }')"
  awk -v b="$b_cpu" -v a="$a_cpu" -v p="$model $options" \
    'BEGIN { if (b > 0) printf "| %s | after / before | | | %+.0f %% | | |\n", p, (a / b - 1) * 100 }'
  unset best
done <<<"$plans"
