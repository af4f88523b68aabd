// Why a plan is invalid: which rule, where (file, JSON pointer, line:column),
// and what was found. Every invalid plan is reported through one of these.
#pragma once

#include <string>

namespace shardproof {

struct Diagnostic {
  std::string rule;     // short id of the broken rule, e.g. "ssa", "lineage-input", "shape"
  std::string file;     // the file that holds the offending place
  std::string pointer;  // JSON pointer, e.g. "/parallel/ops/3/attrs/dim"
  int line = 0;         // 1-based; 0 when unknown
  int column = 0;       // 1-based; 0 when unknown
  std::string message;  // what was expected and what was found

  // "plan.json:12:7: /parallel/ops/3: [shape] matmul: ..."
  std::string to_string() const;
};

}  // namespace shardproof
