#pragma once
// The outbox relay (MISSION G10): publishes the committed outbox rows of the shards this node
// owns to a Kafka topic — one message per saved offer, key = offer id, value = the
// gost.v1.OfferSaved event; and a row's other messages (image notifications) to their own
// topics, keyed as written — with an idempotent producer, in commit order per shard, and
// deletes a row only after the broker acknowledged all of its events. Broker unreachable:
// rows stay in PostgreSQL and go out when it is back (at least once, never lost). A row the
// broker refuses for good (a message above the topic's max.message.bytes, ...) is parked in
// `outbox_parked` and the rows behind it go on (docs/operations.md, "Parked outbox rows").

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "gost/config/node_config.hpp"

namespace gost {
class dependency_tracker;
class stats_registry;
struct node_stats;
} // namespace gost

namespace gost::persistence {
class pg_pool;
}

namespace gost::runtime {

class router;

/// What the relay parked, by reason (gost_outbox_parked_total). The relay adds, /metrics reads.
class parked_stats {
public:
  void add(const std::string& reason);
  std::map<std::string, uint64_t> by_reason() const;

private:
  mutable std::mutex mtx_;
  std::map<std::string, uint64_t> by_reason_;
};

/// Registers gost_outbox_parked_total{reason}.
void add_relay_metrics(stats_registry& reg, std::shared_ptr<const parked_stats> parked);

struct relay_options {
  /// `kafka.brokers` (empty: librdkafka's in-process mock cluster, nothing is kept),
  /// `kafka.topic`, `kafka.message_timeout`, `kafka.message_max_bytes`.
  config::kafka_config kafka;
  config::outbox_config outbox; ///< `outbox.poll`
  size_t rows_per_round = 100;
  /// The database of the shard group this relay serves (ADR 0023: a relay per group), and the
  /// group: it relays the outbox of the shards of `group` this node owns.
  persistence::pg_pool* pool = nullptr;
  uint32_t group = 0;
  std::shared_ptr<router> routes;
  std::shared_ptr<node_stats> stats;
  std::shared_ptr<parked_stats> parked; ///< may be null (nothing counted)
  /// The node's PostgreSQL tracker: while the database is away the relay reads no outbox
  /// (waits doubling up to 2 s, over as soon as any call reaches the database again), and
  /// its failures are logged by the tracker only. May be null.
  std::shared_ptr<const dependency_tracker> db;
  /// The brokers' tracker, fed by the relay's delivery reports: a broker outage is one
  /// "lost" line, summaries and one "back" line instead of a line per shard and round. May
  /// be null (then each failed round is logged).
  std::shared_ptr<dependency_tracker> broker;
};

/// Starts the relay (a detached actor: it blocks on PostgreSQL and on the producer's flush).
/// Errors: the producer cannot be made (they name the key: `kafka.brokers`,
/// `kafka.message_timeout`).
caf::expected<caf::actor> spawn_outbox_relay(caf::actor_system& sys, relay_options opts);

} // namespace gost::runtime
