#include "engine/format/large_text.h"

#include <sys/mman.h>

#include <cstdint>

namespace shardproof {

void reserve_large(std::string& text, size_t size) {
  text.reserve(size);
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  if (size < 2 * kHugePage) return;
  // Only the whole huge pages inside the reserved bytes: the advice must
  // not reach memory that malloc gave to someone else.
  auto begin = reinterpret_cast<uintptr_t>(text.data());
  uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);
  uintptr_t last = (begin + size) & ~(kHugePage - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
}

}  // namespace shardproof
