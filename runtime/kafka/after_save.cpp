#include "kafka/after_save.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include "gost/offers/stage.hpp"
#include "gost/core/stats.hpp"
#include "gost/v1/events.pb.h"
#include "kafka/kafka_consumer.hpp"

namespace gost::runtime {

struct after_save_consumer::impl {
  after_save_options opts;
  rd_kafka_t* rk = nullptr;
  std::atomic<bool> stopping{false};
  std::thread thread;

  ~impl() {
    stopping = true;
    if (thread.joinable())
      thread.join();
    if (rk != nullptr) {
      rd_kafka_consumer_close(rk); // commits the stored offsets, leaves the group
      rd_kafka_destroy(rk);
    }
  }

  /// Sleeps up to `d`, waking early when the consumer stops.
  void pause(std::chrono::milliseconds d) {
    auto until = std::chrono::steady_clock::now() + d;
    while (!stopping && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }

  /// Runs one stage's hook on an event. False when the consumer stopped before it succeeded
  /// or gave up (the event must not be marked handled).
  bool run_hook(const stage_registry::entry& e, const v1::OfferSaved& event) {
    auto& stats = *opts.stats;
    auto backoff = std::chrono::milliseconds{100};
    for (int failures = 0;;) {
      if (stopping)
        return false;
      try {
        e.impl->after_save(event);
        stats.after_save_calls.fetch_add(1, std::memory_order_relaxed);
        return true;
      } catch (const unavailable_error& ex) {
        stats.after_save_failures.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("after_save unavailable stage={} offer={} version={} error={}", e.id,
                     event.offer().id(), event.offer().version(), ex.what());
      } catch (const std::exception& ex) {
        stats.after_save_failures.fetch_add(1, std::memory_order_relaxed);
        if (++failures >= opts.attempts) {
          stats.after_save_skipped.fetch_add(1, std::memory_order_relaxed);
          spdlog::error("after_save gave up stage={} offer={} version={} attempts={} error={}",
                        e.id, event.offer().id(), event.offer().version(), failures, ex.what());
          return true;
        }
        spdlog::warn("after_save failed stage={} offer={} version={} attempt={} error={}", e.id,
                     event.offer().id(), event.offer().version(), failures, ex.what());
      }
      pause(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds{5000});
    }
  }

  void loop() {
    std::vector<const stage_registry::entry*> hooks;
    for (auto& e : opts.stages->all())
      if (e.opts.enabled && e.impl->wants_after_save())
        hooks.push_back(&e);
    while (!stopping) {
      auto* m = rd_kafka_consumer_poll(rk, 200);
      if (m == nullptr)
        continue;
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
          spdlog::warn("after_save consumer error={}", rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
        continue;
      }
      v1::OfferSaved event;
      bool handled = true;
      if (!event.ParseFromArray(m->payload, static_cast<int>(m->len))) {
        spdlog::error("after_save: a message of {} [{}] at offset {} is not a gost.v1.OfferSaved;"
                      " skipped", opts.topic, m->partition, m->offset);
      } else {
        for (auto* e : hooks)
          if (!run_hook(*e, event)) {
            handled = false;
            break;
          }
      }
      if (handled)
        rd_kafka_offset_store(m->rkt, m->partition, m->offset);
      rd_kafka_message_destroy(m);
    }
  }
};

after_save_consumer::after_save_consumer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

after_save_consumer::~after_save_consumer() = default;

std::unique_ptr<after_save_consumer> after_save_consumer::start(after_save_options opts,
                                                                std::string& error) {
  auto* rk = make_group_consumer(opts.brokers, opts.group, opts.topic, error);
  if (rk == nullptr)
    return nullptr;
  auto p = std::make_unique<impl>();
  p->opts = std::move(opts);
  p->rk = rk;
  auto* raw = p.get();
  p->thread = std::thread{[raw] { raw->loop(); }};
  spdlog::info("after_save consumer started topic={} group={}", raw->opts.topic, raw->opts.group);
  return std::unique_ptr<after_save_consumer>(new after_save_consumer(std::move(p)));
}

} // namespace gost::runtime
