// The capture server (frontends/torch/shardproof_torch/server.py): a Python
// process that keeps torch imported and forks each capture from itself, so
// a capture costs its tracing, not the interpreter's second of imports.
// One per interpreter, front end and PYTHONPATH, in the daemon's state
// directory (0700, this user's), started on first use and gone after 10
// minutes idle. SHARDPROOF_CAPTURE_SERVER=0 turns it off. Protocol and
// staleness rules: docs/torch-harness.md, "Capture server".
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hooks/process.h"

namespace shardproof::cli {

// Runs `python -m shardproof_torch ARGS...` in the capture server and
// returns what the process would have: its exit code and stderr. When no
// server serves it (none running, a stale one, turned off) `direct()` runs
// the capture, and `*start_server`, unless turned off, is set to start one
// for the next capture: the caller runs it when its own work is done, so
// that the server's imports compete with neither the capture nor the
// verification after it.
hooks::ProcessResult capture_through_server(const std::string& python,
                                            const std::vector<std::string>& args,
                                            const hooks::ProcessOptions& options,
                                            const std::function<hooks::ProcessResult()>& direct,
                                            std::function<void()>* start_server);

// Removes the sockets of this user's capture servers (each exits within 5 s
// of losing its socket), for `daemon stop`. Returns how many there were.
int stop_capture_servers();

}  // namespace shardproof::cli
