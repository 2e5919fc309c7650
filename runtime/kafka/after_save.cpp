#include "kafka/after_save.hpp"

#include <chrono>
#include <vector>

#include "gost/core/backoff.hpp"
#include "gost/core/log.hpp"
#include "gost/core/stats.hpp"
#include "gost/offers/stage.hpp"
#include "gost/v1/events.pb.h"
#include "kafka/group_consumer.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("kafka");

} // namespace

struct after_save_consumer::impl {
  after_save_options opts;
  std::vector<const stage_registry::entry*> hooks; ///< enabled stages that want the events
  // Declared last: stops (and with it the handler) before what the handler uses goes.
  std::unique_ptr<kafka::group_consumer> consumer;

  /// Runs one stage's hook on an event, retrying with a back-off. False when the consumer
  /// stopped before the hook succeeded or gave up (the event must not be marked handled).
  bool run_hook(const stage_registry::entry& e, const v1::OfferSaved& event,
                const stop_signal& stop) {
    auto& stats = *opts.stats;
    backoff delay{std::chrono::milliseconds{100}, std::chrono::milliseconds{5000}};
    for (int failures = 0;;) {
      if (stop.requested())
        return false;
      try {
        e.impl->after_save(event);
        stats.after_save_calls.fetch_add(1, std::memory_order_relaxed);
        return true;
      } catch (const unavailable_error& ex) {
        stats.after_save_failures.fetch_add(1, std::memory_order_relaxed);
        lg->warn("after_save unavailable stage={} offer={} version={} error={}", e.id,
                 event.offer().id(), event.offer().version(), ex.what());
      } catch (const std::exception& ex) {
        stats.after_save_failures.fetch_add(1, std::memory_order_relaxed);
        if (++failures >= opts.attempts) {
          stats.after_save_skipped.fetch_add(1, std::memory_order_relaxed);
          lg->error("after_save gave up stage={} offer={} version={} attempts={} error={}", e.id,
                    event.offer().id(), event.offer().version(), failures, ex.what());
          return true;
        }
        lg->warn("after_save failed stage={} offer={} version={} attempt={} error={}", e.id,
                 event.offer().id(), event.offer().version(), failures, ex.what());
      }
      if (!delay.wait(stop))
        return false;
    }
  }

  /// Every hook in turn; handled when each returned or gave up.
  kafka::verdict handle(const kafka::message_view& m, const stop_signal& stop) {
    v1::OfferSaved event;
    if (!event.ParseFromArray(m.payload.data(), static_cast<int>(m.payload.size()))) {
      lg->error("after_save consumer skipped a message of {} [{}] at offset {}: not a "
                "gost.v1.OfferSaved",
                m.topic, m.partition, m.offset);
      return kafka::verdict::handled;
    }
    for (auto* e : hooks)
      if (!run_hook(*e, event, stop))
        return kafka::verdict::not_handled;
    return kafka::verdict::handled;
  }
};

after_save_consumer::after_save_consumer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

after_save_consumer::~after_save_consumer() = default;

caf::expected<std::unique_ptr<after_save_consumer>>
after_save_consumer::start(after_save_options opts) {
  auto p = std::make_unique<impl>();
  p->opts = std::move(opts);
  for (auto& e : p->opts.stages->all())
    if (e.opts.enabled && e.impl->wants_after_save())
      p->hooks.push_back(&e);
  kafka::consumer_options co;
  co.role = "the after_save consumer";
  co.brokers = p->opts.kafka.brokers;
  co.session_timeout = p->opts.kafka.session_timeout;
  co.group = p->opts.kafka.after_save_group;
  co.group_key = "kafka.after_save_group";
  co.topic = p->opts.kafka.topic;
  co.topic_key = "kafka.topic";
  co.broker = p->opts.broker;
  auto* raw = p.get();
  auto consumer = kafka::make_group_consumer(
    std::move(co),
    [raw](const kafka::message_view& m, const stop_signal& stop) { return raw->handle(m, stop); });
  if (!consumer)
    return std::move(consumer.error());
  p->consumer = std::move(*consumer);
  lg->info("after_save consumer started topic={} group={}", raw->opts.kafka.topic,
           raw->opts.kafka.after_save_group);
  return std::unique_ptr<after_save_consumer>(new after_save_consumer(std::move(p)));
}

} // namespace gost::runtime
