// The durable entities' store actor: detached (every call blocks on PostgreSQL); batched
// loads of entities with their due events (the kit's batched_loader), the shard's queue, and
// the answers kept for asks' request ids.

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "durable.hpp"
#include "gost/core/kit/load_batch.hpp"
#include "gost/persistence/pg_pool.hpp"

namespace gost {

namespace detail {

namespace {

using persistence::entity_row;

struct store_state {
  static inline const char* name = "gost.entity_store";
  persistence::pg_pool* pool = nullptr;
  kit::batched_loader<entity_row> loads{max_load_batch}; ///< 1 ms to gather a group
};

using store_impl = entity_store_actor::extend<caf::reacts_to<flush_atom>>;
using store_ptr = store_impl::stateful_pointer<store_state>;

/// The group load of the kit's batched loader.
auto group_load(persistence::pg_pool* pool) {
  return [pool](const std::vector<std::string>& keys)
           -> caf::expected<std::vector<caf::expected<entity_row>>> {
    auto rows = persistence::load_entities(*pool, keys, kit::now_us(), due_per_load);
    if (!rows)
      return std::move(rows.error());
    std::vector<caf::expected<entity_row>> out;
    out.reserve(rows->size());
    for (auto& r : *rows)
      out.emplace_back(std::move(r));
    return out;
  };
}

store_impl::behavior_type store_fun(store_ptr self, persistence::pg_pool* pool) {
  self->state.pool = pool;
  return {
    [=](load_atom, std::string& key) -> caf::result<entity_row> {
      return self->state.loads.load(self, std::move(key), group_load(pool));
    },
    [=](flush_atom) { self->state.loads.flush(group_load(pool)); },
    [=](ask_atom, const std::string& key,
        const std::string& request_id) -> caf::result<persistence::entity_answer> {
      std::string kind, id;
      persistence::split_entity_key(key, kind, id);
      auto r = persistence::find_entity_answer(*self->state.pool, kind, id, request_id);
      if (!r)
        return std::move(r.error());
      return *r ? std::move(**r) : persistence::entity_answer{};
    },
    [=](due_atom, uint32_t shard, int64_t until_us, uint32_t limit,
        const persistence::queue_entries& after) -> caf::result<persistence::queue_entries> {
      auto r = persistence::due_entities(*self->state.pool, shard, until_us, limit,
                                         after.empty() ? nullptr : &after.front());
      if (!r)
        return std::move(r.error());
      return std::move(*r);
    },
  };
}

} // namespace

} // namespace detail

entity_store_actor spawn_entity_store(caf::actor_system& sys, persistence::pg_pool& pool) {
  return caf::actor_cast<entity_store_actor>(sys.spawn<caf::detached>(detail::store_fun, &pool));
}

} // namespace gost
