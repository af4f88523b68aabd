// The capture server (frontends/torch/shardproof_torch/server.py): a Python
// process that keeps torch imported and forks each capture from itself, so
// a capture costs its tracing, not the interpreter's second of imports.
// One per interpreter, front end and PYTHONPATH, in the daemon's state
// directory (0700, this user's), started on first use and gone after 10
// minutes idle. SHARDPROOF_CAPTURE_SERVER=0 turns it off. Protocol and
// staleness rules: docs/torch-harness.md, "Capture server".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hooks/process.h"

namespace shardproof::cli {

// Runs `python -m shardproof_torch ARGS...` in the capture server and
// returns what the process would have: its exit code and stderr. nullopt
// when no server could serve it (none running, a stale one, turned off):
// then the caller runs the capture itself. A server is started for the
// next capture whenever none served this one.
std::optional<hooks::ProcessResult> capture_in_server(const std::string& python,
                                                      const std::vector<std::string>& args,
                                                      const hooks::ProcessOptions& options);

}  // namespace shardproof::cli
