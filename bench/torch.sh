#!/usr/bin/env bash
# Capture benchmarks of the torch front end (docs/torch-harness.md): capture time and peak
# memory of the GPT block at dp=2,tp=2 and of a 32-layer GPT at dp=8,tp=8 (fake tensors:
# full sizes, no memory). Targets for the latter: < 60 s, < 2 GiB. Capture uses two processes
# (SHARDPROOF_CAPTURE_JOBS); "CPU s" is both processes' user + system time, which a shared
# machine does not inflate as it does the wall time.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${SHARDPROOF_PYTHON:-/usr/bin/python3}"
export PYTHONPATH="$here/frontends/torch${PYTHONPATH:+:$PYTHONPATH}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

run() {  # name, env, mesh
  local name="$1" envs="$2" mesh="$3"
  local t0 t1 rss cpu stats
  t0=$(date +%s.%N)
  env $envs /usr/bin/time -f "%M %U %S" -o "$out/rss" "$py" -m shardproof_torch capture \
    "$here/examples/torch/gpt/harness.py" --mesh "$mesh" -o "$out/plan.json" --stats \
    2> "$out/stats"
  t1=$(date +%s.%N)
  read -r rss user sys < <(tail -1 "$out/rss")
  cpu=$(echo "$user + $sys" | bc)
  stats=$(grep '^{' "$out/stats" | tail -1)
  printf '| %-28s | %-10s | %8.1f | %8.1f | %9.0f | %8s | %s |\n' "$name" "$mesh" \
    "$(echo "$t1 - $t0" | bc)" "$cpu" "$(echo "$rss / 1024" | bc)" \
    "$(du -k "$out/plan.json" | cut -f1)" "$stats"
}

printf '| %-28s | %-10s | %8s | %8s | %9s | %8s | %s |\n' case mesh "wall s" "CPU s" "peak MiB" "plan KiB" stats
printf '|%s|%s|%s|%s|%s|%s|%s|\n' ------------------------------ ------------ ---------- ---------- ----------- ---------- -----
run "GPT block, 1 layer (small)" "GPT_LAYERS=1" "dp=2,tp=2"
run "GPT, 32 layers, large sizes" "GPT_LAYERS=32 GPT_SIZE=large" "dp=8,tp=8"
