// The table of every operator the plan format knows (plan-format-v1.md,
// "Operators", plus the project's additions in docs/plan-format.md).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/ops/op_def.h"

namespace shardproof {

class OpRegistry {
 public:
  // The process-wide registry with every built-in operator.
  static const OpRegistry& instance();

  const OpDef* find(const std::string& name) const;  // nullptr when unknown
  std::vector<std::string> names() const;
  void add(std::unique_ptr<OpDef> def);

  // Bumped whenever any operator's semantics changes; part of stage keys.
  static constexpr int kSemanticsVersion = 1;

 private:
  std::map<std::string, std::unique_ptr<OpDef>> defs_;
};

}  // namespace shardproof
