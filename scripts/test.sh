#!/usr/bin/env bash
# Builds shardproof (setting the machine up first if build/ is missing) and
# runs every test, then the sanitizer step. This is the command the README
# and CI (.ci/run) use.
#
# The sanitizer step: an ASan + UBSan build in build-asan/ (-O1, no debug
# info: it compiles about as fast as the main build) of the CLI and the
# test binary, running the suites that take untrusted input (plan files,
# compact expressions, frames, store files, signals) and the end-to-end
# CLI suites; the solver-heavy suites (model families, soundness, class
# verifier) are left to the main run, where they cost minutes, not tens.
# It runs by default (CI included); a quick local run can skip it:
#   SHARDPROOF_SANITIZE_STEP=0 scripts/test.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SHARDPROOF_BUILD_DIR:-$root/build}"
asan_dir="${SHARDPROOF_ASAN_BUILD_DIR:-$root/build-asan}"
jobs="${SHARDPROOF_JOBS:-2}"

source "$root/scripts/ccache_env.sh"
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  "$root/scripts/setup.sh"
  source "$root/scripts/ccache_env.sh"  # setup may have installed ccache just now
else
  cmake --build "$build_dir" -j "$jobs"
fi
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@"

[[ "${SHARDPROOF_SANITIZE_STEP:-1}" == 1 ]] || exit 0

sanitized_suites=(
  CacheTrustTest VerdictCacheTest CacheRecord CacheUnits TrustCliTest
  PlanParser PlanParserJson PlanParserLarge PlanText PlanOutline PlanRevision PlanLocations
  JsonReaders TopLevelScan CompactPlan Protocol LineSplitter PayloadTest StateDir InflightStore
  CliTest DaemonTest HooksConfig HooksGlob ReportJson ReportCodec OutcomeCodec
)
filter="$(printf '%s.*:' "${sanitized_suites[@]}")"
if [[ ! -f "$asan_dir/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$asan_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DSHARDPROOF_SANITIZE=ON "${ccache_launcher[@]}"
fi
cmake --build "$asan_dir" -j "$jobs" --target shardproof shardproof_tests
echo "test: ASan + UBSan: ${sanitized_suites[*]}"
# Leaks are not failures here: the daemon leaves by _Exit with request
# threads running, by design (daemon/server.cpp).
ASAN_OPTIONS="detect_leaks=0:abort_on_error=0" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  "$asan_dir/shardproof_tests" --gtest_filter="${filter%:}" --gtest_brief=1
