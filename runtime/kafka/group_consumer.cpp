#include "kafka/group_consumer.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "gost/core/dependency.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "kafka/client.hpp"

namespace gost::runtime::kafka {

namespace {

const auto lg = gost::log::get("kafka");

/// The brokers cannot be reached (as opposed to an error of the group or the topic).
bool transport_error(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN
         || err == RD_KAFKA_RESP_ERR__RESOLVE;
}

} // namespace

struct group_consumer::impl {
  /// A batch handed to the handler, until its verdict (set by `done`, from any thread).
  struct in_flight {
    std::vector<message_ptr> messages;
    std::vector<message_view> views; ///< into `messages`: valid while it is held here
    bool settled = false;            ///< under `mtx`
    verdict result = verdict::not_handled;
  };

  consumer_options opts;
  async_batch_handler handler;
  size_t max_batch = 1;
  size_t max_in_flight = 1;
  stop_signal stop;
  client_ptr client;
  std::mutex mtx;
  std::condition_variable settled;                ///< a batch got its verdict
  std::deque<std::shared_ptr<in_flight>> batches; ///< in the order they were read
  /// After a batch not handled: where each partition of it and of the batches behind it is
  /// read again from, once none is in flight (their offsets are not stored).
  std::map<int32_t, int64_t> read_again_from;
  std::thread thread; // joined by ~impl before the client closes

  ~impl() {
    stop.request();
    if (thread.joinable())
      thread.join();
    if (client)
      rd_kafka_consumer_close(client.get()); // commits the stored offsets, leaves the group
  }

  /// The next message, or null (none within `wait`, or an error: reported here).
  message_ptr next(int wait_ms) {
    message_ptr m{rd_kafka_consumer_poll(client.get(), wait_ms)};
    if (!m)
      return m;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (opts.broker && transport_error(m->err))
        opts.broker->failed(rd_kafka_message_errstr(m.get()));
      else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
        lg->warn("{} error={}", opts.role, rd_kafka_message_errstr(m.get()));
      return nullptr;
    }
    if (opts.broker)
      opts.broker->succeeded();
    return m;
  }

  /// Takes the settled batches off the front, in order: a handled one's offsets are stored,
  /// unless a batch before it was not handled — then it is read again with that one.
  void settle(backoff& delay) {
    std::lock_guard<std::mutex> guard{mtx};
    while (!batches.empty() && batches.front()->settled) {
      auto& b = *batches.front();
      if (b.result == verdict::handled && read_again_from.empty()) {
        for (auto& m : b.messages)
          rd_kafka_offset_store(m->rkt, m->partition, m->offset);
        delay.reset();
      } else {
        for (auto& m : b.messages) {
          auto [at, added] = read_again_from.emplace(m->partition, m->offset);
          if (!added)
            at->second = std::min(at->second, m->offset);
        }
      }
      batches.pop_front();
    }
  }

  /// Seeks the partitions of `read_again_from` back after the back-off. Retries until it
  /// succeeds or the consumer stops (going on without it would skip those messages).
  void read_again(backoff& delay) {
    if (!delay.wait(stop))
      return;
    for (;;) {
      partition_list_ptr list{
        rd_kafka_topic_partition_list_new(static_cast<int>(read_again_from.size()))};
      for (auto& [partition, offset] : read_again_from)
        rd_kafka_topic_partition_list_add(list.get(), opts.topic.c_str(), partition)->offset =
          offset;
      auto* err = rd_kafka_seek_partitions(client.get(), list.get(), 5000);
      std::string failed;
      if (err != nullptr) {
        failed = rd_kafka_error_string(err);
        rd_kafka_error_destroy(err);
      }
      for (int i = 0; failed.empty() && i < list->cnt; ++i)
        if (list->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR)
          failed = "partition " + std::to_string(list->elems[i].partition) + ": "
                   + rd_kafka_err2str(list->elems[i].err);
      if (failed.empty()) {
        read_again_from.clear();
        return;
      }
      lg->warn("{} cannot seek back topic={} error={}; retrying", opts.role, opts.topic, failed);
      if (!delay.wait(stop))
        return;
    }
  }

  /// Reads a batch (waiting up to `wait_ms` for its first message) and hands it over.
  void read_batch(int wait_ms) {
    auto first = next(wait_ms);
    if (!first)
      return;
    auto b = std::make_shared<in_flight>();
    b->messages.push_back(std::move(first));
    while (b->messages.size() < max_batch) // what is fetched already, without waiting
      if (auto m = next(0))
        b->messages.push_back(std::move(m));
      else
        break;
    for (auto& m : b->messages)
      b->views.push_back(
        {{static_cast<const char*>(m->payload), m->len}, opts.topic, m->partition, m->offset});
    {
      std::lock_guard<std::mutex> guard{mtx};
      batches.push_back(b);
    }
    handler(b->views, stop, [this, b](verdict v) {
      std::lock_guard<std::mutex> guard{mtx};
      b->result = v;
      b->settled = true;
      settled.notify_all();
    });
  }

  /// Waits (at most 100 ms) until the front batch has its verdict.
  void wait_settled() {
    std::unique_lock<std::mutex> lock{mtx};
    settled.wait_for(lock, std::chrono::milliseconds{100},
                     [&] { return !batches.empty() && batches.front()->settled; });
  }

  void loop() {
    backoff delay{opts.retry_first, opts.retry_cap};
    for (;;) {
      settle(delay);
      size_t held = 0;
      {
        std::lock_guard<std::mutex> guard{mtx};
        held = batches.size();
      }
      if (stop.requested()) {
        if (held == 0)
          return; // what was not handled is read again by the group's next member
        wait_settled();
      } else if (!read_again_from.empty()) {
        if (held == 0) // every batch behind the one not handled settled too
          read_again(delay);
        else
          wait_settled();
      } else if (held >= max_in_flight) {
        wait_settled();
      } else {
        read_batch(held == 0 ? 200 : 10);
      }
    }
  }
};

group_consumer::group_consumer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

group_consumer::~group_consumer() = default;

void group_consumer::request_stop() {
  impl_->stop.request();
}

caf::expected<std::unique_ptr<group_consumer>> make_group_consumer(consumer_options opts,
                                                                   message_handler handler) {
  return make_group_consumer(
    std::move(opts),
    [h = std::move(handler)](const std::vector<message_view>& batch, const stop_signal& stop) {
      return h(batch.front(), stop);
    },
    1);
}

caf::expected<std::unique_ptr<group_consumer>>
make_group_consumer(consumer_options opts, batch_handler handler, size_t max_batch) {
  return make_group_consumer(
    std::move(opts),
    [h = std::move(handler)](const std::vector<message_view>& batch, const stop_signal& stop,
                             const std::function<void(verdict)>& done) { done(h(batch, stop)); },
    max_batch, 1);
}

caf::expected<std::unique_ptr<group_consumer>> make_group_consumer(consumer_options opts,
                                                                   async_batch_handler handler,
                                                                   size_t max_batch,
                                                                   size_t max_in_flight) {
  client_spec spec;
  spec.type = RD_KAFKA_CONSUMER;
  spec.role = opts.role;
  spec.settings = {brokers_setting(opts.brokers),
                   {"group.id", opts.group, opts.group_key},
                   // gost's own choices: at least once by hand (offsets stored after handling,
                   // committed every second), from the start for a new group, and an hour per
                   // message before the group evicts the member.
                   {"auto.offset.reset", "earliest", ""},
                   {"enable.auto.commit", "true", ""},
                   {"enable.auto.offset.store", "false", ""},
                   {"auto.commit.interval.ms", "1000", ""},
                   {"max.poll.interval.ms", "3600000", ""}};
  spec.settings.push_back(
    {"session.timeout.ms", std::to_string(opts.session_timeout.count()), "kafka.session_timeout"});
  spec.settings.insert(spec.settings.end(), opts.settings.begin(), opts.settings.end());
  auto client = make_client(spec);
  if (!client)
    return std::move(client.error());
  rd_kafka_poll_set_consumer(client->get());
  partition_list_ptr topics{rd_kafka_topic_partition_list_new(1)};
  rd_kafka_topic_partition_list_add(topics.get(), opts.topic.c_str(), RD_KAFKA_PARTITION_UA);
  if (auto err = rd_kafka_subscribe(client->get(), topics.get()); err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return make_error(errc::invalid_argument,
                      opts.topic_key + ": " + opts.role + " cannot subscribe to " + opts.topic
                        + ": " + rd_kafka_err2str(err) + "; change " + opts.topic_key);
  auto p = std::make_unique<group_consumer::impl>();
  p->opts = std::move(opts);
  p->handler = std::move(handler);
  p->max_batch = std::max<size_t>(1, max_batch);
  p->max_in_flight = std::max<size_t>(1, max_in_flight);
  p->client = std::move(*client);
  auto* raw = p.get();
  p->thread = std::thread{[raw] { raw->loop(); }};
  return std::make_unique<group_consumer>(std::move(p));
}

} // namespace gost::runtime::kafka
