// How both JSON readers (json_source_readers.h) build a document: values
// arrive in document order, and each array's or object's members are moved,
// side by side, into large blocks the document owns. A plan has ~10^5
// containers; one allocation each (and one free each afterwards) was a large
// part of reading it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/json/json_source.h"

namespace shardproof::jsonsrc::detail {

// Owns every value and key of one document. Blocks are reserved once and
// never grow, so what they hold never moves.
class Storage {
 public:
  Value root;

  // Moves all of `from` into one run (leaving `from` empty) and returns it.
  Span<Value> store(std::vector<Value>& from) { return store(values_, from); }
  Span<Key> store(std::vector<Key>& from) { return store(keys_, from); }

 private:
  template <class T>
  static Span<T> store(std::vector<std::vector<T>>& blocks, std::vector<T>& from);

  std::vector<std::vector<Value>> values_;
  std::vector<std::vector<Key>> keys_;
};

// Builds one document. Calls come in document order: item() for the root and
// for each array item, key() then item() for each object member, and open()
// and close() around each container's members.
class TreeBuilder {
 public:
  TreeBuilder() : storage_(std::make_shared<Storage>()) {}

  // The next value: the root, or the next member of the innermost open
  // container. Valid until that container closes.
  Value& item();
  // The next member's key, in the innermost open container (an object).
  Key& key();
  // `v` (just returned by item()) becomes the innermost open container.
  void open(Value& v, Value::Kind kind);
  // The innermost open container takes its members.
  void close();

  // Keys of the innermost open container so far.
  const std::vector<Key>& open_keys() const { return levels_[open_ - 1].keys; }
  // JSON pointer of the innermost open container.
  std::string open_pointer() const;

  // The root; the builder is done with.
  std::shared_ptr<Value> finish() { return std::shared_ptr<Value>(storage_, &storage_->root); }

 private:
  // An open container and the members it has so far. Levels are kept for
  // reuse: their vectors' memory serves the next container at that depth.
  struct Level {
    Value* container = nullptr;
    std::vector<Value> items;
    std::vector<Key> keys;
  };

  std::shared_ptr<Storage> storage_;
  std::vector<Level> levels_;
  size_t open_ = 0;  // levels_[0, open_) are open, outermost first
};

}  // namespace shardproof::jsonsrc::detail
