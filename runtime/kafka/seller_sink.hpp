#pragma once
// The feed exchange's topics as the feeds domain sees them (gost/feeds/ports.hpp
// message_sink): messages keyed by their seller_id on one topic, so one seller's messages keep
// their order; `flushed` waits for every acknowledgement. Used for the offer store's answers
// (responses topic) and the feed processor's batches and end messages (requests topic).

#include <string>
#include <utility>

#include "gost/core/log.hpp"
#include "gost/feeds/ports.hpp"
#include "kafka/producer.hpp"

namespace gost::runtime::kafka {

template <class M>
class seller_sink final : public feeds::message_sink<M> {
public:
  /// `what` names the messages in logs ("responses", "feed requests").
  seller_sink(producer p, std::string topic, std::string what)
    : producer_(std::move(p)), topic_(std::move(topic)), what_(std::move(what)) {}

  void send(const M& msg, const stop_signal& stop) override {
    // A refusal is counted by the producer: the next `flushed` says false.
    producer_.produce(topic_, msg.seller_id(), msg.SerializeAsString(), stop);
  }

  bool flushed(const stop_signal& stop) override {
    if (!producer_.flush(stop))
      return false;
    if (producer_.take_failures() == 0)
      return true;
    producer_.replace_if_fatal();
    gost::log::get("feeds")->warn("{} on {} were not delivered; the step runs again", what_,
                                  topic_);
    return false;
  }

private:
  producer producer_;
  std::string topic_;
  std::string what_;
};

} // namespace gost::runtime::kafka
