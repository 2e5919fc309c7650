#pragma once
// Where requests go: entity id -> shard -> its owner, which is this node (one supervisor per
// kind, cluster/kinds.hpp) or another node's peer link (a local actor forwarding over gRPC,
// node_link.hpp). A kind's slot types the route: callers get the kind's interface whether the
// owner is here or there, so a request that compiles against it works against either. The
// cluster manager keeps the table current; gRPC threads and the call hub read it. A shard with
// no known owner (moving, or its owner died and the lease has not expired yet) has no route:
// callers pause and ask again. The router names no kind: the node registers them in
// `kinds()` before the cluster manager starts. A shard owned here is served only while the
// node's leases are confirmed (`confirmation(group)`, cluster/lease_confirmation.hpp; one per
// shard group, ADR 0023): else a call
// is refused UNAVAILABLE, never answered from a shard another node may own already.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_cast.hpp>

#include "cluster/kinds.hpp"
#include "cluster/lease_confirmation.hpp"
#include "gost/core/shard_hash.hpp"

namespace gost::runtime {

class router {
public:
  /// `stores`: actors for lookups not tied to one entity (any_store), of whatever interface
  /// their user casts them to.
  /// `group_of`: each shard's group (ADR 0023; empty: every shard in group 0). Each group's
  /// leases are confirmed by that group's cluster manager on its own. `groups`: how many group
  /// ids there are (at least one above the highest in `group_of`): a shard can move to any.
  router(uint32_t shard_count, std::vector<caf::actor> stores, std::vector<uint32_t> group_of = {},
         uint32_t groups = 1)
    : routes_(shard_count), stores_(std::move(stores)),
      group_of_(std::make_unique<std::atomic<uint32_t>[]>(shard_count)) {
    for (uint32_t s = 0; s < shard_count; ++s) {
      auto g = s < group_of.size() ? group_of[s] : 0;
      group_of_[s].store(g, std::memory_order_relaxed);
      groups = std::max(groups, g + 1);
    }
    for (uint32_t g = 0; g < groups; ++g)
      confirmations_.push_back(std::make_unique<lease_confirmation>());
  }

  uint32_t shard_count() const noexcept { return static_cast<uint32_t>(routes_.size()); }

  uint32_t shard_of(const std::string& id) const { return gost::shard_of(id, shard_count()); }

  /// The kinds hosted on shards; registered before the cluster manager starts, read-only
  /// after.
  kind_table& kinds() noexcept { return kinds_; }
  const kind_table& kinds() const noexcept { return kinds_; }

  /// The owner of the shard of `id` for kind `k` as known now: its local supervisor, or
  /// another node's link when the kind is forwarded; an invalid handle when no owner is known
  /// (or the node hosts none of the kind, or another node owns the shard of a kind that is not
  /// forwarded). `remote`, when given, says whether the owner is another node. This node's
  /// own supervisor only while its leases are confirmed: else an invalid handle, and
  /// `refused`, when given, gets the error to answer (UNAVAILABLE: retry on another node).
  template <class Ops, class Local>
  Ops route(kind_slot<Ops, Local> k, const std::string& id, bool* remote = nullptr,
            caf::error* refused = nullptr) const {
    caf::actor here;
    auto shard = shard_of(id); // hashed once, outside the lock
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto& r = routes_[shard];
      if (remote != nullptr)
        *remote = static_cast<bool>(r.link);
      if (r.link)
        return k.forwarded ? caf::actor_cast<Ops>(r.link) : Ops{};
      here = r.local.get(k.index);
    }
    if (here && !confirmed_now(shard, refused))
      return Ops{};
    return caf::actor_cast<Ops>(here);
  }

  /// Whether this node's leases of `shard`'s group are confirmed now (always before the
  /// cluster manager joined); when not, counts a refusal and puts its error into `refused`
  /// (when given).
  bool confirmed_now(uint32_t shard, caf::error* refused = nullptr) const {
    auto now = lease_confirmation::clock::now();
    auto& c = *confirmations_[group_of(shard)];
    if (c.confirmed(now))
      return true;
    auto err = c.refuse(now);
    if (refused != nullptr)
      *refused = std::move(err);
    return false;
  }

  /// The group holding `shard` (ADR 0023).
  uint32_t group_of(uint32_t shard) const {
    return group_of_[shard].load(std::memory_order_relaxed);
  }
  /// A range moved (the map changed, gostctl move-shards): `shard` is in `group` from now on,
  /// before the group's cluster manager is told to take its lease there. `group` is below
  /// `group_count()`.
  void set_group_of(uint32_t shard, uint32_t group) {
    group_of_[shard].store(group, std::memory_order_relaxed);
  }
  /// How many group ids there are (0 up to the highest id declared at the start).
  uint32_t group_count() const noexcept { return static_cast<uint32_t>(confirmations_.size()); }

  /// Whether this node's leases in `group` are confirmed: that group's cluster manager keeps it.
  lease_confirmation& confirmation(uint32_t group = 0) { return *confirmations_.at(group); }
  const lease_confirmation& confirmation(uint32_t group = 0) const {
    return *confirmations_.at(group);
  }

  /// The local supervisor of kind `k` of `shard`, when this node owns the shard and hosts
  /// the kind.
  template <class Ops, class Local>
  std::optional<Local> local(kind_slot<Ops, Local> k, uint32_t shard) const {
    auto a = local_actor(k.index, shard);
    if (!a)
      return std::nullopt;
    return caf::actor_cast<Local>(a);
  }

  /// The same by the kind's index, untyped (the node link serves whatever kind owns a
  /// forwarded request).
  caf::actor local_actor(size_t kind, uint32_t shard) const {
    std::lock_guard<std::mutex> guard{mtx_};
    return routes_[shard].local.get(kind);
  }

  /// Whether this node owns `shard` now.
  bool here(uint32_t shard) const {
    std::lock_guard<std::mutex> guard{mtx_};
    return routes_[shard].here;
  }

  /// The shards this node owns now (of `group` only, when given).
  std::vector<uint32_t> local_shards(std::optional<uint32_t> group = std::nullopt) const {
    std::lock_guard<std::mutex> guard{mtx_};
    std::vector<uint32_t> out;
    for (uint32_t s = 0; s < routes_.size(); ++s)
      if (routes_[s].here && (!group || group_of(s) == *group))
        out.push_back(s);
    return out;
  }

  /// How many shards have no known owner now (neither this node nor a link to another):
  /// readiness waits for none at the start (api/readiness.hpp).
  uint32_t unrouted() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return static_cast<uint32_t>(std::count_if(routes_.begin(), routes_.end(),
                                               [](const owner& r) { return !r.here && !r.link; }));
  }

  /// Waits until each of `shards` is owned by another node as this table knows it, or until
  /// `deadline`; true when they all are. After a hand-off: the new owners took the released
  /// shards and the cluster manager saw it, so calls still in flight here find them.
  bool wait_remote(const std::vector<uint32_t>& shards,
                   std::chrono::steady_clock::time_point deadline) const {
    std::unique_lock<std::mutex> lock{mtx_};
    return changed_.wait_until(lock, deadline, [&] {
      return std::all_of(shards.begin(), shards.end(),
                         [&](uint32_t s) { return routes_[s].link && !routes_[s].here; });
    });
  }

  void set_local(uint32_t shard, local_shard here) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      routes_[shard] = {std::move(here), {}, true};
    }
    changed_.notify_all();
  }
  /// `link`: a peer link (node_link.hpp), which answers every forwarded kind's operations.
  void set_remote(uint32_t shard, caf::actor link) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      routes_[shard] = {{}, std::move(link), false};
    }
    changed_.notify_all();
  }
  /// Clears the route of `shard` only while it is still `handles`: a manager stopping a shard
  /// that moved to another group leaves the route the other group's manager set since.
  void clear_if(uint32_t shard, const local_shard& handles) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto& r = routes_[shard];
      if (!r.here || r.local.by_kind != handles.by_kind)
        return;
      r = {};
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

  /// A store actor for lookups that are not tied to one entity (round robin), as `Store`: of
  /// group 0 (the catalog database).
  template <class Store>
  Store any_store() {
    return caf::actor_cast<Store>(
      stores_[next_.fetch_add(1, std::memory_order_relaxed) % stores_.size()]);
  }

  /// The store actors of another shard group's database (ADR 0023), set before any call.
  void set_group_stores(uint32_t group, std::vector<caf::actor> stores) {
    if (group_stores_.size() <= group)
      group_stores_.resize(group + 1);
    group_stores_[group] = std::move(stores);
  }

  /// A store actor of the database of the group holding `shard` (round robin), as `Store`:
  /// lookups by a seller read the seller's home group (`shard_of(seller)`), where the seller's
  /// offers are (ADR 0023 decision 4).
  template <class Store>
  Store store_of_shard(uint32_t shard) {
    auto g = group_of(shard);
    auto& stores =
      g < group_stores_.size() && !group_stores_[g].empty() ? group_stores_[g] : stores_;
    return caf::actor_cast<Store>(
      stores[next_.fetch_add(1, std::memory_order_relaxed) % stores.size()]);
  }

  /// A store actor of group `group`'s database (round robin), as `Store`; an invalid handle
  /// when this node has not opened that group.
  template <class Store>
  Store store_of_group(uint32_t group) {
    if (group >= group_stores_.size() || group_stores_[group].empty())
      return Store{};
    auto& stores = group_stores_[group];
    return caf::actor_cast<Store>(
      stores[next_.fetch_add(1, std::memory_order_relaxed) % stores.size()]);
  }

private:
  struct owner {
    local_shard local; ///< when this node owns the shard
    caf::actor link;   ///< when another node does
    bool here = false; ///< this node owns the shard
  };
  kind_table kinds_;
  mutable std::mutex mtx_;
  mutable std::condition_variable changed_; ///< any route set or cleared
  std::vector<owner> routes_;
  std::vector<caf::actor> stores_;
  std::atomic<size_t> next_{0};
  /// By shard; changed when a range moves (set_group_of), read by every call.
  std::unique_ptr<std::atomic<uint32_t>[]> group_of_;
  std::vector<std::vector<caf::actor>> group_stores_; ///< by group id (set_group_stores)
  /// By group id; refusals are counted by const readers (lease_confirmation's own atomics).
  std::vector<std::unique_ptr<lease_confirmation>> confirmations_;
};

/// An id for a new entity of `owner` (a seller) whose shard lies in the owner's home group,
/// the group holding `shard_of(owner)` (ADR 0023 decision 4: a seller's offers, and so the
/// unique index of its keys, are in one database): `draw(k)` makes the k-th candidate (k = 0,
/// 1, ...: a deterministic draw gives a retry the same id), the first in the home group is
/// taken; on average about as many draws as there are groups. With one group, `draw(0)`.
template <class Draw>
std::string id_in_home_group(const router& r, const std::string& owner, Draw draw) {
  auto id = draw(0);
  if (r.group_count() == 1)
    return id;
  auto home = r.group_of(r.shard_of(owner));
  // A group holds at least the owner's shard; a map giving it a tiny share costs draws.
  for (int k = 1; r.group_of(r.shard_of(id)) != home && k < 1'000'000; ++k)
    id = draw(k);
  return id;
}

} // namespace gost::runtime
