// Room for a plan's text, tens of MB filled at once: on Linux the memory is
// advised to use huge pages. Filling 26 MB of fresh small pages takes about
// 6500 page faults, a third of a warm `verify`; huge pages take a dozen.
#pragma once

#include <cstddef>
#include <string>

namespace shardproof {

// text.reserve(size), and the advice when `size` is large. Only advice: the
// string is an ordinary std::string, freed as usual.
void reserve_large(std::string& text, size_t size);

}  // namespace shardproof
