#!/usr/bin/env bash
# Sets up a Debian 12 machine to build shardproof, then configures and builds
# it into build/ (Ninja, RelWithDebInfo). Idempotent: installs only missing
# packages, and a second run only rebuilds what changed.
#
#   scripts/setup.sh              # packages + configure + build
#   SHARDPROOF_SKIP_BUILD=1 scripts/setup.sh   # packages only
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SHARDPROOF_BUILD_DIR:-$root/build}"
jobs="${SHARDPROOF_JOBS:-2}"

packages=(
  build-essential cmake ninja-build pkg-config
  ccache  # rebuilds of the same sources (a second checkout, CI after a session) are cache hits
  libz3-dev libgmp-dev liblmdb-dev libxxhash-dev libuv1-dev
  nlohmann-json3-dev libcli11-dev libgtest-dev googletest
  libjemalloc-dev  # the executables' allocator (CMakeLists.txt, SHARDPROOF_JEMALLOC)
  libsodium-dev  # the cache's record MACs (cache/cache_key.h)
  libhiredis-dev redis-server  # the shared cache on Redis (cache/remote_store.h) and its tests
  clang libclang-rt-14-dev  # libFuzzer and the sanitizer build (fuzz/, scripts/test.sh)
  time  # GNU time: peak memory in bench/run.sh
  git   # the pre-commit hook and its tests (tests/hooks_e2e.sh)
  zsh   # checks the installed zsh completion (tests/cli_install_test.cpp)
  # The PyTorch front end (frontends/torch) and its tests, for Debian's
  # /usr/bin/python3; also runs tests/layering_test.py.
  python3 python3-torch python3-numpy python3-pytest python3-jsonschema
  python3-yaml  # tests/ci_workflow_test.py reads the example workflow
  chromium  # renders `verify --output html=` pages in tests/ci_report_test.cpp (headless)
)

missing=()
for p in "${packages[@]}"; do
  # dpkg-query knows "installed" from "removed, config files left".
  status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}"
  sudo=()
  if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  # Non-interactive: CI has no stdin and no one to answer debconf.
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi

[[ "${SHARDPROOF_SKIP_BUILD:-0}" == 1 ]] && exit 0

# ccache keyed by paths relative to the checkout, so another clone of the
# same sources hits the same cache entries.
source "$root/scripts/ccache_env.sh"
# Configure only once; later runs let Ninja re-run CMake when needed.
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${ccache_launcher[@]}"
fi
cmake --build "$build_dir" -j "$jobs"
echo "setup: built $build_dir/shardproof"
