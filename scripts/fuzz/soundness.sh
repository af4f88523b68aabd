#!/usr/bin/env bash
# The soundness fuzzer for SECONDS (docs/soundness.md, section 8): random
# small plans, with and without faults, whose verdicts are checked against
# exact full-size evaluation. Two processes (one per core), each with its own
# seed; a disagreeing plan is left in build/fuzz-soundness/.
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$root/build"
[[ -f "$build/build.ninja" ]] ||
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
nice cmake --build "$build" --target shardproof_soundness_fuzz >/dev/null
out="$build/fuzz-soundness"
mkdir -p "$out"
seed="${SOUNDNESS_FUZZ_SEED:-$(date +%s)}"
status=0
"$build/shardproof_soundness_fuzz" "$seconds" "$seed" "$out" & a=$!
"$build/shardproof_soundness_fuzz" "$seconds" "$((seed + 1))" "$out" & b=$!
wait "$a" || status=1
wait "$b" || status=1
exit "$status"
