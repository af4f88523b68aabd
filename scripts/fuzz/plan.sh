#!/usr/bin/env bash
# The plan reader (v1 and compact, expression-aware dictionary) for SECONDS.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
run_fuzzer plan "${1:-60}" -dict="$root/fuzz/plan.dict" -max_len=65536
