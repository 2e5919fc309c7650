#pragma once
// Entry points to host durable entity types (entity_type.hpp) on the entity kit: one shard
// supervisor per shard for all registered types, stores for their reads, writers for their
// writes. runtime/ wires them like the offers' (router, cluster manager, node link).

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "gost/core/kit/shard.hpp"
#include "gost/core/stats.hpp"
#include "gost/entities/entity_type.hpp"
#include "gost/entities/protocol.hpp"

namespace gost::persistence {
class pg_pool;
}

namespace gost::kit {
class trace_hub;
}

namespace gost {

class dependency_tracker;

/// A store actor for the entity tables (detached; groups loads). `pool` must outlive it.
entity_store_actor spawn_entity_store(caf::actor_system& sys, persistence::pg_pool& pool);

/// `n` writers for entity write-sets (see kit/writer.hpp).
/// `db`: the node's PostgreSQL tracker (may be null), and `owner`, this node's id (the leases'
/// owner the writes are fenced by), as for offers' writers.
std::vector<entity_writer_actor>
spawn_entity_writers(caf::actor_system& sys, persistence::pg_pool& pool, const std::string& owner,
                     size_t n, size_t batch_max, std::chrono::milliseconds flush_delay,
                     std::shared_ptr<kit::writer_stats> stats,
                     std::shared_ptr<const dependency_tracker> db = nullptr);

struct entity_shard_options {
  /// The kit's part, whole (kit::shard_config): shard, lease epoch, queues, passivation,
  /// stats and figures, clock, traces, the writer's slot. The kind sets its lanes (one per kind
  /// and lane, with the type's options), store and trail itself, and prefetches nothing (each
  /// run loads anyway).
  kit::shard_config kit;
  uint32_t shard_count = 1; ///< to place events sent to other entities
  entity_store_actor store;
  entity_writer_actor writer;
  std::shared_ptr<const entity_registry> types = std::make_shared<entity_registry>();
  /// Told about queue entries this shard committed for entities of another shard (an event
  /// sent to them): the node hands them to that shard when it owns it; other nodes' shards
  /// find them by polling. May be empty.
  std::function<void(uint32_t shard, const persistence::queue_entries&)> notify;
};

/// The supervisor of one shard's durable entities.
entity_shard_actor spawn_entity_shard(caf::actor_system& sys, entity_shard_options opts);

} // namespace gost
