#pragma once
// Internal to the entity kit: a shard's resident entity actors, found by entity id, kept in
// least recently used order. One hash node per actor holds its id, handle, LRU links and last
// use: the shard's share of an idle actor's memory.

#include <cassert>
#include <chrono>
#include <string>
#include <unordered_map>
#include <utility>

namespace gost::detail {

/// `Handle`: the entity actor's handle type (a CAF actor handle: copyable, default-constructible
/// to an invalid handle).
template <class Handle>
class resident_set {
public:
  using time_point = std::chrono::steady_clock::time_point;

  resident_set() = default;
  // The LRU links point into the map's nodes: neither copied nor moved.
  resident_set(const resident_set&) = delete;
  resident_set& operator=(const resident_set&) = delete;

  size_t size() const noexcept { return by_id_.size(); }
  bool empty() const noexcept { return by_id_.empty(); }

  /// The actor of `id`, marked as used at `now` (moved to the front); nullptr if not resident.
  const Handle* use(const std::string& id, time_point now) {
    auto i = by_id_.find(id);
    if (i == by_id_.end())
      return nullptr;
    unlink(&*i);
    push_front(&*i);
    i->second.last_used = now;
    return &i->second.handle;
  }

  bool contains(const std::string& id) const { return by_id_.count(id) != 0; }

  /// The actor of `id` without marking it used; nullptr if not resident.
  const Handle* find(const std::string& id) const {
    auto i = by_id_.find(id);
    return i == by_id_.end() ? nullptr : &i->second.handle;
  }

  /// Adds a new actor as the most recently used one (`id` must not be resident).
  void add(const std::string& id, Handle handle, time_point now) {
    auto [i, fresh] = by_id_.emplace(id, node{std::move(handle), nullptr, nullptr, now});
    assert(fresh && "resident_set::add: the entity already has an actor");
    if (!fresh)
      return;
    push_front(&*i);
  }

  /// The least recently used entry (id, last use); nullptr when empty.
  const std::string* oldest_id() const { return oldest_ != nullptr ? &oldest_->first : nullptr; }
  time_point oldest_last_used() const { return oldest_->second.last_used; }

  /// Removes the actor of `id`; returns its handle (invalid if it was not resident).
  Handle remove(const std::string& id) {
    auto i = by_id_.find(id);
    if (i == by_id_.end())
      return {};
    auto handle = i->second.handle;
    erase(i);
    return handle;
  }

  /// Calls f(id, handle) for every resident actor.
  template <class F>
  void for_each(F f) const {
    for (auto& [id, n] : by_id_)
      f(id, n.handle);
  }

private:
  struct node;
  using entry = std::pair<const std::string, node>;
  struct node {
    Handle handle;
    entry* newer;
    entry* older;
    time_point last_used;
  };

  void push_front(entry* e) {
    e->second.newer = nullptr;
    e->second.older = newest_;
    if (newest_ != nullptr)
      newest_->second.newer = e;
    newest_ = e;
    if (oldest_ == nullptr)
      oldest_ = e;
  }

  void unlink(entry* e) {
    auto& n = e->second;
    (n.newer != nullptr ? n.newer->second.older : newest_) = n.older;
    (n.older != nullptr ? n.older->second.newer : oldest_) = n.newer;
    n.newer = n.older = nullptr;
  }

  void erase(typename std::unordered_map<std::string, node>::iterator i) {
    unlink(&*i);
    by_id_.erase(i);
  }

  std::unordered_map<std::string, node> by_id_;
  entry* newest_ = nullptr;
  entry* oldest_ = nullptr;
};

} // namespace gost::detail
