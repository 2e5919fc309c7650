#pragma once
// The feed processor's reader of the offer store's answers (seed 004: the processor's
// scheduler "reads the answers and stores them in offer_errors, feed_statistics and
// offer_batches"): a consumer in group `feed.responses_group` reads `feed.responses_topic` in
// batches, groups them per load (gost::feeds::group_answers) and stores, per load, the batches
// answered and the offers rejected, and on the terminal summary the load's final statistics
// and status `succeeded`. Storing is idempotent, so answers read twice change nothing.

#include <memory>

#include <caf/expected.hpp>

#include "gost/config/node_config.hpp"

namespace gost::persistence {
class shard_placement;
}
namespace gost {
class dependency_tracker;
}
namespace gost::feeds {
struct feed_stats;
}

namespace gost::runtime {

struct feed_answers_options {
  config::kafka_config kafka;
  config::feed_config feed;
  config::feeds_config feeds;
  /// The shard groups' databases: a load lives in its seller's home group's (ADR 0023).
  std::shared_ptr<const persistence::shard_placement> where;
  std::shared_ptr<dependency_tracker> broker; ///< may be null
  feeds::feed_stats* stats = nullptr;         ///< may be null
};

class feed_answers {
public:
  /// Starts the consumer thread. Errors name the config key (kafka.brokers,
  /// feed.responses_group, feed.responses_topic).
  static caf::expected<std::unique_ptr<feed_answers>> start(feed_answers_options opts);
  /// Stops; a batch in progress is read again by the group's next member.
  ~feed_answers();
  struct impl;

private:
  explicit feed_answers(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace gost::runtime
