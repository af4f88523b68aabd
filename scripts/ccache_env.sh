# Sourced by setup.sh and test.sh: when ccache is installed, compile through
# it with paths taken relative to the checkout ($root), so that a fresh clone
# of the same sources (CI's) reuses what an earlier build compiled. Sets
# ccache_launcher to the CMake flag (empty without ccache).
ccache_launcher=()
if command -v ccache >/dev/null; then
  ccache_launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
fi
