#pragma once
// Internal: the offer actor and what the offer kind plugs into the entity kit
// (gost/core/kit/shard.hpp).

#include <memory>
#include <string>

#include <caf/intrusive_ptr.hpp>

#include "gost/core/actor_pool.hpp"
#include "gost/core/kit/shard.hpp"
#include "gost/core/stats.hpp"
#include "gost/offers/content_rules.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/offers/spawn.hpp"
#include "gost/offers/stage.hpp"

namespace gost::detail {

/// What all offer actors of one shard share: one copy per shard, held by reference from each
/// actor (an idle actor's own state is this pointer, its offer and its stage states). The kit
/// part (shard, epoch, the shard's address, the writer) comes from kit::entity_env.
struct offer_env : kit::entity_env<persistence::write_set> {
  store_actor store;
  std::shared_ptr<const stage_registry> stages;
  std::shared_ptr<const stage_pools> pools; ///< blocking stages' pools; may be null
  std::shared_ptr<node_stats> stats;
  int max_chain = 10;
  /// Node, shard and epoch for stages (current_run()); set when the shard starts.
  std::shared_ptr<const run_context> run;
  std::string node_id;
  /// Background rescan: every this often (0: never), a page of this many offers at a time.
  std::chrono::milliseconds rescan_every{0};
  uint32_t rescan_page = 500;
  /// One-off sweeps run at the shard's start (shard_options::sweeps).
  std::vector<sweep> sweeps;
  /// What clients' content may hold (the API's creates and updates, feeds).
  offer_limits limits;
};

using offer_env_ptr = caf::intrusive_ptr<offer_env>;

/// The trail of an offer actor (`actor`: its caf::abstract_actor; kit::trail_fn).
const kit::actor_trail* offer_trail(const void* actor);

/// Spawns the actor of offer `id` for its shard (`parent`), which it tells when it stops.
offer_actor spawn_offer_actor(caf::local_actor* parent, std::string id, offer_env_ptr env);

} // namespace gost::detail
