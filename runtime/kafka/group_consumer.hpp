#pragma once
// The Kafka kit's consumer loop, shared by the node's readers (after_save hooks, the feed
// exchange): a member of a consumer group, subscribed to one topic, hands each message to a
// handler on its own thread, at least once —
//
// - a message's offset is stored (`rd_kafka_offset_store`) only after the handler said
//   `handled`; stored offsets are committed every second and when the consumer closes, so a
//   crash or a stop re-delivers what was not handled, here or to the group's next member;
// - `not_handled` seeks the partition back to that message and reads it again after a
//   back-off (doubling from `retry_first` to `retry_cap`, reset by a handled message): the
//   loop never goes on past it;
// - the stop signal is honoured in every wait, and handed to the handler for its own waits;
// - a batch handler gets what is there at once (up to `max_batch` messages, across the
//   partitions it holds) and answers for all: `not_handled` seeks each partition back to its
//   first message of the batch; an asynchronous one answers later, with more batches read
//   meanwhile (the image functions' Kafka queue keeps a pool busy this way).
//
// Owner: the subsystem that starts it (after_save_consumer, feed_exchange, image_queue) holds
// it last, so
// it stops (and its handler with it) before what the handler uses goes.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "gost/core/backoff.hpp"
#include "kafka/client.hpp"

namespace gost {
class dependency_tracker;
}

namespace gost::runtime::kafka {

struct consumer_options {
  /// Who consumes, for errors and logs: "the after_save consumer".
  std::string role;
  std::string brokers; ///< `kafka.brokers`
  std::string group;
  std::string group_key; ///< the config key `group` comes from, named in errors
  std::string topic;
  std::string topic_key; ///< the config key `topic` comes from
  /// `kafka.session_timeout`: a member silent this long (crashed) loses its partitions.
  std::chrono::milliseconds session_timeout{45'000};
  /// More librdkafka settings of the owner (`allow.auto.create.topics`, ...).
  std::vector<setting> settings;
  std::chrono::milliseconds retry_first{500};
  std::chrono::milliseconds retry_cap{5000};
  /// The node's tracker of the brokers: the consumer's transport errors (brokers down or
  /// unreachable) go there, to be logged once per outage; a message read says they are
  /// back. Null: each such error is logged.
  std::shared_ptr<dependency_tracker> broker;
};

/// A message as the handler sees it (valid during the call).
struct message_view {
  std::string_view payload;
  std::string_view topic;
  int32_t partition = 0;
  int64_t offset = 0;
};

enum class verdict : uint8_t {
  handled,     ///< store the offset, go on
  not_handled, ///< read this message again (unless stopping)
};

/// Runs on the consumer's thread, one message at a time. It should return soon after `stop`
/// is requested (with not_handled unless the message's work is complete).
using message_handler = std::function<verdict(const message_view&, const stop_signal& stop)>;

/// The same for a batch (never empty; valid during the call): the verdict is the whole batch's.
using batch_handler =
  std::function<verdict(const std::vector<message_view>&, const stop_signal& stop)>;

/// A batch handed off: the handler returns at once and calls `done` (once, from any thread)
/// with the batch's verdict when its work is complete; the views stay valid until then. The
/// loop reads further batches meanwhile (up to `max_in_flight`), and stores offsets in the
/// order the batches were read: a batch not handled is read again with every batch read
/// after it (they are handled a second time: at least once).
using async_batch_handler =
  std::function<void(const std::vector<message_view>&, const stop_signal& stop,
                     const std::function<void(verdict)>& done)>;

class group_consumer {
public:
  /// Requests the stop, waits for the handler to return, then closes the consumer (commits
  /// the stored offsets, leaves the group).
  ~group_consumer();

  /// Requests the stop without waiting (the destructor waits): the handler sees it in its
  /// stop signal. Lets an owner stop several consumers at once.
  void request_stop();

  struct impl;
  explicit group_consumer(std::unique_ptr<impl> p);

private:
  std::unique_ptr<impl> impl_;
};

/// Joins `opts.group`, subscribes to `opts.topic` (from its start when the group has no
/// offsets yet) and starts the loop. A member may hold one message for up to an hour
/// (`max.poll.interval.ms`: long work, a handler retrying an unavailable service) before the
/// group evicts it. Errors: those of `make_client`, naming the config keys.
caf::expected<std::unique_ptr<group_consumer>> make_group_consumer(consumer_options opts,
                                                                   message_handler handler);

/// The same with batches of up to `max_batch` messages: after the first message (waited for),
/// those already fetched are added without waiting.
caf::expected<std::unique_ptr<group_consumer>>
make_group_consumer(consumer_options opts, batch_handler handler, size_t max_batch);

/// The same with batches handed off (`async_batch_handler`), at most `max_in_flight` at once.
/// A stop waits for the batches in flight to settle (the owner makes them settle soon).
caf::expected<std::unique_ptr<group_consumer>> make_group_consumer(consumer_options opts,
                                                                   async_batch_handler handler,
                                                                   size_t max_batch,
                                                                   size_t max_in_flight);

} // namespace gost::runtime::kafka
