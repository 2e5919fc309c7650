// The store actor: a thin shell over persistence::offer_store. It runs detached (its own
// thread) because every call blocks on PostgreSQL.

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "gost/actors/spawn.hpp"
#include "gost/persistence/offer_store.hpp"
#include "gost/persistence/pg_pool.hpp"

namespace gost {

namespace {

struct store_state {
  static inline const char* name = "gost.store";
  std::unique_ptr<persistence::offer_store> store;
};

store_actor::behavior_type store_fun(store_actor::stateful_pointer<store_state> self,
                                     persistence::pg_pool* pool) {
  self->state.store = std::make_unique<persistence::offer_store>(*pool);
  return {
    [=](load_atom, const std::string& id) -> caf::result<offer_snapshot> {
      offer_snapshot snap;
      auto r = self->state.store->load(id);
      if (!r)
        return std::move(r.error());
      if (*r) {
        snap.found = true;
        snap.offer = std::move(**r);
      }
      auto states = persistence::load_states(*pool, id);
      if (!states)
        return std::move(states.error());
      snap.states = std::move(*states);
      auto queued = persistence::queued_for(*pool, id);
      if (!queued)
        return std::move(queued.error());
      snap.queued = std::move(*queued);
      return snap;
    },
    [=](due_atom, uint32_t shard, int64_t until_us, uint32_t limit) -> caf::result<queue_entries> {
      auto r = persistence::due_entries(*pool, shard, until_us, limit);
      if (!r)
        return std::move(r.error());
      return std::move(*r);
    },
    [=](insert_atom, const offer_msg& m, uint32_t shard) -> caf::result<ok_atom> {
      if (auto err = self->state.store->insert(m.value, shard))
        return err;
      return ok_atom::value;
    },
    [=](update_atom, const offer_msg& m, int64_t expected) -> caf::result<ok_atom> {
      if (auto err = self->state.store->update(m.value, expected))
        return err;
      return ok_atom::value;
    },
    [=](delete_atom, const std::string& id, int64_t expected) -> caf::result<ok_atom> {
      if (auto err = self->state.store->remove(id, expected))
        return err;
      return ok_atom::value;
    },
    [=](find_atom, const std::string& seller, const std::string& ns,
        const std::string& external_id) -> caf::result<std::string> {
      auto r = self->state.store->find_id(seller, ns, external_id);
      if (!r)
        return std::move(r.error());
      if (!*r)
        return persistence::make_db_error(persistence::db_errc::not_found,
                                          "no offer with seller_id=" + seller + " namespace=" + ns
                                            + " external_id=" + external_id);
      return std::move(**r);
    },
  };
}

} // namespace

store_actor spawn_store(caf::actor_system& sys, persistence::pg_pool& pool) {
  return sys.spawn<caf::detached>(store_fun, &pool);
}

} // namespace gost
