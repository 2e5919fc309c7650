#pragma once
// Internal: the offer actor, spawned by shard supervisors only.

#include <memory>
#include <string>

#include <caf/actor_addr.hpp>
#include <caf/actor_cast.hpp>
#include <caf/intrusive_ptr.hpp>
#include <caf/ref_counted.hpp>

#include "gost/core/actor_pool.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/offers/spawn.hpp"
#include "gost/offers/stage.hpp"
#include "gost/core/stats.hpp"

namespace gost::detail {

/// What all offer actors of one shard share: one copy per shard, held by reference from each
/// actor (an idle actor's own state is this pointer, its offer and its stage states).
/// Reference-counted in place: an 8-byte pointer per actor.
struct offer_env : caf::ref_counted {
  uint32_t shard = 0;
  /// The shard, weakly: the shard's own state holds this environment (a strong handle here
  /// would keep the shard alive through itself if its state were never destroyed).
  caf::actor_addr parent;
  store_actor store;
  writer_actor writer;
  std::shared_ptr<const stage_registry> stages;
  std::shared_ptr<const stage_pools> pools; ///< blocking stages' pools; may be null
  std::shared_ptr<node_stats> stats;
  int max_chain = 10;
  /// Node, shard and epoch for stages (current_run()).
  std::shared_ptr<const run_context> run;
};

using offer_env_ptr = caf::intrusive_ptr<const offer_env>;

/// The shard of an environment; invalid once the shard is gone.
inline shard_actor parent_of(const offer_env& env) {
  return caf::actor_cast<shard_actor>(env.parent);
}

/// Spawns the actor of offer `id` for its shard (`parent`), which it tells when it stops.
offer_actor spawn_offer_actor(caf::local_actor* parent, std::string id, offer_env_ptr env);

} // namespace gost::detail
