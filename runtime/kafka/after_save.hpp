#pragma once
// Stages' after_save hooks fed from the after-save topic (MISSION G10, seed 000 "Сайд эффекты
// в стейджах"): a Kafka consumer in the node's consumer group reads `kafka.topic` and hands
// every event, in order per partition (so in version order per offer), to each stage that
// wants it. An event's offset is stored only after every hook returned (or gave up), so a
// crash or stop re-delivers it: at least once.

#include <memory>
#include <string>

#include <caf/expected.hpp>

#include "gost/config/node_config.hpp"

namespace gost {
class dependency_tracker;
class stage_registry;
struct node_stats;
} // namespace gost

namespace gost::runtime {

struct after_save_options {
  /// `kafka.brokers` (must be set: the mock cluster of a zero-setup run is not shared),
  /// `kafka.topic`, `kafka.after_save_group`.
  config::kafka_config kafka;
  std::shared_ptr<const stage_registry> stages;
  std::shared_ptr<node_stats> stats;
  int attempts = 5; ///< calls of a hook that throws before it skips the event
  /// The brokers' tracker (the consumer's transport errors are logged there); may be null.
  std::shared_ptr<dependency_tracker> broker;
};

class after_save_consumer {
public:
  /// Subscribes and starts the consumer thread (kafka/group_consumer.hpp). Errors name the
  /// config key to change (`kafka.brokers`, `kafka.after_save_group`, `kafka.topic`).
  static caf::expected<std::unique_ptr<after_save_consumer>> start(after_save_options opts);

  /// Stops the thread (a hook in progress finishes or, while retrying, gives up without
  /// storing the event's offset) and leaves the group, committing what was handled.
  ~after_save_consumer();

  struct impl;

private:
  explicit after_save_consumer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace gost::runtime
