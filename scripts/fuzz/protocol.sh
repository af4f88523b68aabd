#!/usr/bin/env bash
# The daemon's framing and request parsing for SECONDS.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
run_fuzzer protocol "${1:-60}" -max_len=16384
