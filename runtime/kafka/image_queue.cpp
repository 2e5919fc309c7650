#include "kafka/image_queue.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include <caf/send.hpp>

#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "gost/core/protocol.hpp"
#include "gost/images/pools.hpp"
#include "gost/persistence/images/images.hpp"
#include "gost/v1/images.pb.h"
#include "kafka/group_consumer.hpp"
#include "kafka/producer.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("images");

/// The delivery reports one `enqueue` waits for.
struct delivery_wait {
  std::mutex mtx;
  std::condition_variable cv;
  size_t outstanding = 0;
  std::vector<std::string> errors; ///< per message: empty when the broker has it

  void report(size_t i, const char* error) {
    std::lock_guard<std::mutex> guard{mtx};
    if (error != nullptr)
      errors[i] = error;
    if (--outstanding == 0)
      cv.notify_all();
  }
};

/// One message's opaque: its wait and its index there.
struct delivery_slot {
  delivery_wait* wait = nullptr;
  size_t index = 0;
};

/// A batch of the consumers: at most this many tasks handed to a feeder at once, and at most
/// this many batches of one consumer in the feeder at once (so its pool never waits for the
/// slowest task of a batch, and at most 1,024 tasks wait in memory).
constexpr size_t max_batch = 256;
constexpr size_t max_batches = 4;

} // namespace

struct image_queue::impl {
  image_queue_options opts;
  std::unique_ptr<kafka::producer> producer;
  /// Held shared by each `enqueue` while it produces and waits for its reports; held alone by
  /// the poller to replace a producer in a fatal state.
  std::shared_mutex use;
  /// The producer failed fatally: asks fail at once until the poller has replaced it.
  std::atomic<bool> replacing{false};
  stop_signal stop;
  std::thread poller; // serves the delivery reports, replaces a fatal producer
  std::vector<std::unique_ptr<kafka::group_consumer>> consumers;
  std::vector<images::image_feeder_actor>
    feeders; ///< the consumers' (told to drain when they stop)

  /// Stops the consumers: each stop requested, the feeders' foreign batches answered at once
  /// (a handler waiting for one returns, its offsets not stored), then each joined.
  void stop_consumers() {
    for (auto& c : consumers)
      c->request_stop();
    for (auto& f : feeders)
      caf::anon_send(f, drain_atom_v);
    consumers.clear();
    feeders.clear();
  }

  std::string topic_of(const std::string& function) const {
    return opts.images.kafka_topic_prefix + function;
  }

  ~impl() {
    stop_consumers();
    stop.request();
    if (poller.joinable())
      poller.join();
    producer.reset(); // waits for the outstanding reports (failed ones for what it purges)
  }
};

image_queue::image_queue(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

image_queue::~image_queue() = default;

caf::expected<std::unique_ptr<image_queue>> image_queue::start(image_queue_options opts) {
  kafka::producer_options po;
  po.role = "the image queue's Kafka producer";
  po.settings = {kafka::brokers_setting(opts.kafka.brokers),
                 {"message.timeout.ms", std::to_string(opts.kafka.message_timeout.count()),
                  "kafka.message_timeout"}};
  po.on_delivery = [](void* opaque, const char* error, const char*) {
    auto* slot = static_cast<delivery_slot*>(opaque);
    slot->wait->report(slot->index, error);
  };
  auto made = kafka::producer::make(std::move(po));
  if (!made)
    return std::move(made.error());
  auto p = std::make_unique<impl>();
  p->opts = std::move(opts);
  p->producer = std::make_unique<kafka::producer>(std::move(*made));
  auto* raw = p.get();
  p->poller = std::thread{[raw] {
    while (!raw->stop.requested()) {
      raw->producer->poll(std::chrono::milliseconds{100});
      // An idempotent producer in a fatal state delivers nothing more (every ask would fail
      // until a restart): new asks are refused, and once those in flight got their (failed)
      // reports, a fresh producer takes its place.
      if (!raw->replacing.load() && raw->producer->take_failures() > 0 && raw->producer->fatal())
        raw->replacing = true;
      if (raw->replacing.load()) {
        std::unique_lock<std::shared_mutex> alone{raw->use, std::try_to_lock};
        if (alone.owns_lock()) {
          raw->producer->replace_if_fatal(); // logs the reason and the replacement
          raw->replacing = raw->producer->fatal();
        }
      }
    }
  }};
  return std::unique_ptr<image_queue>{new image_queue{std::move(p)}};
}

caf::error image_queue::enqueue(persistence::pg_pool& pool,
                                const std::vector<persistence::image_request>& reqs) {
  std::shared_lock<std::shared_mutex> in_use{impl_->use};
  if (impl_->replacing.load())
    return make_error(errc::unavailable, "the image queue's Kafka producer failed and is being "
                                         "replaced (images.queue=kafka); ask again");
  // Identical tasks of one call are one message.
  std::map<std::string, const persistence::image_request*> by_key;
  for (auto& r : reqs)
    by_key.emplace(r.key, &r);
  auto written = persistence::write_image_pending(pool, reqs);
  if (!written)
    return std::move(written.error());
  auto asked_at = written->asked_at_us;
  for (auto& key : written->answered) // stored since the asker looked: nothing to compute
    by_key.erase(key);
  if (by_key.empty())
    return {};
  delivery_wait wait;
  wait.outstanding = by_key.size();
  wait.errors.resize(by_key.size());
  std::vector<delivery_slot> slots(by_key.size());
  std::vector<std::string> keys;
  size_t i = 0;
  for (auto& [key, r] : by_key) {
    keys.push_back(key);
    v1::ImageTask t;
    t.set_args(r->task.args);
    t.set_ttl_ms(r->task.ttl_ms);
    t.set_asked_at_us(asked_at);
    slots[i] = {&wait, i};
    if (auto err = impl_->producer->produce(impl_->topic_of(r->task.function), key,
                                            t.SerializeAsString(), &slots[i]))
      wait.report(i, "refused by the local producer (its queue is full or it failed)");
    ++i;
  }
  {
    // Every message gets its report within kafka.message_timeout (librdkafka's promise).
    std::unique_lock<std::mutex> lock{wait.mtx};
    wait.cv.wait(lock, [&] { return wait.outstanding == 0; });
  }
  std::vector<std::string> failed;
  std::string why;
  for (size_t j = 0; j < keys.size(); ++j)
    if (!wait.errors[j].empty()) {
      failed.push_back(keys[j]);
      why = wait.errors[j];
    }
  if (failed.empty())
    return {};
  if (auto err = persistence::undo_image_pending(pool, failed, asked_at))
    lg->warn("pending image statuses not removed after Kafka refused their tasks count={} "
             "error={}; they are answered PENDING until images.ttl",
             failed.size(), error_message(err));
  return make_error(errc::unavailable, "the image queue (Kafka, images.queue=kafka) did not take "
                                         + std::to_string(failed.size()) + " of "
                                         + std::to_string(keys.size()) + " tasks: " + why
                                         + "; check kafka.brokers and ask again");
}

caf::error
image_queue::consume(caf::actor_system& sys,
                     const std::map<images::function, images::image_feeder_actor>& feeders,
                     std::chrono::milliseconds batch_timeout) {
  for (auto& [fn, feeder] : feeders) {
    std::string name = images::to_string(fn);
    kafka::consumer_options co;
    co.role = "the image queue's consumer of " + name;
    co.brokers = impl_->opts.kafka.brokers;
    co.session_timeout = impl_->opts.kafka.session_timeout;
    co.group = impl_->opts.images.kafka_group + "." + name;
    co.group_key = "images.kafka.group";
    co.topic = impl_->topic_of(name);
    co.topic_key = "images.kafka.topic_prefix";
    // The topic is made on first use where the brokers allow it (else an operator makes it).
    co.settings = {{"allow.auto.create.topics", "true", ""}};
    co.broker = impl_->opts.broker;
    auto partitions = impl_->opts.partitions;
    auto handler = [&sys, fn = fn, feeder = feeder, partitions, batch_timeout,
                    name](const std::vector<kafka::message_view>& batch, const stop_signal& stop,
                          const std::function<void(kafka::verdict)>& done) {
      if (stop.requested())
        return done(kafka::verdict::not_handled);
      std::vector<persistence::image_task> tasks;
      for (auto& m : batch) {
        v1::ImageTask t;
        if (!t.ParseFromArray(m.payload.data(), static_cast<int>(m.payload.size()))
            || t.args().empty()) {
          lg->warn("undecodable image task skipped topic={} partition={} offset={}", m.topic,
                   m.partition, m.offset);
          continue;
        }
        images::task_key key{fn, t.args()};
        persistence::image_task task;
        task.function = name;
        task.partition = key.partition(partitions);
        task.args = t.args();
        task.ttl_ms = t.ttl_ms();
        task.created_at_us = t.asked_at_us();
        task.in_table = false;
        tasks.push_back(std::move(task));
      }
      if (tasks.empty())
        return done(kafka::verdict::handled);
      auto n = tasks.size();
      images::run_foreign_tasks_async(
        sys, feeder, std::move(tasks), batch_timeout,
        [done, name, n](caf::expected<images::foreign_counts> counts) {
          if (!counts) {
            lg->warn("image tasks from Kafka not stored function={} count={} error={}; reading "
                     "them again",
                     name, n, error_message(counts.error()));
            return done(kafka::verdict::not_handled);
          }
          lg->debug("image tasks from Kafka function={} run={} skipped={}", name, counts->run,
                    counts->skipped);
          done(kafka::verdict::handled);
        });
    };
    auto consumer =
      kafka::make_group_consumer(std::move(co), std::move(handler), max_batch, max_batches);
    if (!consumer)
      return std::move(consumer.error());
    impl_->consumers.push_back(std::move(*consumer));
    impl_->feeders.push_back(feeder);
  }
  return {};
}

void image_queue::stop_consuming() {
  impl_->stop_consumers();
}

void image_queue::test_fatal_error() {
  std::shared_lock<std::shared_mutex> in_use{impl_->use};
  impl_->producer->test_fatal_error();
}

} // namespace gost::runtime
