#include "engine/core/diagnostic.h"

namespace shardproof {

std::string Diagnostic::to_string() const {
  std::string s = file.empty() ? "<plan>" : file;
  if (line > 0) s += ":" + std::to_string(line) + ":" + std::to_string(column);
  // The root's pointer is "", which would print as nothing.
  s += ": " + (pointer.empty() ? std::string("(root)") : pointer);
  s += ": [" + rule + "] " + message;
  return s;
}

}  // namespace shardproof
