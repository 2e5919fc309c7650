#pragma once
// One message at a time to a Kafka topic, waiting for the broker's acknowledgement: for
// callers that must know a message is delivered before they go on (a scheduled action's
// attempt, the notify.on_change stage's after_save hook). Over the kit's producer
// (producer.hpp), made at the first send and replaced when it fell into a fatal state.
//
// Threads: any; sends are serialized (one producer, one owner at a time).

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gost/core/backoff.hpp"
#include "kafka/producer.hpp"

namespace gost::runtime::kafka {

class sync_sender {
public:
  /// `opts.role` and `opts.settings` (brokers, `message.timeout.ms`: it bounds each send);
  /// `on_delivery` is the sender's own.
  explicit sync_sender(producer_options opts);
  ~sync_sender();

  /// Produces and waits for the acknowledgement: "" when the broker acknowledged the message,
  /// else why not (the producer could not be made, the message was refused or not delivered).
  std::string send(const std::string& topic, std::string_view key, std::string_view value,
                   const std::vector<producer::header>& headers);

private:
  std::mutex m_;
  producer_options opts_;
  std::unique_ptr<producer> producer_;
  stop_signal stop_; ///< never requested: a flush is bounded by message.timeout.ms
};

} // namespace gost::runtime::kafka
