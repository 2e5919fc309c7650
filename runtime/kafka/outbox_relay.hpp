#pragma once
// The outbox relay (MISSION G10): publishes the committed outbox rows of the shards this node
// owns to a Kafka topic — one message per saved offer, key = offer id, value = the
// gost.v1.OfferSaved event; and a row's other messages (image notifications) to their own
// topics, keyed as written — with an idempotent producer, in commit order per shard, and
// deletes a row only after the broker acknowledged all of its events. Broker unreachable:
// rows stay in PostgreSQL and go out when it is back (at least once, never lost).

#include <chrono>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "gost/config/node_config.hpp"

namespace gost {
class dependency_tracker;
struct node_stats;
} // namespace gost

namespace gost::persistence {
class pg_pool;
}

namespace gost::runtime {

class router;

struct relay_options {
  /// `kafka.brokers` (empty: librdkafka's in-process mock cluster, nothing is kept),
  /// `kafka.topic`, `kafka.message_timeout`.
  config::kafka_config kafka;
  config::outbox_config outbox; ///< `outbox.poll`
  size_t rows_per_round = 100;
  persistence::pg_pool* pool = nullptr;
  std::shared_ptr<router> routes;
  std::shared_ptr<node_stats> stats;
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
