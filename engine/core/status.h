// A success-or-message result for operations that can fail for reasons a
// user must read (a directory with the wrong owner, a store that cannot be
// opened). Used by cache/, daemon/ and hooks/ instead of exceptions across
// modules.
#pragma once

#include <string>
#include <utility>

namespace shardproof {

class Status {
 public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

}  // namespace shardproof
