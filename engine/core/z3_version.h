// The linked Z3's version, "major.minor.build.revision": part of every stage
// key and plan identity (a verdict is only as good as the solver that gave
// it), and what `shardproof version` prints.
#pragma once

#include <string>

namespace shardproof {

std::string z3_version();

}  // namespace shardproof
