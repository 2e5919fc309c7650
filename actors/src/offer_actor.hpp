#pragma once
// Internal: the offer actor, spawned by shard supervisors only.

#include <chrono>
#include <memory>
#include <string>

#include "gost/actors/actor_pool.hpp"
#include "gost/actors/protocol.hpp"
#include "gost/actors/stage.hpp"
#include "gost/actors/stats.hpp"

namespace gost::detail {

struct offer_actor_args {
  std::string id;
  uint32_t shard = 0;
  shard_actor parent;
  store_actor store;
  writer_actor writer;
  std::shared_ptr<const stage_registry> stages;
  std::shared_ptr<const stage_pools> pools; ///< blocking stages' pools; may be null
  std::shared_ptr<node_stats> stats;
  int max_chain = 10;
  /// Node, shard and epoch for stages (current_run()); shared by the shard's offer actors.
  std::shared_ptr<const run_context> run;
};

offer_actor spawn_offer_actor(caf::local_actor* parent, offer_actor_args args);

} // namespace gost::detail
