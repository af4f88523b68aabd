#!/usr/bin/env bash
# Verdicts at the families' published shapes (issue 20's completeness
# target: 0 unknown on the correct plans and the bug catalogues). Each plan
# is generated at the model's own sizes with few layers, verified cold (in
# process, no cache), and printed as one row: plan, verdict, verify seconds,
# and for an unknown the distinct reasons (numbers folded to N, with counts).
# A bug row also says whether a finding names `meta.bug_first_tensor`.
#
#   bench/published.sh                      # correct plans, then a sample of each catalogue
#   ALL_BUGS=1 CORRECT=0 FAMILIES=llama3-8b bench/published.sh   # every bug of llama3-8b
#   CASES=$'llama3-8b|--layers 2 --tp 16|\nllama3-8b|--layers 2 --tp 16 --sp|sp-allgather-dim' \
#     bench/published.sh                    # model|options|bug, one a line
#   SHARDPROOF_BIN=/other/build/shardproof bench/published.sh   # another build (before/after)
#
# JOBS plans at a time (default 1: timings on a shared 2-core machine);
# TIMEOUT seconds per verify (default 900, then "timeout").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cli="${SHARDPROOF_BIN:-${SHARDPROOF_BUILD_DIR:-$root/build}/shardproof}"
JOBS="${JOBS:-1}"
TIMEOUT="${TIMEOUT:-900}"
FAMILIES="${FAMILIES:-llama3-8b llama3-70b deepseek-v3 mlp}"
source "$root/bench/lib.sh"

# Correct plans: the parallelism kinds each family has, at its published
# sizes (llama3: seq 8192; deepseek-v3: seq 4096, its first MoE layer is
# layer 3, so 4 layers); then issue 20's own bug example.
correct_cases() {
  cat <<'EOF'
llama3-8b|--layers 2 --dp 2 --tp 2 --pp 2 --microbatches 2|
llama3-8b|--layers 2 --tp 16|
llama3-8b|--layers 2 --tp 8 --sp|
llama3-8b|--layers 2 --tp 16 --sp|
llama3-8b|--layers 2 --dp 2 --cp 2|
llama3-8b|--layers 2 --dp 2 --tp 2 --zero 1|
llama3-70b|--layers 1 --tp 8|
llama3-70b|--layers 1 --tp 8 --sp|
llama3-70b|--layers 2 --dp 2 --tp 2 --pp 2 --microbatches 2|
deepseek-v3|--layers 4 --dp 2 --tp 2 --pp 2 --ep 2 --microbatches 2|
deepseek-v3|--layers 4 --dp 2 --ep 2 --tp 2 --sp|
mlp|--layers 2 --dp 2 --tp 2 --pp 2 --microbatches 2|
llama3-8b|--layers 2 --tp 16 --sp|sp-allgather-dim
EOF
}

# Base configurations for bugs, smallest first: the first one a bug
# applies to is used (as bench/catalogue.sh does, at published sizes).
bases_for() {
  case "$1" in
    mlp) printf '%s\n' "--layers 2 --dp 2 --tp 2" "--layers 2 --pp 2 --microbatches 2" \
      "--layers 2 --dp 2 --tp 2 --pp 2 --microbatches 2" ;;
    deepseek-*) printf '%s\n' "--layers 4 --tp 2" "--layers 4 --dp 2 --ep 2 --batch 4" \
      "--layers 4 --dp 2" "--layers 4 --dp 2 --ep 2 --zero 1" \
      "--layers 4 --pp 2 --microbatches 2" "--layers 4 --pp 2 --tie-embeddings" \
      "--layers 4 --tp 4" "--layers 4 --pp 2" "--layers 4 --tp 2 --bias" \
      "--layers 4 --tp 2 --reshard-residual" "--layers 4 --dp 2 --ep 2 --tp 2" \
      "--layers 4 --dp 2 --ep 2 --tp 2 --clip" "--layers 4 --pp 2 --clip" \
      "--layers 4 --dp 2 --ep 2 --microbatches 2" \
      "--layers 4 --dp 2 --ep 2 --pp 2 --tie-embeddings --zero 1" \
      "--layers 4 --pp 2 --microbatches 2 --schedule" "--layers 4 --dp 2 --ep 2 --zero 3" \
      "--layers 4 --tp 2 --sp" "--layers 4 --dp 2 --cp 2" "--layers 4 --dp 2 --tp 2 --sp" \
      "--layers 4 --dp 4 --ep 2" "--layers 4 --dp 4 --ep 2 --zero 1" \
      "--layers 4 --pp 2 --vpp 2 --microbatches 2" \
      "--layers 4 --pp 2 --vpp 2 --microbatches 2 --schedule" ;;
    *) printf '%s\n' "--layers 2 --dp 2 --tp 2" "--layers 2 --dp 2 --tp 2 --sp" \
      "--layers 2 --dp 2 --cp 2" "--layers 2 --dp 2 --zero 1" "--layers 2 --pp 2 --microbatches 2" \
      "--layers 2 --pp 2 --tie-embeddings" "--layers 2 --tp 4" "--layers 4 --pp 2" \
      "--layers 2 --tp 2 --bias" "--layers 2 --tp 2 --reshard-residual" \
      "--layers 2 --dp 2 --tp 2 --clip" "--layers 2 --pp 2 --clip" \
      "--layers 2 --dp 2 --microbatches 2" "--layers 2 --dp 2 --pp 2 --tie-embeddings --zero 1" \
      "--layers 2 --tp 2 --dropout" "--layers 2 --tp 2 --dropout --sp" \
      "--layers 2 --pp 2 --microbatches 2 --schedule" "--layers 2 --dp 2 --zero 3" \
      "--layers 2 --tp 16" "--layers 2 --tp 16 --sp" \
      "--layers 4 --pp 2 --vpp 2 --microbatches 2" \
      "--layers 4 --pp 2 --vpp 2 --microbatches 2 --schedule" ;;
  esac
}

# A sample of each catalogue (ALL_BUGS=1: all of it): one bug per kind of
# fault (collective, scale, shard offset, ordering, pipeline, expert).
sample_bugs() {
  case "$1" in
    mlp) echo "row-parallel-no-allreduce allreduce-mean-not-sum dp-grad-not-synced pp-send-wrong-tensor" ;;
    deepseek-*) echo "all-to-all-wrong-order row-parallel-no-allreduce vocab-range-off-by-one dp-grad-not-synced sp-allgather-dim" ;;
    *) echo "row-parallel-no-allreduce sp-allgather-dim sp-allgather-order fused-gate-up-contiguous kv-heads-not-replicated cp-kv-grad-not-reduced vocab-range-off-by-one ce-max-not-reduced dp-grad-mean-not-sum zero-allgather-order" ;;
  esac
}

bug_cases() {
  local family bug base listed
  for family in $FAMILIES; do
    listed=" $("$cli" plan "$family" --list-bugs | cut -d' ' -f1 | tr '\n' ' ') "
    if [[ "${ALL_BUGS:-0}" == 1 ]]; then bugs="$listed"; else bugs="$(sample_bugs "$family")"; fi
    for bug in $bugs; do
      [[ "$listed" == *" $bug "* ]] || continue
      while IFS= read -r base; do
        if "$cli" plan "$family" $base --bug "$bug" -o /dev/null 2>/dev/null; then
          echo "$family|$base|$bug"
          break
        fi
      done < <(bases_for "$family")
    done
  done
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# One case: its row into $work/rows/<n>.
run_case() {  # n, model, options, bug
  local n="$1" model="$2" opts="$3" bug="$4" plan="$work/$1.json" report="$work/$1.report"
  local t0 t1 rc=0 verdict extra label
  label="$model $opts${bug:+ --bug $bug}"
  if ! "$cli" plan "$model" $opts ${bug:+--bug "$bug"} -o "$plan" 2>"$work/$n.err"; then
    echo "| $label | planner refused | - | $(head -c 200 "$work/$n.err" | tr '\n|' '  ') |" \
      >"$work/rows/$n"
    return
  fi
  t0=$(now)
  timeout "$TIMEOUT" nice -n 10 "$cli" verify --quiet --format json --no-cache "$plan" \
    >"$report" 2>/dev/null || rc=$?
  t1=$(now)
  if ((rc == 124)); then
    verdict=timeout
    extra=""
  else
    verdict=$(field "$report" verdict)
    extra=$(python3 - "$report" "$plan" "$bug" <<'EOF'
import collections, json, re, sys
r = json.load(open(sys.argv[1]))
plan = json.load(open(sys.argv[2]))
bug = sys.argv[3]
out = []
if bug:
    expected = plan.get("meta", {}).get("bug_first_tensor", "")
    named = any(f.get("tensor") == expected for f in r.get("findings", []) if f.get("kind") != "unknown")
    out.append(("found at " if named else "not at ") + expected)
if r.get("verdict") == "unknown":
    reasons = collections.Counter()
    for f in r.get("findings", []):
        if f.get("kind") != "unknown":
            continue
        tensor = re.sub(r"\d+", "N", f.get("tensor", ""))
        reasons[tensor + ": " + re.sub(r"\d+", "N", f.get("message", ""))[:240]] += 1
    out += [f"{n}x {why}" for why, n in reasons.most_common(4)]
print("; ".join(out).replace("|", "/"))
EOF
)
  fi
  echo "| $label | $verdict | $(elapsed "$t0" "$t1") | $extra |" >"$work/rows/$n"
}

if [[ -n "${CASES:-}" ]]; then
  cases="$CASES"
else
  cases="$(bug_cases)"
  [[ "${CORRECT:-1}" == 1 ]] && cases="$(correct_cases)"$'\n'"$cases"
fi

mkdir -p "$work/rows"
echo "| plan | verdict | verify s | finding / unknown reasons |"
echo "|---|---|---|---|"
start=$(now)
n=0
while IFS='|' read -r model opts bug; do
  [[ -z "$model" ]] && continue
  n=$((n + 1))
  while (($(jobs -rp | wc -l) >= JOBS)); do wait -n; done
  run_case "$(printf %03d "$n")" "$model" "$opts" "$bug" &
  if ((JOBS == 1)); then wait; cat "$work/rows/$(printf %03d "$n")"; fi
done <<<"$cases"
wait
((JOBS == 1)) || cat "$work/rows/"*
echo
rows=$(cat "$work/rows/"* | wc -l)
unknown=$(cat "$work/rows/"* | grep -c '| unknown |' || true)
echo "plans: $rows, unknown: $unknown, wall $(elapsed "$start" "$(now)") s"
