#pragma once
// Where requests go: offer id -> shard -> its owner, which is a local shard actor or another
// node's peer link (a local actor forwarding over gRPC, node_link.hpp). Both are held as the
// same typed interface (`offer_owner_ops`), so a request that compiles against it works
// against either. The cluster manager keeps the table current; gRPC threads and the call hub
// read it. A shard with no known owner (moving, or its owner died and the lease has not
// expired yet) has no route: callers pause and ask again.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <vector>

#include "gost/core/shard_hash.hpp"
#include "gost/entities/protocol.hpp"
#include "gost/offers/protocol.hpp"

namespace gost::runtime {

/// What a link to another node forwards: every offer operation (with inspection) and every
/// durable entity operation (node_link.hpp; mapped to protobuf in link_table.hpp).
using peer_link_ops = offer_owner_ops::extend_with<entity_ops>;

/// The supervisors this node runs for one shard it owns.
struct local_shard {
  shard_actor offers;
  entity_shard_actor entities; ///< invalid when the node hosts no entity types
};

class router {
public:
  router(uint32_t shard_count, std::vector<store_actor> stores)
    : routes_(shard_count), stores_(std::move(stores)) {}

  uint32_t shard_count() const noexcept { return static_cast<uint32_t>(routes_.size()); }

  uint32_t shard_of(const std::string& id) const { return gost::shard_of(id, shard_count()); }

  /// The owner of the offer's shard as known now (local shard or another node's link); an
  /// invalid handle when no owner is known. `remote`, when given, says whether the owner is
  /// another node.
  offer_owner_ops route_for(const std::string& offer_id, bool* remote = nullptr) const {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& r = routes_[shard_of(offer_id)];
    if (remote != nullptr)
      *remote = static_cast<bool>(r.link);
    return r.target;
  }

  /// The owner of entity `key`'s shard (kind/id): the local entity shard or another node's
  /// link; an invalid handle when no owner is known (or the local node hosts no entity types).
  entity_owner_ops route_entity(const std::string& key, bool* remote = nullptr) const {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& r = routes_[shard_of(key)];
    if (remote != nullptr)
      *remote = static_cast<bool>(r.link);
    if (r.link)
      return caf::actor_cast<entity_owner_ops>(r.link);
    return r.local.entities;
  }

  /// The local offer shard actor of `shard`, when this node owns it.
  std::optional<shard_actor> local(uint32_t shard) const {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& r = routes_[shard];
    if (!r.local.offers)
      return std::nullopt;
    return r.local.offers;
  }

  /// The local entity shard actor of `shard`, when this node owns it and hosts entity types.
  std::optional<entity_shard_actor> local_entities(uint32_t shard) const {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& r = routes_[shard];
    if (!r.local.entities)
      return std::nullopt;
    return r.local.entities;
  }

  /// The shards this node owns now.
  std::vector<uint32_t> local_shards() const {
    std::lock_guard<std::mutex> guard{mtx_};
    std::vector<uint32_t> out;
    for (uint32_t s = 0; s < routes_.size(); ++s)
      if (routes_[s].local.offers)
        out.push_back(s);
    return out;
  }

  /// How many shards have no known owner now (neither this node nor a link to another):
  /// readiness waits for none at the start (api/readiness.hpp).
  uint32_t unrouted() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return static_cast<uint32_t>(
      std::count_if(routes_.begin(), routes_.end(), [](const route& r) { return !r.target; }));
  }

  /// Waits until each of `shards` is owned by another node as this table knows it, or until
  /// `deadline`; true when they all are. After a hand-off: the new owners took the released
  /// shards and the cluster manager saw it, so calls still in flight here find them.
  bool wait_remote(const std::vector<uint32_t>& shards,
                   std::chrono::steady_clock::time_point deadline) const {
    std::unique_lock<std::mutex> lock{mtx_};
    return changed_.wait_until(lock, deadline, [&] {
      return std::all_of(shards.begin(), shards.end(),
                         [&](uint32_t s) { return routes_[s].target && !routes_[s].local.offers; });
    });
  }

  void set_local(uint32_t shard, local_shard here) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      routes_[shard] = {here.offers, here, {}};
    }
    changed_.notify_all();
  }
  void set_remote(uint32_t shard, peer_link_ops link) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      routes_[shard] = {link, {}, link};
    }
    changed_.notify_all();
  }
  void clear(uint32_t shard) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      routes_[shard] = {};
    }
    changed_.notify_all();
  }

  /// A store actor for lookups that are not tied to one offer (round robin).
  const store_actor& any_store() {
    return stores_[next_.fetch_add(1, std::memory_order_relaxed) % stores_.size()];
  }

private:
  struct route {
    offer_owner_ops target; ///< local offer shard or link
    local_shard local;      ///< when this node owns the shard
    peer_link_ops link;     ///< when another node does
  };
  mutable std::mutex mtx_;
  mutable std::condition_variable changed_; ///< any route set or cleared
  std::vector<route> routes_;
  std::vector<store_actor> stores_;
  std::atomic<size_t> next_{0};
};

} // namespace gost::runtime
