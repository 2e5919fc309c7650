#pragma once
// Entry points to host durable entity types (entity_type.hpp) on the entity kit: one shard
// supervisor per shard for all registered types, stores for their reads, writers for their
// writes. runtime/ wires them like the offers' (router, cluster manager, node link).

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <caf/fwd.hpp>

#include "gost/core/entity/entity_type.hpp"
#include "gost/core/entity/protocol.hpp"
#include "gost/core/stats.hpp"

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
/// `db`: the node's PostgreSQL tracker (may be null), as for offers' writers.
std::vector<entity_writer_actor>
spawn_entity_writers(caf::actor_system& sys, persistence::pg_pool& pool, size_t n, size_t batch_max,
                     std::chrono::milliseconds flush_delay,
                     std::shared_ptr<kit::writer_stats> stats,
                     std::shared_ptr<const dependency_tracker> db = nullptr);

struct entity_shard_options {
  uint32_t shard = 0;
  int64_t epoch = 0;
  uint32_t shard_count = 1; ///< to place events sent to other entities
  entity_store_actor store;
  entity_writer_actor writer;
  std::shared_ptr<const entity_registry> types = std::make_shared<entity_registry>();
  /// Told about queue entries this shard committed for entities of another shard (an event
  /// sent to them): the node hands them to that shard when it owns it; other nodes' shards
  /// find them by polling. May be empty.
  std::function<void(uint32_t shard, const persistence::queue_entries&)> notify;
  std::chrono::milliseconds queue_lookahead{1000};
  std::chrono::milliseconds queue_poll{250};
  /// The node's PostgreSQL tracker (may be null): paces failed polls, logs the outage once.
  std::shared_ptr<const dependency_tracker> db;
  uint32_t queue_page = 5000;
  std::chrono::milliseconds queue_prefetch{250};
  std::chrono::milliseconds idle_timeout{60'000};
  size_t max_resident = 100'000;
  std::shared_ptr<kit::entity_stats> stats = std::make_shared<kit::entity_stats>();
  /// The time of due events (kit::shard_config::wall_clock); empty: the system clock.
  std::function<int64_t()> wall_clock;
  /// The node's live traces (kit::shard_config::trace); null: none.
  std::shared_ptr<kit::trace_hub> trace;
  /// Events each entity actor keeps for the console (`console.recent_events`); 0: none.
  uint16_t recent_events = 0;
  /// The figures of this shard's writer (its write lag, for inspection); may be null.
  const kit::writer_slot* write_slot = nullptr;
  /// This shard's own figures (node_stats::entity_shards hands them out, for `gostctl top`);
  /// null: private ones.
  std::shared_ptr<kit::shard_stats> figures;
};

/// The supervisor of one shard's durable entities.
entity_shard_actor spawn_entity_shard(caf::actor_system& sys, entity_shard_options opts);

} // namespace gost
