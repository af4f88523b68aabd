#!/usr/bin/env bash
# Builds shardproof (setting the machine up first if build/ is missing) and
# runs every test. This is the command the README and CI (.ci/run) use.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SHARDPROOF_BUILD_DIR:-$root/build}"
jobs="${SHARDPROOF_JOBS:-2}"

if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  "$root/scripts/setup.sh"
else
  cmake --build "$build_dir" -j "$jobs"
fi
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@"
