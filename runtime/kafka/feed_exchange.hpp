#pragma once
// The offer store's side of the feed exchange (MISSION F5, seed 004 "Взаимодействие с
// GOST"; formats in proto/gost/v1/feed_exchange.proto, docs/feeds.md): a consumer in group
// `feed.group` reads load requests from `feed.requests_topic` and hands each to the feed
// applier (actors/feeds: the rules — counting, what to delete, the summary after every
// result), which answers on `feed.responses_topic`. This file is the Kafka side only: the
// consumer loop, the responses' producer, and the applier's ports onto PostgreSQL and the
// offers' owners.

#include <chrono>
#include <memory>
#include <string>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "gost/config/node_config.hpp"
#include "gost/offers/content_rules.hpp"

namespace gost::persistence {
class shard_placement;
}

namespace gost {
class call_hub;
class dependency_tracker;
} // namespace gost

namespace gost::runtime {

class router;

struct feed_options {
  config::kafka_config kafka; ///< `kafka.brokers`
  config::feed_config feed;   ///< topics and group
  config::api_config api;     ///< `api.request_timeout`: per offer operation
  offer_limits limits;        ///< what a feed's offer may hold (each one over is rejected)
  call_hub* hub = nullptr;    ///< makes the offer requests
  std::shared_ptr<router> routes;
  /// The shard groups' databases: a load's bookkeeping lives in its seller's home group's
  /// (ADR 0023), next to the seller's offers.
  std::shared_ptr<const persistence::shard_placement> where;
  /// The brokers' tracker (the consumer's transport errors are logged there); may be null.
  std::shared_ptr<dependency_tracker> broker;
  /// The node's PostgreSQL tracker (the applier's retries during an outage it reported are
  /// not logged again); may be null.
  std::shared_ptr<const dependency_tracker> db;
};

class feed_exchange {
public:
  /// Starts the consumer thread. Errors: a Kafka client cannot be made (they name the config
  /// key: `kafka.brokers`, `feed.group`, `feed.requests_topic`).
  static caf::expected<std::unique_ptr<feed_exchange>> start(feed_options opts);

  /// Stops: a request in progress is abandoned without storing its offset (it is handled
  /// again, idempotently, by the group's next member).
  ~feed_exchange();

  struct impl;

private:
  explicit feed_exchange(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace gost::runtime
