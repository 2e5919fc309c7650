#pragma once
// Entry points to host durable entity types (entity_type.hpp) on the entity kit: one shard
// supervisor per shard for all registered types, stores for their reads, writers for their
// writes. runtime/ wires them like the offers' (router, cluster manager, node link).

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
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
  /// Whether the entities of `shard` live in another shard group's database than this shard's
  /// (ADR 0023): an event sent to one is kept in this database for the forwarder to relay
  /// (spawn_entity_forwarder). Empty: every shard's entities are in this database.
  std::function<bool(uint32_t shard)> elsewhere;
  /// Told after a commit that kept such events (the node wakes its forwarder). May be empty.
  std::function<void()> forwarded;
};

/// What a forwarder relayed (gost_entity_forwards_total{group, outcome}).
struct entity_forward_stats {
  std::atomic<uint64_t> relayed{0};  ///< delivered to the target's owner (stored there once)
  std::atomic<uint64_t> failed{0};   ///< relays that failed, each row retried later
  std::atomic<uint64_t> given_up{0}; ///< refused for good by the target: dead-lettered
};

/// The relay of one shard group's `entity_forwards` on one node (ADR 0023): the events its
/// entities sent to entities of other groups, each kept in the sender's database in the
/// transaction of the sender's write.
struct entity_forwarder_options {
  persistence::pg_pool* pool = nullptr; ///< the group's database; outlives the actor
  std::string group;                    ///< the group's name, in logs
  /// The shards whose rows this node relays now: the group's shards it owns (the writers of
  /// those rows).
  std::function<std::vector<uint32_t>()> shards;
  /// Sends one event through EntityService's Send path to the owner of its target (key
  /// `kind/id`), stored once per request id, handled after `delay_ms`; the future's error is
  /// empty once the target's owner committed it.
  std::function<std::future<caf::error>(const std::string& key, const std::string& payload,
                                        const std::string& request_id, int64_t delay_ms)>
    deliver;
  std::chrono::milliseconds poll{1000}; ///< a look without a wake
  size_t batch = 256;                   ///< rows relayed at once (then the next round)
  /// How long a round waits for its answers at most (each delivery has its own deadline; this
  /// bounds a stop's wait on one that never answers).
  std::chrono::milliseconds answer_bound{std::chrono::seconds{15}};
  std::shared_ptr<entity_forward_stats> stats = std::make_shared<entity_forward_stats>();
};

/// Spawns a forwarder (detached: it reads and deletes rows with blocking calls). It looks every
/// `poll` and when woken; a round delivers the first waiting event of each target (a sender's
/// events reach a target in their order) in parallel and waits for all of them, so at most
/// `batch` are in flight; a delivered row is deleted, a failed one waits (1 s, doubling, at most
/// 5 min: read_entity_forwards) and is logged with its error, one refused for good
/// (invalid_argument, failed_precondition: a type the target does not take) goes to
/// `entity_dead_letters`, as an event its handler kept failing would in one group.
entity_forwarder_actor spawn_entity_forwarder(caf::actor_system& sys,
                                              entity_forwarder_options opts);

/// The supervisor of one shard's durable entities.
entity_shard_actor spawn_entity_shard(caf::actor_system& sys, entity_shard_options opts);

} // namespace gost
