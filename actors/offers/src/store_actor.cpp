// The store actor: a thin shell over persistence::offer_store. It runs detached (its own
// thread) because every call blocks on PostgreSQL.

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "gost/core/kit/load_batch.hpp"
#include "gost/core/log.hpp"
#include "gost/offers/spawn.hpp"
#include "gost/persistence/offers/offer_store.hpp"
#include "gost/persistence/offers/sweeps.hpp"
#include "gost/persistence/pg_pool.hpp"

namespace gost {

namespace {

const auto lg = gost::log::get("offers");

using store_impl = store_actor::extend<caf::reacts_to<flush_atom>>;

constexpr size_t max_load_batch = 512;

struct store_state {
  static inline const char* name = "gost.store";
  std::unique_ptr<persistence::offer_store> store;
  kit::batched_loader<offer_snapshot> loads{max_load_batch}; ///< 1 ms to gather a group
  std::shared_ptr<kit::loader_stats> stats;                  ///< null: not counted
};

using self_ptr = store_impl::stateful_pointer<store_state>;

/// The snapshots of `ids` (one load for all of them), each on its own: a stored body that does
/// not parse fails its own request only.
caf::expected<std::vector<caf::expected<offer_snapshot>>>
load_snapshots(persistence::pg_pool* pool, const std::vector<std::string>& ids) {
  auto t0 = std::chrono::steady_clock::now();
  auto rows = persistence::load_offers(*pool, ids);
  lg->debug(
    "group load offers={} ms={:.2f}", ids.size(),
    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  if (!rows)
    return std::move(rows.error());
  std::vector<caf::expected<offer_snapshot>> out;
  out.reserve(rows->size());
  for (auto& r : *rows) {
    offer_snapshot snap;
    snap.found = r.found;
    if (r.found && !snap.offer.ParseFromString(r.body)) {
      out.emplace_back(
        make_error(errc::internal, "stored offer body does not parse as gost.v1.Offer"));
      continue;
    }
    snap.offer.set_version(r.version);
    snap.states = std::move(r.states);
    snap.queued = std::move(r.queued);
    out.emplace_back(std::move(snap));
  }
  return out;
}

/// The group load of the kit's batched loader, counted.
auto group_load(self_ptr self, persistence::pg_pool* pool) {
  return [self, pool](const std::vector<std::string>& ids) {
    if (auto& stats = self->state.stats) {
      stats->batches.fetch_add(1, std::memory_order_relaxed);
      stats->loaded.fetch_add(ids.size(), std::memory_order_relaxed);
    }
    return load_snapshots(pool, ids);
  };
}

store_impl::behavior_type store_fun(self_ptr self, persistence::pg_pool* pool,
                                    std::shared_ptr<kit::loader_stats> stats) {
  self->state.store = std::make_unique<persistence::offer_store>(*pool);
  self->state.stats = std::move(stats);
  return {
    [=](load_atom, std::string& id) -> caf::result<offer_snapshot> {
      // Group load: activations arrive in bursts (a shard dispatching a page of work).
      return self->state.loads.load(self, std::move(id), group_load(self, pool));
    },
    [=](flush_atom) { self->state.loads.flush(group_load(self, pool)); },
    [=](scan_atom, uint32_t shard, const std::string& after,
        uint32_t limit) -> caf::result<offer_snapshots> {
      auto ids = persistence::offer_ids_page(*pool, shard, after, limit);
      if (!ids)
        return std::move(ids.error());
      auto rows = persistence::load_offers(*pool, *ids);
      if (!rows)
        return std::move(rows.error());
      offer_snapshots out;
      for (auto& r : *rows) {
        offer_snapshot snap;
        snap.found = r.found && snap.offer.ParseFromString(r.body);
        if (!snap.found)
          continue; // deleted since the id was read
        snap.offer.set_version(r.version);
        snap.states = std::move(r.states);
        snap.queued = std::move(r.queued);
        out.push_back(std::move(snap));
      }
      return out;
    },
    [=](load_atom, scan_atom, const std::string& token,
        uint32_t shard) -> caf::result<std::string, int64_t, bool> {
      auto p = persistence::load_sweep(*pool, token, shard);
      if (!p)
        return std::move(p.error());
      return caf::make_result(std::move(p->after_id), p->enqueued, p->done);
    },
    [=](update_atom, scan_atom, const std::string& token, uint32_t shard, const std::string& after,
        int64_t enqueued, bool done) {
      if (auto err = persistence::save_sweep(*pool, token, shard, {after, enqueued, done}))
        lg->warn("sweep progress not recorded token={} shard={} error={}", token, shard,
                 persistence::error_message(err));
    },
    [=](due_atom, uint32_t shard, int64_t until_us, uint32_t limit,
        const queue_entries& after) -> caf::result<queue_entries> {
      auto r = persistence::due_entries(*pool, shard, until_us, limit,
                                        after.empty() ? nullptr : &after.front());
      if (!r)
        return std::move(r.error());
      return std::move(*r);
    },
    [=](list_atom, const std::string& seller, bool has_ns, const std::string& ns,
        const std::string& after, uint32_t limit) -> caf::result<persistence::seller_page> {
      auto r = self->state.store->list_by_seller(
        seller, has_ns ? std::optional<std::string>{ns} : std::nullopt, after, limit);
      if (!r)
        return std::move(r.error());
      return std::move(*r);
    },
    [=](delete_atom, const std::string& seller, const std::string& ns,
        const std::string& external_id, const std::string& offer_id) -> caf::result<bool> {
      auto r = self->state.store->drop_claim(seller, ns, external_id, offer_id);
      if (!r)
        return std::move(r.error());
      return *r;
    },
    [=](find_atom, const std::string& offer_id, const request_id& rid) -> caf::result<std::string> {
      auto r = persistence::find_answer(*pool, offer_id, rid.value);
      if (!r)
        return std::move(r.error());
      return r->value_or(std::string{}); // empty: no write with this id is kept
    },
    [=](find_atom, const std::string& seller, const std::string& ns,
        const std::string& external_id) -> caf::result<std::string> {
      auto r = self->state.store->find_id(seller, ns, external_id);
      if (!r)
        return std::move(r.error());
      if (!*r)
        return make_error(errc::not_found, "no offer with seller_id=" + seller + " namespace=" + ns
                                             + " external_id=" + external_id);
      return std::move(**r);
    },
  };
}

} // namespace

store_actor spawn_store(caf::actor_system& sys, persistence::pg_pool& pool,
                        std::shared_ptr<node_stats> stats) {
  std::shared_ptr<kit::loader_stats> counted;
  if (stats != nullptr)
    counted = std::shared_ptr<kit::loader_stats>(stats, &stats->offer_loads);
  return caf::actor_cast<store_actor>(
    sys.spawn<caf::detached>(store_fun, &pool, std::move(counted)));
}

} // namespace gost
