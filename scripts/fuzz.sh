#!/usr/bin/env bash
# Runs one fuzzer for a given time: scripts/fuzz.sh TARGET SECONDS.
# Each target is scripts/fuzz/TARGET.sh (it builds what it needs, runs for
# SECONDS and exits non-zero when it found a problem, leaving the input that
# shows it). `scripts/fuzz.sh list` names the targets.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="${1:-list}"
if [[ "$target" == list || ! -f "$here/fuzz/$target.sh" ]]; then
  [[ "$target" == list ]] || echo "fuzz: no target \"$target\"" >&2
  echo "targets:"
  for f in "$here"/fuzz/*.sh; do [[ -e "$f" ]] && echo "  $(basename "$f" .sh)"; done
  [[ "$target" == list ]] && exit 0 || exit 2
fi
seconds="${2:-60}"
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz: SECONDS must be a whole number, got \"$seconds\"" >&2; exit 2; }
exec bash "$here/fuzz/$target.sh" "$seconds"
