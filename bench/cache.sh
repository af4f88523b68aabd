#!/usr/bin/env bash
# Benchmark of the daemon and its cache on one large plan, all through the
# daemon, in a fresh cache and runtime directory (never the user's): cold
# (empty cache), warm (the same plan again), the same stages under another
# plan text (stage cache only), and one layer changed: in place (the daemon
# re-reads and re-decides only what the edit reached) and as a new file
# (stage cache only). Prints a Markdown
# table; every row is the best of several runs (the machine may be busy).
#
#   bench/cache.sh                                   # mlp, 32 layers, dp2 tp2 pp2 mb2
#   MODEL=llama3-8b PLAN_ARGS="--tp 2 --dp 2" CHANGE_FROM=silu CHANGE_TO="gelu tanh sigmoid" bench/cache.sh
#
# MODEL, PLAN_ARGS: what `shardproof plan` generates.
# The one-layer change: in both graphs, every op named like layer L (an
# "l<L>." name component) whose op is CHANGE_FROM becomes the k-th op of
# CHANGE_TO; three variants (k = 0, 1, 2; L = CHANGE_LAYER + k), each with
# another op, since identical layers share their stages.
# RUNS: warm runs. JOBS: the daemon's solver threads (0: one per core).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SHARDPROOF_BUILD_DIR:-$root/build}"
cli="$build_dir/shardproof"

MODEL="${MODEL:-mlp}"
PLAN_ARGS="${PLAN_ARGS:---layers 32 --dp 2 --tp 2 --pp 2 --microbatches 2}"
CHANGE_LAYER="${CHANGE_LAYER:-5}"
CHANGE_FROM="${CHANGE_FROM:-gelu}"
CHANGE_TO="${CHANGE_TO:-silu tanh sigmoid}"
RUNS="${RUNS:-9}"
JOBS="${JOBS:-0}"

if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  "$root/scripts/setup.sh" >&2
else
  cmake --build "$build_dir" -j "${SHARDPROOF_JOBS:-2}" >&2
fi
command -v python3 >/dev/null || { echo "bench/cache.sh needs python3" >&2; exit 1; }

work="$(mktemp -d /tmp/sp-bench-XXXXXX)"  # short: the socket path must fit
export SHARDPROOF_CACHE_DIR="$work/cache" XDG_RUNTIME_DIR="$work/run"
cleanup() {
  "$cli" daemon stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# shellcheck disable=SC2086  # PLAN_ARGS is a list of options
"$cli" plan "$MODEL" $PLAN_ARGS -o "$work/plan.json"

# Three variants of each: the same stages under another plan text (only
# "name" differs), and one layer changed.
python3 - "$work" "$CHANGE_LAYER" "$CHANGE_FROM" "$CHANGE_TO" <<'PY'
import json, re, sys
work, layer, old, news = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split()
if len(news) < 3:
    sys.exit("CHANGE_TO needs three ops (one per variant)")
def change_layer(plan, k):
    named = re.compile(r"(^|\.)l" + str(layer + k) + r"\.")
    edits = 0
    for graph in ("logical", "parallel"):
        for op in plan[graph]["ops"]:
            if op.get("op") == old and named.search(op.get("name", "")):
                op["op"] = news[k]
                edits += 1
    if edits == 0:
        sys.exit(f"no {old} op in layer {layer + k}: set CHANGE_LAYER, CHANGE_FROM, CHANGE_TO")
# A name of its own: no tuned text is any other variant's (whose report the
# cache would hold).
tuned = json.load(open(f"{work}/plan.json"))
tuned["name"] = tuned.get("name", "") + " (tuned)"
json.dump(tuned, open(f"{work}/tuned-base.json", "w"), indent=1)
for k in range(3):
    plan = json.load(open(f"{work}/plan.json"))
    plan["name"] = plan.get("name", "") + f" (renamed {k})"
    json.dump(plan, open(f"{work}/renamed{k}.json", "w"), indent=1)
    plan = json.load(open(f"{work}/plan.json"))
    change_layer(plan, k)
    json.dump(plan, open(f"{work}/changed{k}.json", "w"), indent=1)
    change_layer(tuned, k)  # edits accumulate: each one layer away from the last
    json.dump(tuned, open(f"{work}/tuned{k}.json", "w"), indent=1)
PY

# Wall seconds of one command (bash's clock: no process of its own).
seconds() {
  local start=$EPOCHREALTIME
  "$@" >"$work/out.json" 2>"$work/err.txt" || [[ $? -le 3 ]]
  awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.4f", b - a }'
}
verify() { seconds "$cli" verify --quiet --format json "$@"; }
# The last report's stats: "distinct | solved | cached", or one of them.
stats() {
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["stats"]
keys = sys.argv[2:] or ["unique_stages", "solved", "cached"]
print(" | ".join(str(s[k]) for k in keys))' "$work/out.json" "$@"
}
best() { printf '%s\n' "$@" | sort -n | head -1; }
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { awk -v c="$1" -v t="$2" 'BEGIN { printf (t > 0 ? "%.1fx" : "-"), c / t }'; }

daemon_args=()
[[ "$JOBS" != 0 ]] && daemon_args=(--jobs "$JOBS")
start_s=$(seconds "$cli" daemon start "${daemon_args[@]}")

cold=()  # an empty cache and a new daemon each time (it remembers stage keys)
for _ in 1 2 3; do
  "$cli" daemon stop >/dev/null
  "$cli" cache clear >/dev/null
  "$cli" daemon start "${daemon_args[@]}" >/dev/null
  cold+=("$(verify "$work/plan.json")")
done
cold_stats=$(stats)
stages=$(stats stages)
warm=()
for _ in $(seq "$RUNS"); do warm+=("$(verify "$work/plan.json")"); done
warm_stats=$(stats)
renamed=()
for k in 0 1 2; do renamed+=("$(verify "$work/renamed$k.json")"); done
renamed_stats=$(stats)
changed=()  # each under a path of its own (the daemon compares it with the last text)
for k in 0 1 2; do changed+=("$(verify "$work/changed$k.json")"); done
changed_stats=$(stats)
# One plan path edited in place, one layer at a time: the daemon re-reads the
# edited ops only and carries the other stages over (stats.reused).
cp "$work/tuned-base.json" "$work/tuned.json"
verify "$work/tuned.json" >/dev/null
edited=()
for k in 0 1 2; do
  cp "$work/tuned$k.json" "$work/tuned.json"
  edited+=("$(verify "$work/tuned.json")")
done
edited_stats=$(stats)
edited_reused=$(stats reused)
local_runs=()
for _ in 1 2 3; do local_runs+=("$(verify --no-cache "$work/plan.json")"); done
local_stats=$(stats)

cold_best=$(best "${cold[@]}")
row() {  # name, seconds, stats
  printf '| %s | %s | %s | %s |\n' "$1" "$2" "$(ratio "$cold_best" "$2")" "$3"
}
echo "plan: $MODEL $PLAN_ARGS ($stages stages); daemon start ${start_s} s;" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| run | seconds | cold / run | distinct | solved | cached |"
echo "|---|---|---|---|---|---|"
row "cold, empty cache (best of 3)" "$cold_best" "$cold_stats"
row "warm, same plan (best of $RUNS)" "$(best "${warm[@]}")" "$warm_stats"
row "warm, same plan (median of $RUNS)" "$(median "${warm[@]}")" "$warm_stats"
row "same stages, another plan text (best of 3)" "$(best "${renamed[@]}")" "$renamed_stats"
row "one layer $CHANGE_FROM -> ${CHANGE_TO// //}, edited in place (best of 3 layers; $edited_reused stages reused)" \
  "$(best "${edited[@]}")" "$edited_stats"
row "one layer $CHANGE_FROM -> ${CHANGE_TO// //}, edited in place (median of 3 layers)" \
  "$(median "${edited[@]}")" "$edited_stats"
row "one layer $CHANGE_FROM -> ${CHANGE_TO// //}, edited in place (worst of 3 layers)" \
  "$(printf '%s\n' "${edited[@]}" | sort -n | tail -1)" "$edited_stats"
row "one layer $CHANGE_FROM -> ${CHANGE_TO// //}, as a new file (best of 3 layers)" \
  "$(best "${changed[@]}")" "$changed_stats"
row "in process, no cache (best of 3; reference)" "$(best "${local_runs[@]}")" "$local_stats"
