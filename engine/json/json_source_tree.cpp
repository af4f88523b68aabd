#include "engine/json/json_source_tree.h"

#include <algorithm>

namespace shardproof::jsonsrc::detail {
namespace {

// Members per block: large enough that blocks are few, small enough that the
// unused end of a block (a container that no longer fits starts the next
// one) is little. A larger container gets a block of its own size.
constexpr size_t kBlock = 4096;

}  // namespace

template <class T>
Span<T> Storage::store(std::vector<std::vector<T>>& blocks, std::vector<T>& from) {
  size_t n = from.size();
  if (n == 0) return {};
  if (blocks.empty() || blocks.back().capacity() - blocks.back().size() < n) {
    blocks.emplace_back();
    blocks.back().reserve(std::max(n, kBlock));
  }
  std::vector<T>& block = blocks.back();
  size_t start = block.size();
  for (T& x : from) block.push_back(std::move(x));  // within capacity: nothing moves
  from.clear();
  return Span<T>(block.data() + start, n);
}

Value& TreeBuilder::item() {
  if (open_ == 0) return storage_->root;
  return levels_[open_ - 1].items.emplace_back();
}

Key& TreeBuilder::key() {
  return levels_[open_ - 1].keys.emplace_back();
}

void TreeBuilder::open(Value& v, Value::Kind kind) {
  v.kind = kind;
  if (open_ == levels_.size()) levels_.emplace_back();
  // `v` is the root or sits in the enclosing level's items, which grow no
  // more until `v` closes: the pointer stays valid.
  levels_[open_++].container = &v;
}

void TreeBuilder::close() {
  Level& level = levels_[--open_];
  level.container->items = storage_->store(level.items);
  level.container->keys = storage_->store(level.keys);
}

std::string TreeBuilder::open_pointer() const {
  std::string p;
  for (size_t d = 0; d + 1 < open_; ++d) {
    const Level& level = levels_[d];
    size_t index = level.items.size() - 1;
    p += "/" + (level.container->is(Value::Kind::Object) ? pointer_token(level.keys[index].name)
                                                         : std::to_string(index));
  }
  return p;
}

}  // namespace shardproof::jsonsrc::detail
