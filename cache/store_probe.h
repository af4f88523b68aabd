// Looks at a store file before LMDB maps it, so that a truncated or
// scribbled file is moved aside instead of crashing every command that
// opens it (SIGBUS on pages past the end, SIGSEGV on pointers in damaged
// pages). Both checks only read.
#pragma once

#include <string>

namespace shardproof::cache {

// The file is at least as long as its newest meta page says it is (LMDB's
// layout, read with pread; a missing or empty file passes). False with
// `why` otherwise.
bool store_file_fits(const std::string& path, std::string* why);

// Opens the store read-only in a child process and walks every table,
// touching each key and value: damage that would crash a reader crashes
// the child instead. False with `why` when the child fails, crashes or
// does not finish within `timeout_ms`.
bool probe_store(const std::string& path, int timeout_ms, std::string* why);

}  // namespace shardproof::cache
