#!/usr/bin/env bash
# The verdict cache's store file and record decoder for SECONDS.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
run_fuzzer store "${1:-60}" -max_len=131072
