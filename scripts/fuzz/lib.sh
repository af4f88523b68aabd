# Shared by scripts/fuzz/*.sh (sourced, not run): builds one libFuzzer
# harness with Debian's clang, ASan and UBSan into build-fuzz/, then runs it
# for SECONDS on a copy of its checked-in seed corpus. A crash, leak, UBSan
# report or timeout exits non-zero and leaves the input under build-fuzz/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
fuzz_build="${SHARDPROOF_FUZZ_BUILD_DIR:-$root/build-fuzz}"

# run_fuzzer TARGET SECONDS [extra libFuzzer flags...]
run_fuzzer() {
  local target="$1" seconds="$2"
  shift 2
  command -v clang++ >/dev/null || { echo "fuzz: clang++ is missing (scripts/setup.sh)" >&2; exit 2; }
  if [[ ! -f "$fuzz_build/CMakeCache.txt" ]]; then
    CC=clang CXX=clang++ cmake -S "$root" -B "$fuzz_build" -G Ninja \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHARDPROOF_FUZZ=ON -DSHARDPROOF_SANITIZE=ON \
      -DBUILD_TESTING=OFF >/dev/null
  fi
  nice cmake --build "$fuzz_build" -j "${SHARDPROOF_JOBS:-2}" --target "fuzz_$target"
  # New inputs go to a working corpus; the checked-in seeds stay as they are.
  local work="$fuzz_build/corpus-$target" crashes="$fuzz_build/crashes-$target"
  mkdir -p "$work" "$crashes"
  # Executables land at the build directory's top (CMAKE_RUNTIME_OUTPUT_DIRECTORY).
  local empty
  empty="$(mktemp -d)"  # the fuzzer's cwd: graph references find nothing
  echo "fuzz: $target for $seconds s (corpus $work, crashes $crashes)"
  local status=0
  (cd "$empty" &&
    ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    "$fuzz_build/fuzz_$target" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
      -artifact_prefix="$crashes/" -print_final_stats=1 "$@" "$work" "$root/fuzz/corpus/$target") ||
    status=$?
  rm -rf "$empty"
  return $status
}
