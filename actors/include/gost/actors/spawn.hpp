#pragma once
// Entry points to spawn the actors of gost's core. Everything else in actors/ is internal.

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/fwd.hpp>

#include <memory>

#include "gost/actors/protocol.hpp"
#include "gost/actors/stats.hpp"

namespace gost::persistence {
class pg_pool;
}

namespace gost {

/// A store actor on its own thread (it blocks on PostgreSQL). `pool` must outlive it.
store_actor spawn_store(caf::actor_system& sys, persistence::pg_pool& pool);

struct shard_options {
  uint32_t shard = 0;
  store_actor store;
  /// An offer actor with no event for this long asks its shard to passivate it.
  std::chrono::milliseconds offer_idle_timeout{60'000};
  /// Where the shard counts its offer actors; shared by the shards of a node. Never null.
  std::shared_ptr<node_stats> stats = std::make_shared<node_stats>();
};

/// The supervisor of one shard.
shard_actor spawn_shard(caf::actor_system& sys, shard_options opts);

/// A new random offer id: 32 lower-case hex digits (128 random bits).
std::string make_offer_id();

} // namespace gost
