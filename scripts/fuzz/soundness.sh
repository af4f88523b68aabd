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
log_a="$out/run-$seed.log" log_b="$out/run-$((seed + 1)).log"
"$build/shardproof_soundness_fuzz" "$seconds" "$seed" "$out" >"$log_a" & a=$!
"$build/shardproof_soundness_fuzz" "$seconds" "$((seed + 1))" "$out" >"$log_b" & b=$!
wait "$a" || status=1
wait "$b" || status=1
cat "$log_a" "$log_b"
# Both workers together: plans over the longer run's wall clock, and over
# the CPU seconds both used (each prints "N plans in T s (R/s; C per CPU second)").
awk '/plans in/ { gsub(/[(;]/, " "); n += $3; if ($6 > t) t = $6; cpu += $3 / $9 }
     END { if (t > 0) printf "soundness fuzz, 2 workers: %d plans in %.1f s: %.0f plans/s (%.0f per CPU second)\n", n, t, n / t, n / cpu }' \
  "$log_a" "$log_b"
rm -f "$log_a" "$log_b"
exit "$status"
