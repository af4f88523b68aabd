// Ctrl-C (SIGINT) and SIGTERM for the CLI's own commands. The signal only
// wakes a watcher thread (a handler can do almost nothing safely); the
// watcher removes the temporary files registered here (the hook's staged
// plans), says so, and ends the process at once with 128 + the signal
// (130 for Ctrl-C). Nothing waits for a solve: Z3's own handler is off
// (stage_prover.cpp), LMDB keeps what was committed, and a daemon serving
// this process sees the connection close and cancels the request.
#pragma once

#include <string>

namespace shardproof::cli {

// Installs the handlers and starts the watcher; once, before other threads.
// Not for `daemon run`, whose event loop handles its signals itself.
void handle_interrupts();

// A directory removed (recursively) on an interrupt, until forgotten.
void remove_on_interrupt(const std::string& path);
void forget_on_interrupt(const std::string& path);

}  // namespace shardproof::cli
