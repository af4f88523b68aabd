#!/usr/bin/env bash
# Benchmark of the shared stage cache on Redis (docs/cache.md): two machines
# (two fresh local cache directories, two per-user keys) share one
# redis-server on a Unix socket, with one team key. Rows: machine A cold
# (everything solved, written back), A warm (its local cache), and machine B
# cold-with-remote (an empty local cache, the remote warm): once for the
# same plan text (its report comes whole) and once for the same stages
# under another text (stage by stage). Target: B's cold run < 2x A's warm.
# Runs in process (verify --no-daemon), so each row is one process's wall
# time; warm and remote rows are the best of RUNS (B gets a fresh local
# cache each run). Prints a Markdown table.
#
#   bench/shared_cache.sh
#   MODEL=mlp PLAN_ARGS="--layers 8 --dp 2 --tp 2" bench/shared_cache.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SHARDPROOF_BUILD_DIR:-$root/build}"
cli="$build_dir/shardproof"

MODEL="${MODEL:-llama3-8b}"
PLAN_ARGS="${PLAN_ARGS:---layers 4 --dp 2 --tp 2 --pp 2 --microbatches 2}"
RUNS="${RUNS:-5}"

command -v redis-server >/dev/null || { echo "bench/shared_cache.sh needs redis-server (scripts/setup.sh)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench/shared_cache.sh needs python3" >&2; exit 1; }
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  "$root/scripts/setup.sh" >&2
else
  cmake --build "$build_dir" -j "${SHARDPROOF_JOBS:-2}" >&2
fi

work="$(mktemp -d /tmp/sp-shared-XXXXXX)"
redis_pid=""
cleanup() {
  [[ -n "$redis_pid" ]] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

redis-server --port 0 --unixsocket "$work/redis.sock" --unixsocketperm 700 --save '' \
  --appendonly no --dir "$work" --logfile "$work/redis.log" &
redis_pid=$!
for _ in $(seq 100); do
  redis-cli -s "$work/redis.sock" ping >/dev/null 2>&1 && break
  sleep 0.05
done

umask 077
head -c 32 /dev/urandom >"$work/team.key"
export SHARDPROOF_REMOTE_CACHE="unix://$work/redis.sock" SHARDPROOF_CACHE_KEY_FILE="$work/team.key"
export XDG_RUNTIME_DIR="$work/run" XDG_STATE_HOME="$work/state"

# shellcheck disable=SC2086  # PLAN_ARGS is a list of options
"$cli" plan "$MODEL" $PLAN_ARGS -o "$work/plan.json"
# The same stages under texts no run has seen (only "name" differs): no
# stored plan report answers them, stage by stage only.
python3 - "$work" "$RUNS" <<'PY'
import json, sys
work, runs = sys.argv[1], int(sys.argv[2])
for machine in ("a", "b"):
    for i in range(1, runs + 1):
        plan = json.load(open(f"{work}/plan.json"))
        plan["name"] = plan.get("name", "") + f" (renamed {machine}{i})"
        json.dump(plan, open(f"{work}/renamed-{machine}{i}.json", "w"), indent=1)
PY

# Wall seconds of one verify on machine $1 (its cache directory).
verify() {
  local machine="$1" start=$EPOCHREALTIME
  shift
  SHARDPROOF_CACHE_DIR="$work/$machine" "$cli" verify --no-daemon --quiet --format json "$@" \
    >"$work/out.json" 2>"$work/err.txt" || [[ $? -le 3 ]]
  awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.4f", b - a }'
}
stats() {
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); s=r["stats"]
print(" | ".join([r["verdict"]] + [str(s[k]) for k in ("unique_stages", "solved", "cached")]))' "$work/out.json"
}
best() { printf '%s\n' "$@" | sort -n | head -1; }
ratio() { awk -v c="$1" -v t="$2" 'BEGIN { printf (t > 0 ? "%.2fx" : "-"), c / t }'; }
warnings() { grep -c warning "$work/err.txt" || true; }

cold="$(verify a "$work/plan.json")"; cold_stats="$(stats)"
warm=(); for _ in $(seq "$RUNS"); do warm+=("$(verify a "$work/plan.json")"); done; warm_stats="$(stats)"
warm_r=(); for i in $(seq "$RUNS"); do warm_r+=("$(verify a "$work/renamed-a$i.json")"); done; warm_r_stats="$(stats)"
remote=(); for i in $(seq "$RUNS"); do remote+=("$(verify "b$i" "$work/plan.json")"); done; remote_stats="$(stats)"
remote_r=(); for i in $(seq "$RUNS"); do remote_r+=("$(verify "c$i" "$work/renamed-b$i.json")"); done; remote_r_stats="$(stats)"
remote_warnings="$(warnings)"

w="$(best "${warm[@]}")"; wr="$(best "${warm_r[@]}")"
rb="$(best "${remote[@]}")"; rr="$(best "${remote_r[@]}")"
keys="$(redis-cli -s "$work/redis.sock" dbsize)"

echo "shardproof plan $MODEL $PLAN_ARGS; one redis-server on a Unix socket ($keys keys); $(nproc) cores; best of $RUNS"
echo
echo "| run | local cache | remote | seconds | verdict | distinct | solved | cached | vs warm local |"
echo "|---|---|---|---|---|---|---|---|---|"
echo "| machine A, cold | empty | empty | $cold | $cold_stats | $(ratio "$cold" "$w") |"
echo "| machine A, warm (same text) | warm | warm | $w | $warm_stats | 1.00x |"
echo "| machine A, warm (renamed: stages only) | warm | warm | $wr | $warm_r_stats | 1.00x |"
echo "| machine B, cold (same text) | empty | warm | $rb | $remote_stats | $(ratio "$rb" "$w") |"
echo "| machine B, cold (renamed: stages only) | empty | warm | $rr | $remote_r_stats | $(ratio "$rr" "$wr") |"
echo
echo "warnings on machine B's last run: $remote_warnings; its cache:"
SHARDPROOF_CACHE_DIR="$work/c$RUNS" "$cli" cache stats 2>/dev/null | sed 's/^/    /' || true
