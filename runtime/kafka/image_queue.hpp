#pragma once
// The image functions' Kafka queue (images.queue=kafka; seed 003 "Очередь: kafka"; MISSION I4;
// docs/images.md "The Kafka queue"), the other `images::task_queue` beside PostgreSQL's:
//
// - asking: the pending statuses are written to image_results (`write_image_pending`), then
//   each task (`gost.v1.ImageTask`) is produced to `images.kafka.topic_prefix` + its function,
//   keyed by its result key; `enqueue` returns only after the broker acknowledged every one
//   (what is answered PENDING is in Kafka), and removes the pending statuses of those it
//   could not queue;
// - computing: per function with a pool on this node, a member of the consumer group
//   `images.kafka.group` + "." + function reads batches and runs them on the function's
//   feeder (`images::run_foreign_tasks`: a task whose key holds a final result stored after
//   it was asked is skipped — the seed's manual de-duplication), and stores the offsets only
//   after the outcomes are stored (at least once). The broker spreads the topic's partitions
//   over the nodes; a recoverable failure becomes a task of the PostgreSQL queue, so a retry
//   never holds a Kafka partition.
//
// Threads: `enqueue` is called from many (the API's blocking calls, the photo stages' pools);
// one thread of the queue serves the producer's delivery reports; each consumer has its own.

#include <chrono>
#include <map>
#include <memory>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "gost/config/node_config.hpp"
#include "gost/images/ask.hpp"
#include "gost/images/pools.hpp"
#include "gost/images/request.hpp"

namespace gost {
class dependency_tracker;
}

namespace gost::runtime {

struct image_queue_options {
  config::kafka_config kafka;   ///< `kafka.brokers` (required), `kafka.message_timeout`
  config::images_config images; ///< `images.kafka.*`
  uint32_t partitions = 1;      ///< shard.count: a task's partition in PostgreSQL (its retries)
  /// The brokers' tracker (the consumers' transport errors are logged there); may be null.
  std::shared_ptr<dependency_tracker> broker;
};

class image_queue final : public images::task_queue {
public:
  /// Makes the producer and starts its thread. Errors: the producer cannot be made (they name
  /// the config key).
  static caf::expected<std::unique_ptr<image_queue>> start(image_queue_options opts);

  /// Stops the consumers (if still running), then the producer (outstanding reports wait up
  /// to 2 s; an `enqueue` still waiting then gets its tasks' failure).
  ~image_queue() override;

  caf::error enqueue(persistence::pg_pool& pool,
                     const std::vector<persistence::image_request>& reqs) override;

  /// Starts a consumer per function of `feeders` (the image pools' feeders), each handing its
  /// batches to its feeder and waiting at most `batch_timeout` for their outcomes. Errors: a
  /// consumer cannot be made (naming the config key).
  caf::error consume(caf::actor_system& sys,
                     const std::map<images::function, images::image_feeder_actor>& feeders,
                     std::chrono::milliseconds batch_timeout);

  /// Stops the consumers: a batch in progress is finished or abandoned to the group's next
  /// member (its offsets not stored). Call before the feeders stop.
  void stop_consuming();

  /// Tests only: the producer fails fatally, as it would on the broker's word.
  void test_fatal_error();

  struct impl;

private:
  explicit image_queue(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace gost::runtime
