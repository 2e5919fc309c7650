#pragma once
// Where requests go: offer id -> shard -> the shard actor that owns it. A single node owns
// every shard for now; the cluster issue turns entries into remote actors.

#include <atomic>
#include <vector>

#include "gost/actors/protocol.hpp"
#include "gost/actors/shard_hash.hpp"

namespace gost::runtime {

class router {
public:
  router(std::vector<shard_actor> shards, std::vector<store_actor> stores)
    : shards_(std::move(shards)), stores_(std::move(stores)) {}

  uint32_t shard_count() const noexcept { return static_cast<uint32_t>(shards_.size()); }
  const shard_actor& shard_for(const std::string& offer_id) const {
    return shards_[shard_of(offer_id, shard_count())];
  }
  /// A store actor for lookups that are not tied to one offer (round robin).
  const store_actor& any_store() {
    return stores_[next_.fetch_add(1, std::memory_order_relaxed) % stores_.size()];
  }

private:
  std::vector<shard_actor> shards_;
  std::vector<store_actor> stores_;
  std::atomic<size_t> next_{0};
};

} // namespace gost::runtime
